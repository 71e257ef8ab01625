"""`peagle metrics`: speculative-decoding acceptance of an endpoint (CloudWatch Logs) or a URL (/metrics)."""

from __future__ import annotations

from typing import Annotated

import typer

from .common import ComponentOpt, JsonOpt, ProfileOpt, RegionOpt, run


def register(app: typer.Typer) -> None:
    app.command("metrics")(metrics)


def metrics(
    target: Annotated[str, typer.Argument(help="SageMaker endpoint name (or its OpenAI route URL), or a container / "
                                                "OpenAI server URL.")],
    since: Annotated[
        str | None, typer.Option("--since", help="Endpoint: window length back from --end (e.g. 90s, 15m, 2h). "
                                                 "Default 15m.")
    ] = None,
    start: Annotated[str | None, typer.Option("--start", help="Window start, ISO 8601 (UTC if no offset).")] = None,
    end: Annotated[str | None, typer.Option("--end", help="Window end, ISO 8601. Default: now.")] = None,
    window: Annotated[
        str | None, typer.Option("--window", help="URL: measure the next W (e.g. 30s, 2m) between two scrapes of "
                                                  "/metrics. Default 10s; 0s: totals since the server started.")
    ] = None,
    advise: Annotated[bool, typer.Option("--advise", help="Also run the K advisor on the per-position rates.")] = False,
    component: ComponentOpt = None,
    region: RegionOpt = None,
    profile: ProfileOpt = None,
    json_output: JsonOpt = False,
) -> None:
    """Mean acceptance length, acceptance rate and per-position acceptance over a window.

    For an endpoint: vLLM's 'SpecDecoding metrics' log lines in CloudWatch Logs group /aws/sagemaker/Endpoints/NAME
    over the window (--since, or --start/--end); for an endpoint that hosts an inference component, the component's
    own group /aws/sagemaker/InferenceComponents/COMPONENT. Its OpenAI route URL (.../endpoints/NAME/openai/v1) names
    the same endpoint: the route serves chat completions only, so its metrics come from CloudWatch too.

    For a URL: the vllm:spec_decode_* counters of its /metrics page, scraped at the start and the end of a
    --window, as 'peagle bench' does (the totals since the server started blend all earlier traffic).
    """

    def body(out):
        from ..errors import UsageError
        from ..runtime.target_ref import parse_target

        ref = parse_target(target)
        if ref.is_url and component is not None:
            raise UsageError("--component names an inference component of a SageMaker endpoint; a URL's counters "
                             "are its server's", "drop --component")
        if ref.is_url:
            if start or end or since:
                raise UsageError("--start/--end/--since read CloudWatch Logs of an endpoint; a URL's counters "
                                 "cannot be read back in time", "use --window 60s to measure the next 60 seconds")
            acc, server = _url_window(ref, window or "10s", out)
        else:
            server = None
            if window is not None:
                raise UsageError("--window measures a URL's counters", "for an endpoint use --since or --start/--end")
            from ..aws import AwsSession
            from ..bench.cloudwatch import read_cloudwatch
            from ..bench.window import resolve_window

            from ..lifecycle.component_target import address_component

            begin, stop = resolve_window(start, end, since)
            session = AwsSession(ref.session_region(region), profile)  # the route URL: its region
            ref = address_component(ref, session, component, note=out.note)  # a component writes to its own group
            acc = read_cloudwatch(session.client("logs"), ref.name, begin, stop, group=ref.log_group)
            out.info(f"window: {begin:%Y-%m-%d %H:%M:%S} to {stop:%H:%M:%S} UTC (CloudWatch Logs {ref.log_group})")
        advice = None
        if advise and acc.per_position:
            from ..bench.advisor import advise as run_advisor

            advice = run_advisor(acc.per_position, kind="cumulative")

        def human(console):
            from ..bench.report import acceptance_lines, render_advice

            if server is not None:
                console.print(f"Server: {server.describe()} (read from {server.source_text()})", markup=False)
            for line in acceptance_lines(acc):
                console.print(line, markup=False)
            if advice is not None:
                render_advice(console, advice)

        data = {"acceptance": acc}
        if server is not None:
            data["server"] = server
        if advice is not None:
            data["advice"] = advice
        out.result(data, human)

    run(json_output, body)


def _url_window(ref, window: str, out, sleep=None):
    """Two scrapes `window` apart; 0 s: one scrape, the totals since the server started (said so)."""
    from .. import interruptible
    from datetime import datetime, timedelta, timezone

    from ..bench.prometheus import scrape
    from ..inputs import parse_duration

    seconds = parse_duration(window, flag="--window", minimum=timedelta(0)).total_seconds()  # 0s: totals
    from ..bench.server_facts import from_counters

    url = ref.metrics_url
    first = scrape(url, headers=ref.headers)
    server = from_counters(first, url)  # what it runs: its per-position series (K), or none (off)
    if seconds <= 0:
        acc = first.acceptance(source=f"prometheus:{url}")
        acc.note = ((acc.note + "; ") if acc.note else "") + "totals since the server started (--window 0s)"
        out.info(f"window: since the server started ({url}, one scrape)")
        return acc, server
    began = datetime.now(timezone.utc)
    out.info(f"measuring {url} for {seconds:g}s (two scrapes)")
    (sleep or interruptible.sleep)(seconds)
    acc = scrape(url, headers=ref.headers).minus(first).acceptance(source=f"prometheus:{url}")
    acc.window_start, acc.window_end = began, datetime.now(timezone.utc)
    out.info(f"window: {acc.window_start:%H:%M:%S} to {acc.window_end:%H:%M:%S} UTC ({seconds:g}s between two scrapes)")
    return acc, server
