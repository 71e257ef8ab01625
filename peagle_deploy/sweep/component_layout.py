"""The component layout of a sweep (`--hosting component`): ONE endpoint on a multi-GPU ml.g7e, every configuration
an inference component of it, measured one at a time, so the sweep pays for one instance.

Each configuration is planned by the one plan builder (`plan.build_plan`, `Hosting.COMPONENT` with
`PlanRequest.host`): its own model, whose environment carries its SM_VLLM_SPECULATIVE_CONFIG, and its component of
`gpus_per_configuration` GPUs (the tensor parallel degree of the classic layout's instance: one for every model peagle
knows) that joins the sweep's endpoint. The endpoint config (instances only, `plan_component.endpoint_config`) and the
endpoint are the host's bodies of those same plans, equal in every one (checked here).

The instance: `--instance-type`, else the smallest ml.g7e (templates/instances.toml) the model's spec supports with
GPUs for every configuration at once; when they need more GPUs than the largest has, they run in batches of as many
as fit (the plan says which).

The estimate: the endpoint's instance starts in --provision-estimate seconds, each batch's components load in as long
again (all of a batch at once: weights and start-up, most of a classic deploy too), every configuration's bench runs
alone, then the teardown; all of it at one instance's price. Beside it, the classic layout's estimate
(one endpoint per configuration, `estimate.py`), for the same modes, K and levels.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from pydantic import BaseModel, Field

from ..errors import UsageError
from .config import SweepRequest, resource_name


class ComponentSummary(BaseModel):
    """One configuration's component, as its plan's bodies say."""

    label: str
    component: str = Field(description="the inference component, and its model, carry this name")
    batch: int = Field(description="1-based: the components of one batch share the instance")
    speculative_config: str | None = Field(description="the model's SM_VLLM_SPECULATIVE_CONFIG (None: off)")
    drafter_channel: bool = Field(description="the model has the drafter's data channel")
    accelerators: float = Field(description="ComputeResourceRequirements.NumberOfAcceleratorDevicesRequired")
    memory_mb: int = Field(description="ComputeResourceRequirements.MinMemoryRequiredInMb")
    copies: int = Field(description="RuntimeConfig.CopyCount")
    create_model: dict[str, Any] = Field(description="CreateModel: the container, its environment, the drafter")
    create_inference_component: dict[str, Any]


class ComponentLayout(BaseModel):
    endpoint: str = Field(description="the one endpoint every component joins")
    instance_type: str
    gpus: int
    gpus_per_configuration: int
    at_once: int = Field(description="configurations loaded at once: the instance's GPUs / a configuration's")
    batches: list[list[str]] = Field(description="configuration labels, batch by batch")
    choice: str = Field(description="why this instance, and whether the configurations run in batches")
    price_per_hour_usd: float | None = Field(description="the one instance's SageMaker hosting price")
    price_source: str
    provision_s: float = Field(description="estimated: the endpoint's instance to InService")
    load_s: float = Field(description="estimated: a batch's components to InService (all at once)")
    bench_s: float = Field(description="estimated: one configuration's bench")
    teardown_s: float
    estimated_s: float
    estimated_usd: float | None = Field(description="None: the instance's price is unknown")
    components: list[ComponentSummary]
    create_endpoint_config: dict[str, Any] = Field(description="CreateEndpointConfig: instances only")
    create_endpoint: dict[str, Any]


def host_name(request: SweepRequest) -> str:
    """The sweep's one endpoint (its components are `peagle-<sweep id>-<configuration>`)."""
    return f"peagle-{request.sweep_id}"


def choose_instance(request: SweepRequest, per: int, count: int, supported: list[str]) -> tuple[str, int, str]:
    """(instance type, configurations at once, why) for `count` configurations of `per` GPUs each."""
    from ..instances import instance_info, instance_table
    from ..plan import check_family

    table = instance_table().instances
    if request.instance_type:
        check_family(request.instance_type, False)
        info = instance_info(request.instance_type)
        if info is None or info.gpus < per:
            raise UsageError(f"--hosting component needs {per} GPU(s) per configuration and {request.instance_type} "
                             f"has {info.gpus if info else 'no known'}", "choose a multi-GPU ml.g7e such as "
                                                                         "ml.g7e.24xlarge, or drop --instance-type")
        at_once = min(count, info.gpus // per)
        why = f"--instance-type: {info.gpus} GPU(s), {per} per configuration"
        return request.instance_type, at_once, why + _batched(count, at_once)
    sized = sorted((t for t, info in table.items() if info.gpus >= per and t in supported),
                   key=lambda t: (table[t].gpus, table[t].memory_gib))
    if not sized:
        raise UsageError(f"the {request.model} JumpStart spec supports no ml.g7e with {per} GPU(s) for a component",
                         "sweep with --hosting endpoint")
    fitting = [t for t in sized if table[t].gpus >= per * count]
    if fitting:
        chosen = fitting[0]
        return chosen, count, (f"the smallest ml.g7e with at least {per * count} GPU(s): {per} for each of {count} "
                               f"configuration(s) at once")
    chosen = sized[-1]
    at_once = table[chosen].gpus // per
    return chosen, at_once, (f"the largest ml.g7e, {table[chosen].gpus} GPUs: {count} configurations of {per} GPU(s) "
                             f"need more" + _batched(count, at_once))


def _batched(count: int, at_once: int) -> str:
    if at_once >= count:
        return f"; all {count} at once"
    batches = -(-count // at_once)
    return f"; in {batches} batches of up to {at_once}, each loaded when the one before is measured and removed"


def layout_seconds(request: SweepRequest, batches: int, configurations: int, bench_s: float) -> float:
    return request.provision_s + batches * request.provision_s + configurations * bench_s + request.teardown_s


def plan_layout(request: SweepRequest, classic: dict[str, Any], *, offline: bool, facts: Any, now: datetime,
                bench_s: float) -> tuple[ComponentLayout, dict[str, Any]]:
    """The layout and each configuration's component plan by label (`classic`: the classic layout's plans, whose
    instance says how many GPUs a configuration takes)."""
    from ..hosting import TP_ENV, Hosting
    from ..plan import PlanRequest, build_plan
    from ..speculative import parse_mode
    from ..tags import PeagleTags

    configs = list(request.configurations)
    first = next(iter(classic.values()))
    per = first.gpus_per_instance or 1
    spec = facts.spec(first.model_id, region=request.region, instance_type=None, version=None, offline=offline)
    instance_type, at_once, why = choose_instance(request, per, len(configs), list(spec.supported_instance_types))
    batches = [configs[i:i + at_once] for i in range(0, len(configs), at_once)]
    seconds = layout_seconds(request, len(batches), len(configs), bench_s)
    ttl = request.ttl_s or max(3600.0, 2 * seconds)  # every resource expires, as a classic sweep's endpoints
    host = host_name(request)
    plans: dict[str, Any] = {}
    summaries = []
    for number, batch in enumerate(batches, start=1):
        for config in batch:
            plan = build_plan(PlanRequest(
                model=request.model, mode=parse_mode(config.mode), k=config.k, name=resource_name(request, config),
                drafter=request.drafter if config.mode == "dflash" else None, host=host, hosting=Hosting.COMPONENT, instance_type=instance_type, region=request.region,
                role=request.role, accept_eula=request.accept_eula, env={TP_ENV: str(per)},
                tags=PeagleTags(sweep_id=request.sweep_id).to_aws(), ttl=timedelta(seconds=ttl), offline=offline,
            ), facts=facts, now=now)
            plans[config.label] = plan
            body = plan.create_inference_component
            needs = body["Specification"]["ComputeResourceRequirements"]
            summaries.append(ComponentSummary(
                label=config.label, component=plan.inference_component_name, batch=number,
                speculative_config=plan.speculative_config, drafter_channel=plan.drafter_channel is not None,
                accelerators=needs["NumberOfAcceleratorDevicesRequired"], memory_mb=needs["MinMemoryRequiredInMb"],
                copies=body["RuntimeConfig"]["CopyCount"], create_model=plan.create_model,
                create_inference_component=body))
    one = next(iter(plans.values()))
    for plan in plans.values():  # the host's bodies come from every plan alike: one endpoint, whichever is asked
        if (plan.create_endpoint_config, plan.create_endpoint) != (one.create_endpoint_config, one.create_endpoint):
            raise AssertionError(f"the plans of {host} disagree on its endpoint config or endpoint")
    price = one.price_per_hour_usd
    return ComponentLayout(
        endpoint=host, instance_type=instance_type, gpus=one.gpus_per_instance or 0, gpus_per_configuration=per,
        at_once=at_once, batches=[[c.label for c in batch] for batch in batches], choice=why,
        price_per_hour_usd=price, price_source=one.price_source, provision_s=request.provision_s,
        load_s=request.provision_s, bench_s=bench_s, teardown_s=request.teardown_s, estimated_s=seconds,
        estimated_usd=None if price is None else round(price * seconds / 3600, 4), components=summaries,
        create_endpoint_config=one.create_endpoint_config, create_endpoint=one.create_endpoint,
    ), plans

