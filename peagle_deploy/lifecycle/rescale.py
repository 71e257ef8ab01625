"""`peagle update NAME --autoscale MIN:MAX --target-concurrency N` alone: a new autoscaling range or target.

No new model or endpoint config and no UpdateEndpoint (the fleet does not change): RegisterScalableTarget
(which moves the running instance count into the new range at once), PutScalingPolicy, and the endpoint's
`peagle:autoscale` tag, in that order. The same reads and refusals as any update come first (only peagle's
endpoints, InService, the one-variant configuration); an --instance-count outside the new range is refused by
the flag parser, as deploy refuses it.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from pydantic import BaseModel, Field

from ..autoscale import AutoscalePolicy
from ..errors import UsageError


class RescalePlan(BaseModel):
    endpoint_name: str
    endpoint_arn: str
    region: str
    before: AutoscalePolicy | None
    after: AutoscalePolicy
    serving: str  # what the endpoint serves, unchanged
    notes: list[str] = Field(default_factory=list)

    @property
    def writes(self) -> list[str]:
        resource = f"endpoint/{self.endpoint_name}/variant/AllTraffic"
        return [f"RegisterScalableTarget {resource} ({self.after.min_capacity}-{self.after.max_capacity} instances)",
                f"PutScalingPolicy peagle-target-tracking on {resource} ({self.after.describe()})",
                f"AddTags {self.endpoint_name} (peagle:autoscale={self.after.to_tag()})"]


def prepare_rescale(session: Any, request: Any, *, sleep: Callable[[float], None] = time.sleep) -> RescalePlan:
    """Reads only. `request`: an UpdateRequest whose only change is `autoscale`."""
    from .update_plan import check_request, range_note, read_live, serving
    from .wait import read_retrying

    check_request(request)
    live = read_live(session.client("sagemaker"), request, read=lambda call: read_retrying(call, sleep=sleep))
    before = live.peagle.autoscale
    if before == request.autoscale:
        raise UsageError(f"endpoint {request.name!r} already autoscales {before.describe()}",
                         "nothing to update; pass another --autoscale range or target")
    label = serving(live.config, live.model, live.peagle).label(with_instances=True)
    note = range_note(_running(live), request.autoscale, runs="the endpoint runs")
    return RescalePlan(endpoint_name=request.name, endpoint_arn=live.endpoint["EndpointArn"], region=request.region,
                       before=before, after=request.autoscale, serving=label, notes=[note] if note else [])


def _running(live: Any) -> int:
    """The instances the endpoint runs now (DescribeEndpoint's count; the config's where SageMaker gives none)."""
    variants = live.endpoint.get("ProductionVariants") or [{}]
    return int(variants[0].get("CurrentInstanceCount")
               or live.config["ProductionVariants"][0].get("InitialInstanceCount") or 1)


def run_rescale(plan: RescalePlan, session: Any) -> None:
    """Register the new range and policy, then tag the endpoint (its tag says what peagle registered)."""
    from ..hosting import VARIANT_NAME
    from .apply import _add_hint, _as_peagle_error
    from .autoscaling import apply_autoscaling, remove_autoscaling

    aas = session.client("application-autoscaling")
    try:
        apply_autoscaling(aas, plan.endpoint_name, VARIANT_NAME, plan.after)
    except BaseException as exc:  # noqa: BLE001 - signals too: put the autoscaling back as it was
        error = _as_peagle_error(exc)
        try:
            if plan.before is not None:
                apply_autoscaling(aas, plan.endpoint_name, VARIANT_NAME, plan.before)
                _add_hint(error, f"autoscaling is back as it was ({plan.before.describe()})")
            else:
                remove_autoscaling(aas, plan.endpoint_name, [VARIANT_NAME])
                _add_hint(error, "the half-made registration was removed; the endpoint is not autoscaled")
        except BaseException:  # noqa: BLE001 - say what to check instead
            _add_hint(error, f"check its autoscaling with 'peagle status {plan.endpoint_name}'")
        raise error from None
    session.client("sagemaker").add_tags(ResourceArn=plan.endpoint_arn,
                                         Tags=[{"Key": "peagle:autoscale", "Value": plan.after.to_tag()}])
