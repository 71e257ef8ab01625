"""The sweep's report in the published table's layout, from the runs it measured.

Output tokens/s per concurrency for each (mode, K); best P-EAGLE / best EAGLE-3 and best P-EAGLE /
baseline per concurrency; acceptance per configuration; $ per million output tokens; the advisor's
K and mode from the MEASURED runs; JSON, Markdown and a PNG chart (with the published figures beside
them, as `peagle bench compare --published aws-blog` shows them). Tables, ratios, advice and the chart
come from bench/compare, bench/advisor, bench/report and bench/plot.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, Field

from ..bench.advisor import Advice
from ..bench.agreement import BEYOND_NOISE, GreedyAgreement
from ..bench.compare import CompareTable
from ..bench.results import BenchResult
from .state import SweepState


class ConfigRow(BaseModel):
    label: str
    mode: str
    k: int | None
    status: str
    target: str | None
    price_per_hour_usd: float | None
    spent_usd: float
    output_tokens_per_s: dict[int, float] = Field(default_factory=dict, description="concurrency -> tok/s")
    usd_per_million_output_tokens: dict[int, float | None] = Field(default_factory=dict)
    mean_acceptance_length: float | None = None
    acceptance_rate: float | None = None
    per_position_acceptance: list[float] = Field(default_factory=list, description="cumulative, as vLLM logs")
    output_vs_off: GreedyAgreement | None = Field(None, description="greedy outputs against off's, token by token")
    output_note: str | None = Field(None, description="why output_vs_off is missing")
    result_file: str | None = None
    server: str | None = Field(None, description="what the server showed it runs (mode, K), when it showed it")
    label_disagrees: str | None = Field(None, description="the label against the server (--trust-labels)")


class LevelRatios(BaseModel):
    concurrency: int
    best_peagle: str | None
    best_eagle3: str | None
    best_dflash: str | None = None
    best_peagle_vs_best_eagle3: float | None
    best_peagle_vs_baseline: float | None
    fastest: str | None


class Recommendation(BaseModel):
    mode: str | None = Field(description="the mode measured faster at more levels (None: not both measured)")
    k: int | None = Field(description="the advisor's K from the measured acceptance of that mode")
    measured_fastest: dict[int, str | None] = Field(description="concurrency -> fastest configuration measured")
    reasoning: list[str]
    advice: Advice | None = None
    ran_on: str | None = Field(None, description="the vLLM version and runner the recommended mode ran on (its "
                                                 "server's start-up log)")


class LayoutReport(BaseModel):
    """Which layout ran and, for the component layout, what the classic one would have cost."""

    hosting: str = Field(description="endpoint: one endpoint per configuration; component: one endpoint, each "
                                     "configuration an inference component of it")
    description: str
    endpoint: str | None = Field(None, description="component: the one endpoint")
    instance_type: str | None = None
    batches: list[list[str]] = Field(default_factory=list)
    spent_on_endpoint_usd: float | None = Field(None, description="component: the one endpoint's instance-hours x "
                                                                  "its price")
    classic_estimated_usd: float | None = Field(None, description="component: the classic layout's estimate (the "
                                                                  "plan's figures), for the same configurations")
    classic_estimated_s: float | None = None
    classic_instance_type: str | None = None
    usd_per_million_basis: str | None = Field(None, description="component: the price the $ per million output "
                                                                "tokens are computed at")


class SweepReport(BaseModel):
    sweep_id: str
    model: str
    status: str
    stopped_reason: str | None
    budget_usd: float | None
    estimated_usd: float | None = Field(description="None: a price was unknown when the sweep was planned")
    spent_usd: float
    layout: LayoutReport | None = None
    concurrency: list[int]
    configurations: list[ConfigRow]
    ratios: list[LevelRatios]
    recommendation: Recommendation
    tables: list[CompareTable]
    published: list[CompareTable]
    removed: list[str]
    warnings: list[str] = Field(default_factory=list, description="greedy outputs that diverge beyond noise")
    files: list[str] = Field(default_factory=list)


def _usd(value: float | None) -> str:
    return "unknown" if value is None else f"${value:,.2f}"


def _ratio(a: float | None, b: float | None) -> float | None:
    return None if a is None or b is None or b <= 0 else round(a / b, 3)


def build_report(state: SweepState, results: dict[str, BenchResult], base: Path | None = None) -> SweepReport:
    """`base`: the state file's folder, which stored paths (outputs files) are relative to."""
    from ..bench.compare import compare_results, mode_comparison, published_matching, read_published

    rows: list[ConfigRow] = []
    for config in state.request.configurations:
        cs = state.configs[config.label]
        r = results.get(config.label)
        row = ConfigRow(label=config.label, mode=config.mode, k=config.k, status=cs.status, target=cs.endpoint,
                        price_per_hour_usd=cs.price_per_hour_usd, spent_usd=round(cs.spent_usd, 6),
                        result_file=cs.result_file)
        if r is not None:
            if r.target.server is not None and r.target.server.known:
                row.server = r.target.server.describe()
            row.label_disagrees = r.target.label_disagrees
            row.output_tokens_per_s = {lv.concurrency: lv.output_tokens_per_s for lv in r.levels}
            row.usd_per_million_output_tokens = {lv.concurrency: lv.usd_per_million_output_tokens for lv in r.levels}
            if r.acceptance is not None:
                row.mean_acceptance_length = r.acceptance.mean_acceptance_length
                row.acceptance_rate = r.acceptance.acceptance_rate
                row.per_position_acceptance = list(r.acceptance.per_position)
        rows.append(row)
    layout = _layout(state, rows)
    warnings = _output_agreement(state, rows, base or Path.cwd())
    tables = compare_results(list(results.values())) if results else []
    ratios = [_level_ratios(rows, c) for c in state.request.concurrency]
    comparison = next((m for m in (mode_comparison(t) for t in tables) if m is not None), None)
    return SweepReport(
        sweep_id=state.request.sweep_id, model=state.request.model, status=state.status,
        stopped_reason=state.stopped_reason, budget_usd=state.request.budget_usd,
        estimated_usd=state.plan.estimated_usd,
        spent_usd=round(sum(r.spent_usd for r in rows) + (layout.spent_on_endpoint_usd or 0), 6), layout=layout,
        concurrency=state.request.concurrency, configurations=rows, ratios=ratios,
        recommendation=_recommend(rows, ratios, comparison), tables=tables,
        published=published_matching(tables, read_published())[0] if tables else read_published(),
        removed=list(state.removed), warnings=warnings,
    )


def _layout(state: SweepState, rows: list[ConfigRow]) -> LayoutReport:
    """The layout that ran. With components, $ per million output tokens are at the classic instance's price (what
    serving one configuration costs; the bench's own files price the whole shared instance it ran on)."""
    plan = state.plan
    if plan.layout is None:
        what = "servers given with --url" if plan.target == "urls" else "one endpoint per configuration (classic)"
        return LayoutReport(hosting="endpoint", description=what)
    layout, classic = plan.layout, plan.classic
    description = (f"inference components: one endpoint {layout.endpoint} on {layout.instance_type} ({layout.gpus} "
                   f"GPUs), each configuration a component of {layout.gpus_per_configuration} GPU(s), measured one at "
                   f"a time; {layout.choice}")
    price = classic.price_per_hour_usd if classic is not None else None
    basis = None
    if price is not None and classic is not None:
        basis = (f"at ${price:,.2f}/h, the hosting price of {classic.instance_type} (where a deploy of one "
                 f"configuration runs); measured on {layout.gpus_per_configuration} of the {layout.gpus} GPUs of "
                 f"{layout.instance_type}")
        for row in rows:
            row.usd_per_million_output_tokens = {c: round(price * 1e6 / (tps * 3600), 4) if tps > 0 else None
                                                 for c, tps in row.output_tokens_per_s.items()}
    host = state.host
    return LayoutReport(
        hosting="component", description=description, endpoint=layout.endpoint, instance_type=layout.instance_type,
        batches=layout.batches, spent_on_endpoint_usd=round(host.spent_usd, 6) if host is not None else 0.0,
        classic_estimated_usd=classic.estimated_usd if classic is not None and price is not None else None,
        classic_estimated_s=classic.estimated_s if classic is not None else None,
        classic_instance_type=classic.instance_type if classic is not None else None, usd_per_million_basis=basis)


def layout_lines(report: SweepReport) -> list[str]:
    """The layout in a line or two, for the Markdown and the terminal."""
    layout = report.layout
    if layout is None:
        return []
    lines = [f"layout: {layout.description}"]
    if layout.hosting == "component":
        from ..inputs import format_duration

        cost = ("an unknown price" if layout.classic_estimated_usd is None
                else f"about ${layout.classic_estimated_usd:,.2f}")
        took = f", {format_duration(layout.classic_estimated_s)}" if layout.classic_estimated_s else ""
        lines.append(f"the classic layout (one endpoint per configuration on {layout.classic_instance_type}) would "
                     f"have cost {cost}{took} (estimated, as the plan estimates; this sweep: estimated "
                     f"{_usd(report.estimated_usd)}, spent ${report.spent_usd:,.4f})")
    return lines


def _output_agreement(state: SweepState, rows: list[ConfigRow], base: Path) -> list[str]:
    """Each speculative configuration's greedy outputs against off's; the loud lines for those beyond noise."""
    from ..bench.agreement import OutputSample, greedy_agreement, loud_warnings

    def sample(label: str) -> OutputSample | None:
        path = state.configs[label].outputs_file
        try:
            return OutputSample.model_validate_json((base / path).read_text(encoding="utf-8")) if path else None
        except (OSError, ValueError):
            return None

    off_label = next((r.label for r in rows if r.mode == "off"), None)
    off = sample(off_label) if off_label else None
    warnings: list[str] = []
    for row in rows:
        if row.mode == "off":
            continue
        mine = sample(row.label)
        if off is None or mine is None:
            row.output_note = state.configs[row.label].outputs_note or (
                "off was not measured" if off_label is None else "no outputs kept for off" if off is None
                else "no outputs kept")
            continue
        row.output_vs_off = greedy_agreement(off, mine)
        warnings += loud_warnings(row.output_vs_off, [], f"{row.label} against off")
    return warnings


def _agreement_cell(row: ConfigRow) -> str:
    a = row.output_vs_off
    if a is None:
        return "-"
    flag = " BEYOND NOISE" if a.verdict == BEYOND_NOISE else ""
    return (f"{a.identical_share:.0%} identical, prefix {a.mean_common_prefix:.1f}/{a.mean_baseline_length:.1f} "
            f"{a.unit}{flag}")


def _level_ratios(rows: list[ConfigRow], conc: int) -> LevelRatios:
    def best(mode: str) -> ConfigRow | None:
        measured = [r for r in rows if r.mode == mode and conc in r.output_tokens_per_s]
        return max(measured, key=lambda r: r.output_tokens_per_s[conc], default=None)

    p, e, off = best("p-eagle"), best("eagle3"), best("off")
    every = [r for r in rows if conc in r.output_tokens_per_s]
    fastest = max(every, key=lambda r: r.output_tokens_per_s[conc], default=None)

    def otps(r: ConfigRow | None) -> float | None:
        return None if r is None else r.output_tokens_per_s[conc]

    d = best("dflash")
    return LevelRatios(concurrency=conc, best_peagle=p.label if p else None, best_eagle3=e.label if e else None,
                       best_dflash=d.label if d else None,
                       best_peagle_vs_best_eagle3=_ratio(otps(p), otps(e)),
                       best_peagle_vs_baseline=_ratio(otps(p), otps(off)),
                       fastest=fastest.label if fastest else None)


def _recommend(rows: list[ConfigRow], ratios: list[LevelRatios], comparison) -> Recommendation:
    from ..bench.advisor import advise
    from ..errors import UsageError

    fastest = {r.concurrency: r.fastest for r in ratios}
    reasoning: list[str] = []
    measured_lines = [f"c={c}: {label}" for c, label in fastest.items() if label]
    if measured_lines:
        reasoning.append("Fastest configuration measured per concurrency: " + "; ".join(measured_lines) + ".")
    mode = comparison.winner if comparison is not None and comparison.levels else None
    for_mode = mode or next((m for m in ("p-eagle", "eagle3", "dflash") if any(r.mode == m for r in rows)), None)
    with_rates = [r for r in rows if r.mode == for_mode and r.per_position_acceptance]
    advice = None
    k = None
    if for_mode and with_rates:
        deepest = max(with_rates, key=lambda r: (len(r.per_position_acceptance), r.k or 0))
        try:
            advice = advise(deepest.per_position_acceptance, mode=for_mode, measured=comparison
                            if comparison is not None and comparison.levels else None)
            k = advice.recommended_k
            served = f", where the server ran {deepest.server}" if deepest.label_disagrees else ""
            reasoning.append(f"Acceptance measured at {deepest.label}{served} (mean acceptance length "
                             f"{deepest.mean_acceptance_length or 0:.2f}) feeds the K advisor:")
            reasoning += advice.explanation
        except UsageError as exc:
            reasoning.append(f"no K advice: {exc.one_line()}")
    elif for_mode:
        reasoning.append("No acceptance was measured (no SpecDecoding metrics), so the K advisor was not run; "
                         "the measured fastest configurations above are the recommendation.")
    if comparison is None:
        reasoning.append("Fewer than two speculative modes (P-EAGLE, EAGLE-3, DFlash) were measured: the mode is not "
                         "compared.")
    ran_on = comparison.runtimes.get(mode) if comparison is not None and mode else None
    return Recommendation(mode=mode, k=k, measured_fastest=fastest, reasoning=reasoning, advice=advice,
                          ran_on=ran_on)


def _f(value: float | None, digits: int = 0) -> str:
    return "-" if value is None else f"{value:,.{digits}f}"


def _x(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}x"


def _md_table(headers: list[str], rows: list[list[str]]) -> list[str]:
    return ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers), *("| " + " | ".join(r) + " |" for r in rows)]


def markdown(report: SweepReport) -> str:
    from ..bench.report import compare_markdown

    labels = [r.label for r in report.configurations]
    by_label = {r.label: r for r in report.configurations}
    out = [f"# peagle sweep {report.sweep_id}: {report.model}", ""]
    budget = "no budget" if report.budget_usd is None else f"budget ${report.budget_usd:,.2f}"
    out.append(f"- status: {report.status}" + (f" ({report.stopped_reason})" if report.stopped_reason else ""))
    out.append(f"- spent about ${report.spent_usd:,.4f} of {budget} (estimated {_usd(report.estimated_usd)})")
    out += [f"- {line}" for line in layout_lines(report)]
    if report.removed:
        out.append(f"- torn down: {', '.join(report.removed)}")
    out += ["", "## Output tokens/s", ""]
    out += _md_table(["concurrency", *labels],
                     [[str(c)] + [_f(by_label[lb].output_tokens_per_s.get(c)) for lb in labels]
                      for c in report.concurrency])
    out += ["", "## Speed-ups", ""]
    out += _md_table(["concurrency", "best P-EAGLE", "best EAGLE-3", "best DFlash", "best P-EAGLE / best EAGLE-3",
                      "best P-EAGLE / baseline", "fastest"],
                     [[str(r.concurrency), r.best_peagle or "-", r.best_eagle3 or "-", r.best_dflash or "-",
                       _x(r.best_peagle_vs_best_eagle3), _x(r.best_peagle_vs_baseline), r.fastest or "-"]
                      for r in report.ratios])
    out += ["", "## Acceptance", ""]
    out += _md_table(["configuration", "mean acceptance length", "acceptance rate", "per position (cumulative)",
                      "greedy output vs off"],
                     [[r.label, _f(r.mean_acceptance_length, 2),
                       "-" if r.acceptance_rate is None else f"{r.acceptance_rate:.1%}",
                       ", ".join(f"{p:.2f}" for p in r.per_position_acceptance) or "-", _agreement_cell(r)]
                      for r in report.configurations if r.mode != "off"])
    if report.warnings:
        out += ["", *(f"**{w}**" for w in report.warnings)]
    out += ["", "## $ per million output tokens", ""]
    if report.layout is not None and report.layout.usd_per_million_basis:
        out += [report.layout.usd_per_million_basis[0].upper() + report.layout.usd_per_million_basis[1:] + ".", ""]
    out += _md_table(["concurrency", *labels],
                     [[str(c)] + [_f(by_label[lb].usd_per_million_output_tokens.get(c), 2) for lb in labels]
                      for c in report.concurrency])
    contradicted = [r.label_disagrees for r in report.configurations if r.label_disagrees]
    if contradicted:
        out += ["", "## Labels the servers contradict (measured with --trust-labels)", "",
                *(f"- {line}" for line in contradicted)]
    rec = report.recommendation
    out += ["", "## Recommendation", ""]
    line = recommendation_line(rec)
    out.append(line[0].upper() + line[1:] + ".")
    out += ["", *(f"- {line}" for line in rec.reasoning), ""]
    out += ["## Beside the published figures", "", compare_markdown(report.tables + report.published)]
    return "\n".join(out) + "\n"


REPORT_FILES = ("sweep.json", "sweep.md", "sweep.png")


def write_report(report: SweepReport, out_dir: Path) -> list[str]:
    from ..bench.plot import plot_tables

    from ..safe_write import write_text

    files = [out_dir / name for name in REPORT_FILES[:2]]
    png = plot_tables(report.tables + report.published, out_dir / REPORT_FILES[2]) if report.tables else None
    report.files = [str(f) for f in files] + ([str(png)] if png else [])
    write_text(files[1], markdown(report))  # each whole or not at all, never through a link (safe_write)
    write_text(files[0], report.model_dump_json(indent=2) + "\n")
    return report.files


def render(console, report: SweepReport) -> None:
    """The terminal view: the throughput table, the ratios, the recommendation, the files. Tables go through
    output.print_table: one line per row, never a wrapped title or header (a pipe gets them whole)."""
    from ..output import print_table

    labels = [r.label for r in report.configurations]
    by_label = {r.label: r for r in report.configurations}
    print_table(console, ["conc.", *labels],
                [[str(c), *[_f(by_label[lb].output_tokens_per_s.get(c)) for lb in labels]] for c in report.concurrency],
                title=f"sweep {report.sweep_id} of {report.model}: output tokens/s", justify=["right"] * (len(labels) + 1))
    print_table(console, ["conc.", "best P-EAGLE / best EAGLE-3", "best P-EAGLE / baseline", "fastest"],
                [[str(r.concurrency), _x(r.best_peagle_vs_best_eagle3), _x(r.best_peagle_vs_baseline), r.fastest or "-"]
                 for r in report.ratios], title="speed-ups", justify=["right"] * 3 + ["left"])
    from ..bench.report import SIDE_BY_SIDE, side_by_side_rows

    for table in report.tables:  # every mode in one table: throughput, latency, acceptance, cost, vLLM and runner
        if table.runs:
            print_table(console, SIDE_BY_SIDE, side_by_side_rows(table), title=f"side by side: {table.title}",
                        justify=["right", "left", "right", "right", "right", "right", "right", "left"])
    for r in report.configurations:
        if r.label_disagrees:
            console.print(f"warning: {r.label_disagrees}", markup=False, soft_wrap=True)
        if r.mode != "off" and (r.output_vs_off is not None or r.output_note):
            what = _agreement_cell(r) if r.output_vs_off is not None else r.output_note
            console.print(f"greedy output of {r.label} vs off: {what}", markup=False, soft_wrap=True)
    console.print(recommendation_line(report.recommendation), markup=False, soft_wrap=True)
    for line in report.recommendation.reasoning:
        console.print(f"  {line}", markup=False, soft_wrap=True)
    for line in layout_lines(report):
        console.print(line, markup=False, soft_wrap=True)
    budget = "no budget" if report.budget_usd is None else f"${report.budget_usd:,.2f}"
    console.print(f"spent about ${report.spent_usd:,.4f} of {budget}; {report.status}", markup=False)
    for f in report.files:
        console.print(f"wrote {f}", markup=False, soft_wrap=True)


def recommendation_line(rec: Recommendation) -> str:
    """'recommended: p-eagle at K=7 (mode and K measured)', never 'mode -, K 3'."""
    for_mode = rec.advice.mode if rec.advice is not None else None
    if rec.mode and rec.k:
        where = f", on {rec.ran_on}" if rec.ran_on else ""
        return (f"recommended: {rec.mode} at K={rec.k} (the mode measured faster{where}; K from its measured "
                "acceptance)")
    if rec.k and for_mode:
        return (f"recommended: K={rec.k} for {for_mode} (from its measured acceptance; the modes were not both "
                "measured, so no mode is recommended)")
    if rec.mode:
        return f"recommended: {rec.mode} (measured faster; no acceptance measured, so no K advice)"
    fastest = {label for label in rec.measured_fastest.values() if label}
    if fastest:
        return f"recommended: the measured fastest ({', '.join(sorted(fastest))}); no mode or K advice"
    return "no recommendation: nothing was measured"
