"""Shared option types and the one wrapper that turns failures into one line and an exit code."""

from __future__ import annotations

import os
import traceback
from collections.abc import Callable
from typing import Annotated, Any

import typer

from ..errors import ExitCode, Interrupted, PeagleError
from ..output import Output
from ..redaction import redact

JsonOpt = Annotated[bool, typer.Option("--json", help="Print one JSON document on stdout (progress goes to stderr).")]
RegionOpt = Annotated[str | None, typer.Option("--region", help="AWS region (default: AWS_REGION, then us-east-1).")]
RegionsOpt = Annotated[str | None, typer.Option(
    "--region", help="AWS region (default: AWS_REGION, then us-east-1), or several separated by commas "
                     "(us-east-1,us-west-2): each is searched, and so is every region a --region A,B deploy found "
                     "there tried (its peagle:regions-tried tag).")]
ProfileOpt = Annotated[str | None, typer.Option("--profile", help="AWS profile name.")]
YesOpt = Annotated[bool, typer.Option("--yes", "-y", help="Do not ask for confirmation.")]
TransportOpt = Annotated[str | None, typer.Option(
    "--transport", help="How a SageMaker endpoint is reached: invoke-endpoint (InvokeEndpoint, the default) or "
                        "openai-route (its OpenAI-compatible route, with a bearer token made on the fly).")]

ComponentOpt = Annotated[str | None, typer.Option(
    "--component", help="The inference component of the endpoint to address, when it hosts several (default: the "
                        "one it hosts, read from SageMaker).")]
WaitTimeoutOpt = Annotated[str, typer.Option(
    "--wait-timeout", help="How long to wake an inference component that has no copy in service (scaled to zero) "
                           "before giving up with exit 5: 0s to 2h, e.g. 90s, 15m.")]


# How a command works without an AWS account, added to its "no AWS credentials" hint: only commands that have a
# way, each naming only its own options and arguments (tests/test_cli_hints.py checks every flag named here
# against the command). Keyed by the command path after 'peagle'.
_URL = "or give a running server's URL (http://host:port) instead of an endpoint name"
WITHOUT_AWS: dict[str, str] = {
    "deploy": "or use --dry-run (the plan needs no AWS account)",
    "sweep": "or use --dry-run (the plan needs no AWS account), or --url MODE:K=URL to sweep servers you run",
    "invoke": _URL,
    "metrics": _URL,
    "bench run": _URL,
    "bench agree": "or give running servers' URLs (http://host:port) instead of endpoint names",
}


def run(json_mode: bool, body: Callable[[Output], Any]) -> None:
    """Run a command body with an Output; map every failure to one stderr line and an exit code
    (with --json also to one error document on stdout, see `Output.fail`)."""
    out = Output(json_mode)
    try:
        check_numbers()
        check_text()
        body(out)
    except PeagleError as exc:
        _without_aws(exc)
        out.fail(exc)
        raise typer.Exit(int(exc.exit_code)) from None
    except KeyboardInterrupt:
        out.fail(Interrupted("interrupted"))
        raise typer.Exit(int(ExitCode.INTERRUPTED)) from None
    except (typer.Exit, BrokenPipeError):  # a closed stdout is handled once, in app.main
        raise
    except Exception as exc:  # noqa: BLE001 - the last line of defence: never a raw traceback
        translated = _translate(exc)
        if translated is not None:
            _without_aws(translated)
            out.fail(translated)
            raise typer.Exit(int(translated.exit_code)) from None
        if os.environ.get("PEAGLE_DEBUG"):
            out.stderr.write(redact(traceback.format_exc()))
        detail = redact(str(exc)).splitlines()[0] if str(exc).strip() else "no message"
        out.fail(PeagleError(f"unexpected {type(exc).__name__}: {detail}",
                             "set PEAGLE_DEBUG=1 for a traceback and report it"))
        raise typer.Exit(int(ExitCode.UNEXPECTED)) from None


def check_text() -> None:
    """Every option of the running command whose value goes to AWS as typed (inputs.TEXT_CHECKS), and every endpoint
    NAME argument (inputs.ARGUMENT_CHECKS)."""
    from typer._click.globals import get_current_context

    from ..inputs import ARGUMENT_CHECKS, TEXT_CHECKS

    ctx = get_current_context(silent=True)
    if ctx is None:
        return
    for param in ctx.command.params:
        value = ctx.params.get(param.name or "")
        if not isinstance(value, str) or not param.opts:
            continue
        if any(opt.startswith("-") for opt in param.opts):
            check = TEXT_CHECKS.get(param.name or "")
            if check is not None:
                check(value, max(param.opts, key=len))
            if param.name == "region" and ctx.command.name not in REGION_LISTS:
                one_region(value, ctx.command_path)
        elif (check_argument := ARGUMENT_CHECKS.get(param.name or "")) is not None:
            check_argument(value, ctx.command.name or "")


# the commands whose --region takes a list (RegionsOpt, and deploy's order of regions to try); every other works in one
REGION_LISTS = {"deploy", "status", "cleanup", "recover"}


def one_region(value: str, command_path: str) -> None:
    """A --region list given to a command that works in one region: refused before any AWS read (a sweep said the
    list "has no JumpStart bucket" after reading AWS)."""
    from ..errors import UsageError
    from ..inputs import read_list

    if "," not in value:
        return
    regions = read_list(value, "--region", "us-east-1")
    raise UsageError(f"--region {value!r} lists {len(regions)} regions; {command_path} works in one",
                     f"pass --region {regions[0]}, and run it again for each other region")


def check_numbers() -> None:
    """Every numeric option of the command being run, against the one table (`peagle_deploy.numbers`)."""
    from typer._click.globals import get_current_context  # typer's own Click: the running command's context

    from ..inputs import check_params

    ctx = get_current_context(silent=True)
    if ctx is None:
        return
    flags = {p.name: max(p.opts, key=len) for p in ctx.command.params if p.name and p.opts}
    check_params(ctx.params, flags)


def given(name: str) -> bool:
    """Whether the user typed option `name` (a parameter name), rather than leaving its default."""
    return name in given_flags()


def given_flags() -> dict[str, str]:
    """Parameter name -> flag (or argument name) of every parameter the user typed in the running command."""
    from typer._click.globals import get_current_context

    ctx = get_current_context(silent=True)
    if ctx is None:
        return {}
    typed = {}
    for param in ctx.command.params:
        source = ctx.get_parameter_source(param.name) if param.name else None
        if source is not None and source.name not in ("DEFAULT", "DEFAULT_MAP"):
            typed[param.name] = max(param.opts, key=len) if param.opts else param.name.upper()
    return typed


def _without_aws(error: PeagleError) -> None:
    """A missing-credentials hint, completed with the running command's own way to work without AWS."""
    import sys

    aws = sys.modules.get(f"{__package__.rpartition('.')[0]}.aws")  # only it raises MissingCredentials
    if aws is None or not isinstance(error, aws.MissingCredentials) or not error.hint:
        return
    from typer._click.globals import get_current_context

    ctx = get_current_context(silent=True)
    way = WITHOUT_AWS.get(ctx.command_path.partition(" ")[2]) if ctx is not None else None
    if way and way not in error.hint:
        error.hint = error.hint.replace(aws.NO_CREDENTIALS_FIX, f"{aws.NO_CREDENTIALS_FIX} {way}", 1)


def _translate(exc: Exception) -> PeagleError | None:
    """botocore's failures, only if botocore was imported at all (it is not on --help paths)."""
    import sys

    if "botocore" not in sys.modules:
        return None
    from ..aws import translate_error

    return translate_error(exc)
