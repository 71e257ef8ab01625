"""`status`: what peagle created that still exists, with age, expiry and cost so far."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from pydantic import BaseModel

from ..errors import UsageError
from ..instances import hourly_price
from .startup_log import StartupInfo
from .errors import is_not_found
from .tags import is_managed, list_tags, parse_time


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
    price_per_hour_usd: float | None
    cost_so_far_usd: float | None
    vllm: StartupInfo | None = None  # one endpoint only: what vLLM logged at start (CloudWatch)


def _row(described: dict[str, Any], tags: dict[str, str], now: datetime) -> EndpointStatus:
    created = parse_time(tags.get("peagle:created-at")) or described.get("CreationTime")
    if isinstance(created, datetime) and created.tzinfo is None:
        created = created.replace(tzinfo=UTC)
    expires = parse_time(tags.get("peagle:expires-at"))
    instance_type = tags.get("peagle:instance-type")
    count = int(tags["peagle:instance-count"]) if tags.get("peagle:instance-count", "").isdigit() else None
    price = hourly_price(instance_type, count or 1) if instance_type else None
    age = (now - created).total_seconds() if created else None
    k = int(tags["peagle:k"]) if tags.get("peagle:k", "").isdigit() and tags["peagle:k"] != "0" else None
    return EndpointStatus(
        name=described["EndpointName"], status=described["EndpointStatus"],
        failure_reason=described.get("FailureReason"), model=tags.get("peagle:model"),
        model_id=tags.get("peagle:model-id"), mode=tags.get("peagle:mode"), k=k, instance_type=instance_type,
        instance_count=count, created_at=created, age_s=age, expires_at=expires,
        expires_in_s=(expires - now).total_seconds() if expires else None, price_per_hour_usd=price,
        cost_so_far_usd=round(price * age / 3600, 2) if price is not None and age is not None else None,
    )


def status(session: Any, name: str | None = None, *, now: datetime | None = None) -> list[EndpointStatus]:
    sm = session.client("sagemaker")
    now = now or datetime.now(UTC)
    if name:
        try:
            described = sm.describe_endpoint(EndpointName=name)
        except Exception as exc:
            if is_not_found(exc):
                raise UsageError(f"no endpoint named {name!r} in {session.region}", "see peagle status") from None
            raise
        tags = list_tags(sm, described["EndpointArn"])
        if not is_managed(tags):
            raise UsageError(f"endpoint {name!r} was not created by peagle", "peagle only reports what it created")
        row = _row(described, tags, now)
        if described["EndpointStatus"] == "InService":
            from .startup_log import read_cloudwatch

            row.vllm = read_cloudwatch(session.client("logs"), name, attempts=1)
        return [row]
    rows = []
    for page in sm.get_paginator("list_endpoints").paginate():
        for summary in page.get("Endpoints", []):
            tags = list_tags(sm, summary["EndpointArn"])
            if is_managed(tags):
                rows.append(_row({**summary, **sm.describe_endpoint(EndpointName=summary["EndpointName"])}, tags, now))
    return rows
