"""What an instance costs on SageMaker hosting: the one price source of plan, deploy, status, update, bench, sweep.

In order:
1. the AWS Price List (Pricing) API: `GetProducts` of service AmazonSageMaker, filtered to the ML Instance
   product family, `platoinstancetype` Hosting (real-time inference), the region and the instance name,
   on-demand terms. Asked when credentials are available; the answer is cached for a day
   ($XDG_CACHE_HOME/peagle/prices.json) and the query is part of every --json price;
2. peagle's shipped table of SageMaker HOSTING prices (templates/hosting_prices.toml), each with its
   source and date. It lists no ml.g7e type: no published SageMaker hosting price with a source was found
   for them (the table says where peagle looked);
3. unknown, with the hint that gets a price.
An EC2 price is never the price: SageMaker hosting bills more than EC2 for the same hardware.
"""

from __future__ import annotations

import json
import os
import time
import tomllib
from datetime import UTC, datetime
from functools import cache
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

PRICING_REGION = "us-east-1"  # the Price List API is served from us-east-1 (also eu-central-1, ap-south-1)
SERVICE_CODE = "AmazonSageMaker"
CACHE_TTL_S = 24 * 3600
HOURS_PER_DAY = 24
API, TABLE, UNKNOWN = "aws-pricing-api", "shipped-table", "unknown"


class PriceQuery(BaseModel):
    """The GetProducts request peagle sends (shown in --json so a user can run it by hand)."""

    model_config = ConfigDict(populate_by_name=True)

    api_region: str = PRICING_REGION
    ServiceCode: str = SERVICE_CODE
    Filters: list[dict[str, str]]
    FormatVersion: str = "aws_v1"

    def aws_cli(self) -> str:
        filters = " ".join(f"Type={f['Type']},Field={f['Field']},Value={f['Value']!r}" for f in self.Filters)
        return f"aws pricing get-products --region {self.api_region} --service-code {self.ServiceCode} --filters {filters}"


class Price(BaseModel):
    """An hourly price with where it came from. Fields beyond the first five are newer than results schema 1
    files, so they have defaults (old files still read)."""

    model_config = ConfigDict(extra="forbid")

    instance_type: str
    instance_count: int = 1
    usd_per_hour: float | None = Field(description="all instances together; None: unknown")
    source: str = Field(description="aws-pricing-api, shipped-table or unknown")
    estimate: bool = Field(True, description="False only for a price the Pricing API gave")
    region: str | None = None
    usd_per_hour_each: float | None = None
    usd_per_day: float | None = Field(None, description="usd_per_hour x 24: what a day of this endpoint costs")
    detail: str | None = Field(None, description="the source in words: the API query, or the table's source and date")
    query: PriceQuery | None = None
    cached: bool = False
    read_at: datetime | None = None
    hint: str | None = Field(None, description="how to get a price, when it is unknown")
    fix: str | None = Field(None, description="what would let the Pricing API answer, for the reason it did not: "
                                              "network, credentials or permission")

    @property
    def known(self) -> bool:
        return self.usd_per_hour is not None

    def for_count(self, count: int) -> Price:
        """The same price for `count` instances."""
        each = self.usd_per_hour_each
        total = None if each is None else round(each * count, 4)
        return self.model_copy(update={"instance_count": count, "usd_per_hour": total,
                                       "usd_per_day": None if total is None else round(total * HOURS_PER_DAY, 2)})

    def short(self) -> str:
        """'$5.00/h ($120.00/day)' or 'unknown'."""
        if self.usd_per_hour is None:
            return "unknown"
        return f"${self.usd_per_hour:,.2f}/h (${self.usd_per_day or self.usd_per_hour * 24:,.2f}/day)"

    def describe(self) -> str:
        """One line: the figures and their source, or 'unknown' and the hint."""
        if self.usd_per_hour is None:
            return f"unknown: {self.hint}" if self.hint else "unknown"
        return f"{self.short()}, SageMaker hosting: {self.detail or self.source}"


class HostingTable(BaseModel):
    model_config = ConfigDict(extra="forbid")

    source: str
    as_of: str
    searched: str = ""
    regions: dict[str, dict[str, float]] = Field(default_factory=dict)


@cache
def hosting_table() -> HostingTable:
    from .resources import templates_dir

    path = templates_dir() / "hosting_prices.toml"
    return HostingTable.model_validate(tomllib.loads(path.read_text(encoding="utf-8")))


def price_query(instance_type: str, region: str) -> PriceQuery:
    pairs = {"productFamily": "ML Instance", "platoinstancetype": "Hosting", "regionCode": region,
             "instanceName": instance_type}
    return PriceQuery(Filters=[{"Type": "TERM_MATCH", "Field": k, "Value": v} for k, v in pairs.items()])


def price_from_api(pricing_client: Any, query: PriceQuery) -> float | None:
    """The on-demand hourly price of one instance in the GetProducts answer (PriceList: JSON strings)."""
    request = query.model_dump(exclude={"api_region"})
    for page in pricing_client.get_paginator("get_products").paginate(**request):
        for item in page.get("PriceList", []):
            product = json.loads(item) if isinstance(item, str) else item
            for term in product.get("terms", {}).get("OnDemand", {}).values():
                for dim in term.get("priceDimensions", {}).values():
                    usd = dim.get("pricePerUnit", {}).get("USD")
                    if usd and float(usd) > 0 and str(dim.get("unit", "Hrs")).lower().startswith("h"):
                        return float(usd)
    return None


# the cache: real AWS only (an emulator's or a proxy's answers are not cached), one day -----------------
_memo: dict[tuple[str, str, str], tuple[float | None, float]] = {}


def _cache_path() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "peagle" / "prices.json"


def _cache_key(instance_type: str, region: str) -> tuple[str, str, str]:
    return (os.environ.get("AWS_ENDPOINT_URL") or "aws", region, instance_type)


def _cached(key: tuple[str, str, str]) -> tuple[float | None, float] | None:
    if key[0] != "aws":  # AWS_ENDPOINT_URL: an emulator or a proxy, asked every time
        return None
    hit = _memo.get(key)
    if hit is None:
        try:
            stored = json.loads(_cache_path().read_text(encoding="utf-8")).get("|".join(key))
            hit = (stored["usd"], float(stored["read_at"])) if stored else None
        except (OSError, ValueError, KeyError, TypeError):
            hit = None
    return hit if hit is not None and time.time() - hit[1] < CACHE_TTL_S else None


def _store(key: tuple[str, str, str], usd: float | None) -> float:
    now = time.time()
    if key[0] != "aws":
        return now
    _memo[key] = (usd, now)
    if usd is not None:
        from .errors import PeagleError
        from .safe_write import make_dir, write_text

        path = _cache_path()
        try:
            data = json.loads(path.read_text(encoding="utf-8")) if path.exists() else {}
            data["|".join(key)] = {"usd": usd, "read_at": now}
            make_dir(path.parent, private=True)
            write_text(path, json.dumps(data), private=True)  # the one safe writer: whole, 0600, never via a link
        except (OSError, ValueError, PeagleError):
            pass  # a cache that cannot be written only costs another query next time
    return now


NO_CREDENTIALS = ("no AWS credentials to ask the Pricing API", "configure AWS credentials that allow pricing:GetProducts")
_DENIED = {"AccessDenied", "AccessDeniedException", "UnauthorizedOperation", "NotAuthorized"}


def _api_failure(exc: BaseException) -> tuple[str, str]:
    """(why the Pricing API gave no price, what would get one): the network, the credentials, the permission, or
    AWS itself (aws.translate_error's classification)."""
    from .aws import MissingCredentials, botocore_exceptions, error_code, translate_error
    from .errors import CredentialsError, QuotaError

    bx = botocore_exceptions()

    code = error_code(exc)
    translated = translate_error(exc)
    if code in _DENIED:
        return (f"the Pricing API refused this identity ({code})",
                "allow pricing:GetProducts to your AWS identity (docs/iam.md)")
    if isinstance(exc, (bx.ConnectionError, bx.HTTPClientError)):  # no answer: connect, read timeout, proxy, TLS
        where = (getattr(exc, "kwargs", None) or {}).get("endpoint_url") or "its endpoint"
        return (f"the Pricing API at {where} could not be reached ({type(exc).__name__})",
                f"check the network (or proxy) from this machine to {where} (AWS_ENDPOINT_URL_PRICING or "
                "AWS_ENDPOINT_URL, when set, chooses it)")
    if isinstance(translated, MissingCredentials):
        return NO_CREDENTIALS[0], NO_CREDENTIALS[1]
    if isinstance(translated, CredentialsError) and isinstance(exc, bx.ClientError):
        return (f"the Pricing API refused the AWS credentials ({code})",
                "renew the AWS credentials (expired or invalid: aws sso login, or new keys)")
    if isinstance(translated, QuotaError):
        return f"the Pricing API kept throttling ({code})", "retry in a minute"
    return (f"the Pricing API did not answer ({code or type(exc).__name__})",
            "retry later (AWS Health Dashboard shows service events)")


def instance_price(instance_type: str, region: str, *, count: int = 1, profile: str | None = None,
                   offline: bool = False, pricing_client: Any = None, session: Any = None) -> Price:
    """SageMaker hosting price of `count` x `instance_type` in `region`: Pricing API, shipped table, unknown.
    `session`: the caller's AwsSession, whose credentials ask the Pricing API (no second session is built)."""
    query = price_query(instance_type, region)
    why_not_api = fix = None
    if not offline:
        key = _cache_key(instance_type, region)
        hit = _cached(key) if pricing_client is None else None  # a client given is asked (tests, callers' own)
        usd, read_at, cached = (hit[0], hit[1], True) if hit else (None, None, False)
        if hit is None:
            try:
                client = pricing_client or _client(profile, session)
            except _NoCredentials:
                client = None
                why_not_api, fix = NO_CREDENTIALS
            if client is not None:
                try:
                    usd = price_from_api(client, query)
                    read_at = _store(key, usd) if pricing_client is None else time.time()
                except Exception as exc:  # noqa: BLE001 - no access, throttled, unreachable: say so, use the table
                    why_not_api, fix = _api_failure(exc)
        if why_not_api is None and usd is not None:
            when = datetime.fromtimestamp(read_at or time.time(), UTC)
            return _price(instance_type, count, region, usd, source=API, estimate=False, query=query, cached=cached,
                          read_at=when, detail=f"AWS Price List API ({SERVICE_CODE}, ML Instance, Hosting, {region}, "
                                               f"on-demand), read {when:%Y-%m-%d}" + (" (cached)" if cached else ""))
        if why_not_api is None:
            why_not_api = f"the Pricing API lists no SageMaker hosting price for {instance_type} in {region}"
            fix = "check the instance type and the region"
    else:
        why_not_api, fix = NO_CREDENTIALS
    table = hosting_table()
    listed = table.regions.get(region, {}).get(instance_type)
    if listed is not None:
        return _price(instance_type, count, region, listed, source=TABLE, estimate=True, query=query,
                      detail=f"peagle's table of SageMaker hosting prices ({table.source}, as of {table.as_of}); "
                             f"{why_not_api}")
    return Price(instance_type=instance_type, instance_count=count, usd_per_hour=None, source=UNKNOWN, region=region,
                 query=query, detail=why_not_api, fix=fix,
                 hint=f"{why_not_api}, and peagle ships no SageMaker hosting price for {instance_type} (none "
                      f"published with a source; docs/configuration.md#prices): {fix}")


def _price(instance_type: str, count: int, region: str, each: float, **fields: Any) -> Price:
    total = round(each * count, 4)
    return Price(instance_type=instance_type, instance_count=count, usd_per_hour=total, region=region,
                 usd_per_hour_each=each, usd_per_day=round(total * HOURS_PER_DAY, 2), **fields)


class _NoCredentials(Exception):
    pass


# one Pricing client per process and AWS setting: a new boto3 session per price (status prices every row) parsed
# botocore's data files again each time, most of `peagle status`'s own CPU
_clients: dict[tuple[str | None, ...], Any] = {}
_CLIENT_SETTINGS = ("AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_PRICING", "AWS_PROFILE", "AWS_ACCESS_KEY_ID",
                    "AWS_SHARED_CREDENTIALS_FILE", "AWS_CONFIG_FILE", "AWS_MAX_ATTEMPTS", "HOME")


# the Pricing API's endpoint region, short timeouts and two attempts: a price that is slow to come falls back to
# the shipped table rather than holding up the command
_PRICING_CLIENT = {"region_name": PRICING_REGION, "connect_timeout": 5, "read_timeout": 15,
                   "retries": {"mode": "adaptive", "total_max_attempts": 2}}


def _client(profile: str | None, session: Any = None) -> Any:
    """A Pricing client: from the caller's `session` (its credentials resolved once), else one per process and
    AWS setting."""
    key = None
    if session is None:
        key = (profile, *(os.environ.get(name) for name in _CLIENT_SETTINGS))
        if key in _clients:
            return _clients[key]
        from .aws import AwsSession

        session = AwsSession(PRICING_REGION, profile)
    if not session.has_credentials():
        raise _NoCredentials
    client = session.client("pricing", **_PRICING_CLIENT)
    if key is not None:
        _clients[key] = client
    return client


def usd_per_million_tokens(usd_per_hour: float | None, output_tokens_per_second: float) -> float | None:
    """What a million output tokens cost at this throughput if the instance serves only this load."""
    if usd_per_hour is None or output_tokens_per_second <= 0:
        return None
    return usd_per_hour / 3600.0 / output_tokens_per_second * 1_000_000
