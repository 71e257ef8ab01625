"""The one validation of every number a user types: finite, within one bound per flag, the same in every command.

`BOUNDS` names each numeric option once (`--timeout` is 1 s to 24 h in deploy, update, invoke, bench, sweep and
local alike). `cli.common.run` checks every numeric option of the command being run against it before the
command's body starts, so a new numeric option without a bound is caught by tests/test_numbers.py, and `inf`,
`nan` or `1e9` never reach a plan, a request or AWS. Numbers inside other text (`--k 3,7`, `--concurrency 1,4`,
`--autoscale 1:4`) are checked with `check` by their parsers, against the same table.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from .errors import UsageError


@dataclass(frozen=True)
class Bound:
    low: float
    high: float
    example: str  # a value inside the bound, offered in the hint (tests follow it)
    low_open: bool = False  # True: the value must be above `low`, not equal to it
    unit: str = ""
    why: str = ""  # said after the hint: why the bound is where it is

    def describe(self) -> str:
        low = f"more than {_g(self.low)}" if self.low_open else f"at least {_g(self.low)}"
        return f"{low} and at most {_g(self.high)}{(' ' + self.unit) if self.unit else ''}"

    def holds(self, value: float) -> bool:
        if not math.isfinite(value):
            return False
        above = value > self.low if self.low_open else value >= self.low
        return above and value <= self.high


def _g(value: float) -> str:
    return f"{value:,.0f}".replace(",", "") if float(value).is_integer() else f"{value:g}"


MAX_K = 32  # a drafter deeper than this exists nowhere; the model's own drafter depth narrows it further
MAX_CONCURRENCY = 4096
MAX_INSTANCES = 100  # inputs.MAX_INSTANCE_COUNT and autoscale.MAX_CAPACITY

BOUNDS: dict[str, Bound] = {
    # waiting and measuring
    "--timeout": Bound(1, 86400, "3600", unit="seconds"),
    "--interval": Bound(0, 86400, "10", low_open=True, unit="seconds"),
    "--duration": Bound(0.1, 86400, "60", unit="seconds"),
    "--logs-wait": Bound(0, 3600, "60", unit="seconds"),
    "--provision-estimate": Bound(0, 86400, "600", unit="seconds"),
    "--num-prompts": Bound(1, 1_000_000, "100"),
    "--warmup": Bound(0, 100_000, "4"),
    "--lines": Bound(1, 100_000, "50"),
    # requests
    "--max-tokens": Bound(1, 1_000_000, "256"),
    "--temperature": Bound(0, 2, "0"),
    "--top-p": Bound(0, 1, "0.95", low_open=True),
    "--port": Bound(1, 65535, "8080"),
    # speculation
    "--k": Bound(1, MAX_K, "3"),
    "--max-k": Bound(1, MAX_K, "8"),
    "--verify-cost": Bound(0, 10, "0.02", unit="target decoding steps"),
    "--draft-cost": Bound(0, 10, "0.06", unit="target decoding steps"),
    "--concurrency": Bound(1, MAX_CONCURRENCY, "8"),
    # output agreement (bench agree, sweep)
    "--samples": Bound(2, 10_000, "16", why="answers per prompt and target; the test needs at least two"),
    "--alpha": Bound(0.001, 0.5, "0.01"),
    "--noise-per-token": Bound(0, 1, "0.01"),
    "--agreement-prompts": Bound(0, 10_000, "16"),
    # fleets and money
    "--instance-count": Bound(1, MAX_INSTANCES, "1", why="peagle's limit; more needs a SageMaker quota increase and "
                                                        "several endpoints"),
    "--parallel": Bound(1, 32, "2"),
    "--target-concurrency": Bound(0, MAX_CONCURRENCY, "8", low_open=True, unit="concurrent requests per instance"),
    "--target-invocations": Bound(0, 1_000_000, "600", low_open=True, unit="invocations per instance per minute"),
    "--budget": Bound(0, 1_000_000, "40", low_open=True, unit="USD"),
    "--max-price-per-hour": Bound(0, 100_000, "50", low_open=True, unit="USD"),
    "--provision-timeout": Bound(300, 3600, "900", unit="seconds",
                                 why="SageMaker's VariantInstanceProvisionTimeoutInSeconds"),
}


def check(flag: str, value: float | int, *, bound: Bound | None = None) -> float | int:
    """`value` if it is finite and within the flag's bound, else one UsageError naming the bound and a value in it."""
    rule = bound or BOUNDS[flag]
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise UsageError(f"{flag} must be a number, got {value!r}", f"pass e.g. {flag} {rule.example}")
    if not rule.holds(float(value)):
        raise UsageError(f"{flag} must be {rule.describe()}, got {_shown(value)}",
                         f"pass e.g. {flag} {rule.example}" + (f" ({rule.why})" if rule.why else ""))
    return value


def _shown(value: float | int) -> str:
    if isinstance(value, int):
        return str(value)
    return f"{value:g}"


def check_params(params: dict[str, object], options: dict[str, str]) -> None:
    """Check every numeric value in `params` (a command's parsed options by name); `options` maps a parameter
    name to its flag (`max_price_per_hour` -> `--max-price-per-hour`). Lists (repeatable options) item by item."""
    for name, value in params.items():
        flag = options.get(name)
        if flag is None:
            continue
        for item in value if isinstance(value, (list, tuple)) else [value]:
            if not isinstance(item, (int, float)) or isinstance(item, bool):
                continue
            if flag in BOUNDS:
                check(flag, item)
            elif not math.isfinite(item):  # an option without a bound yet (tests/test_numbers.py forbids that)
                raise UsageError(f"{flag} must be a finite number, got {item:g}", f"see the {flag} help")
