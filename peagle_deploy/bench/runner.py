"""One `peagle bench` run: levels of the load generator, acceptance, cost, and the files in --out."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from .. import __version__
from ..errors import UsageError
from ..output import Output
from . import acceptance as acc_mod
from .cost import Price, instance_price, usd_per_million_tokens
from .datasets import Dataset
from .loadgen import LevelMeasurement, LevelProgress, run_level
from .results import BenchResult, LevelResult, Settings, TargetInfo, write_result
from .target_info import describe_endpoint, request_url, target_kind


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
    files: list[str] = field(default_factory=list)


def parse_concurrency(text: str) -> list[int]:
    try:
        levels = [int(x) for x in text.replace(" ", "").split(",") if x]
    except ValueError:
        raise UsageError(f"--concurrency {text!r} is not a list of numbers", "use e.g. 1,4,8,32,128") from None
    if not levels or any(c < 1 or c > 4096 for c in levels):
        raise UsageError(f"--concurrency {text!r} needs numbers from 1 to 4096", "use e.g. 1,4,8,32,128")
    return levels


def _level_result(m: LevelMeasurement, price: Price | None) -> LevelResult:
    usd = usd_per_million_tokens(price.usd_per_hour if price else None, m.output_tokens_per_s)
    return LevelResult(
        concurrency=m.concurrency,
        window_s=round(m.window_s, 4),
        completed=m.completed,
        cut_at_end=m.cut_at_end,
        warmup_requests=m.warmup_requests,
        errors=m.errors,
        error_kinds=m.error_kinds,
        output_tokens=m.output_tokens,
        output_tokens_per_s=round(m.output_tokens_per_s, 3),
        requests_per_s=round(m.requests_per_s, 4),
        mean_in_flight=round(m.mean_in_flight, 4),
        concurrency_held=round(m.concurrency_held, 4),
        ttft_ms=m.ttft_ms,
        itl_ms=m.itl_ms,
        tpot_ms=m.tpot_ms,
        e2e_ms=m.e2e_ms,
        usd_per_million_output_tokens=None if usd is None else round(usd, 4),
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
        info = f"{p.phase}, {rate:,.0f} tok/s, {p.in_flight} in flight, {p.errors} errors"
        if self._plain is not None:
            self._plain(f"concurrency {self._concurrency}: {info}")
        self._progress.update(self._task, completed=done, info=info)

    def finish(self, m: LevelMeasurement) -> None:
        info = f"{m.output_tokens_per_s:,.0f} tok/s, held {m.concurrency_held:.0%}, {m.errors} errors"
        if self._plain is not None:
            self._out.info(f"concurrency {self._concurrency}: done, {info}")
        self._progress.update(self._task, completed=self._progress.tasks[-1].total or 0, info=info)


def resolve_target(plan: BenchPlan, out: Output) -> tuple[TargetInfo, Any]:
    """TargetInfo and the AWS session (None for URL targets)."""
    kind = target_kind(plan.target)
    session = None
    if kind == "sagemaker":
        from ..aws import AwsSession

        session = AwsSession(plan.region, plan.profile)
        info = describe_endpoint(session.client("sagemaker"), plan.target)
    else:
        info = TargetInfo(kind=kind, name=plan.target)
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
            pricing = AwsSession("us-east-1", plan.profile, max_attempts=2, connect_timeout=5, read_timeout=15).client(
                "pricing"
            )
        except Exception:  # noqa: BLE001 - fall back to the shipped table
            pricing = None
    region = session.region if session is not None else resolve_region(plan.region)
    return instance_price(info.instance_type, region, count=info.instance_count or 1, pricing_client=pricing)


def make_sender(info: TargetInfo, plan: BenchPlan, session: Any) -> Any:
    if info.kind == "sagemaker":
        from .sagemaker_sender import SageMakerChatSender

        return SageMakerChatSender(
            session,
            info.name,
            max_tokens=plan.max_tokens,
            temperature=plan.temperature,
            timeout=plan.timeout,
            max_in_flight=max(plan.concurrency),
        )
    from .http_sender import HttpChatSender

    return HttpChatSender(
        request_url(plan.target, info.kind),
        model=info.model,
        max_tokens=plan.max_tokens,
        temperature=plan.temperature,
        timeout=plan.timeout,
    )


async def _openai_model(url: str) -> str | None:
    """The first model an OpenAI server lists at /v1/models (vLLM needs the served name)."""
    import aiohttp

    base = url.rstrip("/").removesuffix("/chat/completions")
    try:
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=10)) as s:
            async with s.get(base + "/models") as resp:
                data = await resp.json(content_type=None) if resp.status == 200 else {}
    except (aiohttp.ClientError, TimeoutError, ValueError):
        return None
    models = data.get("data") if isinstance(data, dict) else None
    return models[0].get("id") if models else None


async def _run_levels(
    plan: BenchPlan,
    info: TargetInfo,
    session: Any,
    price: Price | None,
    out: Output,
) -> tuple[list[LevelResult], acc_mod.Acceptance | None, float, float]:
    prom_url = acc_mod.metrics_url(plan.target) if info.kind != "sagemaker" else None
    before = None
    if prom_url:
        try:
            before = await acc_mod.scrape_async(prom_url)
        except UsageError as exc:
            out.note(f"no acceptance metrics: {exc}")
    if info.kind == "openai" and not info.model:
        info.model = await _openai_model(request_url(plan.target, "openai"))
    sender = make_sender(info, plan, session)
    levels: list[LevelResult] = []
    wall_start = wall_end = 0.0
    async with sender:
        with _Progress(out) as progress:
            for conc in plan.concurrency:
                warmup = conc if plan.warmup is None else plan.warmup
                progress.start(conc, warmup + plan.num_prompts if plan.num_prompts is not None else plan.duration)
                m = await run_level(
                    sender,
                    plan.dataset.prompts,
                    conc,
                    warmup=warmup,
                    duration=plan.duration,
                    num_prompts=plan.num_prompts,
                    on_progress=lambda p: progress.update(p, plan.duration),
                )
                progress.finish(m)
                wall_start = wall_start or m.wall_start
                wall_end = m.wall_end
                levels.append(_level_result(m, price))
    acceptance = None
    if before is not None and prom_url:
        try:
            after = await acc_mod.scrape_async(prom_url)
            acceptance = after.minus(before).acceptance(source=f"prometheus:{prom_url}")
        except UsageError as exc:
            out.note(f"no acceptance metrics after the run: {exc}")
    return levels, acceptance, wall_start, wall_end


def _cloudwatch_acceptance(
    session: Any, name: str, start: float, end: float, wait: float, out: Output, sleep: Any = None
) -> acc_mod.Acceptance | None:
    """vLLM logs stats every ~10 s and CloudWatch lags behind: poll until a stats line written after the
    run's end arrives (so the last interval of the run is in), or `wait` seconds pass."""
    import time as _time

    sleep = sleep or _time.sleep
    begin = datetime.fromtimestamp(start, timezone.utc)
    deadline = _time.monotonic() + wait
    logs = session.client("logs")
    while True:
        try:
            acc, latest_ms = acc_mod.read_cloudwatch_with_latest(logs, name, begin, datetime.now(timezone.utc))
        except UsageError as exc:
            out.note(f"no acceptance metrics: {exc}")
            return None
        if latest_ms >= end * 1000 or _time.monotonic() >= deadline:
            return acc
        sleep(5)


def run_bench(plan: BenchPlan, out: Output) -> BenchResult:
    started = datetime.now(timezone.utc)
    info, session = resolve_target(plan, out)
    price = resolve_price(info, plan, session)
    levels, acceptance, wall_start, wall_end = asyncio.run(_run_levels(plan, info, session, price, out))
    if info.kind == "sagemaker" and levels:
        acceptance = _cloudwatch_acceptance(session, info.name, wall_start, wall_end, plan.logs_wait, out)
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
        levels=levels,
        acceptance=acceptance,
    )
    if plan.out_dir is not None:
        plan.files.extend(write_outputs(result, plan.out_dir, chart=plan.chart))
    return result


def write_outputs(result: BenchResult, out_dir: Path, *, chart: bool = True) -> list[str]:
    from .compare import compare_results
    from .plot import plot_tables
    from .report import markdown_summary

    path = write_result(result, out_dir)
    md = path.with_suffix(".md")
    md.write_text(markdown_summary(result), encoding="utf-8")
    files = [str(path), str(md)]
    if chart:
        png = plot_tables(compare_results([result]), path.with_suffix(".png"))
        if png is not None:
            files.append(str(png))
    return files
