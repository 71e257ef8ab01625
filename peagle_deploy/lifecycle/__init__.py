"""The deploy lifecycle as a Python API; the CLI is a thin layer over these functions."""

from .apply import DeployResult, cleanup_command, deploy
from .inventory import EndpointStatus, status
from .teardown import CleanupReport, cleanup
from .verify import Check, verify

__all__ = ["Check", "CleanupReport", "DeployResult", "EndpointStatus", "cleanup", "cleanup_command", "deploy",
           "status", "verify"]
