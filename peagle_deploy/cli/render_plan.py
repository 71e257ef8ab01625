"""Human rendering of a DeploymentPlan: a summary, what is unverified or missing, then the bodies."""

from __future__ import annotations

import json

from ..plan import DeploymentPlan


def _money(value: float | None) -> str:
    return "unknown" if value is None else f"${value:,.2f}/h"


def render_plan(console, plan: DeploymentPlan) -> None:
    from rich.json import JSON

    render_summary(console, plan)
    requests = [("CreateModel", plan.create_model),
                *((f"CreateModel {m['ModelName']} (instance pool)", m) for m in plan.create_pool_models),
                ("CreateEndpointConfig", plan.create_endpoint_config), ("CreateEndpoint", plan.create_endpoint)]
    if plan.register_scalable_target is not None:  # Application Auto Scaling, after InService and verification
        requests += [("RegisterScalableTarget (once InService and verified)", plan.register_scalable_target),
                     ("PutScalingPolicy", plan.put_scaling_policy)]
    if plan.create_inference_component is not None:  # hosting component: once the endpoint is InService
        requests.append(("CreateInferenceComponent (once the endpoint is InService)", plan.create_inference_component))
        requests += [(request.title, request.body) for request in plan.component_requests]
    for title, body in tags_once(console, requests):
        console.print(f"\n[bold]{title}[/bold]")
        # soft_wrap: no line break inside a JSON string, on a narrow terminal either
        console.print(JSON(json.dumps(body), indent=2), soft_wrap=True)
    if plan.acceptance_alarm is not None:  # the deploy's last writes (docs/monitoring.md); --json has every body
        render_acceptance(console, plan.acceptance_alarm)


def render_acceptance(console, alarm) -> None:
    """The acceptance alarm's three requests in a few lines (the bodies are in --json)."""
    from ..acceptance_alarm import EVALUATION_PERIODS, NAMESPACE

    body = alarm.put_metric_alarm
    [expression] = [m["Expression"] for m in body["Metrics"] if m.get("Expression")]
    lines = [f"PutMetricFilter {f['filterName']} on {f['logGroupName']}: {f['metricTransformations'][0]['metricValue']}"
             f" -> {NAMESPACE} {f['metricTransformations'][0]['metricName']}" for f in alarm.put_metric_filters]
    lines += [f"  filter pattern (vLLM's SpecDecoding line at K={alarm.k}): {alarm.put_metric_filters[0]['filterPattern']}",
              f"PutMetricAlarm {alarm.alarm_name}: {expression} < {alarm.floor.value:.2f} per minute, "
              f"{EVALUATION_PERIODS} of {EVALUATION_PERIODS} minutes; no data: {body['TreatMissingData']}"]
    console.print("\n[bold]Acceptance alarm (once InService and verified; every body in --json)[/bold]")
    for line in lines:
        console.print(f"  {line}", markup=False, highlight=False, soft_wrap=True)


_CARRIERS = {"CreateModel": "model", "CreateEndpointConfig": "endpoint config", "CreateEndpoint": "endpoint",
             "CreateInferenceComponent (once the endpoint is InService)": "inference component",
             "PutMetricAlarm (wake up: a request found no copy)": "wake-up alarm"}


def tags_once(console, requests: list[tuple[str, dict | None]]) -> list[tuple[str, dict | None]]:
    """Print the tags the create requests share once, and return the requests with their `Tags` said in words
    ("the 13 tags above"): the same list three times was most of the first screen. A request whose tags differ
    keeps its own list; `--json` keeps every body as sent."""
    tagged = [(title, body) for title, body in requests if body and body.get("Tags")]
    if len(tagged) < 2:
        return requests
    shared = tagged[0][1]["Tags"]
    carriers = [title for title, body in tagged if body["Tags"] == shared]
    if len(carriers) < 2:
        return requests
    names = [_CARRIERS.get(title, f"model {title.split()[1]}" if title.endswith("(instance pool)") else title)
             for title in carriers]
    console.print(f"\n[bold]Tags[/bold] (on the {', the '.join(names[:-1])} and the {names[-1]})")
    width = max(len(tag["Key"]) for tag in shared)
    for tag in shared:
        console.print(f"  {tag['Key']:<{width}}  {tag['Value']}", markup=False, highlight=False, soft_wrap=True)
    words = f"the {len(shared)} tags above"
    return [(title, {**body, "Tags": words} if title in carriers else body) for title, body in requests]


def render_summary(console, plan: DeploymentPlan, title: str = "peagle deploy --dry-run: nothing was created") -> None:
    from ..output import print_key_values

    gpus = "?" if plan.gpus_per_instance is None else str(plan.gpus_per_instance)
    rows = [
        ("endpoint", plan.endpoint_name),
        ("model", f"{plan.display_name} ({plan.model_id} v{plan.model_version})"),
        ("region", plan.region),
        ("hosting", _hosting(plan)),
        ("instance", f"{fleet(plan)} ({gpus} GPU each)" if not plan.pools else
         f"{fleet(plan)} (instance pools, in priority order)"),
        *_pool_rows(plan),
        ("mode", plan.mode.value + (f", K={plan.k}" if plan.k else " (no speculation)")),
        ("speculative config", plan.speculative_config or "none"),
        ("model data", plan.model_data_uri + (" (prepacked)" if plan.model_data_prepacked else "")),
        ("drafter channel", _drafter(plan)),
        ("image", plan.image_uri + (" (--image)" if plan.image_overridden else "")),
        ("price", plan.price.describe() if plan.price is not None else
         f"{_money(plan.price_per_hour_usd)} ({plan.price_source})"),
        *([("at zero", f"{_money(plan.price_at_zero_usd_per_hour)} (no instance-hours)")]
          if plan.price_at_zero_usd_per_hour is not None else []),
        *([("autoscaling", _autoscaling(plan))] if plan.autoscaling else []),
        *([("scale to zero", plan.component_scaling.idle.describe())]
          if plan.component_scaling is not None and plan.component_scaling.idle is not None else []),
        *([("acceptance alarm", f"{plan.acceptance_alarm.describe()}; floor: {plan.acceptance_alarm.floor.source}")]
          if plan.acceptance_alarm is not None else []),
        ("expires", plan.expires_at.isoformat() if plan.expires_at else "never (set --ttl)"),
        ("spec source", f"{plan.resolution_source}: {plan.resolution_detail}".rstrip(": ")),
    ]
    rows.extend(_network_rows(plan))
    print_key_values(console, rows, title=title)
    for field, why in plan.unverified.items():
        console.print(f"[yellow]unverified[/yellow] {field}: {why}", soft_wrap=True)
    for item in plan.missing:
        console.print(f"[red]missing[/red] {item}", soft_wrap=True)
    for note in plan.notes:
        console.print(f"[cyan]note[/cyan] {note}", soft_wrap=True)


def fleet(plan: DeploymentPlan) -> str:
    """'1 x ml.g7e.2xlarge', or with instance pools '1 x one of ml.g7e.2xlarge, ml.g7e.4xlarge'."""
    if not plan.pools:
        return f"{plan.instance_count} x {plan.instance_type}"
    return f"{plan.instance_count} x one of {', '.join(plan.pool_types)}"


def _pool_rows(plan: DeploymentPlan) -> list[tuple[str, str]]:
    """Each listed instance type in order: price, quota, fit, model, or why it is left out (plan_pools.py)."""
    rows = [("pool" if pool.kept else "left out", pool.line()) for pool in plan.pools]
    if plan.provision_timeout_s:
        rows.append(("provision timeout", f"{plan.provision_timeout_s}s to provision from the pools"))
    if plan.capacity_reservation is not None:
        rows.append(("capacity reservation", plan.capacity_reservation.describe()))
    return rows


def _hosting(plan: DeploymentPlan) -> str:
    if plan.inference_component_name is None:
        return "endpoint (the model on the variant's instances)"
    requirements = (plan.create_inference_component or {}).get("Specification", {}).get(
        "ComputeResourceRequirements", {})
    copies = (plan.create_inference_component or {}).get("RuntimeConfig", {}).get("CopyCount")
    return (f"inference component {plan.inference_component_name} ({copies} x "
            f"{requirements.get('NumberOfAcceleratorDevicesRequired', 0):g} GPU, "
            f"{requirements.get('MinMemoryRequiredInMb')} MB; model {plan.create_model['ModelName']})")


def _autoscaling(plan: DeploymentPlan) -> str:
    top = "up to an unknown price" if plan.max_price_per_hour_usd is None else \
        f"up to {_money(plan.max_price_per_hour_usd)}"
    if plan.inference_component_name is None:
        return f"{plan.autoscaling.describe()}; {top}"
    policy = plan.autoscaling
    return (f"{policy.min_capacity}-{policy.max_capacity} copies, target {policy.target:g} "
            f"{'concurrent requests' if policy.metric == 'concurrency' else 'invocations per minute'} per copy; {top}")


def _drafter(plan: DeploymentPlan) -> str:
    if not plan.drafter_channel:
        return "dflash <- none staged (see missing)" if plan.mode.value == "dflash" else "none"
    return f"{plan.drafter_channel['ChannelName']} <- {plan.drafter_channel['S3DataSource']['S3Uri']}"


def _network_rows(plan: DeploymentPlan) -> list[tuple[str, str]]:
    """--subnet/--security-group/--kms-key, shown only when given (SageMaker's defaults otherwise)."""
    rows = []
    if plan.vpc_config:
        rows.append(("vpc subnets", ", ".join(plan.vpc_config["Subnets"])))
        rows.append(("vpc security groups", ", ".join(plan.vpc_config["SecurityGroupIds"])))
    if plan.kms_key_id:
        rows.append(("volume kms key", plan.kms_key_id))
    return rows
