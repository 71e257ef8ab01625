"""The inference-component shape of a deploy plan (`Hosting.COMPONENT`): its per-resource functions.

Each function takes plan.py's `_Params` (the one set of parameters every resource is planned from) and returns its
part of the plan, as `_plan_model` and the others do; plan.py lists them in `_RESOURCES`, so this module does not
import plan (no circle): what both shapes share is in hosting.py, and `_Params` and `PlanRequest` are typed `Any`. The model is planned
once, by `_plan_model` as for a classic endpoint (container, environment with SM_VLLM_SPECULATIVE_CONFIG, model
data, drafter channel), and the component names it (`Specification.ModelName`): a component's own `Container`
has no `AdditionalModelDataSources` in SageMaker's API (botocore's `InferenceComponentContainerSpecification`:
Image, ArtifactUrl, Environment), so the drafter channel can only reach a component through a model.

- the endpoint config: the execution role, and one variant with instances only (no `ModelName`):
  `ManagedInstanceScaling` (min 0 with scale to zero, else 1; max for the most copies plus room for an update's new
  copies beside the old: `update_room`), `RoutingConfig`; for a component that joins a host (`PlanRequest.host`: a
  sweep's one endpoint for many components, never updated) the config and the endpoint are the host's, named and
  tagged as the host, without room;
- the component: `ComputeResourceRequirements` from the instance's facts (templates/instances.toml): the GPUs of
  the TP degree the plan sets, and memory (`memory_mb`), `StartupParameters` from the spec's timeouts, `CopyCount`,
  and `DataCacheConfig.EnableCaching` (the model and image cached on each instance: a faster scale-out);
- its scaling (`scale_to_zero.ComponentScaling`): Application Auto Scaling on copies, target tracking, and with
  scale to zero the wake-up policy and alarm (AWS's recipe).

Room for an update: SageMaker's rolling update of a component "provisions capacity on the new endpoint fleet, routes
traffic to that fleet, and terminates capacity on the old endpoint fleet" (botocore's model,
`InferenceComponentRollingUpdatePolicy`), so `peagle update --k` needs the new copies to fit BESIDE the old ones. A
copy takes every GPU of its instance by default, so `MaxInstanceCount` is the instances of the most copies plus
those of the deploy's copies again (all of them: peagle sends no `DeploymentConfig`, and how many copies SageMaker
replaces at once without one is not documented). Managed instance scaling starts an instance only for a copy that
fits nowhere, so the extra room bills only while an update runs; the plan prices it.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from .errors import UsageError
from .hosting import TP_ENV, VARIANT_NAME, Hosting
from .scale_to_zero import COPY_METRICS, SCALE_IN_METRIC, ComponentScaling

if TYPE_CHECKING:
    from .pricing import Price

Part = dict[str, Any]
_Params = Any  # plan.py's _Params
PlanRequest = Any  # plan.py's PlanRequest
ROUTING = {"RoutingStrategy": "LEAST_OUTSTANDING_REQUESTS"}  # SageMaker's default for components; LLM requests vary
STARTUP_BOUNDS_S = (60, 3600)  # InferenceComponentStartupParameters' bounds (botocore)


def check_component_request(request: PlanRequest) -> None:
    """What the request alone says against component hosting (before any AWS call)."""
    if request.host is not None and request.hosting is not Hosting.COMPONENT:
        raise ValueError("a plan joins a host endpoint only as an inference component (hosting component)")
    if request.scale_to_zero is not None and request.hosting is not Hosting.COMPONENT:
        raise UsageError("--scale-to-zero needs inference components, not --hosting endpoint",
                         "drop --hosting endpoint (--scale-to-zero hosts the model as an inference component)")
    policy = request.autoscale
    if request.scale_to_zero is not None and policy is not None and policy.min_capacity != 1:
        raise UsageError(f"--autoscale {policy.min_capacity}:{policy.max_capacity} with --scale-to-zero: the minimum "
                         "is zero copies when idle and the deploy's copies when woken",
                         f"pass --autoscale 1:{policy.max_capacity}")
    if request.scale_to_zero is not None and policy is not None and COPY_METRICS[policy.metric] != SCALE_IN_METRIC:
        raise UsageError(f"--target-invocations with --scale-to-zero: AWS's recipe scales a component to zero by "
                         f"target tracking on {SCALE_IN_METRIC} (0 when no request is in flight); invocations per "
                         "copy publish nothing in a minute without requests",
                         f"pass --target-concurrency {policy.target:g} instead")


def parse_hosting(hosting: str | None, *, scale_to_zero: bool, idle: str | None,
                  wait: bool = True) -> tuple[Any, Any]:
    """`--hosting`, `--scale-to-zero` and `--idle` as (Hosting, IdleRule or None); one UsageError per mistake."""
    from .inputs import choose
    from .scale_to_zero import parse_idle

    text = choose(hosting, "--hosting", {h.value: h.value for h in Hosting}, what="a hosting") \
        if hosting is not None else ""
    if scale_to_zero and text == Hosting.ENDPOINT.value:
        raise UsageError("--scale-to-zero needs inference components, not --hosting endpoint",
                         "drop --hosting endpoint (--scale-to-zero hosts the model as an inference component)")
    if idle is not None and not scale_to_zero:
        raise UsageError("--idle only applies with --scale-to-zero", f"add --scale-to-zero, or drop --idle {idle}")
    shape = Hosting.COMPONENT if scale_to_zero or text == Hosting.COMPONENT.value else Hosting.ENDPOINT
    if shape is Hosting.COMPONENT and not wait:
        raise UsageError("an inference component is created once its endpoint is InService, so the deploy must wait",
                         "drop --no-wait")
    return shape, parse_idle(idle) if scale_to_zero else None


def memory_mb(host_memory_gib: int, accelerators: int, gpus: int) -> int:
    """MinMemoryRequiredInMb of one copy: half the host memory that comes with its GPUs. JumpStart's own specs ask
    for that much (32768 MB on a 64 GiB ml.g7e.2xlarge in gpt-oss-20b's spec, 98304 MB on a 192 GiB
    ml.g5.12xlarge); SageMaker keeps part of each instance's memory for itself, so a copy asking for all of it
    would not be placed; vLLM's own host memory (the process, the weights passing through) fits in the half."""
    return max(128, host_memory_gib * 1024 * accelerators // gpus // 2)


def _accelerators(p: _Params) -> int:
    value = p.env.get(TP_ENV, "1")
    try:
        degree = int(value)
    except ValueError:
        raise UsageError(f"{TP_ENV}={value!r} is not a whole number", f"pass --env {TP_ENV}=N with N GPUs") from None
    return max(1, degree)


def _sizes(p: _Params) -> dict[str, int]:
    """GPUs and memory of one copy, copies per instance, and instances at the start and at the most."""
    info = p.instance
    if info is None:
        raise UsageError(f"peagle has no GPU and memory facts for {p.instance_type}; a component is sized from them",
                         "choose an ml.g7e type (peagle models lists them), or --hosting endpoint")
    accelerators = _accelerators(p)
    if accelerators > info.gpus:
        raise UsageError(f"the component needs {accelerators} GPUs (tensor parallel degree) and {p.instance_type} "
                         f"has {info.gpus}", "choose an instance type with at least that many GPUs, or --hosting "
                                             "endpoint")
    need = memory_mb(info.memory_gib, accelerators, info.gpus)
    if need > info.memory_gib * 1024:
        raise UsageError(f"the component needs {need} MB of memory and {p.instance_type} has "
                         f"{info.memory_gib * 1024} MB", "choose a larger instance type")
    per_instance = info.gpus // accelerators
    copies = p.request.instance_count
    most = p.request.autoscale.max_capacity if p.request.autoscale else copies
    most_instances = math.ceil(most / per_instance)
    with_room = most_instances if p.request.host is not None else update_room(most, copies, per_instance)
    return {"accelerators": accelerators, "memory_mb": need, "per_instance": per_instance, "copies": copies,
            "instances": math.ceil(copies / per_instance), "max_copies": most, "max_instances": most_instances,
            "max_instances_with_room": with_room}


def update_room(most_copies: int, copies: int, per_instance: int) -> int:
    """MaxInstanceCount that holds the most copies and, beside them, an update's new copies (the deploy's count):
    SageMaker provisions the new copies before it removes the old (module docstring)."""
    return math.ceil((most_copies + copies) / per_instance)


def endpoint_config(p: _Params) -> Part:
    choice, sizes = p.choice, _sizes(p)
    variant = {
        "VariantName": VARIANT_NAME,
        "InstanceType": p.instance_type,
        "InitialInstanceCount": sizes["instances"],
        "ManagedInstanceScaling": {"Status": "ENABLED",
                                   "MinInstanceCount": 0 if p.request.scale_to_zero is not None else 1,
                                   "MaxInstanceCount": sizes["max_instances_with_room"]},
        "RoutingConfig": dict(ROUTING),
    }
    config: dict[str, Any] = {"EndpointConfigName": choice.endpoint, "ProductionVariants": [variant]}
    if choice.role:
        config["ExecutionRoleArn"] = choice.role  # a component-based config needs it (the model's is not read)
    if choice.vpc_config is not None:
        config["VpcConfig"] = choice.vpc_config
    if choice.kms_key_id is not None:
        config["KmsKeyId"] = choice.kms_key_id
    return {"create_endpoint_config": {**config, "Tags": p.endpoint_tag_list}, "kms_key_id": choice.kms_key_id,
            "instance_count": sizes["instances"], "max_instance_count": sizes["max_instances"],
            "update_room_instances": sizes["max_instances_with_room"] - sizes["max_instances"],
            "startup_health_check_timeout_s": p.spec.startup_health_check_timeout_s,
            "model_data_download_timeout_s": p.spec.model_data_download_timeout_s}


def _bounded(seconds: int) -> int:
    low, high = STARTUP_BOUNDS_S
    return max(low, min(high, seconds))


def inference_component(p: _Params) -> Part:
    name, sizes, spec = p.choice.name, _sizes(p), p.spec
    body = {
        "InferenceComponentName": name, "EndpointName": p.choice.endpoint, "VariantName": VARIANT_NAME,
        "Specification": {
            "ModelName": name,  # the model's container, environment, model data and drafter channel
            "StartupParameters": {
                "ModelDataDownloadTimeoutInSeconds": _bounded(spec.model_data_download_timeout_s),
                "ContainerStartupHealthCheckTimeoutInSeconds": _bounded(spec.startup_health_check_timeout_s)},
            "ComputeResourceRequirements": {"NumberOfAcceleratorDevicesRequired": float(sizes["accelerators"]),
                                            "MinMemoryRequiredInMb": sizes["memory_mb"]},
            **({"DataCacheConfig": {"EnableCaching": True}} if caching_known() else {})},
        "RuntimeConfig": {"CopyCount": sizes["copies"]},
        "Tags": p.tag_list,
    }
    per = f"{sizes['per_instance']} copies per instance" if sizes["per_instance"] > 1 else "one copy per instance"
    return {"inference_component_name": name, "create_inference_component": body,
            "notes": [f"inference component {name}: {sizes['accelerators']} GPU(s) and {sizes['memory_mb']} MB per "
                      f"copy (half the host memory of its GPUs, as JumpStart's specs ask), {per}; it names the model "
                      "(ModelName form): a component's own container cannot carry the drafter channel"]}


def caching_known() -> bool:
    """Whether the installed botocore's SageMaker model has `InferenceComponentSpecification.DataCacheConfig`
    (no AWS call; botocore 1.44 has it): an older one would refuse the member."""
    from .botocore_facts import service_model

    model = service_model("sagemaker")
    return "DataCacheConfig" in model.shape_for("InferenceComponentSpecification").members


def scaling(p: _Params) -> Part:
    name, sizes, request = p.choice.name, _sizes(p), p.request
    idle = request.scale_to_zero
    policy = request.autoscale
    plan = ComponentScaling.planned(name, copies=sizes["copies"], idle=idle, autoscale=policy)
    notes = []
    if plan.registered:
        metric, target = plan.tracking
        notes.append(f"copies scale {plan.min_copies}-{plan.max_copies} by target tracking on {metric}={target:g}"
                     + (" (AWS's example target; --autoscale 1:N --target-concurrency C sets yours), scale-in on: "
                        "to zero after about 15 minutes without a request (AWS's recipe, Application Auto Scaling's "
                        "own scale-in alarm)" if idle is not None and policy is None else
                        ", scale-in on: to zero when idle (AWS's recipe)" if idle is not None else ""))
    if idle is not None:
        notes.append("scale to zero: a wake-up takes minutes (an instance starts, then the model loads) and requests "
                     "fail meanwhile (docs/hosting.md)")
    return {"component_scaling": plan if plan.registered else None, "component_requests": plan.requests(p.tag_list),
            "autoscaling": policy, "notes": notes}


def price(resources: Part, priced: Price) -> Part:
    """What scale to zero costs (nothing at zero instances, the instances' hourly price with the copies up), and
    what the room for an update costs while an update runs."""
    notes = []
    room = resources.get("update_room_instances") or 0
    one = priced.for_count(1).usd_per_hour
    if room:
        during = "an unknown price" if one is None else f"${one * room:,.2f}/h"
        notes.append(f"room for an update: MaxInstanceCount {resources['max_instance_count'] + room} "
                     f"({resources['max_instance_count']} for the copies, {room} more so that an update's new copies "
                     "start beside the old: SageMaker provisions the new before it removes the old); managed scaling "
                     f"starts {'that instance' if room == 1 else 'those instances'} only during an update: {during} "
                     "more while one runs")
    if resources.get("component_scaling") is None or resources["component_scaling"].idle is None:
        return {"notes": notes}
    up = priced.usd_per_hour
    with_copies = "an unknown price" if up is None else f"${up:,.2f}/h"
    count = resources["instance_count"]
    return {"price_at_zero_usd_per_hour": 0.0,
            "notes": [f"at zero: $0.00/h (no instance-hours); with {resources['component_scaling'].wake_copies} "
                      f"cop{'y' if resources['component_scaling'].wake_copies == 1 else 'ies'} up: {with_copies} "
                      f"({count} x {resources['instance_type']}); billed per instance-hour while instances run",
                      *notes]}
