"""Issue 10 item 6: no secret value from --env, nor any credential the session uses (whatever its source),
appears in any output, human or --json; --show-secrets reveals the --env values on purpose. Each command is a
`peagle` process (forked, tests/forked_peagle.py): everything it writes to stdout and stderr is checked."""

from __future__ import annotations

import json
import subprocess

import pytest

from .forked_peagle import forked_peagle

HF = "hf_PeagleLeakTestTokenValue0123456789"
API = "k1"  # too short to be masked by value: masked by its name
PASSWORD = "correct horse battery staple"
ENV_ARGS = ["--env", f"HF_TOKEN={HF}", "--env", f"MY_API_KEY={API}", "--env", f"DB_PASSWORD={PASSWORD}",
            "--env", "SM_VLLM_MAX_NUM_BATCHED_TOKENS=4096"]
# profile credentials in no AWS_* variable and in no shape the generic patterns know
KEY_ID = "PEAGLEPROFILEKEYID77"
SECRET = "profileSecretThatMatchesNoPattern4242"
TOKEN = "profileSessionTokenValue9999"


def peagle(env, *args):
    return subprocess.run([forked_peagle(), *args], env={**env, "COLUMNS": "200"}, capture_output=True, text=True,
                          timeout=180, stdin=subprocess.DEVNULL)


def assert_no_env_secret(text):
    assert HF not in text and PASSWORD not in text
    assert f'"MY_API_KEY": "{API}"' not in text and f"MY_API_KEY={API}" not in text


@pytest.mark.parametrize("json_flag", [[], ["--json"]], ids=["human", "json"])
def test_dry_run_plan_masks_secret_looking_env_values(emu, json_flag):
    out = peagle(emu.env, "deploy", "qwen3-coder", "--dry-run", *ENV_ARGS, *json_flag)
    assert out.returncode == 0, out.stderr
    assert_no_env_secret(out.stdout + out.stderr)
    assert '"SM_VLLM_MAX_NUM_BATCHED_TOKENS": "4096"' in out.stdout  # TOKENS is a count, not a secret
    if json_flag:
        env = json.loads(out.stdout)["plan"]["create_model"]["PrimaryContainer"]["Environment"]
        assert env["HF_TOKEN"] == env["MY_API_KEY"] == env["DB_PASSWORD"] == "***"


def test_show_secrets_reveals_them_on_purpose(emu):
    out = peagle(emu.env, "deploy", "qwen3-coder", "--dry-run", *ENV_ARGS, "--json", "--show-secrets")
    env = json.loads(out.stdout)["plan"]["create_model"]["PrimaryContainer"]["Environment"]
    assert (env["HF_TOKEN"], env["MY_API_KEY"], env["DB_PASSWORD"]) == (HF, API, PASSWORD)


def test_a_real_deploy_and_status_never_print_them_but_sagemaker_gets_them(emu):
    out = peagle(emu.env, "deploy", "qwen3-coder", "--name", "secretive", "--role", emu.role_arn, "--yes",
                 "--json", *ENV_ARGS)
    assert out.returncode == 0, out.stderr
    assert_no_env_secret(out.stdout + out.stderr)
    described = emu.client("sagemaker").describe_model(ModelName="secretive")
    assert described["PrimaryContainer"]["Environment"]["HF_TOKEN"] == HF  # masked in output only
    for args in (["status"], ["status", "--json"], ["status", "secretive", "--json"]):
        shown = peagle(emu.env, *args)
        assert shown.returncode == 0, shown.stderr
        assert_no_env_secret(shown.stdout + shown.stderr)


def test_an_aws_error_echoing_the_env_secret_is_masked(emu):
    emu.fail("CreateModel", code="ValidationException", message=f"bad environment HF_TOKEN {HF} {PASSWORD}")
    out = peagle(emu.env, "deploy", "qwen3-coder", "--name", "echo", "--role", emu.role_arn, "--yes", *ENV_ARGS)
    assert out.returncode == 2, out.stderr
    assert "bad environment" in out.stderr
    assert_no_env_secret(out.stdout + out.stderr)


@pytest.mark.parametrize("args,code", [
    (["status"], 3),
    (["status", "--json"], 3),
    (["cleanup", "--all", "--yes", "--json"], 3),
    (["deploy", "qwen3-coder", "--name", "p", "--role", "arn:aws:iam::123456789012:role/r", "--yes"], 2),
])
def test_credentials_from_a_profile_file_are_redacted_too(emu, tmp_path, args, code):
    credentials = tmp_path / "credentials"
    credentials.write_text(f"[leaky]\naws_access_key_id = {KEY_ID}\naws_secret_access_key = {SECRET}\n"
                           f"aws_session_token = {TOKEN}\n")
    env = {k: v for k, v in emu.env.items() if k not in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY",
                                                          "AWS_SESSION_TOKEN")}
    env.update(AWS_PROFILE="leaky", AWS_SHARED_CREDENTIALS_FILE=str(credentials), PEAGLE_DEBUG="1")
    echo = f"user {KEY_ID} secret {SECRET} token {TOKEN}"
    emu.fail("ListEndpoints", code="AccessDeniedException", message=echo)
    emu.fail("CreateModel", code="ValidationException", message=echo)
    out = peagle(env, *args)
    text = out.stdout + out.stderr
    assert out.returncode == code, text
    assert "user ***" in text
    for value in (KEY_ID, SECRET, TOKEN):
        assert value not in text
