"""Waiting for InService with adaptive polling and progress.

botocore's `endpoint_in_service` waiter polls every 30 s with no progress callback; a deploy that
turns InService is noticed here within a few seconds instead, and sleep/clock are injectable so
tests never really wait.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from typing import Any, TypeVar

from ..aws import is_not_found, is_transient, translate_error
from ..clock import POLL_ENV, poll_intervals  # noqa: F401 - the one poll setting (runtime/waking.py reads it too)
from ..errors import EndpointFailed, QuotaError, WaitTimeout
from ..log_groups import endpoint_log_group
from ..pools import is_capacity_failure

T = TypeVar("T")
READ_ATTEMPTS = 6  # on top of botocore's own retries: a read failure is never an endpoint failure

Progress = Callable[[str, float, str], None]
# UpdateRollbackFailed is an end state: the update and its rollback both failed, the endpoint serves a mix of
# the two configurations until someone updates it again; waiting longer would only run into the timeout.
WAITING = {"Creating", "Updating", "SystemUpdating", "OutOfService"}


def progress_text(status: str, elapsed: float, doing: str) -> str:
    """'Creating (40s) - provisioning the GPU instance'; 'InService (0s)' (never 'InService - InService')."""
    return f"{status} ({int(elapsed)}s)" + (f" - {doing}" if doing and doing != status else "")


def doing(status: str, elapsed: float) -> str:
    """What SageMaker is most likely doing, for the progress line."""
    if status != "Creating":
        return status
    if elapsed < 120:
        return "provisioning the GPU instance"
    if elapsed < 600:
        return "downloading model weights and the drafter, starting the container"
    return "loading the model in vLLM (health checks allow up to the startup timeout)"


CAPACITY_HINT = ("SageMaker found no capacity for the instance types in this region: try again later, list more "
                 "--instance-type values in priority order (instance pools), or use a capacity reservation "
                 "(docs/capacity.md)")


def read_retrying(call: Callable[[], T], *, sleep: Callable[[float], None], attempts: int = READ_ATTEMPTS) -> T:
    """`call()` (a describe), asked again with back-off while it fails transiently (throttling, 5xx, a dropped
    connection). Anything else, or the last failure, raises as it came."""
    for attempt, delay in enumerate(poll_intervals(first=1.0, factor=2.0, cap=20.0), start=1):
        try:
            return call()
        except Exception as exc:
            if attempt >= attempts or not is_transient(exc):
                raise
            sleep(delay)
    raise AssertionError("unreachable")


def poll_until_in_service(describe: Callable[[], dict[str, Any]], *, what: str,
                          status_of: Callable[[dict[str, Any]], str], waiting: Collection[str],
                          doing: Callable[[str, float], str], failed: Callable[[str, str], Exception],
                          timeout_hint: Callable[[dict[str, Any]], str], timeout_s: float,
                          sleep: Callable[[float], None], clock: Callable[[], float],
                          on_progress: Progress | None = None, report_misses: bool = True) -> dict[str, Any]:
    """The poll behind every wait for InService: `describe()` until `status_of` its answer is InService (returns
    the answer), a status outside `waiting` (raises `failed(status, reason)`) or the timeout on `clock`
    (WaitTimeout naming `what`, with `timeout_hint`). A poll that fails transiently is a missed poll, not a
    failure (reported as status "Unknown" when `report_misses`); READ_ATTEMPTS in a row give up with the AWS
    error's own exit code; NotFound means someone deleted `what`."""
    start = clock()
    misses = 0
    for delay in poll_intervals():
        try:
            described = describe()
            misses = 0
        except Exception as exc:
            if is_not_found(exc):
                raise EndpointFailed(f"{what} disappeared while peagle waited for it",
                                     "someone deleted it; see CloudTrail for who") from None
            misses += 1
            if not is_transient(exc) or misses >= READ_ATTEMPTS:
                raise (translate_error(exc) or exc) from None
            if report_misses:
                elapsed = clock() - start
                if on_progress:
                    on_progress("Unknown", elapsed, f"could not read the status ({type(exc).__name__}); asking again")
            sleep(delay)
            continue
        status = status_of(described)
        elapsed = clock() - start
        if on_progress:
            on_progress(status, elapsed, doing(status, elapsed))
        if status == "InService":
            return described
        if status not in waiting:
            raise failed(status, described.get("FailureReason") or "no reason given")
        if elapsed >= timeout_s:
            raise WaitTimeout(f"{what} still {status} after {int(elapsed)}s", timeout_hint(described))
        sleep(min(delay, max(0.0, timeout_s - elapsed)) or delay)
    raise AssertionError("unreachable")


def component_capacity_hint(instance_type: str) -> str:
    """What a component deploy that met no capacity can do: it runs on one instance type (no instance pools, no
    reservation: plan_pools.check_pool_request refuses both), so another type or region, or later."""
    from ..instances import instance_table

    sizes = list(instance_table().instances)
    larger = sizes[sizes.index(instance_type) + 1] if instance_type in sizes[:-1] else None
    other = f"--instance-type {larger}" if larger else "another --instance-type"
    return (f"SageMaker found no {instance_type} capacity in this region: try again later, or pass {other} or "
            "another --region (an inference component runs on one instance type: no instance pools or capacity "
            "reservation; docs/capacity.md)")


def wait_in_service(sm: Any, name: str, *, timeout_s: float, sleep: Callable[[float], None],
                    clock: Callable[[], float], on_progress: Progress | None = None,
                    capacity_hint: str = CAPACITY_HINT) -> dict[str, Any]:
    """Poll until InService (returns the description), Failed (EndpointFailed; QuotaError with `capacity_hint` when
    SageMaker found no capacity) or the timeout (WaitTimeout). A poll that fails transiently is a missed poll, not a
    failure; READ_ATTEMPTS in a row give up with the AWS error's own exit code (never 'endpoint failed')."""

    def failed(status: str, reason: str) -> Exception:
        if is_capacity_failure(reason):  # no instance to be had, of any type listed: capacity, exit 4
            return QuotaError(f"endpoint {name} is {status}: {reason}", capacity_hint)
        return EndpointFailed(f"endpoint {name} is {status}: {reason}",
                              f"see why with 'peagle logs {name}' (CloudWatch log group {endpoint_log_group(name)})")

    return poll_until_in_service(
        lambda: sm.describe_endpoint(EndpointName=name), what=f"endpoint {name}",
        status_of=lambda described: described["EndpointStatus"], waiting=WAITING, doing=doing, failed=failed,
        timeout_hint=lambda _described: (
            f"keep waiting with 'aws sagemaker wait endpoint-in-service --endpoint-name {name}' "
            f"(deploy with --keep-on-failure to keep it), or remove it with 'peagle cleanup {name} --yes'"),
        timeout_s=timeout_s, sleep=sleep, clock=clock, on_progress=on_progress)
