"""Inference components for the emulator: SageMaker's second hosting shape, of which moto (5.2) has nothing.

What `InferenceComponents` (the emulator's `components`) adds, in both modes (docs/ci.md lists each rule and the
source of each refusal text):
- component-based endpoint configs: a production variant without `ModelName`, with `ManagedInstanceScaling`
  (`MinInstanceCount` 0 allowed) and `RoutingConfig`, and the config's `ExecutionRoleArn` (moto fails on a variant
  without a model and drops the role); DescribeEndpoint reports each such variant's instances
  (`CurrentInstanceCount`, `DesiredInstanceCount`), `ManagedInstanceScaling` and `RoutingConfig`;
- Create/Describe/List/Update/UpdateRuntimeConfig/DeleteInferenceComponent, tags on the component's ARN, statuses
  Creating -> InService or Failed with a reason (`script`), Updating, Deleting; SageMaker's refusals; an update of
  the specification is rolling: its new copies are placed BESIDE the old ones, which serve until the new ones do
  (botocore's model: SageMaker "provisions capacity on the new endpoint fleet, routes traffic to that fleet, and
  terminates capacity on the old endpoint fleet"), so it needs room for both;
- DeleteEndpoint of an endpoint that still hosts components is refused (`delete_endpoint_with_components`:
  "refuse", *assumed*, as the console does; "strand" leaves them behind, for tests of peagle's leftovers);
- copies placed on the variant's instances by what each copy needs (`ComputeResourceRequirements`: accelerators,
  memory, CPU cores) against the instance type's hardware (AWS's own figures: the EC2 instance-type data moto
  ships); managed instance scaling adds instances up to `MaxInstanceCount` for copies that do not fit and releases
  an instance left without copies after `instance_release_s`, down to `MinInstanceCount`;
- invocations naming `InferenceComponentName`: answered while the component has a copy in service, refused
  (SageMaker's no-capacity ValidationError) when it has none, which counts in `NoCapacityInvocationFailures`
  (published to CloudWatch, where `alarm_emulation` evaluates the alarms on it);
- time: everything that takes time (an instance starting, a copy loading, idle scale-in, an alarm's period) runs on
  `emulator.clock`; every AWS call first brings the emulated world of every region up to `clock()` (`settle`).
  `ManualClock` is a clock a test advances, so nothing sleeps.
- regions: each region's components, fleets and scaling are its own (moto's per-region backends); every read and
  write takes the region of the call (`region=`, default the emulator's).

Resources live on moto's SageMaker backend (a moto reset or the end of `mock_aws` forgets them); the settings (scripts,
timings, the activity log) on this object.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime, timezone
from functools import cache
from typing import Any
from unittest import mock
from urllib.parse import unquote

from . import alarm_emulation, autoscaling_emulation
from .autoscaling_emulation import IC_DIMENSION
from .patching import stacked

ARN_KIND = "inference-component"
COMPONENT_HEADER = "X-Amzn-SageMaker-Inference-Component"
MAX_STEPS = 10_000  # events settled in one call at most: a bound, never reached by a test's clock
CLOCK_SLACK_S = 1e-3  # an event this close after `now` is due: sums of float seconds differ in their last bits

# SageMaker's own words where a source was found (docs/ci.md names it); the others are the emulator's (assumed).
NO_CAPACITY = ("Inference Component has no capacity to process this request. ApplicationAutoScaling may be "
               "in-progress (if configured) or try to increase the capacity by invoking "
               "UpdateInferenceComponentRuntimeConfig API.")
NOT_ENOUGH_HARDWARE = ("There is not enough hardware resources on the instances for this endpoint to create a copy "
                       "of the inference component.")
HEADER_REQUIRED = ("Inference Component Name header is required for endpoints to which you plan to deploy inference "
                   "components.")
HEADER_NOT_ALLOWED = ("Inference Component Name header is not allowed for endpoints to which you dont plan to deploy "
                      "inference components. Please remove the Inference Component Name header and try again.")
COPY_COUNT_AT_CREATE = "Inference components copy count an integer larger than 0"
MANAGED_SCALING_NEEDS_COMPONENTS = "ManagedInstanceScaling is only supported for inference component endpoints."


def _refuse(message: str) -> Exception:
    from moto.sagemaker.exceptions import ValidationError

    return ValidationError(message=message)


class ManualClock:
    """A clock for `emulator.clock` that moves only when the test says (`clock.advance(900)`) or, with `per_call_s`,
    by that much at every AWS call the emulator answers: a client that polls (peagle waking a component, in a
    subprocess) then sees time pass at its own pace, with no real waiting and no dependence on the machine's speed."""

    def __init__(self, start: float | None = None, per_call_s: float = 0.0):
        self.now = time.time() if start is None else start
        self.per_call_s = per_call_s

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> float:
        self.now += seconds
        return self.now

    def on_call(self) -> None:
        self.now += self.per_call_s


# hardware -------------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Hardware:
    accelerators: int
    memory_mib: int
    vcpus: int


@cache
def _ec2_instance_types() -> dict[str, Any]:
    from moto.utilities.utils import load_resource

    return load_resource("ec2/resources/instance_types.json")


def hardware(instance_type: str) -> Hardware | None:
    """An ml.* type's hardware from AWS's EC2 instance-type data (as moto ships it); None for a type it lacks."""
    facts = _ec2_instance_types().get(instance_type.removeprefix("ml."))
    if facts is None:
        return None
    accelerators = sum(g.get("Count", 0) for g in (facts.get("GpuInfo") or {}).get("Gpus", []))
    accelerators += sum(n.get("Count", 0) for n in (facts.get("NeuronInfo") or {}).get("NeuronDevices", []))
    return Hardware(accelerators, int(facts["MemoryInfo"]["SizeInMiB"]), int(facts["VCpuInfo"]["DefaultVCpus"]))


@dataclass(frozen=True)
class Need:
    """What one copy takes from an instance (`ComputeResourceRequirements`)."""

    accelerators: float = 0.0
    memory_mib: float = 0.0
    cpus: float = 0.0

    @classmethod
    def of(cls, requirements: dict[str, Any] | None) -> Need:
        r = requirements or {}
        return cls(float(r.get("NumberOfAcceleratorDevicesRequired") or 0),
                   float(r.get("MinMemoryRequiredInMb") or 0), float(r.get("NumberOfCpuCoresRequired") or 0))

    def __add__(self, other: Need) -> Need:
        return Need(self.accelerators + other.accelerators, self.memory_mib + other.memory_mib,
                    self.cpus + other.cpus)

    def fits(self, box: Hardware | None) -> bool:
        return box is None or (self.accelerators <= box.accelerators and self.memory_mib <= box.memory_mib
                               and self.cpus <= box.vcpus)


# the emulated world -----------------------------------------------------------------------------------------------
@dataclass(eq=False)
class Instance:
    id: str
    ready_at: float
    idle_since: float | None = None


@dataclass(eq=False)
class Copy:
    instance: Instance
    ready_at: float


@dataclass(eq=False)
class Fleet:
    """One component-based variant's instances."""

    endpoint_name: str
    variant_name: str
    instance_type: str
    box: Hardware | None
    minimum: int
    maximum: int
    managed: bool
    scaling: dict[str, Any] | None
    routing: dict[str, Any] | None
    instances: list[Instance] = field(default_factory=list)


@dataclass(eq=False)
class Component:
    name: str
    arn: str
    endpoint_name: str
    endpoint_arn: str
    variant_name: str
    specification: dict[str, Any]
    need: Need
    desired: int
    status: str  # Creating, InService, Updating (a specification update), Failed, Deleting
    created: float
    modified: float
    tags: list[dict[str, str]] = field(default_factory=list)
    copies: list[Copy] = field(default_factory=list)
    failure_reason: str | None = None
    polls: int = 0
    polls_needed: int = 0
    final: tuple[str, str | None] = ("InService", None)  # how its Creating ends (the script at its creation)
    rollback: tuple[dict[str, Any], Need, str] | None = None  # a failing update: the specification it goes back to
    last_invocation: float | None = None
    last_scale_out: float | None = None
    orphaned: bool = False  # its endpoint was deleted under it
    retiring: list[Copy] = field(default_factory=list)  # a rolling update's old copies: they serve until it ends
    retiring_need: Need = field(default_factory=lambda: Need())

    def current(self, now: float) -> int:
        ready = sum(1 for c in self.copies if c.ready_at <= now)
        return min(self.desired, ready + len(self.retiring)) if self.retiring else ready

    def status_at(self, now: float) -> str:
        if self.status == "InService" and any(c.ready_at > now for c in self.copies):
            return "Updating"  # a copy-count change is under way (SageMaker's UPDATE_RC_IN_PROGRESS)
        return self.status


@dataclass
class _Store:
    components: dict[str, Component] = field(default_factory=dict)
    fleets: dict[str, Fleet] = field(default_factory=dict)
    settled_at: float | None = None
    serial: int = 0


def _store(backend: Any) -> _Store:
    store = backend.__dict__.get("_peagle_components")
    if store is None:
        store = backend.__dict__["_peagle_components"] = _Store()
    return store


@dataclass
class ComponentScript:
    """How later Create/Update/DeleteInferenceComponent calls play out, counted in DescribeInferenceComponent calls."""

    creating_polls: int = 0
    final: str = "InService"
    reason: str | None = None
    updating_polls: int = 0
    deleting_polls: int = 0
    update_fails: str | None = None  # a specification update's copies fail with this reason: rolled back


@dataclass
class ScalingTimes:
    """Seconds on the emulator's clock. The defaults make scaling immediate except the releases, whose AWS figures
    (documented) are what scale-to-zero tests are about."""

    instance_start_s: float = 0.0  # a new instance: from the scaling decision to in service
    copy_start_s: float = 0.0  # a copy on a ready instance: weights, start-up, health check
    instance_release_s: float = 600.0  # an instance left without copies, until managed scaling releases it
    alarm_lag_s: float = 0.0  # a period's end to its alarm's evaluation
    scale_in_idle_s: float | None = None  # target tracking's idle window; None: AWS's (15 minutes)


class InferenceComponents:
    """The emulator's inference components (`emulator.components`); see the module docstring."""

    def __init__(self, emulator: Any, account: str):
        self.emulator = emulator
        self.account = account
        self.scripted = ComponentScript()
        self.times = ScalingTimes()
        self.activities: list[dict[str, Any]] = []  # every copy-count change: time, region, component, from, to, cause
        # DeleteEndpoint of an endpoint that still hosts components: "refuse" (assumed, as the console does) or
        # "strand" (SageMaker leaves them behind, InService): peagle handles both
        self.delete_endpoint_with_components = "refuse"
        # False: a scale-in alarm goes to ALARM and Application Auto Scaling does not act on it (what a contract
        # test of the real service would catch; `peagle status` must say so)
        self.scale_in_acts = True
        self._lock = threading.RLock()

    # configuration (tests and users' CI) ----------------------------------------------------------------------
    def script(self, creating_polls: int = 0, final: str = "InService", reason: str | None = None,
               updating_polls: int = 0, deleting_polls: int = 0, update_fails: str | None = None) -> None:
        """Later components stay Creating for `creating_polls` describes, then turn `final` (Failed: with `reason`);
        an UpdateInferenceComponent is Updating for `updating_polls` describes; a delete Deleting for
        `deleting_polls`. `update_fails`: a later specification update's new copies fail with this reason, and the
        component goes back to its previous specification, InService, the reason in its FailureReason (SageMaker's
        rollback of a failed update; the exact FailureReason wording is assumed)."""
        self.scripted = ComponentScript(creating_polls, final,
                                        reason or ("scripted failure" if final == "Failed" else None),
                                        updating_polls, deleting_polls, update_fails)

    def reset(self) -> None:
        """Default scripts and times, no activities (the resources themselves go with moto's reset)."""
        self.scripted, self.times = ComponentScript(), ScalingTimes()
        self.activities.clear()
        self.delete_endpoint_with_components, self.scale_in_acts = "refuse", True

    def scaling(self, **times: float | None) -> None:
        """Set `ScalingTimes` fields, e.g. `scaling(instance_start_s=100, copy_start_s=300)`."""
        for name, value in times.items():
            if not hasattr(self.times, name):
                raise TypeError(f"no scaling time {name!r}; known: {sorted(vars(self.times))}")
            setattr(self.times, name, value)

    # reads (no describe polls counted) ------------------------------------------------------------------------
    def state(self, name: str, region: str | None = None) -> dict[str, Any] | None:
        """A component as SageMaker holds it now: status, desired and current copies, endpoint, instances used."""
        with self._lock:
            self.settle_all()
            return self.peek(name, region)

    def peek(self, name: str, region: str | None = None) -> dict[str, Any] | None:
        """`state` without bringing the world up to the clock first (for code that runs inside `settle`)."""
        with self._lock:
            component = self._components(region).get(name)
            if component is None:
                return None
            now = self.emulator.clock()
            return {"status": component.status_at(now), "desired": component.desired,
                    "current": component.current(now), "endpoint": component.endpoint_name,
                    "instances": sorted({c.instance.id for c in component.copies}),
                    "failure_reason": component.failure_reason, "orphaned": component.orphaned}

    def names(self, region: str | None = None) -> list[str]:
        """Every inference component in the emulated region (orphaned ones included)."""
        with self._lock:
            return sorted(self._components(region))

    def instances(self, endpoint_name: str, region: str | None = None) -> dict[str, int] | None:
        """A component-based endpoint's instances now: {"current": in service, "desired": all}; None otherwise."""
        with self._lock:
            self.settle_all()
            fleet = _store(self._backend(region=region)).fleets.get(endpoint_name)
            if fleet is None:
                return None
            now = self.emulator.clock()
            return {"current": sum(1 for i in fleet.instances if i.ready_at <= now), "desired": len(fleet.instances)}

    def create_stack(self, name: str, *, instance_type: str = "ml.g7e.24xlarge", components: int = 1,
                     copies: int = 1, accelerators: int = 1, memory_mb: int = 1024, min_instances: int = 0,
                     max_instances: int = 1, scale_to_zero: bool = False,
                     tags: list[dict[str, str]] | None = None) -> list[str]:
        """A component-based endpoint named `name` with `components` components (`NAME-1`, ...), as another tool
        would create it (no peagle tags unless given); with `scale_to_zero`, each also gets a scalable target (min
        0), a target-tracking and a step-scaling policy and a NoCapacityInvocationFailures alarm. Returns the
        component names. Through boto3, so every body is checked like a user's."""
        sm = self.emulator.client("sagemaker")
        tag_list = list(tags or [])
        sm.create_model(ModelName=name, ExecutionRoleArn=self.emulator.role_arn, Tags=tag_list, PrimaryContainer={
            "Image": f"{self.account}.dkr.ecr.{self.emulator.region}.amazonaws.com/other:1"})
        sm.create_endpoint_config(EndpointConfigName=name, ExecutionRoleArn=self.emulator.role_arn, Tags=tag_list,
                                  ProductionVariants=[{
                                      "VariantName": "AllTraffic", "InstanceType": instance_type,
                                      "InitialInstanceCount": max(1, min_instances),
                                      "ManagedInstanceScaling": {"Status": "ENABLED", "MinInstanceCount": min_instances,
                                                                 "MaxInstanceCount": max_instances},
                                      "RoutingConfig": {"RoutingStrategy": "LEAST_OUTSTANDING_REQUESTS"}}])
        sm.create_endpoint(EndpointName=name, EndpointConfigName=name, Tags=tag_list)
        for _ in range(1000):  # scripted Creating describes (`script_endpoints`), bounded
            if sm.describe_endpoint(EndpointName=name)["EndpointStatus"] != "Creating":
                break
        names = [f"{name}-{i + 1}" for i in range(components)]
        for component in names:
            sm.create_inference_component(
                InferenceComponentName=component, EndpointName=name, VariantName="AllTraffic", Tags=tag_list,
                Specification={"ModelName": name, "ComputeResourceRequirements": {
                    "NumberOfAcceleratorDevicesRequired": accelerators, "MinMemoryRequiredInMb": memory_mb}},
                RuntimeConfig={"CopyCount": copies})
            if scale_to_zero:
                self._wake_up_wiring(component, max_copies=max(copies, 1))
        return names

    def _wake_up_wiring(self, component: str, max_copies: int) -> None:
        aas, cw = self.emulator.client("application-autoscaling"), self.emulator.client("cloudwatch")
        target = {"ServiceNamespace": "sagemaker", "ResourceId": f"inference-component/{component}",
                  "ScalableDimension": IC_DIMENSION}
        aas.register_scalable_target(**target, MinCapacity=0, MaxCapacity=max_copies)
        aas.put_scaling_policy(**target, PolicyName=f"{component}-target", PolicyType="TargetTrackingScaling",
                               TargetTrackingScalingPolicyConfiguration={"TargetValue": 5.0, "PredefinedMetricSpecification": {
                                   "PredefinedMetricType": "SageMakerInferenceComponentConcurrentRequestsPerCopyHighResolution"}})
        step = aas.put_scaling_policy(**target, PolicyName=f"{component}-wake", PolicyType="StepScaling",
                                      StepScalingPolicyConfiguration={
                                          "AdjustmentType": "ChangeInCapacity", "MetricAggregationType": "Maximum",
                                          "Cooldown": 60, "StepAdjustments": [{"MetricIntervalLowerBound": 0,
                                                                               "ScalingAdjustment": 1}]})
        cw.put_metric_alarm(AlarmName=f"{component}-wake", AlarmActions=[step["PolicyARN"]],
                            MetricName="NoCapacityInvocationFailures", Namespace="AWS/SageMaker", Statistic="Maximum",
                            Dimensions=[{"Name": "InferenceComponentName", "Value": component}], Period=30,
                            EvaluationPeriods=1, DatapointsToAlarm=1, Threshold=1,
                            ComparisonOperator="GreaterThanOrEqualToThreshold", TreatMissingData="missing")

    # the world's clockwork ------------------------------------------------------------------------------------
    def _backend(self, account: str | None = None, region: str | None = None) -> Any:
        from moto.sagemaker.models import sagemaker_backends

        return sagemaker_backends[account or self.account][region or self.emulator.region]

    def _components(self, region: str | None = None) -> dict[str, Component]:
        return _store(self._backend(region=region)).components

    def on_call(self) -> None:
        """An AWS call arrived: the clock's `on_call` (ManualClock's per-call step), then `settle_all`."""
        tick = getattr(self.emulator.clock, "on_call", None)
        if callable(tick):
            tick()
        self.settle_all()

    def settle_all(self) -> None:
        """`settle` every region that has components or component-based endpoints (and the emulator's own)."""
        from moto.sagemaker.models import sagemaker_backends

        with self._lock:
            regions = {self.emulator.region} | {
                region for region, backend in dict.items(sagemaker_backends[self.account])
                if backend.__dict__.get("_peagle_components") is not None}
            for region in sorted(regions):
                self.settle(region=region)

    def settle(self, account: str | None = None, region: str | None = None) -> None:
        """Bring the emulated world up to `emulator.clock()`: every event due (an instance released, target tracking's
        idle scale-in, an alarm's evaluation and its scaling action) in time order."""
        from moto.applicationautoscaling.models import applicationautoscaling_backends
        from moto.cloudwatch.models import cloudwatch_backends

        account, region = account or self.account, region or self.emulator.region
        with self._lock:
            backend = self._backend(account, region)
            store = _store(backend)
            now = self.emulator.clock()
            cursor = store.settled_at if store.settled_at is not None and store.settled_at <= now else now
            aas = applicationautoscaling_backends[account][region]
            cloudwatch = cloudwatch_backends[account][region]

            def run_action(arn: str, alarm: Any, value: float, when: float) -> None:
                autoscaling_emulation.run_policy(self, aas, arn, value, float(alarm.threshold), when, region)

            for _ in range(MAX_STEPS):
                for component in list(store.components.values()):  # scripted transitions due by `cursor`
                    self._poll(backend, component, counted=False, at=cursor)
                due = [*self._release_events(store), *self._transition_events(backend, store),
                       *autoscaling_emulation.target_tracking_events(self, aas, store, region),
                       *alarm_emulation.evaluations(cloudwatch, cursor, self.times.alarm_lag_s, run_action)]
                due = [(min(max(when, cursor), now), act) for when, act in due if when <= now + CLOCK_SLACK_S]
                if not due:
                    break
                when, act = min(due, key=lambda item: item[0])
                act(when)
                self._place_waiting(store, when)
                cursor = when
            store.settled_at = now
            for component in list(store.components.values()):
                self._poll(backend, component, counted=False, at=now)

    def _transition_events(self, backend: Any, store: _Store) -> Iterator[tuple[float, Callable[[float], None]]]:
        """A Creating or Updating component whose describes are done turns InService (or Failed) when its last copy
        is in service (an update of a component at zero copies: at once)."""
        for component in store.components.values():
            if component.status in ("Creating", "Updating") and component.polls >= component.polls_needed and (
                    component.copies or (component.status == "Updating" and component.desired == 0)):

                def finish(when: float, component: Component = component) -> None:
                    self._poll(backend, component, counted=False, at=when)

                yield max((c.ready_at for c in component.copies), default=component.modified), finish

    def _release_events(self, store: _Store) -> Iterator[tuple[float, Callable[[float], None]]]:
        for fleet in store.fleets.values():
            idle = [i for i in fleet.instances if i.idle_since is not None]
            if fleet.managed and idle and len(fleet.instances) > fleet.minimum:
                instance = min(idle, key=lambda i: i.idle_since or 0.0)

                def release(when: float, fleet: Fleet = fleet, instance: Instance = instance) -> None:
                    fleet.instances.remove(instance)

                yield (instance.idle_since or 0.0) + self.times.instance_release_s, release

    def set_desired(self, name: str, copies: int, cause: str, when: float | None = None,
                    region: str | None = None) -> None:
        """DesiredCopyCount := `copies` (Application Auto Scaling and UpdateInferenceComponentRuntimeConfig):
        copies are placed (or removed) at once, each in service after the scaling times."""
        with self._lock:
            store = _store(self._backend(region=region))
            component = store.components.get(name)
            if component is None or component.status in ("Failed", "Deleting") or component.orphaned:
                return
            now = self.emulator.clock() if when is None else when
            self.activities.append({"time": now, "region": region or self.emulator.region, "component": name,
                                    "from": component.desired, "to": copies, "cause": cause})
            if copies > component.desired:
                component.last_scale_out = now
            component.desired = copies
            component.modified = now
            self._fit_copies(store, component, now)

    def _fit_copies(self, store: _Store, component: Component, now: float) -> None:
        while len(component.copies) > component.desired:  # scale in: waiting copies first, then the newest
            copy = max(component.copies, key=lambda c: c.ready_at)
            component.copies.remove(copy)
        self._mark_idle(store, now)
        self._place_waiting(store, now)

    def _mark_idle(self, store: _Store, now: float) -> None:
        used = {c.instance for comp in store.components.values() for c in (*comp.copies, *comp.retiring)}
        for fleet in store.fleets.values():
            for instance in list(fleet.instances):
                if instance in used:
                    instance.idle_since = None
                elif instance.ready_at > now and fleet.managed:  # never started: nothing to keep it for
                    fleet.instances.remove(instance)
                elif instance.idle_since is None:
                    instance.idle_since = now

    def _place_waiting(self, store: _Store, now: float) -> None:
        """Place the copies that components want and lack, oldest component first, where they fit."""
        for component in sorted(store.components.values(), key=lambda c: c.created):
            if component.status in ("Failed", "Deleting") or component.orphaned:
                continue
            fleet = store.fleets.get(component.endpoint_name)
            while fleet is not None and len(component.copies) < component.desired:
                if not self._place_one(store, fleet, component, now):
                    break

    def _place_one(self, store: _Store, fleet: Fleet, component: Component, now: float) -> bool:
        load: dict[Instance, Need] = {i: Need() for i in fleet.instances}
        for other in store.components.values():
            for copies, need in ((other.copies, other.need), (other.retiring, other.retiring_need)):
                for copy in copies:
                    if copy.instance in load:
                        load[copy.instance] = load[copy.instance] + need
        for instance in sorted(fleet.instances, key=lambda i: i.ready_at):
            if (load[instance] + component.need).fits(fleet.box):
                break
        else:
            if len(fleet.instances) >= fleet.maximum or not component.need.fits(fleet.box):
                return False
            store.serial += 1
            instance = Instance(f"i-0emulated{store.serial:07d}", now + self.times.instance_start_s)
            fleet.instances.append(instance)
        instance.idle_since = None
        component.copies.append(Copy(instance, max(now, instance.ready_at) + self.times.copy_start_s))
        return True

    def _would_fit(self, store: _Store, fleet: Fleet, component: Component, copies: int, need: Need, *,
                   beside: bool = False) -> bool:
        """Whether `copies` copies of `component`, each needing `need`, fit beside every other component's copies
        (within MaxInstanceCount). Its own copies make room (a copy-count change), or with `beside` (a rolling update
        of its specification) they stay where they are until the new ones serve."""
        saved = ([list(f.instances) for f in store.fleets.values()], list(component.copies), component.desired,
                 component.need, list(component.retiring), component.retiring_need)
        idle = {i: i.idle_since for f in store.fleets.values() for i in f.instances}
        serial = store.serial
        try:
            if beside:
                component.retiring, component.retiring_need = [*component.retiring, *component.copies], component.need
            component.copies, component.desired, component.need = [], copies, need
            for _ in range(copies):
                if not self._place_one(store, fleet, component, self.emulator.clock()):
                    return False
            return True
        finally:
            for f, instances in zip(store.fleets.values(), saved[0]):
                f.instances = instances
            for instance, since in idle.items():
                instance.idle_since = since
            component.copies, component.desired, component.need = saved[1], saved[2], saved[3]
            component.retiring, component.retiring_need = saved[4], saved[5]
            store.serial = serial

    # invocations -------------------------------------------------------------------------------------------------
    def invocation(self, endpoint_name: str, component_name: str | None,
                   region: str | None = None) -> tuple[int, str, str] | None:
        """SageMaker's answer to an invocation of an InService endpoint: None when a copy serves it (recorded: the
        idle clock restarts and `Invocations` counts it), else (HTTP status, error code, message). An endpoint
        that does not exist or is not in service is the caller's to answer (its own texts)."""
        from moto.cloudwatch.models import cloudwatch_backends

        with self._lock:
            self.on_call()
            backend = self._backend(region=region)
            endpoint = backend.endpoints.get(endpoint_name)
            if endpoint is None:
                return None
            store = _store(backend)
            component_based = endpoint_name in store.fleets
            if not component_name:
                return (400, "ValidationError", HEADER_REQUIRED) if component_based else None
            if not component_based:
                return 400, "ValidationError", HEADER_NOT_ALLOWED
            component = store.components.get(component_name)
            if component is None or component.endpoint_name != endpoint_name or component.status == "Deleting":
                return (400, "ValidationError",  # assumed text (docs/ci.md)
                        f"Inference component {component_name} of account {self.account} not found.")
            now = self.emulator.clock()
            cloudwatch = cloudwatch_backends[self.account][backend.region_name]
            dimensions = {"InferenceComponentName": component_name}
            component.last_invocation = now
            if component.current(now) == 0:
                alarm_emulation.publish(cloudwatch, "NoCapacityInvocationFailures", dimensions, now)
                return 400, "ValidationError", NO_CAPACITY
            alarm_emulation.publish(cloudwatch, "Invocations", dimensions, now)
            return None

    # SageMaker's API ---------------------------------------------------------------------------------------------
    def _arn(self, backend: Any, name: str) -> str:
        return f"arn:aws:sagemaker:{backend.region_name}:{backend.account_id}:{ARN_KIND}/{name.lower()}"

    def _get(self, backend: Any, name: str) -> Component:
        component = _store(backend).components.get(name)
        if component is None:
            raise _refuse(f'Could not find inference component "{self._arn(backend, name)}".')
        return component

    def create(self, backend: Any, body: dict[str, Any]) -> dict[str, Any]:
        store = _store(backend)
        name, endpoint_name = body.get("InferenceComponentName", ""), body.get("EndpointName", "")
        if name in store.components:
            raise _refuse(f'Cannot create already existing inference component "{self._arn(backend, name)}".')
        endpoint = backend.endpoints.get(endpoint_name)
        if endpoint is None:
            raise _refuse(f"Could not find endpoint '{self._endpoint_arn(backend, endpoint_name)}'.")
        fleet = store.fleets.get(endpoint_name)
        if fleet is None:  # assumed text
            raise _refuse(f"Endpoint {endpoint_name} does not host inference components: its endpoint configuration "
                          "names a model in its production variant.")
        if endpoint.endpoint_status != "InService":  # assumed text
            raise _refuse(f"Cannot create an inference component on endpoint {endpoint_name} while it is "
                          f"{endpoint.endpoint_status}.")
        variant = body.get("VariantName") or fleet.variant_name
        if variant != fleet.variant_name:  # assumed text
            raise _refuse(f"Variant {variant} does not exist on endpoint {endpoint_name}.")
        specification = dict(body.get("Specification") or {})
        self._check_specification(backend, specification)
        copies = (body.get("RuntimeConfig") or {}).get("CopyCount")
        if copies is not None and copies < 1:
            raise _refuse(COPY_COUNT_AT_CREATE)
        now = self.emulator.clock()
        component = Component(name, self._arn(backend, name), endpoint_name, endpoint.arn, variant, specification,
                              Need.of(specification.get("ComputeResourceRequirements")), copies or 1, "Creating",
                              now, now, tags=list(body.get("Tags") or []), polls_needed=self.scripted.creating_polls,
                              final=(self.scripted.final, self.scripted.reason))
        self._check_fits(store, fleet, component, component.desired)
        store.components[name] = component
        self._place_waiting(store, now)
        return {"InferenceComponentArn": component.arn}

    def _endpoint_arn(self, backend: Any, name: str) -> str:
        return f"arn:aws:sagemaker:{backend.region_name}:{backend.account_id}:endpoint/{name.lower()}"

    def _check_specification(self, backend: Any, specification: dict[str, Any]) -> None:
        model = specification.get("ModelName")
        if model and model not in backend._models:
            raise _refuse(f"Could not find model 'arn:aws:sagemaker:{backend.region_name}:{backend.account_id}:"
                          f"model/{model.lower()}'.")
        if not (model or specification.get("Container") or specification.get("BaseInferenceComponentName")):
            raise _refuse("The inference component specification must name a ModelName, a Container or a "
                          "BaseInferenceComponentName.")  # assumed text
        if not specification.get("ComputeResourceRequirements") and not specification.get("BaseInferenceComponentName"):
            raise _refuse("ComputeResourceRequirements is required for an inference component that is not an "
                          "adapter (BaseInferenceComponentName).")  # assumed text

    def _check_fits(self, store: _Store, fleet: Fleet, component: Component, copies: int,
                    need: Need | None = None, *, beside: bool = False) -> None:
        need = component.need if need is None else need
        if not need.fits(fleet.box) or not self._would_fit(store, fleet, component, copies, need, beside=beside):
            raise _refuse(NOT_ENOUGH_HARDWARE)

    def describe(self, backend: Any, name: str) -> dict[str, Any]:
        component = self._get(backend, name)
        self._poll(backend, component)
        if component.name not in _store(backend).components:  # its deletion finished with this describe
            raise _refuse(f'Could not find inference component "{component.arn}".')
        now = self.emulator.clock()
        fleet = _store(backend).fleets.get(component.endpoint_name)
        current = component.current(now) if not component.orphaned else component.desired
        runtime: dict[str, Any] = {"DesiredCopyCount": component.desired, "CurrentCopyCount": current}
        if fleet is not None:
            runtime["PlacementStatus"] = [{"InstanceType": fleet.instance_type, "CurrentCopyCount": current}]
        answer = {"InferenceComponentName": component.name, "InferenceComponentArn": component.arn,
                  "EndpointName": component.endpoint_name, "EndpointArn": component.endpoint_arn,
                  "VariantName": component.variant_name, "Specification": self._summary(component.specification),
                  "RuntimeConfig": runtime, "CreationTime": _stamp(component.created),
                  "LastModifiedTime": _stamp(component.modified), "InferenceComponentStatus": component.status_at(now)}
        if component.failure_reason:
            answer["FailureReason"] = component.failure_reason
        return answer

    def _summary(self, specification: dict[str, Any]) -> dict[str, Any]:
        summary = {k: v for k, v in specification.items() if k != "Container"}
        container = specification.get("Container")
        if container:
            summary["Container"] = {k: v for k, v in container.items() if k != "Image"}
            if container.get("Image"):
                summary["Container"]["DeployedImage"] = {"SpecifiedImage": container["Image"],
                                                         "ResolvedImage": container["Image"]}
        return summary

    def _poll(self, backend: Any, component: Component, *, counted: bool = True, at: float | None = None) -> None:
        """A scripted transition (Creating, Updating, Deleting) one describe further (`counted`), finished once its
        describes are done and its copies are in service (by `at`, default now)."""
        now = self.emulator.clock() if at is None else at
        if component.status not in ("Creating", "Updating", "Deleting"):
            return
        component.polls += counted
        if component.polls < component.polls_needed + counted:
            return
        if component.status == "Deleting":
            self._remove(backend, component, now)
            return
        if any(c.ready_at > now for c in component.copies):
            return  # polls done, copies still loading
        if component.status == "Creating" and component.final[0] == "Failed":
            component.status, component.failure_reason = component.final
            component.copies.clear()
            self._mark_idle(_store(backend), now)
        elif component.status == "Updating" and component.rollback is not None:
            component.specification, component.need, component.failure_reason = component.rollback
            component.rollback, component.status = None, "InService"  # the previous copies serve again
            if component.retiring:  # the new copies go, the old ones (still serving) stay
                component.copies, component.retiring = component.retiring, []
                self._mark_idle(_store(backend), now)
        else:
            component.status = "InService"
            if component.retiring:  # a rolling update's new copies serve: the old ones are terminated
                component.retiring = []
                self._mark_idle(_store(backend), now)
        component.polls = component.polls_needed = 0
        component.modified = now

    def _remove(self, backend: Any, component: Component, at: float | None = None) -> None:
        from moto.applicationautoscaling.models import applicationautoscaling_backends

        store = _store(backend)
        store.components.pop(component.name, None)
        now = self.emulator.clock() if at is None else at
        self._mark_idle(store, now)
        self._place_waiting(store, now)
        aas = applicationautoscaling_backends[backend.account_id][backend.region_name]
        resource_id = f"inference-component/{component.name}"
        if aas._scalable_target_exists(resource_id, IC_DIMENSION):  # as DeleteEndpoint does for variants (assumed)
            aas.deregister_scalable_target("sagemaker", resource_id, IC_DIMENSION)

    def listing(self, backend: Any, body: dict[str, Any]) -> dict[str, Any]:
        now = self.emulator.clock()
        rows = []
        for c in _store(backend).components.values():
            status = c.status_at(now)
            checks = [(body.get("NameContains"), lambda v, c=c: v.lower() in c.name.lower()),
                      (body.get("EndpointNameEquals"), lambda v, c=c: v == c.endpoint_name),
                      (body.get("VariantNameEquals"), lambda v, c=c: v == c.variant_name),
                      (body.get("StatusEquals"), lambda v, s=status: v == s),
                      (body.get("CreationTimeBefore"), lambda v, c=c: c.created < _seconds(v)),
                      (body.get("CreationTimeAfter"), lambda v, c=c: c.created > _seconds(v)),
                      (body.get("LastModifiedTimeBefore"), lambda v, c=c: c.modified < _seconds(v)),
                      (body.get("LastModifiedTimeAfter"), lambda v, c=c: c.modified > _seconds(v))]
            if all(value is None or keep(value) for value, keep in checks):
                rows.append((c, status))
        key = {"Name": lambda r: r[0].name, "Status": lambda r: r[1]}.get(body.get("SortBy") or "CreationTime",
                                                                          lambda r: r[0].created)
        rows.sort(key=key, reverse=(body.get("SortOrder") or "Descending") == "Descending")
        start = int(body.get("NextToken") or 0)
        size = int(body.get("MaxResults") or 10)
        page = rows[start:start + size]
        answer: dict[str, Any] = {"InferenceComponents": [{
            "InferenceComponentName": c.name, "InferenceComponentArn": c.arn, "EndpointName": c.endpoint_name,
            "EndpointArn": c.endpoint_arn, "VariantName": c.variant_name, "InferenceComponentStatus": status,
            "CreationTime": _stamp(c.created), "LastModifiedTime": _stamp(c.modified)} for c, status in page]}
        if start + size < len(rows):
            answer["NextToken"] = str(start + size)
        return answer

    def _in_progress(self, component: Component, verb: str) -> None:
        status = component.status_at(self.emulator.clock())
        state = {"Creating": "CREATE_IN_PROGRESS", "Updating": "UPDATE_RC_IN_PROGRESS",
                 "Deleting": "DELETE_IN_PROGRESS"}.get(status)
        if state is not None:  # SageMaker's words for an update; the same form for a delete (assumed)
            raise _refuse(f'Cannot {verb} inference component "{component.arn}" while it is in state {state}.')

    def update(self, backend: Any, body: dict[str, Any]) -> dict[str, Any]:
        component = self._get(backend, body.get("InferenceComponentName", ""))
        self._in_progress(component, "update")
        store = _store(backend)
        fleet = store.fleets.get(component.endpoint_name)
        specification = body.get("Specification")
        copies = (body.get("RuntimeConfig") or {}).get("CopyCount")
        if specification:
            self._check_specification(backend, specification)
        if fleet is not None:  # a new specification's copies start beside the old ones (a rolling update)
            self._check_fits(store, fleet, component, component.desired if copies is None else copies, Need.of(
                (specification or component.specification).get("ComputeResourceRequirements")),
                beside=bool(specification))
        now = self.emulator.clock()
        if specification:
            component.rollback = ((component.specification, component.need, self.scripted.update_fails)
                                  if self.scripted.update_fails else None)
            component.retiring, component.retiring_need = [*component.retiring, *component.copies], component.need
            component.specification = dict(specification)
            component.need = Need.of(specification.get("ComputeResourceRequirements"))
            component.status, component.polls, component.polls_needed = "Updating", 0, self.scripted.updating_polls
            component.copies = []  # the new specification's copies, placed beside the old (retiring) ones
        component.modified = now
        self.set_desired(component.name, component.desired if copies is None else copies, "UpdateInferenceComponent",
                         region=backend.region_name)
        if specification:
            self._place_waiting(store, now)
        return {"InferenceComponentArn": component.arn}

    def update_runtime(self, backend: Any, body: dict[str, Any]) -> dict[str, Any]:
        component = self._get(backend, body.get("InferenceComponentName", ""))
        self._in_progress(component, "update")
        copies = int((body.get("DesiredRuntimeConfig") or {}).get("CopyCount", component.desired))
        fleet = _store(backend).fleets.get(component.endpoint_name)
        if fleet is not None and copies > 0:
            self._check_fits(_store(backend), fleet, component, copies)
        self.set_desired(component.name, copies, "UpdateInferenceComponentRuntimeConfig", region=backend.region_name)
        return {"InferenceComponentArn": component.arn}

    def delete(self, backend: Any, name: str) -> dict[str, Any]:
        component = self._get(backend, name)
        if component.status != "Failed" and not component.orphaned:
            self._in_progress(component, "delete")
        if self.scripted.deleting_polls:
            component.status, component.polls, component.polls_needed = "Deleting", 0, self.scripted.deleting_polls
        else:
            self._remove(backend, component)
        return {}

    # hooks into moto -------------------------------------------------------------------------------------------
    def patches(self, call_action: Callable[[Any], Any]) -> list[Any]:
        """Entered after the emulator's own patches (they stack on them); `call_action` is the emulator's wrapper of
        moto's (faults, gates, delays)."""
        from moto.cloudwatch.responses import CloudWatchResponse
        from moto.sagemaker import models as sm_models
        from moto.sagemaker.responses import SageMakerResponse
        from moto.sagemakerruntime.responses import SageMakerRuntimeResponse

        components = self

        def settled(current: Any) -> Any:
            def wrapped(response_self: Any) -> Any:
                components.on_call()
                return current(response_self)
            return wrapped

        def action(handler: Callable[[Any, dict[str, Any]], dict[str, Any]]) -> Callable[[Any], Any]:
            def method(response_self: Any) -> Any:
                from moto.core.responses import ActionResult

                body = json.loads(response_self.body or "{}")
                with components._lock:
                    return ActionResult(handler(response_self.sagemaker_backend, body))
            return method

        handlers = {
            "create_inference_component": lambda b, body: components.create(b, body),
            "describe_inference_component": lambda b, body: components.describe(b, body.get("InferenceComponentName", "")),
            "list_inference_components": lambda b, body: components.listing(b, body),
            "update_inference_component": lambda b, body: components.update(b, body),
            "update_inference_component_runtime_config": lambda b, body: components.update_runtime(b, body),
            "delete_inference_component": lambda b, body: components.delete(b, body.get("InferenceComponentName", "")),
        }
        return [
            stacked(SageMakerResponse, "call_action", settled),
            mock.patch.object(CloudWatchResponse, "call_action", settled(call_action)),  # faults and gates too
            *[mock.patch.object(SageMakerResponse, name, action(handler), create=True)
              for name, handler in handlers.items()],
            stacked(SageMakerResponse, "create_endpoint_config", self._config_check),
            stacked(sm_models.SageMakerModelBackend, "validate_production_variants", _models_of_model_variants),
            stacked(sm_models.SageMakerModelBackend, "create_endpoint", self._with_fleet),
            stacked(sm_models.SageMakerModelBackend, "describe_endpoint", self._described),
            stacked(sm_models.SageMakerModelBackend, "delete_endpoint", self._orphaning),
            stacked(sm_models.SageMakerModelBackend, "_get_resource_from_arn", self._tagged),
            stacked(SageMakerRuntimeResponse, "invoke_endpoint", self._checked_invoke),
            stacked(CloudWatchResponse, "put_metric_alarm", self._alarm_created),
        ]

    def _alarm_created(self, current: Any) -> Any:
        """moto keeps neither an alarm's creation time nor its warm-up: `alarm_emulation` needs both."""
        def wrapped(response_self: Any) -> Any:
            answer = current(response_self)
            alarm = response_self.cloudwatch_backend.alarms.get(response_self._get_param("AlarmName"))
            if alarm is not None:
                alarm_emulation.record_warm_up(alarm, {"WarmUpConfiguration": response_self._get_param(
                    "WarmUpConfiguration")}, self.emulator.clock())
            return answer
        return wrapped

    def _config_check(self, current: Any) -> Any:
        def wrapped(response_self: Any) -> Any:
            body = json.loads(response_self.body or "{}")
            variants = body.get("ProductionVariants") or []
            for variant in variants:
                scaling = variant.get("ManagedInstanceScaling") or {}
                if variant.get("ModelName") and scaling:
                    raise _refuse(MANAGED_SCALING_NEEDS_COMPONENTS)
                low, high = scaling.get("MinInstanceCount"), scaling.get("MaxInstanceCount")
                if low is not None and high is not None and low > high:  # assumed text
                    raise _refuse(f"MinInstanceCount ({low}) must not exceed MaxInstanceCount ({high}).")
            if any(not v.get("ModelName") for v in variants) and not body.get("ExecutionRoleArn"):
                raise _refuse("ExecutionRoleArn is required for an endpoint configuration whose production variants "
                              "host inference components (no ModelName).")  # assumed text
            answer = current(response_self)
            config = response_self.sagemaker_backend.endpoint_configs.get(body.get("EndpointConfigName"))
            for key, attribute in (("ExecutionRoleArn", "execution_role_arn"), ("VpcConfig", "vpc_config"),
                                   ("EnableNetworkIsolation", "enable_network_isolation")):
                if config is not None and key in body:  # moto drops them; DescribeEndpointConfig answers them
                    setattr(config, attribute, body[key])
            return answer
        return wrapped

    def _with_fleet(self, current: Any) -> Any:
        def wrapped(backend: Any, endpoint_name: str, endpoint_config_name: str, tags: Any) -> Any:
            endpoint = current(backend, endpoint_name, endpoint_config_name, tags)
            config = backend.endpoint_configs.get(endpoint_config_name)
            variants = [v for v in (config.production_variants if config else []) if not v.get("ModelName")]
            if variants:
                variant = variants[0]
                scaling = variant.get("ManagedInstanceScaling") or {}
                initial = int(variant.get("InitialInstanceCount") or 1)
                managed = scaling.get("Status") == "ENABLED"
                now = self.emulator.clock()
                fleet = Fleet(endpoint_name, variant["VariantName"], variant.get("InstanceType", ""),
                              hardware(variant.get("InstanceType", "")),
                              int(scaling.get("MinInstanceCount", initial)) if managed else initial,
                              int(scaling.get("MaxInstanceCount", initial)) if managed else initial, managed,
                              variant.get("ManagedInstanceScaling"), variant.get("RoutingConfig"))
                store = _store(backend)
                for _ in range(initial):
                    store.serial += 1
                    fleet.instances.append(Instance(f"i-0emulated{store.serial:07d}", now, idle_since=now))
                store.fleets[endpoint_name] = fleet
            return endpoint
        return wrapped

    def _described(self, current: Any) -> Any:
        def wrapped(backend: Any, endpoint_name: str) -> Any:
            described = current(backend, endpoint_name)
            fleet = _store(backend).fleets.get(endpoint_name)
            if fleet is None:
                return described
            now = self.emulator.clock()
            variants = []
            for variant in described.get("ProductionVariants") or []:
                variant = dict(variant)
                if variant.get("VariantName") == fleet.variant_name:
                    variant["CurrentInstanceCount"] = sum(1 for i in fleet.instances if i.ready_at <= now)
                    variant["DesiredInstanceCount"] = len(fleet.instances)
                    for key, value in (("ManagedInstanceScaling", fleet.scaling), ("RoutingConfig", fleet.routing)):
                        if value:
                            variant[key] = value
                variants.append(variant)
            return {**described, "ProductionVariants": variants}
        return wrapped

    def _orphaning(self, current: Any) -> Any:
        def wrapped(backend: Any, endpoint_name: str) -> Any:
            hosted = sorted(c.name for c in _store(backend).components.values()
                            if c.endpoint_name == endpoint_name and not c.orphaned)
            if hosted and self.delete_endpoint_with_components == "refuse":  # assumed, wording too (docs/ci.md)
                raise _refuse(f"Cannot delete endpoint {endpoint_name} while it hosts inference components "
                              f"({', '.join(hosted)}): delete them first.")
            result = current(backend, endpoint_name)
            store = _store(backend)
            store.fleets.pop(endpoint_name, None)
            for component in store.components.values():  # "strand": left behind, still InService (docs/ci.md)
                if component.endpoint_name == endpoint_name:
                    component.orphaned = True
                    component.copies.clear()
            return result
        return wrapped

    def _tagged(self, current: Any) -> Any:
        def wrapped(backend: Any, arn: str) -> Any:
            kind = arn.split(":")[-1].split("/")[0]
            if kind != ARN_KIND:
                return current(backend, arn)
            found = next((c for c in _store(backend).components.values() if c.arn == arn.lower()), None)
            if found is None:
                raise _refuse(f"Could not find resource {arn}")
            return found
        return wrapped

    def _checked_invoke(self, current: Any) -> Any:
        def wrapped(response_self: Any) -> Any:
            refusal = self._refusal_in_process(response_self)
            return refusal if refusal is not None else current(response_self)
        return wrapped

    def _refusal_in_process(self, response_self: Any) -> tuple[int, dict[str, str], str] | None:
        name = unquote(response_self.path.split("/")[2])
        headers = {k.lower(): v for k, v in (response_self.headers or {}).items()}
        refusal = self.invocation(name, headers.get(COMPONENT_HEADER.lower()), region=response_self.region)
        if refusal is None:
            return None
        status, code, message = refusal
        return status, {"Content-Type": "application/json", "x-amzn-ErrorType": code, "status": str(status)}, \
            json.dumps({"message": message})


def _models_of_model_variants(current: Any) -> Any:
    """moto looks up every variant's ModelName; a component-based variant has none."""
    def wrapped(backend: Any, production_variants: list[dict[str, Any]]) -> Any:
        return current(backend, [v for v in production_variants if v.get("ModelName")])
    return wrapped


def _stamp(seconds: float) -> datetime:
    return datetime.fromtimestamp(seconds, tz=timezone.utc)


def _seconds(value: Any) -> float:
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, datetime):
        return value.timestamp()
    try:
        return float(value)
    except (TypeError, ValueError):
        return datetime.fromisoformat(str(value).replace("Z", "+00:00")).timestamp()
