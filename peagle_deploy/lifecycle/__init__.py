"""The deploy lifecycle as a Python API; the CLI is a thin layer over these functions.

Names are imported from their modules on first use (PEP 562), so `peagle status` does not pay for the
deploy and plan modules it never runs. (`verify` is also a submodule's name: once that module has been
imported, `peagle_deploy.lifecycle.verify` is the module; import the function from it.)
"""

from __future__ import annotations

import importlib
from typing import Any

_WHERE = {"DeployResult": "apply", "cleanup_command": "apply", "deploy": "deploying", "EndpointStatus": "inventory",
          "status": "inventory", "report": "inventory", "CleanupReport": "teardown", "cleanup": "teardown",
          "Check": "verify", "verify": "verify"}

__all__ = sorted(_WHERE)


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value
