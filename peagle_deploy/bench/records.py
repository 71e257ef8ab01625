"""The load generator's records: one request as it runs (`RequestRecord`) and one level's figures
(`LevelMeasurement`).

The senders fill a RequestRecord, the load generator (bench.loadgen) hands it to the aggregate
(bench.aggregate), which folds it in and makes the LevelMeasurement: all three import the types from here,
so none of them imports another to name them.
"""

from __future__ import annotations

from array import array
from dataclasses import dataclass
from typing import Any

Messages = list[dict[str, str]]


class RequestRecord:
    __slots__ = ("index", "warmup", "start", "end", "chunks", "first", "first_content", "last", "gaps",
                 "usage_tokens", "spec_decoding", "error", "error_text", "cut", "at_open", "at_close")

    def __init__(self, index: int, warmup: bool, start: float = 0.0, end: float = 0.0):
        self.index, self.warmup, self.start, self.end = index, warmup, start, end
        self.chunks = 0
        self.first: float | None = None
        self.first_content: float | None = None
        self.last = 0.0
        self.gaps: array | None = array("f")  # one gap per read; chunks of the same read are 0 apart
        self.usage_tokens: int | None = None
        self.spec_decoding: dict[str, Any] | None = None  # vLLM's per-request acceptance, as the usage chunk sent it
        self.error: str | None = None
        self.error_text: str | None = None
        self.cut = False
        self.at_open = -1  # chunks received when the window opened (-1: started after it opened)
        self.at_close = -1  # chunks received when the window closed (-1: not yet)

    def add(self, n: int, now: float, content: bool = True) -> None:
        """`n` chunks with output tokens arrived at `now` (one network read)."""
        if self.chunks:
            self.gaps.append(now - self.last)  # type: ignore[union-attr]
        else:
            self.first = now
        if content and self.first_content is None:
            self.first_content = now
        self.chunks += n
        self.last = now


@dataclass
class LevelMeasurement:
    concurrency: int
    window_s: float
    completed: int
    cut_at_end: int
    warmup_requests: int
    errors: int
    error_kinds: dict[str, int]
    error_examples: dict[str, str]
    output_tokens: int
    output_tokens_per_s: float
    requests_per_s: float
    mean_in_flight: float
    concurrency_held: float
    tokens_per_chunk: float | None
    ttft_ms: Any
    ttfc_ms: Any
    itl_ms: Any
    tpot_ms: Any
    e2e_ms: Any
    wall_start: float  # time.time() of the window edges, for log queries
    wall_end: float
    client_cpu: float | None = None  # CPU time of this process over the window / window
    loop_lag_ms: Any = None
    window_open: float = 0.0  # perf_counter() of the window edges
    window_close: float = 0.0
