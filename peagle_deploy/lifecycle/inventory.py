"""`status`: what peagle created that still exists, with age, expiry and cost so far."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from pydantic import BaseModel, Field

from ..aws import is_not_found
from ..errors import UsageError
from ..inputs import validate_name
from ..tags import PeagleTags
from .autoscaling import SERVICE as AUTOSCALING_SERVICE
from .autoscaling import AutoscalingStatus, read_autoscaling
from .tags import read_tags
from ..pricing import Price
from .startup_log import StartupInfo
from .verify import Check


class EndpointStatus(BaseModel):
    name: str
    status: str
    failure_reason: str | None = None
    model: str | None
    model_id: str | None
    mode: str | None
    k: int | None
    instance_type: str | None
    instance_count: int | None
    created_at: datetime | None
    age_s: float | None
    expires_at: datetime | None
    expires_in_s: float | None
    expired: bool | None = Field(description="None when there is no readable expiry tag")
    price_per_hour_usd: float | None
    cost_so_far_usd: float | None
    price: Price | None = Field(None, description="the SageMaker hosting price and its source (pricing.py)")
    tag_problems: list[str] = Field(default_factory=list, description="peagle tags present but unreadable")
    vllm: StartupInfo | None = None  # one endpoint only: what vLLM logged at start (CloudWatch)
    startup_check: Check | None = Field(None, description="one endpoint only: vLLM's logged speculative config "
                                                          "against the served config (verified / failed / not verified)")
    autoscaling: AutoscalingStatus | None = Field(
        default=None, description="Application Auto Scaling now; state 'unknown' when it could not be read")


def _row(described: dict[str, Any], tags: PeagleTags, now: datetime, region: str,
         profile: str | None = None) -> EndpointStatus:
    from ..pricing import instance_price

    created = tags.created_at or described.get("CreationTime")
    if isinstance(created, datetime) and created.tzinfo is None:
        created = created.replace(tzinfo=UTC)
    expires = tags.expires_at
    priced = instance_price(tags.instance_type, region, count=tags.instance_count or 1, profile=profile) \
        if tags.instance_type else None
    price = priced.usd_per_hour if priced is not None else None
    age = (now - created).total_seconds() if created else None
    return EndpointStatus(
        name=described["EndpointName"], status=described["EndpointStatus"],
        failure_reason=described.get("FailureReason"), model=tags.model, model_id=tags.model_id, mode=tags.mode,
        k=tags.k, instance_type=tags.instance_type, instance_count=tags.instance_count, created_at=created,
        age_s=age, expires_at=expires, expires_in_s=(expires - now).total_seconds() if expires else None,
        expired=tags.expired(now) if expires or tags.problems else None, price_per_hour_usd=price,
        cost_so_far_usd=round(price * age / 3600, 2) if price is not None and age is not None else None,
        tag_problems=tags.problems, price=priced,
    )


def status(session: Any, name: str | None = None, *, now: datetime | None = None) -> list[EndpointStatus]:
    sm = session.client("sagemaker")
    now = now or datetime.now(UTC)
    if name:
        validate_name(name)
        try:
            described = sm.describe_endpoint(EndpointName=name)
        except Exception as exc:
            if is_not_found(exc):
                raise UsageError(f"no endpoint named {name!r} in {session.region}", "see peagle status") from None
            raise
        tags = read_tags(sm, described["EndpointArn"])
        if not tags.managed:
            raise UsageError(f"endpoint {name!r} was not created by peagle", "peagle only reports what it created")
        row = _row(described, tags, now, session.region, session.profile)
        if described["EndpointStatus"] == "InService":
            row.vllm, row.startup_check = _startup(session, sm, name, described)
        _add_autoscaling(session, [row], {name: described}, {name: tags})
        return [row]
    rows = []
    described_by_name: dict[str, dict[str, Any]] = {}
    tags_by_name: dict[str, PeagleTags] = {}
    for page in sm.get_paginator("list_endpoints").paginate():
        for summary in page.get("Endpoints", []):
            tags = read_tags(sm, summary["EndpointArn"])
            if not tags.managed:
                continue
            try:
                described = sm.describe_endpoint(EndpointName=summary["EndpointName"])
            except Exception as exc:
                if is_not_found(exc):  # deleted between the list and the describe
                    continue
                raise
            rows.append(_row({**summary, **described}, tags, now, session.region, session.profile))
            described_by_name[summary["EndpointName"]] = described
            tags_by_name[summary["EndpointName"]] = tags
    _add_autoscaling(session, rows, described_by_name, tags_by_name)
    return rows


def _startup(session: Any, sm: Any, name: str, described: dict[str, Any]) -> tuple[StartupInfo, Check]:
    """What vLLM logged at start, checked against the speculative config the endpoint is served with."""
    from ..served_config import read_served_config
    from ..speculative import ENV_VAR
    from .startup_log import read_cloudwatch
    from .verify import by_hand, startup_check

    served = read_served_config(sm, name, described=described)
    spec = served.speculation
    expected = None
    if spec.mode not in (None, "off"):  # the served env value itself, as sent
        expected = {"method": spec.method, "num_speculative_tokens": spec.k}
        if spec.parallel_drafting is not None:
            expected["parallel_drafting"] = spec.parallel_drafting
    info = read_cloudwatch(session.client("logs"), name, expected=expected, attempts=1)
    if spec.mode is None:  # nothing to check the log against
        from .verify import NOT_VERIFIED

        check = Check(name="vLLM start-up", state=NOT_VERIFIED, detail=f"{ENV_VAR} unreadable: {spec.note}",
                      how_to_check=by_hand(name, session.region), actual=info.model_dump(exclude={"warnings"}))
        return info, check
    return info, startup_check(info, expected, how_to_check=by_hand(name, session.region))


def _add_autoscaling(session: Any, rows: list[EndpointStatus], described: dict[str, dict[str, Any]],
                     tags: dict[str, PeagleTags]) -> None:
    """Each managed endpoint's autoscaling (two reads for all of them; a failed read is 'unknown')."""
    if not rows:
        return
    states = read_autoscaling(session.client(AUTOSCALING_SERVICE), described)
    for row in rows:
        state = states.get(row.name)
        if state is not None and row.name in tags:
            state.tagged = tags[row.name].autoscale is not None
        row.autoscaling = state
