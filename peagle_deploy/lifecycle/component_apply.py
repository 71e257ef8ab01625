"""Deploying a plan that hosts the model as an inference component (`--hosting component`, `--scale-to-zero`).

In order: CreateModel, CreateEndpointConfig (instances only), CreateEndpoint; the endpoint InService;
CreateInferenceComponent (SageMaker takes one only on an endpoint in service); the component InService (Failed:
its FailureReason); verification as for a classic endpoint (the model's speculative config and drafter channel,
the instance type; vLLM's start-up lines from the component's log group) and of the component (the model it names,
the GPUs and memory of a copy); then its scaling: the scalable target, the policies, the alarms (each alarm with
its policy's ARN), as classic autoscaling comes after verification.

Every failure, signal or lost answer at any step rolls back what this deploy made, components first: the scaling
and peagle's alarms, the component (waited for until it is gone), then the endpoint, config and model
(`apply._Rollback`, whose reconciling of lost answers applies to the component too), or names the exact command.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from contextlib import nullcontext
from typing import Any

from ..errors import UsageError
from ..plan import DeploymentPlan
from .apply import _CREATES, DeployResult, _as_peagle_error, _create, _refuse_existing, _Rollback, watch_acceptance
from ..log_groups import component_log_group
from .components import (
    apply_scaling,
    by_hand_component,
    describe_component,
    remove_component,
    wait_component,
)
from .lease import LeaseHolder
from .quota import check_quota
from .signals import SignalGuard
from .teardown import Outcome
from .verify import Check, require, startup_check, verify
from .wait import Progress, component_capacity_hint, read_retrying, wait_in_service

COMPONENT_CREATE = ("inference_component", "create_inference_component", "CreateInferenceComponent")
ROLLBACK_WAIT_S, HURRIED_WAIT_S = 900.0, 300.0  # a component's deletion, before its endpoint may go


class _ComponentRollback(_Rollback):
    """A classic rollback, with the component and its scaling removed first."""

    creates = (*_CREATES, COMPONENT_CREATE)

    def __init__(self, sm: Any, plan: DeploymentPlan, sleep: Callable[[float], None], aas: Any, cloudwatch: Any,
                 clock: Callable[[], float]):
        super().__init__(sm, plan, sleep, aas)
        self.cloudwatch, self.clock = cloudwatch, clock

    def _undo(self, hurry: bool) -> list[Outcome]:
        first: list[Outcome] = []
        if self.touched("inference_component") or self.touched("scaling"):
            for _ in range(3 if "inference_component" in self.lost else 0):  # a lost create may land a moment later
                if self._exists("inference_component"):
                    break
                self.sleep(1.0)
            first = remove_component(self.sm, self.scaling, self.cloudwatch, self.plan.inference_component_name,
                                     created_at=self.plan.created_at, owned=True,
                                     wait_s=HURRIED_WAIT_S if hurry else ROLLBACK_WAIT_S, sleep=self.sleep,
                                     clock=self.clock)
            if any(o.kind == "inference_component" and o.result == "failed" for o in first):
                return first  # the endpoint must wait for its component: the cleanup command finishes both
        return first + super()._undo(hurry)

    def _exists(self, kind: str) -> bool:
        if kind == "inference_component":
            return describe_component(self.sm, self.plan.inference_component_name) is not None
        return super()._exists(kind)


def deploy_component(plan: DeploymentPlan, session: Any, *, wait: bool = True, timeout_s: float = 3600,
                     keep_on_failure: bool = False, on_progress: Progress | None = None,
                     on_note: Callable[[str], None] | None = None, sleep: Callable[[float], None] = time.sleep,
                     clock: Callable[[], float] = time.monotonic, handle_signals: bool = True,
                     lease: LeaseHolder | None = None) -> DeployResult:
    """`lifecycle.deploy` of a plan whose hosting is component (see the module docstring); its creates carry the
    deploy's lease as `apply.deploy_endpoint`'s do (`lease`: a sweep's, kept after the deploy)."""
    if "ExecutionRoleArn" not in plan.create_model:
        raise UsageError("a real deploy needs an execution role", "pass --role arn:aws:iam::<account>:role/<name>")
    if not wait:
        raise UsageError("an inference component is created once its endpoint is InService, so the deploy must wait",
                         "deploy with wait=True (the CLI: drop --no-wait)")
    if session.region != plan.region:
        raise UsageError(f"the plan is for {plan.region}, the session for {session.region}", "build the plan again")
    if plan.inference_component_name != plan.endpoint_name:
        raise ValueError("a component that joins a host endpoint is deployed by the sweep on components "
                         "(sweep/component_runner.py), not with its own endpoint")
    note = on_note or (lambda _msg: None)
    name = plan.inference_component_name
    holder = lease or LeaseHolder(None, "deploy")  # its client below, once there is one
    with SignalGuard("rolling back what this deploy created", enabled=handle_signals) as guard, \
            nullcontext() if lease is not None else holder:
        try:
            session.check_credentials()
            notes = [check_quota(session, plan.instance_type, plan.instance_count)]
            note(notes[-1])
            sm = session.client("sagemaker")
            holder.sm = holder.sm or sm
            _refuse_existing(sm, plan)
            if describe_component(sm, name) is not None:
                raise UsageError(f"a SageMaker inference component named {name!r} already exists",
                                 "choose another --name, or remove the old one with peagle cleanup (peagle's own "
                                 "only)")
        except KeyboardInterrupt as exc:
            raise _Rollback(None, plan, sleep).run(_as_peagle_error(exc), keep=False, hurry=True) from None
        aas, cloudwatch = session.client("application-autoscaling"), session.client("cloudwatch")
        rollback = _ComponentRollback(sm, plan, sleep, aas, cloudwatch, clock)
        start = clock()
        created_ms = int(time.time() * 1000)  # start-up lines before this are an earlier component's of that name
        arns: dict[str, str] = {}
        try:
            for kind, field, call in _CREATES:
                _create(sm, guard, rollback, kind, field, call, plan, holder)
                note(f"created {kind.replace('_', ' ')} {plan.endpoint_name}")
            wait_in_service(sm, plan.endpoint_name, timeout_s=timeout_s, sleep=sleep, clock=clock,
                            on_progress=on_progress, capacity_hint=component_capacity_hint(plan.instance_type))
            _create(sm, guard, rollback, *COMPONENT_CREATE, plan, holder)
            note(f"created inference component {name}")
            described = wait_component(sm, name, timeout_s=max(0.0, timeout_s - (clock() - start)), sleep=sleep,
                                       clock=clock, on_progress=on_progress)
            read = lambda call: read_retrying(call, sleep=sleep)  # noqa: E731
            checks = verify(sm, plan, None, sleep=sleep, read=read)
            checks.append(component_check(plan, described))
            checks.append(component_startup(session.client("logs"), plan, sleep=sleep, since_ms=created_ms))
            require(checks)
            if plan.component_requests:
                rollback.created.append("scaling")  # removal reads what exists: a lost answer is found too
                arns = apply_scaling(aas, cloudwatch, plan.component_requests, critical=guard.critical)
                note(f"scaling on: {', '.join(r.title.split(' (')[0] + ' ' + _what(r) for r in plan.component_requests)}")
            watching = watch_acceptance(session, plan, guard, rollback, note)
        except BaseException as exc:  # noqa: BLE001 - includes signals: nothing billable is left unknown
            error = _as_peagle_error(exc)
            raise rollback.run(error, keep=keep_on_failure and not guard.signalled,
                               hurry=guard.signalled or isinstance(exc, KeyboardInterrupt)) from None
    return DeployResult(endpoint_name=plan.endpoint_name, region=plan.region,
                        status=described.get("InferenceComponentStatus", "InService"), elapsed_s=clock() - start,
                        verification=checks, notes=notes, inference_component=name, component_policies=arns,
                        acceptance_alarm=watching)


def _what(request: Any) -> str:
    body = request.body
    return body.get("PolicyName") or body.get("AlarmName") or body.get("ResourceId", "")


def component_check(plan: DeploymentPlan, described: dict[str, Any]) -> Check:
    """The component as SageMaker holds it: the model it names and what one copy takes, against the plan."""
    planned = plan.create_inference_component["Specification"]
    held = described.get("Specification") or {}
    keys = ("NumberOfAcceleratorDevicesRequired", "MinMemoryRequiredInMb")
    expected = {"ModelName": planned["ModelName"],
                **{k: planned["ComputeResourceRequirements"].get(k) for k in keys}}
    actual = {"ModelName": held.get("ModelName"),
              **{k: (held.get("ComputeResourceRequirements") or {}).get(k) for k in keys}}
    same = actual["ModelName"] == expected["ModelName"] and all(
        actual[k] is not None and float(actual[k]) == float(expected[k]) for k in keys)
    return Check.compare("inference component", same, expected=expected, actual=actual)


def component_startup(logs: Any, plan: DeploymentPlan, *, sleep: Callable[[float], None],
                      since_ms: int | None = None) -> Check:
    """What vLLM logged at start in the component's log group (/aws/sagemaker/InferenceComponents/NAME, a stream
    per copy) against the plan's speculative config; missing or lagging logs are 'not verified'."""
    from .startup_log import read_cloudwatch

    group = component_log_group(plan.inference_component_name)
    expected = json.loads(plan.speculative_config) if plan.speculative_config else None
    info = read_cloudwatch(logs, plan.endpoint_name, expected=expected, sleep=sleep, start_ms=since_ms, group=group)
    return startup_check(info, expected, how_to_check=by_hand_component(plan.inference_component_name, plan.region))


__all__ = ["component_check", "component_startup", "deploy_component"]
