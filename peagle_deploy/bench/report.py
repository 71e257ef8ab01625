"""Human renderings of results: a Markdown summary (written beside the JSON) and Rich tables."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .acceptance import Acceptance
from .advisor import Advice
from .compare import CompareTable
from .results import BenchResult, LevelResult
from .stats import Summary

if TYPE_CHECKING:
    from rich.console import Console


def _f(value: float | None, digits: int = 1) -> str:
    return "-" if value is None else f"{value:,.{digits}f}"


def _ms(s: Summary, which: str) -> str:
    return _f(getattr(s, which), 1)


def level_rows(level: LevelResult) -> list[str]:
    errors = str(level.errors)
    if level.error_kinds:
        errors += " (" + ", ".join(f"{k}: {v}" for k, v in sorted(level.error_kinds.items())) + ")"
    return [
        str(level.concurrency),
        _f(level.output_tokens_per_s),
        _f(level.requests_per_s, 2),
        f"{level.concurrency_held:.0%}",
        _ms(level.ttft_ms, "mean"),
        _ms(level.ttft_ms, "p99"),
        _ms(level.itl_ms, "mean"),
        _ms(level.itl_ms, "p99"),
        _ms(level.tpot_ms, "mean"),
        _ms(level.e2e_ms, "mean"),
        _ms(level.e2e_ms, "p99"),
        _f(level.usd_per_million_output_tokens, 2),
        errors,
        _ms(level.ttfc_ms, "mean"),
        _f(level.tokens_per_chunk, 2),
        "SATURATED" if level.client_saturated else "host busy" if level.host_busy else
        "ok" if level.client_judged else "no verdict",
    ]


LEVEL_HEADERS = [
    "concurrency",
    "output tok/s",
    "req/s",
    "held",
    "TTFT mean ms",
    "TTFT p99 ms",
    "ITL mean ms",
    "ITL p99 ms",
    "TPOT mean ms",
    "E2E mean ms",
    "E2E p99 ms",
    "$/M out tok",
    "errors",
    "TTFC mean ms",
    "tok/chunk",
    "client",
]


def _md_table(headers: list[str], rows: list[list[str]]) -> list[str]:
    out = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    out += ["| " + " | ".join(r) + " |" for r in rows]
    return out


def acceptance_lines(acc: Acceptance) -> list[str]:
    if acc.mean_acceptance_length is None and acc.acceptance_rate is None:
        return [f"Acceptance ({acc.source}): no data" + (f": {acc.note}" if acc.note else "")]
    lines = [
        f"Acceptance ({acc.source}): mean acceptance length {_f(acc.mean_acceptance_length, 2)},"
        f" acceptance rate {_f((acc.acceptance_rate or 0) * 100, 1)}%, {acc.accepted_tokens:,} of"
        f" {acc.draft_tokens:,} draft tokens accepted over {acc.drafts:,.0f} drafts.",
    ]
    if acc.per_position:
        lines.append(
            "Per-position acceptance (cumulative, as vLLM reports): " + ", ".join(f"{p:.3f}" for p in acc.per_position)
        )
        lines.append(
            "Per-position acceptance (conditional): " + ", ".join(f"{p:.3f}" for p in acc.per_position_conditional)
        )
    if acc.note:
        lines.append(f"Note: {acc.note}")
    return lines


_LABEL_ORIGIN = {"flags": "--mode", "tags": "the endpoint's peagle:mode tag", "url-label": "the --url MODE:K label"}


def server_text(t) -> str:
    """Where the mode and K of a run came from: the server (and which source), or a label."""
    origin = _LABEL_ORIGIN.get(t.mode_source or "", t.mode_source or "unknown")
    if t.server is not None and t.server.known and "server" in (t.mode_source, t.k_source):
        label = f"; labelled {t.label_mode}" + (f" K={t.label_k}" if t.label_k else "") if t.label_mode else ""
        unchecked = ""
        if t.mode_source not in ("server", None):  # the mode is the label's: say so once
            unchecked = f"; mode {t.mode} from {origin} only, not shown by the server"
            label = f"; labelled K={t.label_k}" if t.label_k not in (None, t.k) else ""
        return f"read from {t.server.source_text()}{unchecked}{label}"
    return f"from {origin}, not checked against the server"


def price_text(price) -> str:
    """A results file's price in one line; files from before pricing.py carry only usd_per_hour and source."""
    if price.usd_per_hour is None:
        return price.describe()
    if price.detail is None:
        return f"${price.usd_per_hour:.2f}/h ({price.source})"
    return price.describe()


def markdown_summary(result: BenchResult) -> str:
    t, s = result.target, result.settings
    out = [f"# peagle bench: {result.label()}", ""]
    out.append(f"- target: {t.kind} `{t.name}`" + (f", inference component `{t.inference_component}`"
                                                    if t.inference_component else "")
               + (f", model {t.model}" if t.model else ""))
    if t.mode or t.k:
        out.append(f"- speculative decoding: {result.label()} ({server_text(t)})")
    if t.label_disagrees:
        out.append(f"- label contradicted: {t.label_disagrees}")
    if t.instance_type:
        out.append(f"- instance: {t.instance_count or 1} x {t.instance_type}"
                   + (f" ({t.instance_pool})" if t.instance_pool else ""))
    if result.price is not None:
        out.append(f"- price: {price_text(result.price)}")
    if result.cold_start is not None:
        out.append(f"- cold start of inference component `{result.cold_start.inference_component}`: "
                   f"{result.cold_start.describe()}; before the first level, in no figure below")
    bound = f"{s.duration_s:g} s per level" if s.duration_s else f"{s.num_prompts} prompts per level"
    if s.duration_s and s.num_prompts:
        bound = f"{s.duration_s:g} s or {s.num_prompts} prompts per level"
    warm = "one warm-up request per in-flight slot" if s.warmup is None else f"{s.warmup} warm-up requests per level"
    out.append(
        f"- dataset: {s.dataset} ({s.num_prompts_in_dataset} prompts, {s.dataset_source}); max_tokens"
        f" {s.max_tokens}, temperature {s.temperature:g}; {warm}; {bound}"
    )
    out.append(
        f"- run: {result.started_at:%Y-%m-%d %H:%M:%S} to {result.finished_at:%H:%M:%S} UTC,"
        f" {result.tool} {result.tool_version}, schema {result.schema_version}"
    )
    if not result.complete:
        out.append(f"- INCOMPLETE: {result.stopped}")
    out += ["", *_md_table(LEVEL_HEADERS, [level_rows(lv) for lv in result.levels]), ""]
    if result.acceptance is not None:
        out += acceptance_lines(result.acceptance) + [""]
    if result.request_acceptance is not None:
        out += result.request_acceptance.lines() + [""]
    out.append(
        "Latencies in milliseconds. TTFT: time to the first output token (content, reasoning or tool call);"
        " TTFC: to the first content token; ITL: gap between streamed chunks (per chunk, as vllm bench serve);"
        " TPOT: (E2E - TTFT) / (output tokens - 1) per request (per token); tok/chunk: output tokens per chunk"
        " (> 1 under speculative decoding); held: mean requests in flight / concurrency; client: SATURATED when"
        " the load generator, not the target, was the limit (a whole core used, or its event loop never idle);"
        " host busy when other processes made it wait for a CPU while it still kept up; no verdict when the window"
        " was too short to give one."
    )
    return "\n".join(out) + "\n"


def render_result(console: Console, result: BenchResult, files: list[str]) -> None:
    """Two tables that fit 80 columns: throughput and cost, then latencies."""
    from rich.table import Table

    rows = [level_rows(lv) for lv in result.levels]
    title = f"peagle bench: {result.label()} ({result.settings.dataset})"
    t = result.target
    if t.mode or t.k:  # where the title's mode and K came from: the server, or only a label
        console.print(f"speculative decoding: {result.label()} ({server_text(t)})", markup=False, soft_wrap=True,
                      highlight=False)
    groups = ((title, [0, 1, 2, 3, 15, 11, 12]), ("latency, ms (mean / p99)", [0, 4, 5, 13, 6, 7, 14, 8, 9, 10]))
    for caption, idx in groups:
        table = Table(title=caption, title_justify="left")
        for i in idx:
            table.add_column(
                LEVEL_HEADERS[i].replace(" ms", ""), justify="left" if i == 12 else "right", overflow="fold"
            )
        for r in rows:
            table.add_row(*[r[i] for i in idx])
        console.print(table)
    if not result.complete:
        console.print(f"INCOMPLETE: {result.stopped}", markup=False)
    if result.target.instance_pool:  # instance pools: the pool that served this run, which the price is for
        t = result.target
        console.print(f"instance: {t.instance_count or 1} x {t.instance_type} ({t.instance_pool})", markup=False,
                      soft_wrap=True)
    if result.price is not None:
        console.print(f"price: {price_text(result.price)}", markup=False, soft_wrap=True)
    if result.cold_start is not None:
        console.print(f"cold start of inference component {result.cold_start.inference_component}: "
                      f"{result.cold_start.describe()}; before the first level, in no figure above",
                      markup=False, soft_wrap=True, highlight=False)
    if result.acceptance is not None:
        for line in acceptance_lines(result.acceptance):
            console.print(line, markup=False)
    if result.request_acceptance is not None:
        for line in result.request_acceptance.lines():
            console.print(line, markup=False, soft_wrap=True, highlight=False)
    for f in files:
        console.print(f"wrote {f}", markup=False)


def compare_markdown(tables: list[CompareTable]) -> str:
    out: list[str] = []
    for t in tables:
        out += [f"## {t.title}", "", f"source: {t.source}", ""]
        if t.warnings or t.notes:
            out += [*(f"> warning: {w}" for w in t.warnings), *(f"> {n}" for n in t.notes), ""]
        rows = [[str(r.concurrency)] + [_f(r.otps.get(c), 0) for c in t.columns] for r in t.rows]
        out += ["Output tokens/s", "", *_md_table(["concurrency", *t.columns], rows), ""]
        spd_cols = [c for c in t.columns if c != "off"]
        if "off" in t.columns and spd_cols:
            rows = [[str(r.concurrency)] + [_ratio(r.speedup_vs_off.get(c)) for c in spd_cols] for r in t.rows]
            out += ["Speed-up over off", "", *_md_table(["concurrency", *spd_cols], rows), ""]
        versus = list(t.rows[0].peagle_vs_eagle3) if t.rows else []
        if any(r.peagle_vs_eagle3.get(k) is not None for r in t.rows for k in versus):
            rows = [[str(r.concurrency)] + [_ratio(r.peagle_vs_eagle3.get(k)) for k in versus] for r in t.rows]
            out += ["P-EAGLE over EAGLE-3", "", *_md_table(["concurrency", *versus], rows), ""]
        if t.runs:
            out += ["Side by side", "", *_md_table(SIDE_BY_SIDE, side_by_side_rows(t)), ""]
    return "\n".join(out)


SIDE_BY_SIDE = ["conc.", "run", "output tok/s", "TPOT p50 ms", "E2E p50 ms", "mean acc. length", "$ / M tokens",
                "vLLM, runner"]


def side_by_side_rows(t: CompareTable) -> list[list[str]]:
    """The modes in one table: throughput, latency, acceptance and cost of each run, and what it ran on."""
    return [[str(r.concurrency), r.run, _f(r.output_tokens_per_s, 0), _f(r.tpot_ms_p50), _f(r.e2e_ms_p50, 0),
             _f(r.mean_acceptance_length, 2), _f(r.usd_per_million_output_tokens, 2), r.vllm] for r in t.runs]


def _ratio(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}x"


def _short(column: str) -> str:
    """Two-line headers keep a 7-column table within 80 characters."""
    return column.replace("p-eagle ", "P-EAGLE\n").replace("eagle3 ", "EAGLE-3\n")


def render_compare(console: Console, tables: list[CompareTable]) -> None:
    """Per data set: output tokens/s, speed-up over off, and P-EAGLE over EAGLE-3 (three small tables)."""
    from rich.table import Table

    def small(title: str, headers: list[str], rows: list[list[str]]) -> None:
        table = Table(title=title, title_justify="left")
        table.add_column("conc.", justify="right")
        for h in headers:
            table.add_column(_short(h), justify="right")
        for r in rows:
            table.add_row(*r)
        console.print(table)

    for t in tables:
        console.print(f"[bold]{t.title}[/bold]  (source: {t.source})")
        for line in [*(f"warning: {w}" for w in t.warnings), *t.notes]:
            console.print(line, markup=False)
        small(
            "output tokens/s",
            t.columns,
            [[str(r.concurrency)] + [_f(r.otps.get(c), 0) for c in t.columns] for r in t.rows],
        )
        spd_cols = [c for c in t.columns if c != "off"]
        if "off" in t.columns and spd_cols:
            small(
                "speed-up over off",
                spd_cols,
                [[str(r.concurrency)] + [_ratio(r.speedup_vs_off.get(c)) for c in spd_cols] for r in t.rows],
            )
        versus = list(t.rows[0].peagle_vs_eagle3) if t.rows else []
        if any(r.peagle_vs_eagle3.get(k) is not None for r in t.rows for k in versus):
            small(
                "P-EAGLE over EAGLE-3",
                versus,
                [[str(r.concurrency)] + [_ratio(r.peagle_vs_eagle3.get(k)) for k in versus] for r in t.rows],
            )
        if t.runs:
            from ..output import print_table

            print_table(console, SIDE_BY_SIDE, side_by_side_rows(t), title="side by side",
                        justify=["right", "left", "right", "right", "right", "right", "right", "left"])


def render_advice(console: Console, advice: Advice) -> None:
    from rich.table import Table

    table = Table(title=f"K advisor ({advice.mode})")
    for h in ("K", "tokens/step", "step cost", "est. speed-up", ""):
        table.add_column(h, justify="right")
    for e in advice.estimates:
        mark = "recommended" if e.k == advice.recommended_k else ("extrapolated" if e.extrapolated else "")
        table.add_row(str(e.k), f"{e.expected_tokens_per_step:.2f}", f"{e.step_cost:.2f}", f"{e.speedup:.2f}x", mark)
    console.print(table)
    for line in advice.explanation:
        console.print(line)
