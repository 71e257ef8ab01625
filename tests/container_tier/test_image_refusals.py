"""The image's entrypoint refuses a bad configuration in one line with exit 2, before vLLM starts (no vLLM import:
seconds, where vLLM itself would print a pydantic error after loading torch)."""

from __future__ import annotations

import json
import subprocess
import time

import pytest

from peagle_deploy.local import engine as engine_mod

from .conftest import RUNTIME_ENV, free_port, plan_environment, tiny_mounts

pytestmark = pytest.mark.container


def run_once(engine, image, environment, mounts, name, *args: str):
    run = engine_mod.run_command(engine, image, environment, mounts, port=free_port(), container=name, gpus=None,
                                 detach=False, extra_env=RUNTIME_ENV)
    argv = [*run.argv[:-1], *args] if args else run.argv  # the entrypoint's own arguments instead of `serve`
    began = time.monotonic()
    out = subprocess.run(argv, env=run.client_env(), capture_output=True, text=True, timeout=300)
    return out, time.monotonic() - began


@pytest.mark.parametrize("parallel", [False, True], ids=["eagle3-sequential", "p-eagle"])
def test_method_typo_refused_in_one_line_before_vllm(engine, image, tiny, parallel):
    environment = plan_environment()
    spec = json.loads(environment["SM_VLLM_SPECULATIVE_CONFIG"])
    spec.update(method="eagle-3", parallel_drafting=parallel)
    environment["SM_VLLM_SPECULATIVE_CONFIG"] = json.dumps(spec)
    out, took = run_once(engine, image, environment, tiny_mounts(tiny), "peagle-tier-typo")
    assert out.returncode == 2, out.stdout + out.stderr
    lines = (out.stdout + out.stderr).strip().splitlines()
    assert lines == ["peagle-container: error: SM_VLLM_SPECULATIVE_CONFIG method 'eagle-3' is not one vLLM "
                     "0.32.0+cpu accepts; did you mean \"eagle3\"?"], lines
    assert took < 60, took  # no vLLM start (it dies ~8.5 s into its own start-up on this machine)


def test_missing_drafter_channel_refused(engine, image, tiny):
    out, _ = run_once(engine, image, plan_environment(), tiny_mounts(tiny, drafter=False), "peagle-tier-nochannel")
    assert out.returncode == 2
    assert (out.stdout + out.stderr).strip() == (
        "peagle-container: error: drafter directory /opt/ml/additional-model-data-sources/eagle does not exist "
        "(is the eagle channel mounted?)")


def test_print_args_inside_the_image(engine, image, tiny):
    """The argv the image's entrypoint would exec, with the plan's environment and the model mounted."""
    out, _ = run_once(engine, image, plan_environment(), tiny_mounts(tiny), "peagle-tier-args", "--print-args")
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("vllm serve /opt/ml/model --port ")
    assert "--max-model-len 512" in out.stdout and "--tensor-parallel-size 1" in out.stdout
