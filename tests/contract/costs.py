"""What the contract tier will cost, said before anything starts, and the cap it must stay under.

The estimate is instance-hours times the SageMaker hosting price of the instance type: each run that a selected
behaviour reads declares its footprint (scenarios.Footprint: the most instances at once, the instance-minutes it
typically takes, and the longest it can run, the sum of its waits' timeouts), and the price comes from `peagle_deploy.pricing.instance_price`
(the AWS Price List API at run time; peagle's shipped table; else unknown, with the reason and the fix). What is not
counted: endpoint configs, models and inference components themselves (free), CloudWatch alarms, logs and metrics
and Application Auto Scaling (cents for the tier's hour or two: AWS bills alarms per alarm-month), the Pricing and
Service Quotas calls (free).

The cap applies to the most it can cost (every wait to its timeout): the tier refuses to start above it, or when the
price is unknown (an unknown cannot be shown to be under a cap).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from .scenarios import RUNS, Behaviour


@dataclass(frozen=True)
class Line:
    run: str
    instances: int
    expected_hours: float
    bound_hours: float
    why: str


@dataclass(frozen=True)
class Estimate:
    lines: list[Line]
    instance_type: str
    region: str
    price: Any  # peagle_deploy.pricing.Price of one instance
    behaviours: int  # selected, with a scenario
    listed: int  # selected, with no scenario (skipped on AWS with their reason)

    @property
    def expected_hours(self) -> float:
        return sum(line.expected_hours for line in self.lines)

    @property
    def bound_hours(self) -> float:
        return sum(line.bound_hours for line in self.lines)

    def _usd(self, hours: float) -> float | None:
        if hours == 0:
            return 0.0  # no instance at all: free whatever the price
        each = self.price.usd_per_hour_each
        return None if each is None else round(hours * each, 2)

    @property
    def expected_usd(self) -> float | None:
        return self._usd(self.expected_hours)

    @property
    def bound_usd(self) -> float | None:
        return self._usd(self.bound_hours)


def estimate(behaviours: Iterable[Behaviour], *, instance_type: str, region: str,
             price_of: Callable[[str, str], Any] | None = None) -> Estimate:
    """The runs the selected behaviours read on AWS (each once), priced."""
    from peagle_deploy.pricing import instance_price

    selected = list(behaviours)
    runs = sorted({b.run for b in selected if b.run is not None and b.aws_skip is None}, key=list(RUNS).index)
    lines = []
    for key in runs:
        footprint = RUNS[key].footprint
        lines.append(Line(key, footprint.instances, footprint.expected_instance_minutes / 60,
                          footprint.instances * footprint.bound_minutes / 60, footprint.why))
    price = (price_of or (lambda t, r: instance_price(t, r)))(instance_type, region)
    return Estimate(lines, instance_type, region, price, behaviours=sum(b.aws_skip is None for b in selected),
                    listed=sum(b.aws_skip is not None for b in selected))


def _usd(value: float | None) -> str:
    return "unknown" if value is None else f"${value:,.2f}"


def render(found: Estimate, *, prefix: str, max_cost: float | None) -> list[str]:
    """The lines printed before anything starts."""
    lines = [f"peagle contract tier: {found.behaviours} behaviours to show on a real account "
             f"({found.listed} more listed, skipped with their reason), {len(found.lines)} "
             f"run{'' if len(found.lines) == 1 else 's'} in {found.region}, "
             f"every name starting {prefix}, on {found.instance_type}",
             f"  {'run':<8} {'instances':>9} {'expected':>9} {'at most':>9}  what runs"]
    for line in found.lines:
        lines.append(f"  {line.run:<8} {line.instances:>9} {line.expected_hours:>8.2f}h {line.bound_hours:>8.2f}h  "
                     f"{line.why}")
    lines.append(f"  instance-hours: {found.expected_hours:.2f} expected, {found.bound_hours:.2f} at most "
                 "(every wait to its timeout)")
    lines.append(f"  price of one {found.instance_type}: {found.price.describe()}")
    lines.append(f"estimated cost: {_usd(found.expected_usd)} expected, at most {_usd(found.bound_usd)} "
                 "(instance-hours x the hourly price; configs, models, components are free, alarms, logs and metrics "
                 "cost cents and are not counted)")
    if max_cost is not None:
        lines.append(f"cap: --max-cost / PEAGLE_AWS_MAX_COST ${max_cost:,.2f}"
                     + ("" if refusal(found, max_cost) else ": the most it can cost is under it"))
    return lines


def refusal(found: Estimate, max_cost: float | None) -> str | None:
    """Why the tier must not start under this cap, or None."""
    if max_cost is None or not found.lines:
        return None
    bound = found.bound_usd
    if bound is None:
        return (f"the contract tier refuses to start: its cost is unknown ({found.price.describe()}), so it cannot be "
                f"shown to stay under ${max_cost:,.2f}")
    if bound > max_cost:
        return (f"the contract tier refuses to start: it may cost up to ${bound:,.2f}, above the cap of "
                f"${max_cost:,.2f}: raise --max-cost (or PEAGLE_AWS_MAX_COST), or select fewer behaviours with -k")
    return None
