"""botocore's data files parsed once per test process instead of once per boto3 session.

Every `AwsSession` (and the SageMaker SDK's own sessions, and moto) builds a new botocore session whose
loader parses the service models again: SageMaker's alone is 2.6 MB of JSON, about 0.1 s a parse on a
loaded machine, and an in-process deploy builds several sessions. botocore already shares one parsed
model between all clients of one session (its loader's instance cache), so sharing it between sessions
of one process changes nothing it relies on; the files are the installed package's, read by full path.
Each new session's loader also lists its data folders again before loading a model (every service folder and
its API versions: about 2,000 directory reads, 18% of the CPU of the in-process update tests): the listings
are shared too, keyed by the loader's search paths (a different HOME or AWS_DATA_PATH lists anew).

Every client botocore creates also builds its class's methods anew, one per operation of the service, each with
its documentation object (SageMaker: about 400, half of the 20 ms a SageMaker client costs; an in-process `peagle
status` creates five clients): the methods of one parsed service model are built once and shared by the classes
of every client of it. They only name the operation they call (the client's own service model, endpoint and
handlers do the rest), and each client's class is still built for it, with its session's own class handlers.
And every new botocore session registers its ~130 built-in handlers, for each of which botocore reads the
function's signature (`inspect.getfullargspec`: does it take **kwargs?) and works out the event name's aliases
again: both answers depend only on the function's code and the event name, and are kept for the process.

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
    _share_client_methods()
    _share_handler_checks()


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


def _share_client_methods() -> None:
    from botocore.client import ClientCreator

    build = ClientCreator._create_methods

    def create_methods(self, service_model):
        description = service_model._service_description  # one parsed model per file (share_botocore_data)
        key = ("client methods", service_model.service_name, id(description))
        with _lock:
            kept = _shared.get(key)
        if kept is None or kept[0] is not description:
            kept = (description, build(self, service_model))
            with _lock:
                _shared[key] = kept
        return dict(kept[1])  # botocore's class handlers may add to it: each class gets its own copy

    ClientCreator._create_methods = create_methods


def _share_handler_checks() -> None:
    from botocore import hooks

    takes_kwargs = hooks.accepts_kwargs

    def accepts_kwargs(func):
        code = getattr(getattr(func, "__func__", func), "__code__", None)  # a function or a bound method
        if code is None:
            return takes_kwargs(func)
        key = ("accepts kwargs", code)
        with _lock:
            if key in _shared:
                return _shared[key]
        found = takes_kwargs(func)
        with _lock:
            _shared[key] = found
        return found

    hooks.accepts_kwargs = accepts_kwargs
    aliases: dict[str, str] = {}  # event name -> its name after botocore's default aliases (EVENT_ALIASES)
    init = hooks.EventAliaser.__init__

    def aliaser_init(self, event_emitter, event_aliases=None):
        init(self, event_emitter, event_aliases)
        if self._event_aliases == hooks.EVENT_ALIASES:  # the default, or a copy of it (a client's emitter)
            self._alias_name_cache = aliases

    hooks.EventAliaser.__init__ = aliaser_init


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
