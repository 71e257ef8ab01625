"""Instance price per hour (AWS Pricing API, else the shipped table) and $ per million output tokens."""

from __future__ import annotations

import json
from typing import Any

from pydantic import BaseModel, ConfigDict

from ..instances import hourly_price, instance_table

PRICING_REGION = "us-east-1"  # the Pricing API is served from us-east-1 (and ap-south-1)
SERVICE_CODE = "AmazonSageMaker"


class Price(BaseModel):
    model_config = ConfigDict(extra="forbid")

    instance_type: str
    instance_count: int = 1
    usd_per_hour: float | None  # for all instances together
    source: str  # "aws-pricing-api", "table: ..." or "unknown"
    estimate: bool


def _pricing_filters(instance_type: str, region: str) -> list[dict[str, str]]:
    pairs = {
        "productFamily": "ML Instance",
        "regionCode": region,
        "instanceName": instance_type,
        "platoinstancetype": "Hosting",
    }
    return [{"Type": "TERM_MATCH", "Field": k, "Value": v} for k, v in pairs.items()]


def price_from_api(pricing_client: Any, instance_type: str, region: str) -> float | None:
    """The on-demand SageMaker hosting price of one instance, or None when the API lists none."""
    paginator = pricing_client.get_paginator("get_products")
    for page in paginator.paginate(
        ServiceCode=SERVICE_CODE, Filters=_pricing_filters(instance_type, region), FormatVersion="aws_v1"
    ):
        for item in page.get("PriceList", []):
            product = json.loads(item) if isinstance(item, str) else item
            for term in product.get("terms", {}).get("OnDemand", {}).values():
                for dim in term.get("priceDimensions", {}).values():
                    usd = dim.get("pricePerUnit", {}).get("USD")
                    if usd and float(usd) > 0 and str(dim.get("unit", "Hrs")).lower().startswith("h"):
                        return float(usd)
    return None


def instance_price(instance_type: str, region: str, *, count: int = 1, pricing_client: Any = None) -> Price:
    """Ask the Pricing API when a client is given; on any failure or no listing, use the shipped table."""
    if pricing_client is not None:
        try:
            usd = price_from_api(pricing_client, instance_type, region)
        except Exception:  # noqa: BLE001 - no access, no network, throttled: the table is the fallback
            usd = None
        if usd is not None:
            return Price(
                instance_type=instance_type,
                instance_count=count,
                usd_per_hour=round(usd * count, 4),
                source=f"aws-pricing-api ({SERVICE_CODE} hosting, {region}, on-demand)",
                estimate=False,
            )
    table_price = hourly_price(instance_type, count)
    if table_price is not None:
        return Price(
            instance_type=instance_type,
            instance_count=count,
            usd_per_hour=table_price,
            source=f"table: {instance_table().price_source}",
            estimate=True,
        )
    return Price(instance_type=instance_type, instance_count=count, usd_per_hour=None, source="unknown", estimate=True)


def usd_per_million_tokens(usd_per_hour: float | None, output_tokens_per_second: float) -> float | None:
    """What a million output tokens cost at this throughput if the instance serves only this load."""
    if usd_per_hour is None or output_tokens_per_second <= 0:
        return None
    return usd_per_hour / 3600.0 / output_tokens_per_second * 1_000_000
