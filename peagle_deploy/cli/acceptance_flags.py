"""`--acceptance-alarm/--no-acceptance-alarm` and `--acceptance-floor` (deploy and update): the options and what
they become (`acceptance_alarm.AcceptanceRequest`). The floor is a number, or bench/sweep results to take it from:
a result file, or a folder searched for them (`peagle bench --out DIR`, a sweep's OUT/runs)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

AlarmOpt = Annotated[bool, typer.Option(
    "--acceptance-alarm/--no-acceptance-alarm",
    help="A CloudWatch alarm on vLLM's mean acceptance length, from its SpecDecoding log lines through a metric "
         "filter (on by default; docs/monitoring.md). update names it as a rollback alarm.")]
FloorOpt = Annotated[str | None, typer.Option(
    "--acceptance-floor",
    help="The alarm's floor: a mean acceptance length (e.g. 1.5), or bench/sweep results (a bench-*.json file or a "
         "folder of them) whose newest run of this mode and K sets it to half the gain measured. Default: the "
         "break-even length for the K (docs/monitoring.md).")]


def acceptance_request(enabled: bool, floor: str | None, *, note=lambda _line: None, waits: bool = True):
    """The AcceptanceRequest the options ask for (a refused value: one line, exit 2). `waits`: deploy --no-wait
    returns before the endpoint is InService, when the alarm would be made: none then, said in the plan."""
    from ..acceptance_alarm import AcceptanceRequest, parse_floor_number
    from ..errors import UsageError

    if not waits and enabled:
        if floor is not None:
            raise UsageError("--acceptance-floor needs the deploy to wait: the alarm is made once the endpoint is "
                             "InService", "drop --no-wait, or --acceptance-floor")
        return AcceptanceRequest(enabled=False, off_because="--no-wait: it is made once the endpoint is InService")
    if floor is None:
        return AcceptanceRequest(enabled=enabled)
    if not enabled:
        raise UsageError("--acceptance-floor has no effect with --no-acceptance-alarm",
                         "drop one of them")
    number = parse_floor_number(floor)
    if number is not None:
        return AcceptanceRequest(floor=number)
    return AcceptanceRequest(measured=measured_in(Path(floor), note=note), measured_from=floor)


def measured_in(path: Path, *, note=lambda _line: None) -> list:
    """Every mean acceptance length the bench results at `path` measured (a file, or a folder's bench-*.json)."""
    from ..acceptance_alarm import MeasuredAcceptance
    from ..bench.results import read_results
    from ..errors import UsageError

    hint = "pass a bench-*.json file 'peagle bench --out DIR' wrote, a folder of them, or a number (e.g. 1.5)"
    if path.is_dir():
        files = sorted(path.rglob("bench-*.json"))
        if not files:
            raise UsageError(f"--acceptance-floor {path}: no bench-*.json result in that folder", hint)
    elif path.exists():
        files = [path]
    else:
        raise UsageError(f"--acceptance-floor {path} is neither a number nor a file or folder", hint)
    found = []
    for result in read_results(files, skipped=note):
        acceptance = result.acceptance
        if acceptance is None or acceptance.mean_acceptance_length is None:
            continue
        found.append(MeasuredAcceptance(
            mean_acceptance_length=acceptance.mean_acceptance_length, mode=result.target.mode, k=result.target.k,
            model=result.target.model, measured_at=result.started_at.isoformat(),
            source=f"{_named(result, files)} ({acceptance.source})"))
    return found


def _named(result, files: list[Path]) -> str:
    """The file a result came from, by its start time (read_results keeps their order but skips others)."""
    stamp = result.started_at.strftime("%Y%m%dT%H%M%S")
    named = [f for f in files if stamp in f.name]
    return str(named[0]) if len(named) == 1 else f"the bench run of {result.started_at.isoformat()}"
