"""Side-by-side tables of runs (P-EAGLE vs EAGLE-3 vs off, by K), like the published ones.

For each data set: rows are concurrency levels, columns are runs labelled "mode K=k"; then the
speed-up of each column over `off` at the same concurrency, and P-EAGLE over EAGLE-3 at the same K
and best against best. The published figures (templates/published/aws_blog_otps.csv, or --published
FILE) come out as tables of the same shape, for reference.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from ..errors import UsageError
from ..resources import templates_dir
from .results import BenchResult

MODE_ORDER = {"p-eagle": 0, "eagle3": 1, "off": 2}
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


class CompareTable(BaseModel):
    model_config = ConfigDict(extra="forbid")

    title: str
    source: str
    columns: list[str]
    rows: list[CompareRow]


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


def build_table(points: Iterable[Point], title: str, source: str) -> CompareTable:
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
        best_p = max((v for n, v in otps.items() if n.startswith("p-eagle") and v is not None), default=None)
        best_e = max((v for n, v in otps.items() if n.startswith("eagle3") and v is not None), default=None)
        versus["best"] = _ratio(best_p, best_e)
        rows.append(CompareRow(concurrency=conc, otps=otps, speedup_vs_off=speed, peagle_vs_eagle3=versus))
    return CompareTable(title=title, source=source, columns=ordered, rows=rows)


def points_from_results(results: Iterable[BenchResult]) -> list[Point]:
    points = []
    for r in results:
        for level in r.levels:
            points.append(
                Point(
                    benchmark=r.settings.dataset,
                    concurrency=level.concurrency,
                    mode=r.target.mode,
                    k=r.target.k,
                    otps=level.output_tokens_per_s,
                )
            )
    return points


def compare_results(results: list[BenchResult]) -> list[CompareTable]:
    """One table per data set. Two runs with the same label and concurrency: the later one wins."""
    by_dataset: dict[str, list[BenchResult]] = {}
    for r in sorted(results, key=lambda r: r.started_at):
        by_dataset.setdefault(r.settings.dataset, []).append(r)
    tables = []
    for dataset, runs in by_dataset.items():
        names = ", ".join(sorted({r.target.name for r in runs}))
        tables.append(build_table(points_from_results(runs), f"measured: {dataset}", names))
    return tables


def read_published(path: Path | None = None) -> list[CompareTable]:
    """The published OTPS figures as tables, one per benchmark. CSV columns: benchmark,concurrency,mode,k,otps."""
    source = path or templates_dir() / "published" / PUBLISHED_DEFAULT
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
    note = _source_note(text) or str(source)
    return [build_table(points, f"published: {bench}", note) for bench, points in grouped.items()]


def _source_note(text: str) -> str | None:
    for line in text.splitlines():
        if line.startswith("# source:"):
            return line.removeprefix("# source:").strip()
    return None
