"""The frame both update runners share: write the intent, create, switch once, wait, verify, tidy up; undo exactly
what was written on a failure or a signal.

`update_run` (a classic endpoint: UpdateEndpoint to a new endpoint config) and `component_update` (an inference
component: UpdateInferenceComponent to a new model) each subclass `UpdateFrame` with what is their own: what the
re-check reads, the creates, the switching call and how to read whether it took, what to wait on, what to verify,
what to delete after, and their words. The order, and what each failure leaves:

1. right before the first write (after the prompt): what serves is still what the plan read and no other update's
   intent is on the endpoint (else `EndpointChanged`, exit 2, nothing written); then the intent on the endpoint's
   tags (`lifecycle.intent`), so any peagle can finish what follows, with the update's lease (`lifecycle.lease`),
   so none does while this one runs (released when the update ends, however it ends but SIGKILL);
2. the creates, under a name new to this update (`NAME-u<UTC second>-<4 hex>`): a create whose answer was lost is
   removed by name and this update's created-at, never blindly; the runner's own writes (the acceptance alarm at
   the new K, autoscaling off); the re-check again: an update that ran meanwhile refuses this one;
3. the switching call, sent once. From the moment SageMaker may have taken it (answered, its answer lost, "in
   progress" after botocore's retry, a signal while it is in flight) what it moves to is never deleted: the runner
   reads what serves to learn whether SageMaker took it, goes on if it did, and otherwise says the truth and names
   `peagle recover NAME`;
4. the wait. Back on the old resource is SageMaker's rollback: what was written is undone, exit 6. A signal or a
   timeout while SageMaker works cannot stop it: `peagle recover NAME` finishes once it settles;
5. verify (as deploy does), retag the endpoint, and only then delete the old resources (only peagle's, and only if
   nothing else uses them), settle the acceptance alarm's filters, clear the intent.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, NamedTuple

from pydantic import BaseModel, Field

from ..errors import PeagleError, UsageError, WaitTimeout
from .apply import _add_hint, _as_peagle_error
from .intent import UpdateIntent, clear_update_intent, read_update_intent, recover_command, write_update_intent
from .lease import LeaseHolder, removed_meanwhile
from .signals import SignalGuard
from .teardown import Outcome, teardown
from .update_plan import Serving
from .verify import Check, require
from .wait import Progress, read_retrying

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


class Create(NamedTuple):
    """One create of the update; the undo removes it by name whether its answer came or not."""

    kind: str  # "model" or "endpoint_config"
    body: dict[str, Any]  # the CreateModel or CreateEndpointConfig request
    pool: bool = False  # an instance pool's own model: no removed-meanwhile check, not weighed in what is left

    @property
    def name(self) -> str:
        return self.body["ModelName" if self.kind == "model" else "EndpointConfigName"]

    @property
    def call(self) -> str:
        return "CreateModel" if self.kind == "model" else "CreateEndpointConfig"


def _label(kind: str) -> str:
    return "endpoint config" if kind == "endpoint_config" else "model"


class UpdateFrame:
    """One run of an update plan, and what it has written so far: a failure undoes exactly that."""

    SWITCH = ""  # the switching call's name

    def __init__(self, plan: Any, session: Any, *, sleep: Callable[[float], None],
                 note: Callable[[str], None] | None):
        self.plan, self.session, self.sleep = plan, session, sleep
        self.note = note or (lambda _msg: None)
        self.sm = session.client("sagemaker")
        self.read: Read = lambda call: read_retrying(call, sleep=sleep)
        self.recover = recover_command(plan.endpoint_name, plan.region)
        self.sent: list[Create] = []  # the creates sent (answered or not)
        self.undos: list[Callable[[PeagleError], bool]] = []  # the runner's own writes' undo (False: could not)
        self.intent_written = False
        self.lease = LeaseHolder(self.sm, "update")  # on the endpoint with the intent, cleared with it
        self.moving: Any = None  # acceptance_watch.Moving: the acceptance alarm as it was, once read

    # each runner's own steps (no default: each runner has its own) -----------------------------------------------
    @property
    def intent(self) -> UpdateIntent:
        raise NotImplementedError

    def describe_serving(self) -> dict[str, Any] | None:
        """What serves, read (None: gone): for the re-checks and `reconcile`."""
        raise NotImplementedError

    def check_serving(self, described: dict[str, Any]) -> None:
        """Raise EndpointChanged unless `described` is InService on what the plan read."""
        raise NotImplementedError

    def creates(self) -> list[Create]:
        raise NotImplementedError

    def prepare(self, guard: SignalGuard) -> None:
        """The runner's own writes after the creates, before the switch (undone through `self.undos`)."""

    def send(self) -> None:
        """The switching call."""
        raise NotImplementedError

    def in_progress(self, error: BaseException) -> bool:
        """SageMaker's "in progress" refusal: a retry of an attempt it took, or someone else's update."""
        raise NotImplementedError

    def took(self, described: dict[str, Any]) -> str | None:
        """The verdict as what serves says ('accepted', 'refused', 'unknown'); None where it says nothing."""
        raise NotImplementedError

    def waiter(self) -> tuple[Callable[..., dict[str, Any]], str]:
        """What the wait polls until SageMaker settles: (wait_in_service or wait_component, the name it waits on)."""
        raise NotImplementedError

    def rolled_back(self, described: dict[str, Any]) -> PeagleError | None:
        """The error to raise where the wait ended back on the old resource (SageMaker's rollback)."""
        raise NotImplementedError

    def verify_new(self, described: dict[str, Any], since_ms: int) -> list[Check]:
        raise NotImplementedError

    def after_verified(self) -> None:
        """The runner's own writes after the retag, before the old resources go."""

    def old_resources(self) -> tuple[list[str], list[str]]:
        """(endpoint configs, models) to delete after success: peagle's own, if nothing uses them."""
        raise NotImplementedError

    def alarm_removed(self) -> list[Outcome]:
        """After success, where the acceptance alarm did not move: what of it was removed."""
        return []

    def after_update(self, guard: SignalGuard) -> None:
        """The runner's own writes once the update is done."""

    def status_of(self, described: dict[str, Any]) -> str:
        raise NotImplementedError

    # each runner's words ------------------------------------------------------------------------------------------
    @property
    def subject(self) -> str:
        """What serves, as the re-check names it."""
        raise NotImplementedError

    def moving_text(self) -> str:
        """Where SageMaker may take it: 'X moves to NEW (...) or rolls back to OLD (...); nothing was deleted'."""
        raise NotImplementedError

    def switched_note(self) -> str:
        raise NotImplementedError

    def still_serves(self) -> str:
        raise NotImplementedError

    def serves_new_hints(self, error: PeagleError) -> None:
        raise NotImplementedError

    def wait_hints(self, error: PeagleError) -> None:
        _add_hint(error, f"SageMaker's update goes on: {self.moving_text()}")

    def taken_note(self, error: PeagleError) -> str:
        return f"{self.SWITCH}'s answer was lost ({error.one_line()}), but SageMaker took the update"

    def accepted_hint(self) -> str:
        return f"SageMaker accepted the update: {self.moving_text()}"

    def alarm_stuck(self) -> str:
        alarm = self.moving.alarm
        return f"the acceptance alarm {alarm.alarm_name} watches K={alarm.k} and could not be put back as it was"

    # the frame ----------------------------------------------------------------------------------------------------
    def run(self, *, timeout_s: float, clock: Callable[[], float], on_progress: Progress | None,
            handle_signals: bool) -> UpdateResult:
        plan, start = self.plan, clock()
        # the lease: refreshed while the update runs, released when it ends (with its intent, or alone where the intent
        # stays for peagle recover)
        with SignalGuard("stopping the update", enabled=handle_signals) as guard, self.lease:
            self.write(guard)
            since_ms = int(time.time() * 1000)  # the new fleet's start-up lines come after this
            self.switch(guard)
            described = self.wait(timeout_s=timeout_s, clock=clock, on_progress=on_progress)
            checks, removed = self.finish(described, since_ms)
            self.after_update(guard)
        for outcome in removed:
            if outcome.result in ("left", "failed"):
                then = "" if outcome.reason.startswith("still used") else f"; remove it with '{self.recover}'"
                self.note(f"kept {_label(outcome.kind)} {outcome.name}: {outcome.reason}{then}")
        return UpdateResult(endpoint_name=plan.endpoint_name, region=plan.region, status=self.status_of(described),
                            elapsed_s=clock() - start, previous=plan.current, serving=plan.target,
                            verification=checks, removed=removed, notes=plan.notes)

    def recheck(self, *, ours_written: bool) -> None:
        """Right before a write: what serves is InService on what the update read, and no other update's intent is
        on the endpoint (once this update wrote its own, that one must still be there)."""
        from .tags import list_tags

        name = self.plan.endpoint_name
        described = self.read(self.describe_serving)
        if described is None:
            raise EndpointChanged(f"{self.subject} no longer exists", "someone deleted it meanwhile")
        intent = read_update_intent(self.read(lambda: list_tags(self.sm, self.plan.endpoint_arn)))
        if intent is not None and intent.to_config != self.intent.to_config:
            raise EndpointChanged(f"another update of {name!r} is in progress ({intent.from_config} -> "
                                  f"{intent.to_config})", f"wait for it, or finish it with '{self.recover}', then "
                                                          "run this update again")
        if ours_written and intent is None:
            raise EndpointChanged(f"this update's record on {name!r} was cleared meanwhile (by peagle recover?)",
                                  "run this update again")
        self.check_serving(described)

    def write(self, guard: SignalGuard) -> None:
        """The intent, the creates, the runner's own writes; any failure or signal here removes what was written
        (what serves was not touched)."""
        try:
            self.recheck(ours_written=False)  # after the prompt: nothing written yet
            with guard.critical("AddTags"):
                self.intent_written = True
                write_update_intent(self.sm, self.plan.endpoint_arn, self.intent, lease=self.lease.tags())
                self.lease.hold(self.plan.endpoint_arn)
            for create in self.creates():
                self._create(guard, create)
            self.prepare(guard)
            self.recheck(ours_written=True)  # right before the switch
        except BaseException as exc:  # noqa: BLE001 - includes signals: what serves was not touched
            error = _as_peagle_error(exc)
            self.undo(error)
            raise error from None

    def _create(self, guard: SignalGuard, create: Create) -> None:
        method = self.sm.create_model if create.kind == "model" else self.sm.create_endpoint_config
        with guard.critical(create.call):
            self.sent.append(create)
            try:
                method(**create.body)
            except Exception as exc:
                if create.pool:
                    raise
                made = [(c.kind, c.name) for c in self.sent[:-1] if not c.pool]
                raise removed_meanwhile(self.sm, exc, made, call=create.call, operation="update") or exc
        self.note(f"created {_label(create.kind)} {create.name}" + (" (instance pool)" if create.pool else ""))

    def move_alarm(self, guard: SignalGuard, alarm: Any) -> str | None:
        """The acceptance alarm and its filters at the new K (acceptance_watch); where the alarm is not peagle's,
        why it is left alone (nothing written)."""
        from .acceptance_watch import Moving

        logs, cloudwatch = self.session.client("logs"), self.session.client("cloudwatch")
        moving = Moving.read(logs, cloudwatch, alarm)
        if moving.not_ours is not None:
            return moving.not_ours
        self.moving = moving
        with guard.critical("PutMetricFilter and PutMetricAlarm"):
            moving.put(logs, cloudwatch)
        return None

    def switch(self, guard: SignalGuard) -> None:
        """The switching call, sent once. Once SageMaker may have taken it, nothing it moves to is deleted."""
        answered = False
        call_error: BaseException | None = None
        try:
            with guard.critical(self.SWITCH):
                try:
                    self.send()
                    answered = True
                except BaseException as exc:
                    call_error = exc
                    raise
        except BaseException as exc:  # noqa: BLE001 - from here on SageMaker may have taken the update
            verdict = "accepted" if answered else self.reconcile(call_error)
            error = _as_peagle_error(exc)
            if verdict == "refused":
                self.undo(error)
                raise error from None
            if verdict == "unknown" or isinstance(exc, KeyboardInterrupt):
                _add_hint(error, f"finish with '{self.recover}' once SageMaker settles")
                _add_hint(error, f"{self.SWITCH}'s answer was lost: SageMaker may be moving {self.moving_text()}"
                          if verdict == "unknown" else self.accepted_hint())
                raise error from None
            self.note(self.taken_note(error))
        self.note(self.switched_note())

    def reconcile(self, call_error: BaseException | None) -> str:
        """Whether a failed switching call was taken after all: 'accepted', 'refused' or 'unknown'.

        SageMaker's own "no" is a refusal. A lost answer (a 5xx after botocore's retries, a dropped connection, a
        signal abandoning the call) or "in progress" is settled by reading what serves (`took`); where that cannot
        tell, a request that may still be on its way is 'unknown' (nothing may be deleted), else 'refused'."""
        from ..aws import botocore_exceptions, is_lost_answer

        if call_error is None:
            return "unknown"
        if not self.in_progress(call_error) and not is_lost_answer(call_error):
            return "refused"
        try:
            described = self.read(self.describe_serving)
        except BaseException:  # noqa: BLE001 - cannot tell
            return "unknown"
        if described is None:
            return "refused"
        verdict = self.took(described)
        if verdict is not None:
            return verdict
        bx = botocore_exceptions()
        if isinstance(call_error, (KeyboardInterrupt, bx.ConnectionError, bx.HTTPClientError)):
            return "unknown"  # the request may still be on its way
        return "refused"

    def wait(self, *, timeout_s: float, clock: Callable[[], float], on_progress: Progress | None) -> dict[str, Any]:
        """Until SageMaker settles; back on the old resource is its rollback: undo, exit 6."""
        wait, name = self.waiter()
        try:
            described = wait(self.sm, name, timeout_s=timeout_s, sleep=self.sleep, clock=clock, on_progress=on_progress)
        except BaseException as exc:  # noqa: BLE001 - SageMaker's update goes on without us
            error = _as_peagle_error(exc)
            if isinstance(error, WaitTimeout):
                error.hint = None  # the wait's advice (cleanup) would delete the endpoint: not for an update
            _add_hint(error, f"finish with '{self.recover}' once SageMaker settles")
            self.wait_hints(error)
            raise error from None
        error = self.rolled_back(described)
        if error is not None:
            self.undo(error)
            _add_hint(error, f"container logs: peagle logs {self.plan.endpoint_name} --region {self.plan.region}")
            raise error
        return described

    def finish(self, described: dict[str, Any], since_ms: int) -> tuple[list[Check], list[Outcome]]:
        """Verify, retag, the runner's own writes, remove the old resources, clear the intent."""
        plan = self.plan
        try:
            checks = self.verify_new(described, since_ms)
            require(checks)
            self.sm.add_tags(ResourceArn=plan.endpoint_arn,
                             Tags=[{"Key": k, "Value": v} for k, v in plan.endpoint_tags.items()])
            self.after_verified()
            configs, models = self.old_resources()
            removed = teardown(self.sm, configs=configs, models=models, wait=False)
            if self.moving is not None:  # the old K's filters match nothing now
                gone = self.moving.settle(self.session.client("logs"))
            else:
                gone = self.alarm_removed()
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
        except BaseException as exc:  # noqa: BLE001 - includes signals: the new resource serves now
            error = _as_peagle_error(exc)
            self.serves_new_hints(error)
            raise error from None
        return checks, removed

    def undo(self, error: PeagleError) -> None:
        """The switch did not happen: put the acceptance alarm back, remove what this update created (creates whose
        answer was lost too, by name and this update's created-at), undo the runner's own writes, clear the intent;
        say what is true."""
        plan = self.plan
        if not isinstance(error, EndpointChanged):
            _add_hint(error, self.still_serves())
        left = not self._put_back_alarm(error)
        if self.sent:
            try:
                outcomes = teardown(self.sm, wait=False, created_at=plan.created_at,
                                    configs=[c.name for c in self.sent if c.kind == "endpoint_config"],
                                    models=[c.name for c in self.sent if c.kind == "model"])
            except BaseException:  # noqa: BLE001 - the removal itself failed or was interrupted: name the command
                outcomes, left = [], True
            gone = [o for o in outcomes if o.result == "deleted"]
            # only what this update created can be left: the live model a new config shares (an instance type
            # change makes no model) is kept on purpose
            ours = {(c.kind, c.name) for c in self.sent if not c.pool}
            left = left or any(o.result in ("left", "failed") and (o.kind, o.name) in ours for o in outcomes)
            if gone:
                _add_hint(error, "removed the new " + " and ".join(f"{_label(o.kind)} {o.name}" for o in gone))
        elif not self.undos:
            _add_hint(error, "nothing was created")
        for undo in self.undos:
            left = not undo(error) or left
        if self.intent_written and not left:
            try:
                clear_update_intent(self.sm, plan.endpoint_arn)
                self.lease.drop(plan.endpoint_arn)
            except BaseException:  # noqa: BLE001
                left = True
        if left:
            _add_hint(error, f"finish with '{self.recover}'")

    def _put_back_alarm(self, error: PeagleError) -> bool:
        """The acceptance alarm and filters as they were before this update (False: they could not be)."""
        if self.moving is None:
            return True
        try:
            done = self.moving.put_back(self.session.client("logs"), self.session.client("cloudwatch"))
        except BaseException:  # noqa: BLE001 - say what to do instead
            _add_hint(error, self.alarm_stuck())
            return False
        if done:
            _add_hint(error, "acceptance alarm: " + ", ".join(done))
        return True
