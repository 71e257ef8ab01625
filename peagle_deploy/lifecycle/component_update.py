"""`peagle update NAME --k N | --mode M` of an endpoint that hosts its model as an inference component.

The speculative config lives in the model's environment and the component names its model
(`Specification.ModelName`, plan_component.py), so a K or mode change is a new model, planned by the one plan
builder with update_plan's carry rule (the user's --env, data channels, network settings kept), then
UpdateInferenceComponent with the live specification naming the new model: SageMaker replaces the component's copies
and the endpoint keeps its instances and its config. Instances, autoscaling and rollback alarms are not changed here
(`check_component_update` refuses them in one line).

Order, and what each failure leaves (as `update_run`, whose helpers it shares):
1. (the plan) read the endpoint, its component, the model it names, the tags;
2. right before the first write: the component still InService on the model read in 1 and no other update's intent;
   then the intent on the endpoint's tags (`lifecycle.intent`: from = the model served, to = the new model) with the
   update's lease (`lifecycle.lease`);
3. CreateModel under a new name (`NAME-u<UTC second>-<4 hex>`); a failure or signal removes it again;
4. the same check as in 2, then UpdateInferenceComponent. From the moment SageMaker may have taken it (answered,
   answer lost, a signal while it is in flight) the new model is never deleted: DescribeInferenceComponent says
   whether the component names it (or is Updating); if not known, `peagle recover NAME` finishes;
5. wait: Updating -> InService (`components.wait_component`). InService on the old model is SageMaker's rollback:
   the new model is removed, exit 6. A signal or timeout while Updating cannot stop SageMaker: `peagle recover NAME`
   waits for the component, then completes (it names the new model) or reverts (the old one), as for a classic
   update;
6. verify the new model's speculative config and the component (as deploy does), retag the endpoint (its K and
   mode), delete the old model only if peagle made it and nothing else uses it, clear the intent;
7. a component that scales to zero by an older peagle's idle rule is moved to AWS's recipe
   (`scaling_migration`); `peagle update NAME --scale-to-zero` does only this step (`MovePlan`).

Room: SageMaker's rolling update starts the new copies beside the old ones before it removes them (botocore's
model), so an endpoint whose `MaxInstanceCount` cannot hold both is refused before any write (`check_room`): this
peagle's deploys leave that room (plan_component.update_room), an older peagle's did not.
"""

from __future__ import annotations

import copy
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from ..acceptance_alarm import AcceptanceAlarm, component_log_group, plan_alarm
from ..errors import EndpointFailed, PeagleError, UsageError, WaitTimeout
from ..plan import DeploymentPlan, FactSource, build_plan
from ..tags import PeagleTags
from .apply import _add_hint, _as_peagle_error
from .intent import UpdateIntent, clear_update_intent, read_update_intent, recover_command, write_update_intent
from .lease import LeaseHolder, removed_meanwhile
from .signals import SignalGuard
from .teardown import Outcome, teardown
from .update_plan import (
    _CONTAINER_KEYS,
    _MODEL_KEYS,
    Live,
    Serving,
    UpdateRequest,
    check_component_update,
    _carried,
    _container,
    _current_plan,
    _pick,
    _resource_tags,
    _target_request,
    new_resource_name,
    prepare,
    read_request,
)
from .scaling_migration import ScalingMove, apply_move, read_move
from .update_run import EndpointChanged, UpdateResult
from .verify import Check, require, verify
from .wait import Progress, read_retrying

Read = Callable[[Callable[[], Any]], Any]
# UpdateInferenceComponent's InferenceComponentSpecification keys DescribeInferenceComponent answers in the same form
# (its `Container` there is the deployed image's description, not a request: the ModelName form carries no container)
_SPEC_KEYS = ("InstanceType", "ModelName", "StartupParameters", "ComputeResourceRequirements",
              "BaseInferenceComponentName", "DataCacheConfig", "SchedulingConfig")


class ComponentUpdatePlan(BaseModel):
    """Every AWS write of a component's update, in order; `--dry-run` prints it, `run_component_update` runs it."""

    model_config = ConfigDict(frozen=True)

    endpoint_name: str
    endpoint_arn: str
    region: str
    created_at: datetime
    component: str
    component_arn: str
    current: Serving
    target: Serving
    speculative_config: str | None
    create_model: dict[str, Any]
    update_component: dict[str, Any]
    endpoint_tags: dict[str, str] = Field(description="AddTags on the endpoint after success (status reads them)")
    delete_after_success: list[dict[str, str]] = Field(description="the old model: peagle's own, if nothing uses it")
    notes: list[str] = Field(default_factory=list)
    scaling_move: ScalingMove | None = Field(None, description="an older peagle's idle rule, moved to AWS's recipe "
                                                               "after success")
    acceptance_alarm: AcceptanceAlarm | None = Field(default=None, description="moved to the new K before "
                                                     "UpdateInferenceComponent (not a rollback alarm: see "
                                                     "docs/monitoring.md)")
    verify_plan: DeploymentPlan = Field(exclude=True)

    @property
    def intent(self) -> UpdateIntent:
        """The intent names models: a component's update moves it from one model to another, the config stays."""
        return UpdateIntent(from_config=self.current.model, to_config=self.target.model, autoscale=None)

    @property
    def writes(self) -> list[str]:
        intent = ", ".join(f"{k}={v}" for k, v in self.intent.to_tags().items())
        watch = [] if self.acceptance_alarm is None else [
            f"{write} (the acceptance alarm at K={self.target.k}; put back as it was if the update does not happen)"
            for write in self.acceptance_alarm.writes()]
        return [f"AddTags {self.endpoint_name} (the update's intent, for peagle recover: {intent})",
                f"CreateModel {self.create_model['ModelName']}", *watch,
                f"UpdateInferenceComponent {self.component} -> model {self.target.model} (SageMaker replaces its "
                "copies; the endpoint keeps its instances and config)",
                f"AddTags {self.endpoint_name} ({', '.join(f'{k}={v}' for k, v in self.endpoint_tags.items())})",
                *(f"DeleteModel {d['name']} (after success; peagle's own, if unused)"
                  for d in self.delete_after_success),
                f"DeleteTags {self.endpoint_name} (the update's intent, once done)",
                *(f"{write} (after success)" for write in (self.scaling_move.writes if self.scaling_move else []))]


class MovePlan(BaseModel):
    """`peagle update NAME --scale-to-zero` alone: the component's scaling moved to AWS's recipe, nothing else."""

    model_config = ConfigDict(frozen=True)

    endpoint_name: str
    region: str
    component: str
    move: ScalingMove | None = Field(description="None: nothing of an older idle rule is there")

    @property
    def writes(self) -> list[str]:
        return self.move.writes if self.move is not None else []


def check_room(live: Live, component: dict[str, Any], name: str) -> str:
    """The copies SageMaker's rolling update needs room for (the new ones beside the old): refused in one line when
    the variant's MaxInstanceCount cannot hold both; else the plan's note saying so."""
    from ..instances import instance_info

    variant = live.config["ProductionVariants"][0]
    most = (variant.get("ManagedInstanceScaling") or {}).get("MaxInstanceCount") or variant.get(
        "InitialInstanceCount") or 1
    copies = int((component.get("RuntimeConfig") or {}).get("DesiredCopyCount") or 0)
    needs = ((component.get("Specification") or {}).get("ComputeResourceRequirements") or {})
    info = instance_info(variant.get("InstanceType") or "")
    gpus = float(needs.get("NumberOfAcceleratorDevicesRequired") or 0)
    if info is None or not gpus:
        return ("room for the update not checked: peagle has no GPU facts for the instance type; SageMaker starts "
                "the new copies beside the old ones")
    per_instance = max(1, int(info.gpus // gpus))
    if 2 * copies > int(most) * per_instance:
        raise UsageError(f"endpoint {name!r} has no room for the update: SageMaker starts the new copies beside the "
                         f"old ones, and MaxInstanceCount {most} x {variant.get('InstanceType')} holds "
                         f"{int(most) * per_instance} cop{'y' if int(most) * per_instance == 1 else 'ies'} of "
                         f"{component['InferenceComponentName']}, {copies} of which serve now",
                         "deploy it again beside with this peagle, which leaves room (peagle deploy MODEL --hosting "
                         f"component --name NEW-NAME), then peagle cleanup {name}; nothing was changed")
    starts = "copy starts" if copies == 1 else "copies start"
    return (f"room for the update: the new {starts} beside the {copies} serving (MaxInstanceCount {most} holds "
            f"{int(most) * per_instance}); while both run, the extra instance bills")


def plan_component_update(live: Live, component: dict[str, Any], request: UpdateRequest, *,
                          now: datetime | None = None, facts: FactSource | None = None) -> ComponentUpdatePlan:
    """The new model (deploy's plan for the new K or mode, the live model's own settings carried) and the
    UpdateInferenceComponent request (the live specification, naming the new model)."""
    from ..served_config import spec_of_environment

    check_component_update(request, request.name)
    room = check_room(live, component, request.name)
    now = (now or datetime.now(UTC)).replace(microsecond=0)
    facts = facts or FactSource()
    tags = live.peagle
    if not tags.model:
        raise UsageError(f"endpoint {request.name!r} has no peagle:model tag", "redeploy it with peagle deploy")
    variant = live.config["ProductionVariants"][0]
    spec = spec_of_environment((live.model.get("PrimaryContainer") or {}).get("Environment"))
    mode, k = (spec.mode, spec.k) if spec.problem is None else (tags.mode, tags.k)
    current = Serving(endpoint_config=live.config["EndpointConfigName"], model=live.model["ModelName"], mode=mode,
                      k=k, instance_type=variant.get("InstanceType"), instance_count=variant.get("InitialInstanceCount"))
    name = new_resource_name(request.name, now)
    after = build_plan(_target_request(live, request, current, name), facts=facts, now=now)
    before = _current_plan(live, current, request, facts, now)
    container, notes = _container(live.model.get("PrimaryContainer", {}), before, after, False)
    if container == _pick(live.model.get("PrimaryContainer", {}), _CONTAINER_KEYS):
        raise UsageError(f"endpoint {request.name!r} already serves {current.label()}",
                         "nothing to update; pass another --k or --mode")
    model_keys = _carried(live.model, before.create_model if before else None, after.create_model, _MODEL_KEYS)
    create_model = {"ModelName": name, "PrimaryContainer": container, **model_keys,
                    "Tags": _resource_tags(live, after, request.name)}
    specification = {**_pick(component.get("Specification") or {}, _SPEC_KEYS), "ModelName": name}
    target = current.model_copy(update={"model": name, "mode": after.mode.value, "k": after.k})
    endpoint_tags = PeagleTags(mode=after.mode.value, k=after.k).to_aws()
    owner = component["InferenceComponentName"]
    acceptance, acceptance_notes = plan_alarm(request.acceptance, owner=owner, log_group=component_log_group(owner),
                                              k=after.k, mode=after.mode.value,
                                              tags={t["Key"]: t["Value"] for t in create_model["Tags"]},
                                              model=(after.model, after.model_id))
    if acceptance is not None:
        acceptance_notes = [f"acceptance alarm {acceptance.describe()}; moved with the update, not a rollback alarm "
                            "of it (docs/monitoring.md)"]
    verify_plan = after.model_copy(update={
        "endpoint_name": request.name, "inference_component_name": component["InferenceComponentName"],
        "create_model": create_model, "create_endpoint_config": copy.deepcopy(live.config),
        "create_inference_component": {"InferenceComponentName": component["InferenceComponentName"],
                                       "Specification": specification}})
    return ComponentUpdatePlan(
        endpoint_name=request.name, endpoint_arn=live.endpoint["EndpointArn"], region=request.region,
        created_at=now, component=component["InferenceComponentName"],
        component_arn=component["InferenceComponentArn"], current=current, target=target,
        speculative_config=after.speculative_config, create_model=create_model,
        update_component={"InferenceComponentName": component["InferenceComponentName"],
                          "Specification": specification},
        endpoint_tags=endpoint_tags, delete_after_success=[{"kind": "model", "name": current.model}],
        notes=[*notes, room, *acceptance_notes], acceptance_alarm=acceptance, verify_plan=verify_plan)


def prepare_update(session: Any, request: UpdateRequest, *, sleep: Callable[[float], None] = time.sleep,
                   now: datetime | None = None, facts: FactSource | None = None) -> Any:
    """Reads only -> the plan of either shape: a `ComponentUpdatePlan` for an endpoint that hosts its model as an
    inference component, else update_plan's `UpdatePlan`."""
    live = read_request(session, request, sleep=sleep)
    if live.component is None:
        return prepare(session, request, sleep=sleep, now=now, facts=facts, live=live)
    component = live.component["InferenceComponentName"]

    def move_read() -> ScalingMove | None:
        return read_retrying(lambda: read_move(session.client("application-autoscaling"),
                                               session.client("cloudwatch"), component), sleep=sleep)

    if request.mode is None and request.k is None:  # --scale-to-zero alone
        return MovePlan(endpoint_name=request.name, region=request.region, component=component, move=move_read())
    plan = plan_component_update(live, live.component, request, now=now, facts=facts)
    try:
        move = move_read()
    except Exception as exc:  # noqa: BLE001 - the update goes on; what is left of an older rule is said
        from ..aws import translate_error

        error = translate_error(exc)
        if error is None:
            raise
        return plan.model_copy(update={"notes": [*plan.notes, f"could not read whether {component} scales to zero "
                                                              f"by an older peagle's idle rule ({error.one_line()})"]})
    return plan.model_copy(update={"scaling_move": move}) if move is not None else plan


def run_move(plan: MovePlan, session: Any) -> list[str]:
    """`peagle update NAME --scale-to-zero`: the move's writes, a signal held until they are done (three short
    writes; whatever is left of the old rule after a failure is found again by the next update or recover)."""
    if plan.move is None:
        return []
    with SignalGuard("stopping the move to AWS's scale-to-zero rule") as guard, \
            guard.critical("PutScalingPolicy, DeleteScalingPolicy and DeleteAlarms"):
        return apply_move(session.client("application-autoscaling"), session.client("cloudwatch"), plan.move)


# the run ----------------------------------------------------------------------------------------------------------
def _model_of(described: dict[str, Any] | None) -> str | None:
    return ((described or {}).get("Specification") or {}).get("ModelName")


def _moving(plan: ComponentUpdatePlan) -> str:
    return (f"{plan.component} moves to model {plan.target.model} ({plan.target.label()}) or rolls back to "
            f"{plan.current.model} ({plan.current.label()}); nothing was deleted")


class _Run:
    def __init__(self, plan: ComponentUpdatePlan, session: Any, *, sleep: Callable[[float], None],
                 note: Callable[[str], None]):
        self.plan, self.session, self.sleep, self.note = plan, session, sleep, note
        self.sm = session.client("sagemaker")
        self.read: Read = lambda call: read_retrying(call, sleep=sleep)
        self.recover = recover_command(plan.endpoint_name, plan.region)
        self.model_sent = self.intent_written = False
        self.lease = LeaseHolder(self.sm, "update")
        self.moving: Any = None  # acceptance_watch.Moving, once read

    def recheck(self, *, ours_written: bool) -> None:
        """Right before a write: the component InService on the model read, no other update's intent."""
        from .components import describe_component
        from .tags import list_tags

        plan, name = self.plan, self.plan.endpoint_name
        described = self.read(lambda: describe_component(self.sm, plan.component))
        if described is None:
            raise EndpointChanged(f"inference component {plan.component!r} no longer exists",
                                  "someone deleted it meanwhile")
        intent = read_update_intent(self.read(lambda: list_tags(self.sm, plan.endpoint_arn)))
        if intent is not None and intent.to_config != plan.target.model:
            raise EndpointChanged(f"another update of {name!r} is in progress ({intent.from_config} -> "
                                  f"{intent.to_config})", f"wait for it, or finish it with '{self.recover}', then "
                                                          "run this update again")
        if ours_written and intent is None:
            raise EndpointChanged(f"this update's record on {name!r} was cleared meanwhile (by peagle recover?)",
                                  "run this update again")
        status = described.get("InferenceComponentStatus")
        if status != "InService":
            raise EndpointChanged(f"inference component {plan.component!r} is {status} now, not InService",
                                  "wait until it is InService (peagle status NAME), then run this update again")
        if _model_of(described) != plan.current.model:
            raise EndpointChanged(f"inference component {plan.component!r} now names model {_model_of(described)}, "
                                  f"not {plan.current.model} which this update read",
                                  "another update ran meanwhile: run this update again")

    def write_model(self, guard: SignalGuard) -> None:
        plan = self.plan
        try:
            self.recheck(ours_written=False)
            with guard.critical("AddTags"):
                self.intent_written = True
                write_update_intent(self.sm, plan.endpoint_arn, plan.intent, lease=self.lease.tags())
                self.lease.hold(plan.endpoint_arn)
            with guard.critical("CreateModel"):
                self.model_sent = True
                try:
                    self.sm.create_model(**plan.create_model)
                except Exception as exc:
                    raise removed_meanwhile(self.sm, exc, [], call="CreateModel", operation="update") or exc
            self.note(f"created model {plan.target.model}")
            if plan.acceptance_alarm is not None:
                self._watch(guard)
            self.recheck(ours_written=True)
        except BaseException as exc:  # noqa: BLE001 - includes signals: the component was not touched
            error = _as_peagle_error(exc)
            self.undo(error)
            raise error from None

    def _watch(self, guard: SignalGuard) -> None:
        """The acceptance alarm and filters at the new K, before the component moves (acceptance_watch)."""
        from .acceptance_watch import Moving

        logs, cloudwatch = self.session.client("logs"), self.session.client("cloudwatch")
        moving = Moving.read(logs, cloudwatch, self.plan.acceptance_alarm)
        if moving.not_ours is not None:
            self.note(moving.not_ours)
            return
        self.moving = moving
        with guard.critical("PutMetricFilter and PutMetricAlarm"):
            moving.put(logs, cloudwatch)

    def move_component(self, guard: SignalGuard) -> None:
        """UpdateInferenceComponent; once SageMaker may have taken it, the new model is never deleted."""
        plan = self.plan
        answered = False
        call_error: BaseException | None = None
        try:
            with guard.critical("UpdateInferenceComponent"):
                try:
                    self.sm.update_inference_component(**plan.update_component)
                    answered = True
                except BaseException as exc:
                    call_error = exc
                    raise
        except BaseException as exc:  # noqa: BLE001
            verdict = "accepted" if answered else self._reconcile(call_error)
            error = _as_peagle_error(exc)
            if verdict == "refused":
                self.undo(error)
                raise error from None
            if verdict == "unknown" or isinstance(exc, KeyboardInterrupt):
                _add_hint(error, f"finish with '{self.recover}' once SageMaker settles")
                said = "UpdateInferenceComponent's answer was lost" if verdict == "unknown" else \
                    "SageMaker accepted the update"
                _add_hint(error, f"{said}: SageMaker may be moving {_moving(plan)}")
                raise error from None
            self.note(f"UpdateInferenceComponent's answer was lost ({error.one_line()}), but SageMaker took it")
        self.note(f"UpdateInferenceComponent accepted: {plan.component} moves to model {plan.target.model}")

    def _reconcile(self, call_error: BaseException | None) -> str:
        """'accepted' (the component names the new model or is Updating), 'refused' (SageMaker's own no, or an
        InService component on the old model after an answer), else 'unknown'."""
        from ..aws import botocore_exceptions, error_message, is_lost_answer
        from .components import describe_component

        if call_error is None:
            return "unknown"
        # "Cannot update inference component ... while it is in state UPDATE_...": a retry of an attempt SageMaker
        # took (or someone else's update): what the component names says which
        in_progress = "while it is in state" in error_message(call_error).lower()
        if not (in_progress or is_lost_answer(call_error) or isinstance(call_error, KeyboardInterrupt)):
            return "refused"
        try:
            described = self.read(lambda: describe_component(self.sm, self.plan.component))
        except BaseException:  # noqa: BLE001 - cannot tell
            return "unknown"
        if described is None:
            return "refused"
        if _model_of(described) == self.plan.target.model or described.get("InferenceComponentStatus") == "Updating":
            return "accepted"
        bx = botocore_exceptions()
        if isinstance(call_error, (KeyboardInterrupt, bx.ConnectionError, bx.HTTPClientError)):
            return "unknown"  # the request may still be on its way
        return "refused"

    def wait(self, *, timeout_s: float, clock: Callable[[], float], on_progress: Progress | None) -> dict[str, Any]:
        from .components import wait_component

        plan = self.plan
        try:
            described = wait_component(self.sm, plan.component, timeout_s=timeout_s, sleep=self.sleep, clock=clock,
                                       on_progress=on_progress)
        except BaseException as exc:  # noqa: BLE001 - SageMaker's update goes on without us
            error = _as_peagle_error(exc)
            if isinstance(error, WaitTimeout):
                error.hint = None  # the wait's advice (cleanup) would delete the endpoint: not for an update
            _add_hint(error, f"finish with '{self.recover}' once SageMaker settles")
            _add_hint(error, f"SageMaker's update goes on: {_moving(plan)}")
            raise error from None
        if _model_of(described) != plan.target.model:
            error = EndpointFailed(f"the update of {plan.component} failed and SageMaker rolled it back to model "
                                   f"{_model_of(described)}: {described.get('FailureReason') or 'no reason given'}",
                                   None)
            self.undo(error)
            _add_hint(error, f"container logs: peagle logs {plan.endpoint_name} --region {plan.region}")
            raise error
        return described

    def finish(self, described: dict[str, Any], since_ms: int) -> tuple[list[Check], list[Outcome]]:
        from .component_apply import component_check, component_startup

        plan = self.plan
        try:
            checks = verify(self.sm, plan.verify_plan, None, sleep=self.sleep, read=self.read)
            checks.append(component_check(plan.verify_plan, described))
            checks.append(component_startup(self.session.client("logs"), plan.verify_plan, sleep=self.sleep,
                                            since_ms=since_ms))
            require(checks)
            self.sm.add_tags(ResourceArn=plan.endpoint_arn,
                             Tags=[{"Key": k, "Value": v} for k, v in plan.endpoint_tags.items()])
            removed = teardown(self.sm, models=[d["name"] for d in plan.delete_after_success], wait=False)
            if self.moving is not None:  # the old K's filters match nothing now
                for outcome in self.moving.settle(self.session.client("logs")):
                    if outcome.result == "failed":
                        self.note(f"could not remove metric filter {outcome.name} ({outcome.reason}); "
                                  f"'{self.recover}' removes it")
            try:
                clear_update_intent(self.sm, plan.endpoint_arn)
                self.lease.drop(plan.endpoint_arn)
            except Exception as exc:  # noqa: BLE001 - the update is done; only its record is left
                self.note(f"could not clear the update's record on {plan.endpoint_name} "
                          f"({_as_peagle_error(exc).one_line()}): '{self.recover}' clears it")
        except BaseException as exc:  # noqa: BLE001 - the component serves the new model now
            error = _as_peagle_error(exc)
            _add_hint(error, f"{plan.component} serves model {plan.target.model} ({plan.target.label()}); finish "
                             f"with '{self.recover}' (tags, the previous model)")
            raise error from None
        return checks, removed

    def undo(self, error: PeagleError) -> None:
        """The component was not moved: remove the new model (a create whose answer was lost too, by name and this
        update's created-at), clear the intent; say what is true."""
        plan = self.plan
        if not isinstance(error, EndpointChanged):
            _add_hint(error, f"{plan.component} still serves the old model ({plan.current.label()})")
        left = False
        if self.moving is not None:
            try:
                done = self.moving.put_back(self.session.client("logs"), self.session.client("cloudwatch"))
                if done:
                    _add_hint(error, "acceptance alarm: " + ", ".join(done))
            except BaseException:  # noqa: BLE001 - say what to do instead
                _add_hint(error, f"the acceptance alarm {self.moving.alarm.alarm_name} could not be put back")
                left = True
        if self.model_sent:
            try:
                outcomes = teardown(self.sm, wait=False, created_at=plan.created_at, models=[plan.target.model])
            except BaseException:  # noqa: BLE001
                outcomes, left = [], True
            if any(o.result == "deleted" for o in outcomes):
                _add_hint(error, f"removed the new model {plan.target.model}")
            left = left or any(o.result in ("left", "failed") for o in outcomes)
        else:
            _add_hint(error, "nothing was created")
        if self.intent_written and not left:
            try:
                clear_update_intent(self.sm, plan.endpoint_arn)
                self.lease.drop(plan.endpoint_arn)
            except BaseException:  # noqa: BLE001
                left = True
        if left:
            _add_hint(error, f"finish with '{self.recover}'")


def run_component_update(plan: ComponentUpdatePlan, session: Any, *, timeout_s: float = 3600,
                         on_progress: Progress | None = None, on_note: Callable[[str], None] | None = None,
                         sleep: Callable[[float], None] = time.sleep, clock: Callable[[], float] = time.monotonic,
                         handle_signals: bool = True) -> UpdateResult:
    note = on_note or (lambda _msg: None)
    run = _Run(plan, session, sleep=sleep, note=note)
    start = clock()
    with SignalGuard("stopping the update", enabled=handle_signals) as guard, run.lease:
        run.write_model(guard)
        since_ms = int(time.time() * 1000)  # the new copies' start-up lines come after this
        run.move_component(guard)
        described = run.wait(timeout_s=timeout_s, clock=clock, on_progress=on_progress)
        checks, removed = run.finish(described, since_ms)
        if plan.scaling_move is not None:
            try:
                with guard.critical("PutScalingPolicy, DeleteScalingPolicy and DeleteAlarms"):
                    for line in apply_move(session.client("application-autoscaling"), session.client("cloudwatch"),
                                           plan.scaling_move):
                        note(f"scaling of {plan.component}: {line}")
            except Exception as exc:  # noqa: BLE001 - the update itself is done
                note(f"could not move {plan.component} to AWS's scale-to-zero rule ({_as_peagle_error(exc).one_line()})"
                     f": '{run.recover}' finishes it")
    for outcome in removed:
        if outcome.result in ("left", "failed"):
            then = "" if outcome.reason.startswith("still used") else f"; remove it with '{run.recover}'"
            note(f"kept model {outcome.name}: {outcome.reason}{then}")
    return UpdateResult(endpoint_name=plan.endpoint_name, region=plan.region,
                        status=described.get("InferenceComponentStatus", "InService"), elapsed_s=clock() - start,
                        previous=plan.current, serving=plan.target, verification=checks, removed=removed,
                        notes=plan.notes)


__all__ = ["ComponentUpdatePlan", "MovePlan", "check_room", "plan_component_update", "prepare_update", "run_move",
           "run_component_update"]
