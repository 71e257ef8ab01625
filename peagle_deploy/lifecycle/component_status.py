"""`status` for an endpoint that hosts inference components: its component, copies and instances (0 at zero), the
scaling (the scale-in rule and whether it acted, the wake-up policy and alarm), and the cost so far from
instance-hours only.

The hourly price of a component-based endpoint is the instances running now x one instance's price ($0.00/h at
zero); the cost so far is estimated from the copy count over time (`components.estimate_cost`: Application Auto
Scaling's scaling activities), not from the age of the endpoint, which at zero would keep growing.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from ..tags import PeagleTags
from .components import estimate_cost, hosting_of, list_components, read_component


def component_of(sm: Any, described: dict[str, Any], tags: PeagleTags) -> str | None:
    """The component peagle made for a component-based endpoint (its tag, else the first SageMaker lists)."""
    shape = hosting_of(described, tags)
    if shape.hosting != "component":
        return None
    if shape.components:
        return shape.components[0]
    listed = list_components(sm, described["EndpointName"])
    return listed[0]["InferenceComponentName"] if listed else None


def startup_group(sm: Any, described: dict[str, Any], tags: PeagleTags) -> str | None:
    """Whose log group holds vLLM's start-up lines: the component's (None: the endpoint's, as for a classic one)."""
    return component_of(sm, described, tags)


def model_of(sm: Any, described: dict[str, Any], tags: PeagleTags, read: Any) -> str | None:
    """The model a component-based endpoint serves: the one its component names."""
    from .components import describe_component

    component = component_of(sm, described, tags)
    if component is None:
        return None
    found = read(lambda: describe_component(sm, component))
    return ((found or {}).get("Specification") or {}).get("ModelName")


def add_components(session: Any, sm: Any, rows: list[Any], described: dict[str, dict[str, Any]],
                   tags: dict[str, PeagleTags], *, now: datetime, read: Any) -> None:
    """Fill the component rows (`EndpointStatus.component`, instances, hourly price and cost so far)."""
    aas = cloudwatch = None
    for row in rows:
        if row.name not in described or hosting_of(described[row.name], tags[row.name]).hosting != "component":
            continue
        row.hosting = "component"
        name = read(lambda r=row: component_of(sm, described[r.name], tags[r.name]))
        if name is None:
            row.cost_how = "no inference component: the endpoint's instances bill as they run"
            continue
        if aas is None:
            aas, cloudwatch = session.client("application-autoscaling"), session.client("cloudwatch")
        component = read(lambda r=row, n=name: read_component(sm, aas, cloudwatch, n, described[r.name], tags[r.name]))
        row.component = component
        if component.unfinished and not (row.lease is not None and row.lease.fresh):  # a deploy in progress makes it
            from .intent import recover_command

            row.recover_command = row.recover_command or recover_command(row.name, session.region)
        if component.current_instances is not None:
            row.instance_count = component.current_instances
        one = row.price.for_count(1).usd_per_hour if row.price is not None else None
        if one is not None and component.current_instances is not None:
            row.price_per_hour_usd = round(one * component.current_instances, 4)
        gpus = _gpus(row.instance_type)
        per_instance = max(1, int(gpus // component.accelerators)) if gpus and component.accelerators else 1
        estimate = estimate_cost(aas, name, since=row.created_at, start_copies=tags[row.name].instance_count or 1,
                                 per_instance=per_instance, usd_per_instance_hour=one, now=now)
        row.cost_so_far_usd, row.cost_how = estimate.usd, estimate.how


def _gpus(instance_type: str | None) -> int | None:
    from ..instances import instance_info

    info = instance_info(instance_type) if instance_type else None
    return info.gpus if info else None
