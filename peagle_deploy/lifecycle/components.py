"""Inference components: an endpoint's hosting shape, and peagle's components found, waited for, scaled, removed.

For every command that meets a component-based endpoint (`--hosting component`, docs/hosting.md):
- `hosting_of(described, tags)`: an endpoint's hosting shape and the components peagle made for it, from its
  DescribeEndpoint answer and its tags (no call); `list_components(sm, endpoint)` asks SageMaker which it hosts;
- `wait_component`: Creating -> InService (Failed: SageMaker's FailureReason, exit 6);
- `apply_scaling`: the plan's Application Auto Scaling and CloudWatch requests, in order, each alarm with its
  policy's real ARN; `on_written(step)` after each answer, so a rollback knows what exists;
- `remove_component`: what SageMaker needs gone first, in its order: the scaling policies and the scalable target,
  peagle's alarms (the wake-up alarm, and an older peagle's idle alarm), then the component itself (waited for
  until it is gone). Only what carries `peagle:managed=true` (the component's tags, each alarm's tags); the scalable
  target of a component peagle did not make is never touched;
- `read_component`: what `status` shows of one component (copies, instances, scaling, the scale-in rule, its alarm
  and whether it ever acted, the wake-up alarm, the cost so far from instance-hours).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from contextlib import nullcontext
from datetime import UTC, datetime
from typing import Any, Literal, NamedTuple

from pydantic import BaseModel, Field

from ..aws import error_code, is_lost_answer, is_not_found, translate_error
from ..errors import EndpointFailed
from ..autoscale import POLICY_NAME
from ..scale_to_zero import (
    COPY_DIMENSION,
    LEGACY_IDLE_POLICY,
    NAMESPACE,
    WAKE_POLICY,
    IdleRule,
    RegisteredScaling,
    ScalingRequest,
    intended_scaling,
    legacy_idle_alarm_name,
    resource_id,
    wake_alarm_name,
    with_policy_arns,
)
from ..log_groups import component_log_group
from ..tags import PeagleTags
from .autoscaling import _failed
from .outcome import Outcome
from .wait import Progress, poll_intervals, poll_until_in_service

COMPONENT = "component"
WAITING = {"Creating", "Updating"}
DELETE_WAIT_S = 900.0  # DeleteInferenceComponent until DescribeInferenceComponent says it is gone
ALARMS_SERVICE = "cloudwatch"
_COPIES = re.compile(r"\bto (\d+)\b")  # an activity's "Setting desired copy count to 0."


class HostingShape(BaseModel):
    """How an endpoint hosts its model, as its description and tags say (no call)."""

    hosting: Literal["endpoint", "component"]
    components: list[str] = Field(default_factory=list, description="the components peagle made for it (its "
                                                                    "peagle:components tag); [] when unknown")
    scale_to_zero: IdleRule | None = None


def hosting_of(described: dict[str, Any] | None, tags: dict[str, str] | list[dict[str, str]] | PeagleTags | None
               ) -> HostingShape:
    """An endpoint's hosting shape: component when peagle tagged it so, or when a variant reports
    ManagedInstanceScaling (only component-based variants carry it); its component names from peagle's tag."""
    peagle = tags if isinstance(tags, PeagleTags) else PeagleTags.from_aws(tags)
    variants = (described or {}).get("ProductionVariants") or []
    component = peagle.hosting == COMPONENT or any(v.get("ManagedInstanceScaling") for v in variants)
    if not component:
        return HostingShape(hosting="endpoint")
    return HostingShape(hosting="component", components=list(peagle.components), scale_to_zero=peagle.scale_to_zero)


def list_components(sm: Any, endpoint: str | None = None) -> list[dict[str, Any]]:
    """ListInferenceComponents summaries (of `endpoint`, or all of the region)."""
    kwargs = {"EndpointNameEquals": endpoint} if endpoint else {}
    return [c for page in sm.get_paginator("list_inference_components").paginate(**kwargs)
            for c in page.get("InferenceComponents", [])]


def describe_component(sm: Any, name: str) -> dict[str, Any] | None:
    try:
        return sm.describe_inference_component(InferenceComponentName=name)
    except Exception as exc:
        if is_not_found(exc):
            return None
        raise


class ComponentRef(NamedTuple):
    endpoint: str
    model: str | None
    arn: str


def models_in_use(sm: Any) -> dict[str, ComponentRef]:
    """component -> its endpoint, the model it names (`Specification.ModelName`) and its ARN, for every component
    of the region: a model a component names is in use as much as one a config names."""
    found = {}
    for summary in list_components(sm):
        described = describe_component(sm, summary["InferenceComponentName"])
        if described is not None:  # None: deleted since the listing
            found[summary["InferenceComponentName"]] = ComponentRef(
                summary.get("EndpointName", ""), (described.get("Specification") or {}).get("ModelName"),
                summary.get("InferenceComponentArn", ""))
    return found


def wait_component(sm: Any, name: str, *, timeout_s: float, sleep: Callable[[float], None],
                   clock: Callable[[], float], on_progress: Progress | None = None) -> dict[str, Any]:
    """Poll DescribeInferenceComponent until InService (its description), Failed (EndpointFailed with SageMaker's
    FailureReason) or the timeout (WaitTimeout). A poll that fails transiently is asked again."""
    return poll_until_in_service(
        lambda: sm.describe_inference_component(InferenceComponentName=name), what=f"inference component {name}",
        status_of=lambda described: described.get("InferenceComponentStatus", "Unknown"), waiting=WAITING,
        doing=lambda status, _elapsed: ("placing the component's copies: the model loads on the instance"
                                        if status in WAITING else status),
        failed=lambda status, reason: EndpointFailed(
            f"inference component {name} is {status}: {reason}",
            f"see why with 'peagle logs {name}' (CloudWatch log group {component_log_group(name)})"),
        timeout_hint=lambda described: f"remove it with 'peagle cleanup {described.get('EndpointName', name)} --yes'",
        timeout_s=timeout_s, sleep=sleep, clock=clock, on_progress=on_progress, report_misses=False)


def by_hand_component(component: str, region: str | None = None) -> str:
    """The by-hand check of vLLM's start-up lines in a component's log group."""
    from .verify import BY_HAND_PATTERN

    where = f" --region {region}" if region else ""
    return (f"aws logs tail {component_log_group(component)}{where} --since 1h | grep -iE '{BY_HAND_PATTERN}' once the copy "
            "has started")


# scaling: apply ---------------------------------------------------------------------------------------------------
def apply_scaling(aas: Any, cloudwatch: Any, requests: list[ScalingRequest],
                  on_written: Callable[[ScalingRequest], None] = lambda _r: None,
                  critical: Callable[[str], Any] = lambda _call: nullcontext(),
                  arns: dict[str, str] | None = None) -> dict[str, str]:
    """Send `requests` in order; each alarm gets its policy's ARN (`arns`: those of policies registered already,
    where only their alarm is sent). Returns policy name -> ARN. `critical(call)`: the context each write runs in
    (a deploy's `SignalGuard.critical`: a signal lets the write in flight finish, then stops before the next, so a
    rollback undoes, and names, only what was made)."""
    arns = dict(arns or {})
    for request in requests:
        body = with_policy_arns(request, arns)
        with critical(request.operation):
            if request.operation == "RegisterScalableTarget":
                aas.register_scalable_target(**body)
            elif request.operation == "PutScalingPolicy":
                arns[body["PolicyName"]] = aas.put_scaling_policy(**body)["PolicyARN"]
            else:
                cloudwatch.put_metric_alarm(**body)
        on_written(request)
    return arns


def read_registered(aas: Any, cloudwatch: Any, component: str) -> RegisteredScaling:
    """What Application Auto Scaling and CloudWatch hold for `component`: its scalable target, its policies (read
    only when a target is registered: none without one), its wake-up alarm. Reads only; an AWS error raises."""
    target, policies = read_copy_scaling(aas, component)
    alarms = metric_alarms(cloudwatch, wake_alarm_name(component))
    return RegisteredScaling(target=target, policies=policies, wake_alarm=alarms[0] if alarms else None)


def read_copy_scaling(aas: Any, component: str) -> tuple[dict[str, Any] | None, list[dict[str, Any]]]:
    """`component`'s scalable target on its copies (None: not registered) and its scaling policies (read only when a
    target is registered: none without one). Reads only; an AWS error raises."""
    rid = resource_id(component)
    targets = aas.describe_scalable_targets(ServiceNamespace=NAMESPACE, ResourceIds=[rid],
                                            ScalableDimension=COPY_DIMENSION).get("ScalableTargets", [])
    if not targets:
        return None, []
    policies = [p for page in aas.get_paginator("describe_scaling_policies").paginate(
        ServiceNamespace=NAMESPACE, ResourceId=rid, ScalableDimension=COPY_DIMENSION)
        for p in page.get("ScalingPolicies", [])]
    return targets[0], policies


def metric_alarms(cloudwatch: Any, *names: str) -> list[dict[str, Any]]:
    """The metric alarms of these names that exist (DescribeAlarms, every page)."""
    return [a for page in cloudwatch.get_paginator("describe_alarms").paginate(AlarmNames=list(names), AlarmTypes=[
        "MetricAlarm"]) for a in page.get("MetricAlarms", [])]


def scaling_gap(component: str, tags: PeagleTags, registered: RegisteredScaling) -> tuple[Any, list[str]]:
    """(the scaling the component's deploy asked for, or None; the steps of it not registered as asked), from
    peagle's tags (its copies, `peagle:scale-to-zero`, `peagle:copies-autoscale`) and what is registered."""
    intended = intended_scaling(component, copies=tags.instance_count or 1, idle=tags.scale_to_zero,
                                autoscale=tags.copies_autoscale, registered=registered)
    return intended, (intended.missing(registered) if intended is not None else [])


# removal ----------------------------------------------------------------------------------------------------------
def remove_scaling(aas: Any, component: str) -> list[Outcome]:
    """The component's scaling policies, then its scalable target (one Outcome each; none when not registered)."""
    from .autoscaling import _not_registered

    rid = resource_id(component)
    target = {"ServiceNamespace": NAMESPACE, "ResourceId": rid, "ScalableDimension": COPY_DIMENSION}
    try:
        registered = [t for page in aas.get_paginator("describe_scalable_targets").paginate(
            ServiceNamespace=NAMESPACE, ResourceIds=[rid], ScalableDimension=COPY_DIMENSION)
            for t in page.get("ScalableTargets", [])]
        policies = [p["PolicyName"] for page in aas.get_paginator("describe_scaling_policies").paginate(
            ServiceNamespace=NAMESPACE, ResourceId=rid, ScalableDimension=COPY_DIMENSION)
            for p in page.get("ScalingPolicies", [])] if registered else []
    except Exception as exc:  # noqa: BLE001 - an AWS failure becomes an outcome; anything else raises
        return [_failed("scalable_target", rid, exc)]
    outcomes = []
    for kind, name, call, extra in [*(("scaling_policy", p, aas.delete_scaling_policy, {"PolicyName": p})
                                      for p in policies),
                                    *((("scalable_target", rid, aas.deregister_scalable_target, {}),)
                                      if registered else ())]:
        try:
            call(**target, **extra)
            outcomes.append(Outcome(kind=kind, name=name, result="deleted"))  # type: ignore[arg-type]
        except Exception as exc:  # noqa: BLE001
            outcomes.append(Outcome(kind=kind, name=name, result="already gone") if _not_registered(exc)  # type: ignore[arg-type]
                            else _failed(kind, name, exc))
    return outcomes


def peagle_alarms(cloudwatch: Any, component: str, *others: str) -> list[dict[str, Any]]:
    """peagle's alarms of `component` that exist (DescribeAlarms by their names: the wake-up alarm and an older
    peagle's idle alarm), and the `others` named (status: target tracking's scale-in alarm)."""
    return metric_alarms(cloudwatch, wake_alarm_name(component), legacy_idle_alarm_name(component), *others)


def remove_alarms(cloudwatch: Any, component: str) -> list[Outcome]:
    """peagle's wake-up alarm of `component` (and an older peagle's idle alarm), each only if it carries
    peagle:managed=true."""
    try:
        found = peagle_alarms(cloudwatch, component)
    except Exception as exc:  # noqa: BLE001
        return [_failed("alarm", wake_alarm_name(component), exc)]
    outcomes, mine = [], []
    for alarm in found:
        try:
            tags = cloudwatch.list_tags_for_resource(ResourceARN=alarm["AlarmArn"]).get("Tags", [])
        except Exception as exc:  # noqa: BLE001
            outcomes.append(_failed("alarm", alarm["AlarmName"], exc))
            continue
        if not PeagleTags.from_aws(tags).managed:
            outcomes.append(Outcome(kind="alarm", name=alarm["AlarmName"], result="left",
                                    reason="not created by peagle (no peagle:managed tag)"))
        else:
            mine.append(alarm["AlarmName"])
    if mine:
        try:
            cloudwatch.delete_alarms(AlarmNames=mine)
            outcomes += [Outcome(kind="alarm", name=name, result="deleted") for name in mine]
        except Exception as exc:  # noqa: BLE001
            outcomes += [_failed("alarm", name, exc) for name in mine]
    return outcomes


def remove_component(sm: Any, aas: Any, cloudwatch: Any, name: str, *, require_managed: bool = True,
                     created_at: datetime | None = None, owned: bool = False, wait_s: float = DELETE_WAIT_S,
                     sleep: Callable[[float], None] | None = None,
                     clock: Callable[[], float] | None = None) -> list[Outcome]:
    """Scaling, alarms, then the component, waited for until it is gone (SageMaker keeps an endpoint's name busy
    while a component of it is deleting). The last Outcome is the component's. `owned`: peagle made a component of
    this name (its deploy, or the endpoint's peagle:components tag), so a scalable target left after the component
    is gone is peagle's too."""
    from .. import clock as peagle_clock

    sleep = sleep or peagle_clock.sleep
    clock = clock or peagle_clock.monotonic
    described = describe_component(sm, name)
    if described is None:  # its alarms (peagle's tag decides) and, where peagle made it, its scalable target
        return [*(remove_scaling(aas, name) if aas is not None and owned else []),
                *(remove_alarms(cloudwatch, name) if cloudwatch is not None else []),
                Outcome(kind="inference_component", name=name, result="already gone")]
    if require_managed or created_at is not None:
        from .tags import list_tags_if_present

        raw = list_tags_if_present(sm, described["InferenceComponentArn"])
        if raw is None:
            return [Outcome(kind="inference_component", name=name, result="already gone")]
        tags = PeagleTags.from_aws(raw)
        if require_managed and not tags.managed:
            return [Outcome(kind="inference_component", name=name, result="left",
                            reason="not created by peagle (no peagle:managed tag)")]
        if created_at is not None and tags.created_at != created_at:
            return [Outcome(kind="inference_component", name=name, result="left",
                            reason="same name, but not from this deploy (another peagle:created-at)")]
    outcomes = [*(remove_scaling(aas, name) if aas is not None else []),
                *(remove_alarms(cloudwatch, name) if cloudwatch is not None else [])]
    outcomes.append(_delete_component(sm, name, described, wait_s=wait_s, sleep=sleep, clock=clock))
    return outcomes


def _delete_component(sm: Any, name: str, described: dict[str, Any], *, wait_s: float,
                      sleep: Callable[[float], None], clock: Callable[[], float]) -> Outcome:
    start = clock()
    for delay in poll_intervals():
        status = (described or {}).get("InferenceComponentStatus")
        if status not in WAITING and status != "Deleting":
            try:
                sm.delete_inference_component(InferenceComponentName=name)
            except Exception as exc:  # noqa: BLE001
                if is_not_found(exc):
                    return Outcome(kind="inference_component", name=name, result="already gone")
                if not (is_lost_answer(exc) or _in_progress(exc)):
                    return _failed("inference_component", name, exc)
        try:
            described = describe_component(sm, name)
        except Exception as exc:  # noqa: BLE001 - a read failure: ask again until the time is up
            if translate_error(exc) is None:
                raise
            described = {"InferenceComponentStatus": "Deleting"}
        if described is None:
            return Outcome(kind="inference_component", name=name, result="deleted")
        if clock() - start >= wait_s:
            return Outcome(kind="inference_component", name=name, result="failed",
                           reason=f"still {described.get('InferenceComponentStatus')} after {int(wait_s)}s", exit_code=5)
        sleep(delay)
    raise AssertionError("unreachable")


def _in_progress(exc: BaseException) -> bool:
    """SageMaker's 'Cannot ... while it is in state ..._IN_PROGRESS': the delete is asked again once it settles."""
    from ..aws import error_message

    return error_code(exc) in ("ValidationException", "ValidationError") and "in_progress" in error_message(exc).lower()


def remove_endpoint_components(sm: Any, aas: Any, cloudwatch: Any, endpoint: str, *,
                               created_at: datetime | None = None, owned: list[str] = (),
                               wait_s: float = DELETE_WAIT_S) -> tuple[list[Outcome], list[str]]:
    """Every component of `endpoint` that is peagle's (with its scaling and alarms), before the endpoint goes, and
    what is left of those it names in `owned` (its peagle:components tag). Returns the outcomes and the components
    still there (someone else's, or one that would not go): while any is, the endpoint must stay (deleting it would
    strand them)."""
    hosted = [c["InferenceComponentName"] for c in list_components(sm, endpoint)]
    outcomes: list[Outcome] = []
    for name in [*hosted, *(n for n in owned if n not in hosted)]:
        outcomes += remove_component(sm, aas, cloudwatch, name, created_at=created_at, owned=name in owned,
                                     wait_s=wait_s)
    blocking = [o.name for o in outcomes if o.kind == "inference_component" and o.result in ("left", "failed")]
    return outcomes, blocking


def remove_stranded(sm: Any, aas: Any, cloudwatch: Any, endpoint: str | None = None) -> list[Outcome]:
    """peagle's components of an endpoint that no longer exists (`endpoint`, or any: deleted under them, SageMaker
    leaves them behind), with their scaling and alarms. Someone else's are not mentioned. On a mock that cannot list
    components (plain moto) there is none to remove where peagle made no model for a component-hosted endpoint;
    where it did, the mock's one line (`aws.MockLacksOperation`) stops the command."""
    from ..aws import MockLacksOperation
    from ..describe import describe

    try:
        listed = list_components(sm, endpoint)
    except MockLacksOperation:  # a plain moto server: none to find unless peagle made a component-hosted deploy here
        if not _component_models(sm, endpoint):
            return []
        raise
    outcomes: list[Outcome] = []
    gone: dict[str, bool] = {}
    for summary in listed:
        host = summary.get("EndpointName", "")
        if host not in gone:
            gone[host] = endpoint is not None or describe(sm, "endpoint", host) is None
        if gone[host]:
            outcomes += remove_component(sm, aas, cloudwatch, summary["InferenceComponentName"])
    return [o for o in outcomes if not (o.kind == "inference_component" and o.result == "left")]


def _component_models(sm: Any, endpoint: str | None) -> list[str]:
    """The models peagle made for a component-hosted endpoint (`endpoint`'s, or any): every component peagle makes
    names one, so where there is none, no component of peagle's can be stranded."""
    from .tags import list_tags_if_present

    found = []
    for page in sm.get_paginator("list_models").paginate():
        for model in page.get("Models", []):
            raw = list_tags_if_present(sm, model["ModelArn"])
            tags = PeagleTags.from_aws(raw) if raw is not None else None
            if tags is not None and tags.managed and tags.hosting == COMPONENT and (
                    endpoint is None or (tags.endpoint or model["ModelName"]) == endpoint):
                found.append(model["ModelName"])
    return found


# status ------------------------------------------------------------------------------------------------------------
SCALE_IN_GRACE_S = 600.0  # an alarm in ALARM this long with no scale-in after it: Application Auto Scaling did not act
# (it acts within a minute or two of its alarm; 600 s also covers target tracking's default ScaleInCooldown of 300 s)


class AlarmState(BaseModel):
    name: str
    state: str | None = None
    reason: str | None = None
    since: datetime | None = Field(None, description="StateUpdatedTimestamp: when it entered this state")


class ComponentStatus(BaseModel):
    """One component as SageMaker, Application Auto Scaling and CloudWatch report it now."""

    name: str
    status: str
    endpoint: str | None = None
    failure_reason: str | None = None
    desired_copies: int | None = None
    current_copies: int | None = None
    current_instances: int | None = Field(None, description="the endpoint variant's CurrentInstanceCount")
    desired_instances: int | None = None
    accelerators: float | None = None
    memory_mb: int | None = None
    scaling: str = Field("off", description="'on' (registered), 'off', or 'unknown' (could not be read)")
    min_copies: int | None = None
    max_copies: int | None = None
    policies: list[str] = Field(default_factory=list)
    idle: IdleRule | None = Field(None, description="scale to zero, as peagle's tag says")
    scale_in: Literal["target-tracking", "legacy-alarm"] | None = Field(
        None, description="what takes the copies down: target tracking's own scale-in (AWS's recipe), or an older "
                          "peagle's idle alarm and step policy (unconfirmed on AWS: 'peagle update NAME "
                          "--scale-to-zero' moves it)")
    scale_in_alarm: AlarmState | None = Field(None, description="the alarm whose ALARM state scales in: target "
                                              "tracking's AlarmLow, or the older idle alarm")
    last_scale_in: datetime | None = Field(None, description="the newest scaling activity that lowered the copies")
    wake_alarm: AlarmState | None = None
    idle_alarm: AlarmState | None = Field(None, description="an older peagle's idle alarm, where one is left")
    warning: str | None = Field(None, description="the scale-in rule is in ALARM and did not act, and what to do")
    scaling_intended: str | None = Field(None, description="the scaling its deploy asked for (scale to zero, "
                                         "--autoscale), from peagle's tags; None: its copies are fixed")
    scaling_registered: list[str] = Field(default_factory=list, description="the steps of it registered as asked")
    scaling_missing: list[str] = Field(default_factory=list, description="the steps of it not registered (or "
                                       "registered otherwise): 'peagle recover NAME' registers them")
    detail: str | None = Field(None, description="what could not be read")

    @property
    def unfinished(self) -> bool:
        """Something of what its deploy asked for is not there: the component itself, or part of its scaling."""
        return self.status == "missing" or bool(self.scaling_missing)


def read_component(sm: Any, aas: Any, cloudwatch: Any, name: str, described_endpoint: dict[str, Any],
                   tags: PeagleTags, *, now: datetime | None = None) -> ComponentStatus:
    """A read failure is said in `detail` and leaves its fields unknown; it never fails the status."""
    from .. import clock as peagle_clock

    found = describe_component(sm, name)
    if found is None:
        row = ComponentStatus(name=name, status="missing", idle=tags.scale_to_zero)
        _compare_scaling(row, tags, RegisteredScaling())  # none of it can be registered on no component
        return row
    runtime = found.get("RuntimeConfig") or {}
    requirements = (found.get("Specification") or {}).get("ComputeResourceRequirements") or {}
    variant = next(iter(described_endpoint.get("ProductionVariants") or []), {})
    row = ComponentStatus(name=name, status=found.get("InferenceComponentStatus", "Unknown"),
                          endpoint=found.get("EndpointName"), failure_reason=found.get("FailureReason"),
                          desired_copies=runtime.get("DesiredCopyCount"),
                          current_copies=runtime.get("CurrentCopyCount"),
                          current_instances=variant.get("CurrentInstanceCount"),
                          desired_instances=variant.get("DesiredInstanceCount"),
                          accelerators=requirements.get("NumberOfAcceleratorDevicesRequired"),
                          memory_mb=requirements.get("MinMemoryRequiredInMb"), idle=tags.scale_to_zero)
    problems = []
    rid = resource_id(name)
    low_alarm: str | None = None
    activities: list[dict[str, Any]] | None = None
    registered: RegisteredScaling | None = RegisteredScaling()  # None: part of it could not be read
    try:
        targets = aas.describe_scalable_targets(ServiceNamespace=NAMESPACE, ResourceIds=[rid],
                                                ScalableDimension=COPY_DIMENSION).get("ScalableTargets", [])
        if targets:
            row.scaling, row.min_copies, row.max_copies = "on", targets[0].get("MinCapacity"), targets[0].get(
                "MaxCapacity")
            policies = aas.describe_scaling_policies(ServiceNamespace=NAMESPACE, ResourceId=rid,
                                                     ScalableDimension=COPY_DIMENSION).get("ScalingPolicies", [])
            registered = RegisteredScaling(target=targets[0], policies=policies)
            row.policies = [p["PolicyName"] for p in policies]
            row.scale_in, low_alarm = _scale_in_rule(policies)
            if row.scale_in is not None:
                activities = [a for page in aas.get_paginator("describe_scaling_activities").paginate(
                    ServiceNamespace=NAMESPACE, ResourceId=rid, ScalableDimension=COPY_DIMENSION)
                    for a in page.get("ScalingActivities", [])]
    except Exception as exc:  # noqa: BLE001
        error = translate_error(exc)
        if error is None:
            raise
        row.scaling = "unknown"
        registered = None
        problems.append(f"Application Auto Scaling: {error.one_line()}")
    if cloudwatch is not None:
        try:
            for alarm in peagle_alarms(cloudwatch, name, *([low_alarm] if low_alarm else [])):
                state = AlarmState(name=alarm["AlarmName"], state=alarm.get("StateValue"),
                                   reason=alarm.get("StateReason"), since=_utc(alarm.get("StateUpdatedTimestamp")))
                if alarm["AlarmName"] == wake_alarm_name(name):
                    row.wake_alarm = state
                    if registered is not None:
                        registered = registered.model_copy(update={"wake_alarm": alarm})
                elif alarm["AlarmName"] == legacy_idle_alarm_name(name):
                    row.idle_alarm = state
                if alarm["AlarmName"] == low_alarm or (row.scale_in == "legacy-alarm"
                                                       and alarm["AlarmName"] == legacy_idle_alarm_name(name)):
                    row.scale_in_alarm = state
        except Exception as exc:  # noqa: BLE001
            error = translate_error(exc)
            if error is None:
                raise
            registered = None
            problems.append(f"CloudWatch: {error.one_line()}")
    if registered is not None and cloudwatch is not None:  # without the wake-up alarm read, nothing is compared
        _compare_scaling(row, tags, registered)
    if activities is not None:
        row.last_scale_in = last_scale_in(activities)
        row.warning = _did_not_act(row, row.endpoint or name, now or peagle_clock.now())
    row.detail = "; ".join(problems) or None
    return row


def _compare_scaling(row: ComponentStatus, tags: PeagleTags, registered: RegisteredScaling) -> None:
    """The scaling its deploy asked for against what is registered (`row.scaling_*`)."""
    intended, missing = scaling_gap(row.name, tags, registered)
    if intended is None:
        return
    row.scaling_intended = intended.describe()
    row.scaling_missing = [intended.step_label(step) for step in missing]
    row.scaling_registered = [intended.step_label(step) for step in intended.steps if step not in missing]


def _scale_in_rule(policies: list[dict[str, Any]]) -> tuple[Literal["target-tracking", "legacy-alarm"] | None,
                                                            str | None]:
    """Which rule scales the copies in, and target tracking's scale-in alarm (its AlarmLow) by name."""
    if any(p.get("PolicyName") == LEGACY_IDLE_POLICY for p in policies):
        return "legacy-alarm", None
    for policy in policies:
        config = policy.get("TargetTrackingScalingPolicyConfiguration")
        if config is not None and not config.get("DisableScaleIn"):
            low = next((a.get("AlarmName") for a in policy.get("Alarms") or []
                        if "-AlarmLow-" in (a.get("AlarmName") or "")), None)
            return "target-tracking", low
    return None, None


def last_scale_in(activities: list[dict[str, Any]]) -> datetime | None:
    """The newest successful scaling activity that lowered the copy count ('Setting desired copy count to N.', N
    below the count before it, or 0)."""
    changes = []
    for activity in activities:
        match = _COPIES.search(activity.get("Description") or "")
        started = _utc(activity.get("StartTime"))
        if match is not None and started is not None and activity.get("StatusCode") not in ("Failed", "Unfulfilled"):
            changes.append((started, int(match[1])))
    found, before = None, None
    for when, count in sorted(changes):
        if count == 0 or (before is not None and count < before):
            found = when
        before = count
    return found


def _did_not_act(row: ComponentStatus, endpoint: str, now: datetime) -> str | None:
    """One line when the scale-in rule's alarm has been in ALARM a while, copies are above the minimum, and no
    scaling activity lowered them since: the rule did not act, and the copies bill."""
    alarm = row.scale_in_alarm
    if alarm is None or alarm.state != "ALARM" or alarm.since is None or row.desired_copies is None \
            or row.min_copies is None or row.desired_copies <= row.min_copies:
        return None
    if (now - alarm.since).total_seconds() < SCALE_IN_GRACE_S:
        return None
    if row.last_scale_in is not None and row.last_scale_in >= alarm.since:
        return None
    since = alarm.since.strftime("%Y-%m-%d %H:%M UTC")
    copies = f"{row.desired_copies} cop{'y' if row.desired_copies == 1 else 'ies'}"
    if row.scale_in == "legacy-alarm":
        todo = (f"move it to AWS's rule (target tracking's own scale-in) with 'peagle update {endpoint} "
                "--scale-to-zero'")
    else:
        todo = (f"see why with 'aws application-autoscaling describe-scaling-activities --service-namespace "
                f"sagemaker --resource-id {resource_id(row.name)} --include-not-scaled-activities', and take it to "
                f"zero by hand with 'aws sagemaker update-inference-component-runtime-config "
                f"--inference-component-name {row.name} --desired-runtime-config CopyCount=0'")
    return (f"warning: the scale-in rule of {row.name} did not act: its alarm {alarm.name} has been in ALARM since "
            f"{since} and Application Auto Scaling made no scale-in since, so {copies} keep billing: {todo}")


def _utc(value: Any) -> datetime | None:
    if not isinstance(value, datetime):
        return None
    return value if value.tzinfo else value.replace(tzinfo=UTC)


def summary(row: ComponentStatus) -> str:
    """One line for `status`: copies, instances, the scaling (the scale-in rule, its alarm, whether it ever acted)
    and the wake-up."""
    if row.status == "missing":
        return f"inference component {row.name} missing: SageMaker holds no component of that name"
    copies = f"{_n(row.current_copies)}/{_n(row.desired_copies)} copies"
    instances = f"{_n(row.current_instances)} instance{'s' if row.current_instances != 1 else ''}"
    text = f"inference component {row.name} {row.status}: {copies}, {instances}"
    if row.scaling == "on":
        text += f"; copies {row.min_copies}-{row.max_copies}"
        alarm = f"alarm {row.scale_in_alarm.state}" if row.scale_in_alarm else "no alarm!"
        acted = (f"last scaled in {row.last_scale_in.strftime('%Y-%m-%d %H:%M UTC')}" if row.last_scale_in
                 else "not scaled in yet")
        if row.scale_in == "target-tracking":
            what = "to zero after about 15 min idle" if row.min_copies == 0 else "scale-in"
            text += f", {what} (target tracking {POLICY_NAME}, {alarm}; {acted})"
        elif row.scale_in == "legacy-alarm":
            text += (f", to zero by an older peagle's idle rule ({LEGACY_IDLE_POLICY}, {alarm}; {acted}; unconfirmed "
                     f"on AWS: 'peagle update {row.endpoint or row.name} --scale-to-zero' moves it to AWS's rule)")
        if WAKE_POLICY in row.policies:
            text += f", wake-up {WAKE_POLICY}" + (f" (alarm {row.wake_alarm.state})" if row.wake_alarm
                                                 else " (no alarm!)")
    elif row.scaling == "unknown":
        text += "; scaling unknown"
    return text


def scaling_line(row: ComponentStatus) -> str | None:
    """One line for `status` where the scaling its deploy asked for is not all registered: what was asked, what is
    registered, what is missing (None: all of it is, or it asked for none)."""
    if row.scaling_intended is None or not row.scaling_missing:
        return None
    return (f"scaling intended: {row.scaling_intended}; registered: {', '.join(row.scaling_registered) or 'nothing'}"
            f"; missing: {', '.join(row.scaling_missing)}")


def _n(value: int | None) -> str:
    return "?" if value is None else str(value)


# cost so far ---------------------------------------------------------------------------------------------------------
class CostEstimate(BaseModel):
    usd: float | None
    instance_hours: float | None
    how: str


def estimate_cost(aas: Any, name: str, *, since: datetime | None, start_copies: int, per_instance: int,
                  usd_per_instance_hour: float | None, now: datetime | None = None) -> CostEstimate:
    """Instance-hours since `since` (the endpoint's creation): the copy count over time, from `start_copies` and
    Application Auto Scaling's scaling activities for the component (each 'Setting desired copy count to N'),
    in whole instances of `per_instance` copies, times the hourly price of one instance. An instance managed
    scaling keeps a while after its last copy goes is not counted (minutes per scale-in)."""
    how = ("instance-hours from the component's copy count over time (Application Auto Scaling's scaling "
           "activities since the endpoint was created), x the hourly price of one instance; an instance's last "
           "minutes after its copy goes are not counted")
    now = now or datetime.now(UTC)
    if since is None:
        return CostEstimate(usd=None, instance_hours=None, how="unknown: no creation time")
    try:
        activities = [a for page in aas.get_paginator("describe_scaling_activities").paginate(
            ServiceNamespace=NAMESPACE, ResourceId=resource_id(name), ScalableDimension=COPY_DIMENSION)
            for a in page.get("ScalingActivities", [])]
    except Exception as exc:  # noqa: BLE001
        error = translate_error(exc)
        if error is None:
            raise
        return CostEstimate(usd=None, instance_hours=None, how=f"unknown: {error.one_line()}")
    changes = []
    for activity in activities:
        match = _COPIES.search(activity.get("Description") or "")
        started = activity.get("StartTime")
        if match is None or not isinstance(started, datetime) or activity.get("StatusCode") in ("Failed",
                                                                                              "Unfulfilled"):
            continue
        changes.append((started if started.tzinfo else started.replace(tzinfo=UTC), int(match[1])))
    hours, copies, moment = 0.0, start_copies, since
    for when, count in sorted(changes):
        if when > moment:
            hours += math.ceil(copies / per_instance) * (min(when, now) - moment).total_seconds() / 3600
            moment = when
        copies = count
    if now > moment:
        hours += math.ceil(copies / per_instance) * (now - moment).total_seconds() / 3600
    usd = None if usd_per_instance_hour is None else round(hours * usd_per_instance_hour, 2)
    return CostEstimate(usd=usd, instance_hours=round(hours, 4), how=how)

