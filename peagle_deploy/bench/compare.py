"""Side-by-side tables of runs (P-EAGLE vs EAGLE-3 vs DFlash vs off, by K), like the published ones.

Runs are compared only like with like: one table per (model, instances, data set). Rows are concurrency
levels, columns are runs labelled "mode K=k"; then the speed-up of each column over `off` at the same
concurrency, and P-EAGLE over EAGLE-3 at the same K and best against best. No speed-up ever crosses two
tables (no cross-model, cross-instance or cross-dataset ratios); runs whose model or instance is unknown,
or whose settings differ inside one table, are flagged in the table's `warnings`.

Which mode is faster is what was MEASURED (`ModeComparison`: the fastest speculative mode at each level, best K
against best K), not assumed: on some vLLM versions parallel drafting falls back to an older model runner and
EAGLE-3 beats P-EAGLE (a real H100 run on vLLM 0.25.1 did), and DFlash runs on whichever runner its vLLM gives
the model (docs/vllm-versions.md). `side_by_side` puts every run in one table: throughput, latency, acceptance,
$ per million output tokens, and the vLLM version and runner it ran on.
The published figures (templates/published/aws_blog_otps.csv, or --published FILE) come out as tables of
the same shape, for reference, labelled with their own model and hardware.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from ..errors import UsageError
from ..resources import templates_dir
from .results import BenchResult

MODE_ORDER = {"p-eagle": 0, "eagle3": 1, "dflash": 2, "off": 3}
SPECULATIVE = ("p-eagle", "eagle3", "dflash")  # the modes a comparison ranks, MODE_ORDER's order
PUBLISHED_DEFAULT = "aws_blog_otps.csv"


class Point(BaseModel):
    model_config = ConfigDict(extra="forbid")

    benchmark: str
    concurrency: int
    mode: str | None
    k: int | None
    otps: float


class CompareRow(BaseModel):
    model_config = ConfigDict(extra="forbid")

    concurrency: int
    otps: dict[str, float | None]
    speedup_vs_off: dict[str, float | None]
    peagle_vs_eagle3: dict[str, float | None]  # keys "K=3", ..., "best"
    faster_mode: str | None = Field(None, description="the fastest speculative mode's best-K run as measured; "
                                                      "None unless two modes were measured at this level")


class RunRow(BaseModel):
    """One run at one concurrency, with everything the modes are compared by (`side_by_side`)."""

    model_config = ConfigDict(extra="forbid")

    run: str = Field(description="its label: mode and K")
    mode: str | None
    k: int | None
    concurrency: int
    output_tokens_per_s: float
    tpot_ms_p50: float | None = None
    e2e_ms_p50: float | None = None
    mean_acceptance_length: float | None = Field(None, description="the run's, from vLLM's own counters or log")
    usd_per_million_output_tokens: float | None = None
    vllm: str = Field("vLLM version and runner not logged", description="the vLLM version and model runner its "
                      "server's start-up log names")


class CompareTable(BaseModel):
    model_config = ConfigDict(extra="forbid")

    title: str
    source: str
    columns: list[str]
    rows: list[CompareRow]
    kind: str = "measured"  # or "published"
    model: str | None = None
    instance: str | None = None  # "ml.g7e.2xlarge", "2 x ml.g7e.12xlarge"
    dataset: str | None = None
    warnings: list[str] = Field(default_factory=list, description="why this table may not be like with like")
    runs: list[RunRow] = Field(default_factory=list, description="every measured run side by side (not for "
                                                                 "published tables)")
    notes: list[str] = Field(default_factory=list, description="what the measurements say (mode comparison)")


NAMES = {"p-eagle": "P-EAGLE", "eagle3": "EAGLE-3", "dflash": "DFlash"}


class ModeComparison(BaseModel):
    """The speculative modes (P-EAGLE, EAGLE-3, DFlash) as measured in one like-with-like table: at each concurrency
    the fastest mode's best K against every other mode's best K."""

    model_config = ConfigDict(extra="forbid")

    table: str
    modes: list[str] = Field(default_factory=list, description="the speculative modes the table measured")
    levels: list[int] = Field(description="concurrency levels where two or more modes were measured")
    wins: dict[str, list[int]] = Field(default_factory=dict, description="mode -> levels where it was fastest")
    best_k: dict[str, dict[int, int | None]] = Field(default_factory=dict,
                                                     description="mode -> concurrency -> its fastest K measured")
    peagle_wins: list[int]
    eagle3_wins: list[int]
    best_peagle_k: dict[int, int | None] = Field(description="concurrency -> fastest P-EAGLE K measured")
    best_eagle3_k: dict[int, int | None] = Field(description="concurrency -> fastest EAGLE-3 K measured")
    ratio: dict[int, float] = Field(description="concurrency -> best P-EAGLE / best EAGLE-3 output tokens/s")
    runtimes: dict[str, str] = Field(default_factory=dict, description="mode -> the vLLM version and model runner "
                                                                       "its runs' start-up logs named")

    @property
    def winner(self) -> str | None:
        """The mode fastest at more levels than any other (None on a tie or with nothing to compare)."""
        counts = sorted(((len(levels), mode) for mode, levels in self.wins.items() if levels), reverse=True)
        if not counts or (len(counts) > 1 and counts[0][0] == counts[1][0]):
            return None
        return counts[0][1]

    def summary(self, kind: str = "measured") -> str:
        """One line; `kind` says where the figures come from: measured here, or published (aws-blog)."""

        def levels(cs: list[int]) -> str:
            return ", ".join(f"c={c}" for c in cs)

        parts = [f"{NAMES[mode]} faster at {levels(self.wins[mode])}" for mode in SPECULATIVE if self.wins.get(mode)]
        return f"{'published' if kind == 'published' else 'measured'} (best K of each mode): " + "; ".join(parts)


def label(mode: str | None, k: int | None, fallback: str = "?") -> str:
    if mode is None:
        return fallback
    if mode == "off" or not k:
        return mode
    return f"{mode} K={k}"


def _column_key(column: tuple[str | None, int | None, str]) -> tuple:
    mode, k, name = column
    return (MODE_ORDER.get(mode or "", 3), k or 0, name)


def _ratio(a: float | None, b: float | None) -> float | None:
    if a is None or b is None or b <= 0:
        return None
    return round(a / b, 3)


def _best(otps: dict[str, float | None], mode: str) -> tuple[float | None, int | None]:
    """The fastest column of one mode ("p-eagle K=7", or "p-eagle" when K was unknown) and its K."""
    best: tuple[float | None, int | None] = (None, None)
    for name, value in otps.items():
        of_mode = name == mode or name.startswith(mode + " K=")
        if of_mode and value is not None and (best[0] is None or value > best[0]):
            best = (value, int(name.rsplit("=", 1)[1]) if "=" in name else None)
    return best


def build_table(points: Iterable[Point], title: str, source: str, **labels: object) -> CompareTable:
    cells: dict[tuple[int, str], float] = {}
    columns: dict[str, tuple[str | None, int | None, str]] = {}
    for p in points:
        name = label(p.mode, p.k, p.benchmark)
        columns[name] = (p.mode, p.k, name)
        cells[(p.concurrency, name)] = p.otps
    ordered = [c[2] for c in sorted(columns.values(), key=_column_key)]
    ks = sorted({k for (m, k, _) in columns.values() if m in ("p-eagle", "eagle3") and k})
    rows = []
    for conc in sorted({c for c, _ in cells}):
        otps = {name: cells.get((conc, name)) for name in ordered}
        off = otps.get("off")
        speed = {name: _ratio(v, off) for name, v in otps.items() if name != "off"}
        versus: dict[str, float | None] = {}
        for k in ks:
            versus[f"K={k}"] = _ratio(otps.get(f"p-eagle K={k}"), otps.get(f"eagle3 K={k}"))
        (best_p, _), (best_e, _) = _best(otps, "p-eagle"), _best(otps, "eagle3")
        versus["best"] = _ratio(best_p, best_e)
        rows.append(CompareRow(concurrency=conc, otps=otps, speedup_vs_off=speed, peagle_vs_eagle3=versus,
                               faster_mode=_fastest(otps)))
    table = CompareTable(title=title, source=source, columns=ordered, rows=rows, **labels)
    comparison = mode_comparison(table)
    if comparison is not None and comparison.levels:
        table.notes.append(comparison.summary(table.kind))
        if comparison.eagle3_wins and "p-eagle" in comparison.modes:
            table.notes.append("EAGLE-3 was faster here: deploy --mode eagle3 for those loads. Some vLLM versions "
                               "run parallel drafting on an older model runner (see `peagle status` / docs/"
                               "vllm-versions.md); measure both modes on the version you deploy.")
        if comparison.wins.get("dflash"):
            table.notes.append("DFlash was the fastest at some loads: deploy --mode dflash (its drafter staged with "
                               "peagle drafter stage) for those; docs/vllm-versions.md says when DFlash or P-EAGLE "
                               "wins and why.")
    return table


def _fastest(otps: dict[str, float | None]) -> str | None:
    """The speculative mode whose best K is fastest here; None unless two modes were measured."""
    bests = [(value, -MODE_ORDER[mode], mode) for mode in SPECULATIVE
             if (value := _best(otps, mode)[0]) is not None]
    return max(bests)[2] if len(bests) >= 2 else None


def mode_comparison(table: CompareTable) -> ModeComparison | None:
    """The speculative modes as measured in this table; None when it has fewer than two of them."""
    modes = [mode for mode in SPECULATIVE if any(c == mode or c.startswith(mode + " K=") for c in table.columns)]
    if len(modes) < 2:
        return None
    levels: list[int] = []
    wins: dict[str, list[int]] = {mode: [] for mode in modes}
    best_k: dict[str, dict[int, int | None]] = {mode: {} for mode in modes}
    ratio: dict[int, float] = {}
    for row in table.rows:
        found = {mode: _best(row.otps, mode) for mode in modes}
        measured = {mode: best for mode, best in found.items() if best[0] is not None}
        if len(measured) < 2:
            continue
        levels.append(row.concurrency)
        fastest = _fastest(row.otps)
        if fastest is not None:
            wins[fastest].append(row.concurrency)
        for mode, (_, k) in measured.items():
            best_k[mode][row.concurrency] = k
        if "p-eagle" in measured and "eagle3" in measured:
            ratio[row.concurrency] = _ratio(measured["p-eagle"][0], measured["eagle3"][0]) or 0.0
    runtimes = {mode: "; ".join(dict.fromkeys(r.vllm for r in table.runs if r.mode == mode))
                for mode in modes if any(r.mode == mode for r in table.runs)}
    return ModeComparison(table=table.title, modes=modes, levels=levels, wins=wins, best_k=best_k,
                          peagle_wins=wins.get("p-eagle", []), eagle3_wins=wins.get("eagle3", []),
                          best_peagle_k=best_k.get("p-eagle", {}), best_eagle3_k=best_k.get("eagle3", {}),
                          ratio=ratio, runtimes=runtimes)


def points_from_results(results: Iterable[BenchResult]) -> list[Point]:
    points = []
    for r in results:
        for level in r.levels:
            points.append(
                Point(
                    benchmark=r.settings.dataset,
                    concurrency=level.concurrency,
                    mode=r.target.mode,
                    k=measured_k(r),
                    otps=level.output_tokens_per_s,
                )
            )
    return points


def _instance(r: BenchResult) -> str | None:
    if not r.target.instance_type:
        return None
    count = r.target.instance_count or 1
    return r.target.instance_type if count == 1 else f"{count} x {r.target.instance_type}"


def _group_key(r: BenchResult) -> tuple[str | None, str | None, str]:
    return (r.target.model, _instance(r), r.settings.dataset)


def _group_warnings(runs: list[BenchResult], model: str | None, instance: str | None) -> list[str]:
    warnings = []
    names = ", ".join(sorted({r.target.name for r in runs}))
    if model is None:
        warnings.append(f"model unknown for {names}: these runs are compared only with each other, and peagle "
                        "cannot check they served the same model")
    if instance is None:
        warnings.append(f"instance type unknown for {names}: speed-ups assume the same hardware")
    for field in ("max_tokens", "temperature"):
        values = sorted({getattr(r.settings, field) for r in runs})
        if len(values) > 1:
            warnings.append(f"runs in this table differ in {field} ({', '.join(map(str, values))}): "
                            "their speed-ups may not compare like with like")
    if any(r.target.mode is None for r in runs):
        warnings.append("some runs have no mode (pass --mode/--k to peagle bench for URL targets): they appear "
                        "under their target name and take no part in P-EAGLE vs EAGLE-3")
    warnings.extend(w for r in runs if (w := label_check(r)))
    seen: dict[tuple[str, int], int] = {}
    for r in runs:
        for level in r.levels:
            key = (r.label(), level.concurrency)
            seen[key] = seen.get(key, 0) + 1
    repeated = sorted({name for (name, _), n in seen.items() if n > 1})
    if repeated:
        warnings.append(f"{', '.join(repeated)} measured more than once at the same concurrency: "
                        "the latest run is shown")
    return warnings


def measured_k(r: BenchResult) -> int | None:
    """K as the run's own measurements show it: the server's K, else the number of draft positions its
    acceptance counted (results files written before peagle read the server's K), else the label's."""
    acc = r.acceptance
    if r.target.k_source != "server" and acc is not None and acc.k and r.target.mode not in (None, "off"):
        return acc.k
    return r.target.k


def label_check(r: BenchResult) -> str | None:
    """A run whose label its own server contradicted, or whose acceptance counted another number of draft
    positions than its label's K."""
    if r.target.label_disagrees:
        return f"{r.target.name}: {r.target.label_disagrees}; shown as {r.label()}"
    k = measured_k(r)
    if r.target.k and k != r.target.k:
        return (f"{r.target.name}: labelled {r.label()} ({r.target.mode_source or 'label'}) but its acceptance "
                f"({r.acceptance.source}) counted {k} draft positions: shown as {r.target.mode} K={k}")
    return None


def compare_results(results: list[BenchResult]) -> list[CompareTable]:
    """One table per (model, instances, data set); two runs with the same label and concurrency: the later wins."""
    groups: dict[tuple[str | None, str | None, str], list[BenchResult]] = {}
    for r in sorted(results, key=lambda r: r.started_at):
        groups.setdefault(_group_key(r), []).append(r)
    tables = []
    for (model, instance, dataset), runs in groups.items():
        title = f"measured: {model or 'model unknown'} on {instance or 'instance unknown'}, {dataset}"
        names = ", ".join(sorted({r.target.name for r in runs}))
        table = build_table(points_from_results(runs), title, names, model=model, instance=instance,
                            dataset=dataset)
        table.warnings.extend(_group_warnings(runs, model, instance))
        table.runs = side_by_side(runs)
        tables.append(table)
    return tables


def side_by_side(results: list[BenchResult]) -> list[RunRow]:
    """Each run at each concurrency (the latest where one was measured twice), in mode and K order: throughput,
    median TPOT and end-to-end latency, mean acceptance length, $ per million output tokens, vLLM and runner."""
    from .server_facts import runtime_text

    rows: dict[tuple[str, int], RunRow] = {}
    for r in sorted(results, key=lambda r: r.started_at):
        acceptance = r.acceptance.mean_acceptance_length if r.acceptance is not None else None
        for level in r.levels:
            rows[(r.label(), level.concurrency)] = RunRow(
                run=label(r.target.mode, measured_k(r), r.target.name), mode=r.target.mode, k=measured_k(r),
                concurrency=level.concurrency, output_tokens_per_s=level.output_tokens_per_s,
                tpot_ms_p50=level.tpot_ms.p50, e2e_ms_p50=level.e2e_ms.p50, mean_acceptance_length=acceptance,
                usd_per_million_output_tokens=level.usd_per_million_output_tokens,
                vllm=runtime_text(r.target.server))
    return sorted(rows.values(), key=lambda row: (row.concurrency, MODE_ORDER.get(row.mode or "", 4), row.k or 0))


def compare_warnings(tables: list[CompareTable]) -> list[str]:
    """Warnings across the measured tables: what was kept apart (each table carries its own warnings)."""
    measured = [t for t in tables if t.kind == "measured"]
    out = []
    for field, what, unknown in (("model", "models", "model unknown"), ("instance", "instance setups",
                                 "instance unknown"), ("dataset", "data sets", "data set unknown")):
        values = sorted({getattr(t, field) or unknown for t in measured})  # a URL's run may name no model
        if len(values) > 1:
            out.append(f"the runs cover {len(values)} {what} ({', '.join(values)}): each gets its own table and "
                       "no speed-up is computed across them")
    return out


def read_published(path: Path | None = None) -> list[CompareTable]:
    """The published OTPS figures as tables, one per benchmark. CSV columns: benchmark,concurrency,mode,k,otps."""
    source = path or templates_dir() / "published" / PUBLISHED_DEFAULT
    if path is not None:
        from ..safe_write import regular_file

        regular_file(path, what="--published", hint="pass aws-blog or a readable CSV file")  # a fifo would block
    try:
        text = Path(source).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"cannot read {source} ({type(exc).__name__})", "pass a readable CSV to --published") from None
    lines = [ln for ln in text.splitlines() if ln.strip() and not ln.lstrip().startswith("#")]
    reader = csv.DictReader(io.StringIO("\n".join(lines)))
    need = {"benchmark", "concurrency", "mode", "k", "otps"}
    if not reader.fieldnames or not need <= set(reader.fieldnames):
        raise UsageError(
            f"{source} needs the columns {', '.join(sorted(need))}",
            "see templates/published/aws_blog_otps.csv for the format",
        )
    grouped: dict[str, list[Point]] = {}
    for number, row in enumerate(reader, start=2):
        try:
            point = Point(
                benchmark=row["benchmark"],
                concurrency=int(row["concurrency"]),
                mode=row["mode"],
                k=int(row["k"] or 0),
                otps=float(row["otps"]),
            )
        except (TypeError, ValueError):
            raise UsageError(
                f"{Path(source).name} row {number} is not benchmark,concurrency,mode,k,otps", "fix that row"
            ) from None
        grouped.setdefault(point.benchmark, []).append(point)
    note = _comment(text, "source") or str(source)
    model, instance = _comment(text, "model"), _comment(text, "instance")
    where = f"{model or 'model unknown'} on {instance or 'hardware unknown'}"
    return [build_table(points, f"published: {where}, {bench}", note, kind="published", model=model,
                        instance=instance, dataset=bench)
            for bench, points in grouped.items()]


def published_matching(measured: list[CompareTable], published: list[CompareTable]) -> tuple[list[CompareTable],
                                                                                               list[str]]:
    """The published tables of the data sets the runs used (a run is set beside published rows of its own
    data set only), and a note for each measured data set that has none."""
    if not measured:
        return published, []
    datasets = {t.dataset for t in measured}
    kept = [t for t in published if t.dataset in datasets]
    available = ", ".join(sorted({str(t.dataset) for t in published})) or "none"
    notes = [f"no published figures for data set {d!r} (published: {available}); run 'peagle bench --dataset "
             f"humaneval' to compare with the published HumanEval rows" for d in sorted(map(str, datasets))
             if not any(t.dataset == d for t in published)]
    return kept, notes


def _comment(text: str, key: str) -> str | None:
    """The value of a `# key: value` comment line of a published CSV."""
    for line in text.splitlines():
        if line.startswith(f"# {key}:"):
            return line.removeprefix(f"# {key}:").strip()
    return None
