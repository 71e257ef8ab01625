"""A sweep against real vLLM: the installed `peagle sweep` deploys off and P-EAGLE K=3 one after another to
the emulator, whose container backend runs the bundled entrypoint with the tiny models, benches each, reads
acceptance from vLLM's own CloudWatch lines, compares P-EAGLE's greedy output with off's, and tears both down.
Two vLLM starts, one at a time."""

from __future__ import annotations

import json

import pytest

from peagle_deploy.testing import SageMakerEmulator
from peagle_deploy.testing.container_backend import ContainerBackend

from .conftest import K, MAX_MODEL_LEN, START_TIMEOUT_S
from .test_emulator_backend import BACKEND_ENV, plan_uris, run

pytestmark = pytest.mark.real_vllm

# the sweep has no --env: the backend gives each container the tiny models' limits instead
SWEEP_BACKEND_ENV = {**BACKEND_ENV, "SM_VLLM_MAX_MODEL_LEN": MAX_MODEL_LEN, "SM_VLLM_ENFORCE_EAGER": "true"}


@pytest.fixture
def emulator(tiny, vllm_bin, tmp_path):
    model_uri, drafter_uri = plan_uris()
    backend = ContainerBackend({model_uri: tiny.target, drafter_uri: tiny.drafter}, vllm_bin=vllm_bin.parent,
                               env=SWEEP_BACKEND_ENV, startup_timeout_s=START_TIMEOUT_S,
                               log_dir=tmp_path / "logs")
    with SageMakerEmulator.server(backend=backend) as emu:
        yield emu, backend
    assert backend.running() == []


def test_sweep_off_and_p_eagle_measures_real_acceptance_and_leaves_nothing(emulator, tmp_path):
    emu, backend = emulator
    out = run(emu, "sweep", "qwen3-coder", "--modes", "off,p-eagle", "--k", str(K), "-c", "1,2", "-n", "4",
              "--max-tokens", "16", "--budget", "100", "--logs-wait", "30", "--role", emu.role_arn,
              "--out", str(tmp_path / "sweep"), "--yes", "--json", timeout=2 * START_TIMEOUT_S + 300)
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout)["report"]
    assert report["status"] == "done"
    rows = {c["mode"]: c for c in report["configurations"]}
    assert set(rows) == {"off", "p-eagle"} and all(c["status"] == "done" for c in rows.values())
    assert all(set(c["output_tokens_per_s"]) == {"1", "2"} for c in rows.values())
    assert all(v > 0 for c in rows.values() for v in c["output_tokens_per_s"].values())
    # the tiny drafter is shaped so that greedy decoding accepts every draft: vLLM's counters say so
    assert rows["p-eagle"]["k"] == K and rows["p-eagle"]["per_position_acceptance"] == [1.0] * K
    assert rows["p-eagle"]["mean_acceptance_length"] == K + 1
    assert not rows["off"].get("per_position_acceptance")
    # the agreement column: P-EAGLE's greedy answers (read through InvokeEndpoint, with vLLM's logprobs) are
    # off's, token for token
    agreement = rows["p-eagle"]["output_vs_off"]
    assert (agreement["unit"], agreement["prompts"], agreement["identical_share"]) == ("tokens", 16, 1.0)
    assert report["warnings"] == []
    sm = emu.client("sagemaker")
    assert sm.list_endpoints()["Endpoints"] == [] and sm.list_models()["Models"] == []
    assert sm.list_endpoint_configs()["EndpointConfigs"] == []
    assert backend.running() == []
