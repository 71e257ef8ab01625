"""One `peagle bench` run: check what can be checked first, run the levels, and keep what was measured.

Orchestration only: the target comes from runtime.target_ref, the load from loadgen, acceptance from
prometheus.py / cloudwatch.py, the schema from results.py. A run that stops (a dead or stalled target,
Ctrl-C) still returns and writes the levels it measured, with `complete: false` and the reason.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

from .. import __version__
from ..errors import EndpointFailed, Interrupted, PeagleError, UsageError, WaitTimeout
from ..output import Output
from ..runtime.target_ref import TargetRef, parse_target
from .acceptance import Acceptance, SpecCounters
from .cost import PRICING_REGION, Price, instance_price, usd_per_million_tokens
from .datasets import Dataset
from .loadgen import LevelMeasurement, LevelProgress, LevelStopped, run_level
from .results import BenchResult, LevelResult, Settings, TargetInfo, write_result

VLLM_LOG_INTERVAL_S = 10.0  # vLLM logs its SpecDecoding line about every 10 s
SATURATED_CPU = 0.85  # of one core
SATURATED_LAG_MS = 20.0  # mean event-loop lag


@dataclass
class BenchPlan:
    target: str
    dataset: Dataset
    concurrency: list[int]
    max_tokens: int = 256
    temperature: float = 0.0
    warmup: int | None = None  # None: one warm-up request per in-flight slot
    duration: float | None = None
    num_prompts: int | None = None
    out_dir: Path | None = None
    mode: str | None = None
    k: int | None = None
    instance_type: str | None = None
    instance_count: int = 1
    model: str | None = None
    region: str | None = None
    profile: str | None = None
    timeout: float = 600.0
    logs_wait: float = 60.0
    chart: bool = True
    save_requests: Path | None = None  # every finished request, one JSON line each (streamed, not kept)


@dataclass
class BenchRun:
    """What a run produced: the result, the files written, and why it failed, if it did."""

    result: BenchResult
    files: list[str] = field(default_factory=list)
    failure: PeagleError | None = None


def parse_concurrency(text: str) -> list[int]:
    try:
        levels = [int(x) for x in text.replace(" ", "").split(",") if x]
    except ValueError:
        raise UsageError(f"--concurrency {text!r} is not a list of numbers", "use e.g. 1,4,8,32,128") from None
    if not levels or any(c < 1 or c > 4096 for c in levels):
        raise UsageError(f"--concurrency {text!r} needs numbers from 1 to 4096", "use e.g. 1,4,8,32,128")
    return levels


def check_out_dir(out_dir: Path) -> None:
    """Fail before measuring when the results could not be written."""
    from ..safe_write import probe_writable

    probe_writable(out_dir, flag="--out")


def _level_result(m: LevelMeasurement, price: Price | None) -> LevelResult:
    usd = usd_per_million_tokens(price.usd_per_hour if price else None, m.output_tokens_per_s)
    lag = m.loop_lag_ms
    saturated = (m.client_cpu or 0) >= SATURATED_CPU or (lag is not None and (lag.mean or 0) >= SATURATED_LAG_MS)
    return LevelResult(
        concurrency=m.concurrency,
        window_s=round(m.window_s, 4),
        completed=m.completed,
        cut_at_end=m.cut_at_end,
        warmup_requests=m.warmup_requests,
        errors=m.errors,
        error_kinds=m.error_kinds,
        error_examples=m.error_examples,
        output_tokens=m.output_tokens,
        output_tokens_per_s=round(m.output_tokens_per_s, 3),
        requests_per_s=round(m.requests_per_s, 4),
        mean_in_flight=round(m.mean_in_flight, 4),
        concurrency_held=round(m.concurrency_held, 4),
        tokens_per_chunk=None if m.tokens_per_chunk is None else round(m.tokens_per_chunk, 4),
        ttft_ms=m.ttft_ms,
        ttfc_ms=m.ttfc_ms,
        itl_ms=m.itl_ms,
        tpot_ms=m.tpot_ms,
        e2e_ms=m.e2e_ms,
        usd_per_million_output_tokens=None if usd is None else round(usd, 4),
        client_cpu=None if m.client_cpu is None else round(m.client_cpu, 3),
        loop_lag_ms=lag,
        client_saturated=saturated,
    )


class _Progress:
    """Rich progress on stderr: one bar per level, with live tokens/s and requests in flight.
    Off a terminal (a pipe, a CI log) plain lines instead: a line per phase, a heartbeat every 10 s."""

    def __init__(self, out: Output):
        from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

        from ..output import PlainProgress

        self._out = out
        self._plain = None if out.interactive else PlainProgress(out.info, every_s=10.0)
        self._progress = Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            TextColumn("{task.fields[info]}"),
            TimeElapsedColumn(),
            console=out.err_console,
            transient=False,
            disable=self._plain is not None,
        )
        self._task: Any = None
        self._last = (0.0, 0)
        self._concurrency = 0

    def __enter__(self) -> _Progress:
        self._progress.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self._progress.__exit__(*exc)

    def start(self, concurrency: int, total: float | None) -> None:
        self._task = self._progress.add_task(f"concurrency {concurrency}", total=total, info="")
        self._last = (0.0, 0)
        self._concurrency = concurrency

    def update(self, p: LevelProgress, duration: float | None) -> None:
        dt = p.elapsed_s - self._last[0]
        rate = (p.tokens - self._last[1]) / dt if dt > 0 else 0.0
        self._last = (p.elapsed_s, p.tokens)
        done = p.completed if p.target is not None else min(p.window_elapsed_s, duration or 0)
        info = f"{p.phase}, {rate:,.0f} chunks/s, {p.in_flight} in flight, {p.errors} errors"
        if self._plain is not None:
            self._plain(f"concurrency {self._concurrency}: {info}")
        self._progress.update(self._task, completed=done, info=info)

    def finish(self, level: LevelResult) -> None:
        note = ", CLIENT SATURATED" if level.client_saturated else ""
        info = (f"{level.output_tokens_per_s:,.0f} tok/s, held {level.concurrency_held:.0%}, "
                f"{level.errors} errors{note}")
        if self._plain is not None:
            self._out.info(f"concurrency {self._concurrency}: done, {info}")
        self._progress.update(self._task, completed=self._progress.tasks[-1].total or 0, info=info)


def resolve_target(plan: BenchPlan, ref: TargetRef, out: Output) -> tuple[TargetInfo, Any]:
    """TargetInfo and the AWS session (None for URL targets)."""
    session = None
    if ref.kind == "sagemaker":
        from ..aws import AwsSession
        from .target_info import describe_endpoint

        session = AwsSession(plan.region, plan.profile)
        info = describe_endpoint(session.client("sagemaker"), ref.name)
    else:
        info = TargetInfo(kind=ref.kind, name=ref.name)
    info.model = plan.model or info.model
    if plan.mode is not None:
        if info.mode_source == "tags" and (info.mode, info.k) != (plan.mode, plan.k):
            out.warn(
                f"--mode/--k {plan.mode}/{plan.k} differ from the endpoint's tags {info.mode}/{info.k}; using the flags"
            )
        info.mode, info.k, info.mode_source = plan.mode, plan.k, "flags"
    if plan.instance_type:
        info.instance_type, info.instance_count = plan.instance_type, plan.instance_count
    return info, session


def resolve_price(info: TargetInfo, plan: BenchPlan, session: Any) -> Price | None:
    if not info.instance_type:
        return None
    pricing = None
    from ..aws import AwsSession, credentials_available, resolve_region

    if credentials_available(plan.profile, plan.region):
        try:
            pricing = AwsSession(PRICING_REGION, plan.profile, max_attempts=2, connect_timeout=5,
                                 read_timeout=15).client("pricing")
        except Exception:  # noqa: BLE001 - fall back to the shipped table
            pricing = None
    region = session.region if session is not None else resolve_region(plan.region)
    return instance_price(info.instance_type, region, count=info.instance_count or 1, pricing_client=pricing)


def make_sender(ref: TargetRef, info: TargetInfo, plan: BenchPlan, session: Any) -> Any:
    if ref.kind == "sagemaker":
        from .sagemaker_sender import SageMakerChatSender

        return SageMakerChatSender(session, ref.name, max_tokens=plan.max_tokens, temperature=plan.temperature,
                                   timeout=plan.timeout, max_in_flight=max(plan.concurrency))
    from .http_sender import HttpChatSender

    return HttpChatSender(ref.request_url, model=info.model, max_tokens=plan.max_tokens,
                          temperature=plan.temperature, timeout=plan.timeout, headers=ref.headers)


async def check_reachable(ref: TargetRef, timeout: float = 10.0) -> None:
    """A URL target must accept a connection before anything is measured (its /ping or /health answer,
    whatever the status, proves it listens)."""
    import aiohttp

    try:
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=timeout)) as s:
            async with s.get(ref.ping_url, headers=ref.headers) as resp:
                await resp.read()
    except (aiohttp.ClientError, OSError, TimeoutError) as exc:
        from ..runtime.failures import connect_error_text

        raise EndpointFailed(f"cannot reach {ref.name} ({connect_error_text(exc)})",
                             "start the server, or check the host and port") from None


async def _openai_model(ref: TargetRef) -> str | None:
    """The first model an OpenAI server lists at /v1/models (vLLM needs the served name)."""
    import aiohttp

    try:
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=10)) as s:
            async with s.get(ref.models_url, headers=ref.headers) as resp:
                data = await resp.json(content_type=None) if resp.status == 200 else {}
    except (aiohttp.ClientError, TimeoutError, ValueError):
        return None
    models = data.get("data") if isinstance(data, dict) else None
    return models[0].get("id") if models else None


@dataclass
class _Measured:
    levels: list[LevelResult] = field(default_factory=list)
    windows: list[tuple[datetime, datetime]] = field(default_factory=list)
    counters: SpecCounters | None = None
    acceptance_note: str | None = None
    request_log: Any = None


async def _run_levels(plan: BenchPlan, ref: TargetRef, info: TargetInfo, session: Any, price: Price | None,
                      out: Output, measured: _Measured) -> None:
    """Run every level into `measured` (filled as it goes, so a failure keeps what was measured)."""
    from .prometheus import scrape_async

    if ref.is_url:
        await check_reachable(ref)
        if ref.kind == "openai" and not info.model:
            info.model = await _openai_model(ref)
    out.info(f"dataset: {plan.dataset.describe()}")
    prom_url = ref.metrics_url
    sender = make_sender(ref, info, plan, session)
    idle_limit = min(plan.timeout, max(30.0, plan.duration or 0.0))
    log = measured.request_log
    async with sender:
        with _Progress(out) as progress:
            for conc in plan.concurrency:
                warmup = conc if plan.warmup is None else plan.warmup
                progress.start(conc, warmup + plan.num_prompts if plan.num_prompts is not None else plan.duration)
                scrapes: dict[str, asyncio.Task] = {}

                def on_window(edge: str) -> asyncio.Task | None:
                    if prom_url and measured.acceptance_note is None:
                        scrapes[edge] = asyncio.get_running_loop().create_task(scrape_async(prom_url, headers=ref.headers))
                        return scrapes[edge]  # the window opens once this reading is in
                    return None

                if log is not None:
                    log.level(conc, time.perf_counter())
                m = await run_level(sender, plan.dataset.prompts, conc, warmup=warmup, duration=plan.duration,
                                    num_prompts=plan.num_prompts, on_progress=lambda p: progress.update(p, plan.duration),
                                    on_window=on_window, idle_limit=idle_limit, on_request=log)
                level = _level_result(m, price)
                progress.finish(level)
                measured.levels.append(level)
                measured.windows.append((datetime.fromtimestamp(m.wall_start, timezone.utc),
                                         datetime.fromtimestamp(m.wall_end, timezone.utc)))
                if level.client_saturated:
                    cpu, lag = level.client_cpu or 0, level.loop_lag_ms.mean or 0
                    why = "it used a whole core" if cpu >= SATURATED_CPU else "the machine is busy"
                    out.warn(f"concurrency {conc}: the load generator could not keep up ({why}: CPU {cpu:.0%} of a "
                             f"core, event-loop lag {lag:.0f} ms): throughput and latencies include that")
                if level.completed == 0:
                    raise _no_request_completed(level, ref)
                if "open" in scrapes and "close" in scrapes:
                    try:
                        before, after = await scrapes["open"], await scrapes["close"]
                        if plan.num_prompts is not None:  # nothing in flight: let the server's counters settle
                            after = await settled_counters(prom_url, after, headers=ref.headers)
                    except PeagleError as exc:
                        measured.acceptance_note = f"no acceptance metrics: {exc.one_line()}"
                        continue
                    diff = after.minus(before)
                    measured.counters = diff if measured.counters is None else measured.counters.plus(diff)


async def settled_counters(url: str, reading: Any, *, tries: int = 5, pause: float = 0.2,
                           sleep: Any = asyncio.sleep, headers: dict[str, str] | None = None) -> Any:
    """Read the counters again until two readings agree (at most `tries` more): vLLM records a step's
    statistics just after it streams the step's tokens, so a reading taken as the last response ends can
    miss the last step."""
    from .prometheus import scrape_async

    for _ in range(tries):
        await sleep(pause)
        again = await scrape_async(url, headers=headers)
        if again == reading:
            return again
        reading = again
    return reading


def _no_request_completed(level: LevelResult, ref: TargetRef) -> PeagleError:
    """A level with no completed request fails the run, with the server's own error text."""
    if level.errors:
        kind = max(level.error_kinds.items(), key=lambda kv: kv[1])[0]
        return EndpointFailed(f"no request completed at concurrency {level.concurrency}: {level.errors} failed "
                              f"({kind} x{level.error_kinds[kind]}: {level.error_examples.get(kind, kind)})",
                              "check that the target answers a single 'peagle invoke'")
    return WaitTimeout(f"no request completed at concurrency {level.concurrency} within the window "
                       f"({level.cut_at_end} still running when it closed)", "raise --duration or lower --max-tokens")


def _stopped_failure(exc: LevelStopped, ref: TargetRef) -> PeagleError:
    if exc.kind == "stalled":
        return WaitTimeout(f"{ref.name} stalled: {exc.message}", "check the server; partial results were kept")
    return EndpointFailed(f"{ref.name} failed every request: {exc.message}", ref.log_hint)


def run_bench(plan: BenchPlan, out: Output) -> BenchRun:
    started = datetime.now(timezone.utc)
    ref = parse_target(plan.target)
    if plan.out_dir is not None:
        check_out_dir(plan.out_dir)
    info, session = resolve_target(plan, ref, out)
    price = resolve_price(info, plan, session)
    measured = _Measured(request_log=_request_log(plan.save_requests))
    failure: PeagleError | None = None
    try:
        asyncio.run(_run_levels(plan, ref, info, session, price, out, measured))
    except LevelStopped as exc:
        failure = _stopped_failure(exc, ref)
    except KeyboardInterrupt:
        failure = Interrupted("interrupted", "the levels measured so far were kept")
    except PeagleError as exc:
        if not measured.levels:
            raise
        failure = exc
    finally:
        if measured.request_log is not None:
            measured.request_log.close()
            if measured.request_log.failure:
                out.warn(f"--save-requests {measured.request_log.path}: writing stopped "
                         f"({measured.request_log.failure}); the results are complete")
    acceptance = None if isinstance(failure, Interrupted) else _acceptance(ref, session, measured, plan, out)
    result = BenchResult(
        tool_version=__version__,
        started_at=started,
        finished_at=datetime.now(timezone.utc),
        target=info,
        settings=Settings(
            dataset=plan.dataset.name,
            dataset_source=plan.dataset.source,
            num_prompts_in_dataset=len(plan.dataset),
            max_tokens=plan.max_tokens,
            temperature=plan.temperature,
            warmup=plan.warmup,
            duration_s=plan.duration,
            num_prompts=plan.num_prompts,
        ),
        price=price,
        levels=measured.levels,
        acceptance=acceptance,
        complete=failure is None,
        stopped=failure.one_line() if failure is not None else None,
    )
    files = write_outputs(result, plan.out_dir, chart=plan.chart) if plan.out_dir is not None else []
    if measured.request_log is not None:
        files.append(str(measured.request_log.path))
    return BenchRun(result, files, failure)


def _request_log(path: Path | None) -> Any:
    if path is None:
        return None
    from .request_log import RequestLog

    try:
        return RequestLog(path)
    except OSError as exc:
        raise UsageError(f"--save-requests {path}: cannot write there ({exc.strerror or exc})",
                         "pass a file in a folder you can write to") from None


def _acceptance(ref: TargetRef, session: Any, measured: _Measured, plan: BenchPlan, out: Output) -> Acceptance | None:
    if measured.acceptance_note:
        out.note(measured.acceptance_note)
    if ref.kind != "sagemaker":
        return measured.counters.acceptance(source=f"prometheus:{ref.metrics_url}") if measured.counters else None
    if not measured.windows or session is None:
        return None
    from .cloudwatch import wait_for_acceptance

    # a log line covers the ~10 s before it: the line that reports each window's end comes after it
    windows = [(a, b + timedelta(seconds=VLLM_LOG_INTERVAL_S)) for a, b in measured.windows]
    try:
        return wait_for_acceptance(session.client("logs"), ref.name, windows, measured.windows[-1][1],
                                   wait=plan.logs_wait)
    except PeagleError as exc:
        out.note(f"no acceptance metrics: {exc.one_line()}")
        return None


def write_outputs(result: BenchResult, out_dir: Path, *, chart: bool = True) -> list[str]:
    from .compare import compare_results
    from .plot import plot_tables
    from .report import markdown_summary

    from ..safe_write import write_text

    path = write_result(result, out_dir)
    md = write_text(path.with_suffix(".md"), markdown_summary(result))
    files = [str(path), str(md)]
    if chart and result.levels:
        png = plot_tables(compare_results([result]), path.with_suffix(".png"))
        if png is not None:
            files.append(str(png))
    return files
