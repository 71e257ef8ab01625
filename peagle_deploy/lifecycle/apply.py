"""Executing a DeploymentPlan: checks first, then create, wait, verify; roll back on any failure."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from pydantic import BaseModel, Field

from ..aws import error_code, error_message, translate_error
from ..errors import EndpointFailed, ExitCode, Interrupted, PeagleError, UsageError
from ..plan import DeploymentPlan
from .quota import check_quota
from .teardown import Outcome, delete_stack
from .verify import Check, require, verify
from .wait import Progress, wait_in_service

_CREATES = (("model", "create_model", "describe_model", "ModelName"),
            ("endpoint_config", "create_endpoint_config", "describe_endpoint_config", "EndpointConfigName"),
            ("endpoint", "create_endpoint", "describe_endpoint", "EndpointName"))


class DeployResult(BaseModel):
    endpoint_name: str
    region: str
    status: str
    elapsed_s: float
    verification: list[Check] = Field(default_factory=list)
    notes: list[str] = Field(default_factory=list)


def cleanup_command(plan: DeploymentPlan) -> str:
    return f"peagle cleanup {plan.endpoint_name} --region {plan.region} --yes"


def _refuse_existing(sm: Any, plan: DeploymentPlan) -> None:
    from .errors import is_not_found

    for kind, _, describe, key in _CREATES:
        try:
            getattr(sm, describe)(**{key: plan.endpoint_name})
        except Exception as exc:
            if is_not_found(exc):
                continue
            raise
        raise UsageError(f"a SageMaker {kind.replace('_', ' ')} named {plan.endpoint_name!r} already exists",
                         "choose another --name, or remove the old one with peagle cleanup (peagle's own only)")


def _as_peagle_error(exc: BaseException) -> PeagleError:
    if isinstance(exc, PeagleError):
        return exc
    if isinstance(exc, KeyboardInterrupt):
        return Interrupted("interrupted")
    translated = translate_error(exc)
    if translated is not None and translated.exit_code != ExitCode.UNEXPECTED:
        return translated  # credentials (3), quota (4)
    if error_code(exc):
        return EndpointFailed(f"SageMaker call failed ({error_code(exc)}): {error_message(exc)}")
    return EndpointFailed(f"{type(exc).__name__}: {exc}")


def _fail(exc: BaseException, sm: Any, plan: DeploymentPlan, created: list[str], keep: bool) -> PeagleError:
    error = _as_peagle_error(exc)
    if not created:
        return error
    kinds = ", ".join(k.replace("_", " ") for k in created)
    if keep:
        error.hint = (error.hint + "; " if error.hint else "") + \
            f"kept {kinds} {plan.endpoint_name!r} (--keep-on-failure): remove with '{cleanup_command(plan)}'"
        return error
    try:
        outcomes: list[Outcome] = delete_stack(sm, plan.endpoint_name, wait=True)
        left = [o for o in outcomes if o.result == "left"]
    except BaseException:  # noqa: BLE001 - the rollback itself failed: say exactly what to run
        left = created
    if left:
        error.hint = (error.hint + "; " if error.hint else "") + \
            f"rollback incomplete: remove what is left with '{cleanup_command(plan)}'"
    else:
        error.hint = (error.hint + "; " if error.hint else "") + f"rolled back: {kinds} deleted"
    return error


def deploy(plan: DeploymentPlan, session: Any, *, wait: bool = True, timeout_s: float = 3600,
           keep_on_failure: bool = False, on_progress: Progress | None = None,
           on_note: Callable[[str], None] | None = None, sleep: Callable[[float], None] = time.sleep,
           clock: Callable[[], float] = time.monotonic) -> DeployResult:
    """Create the plan's model, endpoint config and endpoint; wait and verify when `wait`."""
    if "ExecutionRoleArn" not in plan.create_model:
        raise UsageError("a real deploy needs an execution role", "pass --role arn:aws:iam::<account>:role/<name>")
    if session.region != plan.region:
        raise UsageError(f"the plan is for {plan.region}, the session for {session.region}", "build the plan again")
    note = on_note or (lambda _msg: None)
    session.check_credentials()
    notes = [check_quota(session, plan.instance_type, plan.instance_count)]
    note(notes[-1])
    sm = session.client("sagemaker")
    _refuse_existing(sm, plan)
    created: list[str] = []
    start = clock()
    try:
        for kind, create, _, _ in _CREATES:
            getattr(sm, create)(**getattr(plan, create))
            created.append(kind)
            note(f"created {kind.replace('_', ' ')} {plan.endpoint_name}")
        if not wait:
            return DeployResult(endpoint_name=plan.endpoint_name, region=plan.region, status="Creating",
                                elapsed_s=clock() - start, notes=notes)
        described = wait_in_service(sm, plan.endpoint_name, timeout_s=timeout_s, sleep=sleep, clock=clock,
                                    on_progress=on_progress)
        checks = verify(sm, plan, session.client("logs"), sleep=sleep)
        require(checks)
    except BaseException as exc:  # noqa: BLE001 - includes KeyboardInterrupt: nothing billable is left behind
        raise _fail(exc, sm, plan, created, keep_on_failure) from None
    return DeployResult(endpoint_name=plan.endpoint_name, region=plan.region, status=described["EndpointStatus"],
                        elapsed_s=clock() - start, verification=checks, notes=notes)
