"""`peagle metrics`: speculative-decoding acceptance of an endpoint (CloudWatch Logs) or a URL (/metrics)."""

from __future__ import annotations

from typing import Annotated

import typer

from .common import JsonOpt, ProfileOpt, RegionOpt, run


def register(app: typer.Typer) -> None:
    app.command("metrics")(metrics)


def metrics(
    target: Annotated[str, typer.Argument(help="SageMaker endpoint name, or a container / OpenAI server URL.")],
    since: Annotated[
        str | None, typer.Option("--since", help="Window length back from --end (e.g. 90s, 15m, 2h). Default 15m.")
    ] = None,
    start: Annotated[str | None, typer.Option("--start", help="Window start, ISO 8601 (UTC if no offset).")] = None,
    end: Annotated[str | None, typer.Option("--end", help="Window end, ISO 8601. Default: now.")] = None,
    advise: Annotated[bool, typer.Option("--advise", help="Also run the K advisor on the per-position rates.")] = False,
    region: RegionOpt = None,
    profile: ProfileOpt = None,
    json_output: JsonOpt = False,
) -> None:
    """Mean acceptance length, acceptance rate and per-position acceptance.

    For an endpoint: vLLM's 'SpecDecoding metrics' log lines in CloudWatch Logs group /aws/sagemaker/Endpoints/NAME over the window.

    For a URL: the vllm:spec_decode_* counters of its /metrics page (totals since the server started).
    """

    def body(out):
        from ..bench import acceptance as acc_mod
        from ..bench.window import resolve_window

        if target.startswith(("http://", "https://")):
            if start or end or since:
                out.warn("--start/--end/--since do not apply to a URL: /metrics counts since the server started")
            url = acc_mod.metrics_url(target)
            acc = acc_mod.scrape(url).acceptance(source=f"prometheus:{url}")
        else:
            from ..aws import AwsSession

            begin, stop = resolve_window(start, end, since)
            logs = AwsSession(region, profile).client("logs")
            acc = acc_mod.read_cloudwatch(logs, target, begin, stop)
        advice = None
        if advise and acc.per_position:
            from ..bench.advisor import advise as run_advisor

            advice = run_advisor(acc.per_position, kind="cumulative")

        def human(console):
            from ..bench.report import acceptance_lines, render_advice

            for line in acceptance_lines(acc):
                console.print(line, markup=False)
            if advice is not None:
                render_advice(console, advice)

        data = {"acceptance": acc}
        if advice is not None:
            data["advice"] = advice
        out.result(data, human)

    run(json_output, body)
