"""peagle's own modules, imported by the fork server before it forks (tests/peagle_forkserver.py).

A command imports what it runs inside its function (so `peagle --help` stays light): without this each
forked child imported, and with PYTHONDONTWRITEBYTECODE compiled, its command's modules again (60 of the 85
ms of CPU of a refused `deploy --k 0`). Importing them once in the server is what the executable does at run
time, minus the time: only modules that read no environment at import qualify, which
`test_harness.py::test_the_fork_servers_peagle_imports_read_no_environment` checks (the SDK's JumpStart
modules, which do, are imported by peagle only inside functions, and so by each child itself).
Not preloaded: `peagle_deploy.testing` (the suite's emulators, never a command's) and `__main__` modules
(the container's entrypoint runs when imported).
"""

from __future__ import annotations

import importlib
import pkgutil


def peagle_modules() -> list[str]:
    import peagle_deploy

    return [m.name for m in pkgutil.walk_packages(peagle_deploy.__path__, "peagle_deploy.")
            if not m.name.startswith("peagle_deploy.testing") and not m.name.endswith(".__main__")]


def import_peagle() -> None:
    for name in peagle_modules():
        importlib.import_module(name)
