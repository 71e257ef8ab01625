"""Verification has three outcomes, everywhere (deploy, update, status, local): verified (the check ran and
agreed), failed (it ran and disagreed), not verified (it could not run: why, and how to check by hand).
Nothing says "ok" for a check that did not run; --json carries each check's state.

vLLM's start-up lines are the check of what the server really parsed; the emulator's scripted endpoints have
no container, so no log group: their start-up check cannot run.
"""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

from peagle_deploy.lifecycle.startup_log import StartupInfo, parse_startup
from peagle_deploy.lifecycle.verify import FAILED, NOT_VERIFIED, VERIFIED, overall, startup_check
from tests.cli_runner import run_cli
from tests.forked_peagle import forked_peagle

LOG_032 = Path(__file__).parent / "fixtures" / "vllm_logs" / "0.32.0-cpu-p-eagle-start.log"
P_EAGLE_3 = {"model": "/opt/ml/additional-model-data-sources/eagle", "method": "eagle3", "num_speculative_tokens": 3,
             "parallel_drafting": True}
ENGINE_K = ("(EngineCore_DP0 pid=901) INFO 11-25 14:02:19 [core.py:93] Initializing a V1 LLM engine (v0.32.0) "
            "with config: model='/opt/ml/model', speculative_config=SpeculativeConfig(method='eagle3', "
            "model='/opt/ml/additional-model-data-sources/eagle', num_spec_tokens={k}), tokenizer='/opt/ml/model'")


def test_startup_check_verified_failed_or_not_verified():
    logged = parse_startup(LOG_032.read_text(encoding="utf-8").splitlines(), "file:vllm.log")  # real 0.32.0 start
    verified = startup_check(logged, P_EAGLE_3, how_to_check="look")
    assert verified.state == VERIFIED and verified.ok and "speculative p-eagle, K=3" in verified.detail
    other_k = startup_check(logged, {**P_EAGLE_3, "num_speculative_tokens": 5}, how_to_check="look")
    assert other_k.state == FAILED and not other_k.ok
    assert other_k.detail == "vLLM started with num_speculative_tokens=3 (p-eagle K=3), not p-eagle K=5 (file:vllm.log)"
    not_off = startup_check(logged, None, how_to_check="look")
    assert not_off.state == FAILED and not_off.detail.startswith("vLLM started with speculative decoding (p-eagle K=3)")
    dropped = parse_startup(["INFO 11-25 10:00:00 vLLM server version 0.32.0, serving model /opt/ml/model",
                             "INFO non-default args: {'model': '/opt/ml/model', 'port': 8080}",
                             ENGINE_K.replace("SpeculativeConfig(method='eagle3', model='/opt/ml/additional-model-"
                                              "data-sources/eagle', num_spec_tokens={k})", "None")], "cw")
    assert startup_check(dropped, P_EAGLE_3, how_to_check="look").detail.startswith(
        "vLLM started without speculative decoding, not p-eagle K=3")
    nothing = startup_check(StartupInfo(source="cw", note="the log group /g does not exist (yet)"), P_EAGLE_3,
                            how_to_check="peagle logs ep")
    assert nothing.state == NOT_VERIFIED and not nothing.ok
    assert nothing.line() == "not verified (the log group /g does not exist (yet); check by hand: peagle logs ep)"
    assert overall([verified, nothing]) == NOT_VERIFIED and overall([verified, other_k, nothing]) == FAILED
    assert overall([verified]) == VERIFIED


def test_deploy_without_startup_logs_never_says_ok(emu):
    """Through the installed executable: the start-up check could not run, and says why and how to check."""
    def deploy(*extra):
        return subprocess.run([forked_peagle(), "deploy", "qwen3-coder", "--role", emu.role_arn, "--yes", *extra],
                              env={**emu.env, "COLUMNS": "200"}, capture_output=True, text=True, timeout=300,
                              stdin=subprocess.DEVNULL)

    human = deploy("--name", "no-logs")
    assert human.returncode == 0, human.stderr
    lines = human.stdout.splitlines()
    assert "  verification: not verified" in lines
    [startup] = [ln for ln in lines if ln.startswith("  vLLM start-up:")]
    assert startup.startswith("  vLLM start-up: not verified (the log group /aws/sagemaker/Endpoints/no-logs does "
                              "not exist (yet)")
    assert "check by hand: peagle logs no-logs --region us-east-1" in startup
    assert "ok" not in startup.split() and "ResourceNotFoundException" not in human.stdout
    assert "  speculative config: verified" in lines  # the checks that ran say so

    as_json = deploy("--name", "no-logs-json", "--json")
    doc = json.loads(as_json.stdout)
    [check] = [c for c in doc["deployed"]["verification"] if c["name"] == "vLLM start-up"]
    assert (check["state"], check["ok"], doc["verification"]) == ("not verified", False, "not verified")
    assert check["how_to_check"].startswith("peagle logs no-logs-json")


def test_deploy_whose_vllm_started_with_another_k_fails_and_rolls_back(emu):
    """vLLM's own start-up lines say K=5 where K=3 was deployed: a failed check, exit 6, nothing left behind.
    (The lines are stamped a minute ahead, so they count as this endpoint's, written after it was created.)"""
    emu.put_log_lines("k-drift", [ENGINE_K.format(k=5)], start_ms=int(time.time() * 1000) + 60_000)
    res = subprocess.run([forked_peagle(), "deploy", "qwen3-coder", "--name", "k-drift", "--role", emu.role_arn, "--yes"],
                         env={**emu.env, "COLUMNS": "200"}, capture_output=True, text=True, timeout=300,
                         stdin=subprocess.DEVNULL)
    assert res.returncode == 6, res.stderr
    assert "verification failed: vLLM started with num_speculative_tokens=5 (speculative K=5), not p-eagle K=3" in \
        " ".join(res.stderr.split())
    assert emu.client("sagemaker").list_endpoints()["Endpoints"] == []


def test_status_says_what_it_could_and_could_not_check(emu, monkeypatch):
    for key, value in emu.env.items():
        monkeypatch.setenv(key, value)
    assert run_cli("deploy", "qwen3-coder", "--name", "st", "--role", emu.role_arn, "--yes").code == 0
    before = run_cli("status", "st")
    assert before.code == 0, before.stderr
    assert "st: vLLM start-up not verified (the log group /aws/sagemaker/Endpoints/st does not exist (yet)" in \
        " ".join(before.stdout.split())
    assert "ResourceNotFoundException" not in before.stdout + before.stderr
    emu.put_log_lines("st", [ENGINE_K.format(k=3)])  # the container's start-up, as vLLM logs it
    after = run_cli("status", "st", "--json")
    [row] = json.loads(after.stdout)["endpoints"]
    assert row["startup_check"]["state"] == "verified" and row["startup_check"]["ok"] is True
    assert "speculative eagle3, K=3" in row["startup_check"]["detail"]  # the engine line has no parallel_drafting
