"""The whole story with a real container behind the SageMaker emulator: the installed `peagle` deploys, and the
emulator's container backend runs the project's image (`podman run IMAGE serve`, the S3 data mapped to the tiny
models mounted read-only under /opt/ml); then verify, invoke, bench, metrics (vLLM's `SpecDecoding metrics` lines
in the emulated CloudWatch group), cleanup; and no container is left. One vLLM start."""

from __future__ import annotations

import json
import subprocess

import pytest

from peagle_deploy.testing import SageMakerEmulator
from peagle_deploy.testing.container_backend import ContainerBackend

from .conftest import K, MAX_MODEL_LEN, PEAGLE, RUNTIME_ENV, START_TIMEOUT_S, containers

pytestmark = pytest.mark.container
ALIAS = "qwen3-coder"
DEPLOY_ENV = ["--env", f"SM_VLLM_MAX_MODEL_LEN={MAX_MODEL_LEN}", "--env", "SM_VLLM_ENFORCE_EAGER=true"]
EAGLE_MOUNT = "/opt/ml/additional-model-data-sources/eagle"


def plan_uris() -> tuple[str, str]:
    from peagle_deploy.plan import PlanRequest, build_plan

    container = build_plan(PlanRequest(model=ALIAS, offline=True)).create_model["PrimaryContainer"]
    return (container["ModelDataSource"]["S3DataSource"]["S3Uri"],
            container["AdditionalModelDataSources"][0]["S3DataSource"]["S3Uri"])


@pytest.fixture
def emulator(engine, image, tiny, tmp_path):
    model_uri, drafter_uri = plan_uris()
    backend = ContainerBackend({model_uri: tiny.target, drafter_uri: tiny.drafter}, image=image, engine=engine,
                               env=RUNTIME_ENV, startup_timeout_s=START_TIMEOUT_S, log_dir=tmp_path / "logs")
    with SageMakerEmulator.server(backend=backend) as emu:
        yield emu, backend
    assert backend.running() == []
    assert containers(engine, "peagle-emulator-") == []


def run(emu, *args: str, timeout: float = START_TIMEOUT_S + 120) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in emu.env.items() if k != "COLUMNS"}
    return subprocess.run([str(PEAGLE), *args], env=env, capture_output=True, text=True, timeout=timeout,
                          stdin=subprocess.DEVNULL)


def test_deploy_invoke_bench_metrics_cleanup_with_the_image(emulator, engine, tiny, tmp_path):
    emu, backend = emulator
    name = "image-p-eagle"
    deployed = run(emu, "deploy", ALIAS, "--name", name, "--role", emu.role_arn, "--k", str(K), *DEPLOY_ENV,
                   "--yes", "--json")
    assert deployed.returncode == 0, deployed.stderr
    verification = {c["name"]: c for c in json.loads(deployed.stdout)["deployed"]["verification"]}
    startup = verification["vLLM start-up"]["actual"]
    assert startup["speculative"] == {"model": EAGLE_MOUNT, "method": "eagle3", "num_speculative_tokens": K,
                                      "parallel_drafting": True}  # the path inside the container, as on SageMaker
    [running] = containers(engine, f"peagle-emulator-{name}-")

    invoked = run(emu, "invoke", name, "Write a Python quicksort", "--max-tokens", "12", "--temperature", "0")
    assert invoked.returncode == 0, invoked.stderr
    assert invoked.stdout.strip() == tiny.output_text * 12

    bench = run(emu, "bench", "run", name, "-c", "1,2", "-n", "4", "--max-tokens", "32", "--out",
                str(tmp_path / "bench"), "--no-chart", "--json")
    assert bench.returncode == 0, bench.stderr
    acceptance = json.loads(bench.stdout)["result"]["acceptance"]
    assert acceptance["source"] == f"cloudwatch:/aws/sagemaker/Endpoints/{name}"
    assert acceptance["per_position"] == [1.0] * K and acceptance["mean_acceptance_length"] == K + 1

    metrics = run(emu, "metrics", name, "--since", "15m", "--json")
    assert metrics.returncode == 0, metrics.stderr
    acc = json.loads(metrics.stdout)["acceptance"]
    assert acc["per_position"] == [1.0] * K and acc["acceptance_rate"] == 1.0 and acc["draft_tokens"] > 0

    cleaned = run(emu, "cleanup", name, "--yes")
    assert cleaned.returncode == 0, cleaned.stderr
    assert backend.running() == [] and containers(engine, "peagle-emulator-") == []
    assert emu.client("sagemaker").list_endpoints()["Endpoints"] == []
    assert running.startswith(f"peagle-emulator-{name}-")
