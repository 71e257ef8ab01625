"""`peagle openai NAME`: the endpoint's OpenAI base URL and a bearer token, for the OpenAI SDK and friends."""

from __future__ import annotations

from typing import Annotated

import typer

from .common import ComponentOpt, JsonOpt, ProfileOpt, RegionOpt, run


def register(app: typer.Typer) -> None:
    app.command("openai")(openai)


def openai(
    name: Annotated[str, typer.Argument(help="The endpoint (InService).")],
    duration: Annotated[str, typer.Option("--duration", help="How long the token works: 1s to 12h (e.g. 15m, 1h, "
                                                            "12h). Shorter is safer.")] = "1h",
    export: Annotated[bool, typer.Option("--export", help="Print 'export OPENAI_BASE_URL=...' and "
                                                          "'export OPENAI_API_KEY=...' lines for eval.")] = False,
    component: ComponentOpt = None,
    region: RegionOpt = None,
    profile: ProfileOpt = None,
    json_output: JsonOpt = False,
) -> None:
    """The OpenAI base URL of an endpoint (SageMaker's OpenAI-compatible route) and a short-lived bearer token.

    The token is made locally from your AWS credentials by sagemaker-core's generator and acts as you until it
    expires: whoever uses it needs sagemaker:CallWithBearerToken and sagemaker:InvokeEndpoint (docs/openai.md).
    Only chat completions are routed. eval "$(peagle openai NAME --export)" sets it up for the OpenAI SDK.
    An endpoint that hosts an inference component gets the component's URL (the route names it in its path).
    """

    def body(out):
        import shlex
        from datetime import datetime, timezone

        from ..aws import AwsSession
        from ..inputs import parse_duration
        from ..errors import UsageError
        from ..inputs import validate_name
        from ..runtime.openai_route import MAX_LIFETIME, base_url, make_token

        if export and json_output:
            raise UsageError("--export and --json print two different things", "pick one of them")
        lifetime = parse_duration(duration, flag="--duration", maximum=MAX_LIFETIME)
        if "://" in name:  # only a SageMaker endpoint needs a route URL and a token made for it
            route = _route_name(name)
            raise UsageError(f"{name!r} is a URL; peagle openai takes a SageMaker endpoint's name",
                             f"run 'peagle openai {route}'" if route else "pass the endpoint's name (peagle status "
                             "lists them); a server you run needs no token: call its own URL")
        validate_name(name)
        session = AwsSession(region, profile)
        _require_in_service(session, name)
        from ..lifecycle.component_target import address_component
        from ..runtime.target_ref import TargetRef

        addressed = address_component(TargetRef(kind="sagemaker", name=name), session, component, note=out.note)
        url = base_url(session, name, addressed.inference_component)
        token = make_token(session, lifetime)
        key = token.value.get_secret_value()  # shown only in this command's result, which asked for it
        expires = token.expires_at.isoformat().replace("+00:00", "Z")
        if export:
            from ..redaction import redact, revealing

            lines = f"export OPENAI_BASE_URL={shlex.quote(url)}\nexport OPENAI_API_KEY={shlex.quote(key)}\n"
            with revealing([key]):
                out.stdout.write(redact(lines))
            out.stdout.flush()
            return
        left = token.expires_at - datetime.now(timezone.utc)

        def human(console):
            from ..output import human_duration

            console.print(f"base_url: {url}", markup=False, highlight=False, soft_wrap=True)
            console.print(f"api_key:  {key}", markup=False, highlight=False, soft_wrap=True)
            console.print(f"expires:  {expires} (in {human_duration(left.total_seconds())})", markup=False,
                          highlight=False, soft_wrap=True)
            if addressed.inference_component:
                console.print(f"component: {addressed.inference_component} (the endpoint's inference component: "
                              "the base URL names it)", markup=False, highlight=False, soft_wrap=True)
            console.print('  from openai import OpenAI; client = OpenAI(base_url=..., api_key=...)\n'
                          '  client.chat.completions.create(model="", messages=[...])  # model "": the served '
                          'model', markup=False, highlight=False, soft_wrap=True)

        named = {"inference_component": addressed.inference_component} if addressed.inference_component else {}
        out.result({"base_url": url, "api_key": key, "expires_at": expires, "endpoint": name, **named,
                    "region": token.region}, human, reveal=[key])
        if not out.json_mode:
            out.note("the api_key acts as your AWS identity on this endpoint until it expires; keep it out of "
                     "logs and repositories")

    run(json_output, body)


def _route_name(url: str) -> str | None:
    """The endpoint an OpenAI route URL (.../endpoints/NAME[/inference-components/C]/openai/v1) names, with
    `--component C` when it names one, else None."""
    from ..errors import UsageError
    from ..runtime.target_ref import parse_target

    try:
        ref = parse_target(url)
    except UsageError:
        return None
    if ref.kind != "sagemaker":
        return None
    return ref.name + (f" --component {ref.inference_component}" if ref.inference_component else "")


def _require_in_service(session, name: str) -> None:
    """Not found: exit 2 (bad input); Failed: exit 6; not InService yet: exit 2, as `peagle invoke` says it."""
    from ..aws import error_code, translate_error
    from ..errors import UsageError

    try:
        described = session.client("sagemaker").describe_endpoint(EndpointName=name)
    except Exception as exc:  # botocore's errors, through the one AWS classifier
        if error_code(exc) in ("ValidationException", "ValidationError"):
            raise UsageError(f"no endpoint named {name!r} in {session.region}",
                             "check the name and --region (peagle status lists peagle's endpoints)") from None
        translated = translate_error(exc)
        if translated is None:
            raise
        raise translated from None
    if described.get("EndpointStatus") != "InService":  # Failed: exit 6; Creating and the like: 2, wait for it
        from ..runtime.targets import not_in_service

        raise not_in_service(name, described)
