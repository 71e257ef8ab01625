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


class LatencyHistogram:
    """Inter-chunk gaps in an HDR histogram (HdrHistogram's `hdrh`): fixed memory whatever the number of
    chunks. Values are kept in microseconds with 3 significant digits, so every reported percentile,
    min and max is within 0.1% (and 1 us) of the exact sample value. The mean is exact, from a running sum
    (hdrh's own mean walks every bucket in Python: 7% of the CPU of a short bench run)."""

    __slots__ = ("_hist", "_sum")

    def __init__(self) -> None:
        from hdrh.histogram import HdrHistogram

        self._hist = HdrHistogram(1, 3_600_000_000, 3)  # 1 us .. 1 h
        self._sum = 0.0

    def add_gaps(self, gaps: Sequence[float], zeros: int = 0) -> None:
        """Record `gaps` (seconds) and `zeros` gaps of 0 (chunks that arrived in the same read)."""
        record = self._hist.record_value
        for gap in gaps:
            record(int(gap * 1e6 + 0.5))
        self._sum += sum(gaps)
        if zeros > 0:
            record(0, zeros)

    def summary(self) -> Summary:
        h = self._hist
        n = h.get_total_count()
        if n == 0:
            return Summary()
        pct = {p: v / 1000 for p, v in h.get_percentile_to_value_dict(list(PERCENTILES)).items()}  # one pass
        return Summary(count=n, mean=self._sum / n * 1000, p50=pct[50], p90=pct[90], p95=pct[95],
                       p99=pct[99], min=h.get_min_value() / 1000, max=h.get_max_value() / 1000)


EXACT_SAMPLES = 65_536  # per latency metric and level: 512 KiB, then an HDR histogram


class LatencySamples:
    """One latency metric of a level in bounded memory, summarised as `summarize` does.

    The first `exact_limit` samples are kept (8 bytes each) and summarised exactly, with the percentile
    convention of `vllm bench serve`. Past that they move into an HDR histogram (nanoseconds, 3 significant
    digits: every percentile within 0.1% of a sample value near it) and memory stops growing; count, mean,
    min and max stay exact (running sums), so a soak of millions of requests keeps a fixed footprint."""

    __slots__ = ("_exact", "_limit", "_hist", "_count", "_sum", "_min", "_max")

    def __init__(self, exact_limit: int | None = None) -> None:
        from array import array

        self._exact: array | None = array("d")
        self._limit = EXACT_SAMPLES if exact_limit is None else exact_limit
        self._hist = None
        self._count = 0
        self._sum = 0.0
        self._min = float("inf")
        self._max = float("-inf")

    def __len__(self) -> int:
        return self._count

    def add(self, value: float) -> None:
        self._count += 1
        self._sum += value
        if value < self._min:
            self._min = value
        if value > self._max:
            self._max = value
        if self._exact is not None:
            self._exact.append(value)
            if len(self._exact) > self._limit:
                self._spill()
        else:
            self._hist.record_value(max(1, int(value * 1e9 + 0.5)))

    def _spill(self) -> None:
        from hdrh.histogram import HdrHistogram

        self._hist = HdrHistogram(1, 3_600_000_000_000, 3)  # 1 ns .. 1 h
        record = self._hist.record_value
        for value in self._exact:
            record(max(1, int(value * 1e9 + 0.5)))
        self._exact = None

    def percentiles(self, percents: Sequence[int], scale: float = 1.0) -> dict[int, float]:
        """Any whole-number percentiles (p10 as well as p90), with `summary`'s conventions: exact (numpy's linear
        rule) up to the bound, from the HDR histogram past it. {} without samples."""
        if not self._count:
            return {}
        if self._exact is not None:
            if len(self._exact) == 1:
                return {p: self._exact[0] * scale for p in percents}
            cuts = statistics.quantiles(self._exact, n=100, method="inclusive")
            return {p: (cuts[p - 1] if 0 < p < 100 else (self._min if p <= 0 else self._max)) * scale
                    for p in percents}
        lo, hi = self._min * scale, self._max * scale
        return {p: min(hi, max(lo, v / 1e9 * scale))
                for p, v in self._hist.get_percentile_to_value_dict(list(percents)).items()}

    def summary(self, scale: float = 1.0) -> Summary:
        if self._exact is not None:
            return summarize(self._exact, scale)
        h = self._hist
        lo, hi = self._min * scale, self._max * scale  # a bucket's value may lie just past the extremes
        pct = {p: min(hi, max(lo, v / 1e9 * scale)) for p, v in h.get_percentile_to_value_dict(list(PERCENTILES)).items()}
        return Summary(count=self._count, mean=self._sum / self._count * scale, p50=pct[50], p90=pct[90],
                       p95=pct[95], p99=pct[99], min=self._min * scale, max=self._max * scale)
