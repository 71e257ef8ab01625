"""`peagle local start --docker` with podman and no docker command on PATH (peagle finds podman itself): the RUN_AS=peagle image
serves the tiny models as uid 1000; invoke, status and logs work; `peagle local stop` leaves no container."""

from __future__ import annotations

import json
import os
import shutil

import pytest

from .conftest import BIN, K, MAX_MODEL_LEN, RUNTIME_ENV, START_TIMEOUT_S, engine_run, free_port, peagle, record

pytestmark = pytest.mark.container
NAME = "tier"


def without_docker_env(tmp_path) -> dict[str, str]:
    """PATH: this environment's bin (peagle) and every PATH directory that holds no `docker` command (podman and
    the helpers it runs, such as iptables, stay)."""
    dirs = [d for d in os.environ["PATH"].split(os.pathsep) if d and not os.path.exists(os.path.join(d, "docker"))]
    path = os.pathsep.join([str(BIN), *dirs])
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "SM_VLLM_", "PEAGLE_ENGINE"))}
    env.update(PATH=path, PEAGLE_STATE_DIR=str(tmp_path / "state"),
               PEAGLE_ENGINE_OPTIONS=os.environ.get("PEAGLE_ENGINE_OPTIONS", ""))
    assert shutil.which("docker", path=path) is None and shutil.which("podman", path=path)
    return env


def test_local_start_finds_podman_without_docker_then_stop_leaves_no_container(engine, image_nonroot, tiny, tmp_path):
    env = without_docker_env(tmp_path)
    port = free_port()
    runtime = [arg for key, value in RUNTIME_ENV.items() for arg in ("--env", f"{key}={value}")]
    started = peagle("local", "start", str(tiny.target), "--drafter", str(tiny.drafter), "--model", "qwen3-coder",
                     "--k", str(K), "--docker", "--image", image_nonroot, "--gpus", "none", "--port", str(port),
                     "--name", NAME, "--env", f"SM_VLLM_MAX_MODEL_LEN={MAX_MODEL_LEN}", "--env",
                     "SM_VLLM_ENFORCE_EAGER=true", *runtime, "--timeout", str(int(START_TIMEOUT_S)), "--json",
                     env=env, timeout_s=START_TIMEOUT_S + 120)
    container = f"peagle-local-{NAME}"
    try:
        assert started.code == 0, started.stderr
        result = started.json()
        record("peagle local start --docker (RUN_AS=peagle image) to /ping answering", result["elapsed_s"])
        assert result["local"]["engine"]["name"] == "podman" and result["local"]["url"] == f"http://127.0.0.1:{port}"
        startup = result["startup"]
        assert startup["version"].startswith("0.32")
        assert startup["speculative"] == {"model": "/opt/ml/additional-model-data-sources/eagle", "method": "eagle3",
                                          "num_speculative_tokens": K, "parallel_drafting": True}
        uid = engine_run(engine, "exec", container, "id", "-u")
        assert uid.stdout.strip() == "1000", uid.stdout + uid.stderr  # the RUN_AS=peagle variant

        invoked = peagle("invoke", result["local"]["url"], "Write a Python quicksort", "--max-tokens", "10",
                         "--temperature", "0", env=env)
        assert invoked.code == 0 and invoked.stdout.strip() == tiny.output_text * 10, invoked.stderr

        status = peagle("local", "status", "--json", env=env)
        [row] = json.loads(status.stdout)["servers"]
        assert row["running"] and row["healthy"] and row["startup"]["version"] == startup["version"]
        logs = peagle("local", "logs", "--name", NAME, "-n", "2000", "--json", env=env)
        assert any(line.startswith("peagle-container: exec vllm serve /opt/ml/model") for line in logs.json()["lines"])
    finally:
        stopped = peagle("local", "stop", "--name", NAME, env=env, timeout_s=180)
    assert stopped.code == 0 and f"stopped {NAME}" in stopped.stdout, stopped.stderr
    listed = engine_run(engine, "ps", "--all", "--format", "{{.Names}}")
    assert container not in listed.stdout.split()
    assert not (tmp_path / "state" / f"{NAME}.json").exists()


def test_local_start_refuses_in_one_line_when_podman_does_not_answer(tiny, tmp_path):
    """Settings the engine refuses: one line naming it and the fix, exit 2, nothing started."""
    env = without_docker_env(tmp_path)
    env["PEAGLE_ENGINE_OPTIONS"] = "--runtime /nonexistent/runtime"
    out = peagle("local", "start", str(tiny.target), "--drafter", str(tiny.drafter), "--docker", "--image", "x",
                 "--name", NAME, env=env)
    assert out.code == 2, out.stderr
    [line] = out.stderr.strip().splitlines()
    assert line.startswith("error: --docker: no container engine answers (podman --runtime /nonexistent/runtime: ")
    assert "PEAGLE_ENGINE_OPTIONS" in line
