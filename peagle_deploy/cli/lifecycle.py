"""`peagle status` and `peagle cleanup`: what peagle created, and tearing it down (only that)."""

from __future__ import annotations

from typing import Annotated

import typer

from .common import JsonOpt, ProfileOpt, RegionOpt, YesOpt, run


def register(app: typer.Typer) -> None:
    app.command("status")(status)
    app.command("cleanup")(cleanup)


def _duration(seconds: float | None) -> str:
    from ..durations import format_duration

    return "-" if seconds is None else format_duration(seconds)


def _expiry(row) -> str:
    """'expired 6m ago', 'in 1h30m', 'never', or 'unreadable tag' (never a negative span)."""
    from ..durations import format_duration

    if row.expires_in_s is not None:
        if row.expires_in_s <= 0:
            return f"expired {format_duration(-row.expires_in_s)} ago"
        return f"in {format_duration(row.expires_in_s)}"
    if any(p.startswith("peagle:expires-at") for p in row.tag_problems):
        return "unreadable tag"
    return "never"


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

        def human(console):
            from rich.table import Table

            if not rows:
                console.print("no peagle endpoints in this region")
                return
            table = Table(title="peagle endpoints")
            for col in ("endpoint", "status", "model", "mode", "K", "instances", "age", "expires", "cost so far"):
                table.add_column(col, overflow="fold")
            for r in rows:
                cost = "-" if r.cost_so_far_usd is None else f"${r.cost_so_far_usd:,.2f} (est.)"
                table.add_row(r.name, r.status + (f": {r.failure_reason}" if r.failure_reason else ""),
                              r.model or "-", r.mode or "-", str(r.k or "-"),
                              f"{r.instance_count or '?'} x {r.instance_type or '?'}", _duration(r.age_s),
                              _expiry(r), cost)
            console.print(table)

        for r in rows:
            for problem in r.tag_problems:
                out.warn(f"{r.name}: tag {problem}; shown as unknown")
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
        if name:
            from ..inputs import validate_name

            validate_name(name)
        what = name or ("every peagle endpoint" if all_ else "every expired peagle endpoint")
        out.confirm(f"Delete {what} (endpoint, endpoint config, model)?", yes=yes)
        from ..lifecycle.signals import SignalGuard

        # SIGTERM/SIGHUP like Ctrl-C: exit 130 with a message; deletes are idempotent, so running the same
        # cleanup again finishes the job
        with SignalGuard("stopping: run the same peagle cleanup again to finish"):
            report = run_cleanup(AwsSession(region, profile), name, all_=all_, expired=expired, wait=wait)
        for skipped in report.skipped:
            out.warn(f"skipped {skipped.name}: {skipped.reason}")

        def human(console):
            if not report.outcomes:
                console.print("nothing to clean up")
            for o in report.outcomes:
                style = {"deleted": "green", "already gone": "dim", "left": "yellow", "failed": "red"}[o.result]
                reason = f" ({o.reason})" if o.reason else ""
                console.print(f"[{style}]{o.result}[/{style}] {o.kind.replace('_', ' ')} {o.name}{reason}")

        out.result({"deleted": report.deleted, "left": report.left, "skipped": report.skipped,
                    "outcomes": report.outcomes, "ok": report.error is None}, human)
        if report.error is not None:  # some deletes failed: the others were done and are listed above
            import typer as _typer

            out.error(report.error.one_line())
            raise _typer.Exit(int(report.error.exit_code))

    run(json_output, body)
