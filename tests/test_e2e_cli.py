"""`peagle` processes against the emulator served on loopback (AWS_ENDPOINT_URL): the first test through the
installed executable (deploy, status, cleanup as a user's CI runs them), the others forked (tests/forked_peagle.py)."""

import json
import subprocess

import pytest


from .conftest import PEAGLE
from .forked_peagle import forked_peagle


def peagle(emu, *args, env_extra=None, timeout=120, program=None):
    env = {**emu.env, **(env_extra or {}), "COLUMNS": "200"}
    return subprocess.run([program or forked_peagle(), *args], env=env, capture_output=True, text=True, timeout=timeout,
                          stdin=subprocess.DEVNULL)


def test_deploy_status_cleanup_leaves_unmanaged_alone(emu):
    sm = emu.client("sagemaker")
    emu.create_endpoint_stack("team-model")  # not peagle's: must survive cleanup --all

    emu.script_endpoints(creating_polls=1)
    deployed = peagle(emu, "deploy", "qwen3-coder", "--name", "e2e-qwen", "--role", emu.role_arn, "--yes", "--json",
                      program=PEAGLE)
    assert deployed.returncode == 0, deployed.stderr
    result = json.loads(deployed.stdout)
    assert result["deployed"]["status"] == "InService"
    states = {check["name"]: check["state"] for check in result["deployed"]["verification"]}
    assert [name for name, state in states.items() if state != "verified"] == ["vLLM start-up"]
    assert states["vLLM start-up"] == "not verified" and result["verification"] == "not verified"
    assert result["plan"]["resolution_source"] == "sdk"  # the spec came from the emulated JumpStart bucket

    status = peagle(emu, "status", "--json", program=PEAGLE)
    assert status.returncode == 0, status.stderr
    assert [(e["name"], e["mode"], e["k"]) for e in json.loads(status.stdout)["endpoints"]] == [("e2e-qwen", "p-eagle", 3)]

    human = peagle(emu, "status", program=PEAGLE)
    assert "e2e-qwen" in human.stdout and "team-model" not in human.stdout

    refused = peagle(emu, "cleanup", "--all", program=PEAGLE)
    assert refused.returncode == 2 and "--yes" in refused.stderr  # no terminal, no --yes: refuse

    cleaned = peagle(emu, "cleanup", "--all", "--yes", "--json", program=PEAGLE)
    assert cleaned.returncode == 0, cleaned.stderr
    deleted = {(d["kind"], d["name"]) for d in json.loads(cleaned.stdout)["deleted"]}
    assert deleted == {("endpoint", "e2e-qwen"), ("endpoint_config", "e2e-qwen"), ("model", "e2e-qwen"),
                       ("alarm", "peagle-acceptance-e2e-qwen"),  # the acceptance alarm and its metric filters
                       *(("metric_filter", f"/aws/sagemaker/Endpoints/e2e-qwen:peagle-acceptance-e2e-qwen-k3-{v}")
                         for v in ("accepted", "drafted"))}
    assert [e["EndpointName"] for e in sm.list_endpoints()["Endpoints"]] == ["team-model"]
    assert [c["EndpointConfigName"] for c in sm.list_endpoint_configs()["EndpointConfigs"]] == ["team-model"]
    assert [m["ModelName"] for m in sm.list_models()["Models"]] == ["team-model"]


def test_failed_endpoint_exit_6_and_nothing_left(emu):
    emu.script_endpoints(final="Failed", reason="vLLM: drafter config.json has no mask token id")
    out = peagle(emu, "deploy", "gpt-oss-20b", "--name", "e2e-fail", "--role", emu.role_arn, "--yes")
    assert out.returncode == 6
    last = out.stderr.strip().splitlines()[-1]
    assert last.startswith("error: endpoint e2e-fail is Failed: vLLM: drafter config.json has no mask token id")
    assert "rolled back" in last and "Traceback" not in out.stderr
    assert emu.client("sagemaker").list_models()["Models"] == []


def test_real_deploy_without_role_is_refused_before_any_write(emu):
    out = peagle(emu, "deploy", "qwen3-coder", "--yes")
    assert out.returncode == 2 and "--role" in out.stderr
    assert not any(c.startswith("Create") for c in emu.calls)


SECRET_ID = "AKIAPEAGLELEAKTEST01"
SECRET_KEY = "peagleLeakTestSecretKey/DoNotPrint+1234567"
SESSION = "FwoGZXIvYXdzEPEAGLELEAKTESTSESSIONTOKEN0123456789"


@pytest.mark.parametrize("args,code", [
    (["status"], 3),  # ListEndpoints: AccessDenied echoing the key id and token
    (["deploy", "qwen3-coder", "--role", "arn:aws:iam::123456789012:role/r", "--yes"], 2),  # CreateModel echoes all
    (["cleanup", "nope", "--yes"], 3),  # the planner lists every endpoint first: ListEndpoints is denied
])
def test_credentials_never_printed_even_when_commands_fail(emu, args, code):
    creds = {"AWS_ACCESS_KEY_ID": SECRET_ID, "AWS_SECRET_ACCESS_KEY": SECRET_KEY, "AWS_SESSION_TOKEN": SESSION,
             "PEAGLE_DEBUG": "1"}
    emu.fail("CreateModel", code="ValidationException", message=f"echoing {SECRET_ID} {SECRET_KEY} {SESSION}")
    emu.fail("DescribeEndpoint", code="ValidationException", message=f"Could not find {SECRET_KEY}")
    emu.fail("ListEndpoints", code="AccessDeniedException", message=f"user {SECRET_ID} token {SESSION}")
    out = peagle(emu, *args, env_extra=creds)
    text = out.stdout + out.stderr
    assert out.returncode == code, text
    for secret in (SECRET_ID, SECRET_KEY, SESSION):
        assert secret not in text


def test_crash_with_debug_traceback_is_redacted(monkeypatch, capsys):
    """An unexpected exception carrying credentials: one redacted line (and a redacted traceback)."""
    from peagle_deploy import lifecycle

    from .cli_runner import run_cli

    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", SECRET_KEY)
    monkeypatch.setenv("PEAGLE_DEBUG", "1")

    def crash(*_args, **_kwargs):
        raise RuntimeError(f"boom aws_secret_access_key={SECRET_KEY} key {SECRET_ID}")

    monkeypatch.setattr(lifecycle, "report", crash)
    result = run_cli("status")
    assert result.code == 1
    assert "unexpected RuntimeError" in result.stderr and "Traceback" in result.stderr
    assert SECRET_KEY not in result.stderr + result.stdout and SECRET_ID not in result.stderr + result.stdout
