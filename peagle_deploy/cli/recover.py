"""`peagle recover [NAME | --all]`: finish whatever an interrupted update, cleanup, deploy or sweep left."""

from __future__ import annotations

from typing import Annotated

import typer

from .common import JsonOpt, ProfileOpt, RegionsOpt, run


def register(app: typer.Typer) -> None:
    app.command("recover")(recover)


def recover(
    name: Annotated[str | None, typer.Argument(help="The endpoint to finish (also after it was deleted).")] = None,
    all_: Annotated[bool, typer.Option("--all", help="Every peagle endpoint, and every unused peagle config and "
                                                     "model of the region.")] = False,
    timeout: Annotated[int, typer.Option(help="Seconds to wait for an endpoint to settle where something of "
                                              "peagle's is left to finish on it.")] = 3600,
    force: Annotated[bool, typer.Option("--force", help="Also take over work another peagle holds a fresh lease on "
                                                       "(says whose); without it, that work is skipped until its "
                                                       "lease expires.")] = False,
    region: RegionsOpt = None,
    profile: ProfileOpt = None,
    json_output: JsonOpt = False,
) -> None:
    """Finish an interrupted deploy, update, cleanup or sweep teardown: complete or revert, restore scaling, tidy up.

    Waits for SageMaker to settle where something of peagle's is left to finish, completes or reverts an update,
    finishes a cleanup, removes what an abandoned sweep left, completes a --hosting component (--scale-to-zero)
    deploy cut short (its component from the deploy's plan, then the scaling it asked for; or, where that cannot
    be done, removes the whole stack), registers the intended autoscaling and removes peagle-made configs and models
    that nothing uses. Work whose lease is fresh (another peagle is on it) is skipped
    with one line, unless --force. With --all, what it left alone is named, one line each (another's work, an
    endpoint SageMaker is still on, an endpoint peagle did not make that is not InService), and the exit is 0 unless
    something of peagle's is left unfinished. Safe to run again; never touches anything peagle did not make or
    anything an endpoint serves or is updating to."""

    def body(out):
        from ..errors import Interrupted, UsageError

        if bool(name) == all_:
            raise UsageError("recover needs exactly one of NAME or --all", "see peagle recover --help")
        if name:
            from ..inputs import validate_name

            validate_name(name)
        if timeout <= 0:
            raise UsageError(f"--timeout must be positive, got {timeout}", "pass --timeout 3600")
        from ..aws import AwsSession, resolve_region
        from ..lifecycle.recover import recover as run_recover
        from ..lifecycle.region_search import nothing_line, search_regions
        from ..lifecycle.regions import parse_regions
        from ..lifecycle.signals import Signalled, SignalGuard
        from ..lifecycle.wait import progress_text

        listed = parse_regions(region, resolve_region(None))
        again = f"peagle recover {name or '--all'} --region {','.join(listed)}"
        try:
            with SignalGuard(f"stopping: run '{again}' again to finish"), out.status("recovering") as show:
                def progress(status, elapsed, doing):
                    show(progress_text(status, elapsed, doing))

                # each listed region, then each one a --region A,B deploy found there tried (region_search.py)
                searched = search_regions(listed, lambda there: run_recover(
                    AwsSession(there, profile), name, all_=all_, timeout_s=timeout, on_progress=progress,
                    on_note=out.note, force=force), lambda found: found.regions_named)
        except Signalled as exc:
            raise Interrupted(f"interrupted by {exc.name}", f"run '{again}' again to finish") from None
        several = len(searched) > 1

        def human(console):
            for there, report in searched:
                if several and _nothing(report):
                    console.print(nothing_line(there, name), markup=False, soft_wrap=True, highlight=False)
                    continue
                _render(console, report, f"{there}: " if several else "")

        error = next((report.error for _, report in searched if report.error is not None), None)
        if several:
            document = {"regions": [{"region": there, "recovered": report} for there, report in searched]}
        else:
            document = {"recovered": searched[0][1]}
        out.result({**document, "ok": error is None}, human)
        if error is not None:
            out.error(error.one_line())
            raise typer.Exit(int(error.exit_code))

    run(json_output, body)


def _nothing(report) -> bool:
    """Nothing of peagle's in the report's region: nothing found, done or left alone."""
    return (not report.endpoints and not report.removed and not report.left_alone and not report.others
            and report.error is None)


def _render(console, report, where: str) -> None:
    def say(text: str) -> None:
        console.print(f"{where}{text}", markup=False, soft_wrap=True, highlight=False)

    for endpoint in report.endpoints:
        if endpoint.skipped:
            say(f"{endpoint.name}: {endpoint.skipped}")
            continue
        if endpoint.unfinished:
            say(f"{endpoint.name}: not finished: {endpoint.unfinished}")
            continue
        for action in endpoint.actions:
            say(f"{endpoint.name}: {action}")
        if endpoint.serves is not None:
            say(f"{endpoint.name}: {endpoint.status}, serves {endpoint.serves.endpoint_config} "
                f"({endpoint.serves.label()})")
    for line in report.skipped + report.taken_over + report.others:
        say(line)
    for o in report.removed:
        reason = f" ({o.reason})" if o.reason else ""
        say(f"{o.result} {o.kind.replace('_', ' ')} {o.name}{reason}")
    if report.nothing_of:
        say(f"{report.nothing_of}: nothing left to finish")
    elif not report.did_something and not report.left_alone:
        say("nothing left to finish")
