"""botocore's data files parsed once per test process instead of once per boto3 session.

Every `AwsSession` (and the SageMaker SDK's own sessions, and moto) builds a new botocore session whose
loader parses the service models again: SageMaker's alone is 2.6 MB of JSON, about 0.1 s a parse on a
loaded machine, and an in-process deploy builds several sessions. botocore already shares one parsed
model between all clients of one session (its loader's instance cache), so sharing it between sessions
of one process changes nothing it relies on; the files are the installed package's, read by full path.
Each new session's loader also lists its data folders again before loading a model (every service folder and
its API versions: about 2,000 directory reads, 18% of the CPU of the in-process update tests): the listings
are shared too, keyed by the loader's search paths (a different HOME or AWS_DATA_PATH lists anew).

Used by conftest (the pytest process) and the fork server (tests/peagle_forkserver.py). The installed
executable, and so the tests that run it, keep botocore as it is.
"""

from __future__ import annotations

import threading

_lock = threading.Lock()
_shared: dict[str, object] = {}


def share_botocore_data() -> None:
    from botocore.loaders import JSONFileLoader

    if getattr(JSONFileLoader.load_file, "shared", False):
        return
    parse = JSONFileLoader.load_file

    def load_file(self, file_path):
        with _lock:
            if file_path in _shared:
                return _shared[file_path]
        data = parse(self, file_path)
        if data is not None:
            with _lock:
                data = _shared.setdefault(file_path, data)
        return data

    load_file.shared = True
    JSONFileLoader.load_file = load_file
    _share_listings()


def _share_listings() -> None:
    from botocore.loaders import Loader

    for name in ("list_available_services", "list_api_versions"):
        listing = getattr(Loader, name)

        def shared(self, *args, _listing=listing, _name=name, **kwargs):
            key = (_name, tuple(self.search_paths), args, tuple(sorted(kwargs.items())))
            with _lock:
                if key in _shared:
                    return list(_shared[key])
            found = _listing(self, *args, **kwargs)
            with _lock:
                _shared.setdefault(key, list(found))
            return list(found)

        setattr(Loader, name, shared)


# the services peagle's commands call (grep 'client("' peagle_deploy) and the emulator's seeding uses
PEAGLE_SERVICES = ("sagemaker", "sagemaker-runtime", "application-autoscaling", "logs", "pricing", "sts", "s3",
                   "service-quotas", "cloudwatch", "iam")


def preload(services: tuple[str, ...] = PEAGLE_SERVICES) -> None:
    """Parse the services' data files now (a client each: its model, endpoint rules, retry and default
    configuration; and their waiters and paginators), through peagle's own AwsSession, so the loader it keeps for
    this process (peagle_deploy/aws.py) holds them: a fork server's children then find them parsed instead of
    spending 0.1-0.5 s each on SageMaker's model. Needs share_botocore_data() first; makes no request."""
    from peagle_deploy.aws import AwsSession

    session = AwsSession("us-east-1")
    for service in services:
        client = session.client(service)
        client.waiter_names  # noqa: B018 - loads the waiter model
        client.can_paginate(next(iter(client.meta.method_to_api_mapping)))  # loads the paginator model
