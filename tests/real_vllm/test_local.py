"""`peagle local` with real vLLM: start the qwen3-coder plan's environment on the tiny models (detached),
then invoke, bench and metrics against its URL, stop it; nothing keeps running. One vLLM start."""

from __future__ import annotations

import json
import os
import subprocess

import pytest

from peagle_deploy.local.process import group_members

from .conftest import K, MAX_MODEL_LEN, PEAGLE, RUNTIME_ENV, START_TIMEOUT_S, free_port

pytestmark = pytest.mark.real_vllm


def test_local_start_invoke_bench_metrics_stop(tiny, vllm_bin, tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "SM_VLLM_", "COLUMNS"))}
    env.update(RUNTIME_ENV, PEAGLE_STATE_DIR=str(tmp_path / "state"),
               PATH=f"{vllm_bin.parent}{os.pathsep}{os.environ.get('PATH', '')}")

    def peagle(*args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
        return subprocess.run([str(PEAGLE), *args], env=env, capture_output=True, text=True, timeout=timeout,
                              stdin=subprocess.DEVNULL)

    port = free_port()
    started = peagle("local", "start", str(tiny.target), "--drafter", str(tiny.drafter), "--model", "qwen3-coder",
                     "--k", str(K), "--port", str(port), "--env", f"SM_VLLM_MAX_MODEL_LEN={MAX_MODEL_LEN}",
                     "--env", "SM_VLLM_ENFORCE_EAGER=true", "--timeout", str(int(START_TIMEOUT_S)), "--json",
                     timeout=START_TIMEOUT_S + 60)
    state = tmp_path / "state" / "default.json"
    try:
        assert started.returncode == 0, started.stderr + "\n".join(
            (tmp_path / "state" / "default.log").read_text(errors="replace").splitlines()[-40:])
        result = json.loads(started.stdout)
        url, pid = result["local"]["url"], result["local"]["pid"]
        startup = result["startup"]
        assert startup["version"].startswith("0.") and startup["runner"] in ("V1", "V2")
        assert startup["speculative"] == {"model": str(tiny.drafter), "method": "eagle3",
                                          "num_speculative_tokens": K, "parallel_drafting": True}

        invoked = peagle("invoke", url, "Write a Python quicksort", "--max-tokens", "10", "--temperature", "0")
        assert invoked.returncode == 0 and invoked.stdout.strip() == "!" * 10, invoked.stderr

        bench = peagle("bench", "run", url, "-c", "1,2", "-n", "4", "--max-tokens", "32", "--mode", "p-eagle",
                       "--k", str(K), "--out", str(tmp_path / "bench"), "--no-chart", "--json")
        assert bench.returncode == 0, bench.stderr
        acceptance = json.loads(bench.stdout)["result"]["acceptance"]
        assert acceptance["per_position"] == [1.0] * K and acceptance["mean_acceptance_length"] == K + 1

        metrics = peagle("metrics", url, "--window", "0s", "--json")
        assert metrics.returncode == 0, metrics.stderr
        acc = json.loads(metrics.stdout)["acceptance"]
        assert acc["per_position"] == [1.0] * K and acc["mean_acceptance_length"] == K + 1

        status = peagle("local", "status", "--json")
        [row] = json.loads(status.stdout)["servers"]
        assert row["healthy"] and row["startup"]["version"] == startup["version"]
    finally:
        stopped = peagle("local", "stop", timeout=120)
    assert stopped.returncode == 0 and "stopped default" in stopped.stdout
    assert not state.exists()
    assert group_members(pid) == []
