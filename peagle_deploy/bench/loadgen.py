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
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

from .aggregate import LevelAggregate
from .conversation import Conversation, answer_text
from .records import LevelMeasurement, Messages, RequestRecord
from .stats import LatencySamples

LAG_SAMPLE_S = 0.25  # the ticker's period: progress, stall checks and one event-loop lag sample per tick

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
    level = _Level(send, prompts, concurrency, follow_ups=follow_ups, warmup=warmup, duration=duration,
                   num_prompts=num_prompts, on_progress=on_progress, progress_interval=progress_interval,
                   classify=classify, on_window=on_window, idle_limit=idle_limit,
                   dead_after=dead_after if dead_after is not None else max(2 * concurrency, 8),
                   backoff_base=backoff_base, backoff_max=backoff_max, sleep=sleep, on_request=on_request)
    return await level.run()


class _Level:
    """One level in progress: `concurrency` workers and a ticker share the counts below; `run` waits for the
    window to close and returns its measurement. The settings are run_level's arguments."""

    __slots__ = {
        # settings
        "send": "the transport: sends one request and fills its record",
        "prompts": "the first user turns, sent in turn",
        "follow_ups": "per prompt, the later user turns of its multi-turn record (or None)",
        "concurrency": "requests in flight",
        "warmup": "requests sent before the measured window opens",
        "duration": "the window's length in seconds (or None: it closes when the last request ends)",
        "total": "warm-up plus measured requests, with a number of prompts (None with a duration)",
        "on_progress": "called once per tick with a LevelProgress",
        "progress_interval": "the ticker's period in seconds",
        "classify": "an exception -> its error kind",
        "on_window": 'called with "open" and "close" at the window\'s edges',
        "idle_limit": "seconds without a byte before the level stops as stalled",
        "dead_after": "failures without a success before the level stops as dead",
        "backoff_base": "a worker's first wait after a failure, doubled per failure in a row",
        "backoff_max": "the longest wait after a failure",
        "sleep": "the backoff's sleep",
        "on_request": "called with each finished request's record",
        # shared state
        "agg": "the level's running figures (bench.aggregate): each request is folded in as it ends",
        "next_index": "the index of the next request any worker sends (warm-up requests first)",
        "next_record": "the next multi-turn record a worker starts (with follow_ups)",
        "in_flight": "requests sent and not yet ended",
        "warm_done": "warm-up requests that ended (the window opens when the last does)",
        "done": "requests that ended without being cut",
        "errors": "requests that failed",
        "ok": "requests that succeeded",
        "chunks_done": "chunks of the requests that ended",
        "active": "the records of the requests in flight",
        "window_open": "set when the measured window opens; measured requests wait for it",
        "stopped": "why the level stopped early (the first reason), or None",
        "stop": "set when no worker may send another request",
        "t_start": "perf_counter() when the level began",
        "t_open": "perf_counter() when the window opened (t_start until then)",
        "wall_open": "time.time() when the window opened",
        "cpu_open": "process_time() when the window opened",
        "lags": "the event loop's lag, one sample per tick while the window is open",
        "opening": "the window's opening, waiting for on_window's reading",
        "workers": "the worker tasks",
    }

    def __init__(self, send: Sender, prompts: Sequence[Messages], concurrency: int, *,
                 follow_ups: Sequence[Sequence[str]] | None, warmup: int, duration: float | None,
                 num_prompts: int | None, on_progress: Callable[[LevelProgress], None] | None,
                 progress_interval: float, classify: ErrorClassifier,
                 on_window: Callable[[str], Awaitable[Any] | None] | None, idle_limit: float, dead_after: int,
                 backoff_base: float, backoff_max: float, sleep: Callable[[float], Awaitable[Any]],
                 on_request: Callable[[RequestRecord], None] | None):
        self.send, self.prompts, self.follow_ups, self.concurrency = send, prompts, follow_ups, concurrency
        self.warmup, self.duration = warmup, duration
        self.total = None if num_prompts is None else warmup + num_prompts
        self.on_progress, self.progress_interval, self.classify = on_progress, progress_interval, classify
        self.on_window, self.idle_limit, self.dead_after = on_window, idle_limit, dead_after
        self.backoff_base, self.backoff_max, self.sleep, self.on_request = backoff_base, backoff_max, sleep, on_request
        self.agg = LevelAggregate(concurrency, warmup, duration)
        self.next_index = self.next_record = self.in_flight = self.warm_done = 0
        self.done = self.errors = self.ok = self.chunks_done = 0
        self.active: set[RequestRecord] = set()
        self.window_open = asyncio.Event()
        self.stopped: LevelStopped | None = None
        self.stop = False
        self.t_start = self.t_open = time.perf_counter()
        self.wall_open, self.cpu_open = time.time(), time.process_time()
        self.lags = LatencySamples()
        self.opening: list[asyncio.Future[None]] = []
        self.workers: list[asyncio.Task[None]] = []

    # the measured window's opening ------------------------------------------------------------------------------

    def _open_now(self, at: float) -> None:
        self.t_open, self.wall_open, self.cpu_open = at, time.time(), time.process_time()
        self.agg.open(at)
        for r in self.active:
            r.at_open = r.chunks
        self.window_open.set()

    async def _open_after(self, reading: Awaitable[Any]) -> None:
        try:
            await reading  # its failure is the caller's to report (it awaits the same reading later)
        except Exception:  # noqa: BLE001, S110
            pass
        finally:
            self._open_now(time.perf_counter())

    def _open_window(self, at: float) -> None:
        """Open the measured window. When `on_window("open")` returns an awaitable (a scrape of the server's
        counters), measured requests start only once it is done: a reading still in flight while they run
        would count some of their work as before the window."""
        reading = self.on_window("open") if self.on_window is not None else None
        if inspect.isawaitable(reading):
            self.opening.append(asyncio.ensure_future(self._open_after(reading)))
        else:
            self._open_now(at)

    def _stop_with(self, stopped: LevelStopped) -> None:
        if self.stopped is None:  # the first reason is the one reported
            self.stopped = stopped

    # a worker: one request after another ------------------------------------------------------------------------

    async def _worker(self) -> None:
        failures_in_a_row = 0
        talk: Conversation | None = None  # this worker's multi-turn record in progress
        while not self.stop:
            i = self.next_index
            if self.total is not None and i >= self.total:
                return
            self.next_index = i + 1
            messages, talk = self._messages(i, talk)
            if i >= self.warmup and not self.window_open.is_set():
                await self.window_open.wait()  # measured requests start once warm-up is over: no overlap
                if self.stop:
                    return
            rec = await self._request(i, messages, talk)
            if rec.error is None:
                self.ok += 1
                failures_in_a_row = 0
                continue
            talk = None  # no answer to follow up: the next request starts a new record
            if self.ok == 0 and self.errors >= self.dead_after:
                self._stop_with(LevelStopped("dead", f"{self.errors} requests failed and none succeeded; "
                                                     f"the last: {rec.error_text}"))
                self.stop = True
                return
            failures_in_a_row += 1
            await self.sleep(min(self.backoff_max, self.backoff_base * 2 ** (failures_in_a_row - 1)))

    def _messages(self, i: int, talk: Conversation | None) -> tuple[Messages, Conversation | None]:
        """Request `i`'s messages: the next turn of the worker's record when its answer is in, else the next
        prompt (the first turn of a new record, with follow_ups)."""
        if talk is not None and talk.ready:
            return talk.take(), talk
        prompts = self.prompts
        if self.follow_ups:
            j = self.next_record
            self.next_record = j + 1
            return prompts[j % len(prompts)], Conversation(prompts[j % len(prompts)], self.follow_ups[j % len(prompts)])
        return prompts[i % len(prompts)], None

    async def _request(self, i: int, messages: Messages, talk: Conversation | None) -> RequestRecord:
        """Send request `i` and fold it into the level as it ends; a failure is counted in its record."""
        answer = bytearray() if talk is not None and talk.wants_answer else None
        rec = RequestRecord(index=i, warmup=i < self.warmup)
        self.agg.started += 1
        self.active.add(rec)
        self.in_flight += 1
        rec.start = time.perf_counter()
        try:
            await (self.send(messages, rec) if answer is None else self.send(messages, rec, answer=answer))
            if answer is not None and talk is not None:
                talk.answered(answer_text(answer))
        except asyncio.CancelledError:
            rec.cut = True
            raise
        except Exception as exc:  # noqa: BLE001 - every failure is counted by kind, the run goes on
            rec.error = self.classify(exc)
            rec.error_text = _error_text(exc)
            self.errors += 1
        finally:
            self._ended(rec)
        return rec

    def _ended(self, rec: RequestRecord) -> None:
        rec.end = time.perf_counter()
        self.in_flight -= 1
        self.active.discard(rec)
        self.chunks_done += rec.chunks
        if not self.window_open.is_set():
            rec.at_open = rec.chunks
        if rec.at_close < 0:
            rec.at_close = rec.chunks
        if not rec.cut:
            self.done += 1
            if rec.error is None and not rec.warmup and rec.gaps is not None:
                self.agg.itl.add_gaps(rec.gaps, rec.chunks - 1 - len(rec.gaps))
        if self.on_request is not None:
            self.on_request(rec)
        rec.gaps = None  # memory stays independent of the number of tokens
        self.agg.fold(rec)  # and of the number of requests: nothing of `rec` is kept
        if rec.warmup and not rec.cut:
            self.warm_done += 1
            if self.warm_done == self.warmup:
                self._open_window(rec.end)

    # the ticker: progress, the event loop's lag, a stalled target -----------------------------------------------

    async def _ticker(self) -> None:
        clock, interval = time.perf_counter, self.progress_interval
        last_progress = (clock(), -1)
        while True:
            before = clock()
            await asyncio.sleep(interval)
            now = clock()
            if self.window_open.is_set():
                self.lags.add(max(0.0, now - before - interval))
            live = sum(r.chunks for r in self.active)
            seen = self.chunks_done + live + self.done
            if seen != last_progress[1]:
                last_progress = (now, seen)
            elif now - last_progress[0] > self.idle_limit and not self.stop:
                self._stop_with(LevelStopped("stalled", f"nothing arrived for {self.idle_limit:g}s with "
                                                        f"{self.in_flight} requests in flight"))
                for task in self.workers:
                    task.cancel()
                return
            if self.on_progress is not None:
                self.on_progress(self._progress(now, live))

    def _progress(self, now: float, live: int) -> LevelProgress:
        measuring = self.window_open.is_set()
        return LevelProgress(
            concurrency=self.concurrency, elapsed_s=now - self.t_start, completed=self.done, target=self.total,
            in_flight=self.in_flight, tokens=self.chunks_done + live, errors=self.errors,
            phase="measuring" if measuring else "warmup", window_elapsed_s=now - self.t_open if measuring else 0.0)

    # the level as a whole ---------------------------------------------------------------------------------------

    async def run(self) -> LevelMeasurement:
        if self.warmup == 0:
            self._open_window(self.t_start)
        self.workers = [asyncio.create_task(self._worker()) for _ in range(self.concurrency)]
        tick = asyncio.create_task(self._ticker())
        try:
            if self.duration is not None:
                t1, wall1, cpu1 = await self._until_duration(self.duration)
            else:
                t1, wall1, cpu1 = await self._until_last_request()
        finally:
            self.stop = True
            for task in self.workers:
                task.cancel()
            tick.cancel()
            await asyncio.gather(*self.workers, tick, *self.opening, return_exceptions=True)
        m = self.agg.measurement(t1, self.wall_open, wall1)
        if m.window_s > 0:
            m.client_cpu = (cpu1 - self.cpu_open) / m.window_s
        m.loop_lag_ms = self.lags.summary(1000)
        m.window_open, m.window_close = self.t_open, t1
        return m

    def _raise_if_stopped(self) -> None:
        if self.stopped is not None:
            raise self.stopped

    async def _until_duration(self, duration: float) -> tuple[float, float, float]:
        """Wait for the window to open, then `duration` seconds; cut what still runs. The window's close:
        (perf_counter, time.time, process_time)."""
        clock, workers = time.perf_counter, self.workers
        opened = asyncio.create_task(self.window_open.wait())
        await asyncio.wait([opened, *workers], return_when=asyncio.FIRST_COMPLETED)
        opened.cancel()
        self._raise_if_stopped()
        for task in workers:  # a worker only ends early on a bug, a dead target or when every prompt was sent
            if task.done() and not task.cancelled() and task.exception() is not None:
                raise task.exception()  # type: ignore[misc]
        if not self.window_open.is_set():
            await asyncio.wait([asyncio.create_task(self.window_open.wait()), *workers],
                               return_when=asyncio.FIRST_COMPLETED)
        self._raise_if_stopped()
        remaining = self.t_open + duration - clock()
        _done, pending = await asyncio.wait(workers, timeout=max(remaining, 0.0))
        self._raise_if_stopped()
        self.stop = True
        t1, wall1, cpu1 = self.t_open + duration, time.time(), time.process_time()
        for r in self.active:
            r.at_close = r.chunks
        if self.on_window is not None:
            self.on_window("close")
        for task in pending:
            task.cancel()
        await asyncio.gather(*workers, return_exceptions=True)
        if not pending:  # every prompt finished before the duration: the window ends at the last one
            t1 = self.agg.last_end if self.agg.last_end is not None else t1
            wall1 = time.time() - (clock() - t1)
        return t1, wall1, cpu1

    async def _until_last_request(self) -> tuple[float, float, float]:
        """Wait for every request (a number of prompts); the window closes as the last one ends."""
        clock = time.perf_counter
        await asyncio.gather(*self.workers, return_exceptions=True)
        self._raise_if_stopped()
        for task in self.workers:
            if not task.cancelled() and task.exception() is not None:
                raise task.exception()  # type: ignore[misc]
        t1 = self.agg.last_end if self.agg.last_end is not None else clock()
        wall1, cpu1 = time.time() - (clock() - t1), time.process_time()
        if self.on_window is not None:
            self.on_window("close")
        return t1, wall1, cpu1
