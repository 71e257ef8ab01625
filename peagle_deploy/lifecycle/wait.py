"""Waiting for InService with adaptive polling and progress.

botocore's `endpoint_in_service` waiter polls every 30 s with no progress callback; a deploy that
turns InService is noticed here within a few seconds instead, and sleep/clock are injectable so
tests never really wait.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..errors import EndpointFailed, WaitTimeout

Progress = Callable[[str, float, str], None]
WAITING = {"Creating", "Updating", "SystemUpdating", "OutOfService", "UpdateRollbackFailed"}


def log_group(name: str) -> str:
    return f"/aws/sagemaker/Endpoints/{name}"


def doing(status: str, elapsed: float) -> str:
    """What SageMaker is most likely doing, for the progress line."""
    if status != "Creating":
        return status
    if elapsed < 120:
        return "provisioning the GPU instance"
    if elapsed < 600:
        return "downloading model weights and the drafter, starting the container"
    return "loading the model in vLLM (health checks allow up to the startup timeout)"


def poll_intervals(first: float = 2.0, factor: float = 1.5, cap: float = 30.0):
    delay = first
    while True:
        yield delay
        delay = min(cap, delay * factor)


def wait_in_service(sm: Any, name: str, *, timeout_s: float, sleep: Callable[[float], None],
                    clock: Callable[[], float], on_progress: Progress | None = None) -> dict[str, Any]:
    start = clock()
    for delay in poll_intervals():
        described = sm.describe_endpoint(EndpointName=name)
        status = described["EndpointStatus"]
        elapsed = clock() - start
        if on_progress:
            on_progress(status, elapsed, doing(status, elapsed))
        if status == "InService":
            return described
        if status not in WAITING:
            reason = described.get("FailureReason") or "no reason given"
            raise EndpointFailed(f"endpoint {name} is {status}: {reason}",
                                 f"container logs: CloudWatch log group {log_group(name)}")
        if elapsed >= timeout_s:
            raise WaitTimeout(
                f"endpoint {name} still {status} after {int(elapsed)}s",
                f"keep waiting with 'aws sagemaker wait endpoint-in-service --endpoint-name {name}' "
                f"(deploy with --keep-on-failure to keep it), or remove it with 'peagle cleanup {name} --yes'",
            )
        sleep(min(delay, max(0.0, timeout_s - elapsed)) or delay)
    raise AssertionError("unreachable")
