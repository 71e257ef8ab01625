"""`status`: what peagle created that still exists, with age, expiry and cost so far."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from pydantic import BaseModel, Field

from ..aws import is_not_found
from ..errors import UsageError
from ..inputs import validate_name
from ..instances import hourly_price
from ..tags import PeagleTags
from .autoscaling import SERVICE as AUTOSCALING_SERVICE
from .autoscaling import AutoscalingStatus, read_autoscaling
from .tags import read_tags
from .startup_log import StartupInfo


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
    tag_problems: list[str] = Field(default_factory=list, description="peagle tags present but unreadable")
    vllm: StartupInfo | None = None  # one endpoint only: what vLLM logged at start (CloudWatch)
    autoscaling: AutoscalingStatus | None = Field(
        default=None, description="Application Auto Scaling now; state 'unknown' when it could not be read")


def _row(described: dict[str, Any], tags: PeagleTags, now: datetime) -> EndpointStatus:
    created = tags.created_at or described.get("CreationTime")
    if isinstance(created, datetime) and created.tzinfo is None:
        created = created.replace(tzinfo=UTC)
    expires = tags.expires_at
    price = hourly_price(tags.instance_type, tags.instance_count or 1) if tags.instance_type else None
    age = (now - created).total_seconds() if created else None
    return EndpointStatus(
        name=described["EndpointName"], status=described["EndpointStatus"],
        failure_reason=described.get("FailureReason"), model=tags.model, model_id=tags.model_id, mode=tags.mode,
        k=tags.k, instance_type=tags.instance_type, instance_count=tags.instance_count, created_at=created,
        age_s=age, expires_at=expires, expires_in_s=(expires - now).total_seconds() if expires else None,
        expired=tags.expired(now) if expires or tags.problems else None, price_per_hour_usd=price,
        cost_so_far_usd=round(price * age / 3600, 2) if price is not None and age is not None else None,
        tag_problems=tags.problems,
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
        row = _row(described, tags, now)
        if described["EndpointStatus"] == "InService":
            from .startup_log import read_cloudwatch

            row.vllm = read_cloudwatch(session.client("logs"), name, attempts=1)
        _add_autoscaling(session, [row], {name: described})
        return [row]
    rows = []
    described_by_name: dict[str, dict[str, Any]] = {}
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
            rows.append(_row({**summary, **described}, tags, now))
            described_by_name[summary["EndpointName"]] = described
    _add_autoscaling(session, rows, described_by_name)
    return rows


def _add_autoscaling(session: Any, rows: list[EndpointStatus], described: dict[str, dict[str, Any]]) -> None:
    """Each managed endpoint's autoscaling (two reads for all of them; a failed read is 'unknown')."""
    if not rows:
        return
    states = read_autoscaling(session.client(AUTOSCALING_SERVICE), described)
    for row in rows:
        row.autoscaling = states.get(row.name)
