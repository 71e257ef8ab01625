"""PNG chart of output tokens/s against concurrency, one line per mode/K (matplotlib, Agg, imported lazily)."""

from __future__ import annotations

from pathlib import Path

from .compare import CompareTable


def plot_tables(tables: list[CompareTable], path: Path) -> Path | None:
    """One panel per table. Returns None when matplotlib is not installed (pip install 'peagle-deploy[bench]')."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    if not tables:
        return None
    fig, axes = plt.subplots(1, len(tables), figsize=(6.5 * len(tables), 4.5), squeeze=False)
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
        ax.set_xlabel("concurrency (requests in flight)")
        ax.set_ylabel("output tokens/s")
        ax.set_title(table.title)
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize="small")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
