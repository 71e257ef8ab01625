"""Verification has three outcomes, everywhere (deploy, update, status, local): verified (the check ran and
agreed), failed (it ran and disagreed), not verified (it could not run: why, and how to check by hand).
Nothing says "ok" for a check that did not run; --json carries each check's state.

vLLM's start-up lines are the check of what the server really parsed; the emulator's scripted endpoints have
no container, so no log group: their start-up check cannot run. Its engine line reads the same for P-EAGLE and
EAGLE-3: P-EAGLE is verified only on a line EAGLE-3 does not write.

Where the lines come from: tests/fixtures/vllm_logs/0.32.0-cpu-*.log are real starts of vLLM 0.32.0 (CPU) through
peagle's entrypoint (P-EAGLE: 2026-11-22; EAGLE-3: 2026-11-28, the real-vLLM tier's K=3 EAGLE-3 server and its
mode-sensitive drafter, which carries mask_hidden). The 0.26.0 lines are the messages an H200 run logged (issue 37),
with vLLM's logger prefix and the file:line of the call in vLLM 0.26.0's source (config/vllm.py:584,
models/llama_eagle3.py:395).
"""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

import pytest

from peagle_deploy.lifecycle.startup_log import StartupInfo, advise, parse_startup
from peagle_deploy.lifecycle.verify import FAILED, NOT_VERIFIED, VERIFIED, overall, startup_check
from tests.cli_runner import run_cli
from tests.forked_peagle import forked_peagle

LOGS = Path(__file__).parent / "fixtures" / "vllm_logs"
LOG_032 = LOGS / "0.32.0-cpu-p-eagle-start.log"
P_EAGLE_3 = {"model": "/opt/ml/additional-model-data-sources/eagle", "method": "eagle3", "num_speculative_tokens": 3,
             "parallel_drafting": True}
EAGLE3_3 = {**P_EAGLE_3, "parallel_drafting": False}
V1_FOR_PARALLEL_0260 = ("(APIServer pid=2211) WARNING 11-27 16:40:02 [vllm.py:584] Model Runner V2 does not yet "
                        "support parallel drafting for EAGLE speculative decoding; using the V1 model runner instead.")
MASK_HIDDEN_SKIPPED_0260 = ("(EngineCore_DP0 pid=2390) WARNING 11-27 16:40:31 [llama_eagle3.py:395] mask_hidden found "
                            "in weights but model is not configured for parallel drafting. Skipping loading "
                            "mask_hidden.")
ENGINE_K = ("(EngineCore_DP0 pid=901) INFO 11-25 14:02:19 [core.py:93] Initializing a V1 LLM engine (v0.32.0) "
            "with config: model='/opt/ml/model', speculative_config=SpeculativeConfig(method='eagle3', "
            "model='/opt/ml/additional-model-data-sources/eagle', num_spec_tokens={k}), tokenizer='/opt/ml/model'")
ENGINE_0260 = ENGINE_K.format(k=3).replace("(v0.32.0)", "(v0.26.0)")


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


def check(lines, expected):
    return startup_check(advise(parse_startup(lines, "cw"), expected), expected, how_to_check="peagle logs ep")


def test_engine_line_alone_verifies_k_but_not_p_eagle():
    """vLLM's engine line is the same for P-EAGLE and EAGLE-3: the mode is not verified (why, how to check),
    method and K are; the same line verifies an EAGLE-3 deploy (parallel drafting is vLLM's opt-in)."""
    p_eagle = check([ENGINE_K.format(k=3)], P_EAGLE_3)
    assert p_eagle.state == NOT_VERIFIED and not p_eagle.ok
    assert p_eagle.parts == {"method": VERIFIED, "K": VERIFIED, "mode": NOT_VERIFIED}
    assert p_eagle.line() == (
        "not verified (vLLM 0.32.0, speculative eagle3 (parallel drafting not logged), K=3: method and K verified, "
        "P-EAGLE not: no line read says parallel drafting, and a sequential EAGLE-3 server logs the same engine "
        "line; check by hand: peagle logs ep)")
    assert overall([p_eagle]) == NOT_VERIFIED
    assert check([ENGINE_K.format(k=5)], P_EAGLE_3).state == FAILED  # K is still checked
    eagle3 = check([ENGINE_K.format(k=3)], EAGLE3_3)
    assert eagle3.state == VERIFIED and eagle3.parts == {}


@pytest.mark.parametrize("line,said", [
    (V1_FOR_PARALLEL_0260, "Model Runner V2 does not yet support parallel drafting for EAGLE speculative decoding"),
    ("(APIServer pid=7) INFO 11-27 16:39:12 [api_utils.py:273] non-default args: {'model': '/opt/ml/model', "
     "'speculative_config': {'model': '/opt/ml/additional-model-data-sources/eagle', 'method': 'eagle3', "
     "'num_speculative_tokens': 3, 'parallel_drafting': True}}",
     "non-default args: speculative_config 'parallel_drafting': True"),
])
def test_a_line_only_p_eagle_writes_verifies_it_and_fails_eagle3(line, said):
    p_eagle = check([line, ENGINE_0260], P_EAGLE_3)
    assert p_eagle.state == VERIFIED and p_eagle.detail.startswith("vLLM 0.26.0, ")
    assert p_eagle.detail.endswith("speculative p-eagle, K=3")
    assert p_eagle.actual["parallel_drafting_line"].startswith(said)
    eagle3 = check([line, ENGINE_0260], EAGLE3_3)
    assert eagle3.state == FAILED
    assert eagle3.detail.startswith("vLLM started with parallel_drafting=True (p-eagle K=3), not eagle3 K=3 (cw; "
                                    f"it logged: {said}")


def test_mask_hidden_skipped_means_eagle3_and_fails_a_p_eagle_deploy():
    lines = [ENGINE_0260, MASK_HIDDEN_SKIPPED_0260]
    p_eagle = check(lines, P_EAGLE_3)
    assert p_eagle.state == FAILED
    assert p_eagle.detail == ("vLLM started with parallel_drafting=False (eagle3 K=3), not p-eagle K=3 (cw; it logged: "
                              "mask_hidden found in weights but model is not configured for parallel drafting. "
                              "Skipping loading mask_hidden.)")
    assert check(lines, EAGLE3_3).state == VERIFIED


def test_real_032_eagle3_start_verifies_eagle3_and_fails_p_eagle():
    """A real EAGLE-3 start of vLLM 0.32.0 (CPU): its non-default args say parallel_drafting False, and it skips
    the drafter's mask_hidden; the P-EAGLE start's args say True. Each verifies its own mode and fails the other."""
    eagle3_log = parse_startup((LOGS / "0.32.0-cpu-eagle3-start.log").read_text(encoding="utf-8").splitlines(), "f")
    assert eagle3_log.parallel_drafting is False and eagle3_log.parallel_drafting_line.startswith("mask_hidden found")
    p_eagle_log = parse_startup(LOG_032.read_text(encoding="utf-8").splitlines(), "f")
    assert p_eagle_log.parallel_drafting is True
    for log, verified, failed in ((eagle3_log, EAGLE3_3, P_EAGLE_3), (p_eagle_log, P_EAGLE_3, EAGLE3_3)):
        model = log.speculative["model"]
        assert startup_check(log, {**verified, "model": model}, how_to_check="x").state == VERIFIED
        assert startup_check(log, {**failed, "model": model}, how_to_check="x").state == FAILED


def test_deploy_without_startup_logs_never_says_ok(emu):
    """Through the installed executable: the start-up check could not run, and says why and how to check."""
    def deploy(*extra):
        return subprocess.run([forked_peagle(), "deploy", "qwen3-coder", "--role", emu.role_arn, "--yes", *extra],
                              env={**emu.env, "COLUMNS": "200"}, capture_output=True, text=True, timeout=300,
                              stdin=subprocess.DEVNULL)

    human = deploy("--name", "no-logs")
    assert human.returncode == 0, human.stderr
    lines = human.stdout.splitlines()
    assert any(line.startswith("  verification: not verified (vLLM start-up") for line in lines), lines
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
    # without the acceptance alarm nothing makes the log group before the container writes to it
    assert run_cli("deploy", "qwen3-coder", "--name", "st", "--role", emu.role_arn, "--yes",
                   "--no-acceptance-alarm").code == 0
    before = run_cli("status", "st")
    assert before.code == 0, before.stderr
    assert "st: vLLM start-up not verified (the log group /aws/sagemaker/Endpoints/st does not exist (yet)" in \
        " ".join(before.stdout.split())
    assert "ResourceNotFoundException" not in before.stdout + before.stderr
    assert "st: acceptance: not watched: no acceptance alarm peagle-acceptance-st" in " ".join(before.stdout.split())
    emu.put_log_lines("st", [ENGINE_K.format(k=3)])  # vLLM's engine line: the same for EAGLE-3
    engine_only = run_cli("status", "st")
    assert "st: vLLM start-up not verified (vLLM 0.32.0, speculative eagle3 (parallel drafting not logged), K=3: " \
        "method and K verified, P-EAGLE not:" in " ".join(engine_only.stdout.split())
    [row] = json.loads(run_cli("status", "st", "--json").stdout)["endpoints"]
    assert row["startup_check"]["state"] == "not verified" and row["startup_check"]["ok"] is False
    assert row["startup_check"]["parts"] == {"method": "verified", "K": "verified", "mode": "not verified"}
    assert "parallel drafting" in row["startup_check"]["how_to_check"]
    emu.put_log_lines("st", [V1_FOR_PARALLEL_0260])  # the line only P-EAGLE writes
    [row] = json.loads(run_cli("status", "st", "--json").stdout)["endpoints"]
    assert row["startup_check"]["state"] == "verified" and row["startup_check"]["ok"] is True
    assert "speculative p-eagle, K=3" in row["startup_check"]["detail"]


def test_deploy_update_and_status_say_the_same_of_an_engine_line(emu, monkeypatch):
    """Deploy prints the start-up check as status does: P-EAGLE not verified from the engine line alone, then
    `update --mode eagle3` (the same line from the new fleet) verified."""
    for key, value in emu.env.items():
        monkeypatch.setenv(key, value)
    emu.put_log_lines("pe", [ENGINE_K.format(k=3)], start_ms=int(time.time() * 1000) + 60_000)
    deployed = run_cli("deploy", "qwen3-coder", "--name", "pe", "--role", emu.role_arn, "--yes")
    assert deployed.code == 0, deployed.stderr
    text = " ".join(deployed.stdout.split())
    assert "verification: not verified" in text
    assert "vLLM start-up: not verified (vLLM 0.32.0, speculative eagle3 (parallel drafting not logged), K=3: " \
        "method and K verified, P-EAGLE not:" in text
    emu.put_log_lines("pe", [ENGINE_K.format(k=3)], start_ms=int(time.time() * 1000) + 600_000)
    updated = run_cli("update", "pe", "--mode", "eagle3", "--yes", "--json")
    assert updated.code == 0, updated.stderr
    [startup] = [c for c in json.loads(updated.stdout)["updated"]["verification"] if c["name"] == "vLLM start-up"]
    assert startup["state"] == "verified", startup
