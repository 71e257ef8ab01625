"""A level's figures in constant memory: each finished request is folded in the moment it ends.

Nothing per request outlives it: counts and sums, the time-weighted in-flight integral, error counts by
kind with each kind's first text, and the latency metrics (bench.stats.LatencySamples: exact up to a
bound, then an HDR histogram). The figures are the ones the level always had (docs/bench.md):
- output tokens count the chunks that arrived inside the window (`at_open`..`at_close`) of requests that
  did not fail, each chunk worth usage.completion_tokens / chunks of its request, or, without usage, the
  level's tokens per chunk (known only at the end, so those chunks are summed and priced then);
- latencies come from measured requests that completed by the end of the window (`t_close`); with a
  duration, the end is known in advance, except when every prompt finished before it: then the window
  ends at the last request, so the few requests that end after the planned end wait in `_late` (only
  those finishing while the level closes) until it is known.
- mean in flight is the time-weighted mean of requests in flight over the window: the sum over requests
  of the part of their life inside it (cut at the planned close, or at their end), divided by its length.
"""

from __future__ import annotations

from .records import LevelMeasurement, RequestRecord
from .stats import LatencyHistogram, LatencySamples

ERROR_KINDS_KEPT = 64  # distinct error kinds counted one by one; the rest are counted as "other"


class LevelAggregate:
    __slots__ = ("concurrency", "warmup", "t_open", "planned_close", "started", "last_end", "ttft", "ttfc",
                 "tpot", "e2e", "itl", "completed", "in_window", "cut", "error_kinds", "error_examples",
                 "usage_tokens", "usage_chunks", "tokens", "chunks_without_usage", "in_flight_area", "_late")

    def __init__(self, concurrency: int, warmup: int, planned_close: float | None = None):
        self.concurrency = concurrency
        self.warmup = warmup
        self.t_open: float | None = None  # set when the measured window opens
        self.planned_close = planned_close  # seconds after t_open, with a duration
        self.started = 0
        self.last_end: float | None = None
        self.ttft = LatencySamples()
        self.ttfc = LatencySamples()
        self.tpot = LatencySamples()
        self.e2e = LatencySamples()
        self.itl = LatencyHistogram()
        self.completed = self.in_window = self.cut = 0
        self.error_kinds: dict[str, int] = {}
        self.error_examples: dict[str, str] = {}
        self.usage_tokens = self.usage_chunks = 0
        self.tokens = 0.0  # in-window tokens of requests that reported usage
        self.chunks_without_usage = 0  # in-window chunks of requests that did not
        self.in_flight_area = 0.0
        self._late: list[tuple[float, float, float | None, float, int]] = []

    def open(self, at: float) -> None:
        self.t_open = at

    def fold(self, r: RequestRecord) -> None:
        """Take in one finished request (its gaps must already be in `itl`, or freed)."""
        if r.end > (self.last_end or r.end - 1):
            self.last_end = r.end
        if self.t_open is not None:
            close = self.t_open + self.planned_close if self.planned_close is not None else r.end
            self.in_flight_area += max(0.0, min(r.end, close) - max(r.start, self.t_open))
        if r.error is not None:  # a failed request's tokens are not output throughput
            if not r.warmup:
                kind = r.error if r.error in self.error_kinds or len(self.error_kinds) < ERROR_KINDS_KEPT \
                    else "other"
                self.error_kinds[kind] = self.error_kinds.get(kind, 0) + 1
                self.error_examples.setdefault(kind, r.error_text or r.error)
            return
        chunks = r.chunks
        if r.usage_tokens is not None and chunks:
            self.usage_tokens += r.usage_tokens
            self.usage_chunks += chunks
        inside = max(0, (r.at_close if r.at_close >= 0 else chunks) - max(r.at_open, 0))
        if inside:
            if r.usage_tokens is not None and chunks:
                self.tokens += inside * r.usage_tokens / chunks
            else:
                self.chunks_without_usage += inside
        if r.warmup:
            return
        if r.cut:
            self.cut += 1
            return
        if not chunks or r.first is None:
            return
        latencies = (r.start, r.end, r.first_content, r.first, r.usage_tokens if r.usage_tokens is not None else chunks)
        if self.planned_close is not None and self.t_open is not None and r.end > self.t_open + self.planned_close:
            self._late.append(latencies)  # inside the window only if the window ends at the last request
            return
        self._latencies(*latencies)

    def _latencies(self, start: float, end: float, first_content: float | None, first: float, n_tokens: int) -> None:
        self.completed += 1
        self.in_window += self.t_open is not None and end >= self.t_open
        self.ttft.add(first - start)
        if first_content is not None:
            self.ttfc.add(first_content - start)
        self.e2e.add(end - start)
        if n_tokens > 1:
            self.tpot.add((end - first) / (n_tokens - 1))

    def measurement(self, t_close: float, wall_open: float, wall_close: float) -> LevelMeasurement:
        """The level's figures for a window that closed at `t_close` (requests still running were cut)."""
        t_open = self.t_open if self.t_open is not None else t_close
        for late in self._late:
            if late[1] <= t_close:
                self._latencies(*late)
        self._late = []
        window = max(t_close - t_open, 1e-9)
        tokens_per_chunk = self.usage_tokens / self.usage_chunks if self.usage_chunks else None
        tokens = self.tokens + self.chunks_without_usage * (tokens_per_chunk or 1.0)
        mean_in_flight = self.in_flight_area / (t_close - t_open) if t_close > t_open else 0.0
        return LevelMeasurement(
            concurrency=self.concurrency,
            window_s=window,
            completed=self.completed,
            cut_at_end=self.cut,
            warmup_requests=min(self.warmup, self.started),
            errors=sum(self.error_kinds.values()),
            error_kinds=dict(self.error_kinds),
            error_examples=dict(self.error_examples),
            output_tokens=round(tokens),
            output_tokens_per_s=tokens / window,
            requests_per_s=self.in_window / window,
            mean_in_flight=mean_in_flight,
            concurrency_held=mean_in_flight / self.concurrency,
            tokens_per_chunk=tokens_per_chunk,
            ttft_ms=self.ttft.summary(1000),
            ttfc_ms=self.ttfc.summary(1000),
            itl_ms=self.itl.summary(),
            tpot_ms=self.tpot.summary(1000),
            e2e_ms=self.e2e.summary(1000),
            wall_start=wall_open,
            wall_end=wall_close,
        )

