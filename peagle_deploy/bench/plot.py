"""PNG chart of output tokens/s against concurrency, one line per mode/K (matplotlib, imported lazily).

Drawn on a bare `matplotlib.figure.Figure`, written by the Agg canvas savefig picks for PNG, never through
pyplot: its figure registry is process-wide state, and the sweep's worker threads each draw their own chart.

One panel per table: measured tables (one per model, instances and data set) and, when given, the
published ones, each titled with its model, hardware and data set. The y axis starts at 0 so the gaps
between lines are not exaggerated.
"""

from __future__ import annotations

from pathlib import Path

from .compare import CompareTable


def panel_title(table: CompareTable) -> str:
    """'measured: gpt-oss-20b' over 'ml.g7e.2xlarge, humaneval' (two lines keep a panel narrow)."""
    if table.model is None and table.instance is None and table.dataset is None:
        return table.title
    first = f"{table.kind}: {table.model or 'model unknown'}"
    hardware = table.instance or ("instance unknown" if table.kind == "measured" else "hardware unknown")
    return f"{first}\n{hardware}, {table.dataset or 'data set unknown'}"


def plot_tables(tables: list[CompareTable], path: Path) -> Path | None:
    """One panel per table. Returns None when matplotlib is not installed (pip install 'peagle-deploy[bench]')."""
    try:
        import matplotlib.figure  # noqa: F401
    except ImportError:
        return None
    if not tables:
        return None
    from ..safe_write import write_with

    fig = build_figure(tables)
    # into a temporary beside `path`, renamed over it: never through a link planted at the name
    return write_with(path, lambda handle: fig.savefig(handle, format="png", dpi=110))


def build_figure(tables: list[CompareTable]):
    """The matplotlib Figure for `tables` (matplotlib must be importable)."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(6.5 * len(tables), 4.8))
    axes = fig.subplots(1, len(tables), squeeze=False)
    for ax, table in zip(axes[0], tables, strict=True):
        for column in table.columns:
            xs = [r.concurrency for r in table.rows if r.otps.get(column) is not None]
            ys = [r.otps[column] for r in table.rows if r.otps.get(column) is not None]
            style = "--" if column.startswith("eagle3") else (":" if column == "off" else "-")
            ax.plot(xs, ys, style, marker="o", label=column)
        ax.set_xscale("log", base=2)
        ticks = sorted({r.concurrency for r in table.rows})
        ax.set_xticks(ticks, [str(t) for t in ticks])
        ax.minorticks_off()
        ax.set_ylim(bottom=0)
        ax.set_xlabel("concurrency (requests in flight)")
        ax.set_ylabel("output tokens/s")
        ax.set_title(panel_title(table), fontsize="medium")
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize="small")
    fig.tight_layout()
    return fig
