"""The plan of a sweep before anything is created: each endpoint, its instance, time and dollars.

Time per configuration = provisioning + (bench window + per-level overhead) x levels + log wait +
teardown; dollars = that time x the instance's SageMaker hosting price per hour (pricing.py: the
Pricing API, else peagle's hosting table). A URL configuration costs what its --instance-type costs over the bench
alone, or nothing. An unknown price makes its configuration's dollars and the total unknown (None, never $0.00),
and leaves a --budget unchecked (`price_unknown` says which price and why): the plan is still printed (a dry run
needs no AWS account), and a sweep that would deploy refuses the budget it cannot check (cli/sweep.py).
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field

from ..errors import UsageError
from .component_layout import ComponentLayout
from .config import Configuration, SweepRequest, resource_name

LEVEL_OVERHEAD_S = 15.0  # warm-up requests and the drain at the end of each level


class ConfigPlan(BaseModel):
    label: str
    mode: str
    k: int | None
    endpoint: str = Field(description="the SageMaker endpoint name, or the URL served by the user")
    instance_type: str | None
    instance_count: int = 1
    price_per_hour_usd: float | None
    provision_s: float
    bench_s: float
    teardown_s: float
    estimated_s: float
    estimated_usd: float | None = Field(description="None: its instance's price is unknown")


class ClassicEstimate(BaseModel):
    """--hosting component: what the classic layout (one endpoint per configuration) is estimated to cost."""

    instance_type: str | None
    price_per_hour_usd: float | None = Field(description="one endpoint's")
    configurations: list[ConfigPlan]
    estimated_usd: float | None
    estimated_s: float = Field(description="all its endpoints' time, one after another")


class SweepPlan(BaseModel):
    sweep_id: str
    model: str
    region: str
    target: str = Field(description="'sagemaker' (deploy each) or 'urls' (servers the user runs)")
    configurations: list[ConfigPlan]
    concurrency: list[int]
    parallel: int
    estimated_usd: float | None = Field(description="None: a price is unknown (`price_unknown`), so is the total")
    estimated_wall_s: float
    budget_usd: float | None
    within_budget: bool | None = Field(description="None: --budget could not be checked (`price_unknown`)")
    price_unknown: str | None = Field(None, description="the first unknown price, and why it is unknown")
    price_fix: str | None = Field(None, description="what makes it known")
    notes: list[str] = Field(default_factory=list)
    hosting: str = Field("endpoint", description="endpoint: one endpoint per configuration; component: one "
                                                 "endpoint, each configuration a component of it (`layout`)")
    layout: ComponentLayout | None = None
    classic: ClassicEstimate | None = Field(None, description="--hosting component: the classic layout's estimate")


def bench_seconds(request: SweepRequest) -> float:
    per_level = request.duration_s + LEVEL_OVERHEAD_S
    return per_level * len(request.concurrency) + (request.logs_wait_s if not request.uses_urls else 0.0)


def wall_seconds(durations: list[float], lanes: int) -> float:
    """Longest lane when configurations go, in order, to the first free one of `lanes`."""
    ends = [0.0] * max(1, lanes)
    for d in durations:
        i = ends.index(min(ends))
        ends[i] += d
    return max(ends) if durations else 0.0


def _deployment_plan(request: SweepRequest, config: Configuration, *, offline: bool, ttl_s: float | None,
                     facts: Any, instance_type: str | None) -> Any:
    from datetime import timedelta

    from ..plan import PlanRequest, build_plan
    from ..speculative import parse_mode
    from ..tags import PeagleTags

    # the sweep-id tag comes from the tag model and rides with the plan's own tags (--tag cannot use peagle:)
    return build_plan(PlanRequest(
        model=request.model, mode=parse_mode(config.mode), k=config.k, name=resource_name(request, config),
        drafter=request.drafter if config.mode == "dflash" else None,
        instance_type=instance_type, region=request.region, role=request.role,
        accept_eula=request.accept_eula, tags=PeagleTags(sweep_id=request.sweep_id).to_aws(),
        ttl=timedelta(seconds=ttl_s) if ttl_s else None, offline=offline,
    ), facts=facts)


def endpoint_ttl_s(request: SweepRequest, config_estimate_s: float) -> float:
    """Every endpoint expires: the user's --ttl, else twice its estimated life (at least an hour)."""
    return request.ttl_s or max(3600.0, 2 * config_estimate_s)


def plan_sweep(request: SweepRequest, *, offline: bool) -> tuple[SweepPlan, dict[str, Any]]:
    """The sweep plan and, for SageMaker sweeps, each configuration's DeploymentPlan by label."""
    from ..plan import FactSource
    from ..pricing import instance_price
    from ..redaction import redact_url

    bench_s = bench_seconds(request)
    component = request.hosting == "component"
    rows: list[ConfigPlan] = []
    deployments: dict[str, Any] = {}
    notes: list[str] = []
    unknown: list[tuple[str, str | None]] = []  # (which price and why, the fix), first first
    facts = FactSource(profile=request.profile)  # every configuration deploys the same spec: resolved once
    for config in request.configurations:
        if config.url:
            priced = instance_price(request.instance_type, request.region, profile=request.profile,
                                    offline=offline) if request.instance_type else None
            price = priced.usd_per_hour if priced is not None else None
            if priced is not None and price is None:
                notes.append(f"{request.instance_type}: price {priced.describe()}")
                unknown.append((f"the SageMaker hosting price of {request.instance_type} is unknown ({priced.detail})",
                                priced.fix))
            seconds = bench_s
            rows.append(ConfigPlan(label=config.label, mode=config.mode, k=config.k, endpoint=redact_url(config.url),
                                   instance_type=request.instance_type, price_per_hour_usd=price, provision_s=0,
                                   bench_s=bench_s, teardown_s=0, estimated_s=seconds,
                                   estimated_usd=None if priced is not None and price is None
                                   else round((price or 0) * seconds / 3600, 4)))
            continue
        seconds = request.provision_s + bench_s + request.teardown_s
        # with --hosting component, --instance-type is the one endpoint's: the classic layout is the model's own
        deployment = _deployment_plan(request, config, offline=offline, ttl_s=endpoint_ttl_s(request, seconds),
                                      facts=facts, instance_type=None if component else request.instance_type)
        deployments[config.label] = deployment
        price = deployment.price_per_hour_usd
        if price is None:
            why = deployment.price.detail if deployment.price is not None else "no price"
            fix = (deployment.price.fix if deployment.price is not None else None) or \
                "give AWS credentials that allow pricing:GetProducts"
            unknown.append((f"the SageMaker hosting price of {deployment.instance_type} is unknown ({why})", fix))
            note = (f"{deployment.instance_type}: price {deployment.price.describe() if deployment.price else 'unknown'}"
                    "; its dollars, and the total, are unknown")
            if note not in notes:
                notes.append(note)
        rows.append(ConfigPlan(label=config.label, mode=config.mode, k=config.k, endpoint=deployment.endpoint_name,
                               instance_type=deployment.instance_type, instance_count=deployment.instance_count,
                               price_per_hour_usd=price, provision_s=request.provision_s, bench_s=bench_s,
                               teardown_s=request.teardown_s, estimated_s=seconds,
                               estimated_usd=None if price is None else round(price * seconds / 3600, 4)))
    total = _total(rows)
    if request.num_prompts is not None:
        notes.append(f"--num-prompts bounds each level by requests, not time: the estimate assumes "
                     f"{request.duration_s:g} s per level")
    if any(d.resolution_source == "shipped" for d in deployments.values()):
        notes.append("resolved from the JumpStart specs peagle ships (no AWS call was made)")
    wall = round(wall_seconds([r.estimated_s for r in rows], request.parallel), 1)
    layout = classic = None
    if component:
        layout, deployments = _component_layout(request, deployments, offline=offline, facts=facts, bench_s=bench_s,
                                                notes=notes)
        classic = ClassicEstimate(instance_type=rows[0].instance_type, price_per_hour_usd=rows[0].price_per_hour_usd,
                                  configurations=rows, estimated_usd=total,
                                  estimated_s=round(sum(r.estimated_s for r in rows), 1))
        price = layout.price_per_hour_usd
        rows = [ConfigPlan(label=c.label, mode=c.mode, k=c.k, endpoint=deployments[c.label].inference_component_name,
                           instance_type=layout.instance_type, price_per_hour_usd=price,
                           provision_s=0.0, bench_s=bench_s, teardown_s=request.teardown_s, estimated_s=bench_s,
                           estimated_usd=None if price is None else round(price * bench_s / 3600, 4))
                for c in request.configurations]
        total, wall = layout.estimated_usd, round(layout.estimated_s, 1)
        priced = next(iter(deployments.values())).price  # the one endpoint's, as every component plan carries it
        unknown = [(f"the SageMaker hosting price of {layout.instance_type} is unknown "
                    f"({priced.detail if priced is not None else layout.price_source})",
                    priced.fix if priced is not None else None)] if price is None else []
    within = True if request.budget_usd is None else None if total is None else total <= request.budget_usd
    return SweepPlan(
        sweep_id=request.sweep_id, model=request.model, region=request.region,
        target="urls" if request.uses_urls else "sagemaker", configurations=rows,
        concurrency=request.concurrency, parallel=request.parallel, estimated_usd=total,
        estimated_wall_s=wall, budget_usd=request.budget_usd, within_budget=within,
        price_unknown=unknown[0][0] if unknown else None, price_fix=unknown[0][1] if unknown else None, notes=notes,
        hosting=request.hosting, layout=layout, classic=classic,
    ), deployments


def _total(rows: list[ConfigPlan]) -> float | None:
    """The plan's dollars: unknown when any configuration's are (a sum of unknown prices is unknown, never 0)."""
    if any(r.estimated_usd is None for r in rows):
        return None
    return round(sum(r.estimated_usd or 0.0 for r in rows), 4)


def budget_refusal(plan: SweepPlan) -> UsageError | None:
    """The one line refusing a sweep that would deploy under a --budget its plan could not check."""
    if plan.budget_usd is None or plan.price_unknown is None:
        return None
    return UsageError(f"{plan.price_unknown}, so --budget cannot be checked",
                      f"{plan.price_fix or 'give AWS credentials that allow pricing:GetProducts'} "
                      "(docs/configuration.md#prices)")


def _component_layout(request: SweepRequest, classic: dict[str, Any], *, offline: bool, facts: Any, bench_s: float,
                      notes: list[str]) -> tuple[ComponentLayout, dict[str, Any]]:
    """The component layout's plans, in place of the classic ones (which stay its estimate's, `SweepPlan.classic`)."""
    from datetime import UTC, datetime

    from .component_layout import plan_layout

    layout, plans = plan_layout(request, classic, offline=offline, facts=facts, bench_s=bench_s,
                                now=datetime.now(UTC).replace(microsecond=0))
    if layout.price_per_hour_usd is None:
        notes.append(f"{layout.instance_type}: price {layout.price_source}; its dollars, and the total, are unknown")
    notes.append(f"components: one {layout.instance_type} ({layout.choice}); each configuration is measured alone "
                 "(only the component being measured gets requests)")
    notes.append(f"estimate: the endpoint's instance starts in --provision-estimate ({request.provision_s:g} s), each "
                 f"batch's components load in as long again, then {len(plans)} bench(es) one after another and "
                 f"{request.teardown_s:g} s of teardown; the classic layout counts a --provision-estimate per endpoint")
    return layout, plans
