"""The pieces under `peagle local` and the emulator's container backend: path mapping, the failure line
(real vLLM 0.32 output), the docker argv and its refusal, process-group stop."""

import json
import sys
import time
from pathlib import Path

import pytest

from peagle_deploy.container import build_argv
from peagle_deploy.errors import UsageError
from peagle_deploy.local import docker
from peagle_deploy.local.failure import failure_line
from peagle_deploy.local.mounts import Mounts, docker_volumes, host_environment, map_value
from peagle_deploy.local.process import group_members, launch, stop_group

LOGS = Path(__file__).parent / "fixtures" / "vllm_logs"
SPEC = ('{"model": "/opt/ml/additional-model-data-sources/eagle", "method": "eagle3", '
        '"num_speculative_tokens": 3, "parallel_drafting": true}')
MOUNTS = Mounts(model=Path("/data/target"), channels={"eagle": Path("/data/heads/p-eagle")})


def lines(name):
    return (LOGS / name).read_text(encoding="utf-8").splitlines()


@pytest.mark.parametrize("value,expected", [
    ("/opt/ml/model", "/data/target"),
    ("/opt/ml/model/code", "/data/target/code"),
    (SPEC, SPEC.replace("/opt/ml/additional-model-data-sources/eagle", "/data/heads/p-eagle")),
    ("/opt/ml/model2", "/opt/ml/model2"),  # another path that merely starts the same
    ("/x/opt/ml/model", "/x/opt/ml/model"),
    ("/opt/ml/additional-model-data-sources/eagle2", "/opt/ml/additional-model-data-sources/eagle2"),
    ("a=/opt/ml/model,b=/opt/ml/model", "a=/data/target,b=/data/target"),
    ("8192", "8192"),
])
def test_container_paths_map_as_whole_components(value, expected):
    assert map_value(value, MOUNTS) == expected


def test_host_environment_runs_the_plan_unchanged_but_for_paths_and_port():
    env = {"HF_MODEL_ID": "/opt/ml/model", "SM_VLLM_SPECULATIVE_CONFIG": SPEC, "SM_VLLM_MAX_MODEL_LEN": "8192"}
    mapped = host_environment(env, MOUNTS, port=18080)
    assert mapped["PEAGLE_MODEL_DIR"] == "/data/target" and mapped["PEAGLE_PORT"] == "18080"
    assert json.loads(mapped["SM_VLLM_SPECULATIVE_CONFIG"])["model"] == "/data/heads/p-eagle"
    assert mapped["SM_VLLM_MAX_MODEL_LEN"] == "8192"
    argv = build_argv({**mapped, "SM_VLLM_MODEL": "/data/target"})
    assert argv[:5] == ["vllm", "serve", "/data/target", "--port", "18080"]


def test_entrypoint_refuses_a_bad_port():
    from peagle_deploy.container import ContainerConfigError

    with pytest.raises(ContainerConfigError, match="PEAGLE_PORT must be a TCP port number"):
        build_argv({"HF_MODEL_ID": "m", "PEAGLE_PORT": "80a", "PEAGLE_MODEL_DIR": "/nonexistent"})


@pytest.mark.parametrize("fixture,exit_code,expected", [
    ("0.32.0-cpu-no-mask-hidden.log", 1, "ValueError: mask_hidden not found in weights but model is configured for "
                                         "parallel drafting. Please provide mask_hidden in the weights. (exit code 1)"),
    ("0.32.0-cpu-bad-argument.log", 2, "vllm: error: unrecognized arguments: --bogus-flag (exit code 2)"),
    ("0.32.0-cpu-missing-model.log", None, "huggingface_hub.errors.HFValidationError: Repo id must be in the form "
                                           "'repo_name' or 'namespace/repo_name': '/tmp/h2/nomodel'. Use `repo_type` "
                                           "argument if needed."),
])
def test_failure_line_of_real_vllm_failures(fixture, exit_code, expected):
    assert failure_line(lines(fixture), exit_code) == expected


def test_entrypoint_refusal_wins_and_reason_is_bounded():
    assert failure_line(["peagle-container: error: drafter config x names no mask token id", "Traceback",
                         "ValueError: later"]) == "peagle-container: error: drafter config x names no mask token id"
    assert failure_line([]) == "the container exited without output"
    assert len(failure_line(["ValueError: " + "x" * 5000])) == 1024


def test_docker_run_argv_mounts_both_directories_where_sagemaker_does(tmp_path):
    env = {"HF_MODEL_ID": "/opt/ml/model", "SM_VLLM_SPECULATIVE_CONFIG": SPEC}
    mounts = Mounts(model=tmp_path / "t", channels={"eagle": tmp_path / "d"})
    argv = docker.run_command("peagle-vllm:0.1.0", env, mounts, port=9000, name="dev")
    assert argv == ["docker", "run", "--detach", "--name", "peagle-local-dev", "--publish", "127.0.0.1:9000:8080",
                    "--gpus", "all", "--volume", f"{tmp_path}/t:/opt/ml/model:ro",
                    "--volume", f"{tmp_path}/d:/opt/ml/additional-model-data-sources/eagle:ro",
                    "--env", "HF_MODEL_ID=/opt/ml/model", "--env", f"SM_VLLM_SPECULATIVE_CONFIG={SPEC}",
                    "peagle-vllm:0.1.0"]  # the environment unchanged: the paths exist inside the container
    assert docker_volumes(mounts) == argv[10:13:2]
    assert "--gpus" not in docker.run_command("i", env, mounts, port=1, name="x", gpus=None)


def test_docker_refused_in_one_line_without_an_engine(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(UsageError, match="--docker needs the docker command"):
        docker.require_engine()
    fake = tmp_path / "docker"
    fake.write_text("#!/bin/sh\necho 'Cannot connect to the Docker daemon at unix:///var/run/docker.sock.' >&2\nexit 1\n")
    fake.chmod(0o755)
    with pytest.raises(UsageError, match="no Docker engine answers \\(Cannot connect to the Docker daemon"):
        docker.require_engine()


def test_stop_group_reaches_grandchildren(tmp_path):
    """vLLM runs engine-core processes; stopping the server must stop them too."""
    script = ("import subprocess, sys, time\n"
              "subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(120)'])\n"
              "print('ready', flush=True)\ntime.sleep(120)\n")
    proc = launch({"PATH": "/usr/bin:/bin"}, tmp_path / "log", command=[sys.executable, "-c", script])
    for _ in range(200):
        if (tmp_path / "log").read_text().strip() == "ready" and len(group_members(proc.pid)) == 2:
            break
        time.sleep(0.05)
    assert len(group_members(proc.pid)) == 2
    assert stop_group(proc.pid, grace_s=10) is True
    assert group_members(proc.pid) == []
    assert stop_group(proc.pid) is False  # already gone
