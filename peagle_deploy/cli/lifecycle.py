"""`peagle status` and `peagle cleanup`: what peagle created, and tearing it down (only that)."""

from __future__ import annotations

from typing import Annotated

import typer

from .common import JsonOpt, ProfileOpt, RegionOpt, YesOpt, run


def register(app: typer.Typer) -> None:
    app.command("status")(status)
    app.command("cleanup")(cleanup)


def _duration(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    sign, seconds = ("-" if seconds < 0 else ""), abs(int(seconds))
    hours, rest = divmod(seconds, 3600)
    return f"{sign}{hours}h{rest // 60:02d}m" if hours else f"{sign}{rest // 60}m{rest % 60:02d}s"


def status(
    name: Annotated[str | None, typer.Argument(help="One endpoint (default: every peagle endpoint).")] = None,
    region: RegionOpt = None,
    profile: ProfileOpt = None,
    json_output: JsonOpt = False,
) -> None:
    """peagle-managed endpoints: status, model, mode, K, instances, age, expiry, cost so far."""

    def body(out):
        from ..aws import AwsSession
        from ..lifecycle import status as list_status

        rows = list_status(AwsSession(region, profile), name)
        for row in rows:
            for warning in (row.vllm.warnings if row.vllm else []):
                out.warn(f"{row.name}: {warning}")

        def human(console):
            from rich.table import Table

            if not rows:
                console.print("no peagle endpoints in this region")
                return
            table = Table(title="peagle endpoints")
            for col in ("endpoint", "status", "model", "mode", "K", "instances", "age", "expires in", "cost so far"):
                table.add_column(col, overflow="fold")
            for r in rows:
                cost = "-" if r.cost_so_far_usd is None else f"${r.cost_so_far_usd:,.2f} (est.)"
                table.add_row(r.name, r.status + (f": {r.failure_reason}" if r.failure_reason else ""),
                              r.model or "-", r.mode or "-", str(r.k or "-"),
                              f"{r.instance_count or '?'} x {r.instance_type or '?'}", _duration(r.age_s),
                              _duration(r.expires_in_s), cost)
            console.print(table)
            for r in rows:
                if r.vllm is not None:
                    console.print(f"{r.name}: {r.vllm.summary()}", markup=False, soft_wrap=True)

        out.result({"endpoints": rows}, human)

    run(json_output, body)


def cleanup(
    name: Annotated[str | None, typer.Argument(help="The endpoint to remove with its config and model.")] = None,
    all_: Annotated[bool, typer.Option("--all", help="Every peagle endpoint (and leftover configs/models).")] = False,
    expired: Annotated[bool, typer.Option(help="Every peagle endpoint whose --ttl has passed.")] = False,
    wait: Annotated[bool, typer.Option(help="Wait until the endpoint is deleted.")] = True,
    region: RegionOpt = None,
    profile: ProfileOpt = None,
    yes: YesOpt = False,
    json_output: JsonOpt = False,
) -> None:
    """Delete endpoint, endpoint config and model that peagle created. Never touches anything else."""

    def body(out):
        from ..aws import AwsSession
        from ..errors import UsageError
        from ..lifecycle import cleanup as run_cleanup

        if sum((bool(name), all_, expired)) != 1:
            raise UsageError("cleanup needs exactly one of NAME, --all or --expired", "see peagle cleanup --help")
        what = name or ("every peagle endpoint" if all_ else "every expired peagle endpoint")
        out.confirm(f"Delete {what} (endpoint, endpoint config, model)?", yes=yes)
        report = run_cleanup(AwsSession(region, profile), name, all_=all_, expired=expired, wait=wait)

        def human(console):
            if not report.outcomes:
                console.print("nothing to clean up")
            for o in report.outcomes:
                style = {"deleted": "green", "already gone": "dim", "left": "yellow"}[o.result]
                reason = f" ({o.reason})" if o.reason else ""
                console.print(f"[{style}]{o.result}[/{style}] {o.kind.replace('_', ' ')} {o.name}{reason}")

        out.result({"deleted": report.deleted, "left": report.left, "outcomes": report.outcomes}, human)

    run(json_output, body)
