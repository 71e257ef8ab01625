"""`peagle datasets`: the published benchmark sets (HumanEval, MT-Bench) in the local cache, and fetching them."""

from __future__ import annotations

from typing import Annotated

import typer

from .common import JsonOpt, run

datasets_app = typer.Typer(
    no_args_is_help=True,
    rich_markup_mode="rich",
    help="The published benchmark sets 'peagle bench --dataset' reads: humaneval, mt-bench (fetched on first use).",
)


def register(app: typer.Typer) -> None:
    app.add_typer(datasets_app, name="datasets")


def _rows(names: list[str]) -> list[dict]:
    from ..bench.benchmark_sets import SETS, cached_path, is_cached

    return [{"name": spec.name, "title": spec.title, "package": spec.requirement, "licence": spec.licence,
             "records": spec.records, "turns": spec.turns, "cached": is_cached(spec), "path": str(cached_path(spec))}
            for spec in (SETS[n] for n in names)]


@datasets_app.command("list")
def datasets_list(json_output: JsonOpt = False) -> None:
    """List the published sets, where they come from and whether they are in the cache."""

    def body(out):
        from ..bench.benchmark_sets import SETS, cache_dir

        rows = _rows(list(SETS))

        def human(console):
            from ..output import print_table

            print_table(console, ("name", "records", "turns", "from package", "licence", "cached"),
                        [[r["name"], str(r["records"]), str(r["turns"]), r["package"], r["licence"],
                          "yes" if r["cached"] else "no: peagle datasets fetch"] for r in rows],
                        title="published benchmark sets")
            console.print(f"cache: {cache_dir()}", soft_wrap=True, markup=False, highlight=False)

        out.result({"cache": str(cache_dir()), "datasets": rows}, human)

    run(json_output, body)


@datasets_app.command("fetch")
def datasets_fetch(
    names: Annotated[list[str] | None, typer.Argument(help="humaneval and/or mt-bench (default: both).")] = None,
    force: Annotated[bool, typer.Option("--force", help="Download again even when the cache holds the file.")] = False,
    json_output: JsonOpt = False,
) -> None:
    """Download the sets' wheels with pip (no dependencies, the index pip is configured with) into the cache."""

    def body(out):
        from ..bench.benchmark_sets import SETS, fetch
        from ..errors import UsageError

        chosen = list(dict.fromkeys(names or SETS))
        unknown = [n for n in chosen if n not in SETS]
        if unknown:
            raise UsageError(f"no published set named {', '.join(map(repr, unknown))}",
                             f"use {' or '.join(SETS)} (other prompts: pass a JSONL file to peagle bench --dataset)")
        for name in chosen:
            with out.status(f"fetching {name}") as show:  # a spinner on a terminal; pip may take minutes
                fetch(SETS[name], force=force, progress=show)
        rows = _rows(chosen)

        def human(console):
            for r in rows:
                console.print(f"{r['name']}: {r['records']} records ({r['turns']} turns) from {r['package']} "
                              f"({r['licence']}), cached at {r['path']}", soft_wrap=True, markup=False,
                              highlight=False)

        out.result({"datasets": rows}, human)

    run(json_output, body)
