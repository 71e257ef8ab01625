"""`peagle invoke TARGET [PROMPT]`: one chat completion, streamed live, with its timing. An endpoint that hosts
an inference component is asked through it, and one at zero copies is woken first (`runtime.waking`)."""

from __future__ import annotations

from typing import Annotated

import typer

from .common import ComponentOpt, JsonOpt, ProfileOpt, RegionOpt, TransportOpt, WaitTimeoutOpt, run


def register(app: typer.Typer) -> None:
    app.command("invoke")(invoke)


def invoke(
    target: Annotated[str, typer.Argument(help="Endpoint name, its OpenAI route URL (peagle openai NAME), container URL (http://host:8080) or OpenAI base URL (.../v1).")],
    prompt: Annotated[str | None, typer.Argument(help="The user message (or use --payload).")] = None,
    system: Annotated[str | None, typer.Option(help="A system message.")] = None,
    max_tokens: Annotated[int, typer.Option(help="Most tokens to generate.")] = 512,
    temperature: Annotated[float | None, typer.Option(help="Sampling temperature, 0 to 2.")] = None,
    top_p: Annotated[float | None, typer.Option(help="Nucleus sampling, (0, 1].")] = None,
    payload: Annotated[str | None, typer.Option(help="A chat-completion JSON body: a file, or - for stdin.")] = None,
    stream: Annotated[bool, typer.Option(help="Stream tokens as they arrive.")] = True,
    kind: Annotated[str | None, typer.Option("--target-kind", "--kind",
                                             help="Force the target kind: sagemaker, container or openai.")] = None,
    transport: TransportOpt = None,
    timeout: Annotated[float, typer.Option(help="Seconds the whole call may take (and without data) before giving up.")] = 120.0,
    component: ComponentOpt = None,
    wait_timeout: WaitTimeoutOpt = "15m",
    region: RegionOpt = None,
    profile: ProfileOpt = None,
    json_output: JsonOpt = False,
) -> None:
    """Send an OpenAI-style chat completion; print tokens live, then TTFT, latency and tokens/s.

    An endpoint that hosts an inference component is asked through it. One with no copy in service (scaled to
    zero) is woken: the refused request raises its wake-up alarm, and peagle asks again until a copy answers
    (at most --wait-timeout), then reports the cold start apart from TTFT and latency.
    """

    def body(out):
        import sys

        from ..inputs import parse_duration
        from ..errors import UsageError
        from ..runtime import PeagleClient, build_request, parse_payload
        from ..runtime.target_ref import parse_target

        if payload is not None:
            if prompt is not None:
                raise UsageError("give either PROMPT or --payload, not both", "drop one of them")
            if payload == "-":
                try:
                    text, source = sys.stdin.read(), "the payload on stdin"
                except UnicodeDecodeError:
                    raise UsageError("the payload on stdin is not UTF-8 text",
                                     "send a JSON chat-completion request") from None
            else:
                try:
                    with open(payload, encoding="utf-8") as handle:
                        text = handle.read()
                except OSError as exc:
                    raise UsageError(f"cannot read --payload {payload}: {exc.strerror}", "check the path") from None
                except UnicodeDecodeError:
                    raise UsageError(f"--payload {payload} is not UTF-8 text",
                                     "pass a JSON chat-completion request file") from None
                source = f"--payload {payload}"
            request = parse_payload(text, source)
        else:
            request = build_request(prompt, system=system, max_tokens=max_tokens, temperature=temperature,
                                    top_p=top_p)
        if timeout <= 0:
            raise UsageError(f"--timeout must be positive, got {timeout:g}", "pass e.g. --timeout 120")
        wait_s = parse_duration(wait_timeout, flag="--wait-timeout").total_seconds()
        ref = parse_target(target, kind, transport)
        session = None
        if ref.kind == "sagemaker":
            from ..aws import AwsSession

            session = AwsSession(ref.session_region(region), profile)
        from ..lifecycle.component_target import address_component

        ref = address_component(ref, session, component, note=out.note)
        client = PeagleClient(ref, region=region, profile=profile, idle_timeout=timeout, total_timeout=timeout)

        def attempt():
            if not stream:
                return client.chat(request)
            pieces = client.stream(request)
            return pieces, next(pieces, None)  # a refusal comes before the first token

        cold = None
        if ref.inference_component:
            from ..runtime.waking import component_state, until_served

            answer, cold = until_served(attempt, ref, wait_timeout_s=wait_s, out=out,
                                        state=lambda: component_state(session, ref), region=session.region)
        else:
            answer = attempt()
        if stream:
            pieces, first = answer
            for piece in ([first] if first is not None else []):
                out.write_live(piece)
            for piece in pieces:
                out.write_live(piece)
            out.write_live("\n")
            result = client.last
        else:
            result = answer
        result.cold_start = cold
        stats = result.stats

        def human(console):
            if not stream:
                console.print(result.text, markup=False, highlight=False)
            ttft = "n/a" if stats.ttft_s is None else f"{stats.ttft_s * 1000:.0f} ms"
            if stats.ttfc_s is not None and stats.ttft_s is not None and stats.ttfc_s > stats.ttft_s:
                ttft += f" (first content {stats.ttfc_s * 1000:.0f} ms)"
            rate = "n/a" if stats.tokens_per_s is None else f"{stats.tokens_per_s:.1f} tok/s"
            tokens = "?" if stats.output_tokens is None else str(stats.output_tokens)
            via = f" via {result.transport}" if result.transport == "openai-route" else ""
            via += f", inference component {result.inference_component}" if result.inference_component else ""
            out.info(f"[{result.target_kind}{via}] TTFT {ttft}, latency {stats.latency_s * 1000:.0f} ms, "
                     f"{tokens} tokens ({stats.output_tokens_source}), {rate}, finish: {stats.finish_reason}")
            if cold is not None:
                out.info(f"cold start: {cold.describe()}; not in the TTFT and latency above")
            if result.acceptance is not None:
                out.info(f"acceptance of this request (the server's metrics.speculative_decoding): "
                         f"{result.acceptance.describe()}")

        out.result(result, human)

    run(json_output, body)
