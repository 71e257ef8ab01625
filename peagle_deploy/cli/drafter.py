"""`peagle drafter stage MODEL --method dflash --to s3://BUCKET/PREFIX`: a model's DFlash drafter into your bucket."""

from __future__ import annotations

from typing import Annotated

import typer

from .common import JsonOpt, ProfileOpt, RegionOpt, YesOpt, run

drafter_app = typer.Typer(
    no_args_is_help=True,
    rich_markup_mode="rich",
    help="Drafters peagle fetches for you: 'peagle drafter stage MODEL --method dflash --to s3://BUCKET/PREFIX'.",
)


def register(app: typer.Typer) -> None:
    app.add_typer(drafter_app, name="drafter")


@drafter_app.command("stage")
def stage(
    model: Annotated[str, typer.Argument(help="Model alias with a DFlash drafter (qwen3-coder, gpt-oss-20b, "
                                              "gpt-oss-120b).")],
    to: Annotated[str, typer.Option("--to", help="Where to put it: s3://BUCKET/PREFIX in your account (the "
                                                  "endpoint's region).")],
    method: Annotated[str, typer.Option(help="The drafter's method: dflash (the only one staged).")] = "dflash",
    offline: Annotated[bool, typer.Option(help="With --dry-run: ask the hub nothing (sizes and license unknown).")]
    = False,
    dry_run: Annotated[bool, typer.Option(help="Say what would be fetched (repository, revision, files, size, "
                                               "license) and where it would go; no download, no upload, no AWS.")]
    = False,
    region: RegionOpt = None,
    profile: ProfileOpt = None,
    yes: YesOpt = False,
    json_output: JsonOpt = False,
) -> None:
    """Fetch MODEL's DFlash drafter from the model hub at its pinned revision, check it (files, hashes, target
    model), show its license, upload it to --to with progress and record where it is, for `deploy --mode dflash`."""

    def body(out):
        from ..aws import resolve_region
        from ..catalog import get_model, require_dflash
        from ..drafter_stage import plan_stage
        from ..errors import UsageError
        from ..inputs import parse_s3_prefix
        from ..speculative import parse_mode

        if parse_mode(method, flag="--method").value != "dflash":
            raise UsageError(f"--method {method} has no drafter to stage: P-EAGLE and EAGLE-3 mount JumpStart's",
                             "pass --method dflash")
        entry = get_model(model)
        require_dflash(entry)
        bucket, prefix = parse_s3_prefix(to, flag="--to")
        where = resolve_region(region)
        plan, info = plan_stage(entry, f"s3://{bucket}/{prefix}/", where, offline=offline)
        if dry_run:
            out.result({"dry_run": True, **plan.model_dump(mode="json")}, lambda console: _render(console, plan))
            return
        if info is None:  # offline, or the hub did not answer: one line, as `peagle datasets fetch` says it
            from ..drafter_stage import unreachable

            raise unreachable(entry.dflash, entry.alias, plan.not_fetched or plan.hub_answer)
        staged = _stage(out, plan, info, entry, bucket=bucket, prefix=prefix, profile=profile, yes=yes)

        def human(console):
            console.print(f"staged {staged.repo}@{staged.commit or staged.revision} ({len(staged.files)} files) at "
                          f"{staged.s3_uri}", markup=False, soft_wrap=True, highlight=False)
            console.print(f"target model: {staged.target_check}", markup=False, soft_wrap=True, highlight=False)
            from ..drafters import record_path

            console.print(f"recorded in {record_path(staged.model)}: peagle deploy {staged.model} --mode dflash "
                          "mounts it", markup=False, soft_wrap=True, highlight=False)

        out.result(staged.model_dump(mode="json"), human)

    run(json_output, body)


def _stage(out, plan, info, entry, *, bucket: str, prefix: str, profile, yes: bool):
    from ..aws import AwsSession
    from ..drafter_stage import stage

    session = AwsSession(plan.region, profile)
    session.check_credentials()  # no AWS access (exit 3) before anything is downloaded

    def show_license(checked) -> None:
        """The license, before anything is uploaded; a person at a terminal says yes (--yes in a script)."""
        license = checked.license or "not stated by the hub"
        out.info(f"license of {checked.repo}: {license} ({checked.license_source}); read it on the hub before use")
        out.confirm(f"upload {plan.describe_size()} to s3://{bucket}/{prefix}/ under this license?", yes=yes)

    with out.status(f"staging {plan.repo}") as progress:
        s3 = session.client("s3")
        return stage(plan, info, entry, s3=s3, bucket=bucket, prefix=prefix, progress=progress,
                     show_license=show_license, before_upload=lambda: remove_leftovers(s3, bucket, prefix, out.warn))


def remove_leftovers(s3, bucket: str, prefix: str, warn) -> None:
    """`drafter_stage.abort_leftovers`, said in one line; a list that fails (no s3:ListBucketMultipartUploads in an
    older policy) is a warning naming the command that lists them, and the stage goes on."""
    from .. import clock
    from ..aws import botocore_exceptions, error_line
    from ..drafter_stage import abort_leftovers
    from ..errors import PeagleError
    from ..lifecycle.wait import read_retrying

    bx = botocore_exceptions()
    try:
        removed = read_retrying(lambda: abort_leftovers(s3, bucket, prefix), sleep=clock.sleep)
    except (bx.ClientError, bx.BotoCoreError, PeagleError) as exc:
        warn(f"could not look for unfinished uploads an interrupted stage left under s3://{bucket}/{prefix}/ "
             f"({error_line(exc)}); S3 bills their parts until removed: aws s3api list-multipart-uploads --bucket {bucket} "
             f"--prefix {prefix}/")
        return
    if removed:
        warn(f"aborted {len(removed)} unfinished multipart upload(s) an interrupted stage left under "
             f"s3://{bucket}/{prefix}/ ({', '.join(sorted(set(removed)))}): S3 billed their parts")


def _render(console, plan) -> None:
    from ..output import print_key_values

    files = ", ".join(f.path for f in plan.files) if plan.files else (
        f"{', '.join(plan.patterns)} (the patterns; the repository's list: unknown offline)")
    print_key_values(console, [
        ("model", f"{plan.model} (--method {plan.method})"),
        ("repository", f"{plan.hub}/{plan.repo}"),
        ("revision", plan.revision + (f" (commit {plan.commit})" if plan.commit else " (commit: unknown offline)")),
        ("files", files),
        ("size", plan.describe_size()),
        ("license", f"{plan.license} ({plan.license_source})" if plan.license else plan.license_source),
        ("token", plan.token),
        ("to", f"{plan.to} ({plan.region})"),
        ("hub", plan.hub_answer),
    ], title="peagle drafter stage --dry-run: nothing was fetched or uploaded")
    for field, why in plan.unverified.items():
        console.print(f"[yellow]unverified[/yellow] {field}: {why}", soft_wrap=True)
