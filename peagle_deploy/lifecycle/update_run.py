"""`peagle update NAME`, its run: the writes of an `UpdatePlan` (lifecycle/update_plan.py), without downtime.

SM_VLLM_SPECULATIVE_CONFIG lives in the model's container environment, so a K or mode change is a new
model; every change is a new endpoint config, and UpdateEndpoint moves the endpoint to it with SageMaker's
deployment guardrails (blue/green, all at once after a baking period, auto-rollback on the user's CloudWatch
alarms). The old fleet serves until the new one is healthy; SageMaker rolls back on failure.

Order, and what each failure leaves:
1. (the plan) read the live endpoint, config, model and tags;
2. right before the first write (after the confirmation prompt): the endpoint must still serve the config read
   in 1 (else exit 2, nothing written); then the intent goes on the endpoint's tags (`lifecycle.intent`: from,
   to, the autoscaling to hold), so any peagle can finish what follows, with the update's lease
   (`lifecycle.lease`), so none does while it runs (released when the update ends, however it ends but SIGKILL);
3. CreateModel (if the container changes) and CreateEndpointConfig under a new name, unique per update
   (`NAME-u<UTC second>-<4 hex>`); a failure or signal here removes them again (the endpoint was never touched);
4. right before UpdateEndpoint the same check as in 2 (and the intent must still be this update's): another
   update that ran meanwhile refuses this one (exit 2) instead of orphaning its config;
5. UpdateEndpoint. From the moment it may have been accepted (answered, answer lost, a 500 retried into
   "Cannot update in-progress endpoint", a signal while it is in flight) what the endpoint moves to is never
   deleted: peagle reads the endpoint (PendingDeploymentSummary) to learn whether SageMaker took it, goes on if
   it did, and otherwise says the truth and names `peagle recover NAME`;
6. wait: Updating -> InService. InService on the OLD config is SageMaker's rollback: peagle removes what it
   created, says which configuration still serves, exits 6. A signal or timeout while Updating cannot stop
   SageMaker: peagle says so and names `peagle recover NAME`, which finishes the job once SageMaker settles;
7. verify the new speculative config live (as deploy does), retag the endpoint, and only then delete the
   old endpoint config and model (only peagle's, and only if nothing else uses them), then clear the intent.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from pydantic import BaseModel, Field

from ..errors import EndpointFailed, PeagleError, UsageError, WaitTimeout
from ..hosting import VARIANT_NAME
from ..speculative import Mode
from .apply import _add_hint, _as_peagle_error
from .intent import UpdateIntent, clear_update_intent, read_update_intent, recover_command, write_update_intent
from .lease import LeaseHolder, removed_meanwhile
from .signals import SignalGuard
from ..describe import describe
from .teardown import Outcome, teardown
from .update_plan import Serving, UpdatePlan
from .verify import Check, require, verify
from .wait import Progress, read_retrying, wait_in_service

_IN_PROGRESS = "cannot update in-progress endpoint"

Read = Callable[[Callable[[], Any]], Any]


class UpdateResult(BaseModel):
    endpoint_name: str
    region: str
    status: str
    elapsed_s: float
    previous: Serving
    serving: Serving
    verification: list[Check] = Field(default_factory=list)
    removed: list[Outcome] = Field(default_factory=list)
    notes: list[str] = Field(default_factory=list)


class EndpointChanged(UsageError):
    """The endpoint no longer serves what the update read: another update ran meanwhile."""


def _intent(plan: UpdatePlan) -> UpdateIntent:
    return UpdateIntent(from_config=plan.current.endpoint_config, to_config=plan.target.endpoint_config,
                        autoscale=plan.autoscale_after)


def _recheck(sm: Any, plan: UpdatePlan, read: Read, *, ours_written: bool) -> None:
    """Right before a write: the endpoint is InService on the config the update read, and no other update's
    intent is on it (once this update wrote its own, that one must still be there)."""
    from .tags import list_tags

    name, recover = plan.endpoint_name, recover_command(plan.endpoint_name, plan.region)
    endpoint = read(lambda: describe(sm, "endpoint", name))
    if endpoint is None:
        raise EndpointChanged(f"endpoint {name!r} no longer exists", "someone deleted it meanwhile")
    intent = read_update_intent(read(lambda: list_tags(sm, endpoint["EndpointArn"])))
    if intent is not None and intent.to_config != plan.target.endpoint_config:
        raise EndpointChanged(f"another update of {name!r} is in progress ({intent.from_config} -> "
                              f"{intent.to_config})", f"wait for it, or finish it with '{recover}', then run "
                                                      "this update again")
    if ours_written and intent is None:
        raise EndpointChanged(f"this update's record on {name!r} was cleared meanwhile (by peagle recover?)",
                              "run this update again")
    status, served = endpoint.get("EndpointStatus"), endpoint.get("EndpointConfigName")
    if status != "InService":
        raise EndpointChanged(f"endpoint {name!r} is {status} now, not InService as this update read it",
                              "another update started meanwhile: wait for it, then run this update again")
    if served != plan.current.endpoint_config:
        raise EndpointChanged(f"endpoint {name!r} now serves {served}, not {plan.current.endpoint_config} "
                              f"({plan.current.label()}) which this update read",
                              "another update ran meanwhile: run this update again to start from what serves now")


def _label(kind: str) -> str:
    return "endpoint config" if kind == "endpoint_config" else "model"


def _reconcile(sm: Any, plan: UpdatePlan, call_error: BaseException | None, read: Read) -> str:
    """Whether a failed UpdateEndpoint was taken after all: 'accepted', 'refused' or 'unknown'.

    SageMaker's own "no" (a 4xx other than "Cannot update in-progress endpoint") is a refusal. A lost answer (a 5xx
    after botocore's retries, a dropped connection, a second signal abandoning the call) or "in-progress" (a retry
    of an attempt SageMaker took, or someone else's update) is settled by reading the endpoint: serving or moving to
    this update's config is 'accepted'; moving to another config or InService on the old one after an answer
    SageMaker gave is 'refused'; anything else is 'unknown', and nothing may be deleted."""
    from ..aws import botocore_exceptions, error_code, error_message, is_lost_answer

    bx = botocore_exceptions()

    if call_error is None:
        return "unknown"
    in_progress = error_code(call_error) == "ValidationException" and _IN_PROGRESS in error_message(call_error).lower()
    if not in_progress and not is_lost_answer(call_error):
        return "refused"
    try:
        endpoint = read(lambda: describe(sm, "endpoint", plan.endpoint_name))
    except BaseException:  # noqa: BLE001 - cannot tell
        return "unknown"
    if endpoint is None:
        return "refused"
    ours = plan.target.endpoint_config
    pending = (endpoint.get("PendingDeploymentSummary") or {}).get("EndpointConfigName")
    if ours in (endpoint.get("EndpointConfigName"), pending):
        return "accepted"
    if pending:
        return "refused"
    if endpoint.get("EndpointStatus") != "InService":
        return "unknown"  # updating, and SageMaker does not say to what
    if isinstance(call_error, (KeyboardInterrupt, bx.ConnectionError, bx.HTTPClientError)):
        return "unknown"  # the request may still be on its way
    return "refused"


def _moving(plan: UpdatePlan) -> str:
    return (f"{plan.endpoint_name} moves to {plan.target.endpoint_config} ({plan.target.label()}) or rolls back to "
            f"{plan.current.endpoint_config} ({plan.current.label()}); nothing was deleted")


def _flags(serving: Serving) -> str:
    flags = [f"--mode {serving.mode}"] if serving.mode else []
    if serving.k and serving.mode != Mode.OFF.value:
        flags.append(f"--k {serving.k}")
    flags += [f"--instance-type {serving.instance_type}", f"--instance-count {serving.instance_count}"]
    return " ".join(flags)


class _Run:
    """One run of an update plan, and what it has written so far: a failure undoes exactly that."""

    def __init__(self, plan: UpdatePlan, session: Any, *, sleep: Callable[[float], None],
                 note: Callable[[str], None]):
        self.plan, self.session, self.note, self.sleep = plan, session, note, sleep
        self.sm = session.client("sagemaker")
        self.read: Read = lambda call: read_retrying(call, sleep=sleep)
        self.recover = recover_command(plan.endpoint_name, plan.region)
        self.attempted: list[str] = []  # the creates sent (answered or not): "model", "endpoint_config"
        self.pool_models: list[str] = []  # instance pools' own models sent (answered or not)
        self.deregistered = self.intent_written = False
        self.lease = LeaseHolder(self.sm, "update")  # on the endpoint with the intent, cleared with it
        self.moving: Any = None  # acceptance_watch.Moving: the acceptance alarm as it was, once read

    def write_new_config(self, guard: SignalGuard) -> None:
        """Steps 2-4: the intent, the new model and endpoint config, autoscaling off for a type change; any
        failure or signal here removes what was created (the endpoint was not touched)."""
        plan = self.plan
        try:
            _recheck(self.sm, plan, self.read, ours_written=False)  # after the prompt: nothing written yet
            with guard.critical("AddTags"):
                self.intent_written = True
                write_update_intent(self.sm, plan.endpoint_arn, _intent(plan), lease=self.lease.tags())
                self.lease.hold(plan.endpoint_arn)
            steps = ([("model", "create_model", "CreateModel")] if plan.create_model is not None else []) + [
                ("endpoint_config", "create_endpoint_config", "CreateEndpointConfig")]
            for kind, method, call in steps:
                if kind == "endpoint_config":  # the instance pools' own models, before the config names them
                    for body in plan.create_pool_models:
                        with guard.critical("CreateModel"):
                            self.pool_models.append(body["ModelName"])
                            self.sm.create_model(**body)
                        self.note(f"created model {body['ModelName']} (instance pool)")
                with guard.critical(call):
                    self.attempted.append(kind)
                    try:
                        getattr(self.sm, method)(**getattr(plan, method))
                    except Exception as exc:
                        made = [(k, plan.target.model if k == "model" else plan.target.endpoint_config)
                                for k in self.attempted[:-1]]
                        raise removed_meanwhile(self.sm, exc, made, call=call, operation="update") or exc
                self.note(f"created {_label(kind)} {plan.target.endpoint_config}")
            if plan.deregister_first:
                self._deregister(guard)
            if plan.acceptance_alarm is not None:
                self._watch(guard)
            _recheck(self.sm, plan, self.read, ours_written=True)  # right before UpdateEndpoint
        except BaseException as exc:  # noqa: BLE001 - includes signals: the endpoint was not touched
            error = _as_peagle_error(exc)
            self.undo(error)
            raise error from None

    def _deregister(self, guard: SignalGuard) -> None:
        from .autoscaling import remove_autoscaling

        self.deregistered = True
        with guard.critical("DeregisterScalableTarget"):
            left = [o for o in remove_autoscaling(self.session.client("application-autoscaling"),
                                                  self.plan.endpoint_name, [VARIANT_NAME])
                    if o.result == "failed"]
        if left:
            raise PeagleError(f"could not remove autoscaling before the update: {left[0].reason}",
                              exit_code=left[0].exit_code)
        self.note(f"autoscaling of {self.plan.endpoint_name} removed for the instance type change")

    def _watch(self, guard: SignalGuard) -> None:
        """The acceptance alarm and filters at the new K, before UpdateEndpoint names the alarm (acceptance_watch)."""
        from .acceptance_watch import Moving

        alarm = self.plan.acceptance_alarm
        logs, cloudwatch = self.session.client("logs"), self.session.client("cloudwatch")
        moving = Moving.read(logs, cloudwatch, alarm)
        if moving.not_ours is not None:
            raise UsageError(moving.not_ours.replace(": left alone", ""),
                             "rename that alarm, or update with --no-acceptance-alarm")
        self.moving = moving
        with guard.critical("PutMetricFilter and PutMetricAlarm"):
            moving.put(logs, cloudwatch)
        self.note(f"acceptance alarm {alarm.alarm_name} now watches K={alarm.k} (floor {alarm.floor.value:.2f})")

    def move_endpoint(self, guard: SignalGuard) -> None:
        """Step 5: UpdateEndpoint. Once SageMaker may have taken it, nothing it moves to is deleted."""
        plan = self.plan
        answered = False
        call_error: BaseException | None = None
        try:
            with guard.critical("UpdateEndpoint"):
                try:
                    self.sm.update_endpoint(**plan.update_endpoint)
                    answered = True
                except BaseException as exc:
                    call_error = exc
                    raise
        except BaseException as exc:  # noqa: BLE001 - from here on SageMaker may have taken the update
            verdict = "accepted" if answered else _reconcile(self.sm, plan, call_error, self.read)
            error = _as_peagle_error(exc)
            if verdict == "refused":
                self.undo(error)
                raise error from None
            if verdict == "unknown":
                _add_hint(error, f"finish with '{self.recover}' once SageMaker settles")
                _add_hint(error, f"UpdateEndpoint's answer was lost: SageMaker may be moving {_moving(plan)}")
                raise error from None
            if isinstance(exc, KeyboardInterrupt):
                _add_hint(error, f"finish with '{self.recover}' once SageMaker settles")
                _add_hint(error, f"SageMaker accepted the update: {_moving(plan)}")
                raise error from None
            self.note(f"UpdateEndpoint's answer was lost ({error.one_line()}), but SageMaker took the update")
        self.note(f"UpdateEndpoint accepted: {plan.endpoint_name} moves to {plan.target.endpoint_config} "
                  f"(blue/green, all at once after a {plan.bake_s}s baking period)")

    def wait(self, *, timeout_s: float, sleep: Callable[[float], None], clock: Callable[[], float],
             on_progress: Progress | None) -> dict[str, Any]:
        """Step 6: Updating -> InService on the new config; InService on the old one is SageMaker's rollback."""
        plan = self.plan
        try:
            described = wait_in_service(self.sm, plan.endpoint_name, timeout_s=timeout_s, sleep=sleep, clock=clock,
                                        on_progress=on_progress)
        except BaseException as exc:  # noqa: BLE001 - SageMaker's update goes on without us
            error = _as_peagle_error(exc)
            if isinstance(error, WaitTimeout):
                error.hint = None  # deploy's advice (cleanup) would delete the endpoint: not for an update
            _add_hint(error, f"finish with '{self.recover}' once SageMaker settles")
            if isinstance(error, EndpointFailed):
                _add_hint(error, f"container logs: peagle logs {plan.endpoint_name} --region {plan.region}")
            else:
                _add_hint(error, f"SageMaker's update goes on: {_moving(plan)}")
            if self.deregistered:
                _add_hint(error, f"it registers the autoscaling again ({plan.autoscale_before.describe()})")
            raise error from None
        if described.get("EndpointConfigName") != plan.target.endpoint_config:
            reason = described.get("FailureReason") or "no reason given"
            error = EndpointFailed(f"the update of {plan.endpoint_name} failed and SageMaker rolled it back: "
                                   f"{reason}", None)
            alarm = plan.acceptance_alarm
            if alarm is not None and alarm.alarm_name in reason:
                _add_hint(error, f"the new fleet ({plan.target.label()}) accepted too few draft tokens: its mean "
                                 f"acceptance length stayed below {alarm.floor.value:.2f} ({alarm.floor.kind}: "
                                 f"{alarm.floor.short}); 'peagle status {plan.endpoint_name}' shows it")
            self.undo(error)
            _add_hint(error, f"container logs: peagle logs {plan.endpoint_name} --region {plan.region}")
            raise error
        return described

    def finish(self, updated_ms: int) -> tuple[list[Check], list[Outcome]]:
        """Step 7: verify, retag, register the autoscaling, remove the previous configuration, clear the intent."""
        plan = self.plan
        try:
            checks = verify(self.sm, plan.verify_plan, self.session.client("logs"), sleep=self.sleep, read=self.read,
                            logs_since_ms=updated_ms)
            require(checks)
            self.sm.add_tags(ResourceArn=plan.endpoint_arn,
                             Tags=[{"Key": k, "Value": v} for k, v in plan.endpoint_tags.items()])
            if plan.registers_autoscaling:
                from .autoscaling import apply_autoscaling

                apply_autoscaling(self.session.client("application-autoscaling"), plan.endpoint_name, VARIANT_NAME,
                                  plan.autoscale_after)
                self.note(f"autoscaling of {plan.endpoint_name}: {plan.autoscale_after.describe()}")
            removed = teardown(self.sm, configs=[plan.current.endpoint_config],
                               models=[plan.current.model] if plan.create_model is not None else [], wait=False)
            gone = []
            if self.moving is not None:  # the old K's filters match nothing now
                gone = self.moving.settle(self.session.client("logs"))
            elif plan.acceptance_removed:  # nothing drafts: the alarm and its filters have nothing to watch
                from .acceptance_watch import remove

                gone = remove(self.session.client("logs"), self.session.client("cloudwatch"), plan.endpoint_name)
            for outcome in gone:
                if outcome.result == "failed":
                    self.note(f"could not remove {outcome.kind.replace('_', ' ')} {outcome.name} ({outcome.reason}); "
                              f"'{self.recover}' removes it")
            try:
                clear_update_intent(self.sm, plan.endpoint_arn)
                self.lease.drop(plan.endpoint_arn)
            except Exception as exc:  # noqa: BLE001 - the update is done; only its record is left
                self.note(f"could not clear the update's record on {plan.endpoint_name} "
                          f"({_as_peagle_error(exc).one_line()}): '{self.recover}' clears it")
        except BaseException as exc:  # noqa: BLE001 - includes signals: the endpoint serves the new config now
            error = _as_peagle_error(exc)
            _add_hint(error, f"the endpoint serves {plan.target.endpoint_config} ({plan.target.label()}); finish "
                             f"with '{self.recover}' (tags, autoscaling, the previous configuration)")
            if isinstance(error, EndpointFailed):
                _add_hint(error, f"then go back if you want with 'peagle update {plan.endpoint_name} "
                                 f"{_flags(plan.current)} --yes'")
            raise error from None
        return checks, removed

    def undo(self, error: PeagleError) -> None:
        """UpdateEndpoint was not accepted: remove what this update created (creates whose answer was lost too,
        by name and this update's created-at), register autoscaling again, clear the intent; say what is true."""
        plan = self.plan
        if not isinstance(error, EndpointChanged):
            _add_hint(error, f"the endpoint still serves the old configuration ({plan.current.label()})")
        left = not self._put_back_watch(error)
        if self.attempted or self.pool_models:
            try:
                outcomes = teardown(self.sm, wait=False, created_at=plan.created_at,
                                    configs=[plan.target.endpoint_config] if "endpoint_config" in self.attempted
                                    else [], models=([plan.target.model] if "model" in self.attempted else [])
                                    + self.pool_models)
            except BaseException:  # noqa: BLE001 - the removal itself failed or was interrupted: name the command
                outcomes, left = [], True
            gone = [o for o in outcomes if o.result == "deleted"]
            # only what this update created can be left: the live model a new config shares (an instance type
            # change makes no model) is kept on purpose
            ours = {("endpoint_config", plan.target.endpoint_config)} | (
                {("model", plan.target.model)} if "model" in self.attempted else set())
            left = left or any(o.result in ("left", "failed") and (o.kind, o.name) in ours for o in outcomes)
            if gone:
                _add_hint(error, "removed the new " + " and ".join(f"{_label(o.kind)} {o.name}" for o in gone))
        elif not self.deregistered:
            _add_hint(error, "nothing was created")
        if self.deregistered:
            left = not self._restore_autoscaling(error) or left
        if self.intent_written and not left:
            try:
                clear_update_intent(self.sm, plan.endpoint_arn)
                self.lease.drop(plan.endpoint_arn)
            except BaseException:  # noqa: BLE001
                left = True
        if left:
            _add_hint(error, f"finish with '{self.recover}'")

    def _put_back_watch(self, error: PeagleError) -> bool:
        """The acceptance alarm and filters as they were before this update (False: they could not be)."""
        if self.moving is None:
            return True
        try:
            done = self.moving.put_back(self.session.client("logs"), self.session.client("cloudwatch"))
        except BaseException:  # noqa: BLE001 - say what to do instead
            _add_hint(error, f"the acceptance alarm {self.moving.alarm.alarm_name} watches K={self.moving.alarm.k} "
                             "and could not be put back as it was")
            return False
        if done:
            _add_hint(error, "acceptance alarm: " + ", ".join(done))
        return True

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


def run_update(plan: UpdatePlan, session: Any, *, timeout_s: float = 3600, on_progress: Progress | None = None,
               on_note: Callable[[str], None] | None = None, sleep: Callable[[float], None] = time.sleep,
               clock: Callable[[], float] = time.monotonic, handle_signals: bool = True) -> UpdateResult:
    note = on_note or (lambda _msg: None)
    run = _Run(plan, session, sleep=sleep, note=note)
    start = clock()
    # the lease: refreshed while the update runs, released when it ends (with its intent, or alone where the intent
    # stays for peagle recover)
    with SignalGuard("stopping the update", enabled=handle_signals) as guard, run.lease:
        run.write_new_config(guard)
        updated_ms = int(time.time() * 1000)  # the new fleet's start-up lines come after this
        run.move_endpoint(guard)
        described = run.wait(timeout_s=timeout_s, sleep=sleep, clock=clock, on_progress=on_progress)
        checks, removed = run.finish(updated_ms)
    for outcome in removed:
        if outcome.result in ("left", "failed"):
            then = "" if outcome.reason.startswith("still used") else f"; remove it with '{run.recover}'"
            note(f"kept {_label(outcome.kind)} {outcome.name}: {outcome.reason}{then}")
    return UpdateResult(endpoint_name=plan.endpoint_name, region=plan.region, status=described["EndpointStatus"],
                        elapsed_s=clock() - start, previous=plan.current, serving=plan.target,
                        verification=checks, removed=removed, notes=plan.notes)
