"""The AWS Price List (Pricing) API for the emulator: GetProducts answered the way AWS answers it.

moto has no Pricing API (its server answers HTTP 500 with a traceback). Here `GetProducts` filters products
by TERM_MATCH on the product family and attributes and returns `PriceList` as a list of JSON STRINGS (as AWS
does), each with `product.attributes` and `terms.OnDemand.<sku>.priceDimensions.<rate>.pricePerUnit.USD`.
The catalogue holds SageMaker ML Instance products for Hosting AND Training, so a query that forgets
`platoinstancetype=Hosting` gets the wrong figure first, as it would from AWS.

The figures are the emulator's own round numbers (EMULATED_HOSTING_USD), for tests and users' CI; they are
not AWS's prices. `emulator.hosting_prices` changes them in every region, `emulator.set_price(type, usd,
region=...)` in one; `emulator.fail("GetProducts", "AccessDeniedException")` refuses a call as AWS does without
the permission.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from typing import Any

from .aws_errors import json_error

TARGET_PREFIX = "AWSPriceListService."
# one price per size of templates/instances.toml (tests/test_instances.py checks)
EMULATED_HOSTING_USD = {"ml.g7e.2xlarge": 5.0, "ml.g7e.4xlarge": 6.0, "ml.g7e.8xlarge": 8.0,
                        "ml.g7e.12xlarge": 12.0, "ml.g7e.24xlarge": 24.0, "ml.g7e.48xlarge": 48.0}
TRAINING_FACTOR = 0.9  # training products carry another price: a filter that misses Hosting shows it
REGIONS = ("us-east-1", "us-east-2", "us-west-2", "eu-west-1", "eu-central-1", "ap-northeast-1")


def _sku(*parts: str) -> str:
    return hashlib.sha256("|".join(parts).encode()).hexdigest()[:16].upper()


def product(region: str, instance_type: str, component: str, usd: float) -> str:
    """One PriceList entry, a JSON string as AWS returns it."""
    sku = _sku(region, instance_type, component)
    term, rate = f"{sku}.JRTCKXETXF", f"{sku}.JRTCKXETXF.6YS6EN2CT7"
    entry = {
        "product": {"productFamily": "ML Instance", "sku": sku, "attributes": {
            "servicecode": "AmazonSageMaker", "regionCode": region, "instanceName": instance_type,
            "platoinstancetype": component, "platoinstancename": instance_type.removeprefix("ml."),
            "usagetype": f"{component}:{instance_type}", "operation": f"RunInstance:{component}",
            "component": component.lower(), "computeType": "Instance"}},
        "serviceCode": "AmazonSageMaker",
        "terms": {"OnDemand": {term: {"offerTermCode": "JRTCKXETXF", "sku": sku,
                                      "effectiveDate": "2026-11-01T00:00:00Z", "termAttributes": {},
                                      "priceDimensions": {rate: {
                                          "unit": "Hrs", "beginRange": "0", "endRange": "Inf", "appliesTo": [],
                                          "rateCode": rate, "pricePerUnit": {"USD": f"{usd:.10f}"},
                                          "description": f"${usd:.4f} per {component} {instance_type} hour "
                                                         "(peagle emulator)"}}}}},
        "version": "20261101000000", "publicationDate": "2026-11-01T00:00:00Z",
    }
    return json.dumps(entry)


def catalogue(hosting_usd: dict[str, float], regions: Iterable[str] = REGIONS,
              regional: dict[tuple[str, str], float] | None = None) -> list[dict[str, Any]]:
    """Every product: `hosting_usd` in each region, where `regional` ((region, type) -> USD) does not say otherwise."""
    regional = regional or {}
    items = []
    for region in dict.fromkeys([*regions, *(where for where, _ in regional)]):
        prices = {**hosting_usd, **{kind: usd for (where, kind), usd in regional.items() if where == region}}
        for instance_type, usd in prices.items():
            for component, price in (("Hosting", usd), ("Training", round(usd * TRAINING_FACTOR, 4))):
                items.append({"region": region, "instance": instance_type, "component": component, "usd": price})
    return items


def _matches(item: dict[str, Any], filters: list[dict[str, str]]) -> bool:
    fields = {"productFamily": "ML Instance", "regionCode": item["region"], "instanceName": item["instance"],
              "platoinstancetype": item["component"], "servicecode": "AmazonSageMaker"}
    return all(fields.get(f.get("Field")) == f.get("Value") for f in filters if f.get("Type") == "TERM_MATCH")


def get_products(body: dict[str, Any], hosting_usd: dict[str, float], regions: Iterable[str] = (),
                 regional: dict[tuple[str, str], float] | None = None) -> tuple[int, dict[str, str], str]:
    """GetProducts: 100 per page at most (AWS's default), NextToken an offset. The catalogue's regions: REGIONS and
    `regions` (the emulator's)."""
    headers = {"Content-Type": "application/x-amz-json-1.1"}
    if body.get("ServiceCode") != "AmazonSageMaker":
        return 200, headers, json.dumps({"FormatVersion": "aws_v1", "PriceList": []})
    found = [i for i in catalogue(hosting_usd, dict.fromkeys([*REGIONS, *regions]), regional)
             if _matches(i, body.get("Filters") or [])]
    start = int(body.get("NextToken") or 0)
    size = int(body.get("MaxResults") or 100)
    page = found[start:start + size]
    answer: dict[str, Any] = {"FormatVersion": body.get("FormatVersion") or "aws_v1",
                              "PriceList": [product(i["region"], i["instance"], i["component"], i["usd"]) for i in page]}
    if start + size < len(found):
        answer["NextToken"] = str(start + size)
    return 200, headers, json.dumps(answer)


def answer(target: str, raw_body: bytes | str | None, emulator: Any) -> tuple[int, dict[str, str], str]:
    """One Pricing API call (`X-Amz-Target: AWSPriceListService.<Action>`), faults first."""
    action = target.removeprefix(TARGET_PREFIX)
    injected, _after = emulator._before_action(action)  # faults after acting mean nothing for a read
    if injected is not None:
        return injected
    body = json.loads(raw_body or b"{}")
    if action == "GetProducts":
        return get_products(body, emulator.hosting_prices, getattr(emulator, "regions", ()),
                            getattr(emulator, "regional_prices", None))
    return json_error(400, "InvalidParameterException", f"the emulator answers GetProducts only, not {action}")


def pricing_middleware(app: Any, emulator: Any) -> Any:
    """Server mode: Pricing API calls are answered here, everything else goes to moto."""

    def middleware(environ: dict[str, Any], start_response: Any) -> Iterable[bytes]:
        target = environ.get("HTTP_X_AMZ_TARGET", "")
        if not target.startswith(TARGET_PREFIX):
            return app(environ, start_response)
        length = int(environ.get("CONTENT_LENGTH") or 0)
        status, headers, body = answer(target, environ["wsgi.input"].read(length) if length else b"", emulator)
        reason = {200: "OK", 400: "Bad Request"}.get(status, "Error")
        start_response(f"{status} {reason}", list(headers.items()))
        return [body.encode()]

    return middleware


def stubber_patch(emulator: Any) -> Any:
    """In-process mode (mock_aws): moto's request stubber answers Pricing API calls too."""
    from unittest import mock

    from moto.core.botocore_stubber import BotocoreStubber

    original = BotocoreStubber.process_request

    def process_request(stubber: Any, request: Any) -> Any:
        target = request.headers.get("X-Amz-Target", b"")
        target = target.decode() if isinstance(target, bytes) else str(target)
        if target.startswith(TARGET_PREFIX):
            return answer(target, request.body, emulator)
        return original(stubber, request)

    return mock.patch.object(BotocoreStubber, "process_request", process_request)
