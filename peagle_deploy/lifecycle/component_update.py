"""`peagle update NAME --k N | --mode M` of an endpoint that hosts its model as an inference component.

The speculative config lives in the model's environment and the component names its model
(`Specification.ModelName`, plan_component.py), so a K or mode change is a new model, planned by the one plan
builder with update_plan's carry rule (the user's --env, data channels, network settings kept), then
UpdateInferenceComponent with the live specification naming the new model: SageMaker replaces the component's copies
and the endpoint keeps its instances and its config. Instances, autoscaling and rollback alarms are not changed here
(`check_component_update` refuses them in one line).

The run is `update_frame`'s (the order, and what each failure leaves). This runner's own: the intent names models
(from = the model served, to = the new model; the config stays); the re-check reads the component (InService on the
model read); the one create is the new model; UpdateInferenceComponent took when the component names the new model
or is Updating; the wait is `components.wait_component`, InService on the old model being SageMaker's rollback;
verification adds the component and vLLM's start-up lines in its log group; after success the old model goes, and a
component that scales to zero by an older peagle's idle rule is moved to AWS's recipe (`scaling_migration`;
`peagle update NAME --scale-to-zero` does only that, `MovePlan`).

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

from ..acceptance_alarm import AcceptanceAlarm, plan_alarm
from ..log_groups import component_log_group
from ..errors import EndpointFailed, PeagleError, UsageError
from ..plan import DeploymentPlan, FactSource, build_plan
from ..tags import PeagleTags
from .apply import _add_hint, _as_peagle_error
from .intent import UpdateIntent
from .signals import SignalGuard
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
from .update_frame import Create, EndpointChanged, UpdateFrame, UpdateResult
from .verify import Check, verify
from .wait import Progress, read_retrying

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


class _Run(UpdateFrame):
    """The frame, with an inference component's own steps."""

    SWITCH = "UpdateInferenceComponent"
    plan: ComponentUpdatePlan

    @property
    def intent(self) -> UpdateIntent:
        return self.plan.intent

    @property
    def subject(self) -> str:
        return f"inference component {self.plan.component!r}"

    def describe_serving(self) -> dict[str, Any] | None:
        from .components import describe_component

        return describe_component(self.sm, self.plan.component)

    def check_serving(self, described: dict[str, Any]) -> None:
        plan = self.plan
        status = described.get("InferenceComponentStatus")
        if status != "InService":
            raise EndpointChanged(f"inference component {plan.component!r} is {status} now, not InService",
                                  "wait until it is InService (peagle status NAME), then run this update again")
        if _model_of(described) != plan.current.model:
            raise EndpointChanged(f"inference component {plan.component!r} now names model {_model_of(described)}, "
                                  f"not {plan.current.model} which this update read",
                                  "another update ran meanwhile: run this update again")

    def creates(self) -> list[Create]:
        return [Create("model", self.plan.create_model)]

    def prepare(self, guard: SignalGuard) -> None:
        """The acceptance alarm at the new K, before the component moves (not a rollback alarm of the update)."""
        if self.plan.acceptance_alarm is not None:
            left_alone = self.move_alarm(guard, self.plan.acceptance_alarm)
            if left_alone is not None:
                self.note(left_alone)

    def send(self) -> None:
        self.sm.update_inference_component(**self.plan.update_component)

    def in_progress(self, error: BaseException) -> bool:
        """"Cannot update inference component ... while it is in state UPDATE_..."."""
        from ..aws import error_message

        return "while it is in state" in error_message(error).lower()

    def took(self, described: dict[str, Any]) -> str | None:
        """The component names the new model or is Updating: 'accepted'."""
        if _model_of(described) == self.plan.target.model or described.get("InferenceComponentStatus") == "Updating":
            return "accepted"
        return None

    def waiter(self) -> tuple[Callable[..., dict[str, Any]], str]:
        from .components import wait_component

        return wait_component, self.plan.component

    def rolled_back(self, described: dict[str, Any]) -> PeagleError | None:
        if _model_of(described) == self.plan.target.model:
            return None
        return EndpointFailed(f"the update of {self.plan.component} failed and SageMaker rolled it back to model "
                              f"{_model_of(described)}: {described.get('FailureReason') or 'no reason given'}", None)

    def verify_new(self, described: dict[str, Any], since_ms: int) -> list[Check]:
        from .component_apply import component_check, component_startup

        plan = self.plan
        checks = verify(self.sm, plan.verify_plan, None, sleep=self.sleep, read=self.read)
        checks.append(component_check(plan.verify_plan, described))
        checks.append(component_startup(self.session.client("logs"), plan.verify_plan, sleep=self.sleep,
                                        since_ms=since_ms))
        return checks

    def old_resources(self) -> tuple[list[str], list[str]]:
        return [], [d["name"] for d in self.plan.delete_after_success]

    def after_update(self, guard: SignalGuard) -> None:
        """An older peagle's idle rule moved to AWS's scale-to-zero recipe; the update itself is done."""
        plan = self.plan
        if plan.scaling_move is None:
            return
        try:
            with guard.critical("PutScalingPolicy, DeleteScalingPolicy and DeleteAlarms"):
                for line in apply_move(self.session.client("application-autoscaling"),
                                       self.session.client("cloudwatch"), plan.scaling_move):
                    self.note(f"scaling of {plan.component}: {line}")
        except Exception as exc:  # noqa: BLE001 - the update itself is done
            self.note(f"could not move {plan.component} to AWS's scale-to-zero rule "
                      f"({_as_peagle_error(exc).one_line()}): '{self.recover}' finishes it")

    def status_of(self, described: dict[str, Any]) -> str:
        return described.get("InferenceComponentStatus", "InService")

    def moving_text(self) -> str:
        plan = self.plan
        return (f"{plan.component} moves to model {plan.target.model} ({plan.target.label()}) or rolls back to "
                f"{plan.current.model} ({plan.current.label()}); nothing was deleted")

    def switched_note(self) -> str:
        return f"UpdateInferenceComponent accepted: {self.plan.component} moves to model {self.plan.target.model}"

    def taken_note(self, error: PeagleError) -> str:
        return f"UpdateInferenceComponent's answer was lost ({error.one_line()}), but SageMaker took it"

    def accepted_hint(self) -> str:
        return f"SageMaker accepted the update: SageMaker may be moving {self.moving_text()}"

    def serves_new_hints(self, error: PeagleError) -> None:
        plan = self.plan
        _add_hint(error, f"{plan.component} serves model {plan.target.model} ({plan.target.label()}); finish "
                         f"with '{self.recover}' (tags, the previous model)")

    def still_serves(self) -> str:
        return f"{self.plan.component} still serves the old model ({self.plan.current.label()})"

    def alarm_stuck(self) -> str:
        return f"the acceptance alarm {self.moving.alarm.alarm_name} could not be put back"


def run_component_update(plan: ComponentUpdatePlan, session: Any, *, timeout_s: float = 3600,
                         on_progress: Progress | None = None, on_note: Callable[[str], None] | None = None,
                         sleep: Callable[[float], None] = time.sleep, clock: Callable[[], float] = time.monotonic,
                         handle_signals: bool = True) -> UpdateResult:
    return _Run(plan, session, sleep=sleep, note=on_note).run(timeout_s=timeout_s, clock=clock,
                                                              on_progress=on_progress, handle_signals=handle_signals)


__all__ = ["ComponentUpdatePlan", "MovePlan", "check_room", "plan_component_update", "prepare_update", "run_move",
           "run_component_update"]
