"""Closed-loop load generator: exactly N requests in flight, each a streaming chat request.

How a level is measured (docs/bench.md explains it for users):
- N workers each send a request, wait for its stream to end, and send the next one, cycling through
  the prompts. The first `warmup` requests are warm-up: they load the server but are not measured.
- The measured window opens when the last warm-up request has finished (at the start when there is
  no warm-up). With `duration`, it closes `duration` seconds later and requests still running are
  cancelled ("cut at end"); with `num_prompts`, it closes when the last measured request finishes
  (the tail, where fewer than N requests are in flight, is included, as `vllm bench serve` does).
- Output tokens per second counts the chunks that ARRIVED inside the window, so requests that straddle
  its edges count only their part inside it. A chunk counts as usage.completion_tokens / chunks of
  its request when the server reports usage (vLLM may put several tokens in one chunk when
  speculative decoding accepts several), else as one token.
- Request latencies (TTFT, ITL, TPOT, E2E) come from measured requests that completed by the end of
  the window; requests per second counts those that completed inside it.

The transport (`Sender`) is given: it sends one request, appends the arrival time of each content
chunk to `record.chunk_times` (time.perf_counter) and sets `record.usage_tokens` if the server says;
it raises on failure. Nothing here knows HTTP, which keeps this testable and the hot path small.
"""

from __future__ import annotations

import asyncio
import time
from array import array
from bisect import bisect_left, bisect_right
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from .stats import summarize, time_weighted_mean

Messages = list[dict[str, str]]


@dataclass(slots=True, eq=False)
class RequestRecord:
    index: int
    warmup: bool
    start: float = 0.0
    end: float = 0.0
    chunk_times: array = field(default_factory=lambda: array("d"))
    usage_tokens: int | None = None
    error: str | None = None
    cut: bool = False


Sender = Callable[[Messages, RequestRecord], Awaitable[None]]
ErrorClassifier = Callable[[BaseException], str]


@dataclass
class LevelProgress:
    concurrency: int
    elapsed_s: float
    completed: int
    target: int | None
    in_flight: int
    tokens: int
    errors: int
    phase: str  # "warmup" or "measuring"
    window_elapsed_s: float = 0.0


@dataclass
class LevelMeasurement:
    concurrency: int
    window_s: float
    completed: int
    cut_at_end: int
    warmup_requests: int
    errors: int
    error_kinds: dict[str, int]
    output_tokens: int
    output_tokens_per_s: float
    requests_per_s: float
    mean_in_flight: float
    concurrency_held: float
    ttft_ms: Any
    itl_ms: Any
    tpot_ms: Any
    e2e_ms: Any
    wall_start: float  # time.time() of the window edges, for log queries
    wall_end: float


def default_classifier(exc: BaseException) -> str:
    status = getattr(exc, "status", None) or getattr(exc, "status_code", None)
    if isinstance(status, int):
        return f"http_{status}"
    if isinstance(exc, (asyncio.TimeoutError, TimeoutError)):
        return "timeout"
    if isinstance(exc, (ConnectionError, OSError)):
        return "connection"
    return getattr(exc, "kind", None) or type(exc).__name__


async def run_level(
    send: Sender,
    prompts: Sequence[Messages],
    concurrency: int,
    *,
    warmup: int = 0,
    duration: float | None = None,
    num_prompts: int | None = None,
    on_progress: Callable[[LevelProgress], None] | None = None,
    progress_interval: float = 0.25,
    classify: ErrorClassifier = default_classifier,
    on_window: Callable[[str], None] | None = None,
) -> LevelMeasurement:
    """Run one level. `on_window("open")` / `on_window("close")` are called as the measured window
    opens and closes (benchmarks use them to read a server's own counters at the same moments)."""
    if concurrency < 1:
        raise ValueError("concurrency must be >= 1")
    if duration is None and num_prompts is None:
        raise ValueError("give a duration or a number of prompts")
    clock = time.perf_counter
    total = None if num_prompts is None else warmup + num_prompts
    records: list[RequestRecord] = []
    changes: list[tuple[float, int]] = []
    state = {"next": 0, "in_flight": 0, "warm_done": 0, "done": 0, "errors": 0, "tokens_done": 0}
    active: set[RequestRecord] = set()
    window_open = asyncio.Event()
    stop = False
    t_start = clock()
    marks: dict[str, float] = {"t0": t_start, "wall0": time.time()}
    if warmup == 0:
        window_open.set()
        if on_window is not None:
            on_window("open")

    async def worker() -> None:
        nonlocal stop
        n_prompts = len(prompts)
        while not stop:
            i = state["next"]
            if total is not None and i >= total:
                return
            state["next"] = i + 1
            rec = RequestRecord(index=i, warmup=i < warmup)
            records.append(rec)
            active.add(rec)
            state["in_flight"] += 1
            rec.start = clock()
            changes.append((rec.start, state["in_flight"]))
            try:
                await send(prompts[i % n_prompts], rec)
            except asyncio.CancelledError:
                rec.cut = True
                raise
            except Exception as exc:  # noqa: BLE001 - every failure is counted by kind, the run goes on
                rec.error = classify(exc)
                state["errors"] += 1
            finally:
                rec.end = clock()
                state["in_flight"] -= 1
                changes.append((rec.end, state["in_flight"]))
                active.discard(rec)
                state["tokens_done"] += len(rec.chunk_times)
                if not rec.cut:
                    state["done"] += 1
                if rec.warmup and not rec.cut:
                    state["warm_done"] += 1
                    if state["warm_done"] == warmup:
                        marks["t0"], marks["wall0"] = rec.end, time.time()
                        window_open.set()
                        if on_window is not None:
                            on_window("open")

    async def ticker() -> None:
        while True:
            await asyncio.sleep(progress_interval)
            if on_progress is not None:
                live = sum(len(r.chunk_times) for r in active)
                on_progress(
                    LevelProgress(
                        concurrency=concurrency,
                        elapsed_s=clock() - t_start,
                        completed=state["done"],
                        target=total,
                        in_flight=state["in_flight"],
                        tokens=state["tokens_done"] + live,
                        errors=state["errors"],
                        phase="measuring" if window_open.is_set() else "warmup",
                        window_elapsed_s=clock() - marks["t0"] if window_open.is_set() else 0.0,
                    )
                )

    workers = [asyncio.create_task(worker()) for _ in range(concurrency)]
    tick = asyncio.create_task(ticker())
    try:
        if duration is not None:
            opened = asyncio.create_task(window_open.wait())
            await asyncio.wait([opened, *workers], return_when=asyncio.FIRST_COMPLETED)
            opened.cancel()
            for task in workers:  # a worker only ends early on a bug or when every prompt was sent
                if task.done() and task.exception() is not None:
                    raise task.exception()  # type: ignore[misc]
            await window_open.wait()
            remaining = marks["t0"] + duration - clock()
            _done, pending = await asyncio.wait(workers, timeout=max(remaining, 0.0))
            stop = True
            t1, wall1 = marks["t0"] + duration, time.time()
            if on_window is not None:
                on_window("close")
            for task in pending:
                task.cancel()
            await asyncio.gather(*workers, return_exceptions=True)
            if not pending:  # every prompt finished before the duration: the window ends at the last one
                t1 = max((r.end for r in records), default=t1)
                wall1 = time.time() - (clock() - t1)
        else:
            await asyncio.gather(*workers)
            t1 = max((r.end for r in records), default=clock())
            wall1 = time.time() - (clock() - t1)
            if on_window is not None:
                on_window("close")
    finally:
        stop = True
        for task in workers:
            task.cancel()
        tick.cancel()
        await asyncio.gather(*workers, tick, return_exceptions=True)
    return measure(records, changes, concurrency, marks["t0"], t1, warmup, marks["wall0"], wall1)


def _tokens_of(rec: RequestRecord, tokens_per_chunk: float) -> float:
    """Tokens a record's chunks stand for, per chunk."""
    if rec.usage_tokens is not None and rec.chunk_times:
        return rec.usage_tokens / len(rec.chunk_times)
    return tokens_per_chunk


def measure(
    records: list[RequestRecord],
    changes: list[tuple[float, int]],
    concurrency: int,
    t0: float,
    t1: float,
    warmup: int,
    wall0: float,
    wall1: float,
) -> LevelMeasurement:
    window = max(t1 - t0, 1e-9)
    with_usage = [r for r in records if r.usage_tokens is not None and r.chunk_times]
    chunks_u = sum(len(r.chunk_times) for r in with_usage)
    tokens_per_chunk = (sum(r.usage_tokens or 0 for r in with_usage) / chunks_u) if chunks_u else 1.0

    tokens = 0.0
    ttft, itl, tpot, e2e = [], [], [], []
    completed = cut = in_window = 0
    error_kinds: dict[str, int] = {}
    for r in records:
        times = r.chunk_times
        if times:
            inside = bisect_right(times, t1) - bisect_left(times, t0)
            if inside:
                tokens += inside * _tokens_of(r, tokens_per_chunk)
        if r.warmup:
            continue
        if r.cut:
            cut += 1
            continue
        if r.error is not None:
            error_kinds[r.error] = error_kinds.get(r.error, 0) + 1
            continue
        # with fewer warm-up requests than in flight, a measured request can end before the window
        # opens: it is measured (latencies) but not in the window's request rate
        if r.end > t1 or not times:
            continue
        completed += 1
        in_window += r.end >= t0
        ttft.append(times[0] - r.start)
        e2e.append(r.end - r.start)
        prev = times[0]
        for t in times[1:]:
            itl.append(t - prev)
            prev = t
        n_tokens = r.usage_tokens if r.usage_tokens is not None else len(times)
        if n_tokens > 1:
            tpot.append((r.end - times[0]) / (n_tokens - 1))
    mean_in_flight = time_weighted_mean(changes, t0, t1)
    return LevelMeasurement(
        concurrency=concurrency,
        window_s=window,
        completed=completed,
        cut_at_end=cut,
        warmup_requests=min(warmup, len(records)),
        errors=sum(error_kinds.values()),
        error_kinds=error_kinds,
        output_tokens=round(tokens),
        output_tokens_per_s=tokens / window,
        requests_per_s=in_window / window,
        mean_in_flight=mean_in_flight,
        concurrency_held=mean_in_flight / concurrency,
        ttft_ms=summarize(ttft, 1000),
        itl_ms=summarize(itl, 1000),
        tpot_ms=summarize(tpot, 1000),
        e2e_ms=summarize(e2e, 1000),
        wall_start=wall0,
        wall_end=wall1,
    )
