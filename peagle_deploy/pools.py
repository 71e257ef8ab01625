"""Instance pools and capacity reservations: the values a deploy is given and what SageMaker answers about them.

`--instance-type ml.g7e.2xlarge,ml.g7e.4xlarge` lists instance types in priority order: two or more become the
production variant's `InstancePools` (SageMaker provisions from the first pool with capacity, the next one after
it, within `VariantInstanceProvisionTimeoutInSeconds`); one stays today's plain `InstanceType`. How each pool is
planned (its spec, model, fit, price and quota) is `plan_pools.py`; the replan after a quota refusal is
`lifecycle/capacity.py`; docs/capacity.md says it all in words.

The limits are botocore's (SageMaker's model): 1-5 pools, Priority 1-5, a provision timeout of 300-3600 s, and
`ProductionVariantCapacityReservationConfig` (`MlReservationArn`'s pattern, `CapacityReservationPreference`'s
enum), read from botocore's service model when a flag needs them, so they follow botocore.
"""

from __future__ import annotations

import re
from functools import cache
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from .errors import UsageError
from .inputs import MAX_POOLS, POOL_SEPARATOR  # noqa: F401 - the list rule's, named here too
from .pricing import Price

PROVISION_TIMEOUT_RANGE = (300, 3600)  # VariantInstanceProvisionTimeoutInSeconds
TAG_SEPARATOR = "+"  # peagle:instance-type of a pooled endpoint: AWS tag values allow '+', not ','
# SageMaker's FailureReason when no instance could be provisioned (with or without pools); both texts begin so
CAPACITY_REASON_PREFIX = "Unable to provision requested ML compute capacity"
# ResourceLimitExceeded at CreateEndpoint/UpdateEndpoint: "The account-level service limit 'ml.g7e.2xlarge for
# endpoint usage' is 0 Instances, with current utilization of ..."
_QUOTA_REFUSAL = re.compile(r"service limit '(?P<type>ml\.[a-z0-9.-]+) for endpoint usage' is (?P<limit>[0-9.]+)")


def check_provision_timeout(seconds: int | None) -> int | None:
    low, high = PROVISION_TIMEOUT_RANGE
    if seconds is not None and not low <= seconds <= high:
        raise UsageError(f"--provision-timeout {seconds} is outside SageMaker's {low}-{high} seconds",
                         f"pass --provision-timeout between {low} and {high}")
    return seconds


@cache
def _reservation_shape() -> tuple[str, tuple[str, ...]]:
    """MlReservationArn's pattern and CapacityReservationPreference's values, from botocore's SageMaker model."""
    from .botocore_facts import service_model

    members = service_model("sagemaker").shape_for("ProductionVariantCapacityReservationConfig").members
    return members["MlReservationArn"].metadata["pattern"], tuple(members["CapacityReservationPreference"].enum)


def reservation_preferences() -> tuple[str, ...]:
    return _reservation_shape()[1]


class CapacityReservation(BaseModel):
    """A variant's CapacityReservationConfig: the user's ML capacity reservation and how SageMaker uses it."""

    model_config = ConfigDict(frozen=True)

    arn: str
    preference: str | None = Field(None, description="CapacityReservationPreference; None: SageMaker's default "
                                                     "(the reservation first, then on-demand capacity)")

    def config(self) -> dict[str, str]:
        body = {"MlReservationArn": self.arn}
        if self.preference:
            body = {"CapacityReservationPreference": self.preference, **body}
        return body

    def describe(self) -> str:
        how = self.preference or "the reservation first, then on-demand capacity"
        return f"{self.arn} ({how})"


def parse_capacity_reservation(arn: str | None, preference: str | None, region: str) -> CapacityReservation | None:
    """--capacity-reservation ARN [--capacity-reservation-preference VALUE], checked against botocore's shape and
    the deploy's region (a reservation holds instances in one region)."""
    if arn is None:
        if preference is not None:
            raise UsageError("--capacity-reservation-preference needs --capacity-reservation",
                             "pass --capacity-reservation arn:aws:sagemaker:<region>:<account>:ml-reservation/<name>")
        return None
    from .inputs import choose, exact

    pattern, choices = _reservation_shape()
    arn = exact(arn, "--capacity-reservation")
    if not (20 <= len(arn) <= 258) or not re.fullmatch(pattern, arn):
        raise UsageError(f"--capacity-reservation {arn!r} is not an ML capacity reservation ARN",
                         "pass arn:aws:sagemaker:<region>:<12-digit account>:ml-reservation/<name>")
    where = arn.split(":")[3]
    if where != region:
        raise UsageError(f"--capacity-reservation is in {where or 'no region'}, the deploy in {region}",
                         f"pass --region {where}, or a reservation in {region}" if where else
                         f"pass the reservation's ARN with its region ({region})")
    if preference is not None:
        choose(preference, "--capacity-reservation-preference", {c: c for c in choices}, what="one SageMaker knows")
    return CapacityReservation(arn=arn, preference=preference)


# the reservations SageMaker's API can read, by the resource type of their ARN (botocore 1.44's model): a training
# plan (DescribeTrainingPlan, whose TargetResources include endpoints) and a reserved capacity; no call reads another
# type (an `ml-reservation/` ARN): CreateEndpointConfig is the first to refuse it, and the deploy then rolls back
_READERS = {"training-plan": ("describe_training_plan", "TrainingPlanName", "training plan"),
            "reserved-capacity": ("describe_reserved_capacity", "ReservedCapacityArn", "reserved capacity")}


def read_reservation(session: Any, reservation: CapacityReservation) -> str | None:
    """Read the reservation before anything is created, where the API allows (`_READERS`): one that does not exist
    is refused (UsageError: exit 2, nothing made). Returns a note when it could not be read (the deploy goes on and
    CreateEndpointConfig decides), None when it was read or no call reads it."""
    from .aws import error_code, error_message, translate_error

    kind = reservation.arn.split(":", 5)[-1].split("/", 1)[0]
    if kind not in _READERS:
        return None
    method, key, what = _READERS[kind]
    try:
        getattr(session.client("sagemaker"), method)(**{key: reservation.arn})
    except Exception as exc:  # noqa: BLE001 - a refused read is said, a missing reservation is refused
        text = error_message(exc).lower()
        if error_code(exc) in ("ResourceNotFound", "ValidationException") and (
                "not found" in text or "does not exist" in text or "could not find" in text):
            raise UsageError(f"--capacity-reservation {reservation.arn}: SageMaker has no such {what} in "
                             f"{session.region} ({error_message(exc)})",
                             "pass the ARN of one of the account's (aws sagemaker list-training-plans lists them)"
                             ) from None
        error = translate_error(exc)
        if error is None:
            raise
        return f"could not read --capacity-reservation {reservation.arn} ({error.one_line()}); going on " \
               "(CreateEndpointConfig refuses one that does not exist)"
    return None


class Quota(BaseModel):
    """The Service Quotas value '<type> for endpoint usage' and the instances of that type in use."""

    limit: float | None = Field(description="None: not read (why in `detail`)")
    used: int | None = None
    detail: str = ""

    def room(self) -> float | None:
        return None if self.limit is None else self.limit - (self.used or 0)

    def describe(self) -> str:
        if self.limit is None:
            return f"unknown ({self.detail})" if self.detail else "unknown"
        return f"{self.limit:g}, {self.used or 0} in use"


class Pool(BaseModel):
    """One instance type of a priority list, as planned: kept (a pool of the variant) or left out, and why."""

    instance_type: str
    priority: int | None = Field(description="the pool's Priority (1 first); None: left out")
    kept: bool
    left_out: str | None = Field(None, description="why the type cannot serve this deploy")
    model_name: str | None = Field(None, description="the model the pool serves: the main model or its own "
                                                     "(ModelNameOverride)")
    own_model: bool = Field(False, description="its container differs from the main model's (ModelNameOverride)")
    differs: str | None = Field(None, description="what differs from the main model's container")
    gpus: int | None = None
    gpu_memory_gb: int | None = None
    tensor_parallel: str | None = None
    fit: str = Field("not checked", description="fits, or not checked (why in fit_detail)")
    fit_detail: str = ""
    price: Price | None = None
    quota: Quota | None = None

    def line(self) -> str:
        """One line: the type, its price, quota and fit (and why it is left out)."""
        price = "price unknown" if self.price is None or self.price.usd_per_hour is None else \
            f"${self.price.usd_per_hour:,.2f}/h"
        quota = "quota not read" if self.quota is None else f"quota {self.quota.describe()}"
        fit = self.fit if not self.fit_detail else f"{self.fit} ({self.fit_detail})"
        head = f"{self.priority}. {self.instance_type}" if self.kept else f"-  {self.instance_type}"
        text = f"{head}: {price}; {quota}; {fit}"
        if self.kept and self.model_name:
            text += f"; model {self.model_name}" + (f" ({self.differs})" if self.own_model and self.differs else "")
        return text + (f"; LEFT OUT: {self.left_out}" if not self.kept else "")


def tag_value(types: list[str]) -> str:
    """peagle:instance-type of a pooled endpoint: the types in priority order joined by '+'."""
    return TAG_SEPARATOR.join(types)


def tagged_types(value: str | None) -> list[str]:
    return [t for t in (value or "").split(TAG_SEPARATOR) if t]


# what SageMaker answers ---------------------------------------------------------------------------------
def quota_refusal(message: str) -> tuple[str, float] | None:
    """(instance type, quota) named by SageMaker's ResourceLimitExceeded text, or None for another refusal."""
    found = _QUOTA_REFUSAL.search(message or "")
    return (found["type"], float(found["limit"])) if found else None


def is_capacity_failure(reason: str | None) -> bool:
    return bool(reason) and reason.startswith(CAPACITY_REASON_PREFIX)


def serving_pools(variant: dict[str, Any] | None) -> list[tuple[str, int]]:
    """The pools of a DescribeEndpoint production variant that hold instances now, in the order SageMaker lists
    them: [(instance type, CurrentInstanceCount)]; [] for a variant without pools or with none provisioned."""
    return [(p["InstanceType"], int(p.get("CurrentInstanceCount") or 0))
            for p in (variant or {}).get("InstancePools") or [] if int(p.get("CurrentInstanceCount") or 0) > 0]


def configured_pools(variant: dict[str, Any] | None) -> list[str]:
    """A CreateEndpointConfig/DescribeEndpointConfig variant's pool types, by Priority; [] without pools."""
    pools = sorted((variant or {}).get("InstancePools") or [], key=lambda p: p.get("Priority", MAX_POOLS))
    return [p["InstanceType"] for p in pools]


def serving_words(serving: list[tuple[str, int]], configured: list[str]) -> str:
    """'serving from the ml.g7e.4xlarge pool (priority 2 of 2: ml.g7e.2xlarge, ml.g7e.4xlarge)'."""
    if not serving:
        return f"no pool holds instances yet (pools: {', '.join(configured)})"
    parts = []
    for instance_type, count in serving:
        rank = configured.index(instance_type) + 1 if instance_type in configured else None
        where = f"priority {rank} of {len(configured)}" if rank else "not in the config"
        parts.append(f"{count} x {instance_type} (pool {where})")
    return f"serving from {' and '.join(parts)}; pools: {', '.join(configured)}"
