"""Closed-loop load generator: exactly N requests in flight, each a streaming chat request.

How a level is measured (docs/bench.md explains it for users):
- N workers each send a request, wait for its stream to end, and send the next one, cycling through
  the prompts. The first `warmup` requests are warm-up: they load the server but are not measured.
- The measured window opens when the last warm-up request has finished (at the start when there is
  no warm-up); measured requests are not sent before it opens, so warm-up and measured requests never
  overlap (the server's own counters scraped at the window's edges count the measured requests only). With `duration`, it closes `duration` seconds later and requests still running are
  cancelled ("cut at end"); with `num_prompts`, it closes when the last measured request finishes.
- Output tokens per second counts the chunks that ARRIVED inside the window (each record's chunk
  count is read as the window opens and closes), of requests that did not fail. A chunk counts as
  usage.completion_tokens / chunks of its request when the server reports usage (several tokens per
  chunk under speculative decoding), else as one token.
- Latencies come from measured requests that completed by the end of the window. TTFT is the first
  chunk with output tokens (content, reasoning or tool call); ITL is per chunk (as `vllm bench
  serve`), TPOT per token. ITL goes into a bounded histogram, so memory does not grow with tokens.
- Memory does not grow with requests either: each request is folded into the level's running figures
  (bench.aggregate) the moment it ends, and only the requests in flight are kept. `on_request` sees
  every finished request first (the optional per-request detail file streams them to disk).
- Failures back off (per worker, doubling up to 2 s); a level where nothing has succeeded after
  `dead_after` failures stops (a dead target), and one where no byte arrives for `idle_limit` seconds
  stops (a stalled target).

The transport (`Sender`) is given: it sends one request and calls `record.add(n, now, content)` per
read of token chunks and sets `record.usage_tokens`; it raises on failure. Nothing here knows HTTP.
"""

from __future__ import annotations

import asyncio
import inspect
import time
from array import array
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

from .aggregate import LevelAggregate
from .conversation import Conversation, answer_text
from .stats import LatencySamples

Messages = list[dict[str, str]]
LAG_SAMPLE_S = 0.25  # the ticker's period: progress, stall checks and one event-loop lag sample per tick


class RequestRecord:
    __slots__ = ("index", "warmup", "start", "end", "chunks", "first", "first_content", "last", "gaps",
                 "usage_tokens", "error", "error_text", "cut", "at_open", "at_close")

    def __init__(self, index: int, warmup: bool, start: float = 0.0, end: float = 0.0):
        self.index, self.warmup, self.start, self.end = index, warmup, start, end
        self.chunks = 0
        self.first: float | None = None
        self.first_content: float | None = None
        self.last = 0.0
        self.gaps: array | None = array("f")  # one gap per read; chunks of the same read are 0 apart
        self.usage_tokens: int | None = None
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


Sender = Callable[[Messages, RequestRecord], Awaitable[None]]
ErrorClassifier = Callable[[BaseException], str]


class LevelStopped(Exception):
    """A level could not go on: the target is dead (`kind` "dead") or stalled ("stalled")."""

    def __init__(self, kind: str, message: str):
        super().__init__(message)
        self.kind = kind
        self.message = message


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


def default_classifier(exc: BaseException) -> str:
    status = getattr(exc, "status", None) or getattr(exc, "status_code", None)
    if isinstance(status, int):
        return f"http_{status}"
    if isinstance(exc, (asyncio.TimeoutError, TimeoutError)):
        return "timeout"
    if isinstance(exc, (ConnectionError, OSError)):
        return "connection"
    return getattr(exc, "kind", None) or type(exc).__name__


def _error_text(exc: BaseException) -> str:
    return " ".join((getattr(exc, "message", None) or str(exc) or type(exc).__name__).split())[:300]


async def run_level(
    send: Sender,
    prompts: Sequence[Messages],
    concurrency: int,
    *,
    follow_ups: Sequence[Sequence[str]] | None = None,
    warmup: int = 0,
    duration: float | None = None,
    num_prompts: int | None = None,
    on_progress: Callable[[LevelProgress], None] | None = None,
    progress_interval: float = LAG_SAMPLE_S,
    classify: ErrorClassifier = default_classifier,
    on_window: Callable[[str], Awaitable[Any] | None] | None = None,
    idle_limit: float = 60.0,
    dead_after: int | None = None,
    backoff_base: float = 0.05,
    backoff_max: float = 2.0,
    sleep: Callable[[float], Awaitable[Any]] = asyncio.sleep,
    on_request: Callable[[RequestRecord], None] | None = None,
) -> LevelMeasurement:
    """Run one level. `on_window("open")` / `on_window("close")` are called as the measured window
    opens and closes (the runner reads a server's own counters at the same moments); `on_request(record)`
    as each request ends (its `gaps` are still there). `follow_ups[j]`: the later user turns of record j
    (MT-Bench), each sent by the same worker after the answer to the turn before (bench/conversation.py);
    every turn is one request."""
    if concurrency < 1:
        raise ValueError("concurrency must be >= 1")
    if duration is None and num_prompts is None:
        raise ValueError("give a duration or a number of prompts")
    dead_after = dead_after if dead_after is not None else max(2 * concurrency, 8)
    clock = time.perf_counter
    total = None if num_prompts is None else warmup + num_prompts
    agg = LevelAggregate(concurrency, warmup, duration)
    state = {"next": 0, "records": 0, "in_flight": 0, "warm_done": 0, "done": 0, "errors": 0, "ok": 0,
             "chunks_done": 0}
    active: set[RequestRecord] = set()
    window_open = asyncio.Event()
    stopped: list[LevelStopped] = []
    stop = False
    t_start = clock()
    marks: dict[str, float] = {"t0": t_start, "wall0": time.time(), "cpu0": time.process_time()}
    lags = LatencySamples()
    itl = agg.itl
    opening: list[asyncio.Future[None]] = []

    def open_now(at: float) -> None:
        marks["t0"], marks["wall0"], marks["cpu0"] = at, time.time(), time.process_time()
        agg.open(at)
        for r in active:
            r.at_open = r.chunks
        window_open.set()

    async def open_after(reading: Awaitable[Any]) -> None:
        try:
            await reading  # its failure is the caller's to report (it awaits the same reading later)
        except Exception:  # noqa: BLE001, S110
            pass
        finally:
            open_now(clock())

    def open_window(at: float) -> None:
        """Open the measured window. When `on_window("open")` returns an awaitable (a scrape of the server's
        counters), measured requests start only once it is done: a reading still in flight while they run
        would count some of their work as before the window."""
        reading = on_window("open") if on_window is not None else None
        if inspect.isawaitable(reading):
            opening.append(asyncio.ensure_future(open_after(reading)))
        else:
            open_now(at)

    if warmup == 0:
        open_window(t_start)

    async def worker() -> None:
        nonlocal stop
        n_prompts = len(prompts)
        failures_in_a_row = 0
        talk: Conversation | None = None  # this worker's multi-turn record in progress
        while not stop:
            i = state["next"]
            if total is not None and i >= total:
                return
            state["next"] = i + 1
            if talk is not None and talk.ready:
                messages = talk.take()
            elif follow_ups:
                j = state["records"]
                state["records"] = j + 1
                talk = Conversation(prompts[j % n_prompts], follow_ups[j % n_prompts])
                messages = prompts[j % n_prompts]
            else:
                messages = prompts[i % n_prompts]
            answer = bytearray() if talk is not None and talk.wants_answer else None
            if i >= warmup and not window_open.is_set():
                await window_open.wait()  # measured requests start once warm-up is over: no overlap
                if stop:
                    return
            rec = RequestRecord(index=i, warmup=i < warmup)
            agg.started += 1
            active.add(rec)
            state["in_flight"] += 1
            rec.start = clock()
            try:
                await (send(messages, rec) if answer is None else send(messages, rec, answer=answer))
                if answer is not None and talk is not None:
                    talk.answered(answer_text(answer))
            except asyncio.CancelledError:
                rec.cut = True
                raise
            except Exception as exc:  # noqa: BLE001 - every failure is counted by kind, the run goes on
                rec.error = classify(exc)
                rec.error_text = _error_text(exc)
                state["errors"] += 1
                talk = None  # no answer to follow up: the next request starts a new record
            finally:
                rec.end = clock()
                state["in_flight"] -= 1
                active.discard(rec)
                state["chunks_done"] += rec.chunks
                if not window_open.is_set():
                    rec.at_open = rec.chunks
                if rec.at_close < 0:
                    rec.at_close = rec.chunks
                if not rec.cut:
                    state["done"] += 1
                    if rec.error is None and not rec.warmup and rec.gaps is not None:
                        itl.add_gaps(rec.gaps, rec.chunks - 1 - len(rec.gaps))
                if on_request is not None:
                    on_request(rec)
                rec.gaps = None  # memory stays independent of the number of tokens
                agg.fold(rec)  # and of the number of requests: nothing of `rec` is kept
                if rec.warmup and not rec.cut:
                    state["warm_done"] += 1
                    if state["warm_done"] == warmup:
                        open_window(rec.end)
            if rec.error is None:
                state["ok"] += 1
                failures_in_a_row = 0
                continue
            if state["ok"] == 0 and state["errors"] >= dead_after:
                stopped.append(LevelStopped("dead", f"{state['errors']} requests failed and none succeeded; "
                                                    f"the last: {rec.error_text}"))
                stop = True
                return
            failures_in_a_row += 1
            await sleep(min(backoff_max, backoff_base * 2 ** (failures_in_a_row - 1)))

    async def ticker() -> None:
        last_progress = (clock(), -1)
        while True:
            before = clock()
            await asyncio.sleep(progress_interval)
            now = clock()
            if window_open.is_set():
                lags.add(max(0.0, now - before - progress_interval))
            live = sum(r.chunks for r in active)
            seen = state["chunks_done"] + live + state["done"]
            if seen != last_progress[1]:
                last_progress = (now, seen)
            elif now - last_progress[0] > idle_limit and not stop:
                stopped.append(LevelStopped("stalled", f"nothing arrived for {idle_limit:g}s with "
                                                       f"{state['in_flight']} requests in flight"))
                for task in workers:
                    task.cancel()
                return
            if on_progress is not None:
                on_progress(LevelProgress(
                    concurrency=concurrency, elapsed_s=now - t_start, completed=state["done"], target=total,
                    in_flight=state["in_flight"], tokens=state["chunks_done"] + live, errors=state["errors"],
                    phase="measuring" if window_open.is_set() else "warmup",
                    window_elapsed_s=now - marks["t0"] if window_open.is_set() else 0.0))

    workers = [asyncio.create_task(worker()) for _ in range(concurrency)]
    tick = asyncio.create_task(ticker())
    try:
        if duration is not None:
            opened = asyncio.create_task(window_open.wait())
            await asyncio.wait([opened, *workers], return_when=asyncio.FIRST_COMPLETED)
            opened.cancel()
            if stopped:
                raise stopped[0]
            for task in workers:  # a worker only ends early on a bug, a dead target or when every prompt was sent
                if task.done() and not task.cancelled() and task.exception() is not None:
                    raise task.exception()  # type: ignore[misc]
            if not window_open.is_set():
                await asyncio.wait([asyncio.create_task(window_open.wait()), *workers],
                                   return_when=asyncio.FIRST_COMPLETED)
            if stopped:
                raise stopped[0]
            remaining = marks["t0"] + duration - clock()
            _done, pending = await asyncio.wait(workers, timeout=max(remaining, 0.0))
            if stopped:
                raise stopped[0]
            stop = True
            t1, wall1, cpu1 = marks["t0"] + duration, time.time(), time.process_time()
            for r in active:
                r.at_close = r.chunks
            if on_window is not None:
                on_window("close")
            for task in pending:
                task.cancel()
            await asyncio.gather(*workers, return_exceptions=True)
            if not pending:  # every prompt finished before the duration: the window ends at the last one
                t1 = agg.last_end if agg.last_end is not None else t1
                wall1 = time.time() - (clock() - t1)
        else:
            await asyncio.gather(*workers, return_exceptions=True)
            if stopped:
                raise stopped[0]
            for task in workers:
                if not task.cancelled() and task.exception() is not None:
                    raise task.exception()  # type: ignore[misc]
            t1 = agg.last_end if agg.last_end is not None else clock()
            wall1, cpu1 = time.time() - (clock() - t1), time.process_time()
            if on_window is not None:
                on_window("close")
    finally:
        stop = True
        for task in workers:
            task.cancel()
        tick.cancel()
        await asyncio.gather(*workers, tick, *opening, return_exceptions=True)
    m = agg.measurement(t1, marks["wall0"], wall1)
    if m.window_s > 0:
        m.client_cpu = (cpu1 - marks["cpu0"]) / m.window_s
    m.loop_lag_ms = lags.summary(1000)
    m.window_open, m.window_close = marks["t0"], t1
    return m

