"""`peagle iam-policy [COMMAND...]`: the IAM actions peagle's commands need, or a ready-to-attach policy (--json)."""

from __future__ import annotations

from typing import Annotated

import typer

from .common import JsonOpt, run


def register(app: typer.Typer) -> None:
    app.command("iam-policy")(iam_policy)


def iam_policy(
    commands: Annotated[list[str] | None, typer.Argument(
        help="Commands to cover: deploy, status, invoke, bench, metrics, logs, update, sweep, cleanup, drafter "
             "(default: all).")] = None,
    role: Annotated[str | None, typer.Option(
        help="The execution role ARN you deploy with: iam:PassRole on that role only.")] = None,
    name_prefix: Annotated[str | None, typer.Option(
        help="Create, change and delete only endpoints, configs and models named with this prefix "
             "(peagle's default names start with 'peagle-').")] = None,
    bucket: Annotated[str | None, typer.Option(
        help="drafter stage: the BUCKET or BUCKET/PREFIX its --to names; uploads (s3:PutObject) only there.")] = None,
    json_output: JsonOpt = False,
) -> None:
    """The IAM actions each command calls (docs/iam.md); with --json, an identity policy to attach.

    tests/test_iam_policy.py checks this list against the calls the commands really make.
    """

    def body(out):
        from .. import iam_policy as table
        from ..output import print_table

        document = table.policy_document(commands, role=role, name_prefix=name_prefix,  # refuses bad input
                                         bucket=_bucket(bucket) if bucket is not None else None)
        if out.json_mode:
            out.result(document)  # the document alone: IAM refuses a policy with keys of ours in it
            if _unscoped_applies(document):
                out.note(table.UNSCOPED)
            return
        chosen = commands or list(table.COMMANDS)
        rows = [[command, p.action, ", ".join(sid for sid, _ in table.scopes_of(p)), p.why]
                for command in chosen for p in table.COMMANDS[command]]

        def human(console):
            print_table(console, ["command", "action", "statement", "why"], rows)

        out.result(document, human)
        out.note("--json prints these as one policy document to attach; the execution role's own needs are in "
                 "docs/iam.md")
        if _unscoped_applies(document):
            out.note(table.UNSCOPED)

    run(json_output, body)


def _bucket(value: str) -> str:
    """--bucket BUCKET, BUCKET/PREFIX or s3://... -> 'BUCKET' or 'BUCKET/PREFIX' (one line naming the fix if not)."""
    from ..errors import UsageError
    from ..inputs import parse_s3_prefix

    text = value if value.startswith("s3://") else f"s3://{value}"
    has_prefix = "/" in text.removeprefix("s3://").strip("/")
    try:
        bucket, prefix = parse_s3_prefix(text if has_prefix else text.rstrip("/") + "/x", flag="--bucket")
    except UsageError:
        raise UsageError(f"--bucket {value!r} is not an S3 bucket or BUCKET/PREFIX",
                         "pass --bucket my-bucket/drafters (the bucket and prefix the drafter is staged to)") from None
    return f"{bucket}/{prefix}" if has_prefix else bucket


def _unscoped_applies(document: dict) -> bool:
    """The policy holds one of the actions UNSCOPED speaks of."""
    named = {"application-autoscaling:RegisterScalableTarget", "cloudwatch:PutMetricAlarm", "iam:PassRole",
             "sagemaker:CallWithBearerToken"}
    return any(named & set(statement["Action"]) for statement in document["Statement"])
