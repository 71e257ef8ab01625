"""`peagle recover [NAME | --all]`: finish whatever an interrupted update, cleanup, deploy or sweep left."""

from __future__ import annotations

from typing import Annotated

import typer

from .common import JsonOpt, ProfileOpt, RegionOpt, run


def register(app: typer.Typer) -> None:
    app.command("recover")(recover)


def recover(
    name: Annotated[str | None, typer.Argument(help="The endpoint to finish (also after it was deleted).")] = None,
    all_: Annotated[bool, typer.Option("--all", help="Every peagle endpoint, and every unused peagle config and "
                                                     "model of the region.")] = False,
    timeout: Annotated[int, typer.Option(help="Seconds to wait for an Updating endpoint to settle.")] = 3600,
    force: Annotated[bool, typer.Option("--force", help="Also take over work another peagle holds a fresh lease on "
                                                       "(says whose); without it, that work is skipped until its "
                                                       "lease expires.")] = False,
    region: RegionOpt = None,
    profile: ProfileOpt = None,
    json_output: JsonOpt = False,
) -> None:
    """Finish an interrupted update, cleanup or sweep teardown: complete or revert, restore autoscaling, tidy up.

    Waits for SageMaker to settle, completes or reverts an update, finishes a cleanup, removes what an abandoned
    sweep left, registers the intended autoscaling and removes peagle-made configs and models that nothing uses.
    Work whose lease is fresh (another peagle is on it) is skipped with one line, unless --force. Safe to run
    again; never touches anything peagle did not make or anything an endpoint serves or is updating to."""

    def body(out):
        from ..errors import Interrupted, UsageError

        if bool(name) == all_:
            raise UsageError("recover needs exactly one of NAME or --all", "see peagle recover --help")
        if name:
            from ..inputs import validate_name

            validate_name(name)
        if timeout <= 0:
            raise UsageError(f"--timeout must be positive, got {timeout}", "pass --timeout 3600")
        from ..aws import AwsSession
        from ..lifecycle.recover import recover as run_recover
        from ..lifecycle.signals import Signalled, SignalGuard

        session = AwsSession(region, profile)
        again = f"peagle recover {name or '--all'} --region {session.region}"
        try:
            with SignalGuard(f"stopping: run '{again}' again to finish"), out.status("recovering") as show:
                def progress(status, elapsed, doing):
                    show(f"{status} ({int(elapsed)}s) - {doing}")

                report = run_recover(session, name, all_=all_, timeout_s=timeout, on_progress=progress,
                                     on_note=out.note, force=force)
        except Signalled as exc:
            raise Interrupted(f"interrupted by {exc.name}", f"run '{again}' again to finish") from None

        def human(console):
            for endpoint in report.endpoints:
                if endpoint.skipped:
                    console.print(f"{endpoint.name}: {endpoint.skipped}", markup=False, soft_wrap=True,
                                  highlight=False)
                    continue
                for action in endpoint.actions:
                    console.print(f"{endpoint.name}: {action}", markup=False, soft_wrap=True, highlight=False)
                if endpoint.serves is not None:
                    console.print(f"{endpoint.name}: {endpoint.status}, serves {endpoint.serves.endpoint_config} "
                                  f"({endpoint.serves.label()})", markup=False, soft_wrap=True, highlight=False)
            for line in report.skipped + report.taken_over:
                console.print(line, markup=False, soft_wrap=True, highlight=False)
            for o in report.removed:
                reason = f" ({o.reason})" if o.reason else ""
                console.print(f"{o.result} {o.kind.replace('_', ' ')} {o.name}{reason}", markup=False,
                              soft_wrap=True, highlight=False)
            if report.nothing_of:
                console.print(f"{report.nothing_of}: nothing left to finish", markup=False, soft_wrap=True)
            elif not report.did_something and not report.left_alone:
                console.print("nothing left to finish", markup=False)

        out.result({"recovered": report, "ok": report.error is None}, human)
        if report.error is not None:
            out.error(report.error.one_line())
            raise typer.Exit(int(report.error.exit_code))

    run(json_output, body)
