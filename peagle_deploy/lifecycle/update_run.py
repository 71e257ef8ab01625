"""`peagle update NAME`, its run: the writes of an `UpdatePlan` (lifecycle/update_plan.py), without downtime.

SM_VLLM_SPECULATIVE_CONFIG lives in the model's container environment, so a K or mode change is a new
model; every change is a new endpoint config, and UpdateEndpoint moves the endpoint to it with SageMaker's
deployment guardrails (blue/green, all at once after a baking period, auto-rollback on the user's CloudWatch
alarms). The old fleet serves until the new one is healthy; SageMaker rolls back on failure.

The order and what each failure leaves are `update_frame`'s. This runner's own: the re-check reads the endpoint
(InService on the config read); the creates are the model (if the container changes), the instance pools' own
models and the endpoint config; before UpdateEndpoint, autoscaling off for an instance type change and peagle's
acceptance alarm at the new K (a rollback alarm of the update); UpdateEndpoint took when the endpoint serves or
moves to the new config (PendingDeploymentSummary); after success the autoscaling is registered and the previous
endpoint config and model go.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from ..describe import describe
from ..errors import EndpointFailed, PeagleError, UsageError
from ..hosting import VARIANT_NAME
from ..speculative import Mode
from .apply import _add_hint
from .intent import UpdateIntent
from .signals import SignalGuard
from .teardown import Outcome
from .update_frame import Create, EndpointChanged, UpdateFrame, UpdateResult
from .update_plan import Serving, UpdatePlan
from .verify import Check, verify
from .wait import Progress, wait_in_service

_IN_PROGRESS = "cannot update in-progress endpoint"


def _flags(serving: Serving) -> str:
    flags = [f"--mode {serving.mode}"] if serving.mode else []
    if serving.k and serving.mode != Mode.OFF.value:
        flags.append(f"--k {serving.k}")
    flags += [f"--instance-type {serving.instance_type}", f"--instance-count {serving.instance_count}"]
    return " ".join(flags)


class _Run(UpdateFrame):
    """The frame, with a classic endpoint's own steps."""

    SWITCH = "UpdateEndpoint"
    plan: UpdatePlan

    def __init__(self, plan: UpdatePlan, session: Any, *, sleep: Callable[[float], None],
                 note: Callable[[str], None] | None):
        super().__init__(plan, session, sleep=sleep, note=note)
        self.deregistered = False

    @property
    def intent(self) -> UpdateIntent:
        plan = self.plan
        return UpdateIntent(from_config=plan.current.endpoint_config, to_config=plan.target.endpoint_config,
                            autoscale=plan.autoscale_after)

    @property
    def subject(self) -> str:
        return f"endpoint {self.plan.endpoint_name!r}"

    def describe_serving(self) -> dict[str, Any] | None:
        return describe(self.sm, "endpoint", self.plan.endpoint_name)

    def check_serving(self, described: dict[str, Any]) -> None:
        plan, name = self.plan, self.plan.endpoint_name
        status, served = described.get("EndpointStatus"), described.get("EndpointConfigName")
        if status != "InService":
            raise EndpointChanged(f"endpoint {name!r} is {status} now, not InService as this update read it",
                                  "another update started meanwhile: wait for it, then run this update again")
        if served != plan.current.endpoint_config:
            raise EndpointChanged(f"endpoint {name!r} now serves {served}, not {plan.current.endpoint_config} "
                                  f"({plan.current.label()}) which this update read",
                                  "another update ran meanwhile: run this update again to start from what serves "
                                  "now")

    def creates(self) -> list[Create]:
        plan = self.plan
        model = [] if plan.create_model is None else [Create("model", plan.create_model)]
        pools = [Create("model", body, pool=True) for body in plan.create_pool_models]  # before the config names them
        return [*model, *pools, Create("endpoint_config", plan.create_endpoint_config)]

    def prepare(self, guard: SignalGuard) -> None:
        """Autoscaling off for an instance type change; the acceptance alarm at the new K, before UpdateEndpoint
        names it."""
        plan = self.plan
        if plan.deregister_first:
            self._deregister(guard)
        alarm = plan.acceptance_alarm
        if alarm is not None:
            left_alone = self.move_alarm(guard, alarm)
            if left_alone is not None:
                raise UsageError(left_alone.replace(": left alone", ""),
                                 "rename that alarm, or update with --no-acceptance-alarm")
            self.note(f"acceptance alarm {alarm.alarm_name} now watches K={alarm.k} (floor {alarm.floor.value:.2f})")

    def _deregister(self, guard: SignalGuard) -> None:
        from .autoscaling import remove_autoscaling

        self.deregistered = True
        self.undos.append(self._restore_autoscaling)
        with guard.critical("DeregisterScalableTarget"):
            left = [o for o in remove_autoscaling(self.session.client("application-autoscaling"),
                                                  self.plan.endpoint_name, [VARIANT_NAME])
                    if o.result == "failed"]
        if left:
            raise PeagleError(f"could not remove autoscaling before the update: {left[0].reason}",
                              exit_code=left[0].exit_code)
        self.note(f"autoscaling of {self.plan.endpoint_name} removed for the instance type change")

    def _restore_autoscaling(self, error: PeagleError) -> bool:
        """The update did not happen: the autoscaling removed before it goes back as it was."""
        from .autoscaling import apply_autoscaling

        before = self.plan.autoscale_before
        try:
            apply_autoscaling(self.session.client("application-autoscaling"), self.plan.endpoint_name, VARIANT_NAME,
                              before)
        except BaseException:  # noqa: BLE001 - say what to do instead
            _add_hint(error, f"autoscaling ({before.describe()}) was removed for the update and could not be "
                             "registered again")
            return False
        _add_hint(error, f"autoscaling registered again ({before.describe()})")
        return True

    def send(self) -> None:
        self.sm.update_endpoint(**self.plan.update_endpoint)

    def in_progress(self, error: BaseException) -> bool:
        from ..aws import error_code, error_message

        return error_code(error) == "ValidationException" and _IN_PROGRESS in error_message(error).lower()

    def took(self, described: dict[str, Any]) -> str | None:
        """Serving or moving to this update's config: 'accepted'; moving to another: 'refused'; Updating to what
        SageMaker does not say: 'unknown'."""
        ours = self.plan.target.endpoint_config
        pending = (described.get("PendingDeploymentSummary") or {}).get("EndpointConfigName")
        if ours in (described.get("EndpointConfigName"), pending):
            return "accepted"
        if pending:
            return "refused"
        if described.get("EndpointStatus") != "InService":
            return "unknown"
        return None

    def waiter(self) -> tuple[Callable[..., dict[str, Any]], str]:
        return wait_in_service, self.plan.endpoint_name

    def wait_hints(self, error: PeagleError) -> None:
        plan = self.plan
        if isinstance(error, EndpointFailed):
            _add_hint(error, f"container logs: peagle logs {plan.endpoint_name} --region {plan.region}")
        else:
            super().wait_hints(error)
        if self.deregistered:
            _add_hint(error, f"it registers the autoscaling again ({plan.autoscale_before.describe()})")

    def rolled_back(self, described: dict[str, Any]) -> PeagleError | None:
        plan = self.plan
        if described.get("EndpointConfigName") == plan.target.endpoint_config:
            return None
        reason = described.get("FailureReason") or "no reason given"
        error = EndpointFailed(f"the update of {plan.endpoint_name} failed and SageMaker rolled it back: {reason}",
                               None)
        alarm = plan.acceptance_alarm
        if alarm is not None and alarm.alarm_name in reason:
            _add_hint(error, f"the new fleet ({plan.target.label()}) accepted too few draft tokens: its mean "
                             f"acceptance length stayed below {alarm.floor.value:.2f} ({alarm.floor.kind}: "
                             f"{alarm.floor.short}); 'peagle status {plan.endpoint_name}' shows it")
        return error

    def verify_new(self, described: dict[str, Any], since_ms: int) -> list[Check]:
        return verify(self.sm, self.plan.verify_plan, self.session.client("logs"), sleep=self.sleep, read=self.read,
                      logs_since_ms=since_ms)

    def after_verified(self) -> None:
        plan = self.plan
        if plan.registers_autoscaling:
            from .autoscaling import apply_autoscaling

            apply_autoscaling(self.session.client("application-autoscaling"), plan.endpoint_name, VARIANT_NAME,
                              plan.autoscale_after)
            self.note(f"autoscaling of {plan.endpoint_name}: {plan.autoscale_after.describe()}")

    def old_resources(self) -> tuple[list[str], list[str]]:
        plan = self.plan
        return [plan.current.endpoint_config], [plan.current.model] if plan.create_model is not None else []

    def alarm_removed(self) -> list[Outcome]:
        """Nothing drafts any more: the acceptance alarm and its filters have nothing to watch."""
        if not self.plan.acceptance_removed:
            return []
        from .acceptance_watch import remove

        return remove(self.session.client("logs"), self.session.client("cloudwatch"), self.plan.endpoint_name)

    def status_of(self, described: dict[str, Any]) -> str:
        return described["EndpointStatus"]

    def moving_text(self) -> str:
        plan = self.plan
        return (f"{plan.endpoint_name} moves to {plan.target.endpoint_config} ({plan.target.label()}) or rolls back "
                f"to {plan.current.endpoint_config} ({plan.current.label()}); nothing was deleted")

    def switched_note(self) -> str:
        plan = self.plan
        return (f"UpdateEndpoint accepted: {plan.endpoint_name} moves to {plan.target.endpoint_config} "
                f"(blue/green, all at once after a {plan.bake_s}s baking period)")

    def serves_new_hints(self, error: PeagleError) -> None:
        plan = self.plan
        _add_hint(error, f"the endpoint serves {plan.target.endpoint_config} ({plan.target.label()}); finish "
                         f"with '{self.recover}' (tags, autoscaling, the previous configuration)")
        if isinstance(error, EndpointFailed):
            _add_hint(error, f"then go back if you want with 'peagle update {plan.endpoint_name} "
                             f"{_flags(plan.current)} --yes'")

    def still_serves(self) -> str:
        return f"the endpoint still serves the old configuration ({self.plan.current.label()})"


def run_update(plan: UpdatePlan, session: Any, *, timeout_s: float = 3600, on_progress: Progress | None = None,
               on_note: Callable[[str], None] | None = None, sleep: Callable[[float], None] = time.sleep,
               clock: Callable[[], float] = time.monotonic, handle_signals: bool = True) -> UpdateResult:
    return _Run(plan, session, sleep=sleep, note=on_note).run(timeout_s=timeout_s, clock=clock,
                                                              on_progress=on_progress, handle_signals=handle_signals)
