"""Summary statistics over latency samples, with the percentile convention of `vllm bench serve`.

`vllm bench serve` uses numpy's default percentile (linear interpolation between closest ranks),
which is what `statistics.quantiles(..., method="inclusive")` computes; numpy is not a dependency.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence

from pydantic import BaseModel, ConfigDict

PERCENTILES = (50, 90, 95, 99)


class Summary(BaseModel):
    """Mean and percentiles of one metric, in milliseconds for latencies. `count` 0 means no samples."""

    model_config = ConfigDict(extra="forbid")

    count: int = 0
    mean: float | None = None
    p50: float | None = None
    p90: float | None = None
    p95: float | None = None
    p99: float | None = None
    min: float | None = None
    max: float | None = None


def summarize(samples: Sequence[float], scale: float = 1.0) -> Summary:
    """Mean, p50/p90/p95/p99, min and max of `samples` (multiplied by `scale`, e.g. 1000 for s -> ms)."""
    n = len(samples)
    if n == 0:
        return Summary()
    if n == 1:
        value = samples[0] * scale
        return Summary(count=1, mean=value, p50=value, p90=value, p95=value, p99=value, min=value, max=value)
    cuts = statistics.quantiles(samples, n=100, method="inclusive")
    pct = {p: cuts[p - 1] * scale for p in PERCENTILES}
    return Summary(
        count=n,
        mean=statistics.fmean(samples) * scale,
        p50=pct[50],
        p90=pct[90],
        p95=pct[95],
        p99=pct[99],
        min=min(samples) * scale,
        max=max(samples) * scale,
    )


def time_weighted_mean(changes: Sequence[tuple[float, int]], start: float, end: float) -> float:
    """Mean of a step function over [start, end]. `changes` are (time, new value) in time order.

    Used for "mean requests in flight": the level before the first change inside the window is the
    value of the last change at or before `start` (0 if none).
    """
    if end <= start:
        return 0.0
    area = 0.0
    level = 0
    last_t = start
    for t, value in changes:
        if t <= start:
            level = value
            continue
        if t >= end:
            break
        area += level * (t - last_t)
        level, last_t = value, t
    area += level * (end - last_t)
    return area / (end - start)
