"""`peagle drafter stage MODEL --method dflash --to s3://BUCKET/PREFIX`: the DFlash drafter from the hub (a loopback
stand-in: peagle_deploy/testing/hub_stand_in.py) into the emulator's S3, checked, its license shown, recorded for
`deploy --mode dflash`; and its --dry-run with no network and no AWS account."""

from __future__ import annotations

import hashlib
import json
import os

import pytest

from peagle_deploy.testing.hub_stand_in import HubStandIn, dflash_repo

from .cli_runner import run_cli

REPO, TARGET = "z-lab/Qwen3-Coder-30B-A3B-DFlash", "Qwen/Qwen3-Coder-30B-A3B-Instruct"
BUCKET = "drafters-bucket"


def no_aws(tmp_path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "HF_"))}
    env.update(AWS_CONFIG_FILE=str(tmp_path / "none"), AWS_SHARED_CREDENTIALS_FILE=str(tmp_path / "none"),
               AWS_EC2_METADATA_DISABLED="true", HF_HUB_OFFLINE="1", COLUMNS="250",
               PEAGLE_STATE_DIR=str(tmp_path / "state"))
    return env


def with_hub(env: dict[str, str], hub: HubStandIn, tmp_path, **extra: str) -> dict[str, str]:
    """The hub stand-in instead of the real one (HF_HUB_OFFLINE lifted for this run only), a fresh hub cache."""
    env = {k: v for k, v in env.items() if not k.startswith("HF_")}
    env.update(HF_ENDPOINT=hub.url, HF_HOME=str(tmp_path / "hf-home"), PEAGLE_STATE_DIR=str(tmp_path / "state"),
               COLUMNS="250", **extra)
    return env


def test_dry_run_without_network_or_credentials_says_what_and_where(tmp_path):
    """The must-show line: repository, revision, files, size and license (unknown offline, said so), the S3 prefix."""
    result = run_cli("drafter", "stage", "qwen3-coder", "--method", "dflash", "--to", "s3://b/p", "--dry-run",
                     env=no_aws(tmp_path))
    assert result.code == 0, result.stderr
    out = result.stdout
    assert f"https://huggingface.co/{REPO}" in out
    assert "main (commit: unknown offline)" in out
    assert "size        unknown offline" in out and "license     unknown offline" in out
    assert "config.json, *.safetensors" in out and "s3://b/p/ (us-east-1)" in out
    assert "unverified revision: no commit could be read from the hub" in out
    assert not (tmp_path / "state" / "drafters").exists()  # a dry run records nothing


def test_dry_run_against_the_hub_shows_commit_sizes_and_license(tmp_path):
    repo = dflash_repo(TARGET)
    with HubStandIn({REPO: repo}) as hub:
        result = run_cli("drafter", "stage", "qwen3-coder", "--to", "s3://b/p", "--dry-run", "--json",
                         env=with_hub(no_aws(tmp_path), hub, tmp_path))
    assert result.code == 0, result.stderr
    plan = json.loads(result.stdout)
    assert plan["commit"] == repo.commit and plan["license"] == "mit"
    assert plan["license_source"] == "the hub's model card"
    assert {f["path"] for f in plan["files"]} == {"config.json", "model.safetensors", "README.md"}  # not .gitattributes
    assert plan["size_bytes"] == sum(len(repo.files[f["path"]]) for f in plan["files"])
    weights = next(f for f in plan["files"] if f["path"] == "model.safetensors")
    assert weights["sha256"] == hashlib.sha256(repo.files["model.safetensors"]).hexdigest()
    assert all(method == "GET" for method, _, _ in hub.requests)  # model_info only: nothing downloaded
    assert all(auth is None for _, _, auth in hub.requests)  # no token: the repository asks for none


def _stage(emu, hub, tmp_path, *args: str, **extra: str):
    return run_cli("drafter", "stage", "qwen3-coder", "--method", "dflash", "--to", f"s3://{BUCKET}/drafters/qwen",
                   "--yes", *args, env=with_hub(emu.env, hub, tmp_path, **extra))


def test_stage_uploads_checked_files_and_deploy_mounts_them(emu, tmp_path):
    emu.client("s3").create_bucket(Bucket=BUCKET)
    repo = dflash_repo(TARGET)
    with HubStandIn({REPO: repo}) as hub:
        result = _stage(emu, hub, tmp_path)
    assert result.code == 0, result.stderr
    assert "license of z-lab/Qwen3-Coder-30B-A3B-DFlash: mit (the hub's model card)" in result.stderr
    assert "uploading model.safetensors" in result.stderr  # progress, from boto3's transfer callbacks
    assert f"staged {REPO}@{repo.commit}" in result.stdout
    assert f"target model: verified: the model card's base_model names {TARGET}" in result.stdout
    s3 = emu.client("s3")
    keys = {o["Key"] for o in s3.list_objects_v2(Bucket=BUCKET, Prefix="drafters/qwen/")["Contents"]}
    assert keys == {"drafters/qwen/config.json", "drafters/qwen/model.safetensors", "drafters/qwen/README.md",
                    "drafters/qwen/peagle-drafter.json"}
    for path in ("config.json", "model.safetensors"):
        assert s3.get_object(Bucket=BUCKET, Key=f"drafters/qwen/{path}")["Body"].read() == repo.files[path]
    manifest = json.loads(s3.get_object(Bucket=BUCKET, Key="drafters/qwen/peagle-drafter.json")["Body"].read())
    checked = {f["path"]: f["checked_against"] for f in manifest["files"]}
    assert checked == {"config.json": "the hub's git blob id", "model.safetensors": "the hub's LFS sha256",
                       "README.md": "the hub's git blob id"}
    assert manifest["commit"] == repo.commit and manifest["block_size"] == 16
    record = json.loads((tmp_path / "state" / "drafters" / "qwen3-coder-dflash.json").read_text())
    assert record["s3_uri"] == f"s3://{BUCKET}/drafters/qwen/" and record["region"] == emu.region

    env = {**emu.env, "PEAGLE_STATE_DIR": str(tmp_path / "state")}
    plan = run_cli("deploy", "qwen3-coder", "--mode", "dflash", "--dry-run", "--offline", "--json", env=env)
    assert plan.code == 0, plan.stderr
    body = json.loads(plan.stdout)["plan"]
    assert body["drafter_channel"] == {"ChannelName": "dflash", "S3DataSource": {
        "S3Uri": f"s3://{BUCKET}/drafters/qwen/", "S3DataType": "S3Prefix", "CompressionType": "None"}}
    assert not any("DFlash drafter in S3" in m for m in body["missing"])
    assert any("staged from z-lab/Qwen3-Coder-30B-A3B-DFlash@0123456789ab" in n for n in body["notes"])


def test_a_file_that_does_not_match_the_hubs_checksum_is_not_uploaded(emu, tmp_path):
    emu.client("s3").create_bucket(Bucket=BUCKET)
    with HubStandIn({REPO: dflash_repo(TARGET)}, corrupt={"model.safetensors": b"not the listed bytes!"}) as hub:
        result = _stage(emu, hub, tmp_path)
    assert result.code == 2
    assert "does not match" in result.stderr or "bytes, the hub lists" in result.stderr
    assert "Contents" not in emu.client("s3").list_objects_v2(Bucket=BUCKET)
    assert not (tmp_path / "state" / "drafters").exists()


def test_a_drafter_made_for_another_model_is_refused(emu, tmp_path):
    emu.client("s3").create_bucket(Bucket=BUCKET)
    with HubStandIn({REPO: dflash_repo("Qwen/Qwen3-8B", name_target="config")}) as hub:
        result = _stage(emu, hub, tmp_path)
    assert result.code == 2
    assert "was made for Qwen/Qwen3-8B (config.json target_model), not Qwen/Qwen3-Coder-30B-A3B-Instruct" in \
        result.stderr
    assert "Contents" not in emu.client("s3").list_objects_v2(Bucket=BUCKET)


def test_a_drafter_naming_no_target_is_staged_and_says_so(emu, tmp_path):
    emu.client("s3").create_bucket(Bucket=BUCKET)
    with HubStandIn({REPO: dflash_repo(TARGET, name_target="none")}) as hub:
        result = _stage(emu, hub, tmp_path, "--json")
    assert result.code == 0, result.stderr
    assert json.loads(result.stdout)["target_check"].startswith("not verified: neither config.json")


def test_a_block_smaller_than_the_catalogs_k_is_refused(emu, tmp_path):
    emu.client("s3").create_bucket(Bucket=BUCKET)
    with HubStandIn({REPO: dflash_repo(TARGET, block_size=8)}) as hub:
        result = _stage(emu, hub, tmp_path)
    assert result.code == 2
    assert "drafts blocks of 8 tokens, so K is at most 7; the catalog allows 15" in result.stderr


@pytest.mark.parametrize("token", [None, "hf_standinSecretToken1234567890"])
def test_a_gated_repository_needs_a_token_and_never_prints_it(emu, tmp_path, token):
    emu.client("s3").create_bucket(Bucket=BUCKET)
    secret = "hf_standinSecretToken1234567890"
    with HubStandIn({REPO: dflash_repo(TARGET, gated=True, token=secret)}) as hub:
        result = _stage(emu, hub, tmp_path, **({"HF_TOKEN": token} if token else {}))
        requests = list(hub.requests)
    assert secret not in result.stdout + result.stderr
    if token is None:
        assert result.code == 2
        assert "the repository asks for a token" in result.stderr and "set HF_TOKEN" in result.stderr
        return
    assert result.code == 0, result.stderr
    assert requests[0][2] is None  # asked without a token first
    assert all(auth == f"Bearer {secret}" for _, _, auth in requests[1:])


def test_offline_stage_is_one_line(tmp_path):
    result = run_cli("drafter", "stage", "qwen3-coder", "--method", "dflash", "--to", "s3://b/p",
                     env=no_aws(tmp_path))
    assert result.code == 2
    assert result.stderr.strip().splitlines() == [
        "error: cannot fetch the qwen3-coder DFlash drafter z-lab/Qwen3-Coder-30B-A3B-DFlash@main: HF_HUB_OFFLINE is "
        "set: where the hub is reachable run `peagle drafter stage qwen3-coder --method dflash --to "
        "s3://BUCKET/PREFIX` (HF_ENDPOINT names a mirror); --dry-run shows what it would fetch"]


@pytest.mark.parametrize("args, says", [
    (["gemma-4-31b", "--to", "s3://b/p"], "gemma-4-31b has no DFlash drafter: --mode dflash is for gpt-oss-120b, "
                                         "gpt-oss-20b, qwen3-coder"),
    (["qwen3-coder", "--to", "b/p"], "--to 'b/p' is not an S3 location: pass --to s3://BUCKET/PREFIX"),
    (["qwen3-coder", "--to", "s3://bucket"], "--to 's3://bucket' names a bucket but no prefix"),
    (["qwen3-coder", "--to", "s3://b/p", "--method", "p-eagle"], "--method p-eagle has no drafter to stage"),
])
def test_bad_input_is_one_line(tmp_path, args, says):
    result = run_cli("drafter", "stage", *args, "--dry-run", env=no_aws(tmp_path))
    assert result.code == 2
    assert says in result.stderr and len(result.stderr.strip().splitlines()) == 1


def test_unfinished_uploads_an_interrupted_stage_left_are_aborted_and_no_others(emu, tmp_path):
    """A stage killed mid-upload (SIGKILL: boto3 cannot abort) leaves a multipart upload whose parts S3 bills and no
    object listing shows; the next stage to that prefix aborts it and says so, and leaves other prefixes' alone."""
    s3 = emu.client("s3")
    s3.create_bucket(Bucket=BUCKET)
    left = s3.create_multipart_upload(Bucket=BUCKET, Key="drafters/qwen/model.safetensors")["UploadId"]
    s3.upload_part(Bucket=BUCKET, Key="drafters/qwen/model.safetensors", UploadId=left, PartNumber=1, Body=b"x" * 1024)
    others = s3.create_multipart_upload(Bucket=BUCKET, Key="drafters/qwen-other/model.safetensors")["UploadId"]
    with HubStandIn({REPO: dflash_repo(TARGET)}) as hub:
        result = _stage(emu, hub, tmp_path)
    assert result.code == 0, result.stderr
    assert ("aborted 1 unfinished multipart upload(s) an interrupted stage left under s3://drafters-bucket/drafters/qwen/"
            " (drafters/qwen/model.safetensors)") in result.stderr
    remaining = s3.list_multipart_uploads(Bucket=BUCKET).get("Uploads", [])
    assert [(u["Key"], u["UploadId"]) for u in remaining] == [("drafters/qwen-other/model.safetensors", others)]


def test_a_stage_that_cannot_list_unfinished_uploads_says_how_to_look_and_goes_on():
    """An identity without s3:ListBucketMultipartUploads (a policy from before it was listed) still stages; the
    leftovers it could not look for are named with the command that lists them (botocore's Stubber: S3's answer)."""
    import boto3
    from botocore.stub import Stubber

    from peagle_deploy.cli.drafter import remove_leftovers

    s3 = boto3.client("s3", region_name="us-east-1", aws_access_key_id="testing", aws_secret_access_key="testing")
    notes: list[str] = []
    with Stubber(s3) as stub:
        stub.add_client_error("list_multipart_uploads", service_error_code="AccessDenied", service_message="Access Denied",
                              http_status_code=403, expected_params={"Bucket": BUCKET, "Prefix": "drafters/qwen/"})
        remove_leftovers(s3, BUCKET, "drafters/qwen", notes.append)
        stub.assert_no_pending_responses()
    assert len(notes) == 1, notes
    assert notes[0].startswith("could not look for unfinished uploads an interrupted stage left under "
                               f"s3://{BUCKET}/drafters/qwen/ (")
    assert "(AccessDenied)" in notes[0]
    assert notes[0].endswith(f"aws s3api list-multipart-uploads --bucket {BUCKET} --prefix drafters/qwen/")
