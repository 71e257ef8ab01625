"""The whole story against real vLLM: the installed `peagle` deploys to the emulator, whose container
backend runs the bundled entrypoint with the tiny models (greedy acceptance 1.0 at every position);
then verify, invoke, bench, metrics (vLLM's own `SpecDecoding metrics` lines from the emulated CloudWatch
group), cleanup; and nothing is left running. Two vLLM starts: one that serves, one that dies."""

from __future__ import annotations

import json
import subprocess
import time

import pytest

from peagle_deploy.local.process import group_members
from peagle_deploy.testing import SageMakerEmulator
from peagle_deploy.testing.container_backend import ContainerBackend

from .conftest import K, MAX_MODEL_LEN, PEAGLE, RUNTIME_ENV, START_TIMEOUT_S

pytestmark = pytest.mark.real_vllm

ALIAS = "qwen3-coder"
# vLLM logs its stats every VLLM_LOG_STATS_INTERVAL seconds (10 by default): 1 s keeps the tier short
BACKEND_ENV = {**RUNTIME_ENV, "VLLM_LOG_STATS_INTERVAL": "1"}
DEPLOY_ENV = ["--env", f"SM_VLLM_MAX_MODEL_LEN={MAX_MODEL_LEN}", "--env", "SM_VLLM_ENFORCE_EAGER=true"]


def plan_uris() -> tuple[str, str]:
    from peagle_deploy.plan import PlanRequest, build_plan

    container = build_plan(PlanRequest(model=ALIAS, offline=True)).create_model["PrimaryContainer"]
    return (container["ModelDataSource"]["S3DataSource"]["S3Uri"],
            container["AdditionalModelDataSources"][0]["S3DataSource"]["S3Uri"])


@pytest.fixture
def emulator(tiny, vllm_bin, tmp_path):
    model_uri, drafter_uri = plan_uris()
    backend = ContainerBackend({model_uri: tiny.target, drafter_uri: tiny.drafter}, vllm_bin=vllm_bin.parent,
                               env=BACKEND_ENV, startup_timeout_s=START_TIMEOUT_S, log_dir=tmp_path / "logs")
    with SageMakerEmulator.server(backend=backend) as emu:
        yield emu, backend
    assert backend.running() == []


def run(emu, *args: str, timeout: float = START_TIMEOUT_S + 120) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in emu.env.items() if k != "COLUMNS"}
    return subprocess.run([str(PEAGLE), *args], env=env, capture_output=True, text=True, timeout=timeout,
                          stdin=subprocess.DEVNULL)


def test_deploy_verify_invoke_bench_metrics_cleanup(emulator, tmp_path):
    emu, backend = emulator
    name = "real-p-eagle"
    deployed = run(emu, "deploy", ALIAS, "--name", name, "--role", emu.role_arn, "--k", str(K), *DEPLOY_ENV,
                   "--yes", "--json")
    assert deployed.returncode == 0, deployed.stderr
    verification = {c["name"]: c for c in json.loads(deployed.stdout)["deployed"]["verification"]}
    assert all(c["ok"] for c in verification.values())
    startup = verification["vLLM start-up"]["actual"]
    assert startup["version"].startswith("0.")
    assert startup["speculative"] == {"model": str(tiny_drafter(backend)), "method": "eagle3",
                                      "num_speculative_tokens": K, "parallel_drafting": True}
    assert startup["runner"] in ("V1", "V2")
    pid = backend._containers[name].process.pid

    invoked = run(emu, "invoke", name, "Write a Python quicksort", "--max-tokens", "12", "--temperature", "0")
    assert invoked.returncode == 0, invoked.stderr
    assert invoked.stdout.strip() == "!" * 12  # the tiny target always says "!"

    bench = run(emu, "bench", "run", name, "-c", "1,2", "-n", "4", "--max-tokens", "32", "--out",
                str(tmp_path / "bench"), "--no-chart", "--json")
    assert bench.returncode == 0, bench.stderr
    acceptance = json.loads(bench.stdout)["result"]["acceptance"]
    assert acceptance["source"] == f"cloudwatch:/aws/sagemaker/Endpoints/{name}"
    assert acceptance["per_position"] == [1.0] * K and acceptance["mean_acceptance_length"] == K + 1

    metrics = run(emu, "metrics", name, "--since", "15m", "--json")
    assert metrics.returncode == 0, metrics.stderr
    acc = json.loads(metrics.stdout)["acceptance"]
    assert acc["per_position"] == [1.0] * K and acc["mean_acceptance_length"] == K + 1
    assert acc["acceptance_rate"] == 1.0 and acc["draft_tokens"] > 0

    cleaned = run(emu, "cleanup", name, "--yes")
    assert cleaned.returncode == 0, cleaned.stderr
    assert backend.running() == [] and _gone(pid)
    assert emu.client("sagemaker").list_endpoints()["Endpoints"] == []


def test_container_that_dies_fails_the_endpoint_with_vllms_line(emulator):
    emu, backend = emulator
    out = run(emu, "deploy", ALIAS, "--name", "real-bad-arg", "--role", emu.role_arn, *DEPLOY_ENV,
              "--env", "SM_VLLM_NO_SUCH_FLAG=true", "--yes")
    assert out.returncode == 6, out.stderr
    last = out.stderr.strip().splitlines()[-1]
    assert last.startswith("error: endpoint real-bad-arg is Failed: vllm: error: unrecognized arguments: "
                           "--no-such-flag (exit code 2)"), last
    assert "rolled back" in last
    sm = emu.client("sagemaker")
    assert sm.list_endpoints()["Endpoints"] == [] and sm.list_models()["Models"] == []
    assert backend.running() == []


def tiny_drafter(backend: ContainerBackend):
    return next(path for prefix, path in backend.data.items() if "eagle" in prefix)


def _gone(pid: int) -> bool:
    for _ in range(100):  # bounded: vLLM's engine processes may take a moment after the group leader
        if not group_members(pid):
            return True
        time.sleep(0.1)
    return not group_members(pid)

