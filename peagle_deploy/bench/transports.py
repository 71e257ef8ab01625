"""`peagle bench NAME --transport both`: SageMaker's two transports side by side, on one endpoint, in one run.

`invoke-endpoint` is InvokeEndpointWithResponseStream (the AWS event stream: botocore in a thread per request,
peagle's frame reader, then the SSE inside the PayloadParts); `openai-route` is the endpoint's OpenAI route
(plain SSE over aiohttp, a bearer token). Same prompts, levels and settings; measured in turns, one level of
one transport then the same level of the other, the order swapped at every level, so a machine that gets
busier during the run does not favour either. Per level: output tokens/s, TTFT p50 and the load generator's
CPU time per output token, and the route / event-stream ratio of each (one run, so the ratios compare like
with like on a loaded machine). Acceptance is not read: both transports reach the same server.
"""

from __future__ import annotations

import asyncio
from dataclasses import replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from ..errors import Interrupted, PeagleError, UsageError
from ..output import Output
from ..runtime.target_ref import TRANSPORTS
from .loadgen import LevelStopped
from .results import BenchResult, LevelResult
from .runner import (BenchPlan, _Measured, _run_levels, _stopped_failure, build_result, check_out_dir,
                     resolve_price, resolve_target, warm_component, write_outputs)

BASELINE, ROUTE = TRANSPORTS  # invoke-endpoint, openai-route


class TransportLevel(BaseModel):
    concurrency: int
    transport: str
    output_tokens_per_s: float
    ttft_p50_ms: float | None
    client_cpu_us_per_token: float | None  # the load generator's CPU time over the window / output tokens
    completed: int
    errors: int
    client_saturated: bool


class TransportRatio(BaseModel):
    """openai-route / invoke-endpoint at one level (> 1: the route is higher)."""

    concurrency: int
    output_tokens_per_s: float | None
    ttft_p50: float | None
    client_cpu_per_token: float | None


class TransportComparison(BaseModel):
    endpoint: str
    levels: list[TransportLevel]
    ratios: list[TransportRatio]
    results: dict[str, BenchResult]
    files: list[str]
    complete: bool
    stopped: str | None = None


def level_row(transport: str, level: LevelResult) -> TransportLevel:
    cpu = None
    if level.client_cpu is not None and level.output_tokens:
        cpu = level.client_cpu * level.window_s / level.output_tokens * 1e6
    return TransportLevel(concurrency=level.concurrency, transport=transport,
                          output_tokens_per_s=level.output_tokens_per_s, ttft_p50_ms=level.ttft_ms.p50,
                          client_cpu_us_per_token=None if cpu is None else round(cpu, 3), completed=level.completed,
                          errors=level.errors, client_saturated=level.client_saturated)


def _ratio(a: float | None, b: float | None) -> float | None:
    return None if a is None or not b else round(a / b, 4)


def ratios(rows: list[TransportLevel]) -> list[TransportRatio]:
    by_level: dict[int, dict[str, TransportLevel]] = {}
    for row in rows:
        by_level.setdefault(row.concurrency, {})[row.transport] = row
    found = []
    for conc, pair in by_level.items():
        if BASELINE in pair and ROUTE in pair:
            base, route = pair[BASELINE], pair[ROUTE]
            found.append(TransportRatio(
                concurrency=conc, output_tokens_per_s=_ratio(route.output_tokens_per_s, base.output_tokens_per_s),
                ttft_p50=_ratio(route.ttft_p50_ms, base.ttft_p50_ms),
                client_cpu_per_token=_ratio(route.client_cpu_us_per_token, base.client_cpu_us_per_token)))
    return found


def run_side_by_side(plan: BenchPlan, out: Output) -> tuple[TransportComparison, PeagleError | None]:
    started = datetime.now(timezone.utc)
    refs = {t: plan.target.model_copy(update={"transport": t}) for t in TRANSPORTS}
    if refs[BASELINE].kind != "sagemaker":
        raise UsageError("--transport both compares a SageMaker endpoint's two transports",
                         "pass an endpoint name (or its OpenAI route URL)")
    if plan.out_dir is not None:
        check_out_dir(plan.out_dir)
    info, session = resolve_target(plan, refs[BASELINE], out)
    cold_start = warm_component(plan, refs[BASELINE], info, session, out)  # once: both reach the same copies
    price = resolve_price(info, plan, session)
    infos = {t: info.model_copy(update={"transport": t}) for t in TRANSPORTS}
    measured = {t: _Measured() for t in TRANSPORTS}
    failure: PeagleError | None = None
    out.info(f"dataset: {plan.dataset.describe()}")  # once: the levels below run one call each
    try:
        for index, conc in enumerate(plan.concurrency):
            for transport in (TRANSPORTS if index % 2 == 0 else TRANSPORTS[::-1]):
                out.info(f"concurrency {conc}: {transport}")
                one_level = replace(plan, concurrency=[conc])
                asyncio.run(_run_levels(one_level, refs[transport], infos[transport], session, price, out,
                                        measured[transport], announce=False))
    except LevelStopped as exc:
        failure = _stopped_failure(exc, refs[BASELINE])
    except KeyboardInterrupt:
        failure = Interrupted("interrupted", "the levels measured so far were kept")
    except PeagleError as exc:
        if not any(m.levels for m in measured.values()):
            raise
        failure = exc
    out.note("acceptance is not read in a transport comparison (both transports reach the same server)")
    results = {t: build_result(plan, infos[t], price, measured[t], None, failure, started, cold_start)
               for t in TRANSPORTS}
    files: list[str] = []
    if plan.out_dir is not None:
        for transport, result in results.items():  # a folder each: their file names would otherwise be the same
            files += write_outputs(result, Path(plan.out_dir) / transport, chart=plan.chart)
    rows = [level_row(t, level) for t in TRANSPORTS for level in results[t].levels]
    rows.sort(key=lambda r: (r.concurrency, TRANSPORTS.index(r.transport)))
    comparison = TransportComparison(endpoint=info.name, levels=rows, ratios=ratios(rows), results=results,
                                     files=files, complete=failure is None,
                                     stopped=failure.one_line() if failure is not None else None)
    return comparison, failure


def render(console: Any, comparison: TransportComparison) -> None:
    from ..output import print_table

    def num(value: float | None, fmt: str) -> str:
        return "-" if value is None else format(value, fmt)

    rows = [[str(r.concurrency), r.transport, num(r.output_tokens_per_s, ",.1f"), num(r.ttft_p50_ms, ",.1f"),
             num(r.client_cpu_us_per_token, ",.1f") + (" (saturated)" if r.client_saturated else ""),
             f"{r.completed}/{r.errors}"] for r in comparison.levels]
    print_table(console, ("concurrency", "transport", "output tok/s", "TTFT p50 ms", "client CPU us/token",
                          "done/errors"), rows, title=f"{comparison.endpoint}: SageMaker's two transports")
    ratio_rows = [[str(r.concurrency), num(r.output_tokens_per_s, ".2f"), num(r.ttft_p50, ".2f"),
                   num(r.client_cpu_per_token, ".2f")] for r in comparison.ratios]
    print_table(console, ("concurrency", "tok/s", "TTFT p50", "CPU/token"), ratio_rows,
                title="openai-route / invoke-endpoint (same run)")
    for f in comparison.files:
        console.print(f"wrote {f}", markup=False, soft_wrap=True)
