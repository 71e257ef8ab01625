"""The account a contract scenario runs against: the emulator (the fast suite) or a real one (`pytest -m aws`).

Both are the same `Account`: a peagle `AwsSession` (the emulator's server through AWS_ENDPOINT_URL, or the real
credential chain), the region, the SageMaker execution role, the container image, the instance type, the tier's
name prefix and a clock. Only the clock and `container_output` differ: against the emulator time is a
`ManualClock` (a wait of 15 minutes advances it, nothing sleeps) and the container's start-up lines are written
by the harness (the emulator runs no component container); against AWS a wait sleeps for real, bounded by its
timeout, and the container prints its own lines.

A run (one stack, several observations: `scenarios.py`) happens once per account (`Account.once`): the emulator
account lives for the test module, the real one for the session, so every behaviour that reads the same run shares
its stack and its cost.
"""

from __future__ import annotations

import os
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, Protocol, TypeVar

T = TypeVar("T")

# The tier's resources carry peagle:expires-at this far ahead: longer than the tier's longest run, so a scheduled
# `peagle cleanup --expired` removes whatever a killed session (SIGKILL: no finalizer) left
TIER_TTL = timedelta(hours=8)
PREFIX_BASE = "peagle-ct-"


class Clock(Protocol):
    def now(self) -> float: ...

    def sleep(self, seconds: float) -> None: ...


class RealClock:
    """AWS: the wall clock; waits sleep."""

    def now(self) -> float:
        return time.time()

    def sleep(self, seconds: float) -> None:
        time.sleep(seconds)


class EmulatedClock:
    """The emulator's ManualClock (`current()`: the one the emulator runs on now): a sleep advances it, and the
    emulated world plays every event due, in order."""

    def __init__(self, current: Callable[[], Any]):
        self.current = current

    def now(self) -> float:
        return self.current()()

    def sleep(self, seconds: float) -> None:
        self.current().advance(seconds)


class NotWithin(AssertionError):
    """A wait that ran out: what was awaited, for how long, and the last thing seen."""

    def __init__(self, what: str, timeout_s: float, last: Any):
        super().__init__(f"{what}: not within {timeout_s / 60:.0f} min (last seen: {last})")
        self.what, self.timeout_s, self.last = what, timeout_s, last


@dataclass
class CostMeter:
    """Instance-hours the tier's endpoints held, from what it saw: each endpoint from its CreateEndpoint to its
    removal, at the most instances seen on it (1 until a describe says more). An upper-side figure (an endpoint at
    zero instances for a while is still counted at its most): `summary` prices it."""

    started: dict[str, tuple[str, float]] = field(default_factory=dict)  # endpoint -> (instance type, at)
    most: dict[str, int] = field(default_factory=dict)
    ended: dict[str, float] = field(default_factory=dict)

    def start(self, endpoint: str, instance_type: str, at: float) -> None:
        self.started.setdefault(endpoint, (instance_type, at))
        self.most.setdefault(endpoint, 1)

    def saw(self, endpoint: str, instances: int) -> None:
        if endpoint in self.started:
            self.most[endpoint] = max(self.most.get(endpoint, 1), instances)

    def end(self, endpoint: str, at: float) -> None:
        if endpoint in self.started:
            self.ended.setdefault(endpoint, at)

    def instance_hours(self, until: float) -> dict[str, float]:
        """instance type -> instance-hours, an endpoint not removed yet counted to `until`."""
        hours: dict[str, float] = {}
        for endpoint, (instance_type, at) in self.started.items():
            span = max(0.0, self.ended.get(endpoint, until) - at) / 3600
            hours[instance_type] = hours.get(instance_type, 0.0) + span * self.most.get(endpoint, 1)
        return hours


@dataclass
class Account:
    kind: str  # "emulator" or "aws"
    session: Any  # peagle_deploy.aws.AwsSession
    role_arn: str
    image: str
    instance_type: str
    prefix: str
    clock: Clock
    zero_quota_types: tuple[str, ...]  # where a scenario looks for an instance type with quota 0, in order
    # (endpoint, component, model label): the container's start-up lines, where the account does not run it itself
    container_output: Callable[[str, str, str], None] = lambda endpoint, component, model_label: None
    start_run: Callable[[], None] = lambda: None  # before each run (the emulator: a fresh clock at the real time)
    meter: CostMeter = field(default_factory=CostMeter)
    emu: Any = None  # the emulator, for an emulated account
    _runs: dict[str, tuple[bool, Any]] = field(default_factory=dict)

    @property
    def region(self) -> str:
        return self.session.region

    @property
    def emulated(self) -> bool:
        return self.kind == "emulator"

    def client(self, service: str) -> Any:
        return self.session.client(service)

    def name(self, *parts: str) -> str:
        """A resource name of this tier: the prefix, then the parts ('peagle-ct-3f9a1c-probes-big')."""
        return self.prefix + "-".join(parts)

    def now(self) -> float:
        return self.clock.now()

    def sleep(self, seconds: float) -> None:
        self.clock.sleep(seconds)

    def wait(self, what: str, probe: Callable[[], T], *, timeout_s: float, every_s: float) -> T:
        """`probe()` until it returns something true (returned), every `every_s`, at most `timeout_s`: then
        NotWithin with the last value. Real minutes against AWS, emulated ones against the emulator."""
        start = self.now()
        while True:
            value = probe()
            if value:
                return value
            if self.now() - start >= timeout_s:
                raise NotWithin(what, timeout_s, value)
            self.sleep(every_s)

    def once(self, key: str, run: Callable[[Account], T]) -> T:
        """`run(self)` the first time `key` is asked for, its result (or its failure, raised again) after: every
        behaviour of one run reads the same stack."""
        if key not in self._runs:
            self.start_run()
            try:
                self._runs[key] = (True, run(self))
            except BaseException as exc:  # noqa: BLE001 - a skip or a failure, given to every behaviour that asks
                self._runs[key] = (False, exc)
        ok, value = self._runs[key]
        if not ok:
            raise value
        return value

    def tags(self, stack: str, **fields: Any) -> list[dict[str, str]]:
        """peagle's tags on a resource of `stack`: managed (so that peagle's cleanup removes it, and only it), the
        stack as its endpoint (configs and models are found by it), created now, expiring after TIER_TTL."""
        from peagle_deploy.tags import PeagleTags

        created = datetime.fromtimestamp(self.now(), UTC).replace(microsecond=0)
        tags = PeagleTags(managed=True, created_at=created, expires_at=created + TIER_TTL, endpoint=stack,
                          version="contract-tier", **fields)
        return [{"Key": k, "Value": v} for k, v in tags.to_aws().items()]


def new_prefix() -> str:
    """This session's name prefix ('peagle-ct-3f9a1c-'): the cleanup removes only names that start with it."""
    return f"{PREFIX_BASE}{secrets.token_hex(3)}-"


@dataclass(frozen=True)
class AwsSettings:
    """What `pytest -m aws` needs, from the environment (docs/ci.md lists each)."""

    enabled: bool
    dry_run: bool
    region: str
    role_arn: str | None
    image: str | None
    instance_type: str
    zero_quota_type: str | None
    prefix: str
    max_cost: float | None

    @classmethod
    def from_env(cls, environ: dict[str, str] | None = None, max_cost: float | None = None) -> AwsSettings:
        env = os.environ if environ is None else environ
        cost = max_cost
        if cost is None and env.get("PEAGLE_AWS_MAX_COST"):
            cost = float(env["PEAGLE_AWS_MAX_COST"])
        prefix = env.get("PEAGLE_AWS_PREFIX") or new_prefix()
        if not prefix.startswith(PREFIX_BASE):
            raise ValueError(f"PEAGLE_AWS_PREFIX must start with {PREFIX_BASE!r}: the tier's cleanup removes only "
                             "its own names")
        return cls(enabled=env.get("PEAGLE_AWS_TESTS") == "1", dry_run=env.get("PEAGLE_AWS_DRY_RUN") == "1",
                   region=env.get("PEAGLE_AWS_REGION") or env.get("AWS_REGION") or env.get("AWS_DEFAULT_REGION")
                   or "us-east-1",
                   role_arn=env.get("PEAGLE_AWS_ROLE_ARN") or None, image=env.get("PEAGLE_AWS_IMAGE") or None,
                   instance_type=env.get("PEAGLE_AWS_INSTANCE_TYPE") or DEFAULT_INSTANCE_TYPE,
                   zero_quota_type=env.get("PEAGLE_AWS_ZERO_QUOTA_TYPE") or None, prefix=prefix,
                   max_cost=DEFAULT_MAX_COST if cost is None else cost)

    def missing(self) -> list[str]:
        """The settings a real run cannot do without (the credentials are checked apart: botocore's chain)."""
        return [name for name, value in (("PEAGLE_AWS_ROLE_ARN", self.role_arn), ("PEAGLE_AWS_IMAGE", self.image))
                if not value]


# ml.m5.large: a small general-purpose CPU instance (2 vCPUs, 8 GiB): the behaviours are SageMaker's, not a model's,
# so no GPU; 8 GiB holds the probes' small copies side by side and one copy of 55% alone (two cannot share it, which
# the update scenarios rely on) (docs/ci.md, "What it costs")
DEFAULT_INSTANCE_TYPE = "ml.m5.large"
DEFAULT_MAX_COST = 5.0  # USD: the tier refuses to start above it unless --max-cost / PEAGLE_AWS_MAX_COST says more
# instance types whose endpoint quota is 0 in a new account (SageMaker's defaults for large GPU types); the pool
# scenarios need one, found through Service Quotas (or PEAGLE_AWS_ZERO_QUOTA_TYPE)
ZERO_QUOTA_CANDIDATES = ("ml.p5.48xlarge", "ml.p5e.48xlarge", "ml.p4de.24xlarge", "ml.p4d.24xlarge",
                         "ml.g7e.48xlarge", "ml.trn1.32xlarge")
