"""`peagle logs NAME`: the endpoint's container output from CloudWatch Logs, every instance merged in time order."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Annotated

import typer

from .. import interruptible
from .common import ComponentOpt, JsonOpt, ProfileOpt, RegionOpt, run

DEFAULT_SINCE = "1h"
FAILURE_STYLE = "bold red"


def register(app: typer.Typer) -> None:
    app.command("logs")(logs)


def logs(
    name: Annotated[str, typer.Argument(help="SageMaker endpoint name.")],
    follow: Annotated[bool, typer.Option("--follow", "-f", help="Keep printing new lines until Ctrl-C.")] = False,
    since: Annotated[str, typer.Option("--since", help="How far back to start, e.g. 90s, 10m, 2h, 1d.")]
    = DEFAULT_SINCE,
    grep: Annotated[str | None, typer.Option(
        "--grep", help="Only lines containing this exact, case-sensitive text (a CloudWatch filter pattern).")] = None,
    component: ComponentOpt = None,
    region: RegionOpt = None,
    profile: ProfileOpt = None,
    json_output: JsonOpt = False,
) -> None:
    """Print the container's log lines of endpoint NAME (CloudWatch Logs group /aws/sagemaker/Endpoints/NAME).

    For an endpoint that hosts an inference component, the component's group
    /aws/sagemaker/InferenceComponents/COMPONENT.

    Every instance's stream is merged in time order; the line that says why the container failed is
    highlighted (and named on stderr). --follow polls for new lines every 2 s until Ctrl-C (exit 130).
    """
    run(json_output, lambda out: show_logs(out, name, follow=follow, since=since, grep=grep, region=region,
                                           profile=profile, component=component))


def show_logs(out, name: str, *, follow: bool, since: str, grep: str | None, region: str | None,
              profile: str | None, sleep: Callable[[float], None] = interruptible.sleep,
              now: Callable[[], float] = time.time, component: str | None = None) -> None:
    """The command's body; `sleep` and `now` are injectable so tests never wait."""
    from ..inputs import parse_duration
    from ..errors import UsageError
    from ..inputs import validate_name
    from ..lifecycle import logs as endpoint_logs
    from ..log_groups import endpoint_log_group

    validate_name(name)
    span = parse_duration(since, flag="--since")
    pattern = endpoint_logs.grep_pattern(grep)
    if follow and out.json_mode:
        raise UsageError("--follow prints lines as they arrive; --json prints one document at the end",
                         "drop one of them (peagle logs NAME --since 10m --json reads a window as JSON)")
    from ..aws import AwsSession

    from ..lifecycle.component_target import address_component
    from ..runtime.target_ref import TargetRef

    session = AwsSession(region, profile)
    # an endpoint that hosts an inference component: its copies write to the component's own group
    ref = address_component(TargetRef(kind="sagemaker", name=name), session, component, note=out.note, serving=False)
    client = session.client("logs")
    start_ms = int((now() - span.total_seconds()) * 1000)
    group = ref.log_group or endpoint_log_group(name)
    if follow:
        out.info(f"following {group} (Ctrl-C stops)")
        for batch in endpoint_logs.follow_logs(client, name, start_ms=start_ms, pattern=pattern, sleep=sleep,
                                               group=group):
            for event in batch:
                _print_event(out, event)
        return
    events = endpoint_logs.read_logs(client, name, start_ms=start_ms, pattern=pattern, sleep=sleep, group=group)
    failure = next((e for e in events if e.failure), None)

    def human(console) -> None:
        for event in events:
            _print_event(out, event)
        if not events:
            out.note(f"no lines in {group} in the last {since}" + (f" containing {grep!r}" if grep else "")
                     + " (CloudWatch lags a few seconds behind the container; widen --since)")

    out.result({"log_group": group, "since": since, "grep": grep, "events": [e.as_json() for e in events],
                "failure_line": failure.as_json() if failure else None}, human)


def _print_event(out, event) -> None:
    from rich.text import Text

    stamp = event.time.strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]
    line = Text(f"{stamp} {event.stream} ")
    line.append(event.message, style=FAILURE_STYLE if event.failure else None)
    out.console.print(line, soft_wrap=True, highlight=False)
    if event.failure:
        out.note(f"the container's failure line ({stamp} {event.stream}): {event.message}")
