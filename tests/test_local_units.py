"""The pieces under `peagle local` and the emulator's container backend: path mapping, the failure line
(real vLLM 0.32 output), the engine argv and its refusals, process-group stop."""

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from peagle_deploy.container import build_argv
from peagle_deploy.errors import UsageError
from peagle_deploy.local import engine
from peagle_deploy.local.mounts import Mounts, docker_volumes, host_environment, map_value
from peagle_deploy.local.process import group_members, launch, stop_group
from peagle_deploy.vllm_failure import failure_index, failure_line

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


def test_failure_line_of_a_pydantic_error_is_its_reason_not_the_docs_url():
    """vLLM 0.32 given "method": "eagle-3" (no entrypoint check in between): the last line is pydantic's docs URL."""
    log = lines("0.32.0-cpu-method-typo.log")
    assert log[-1].strip().startswith("For further information visit https://errors.pydantic.dev/")
    reason = failure_line(log, 1)
    assert reason.startswith("SpeculativeConfig: method: Input should be 'ngram', 'medusa', ")
    assert reason.endswith(" 'ngram_gpu' or 'dspark' (exit code 1)") and "input_value" not in reason
    assert log[failure_index(log)].lstrip().startswith("Input should be")  # the line `peagle logs` highlights
    # a model validator's error (the shape of vllm-project/vllm#26161), logged with vLLM's process prefix
    value_error = ["(APIServer pid=7) pydantic_core._pydantic_core.ValidationError: 1 validation error for ModelConfig",
                   "(APIServer pid=7)   Value error, Expecting value: line 1 column 1 (char 0) [type=value_error, "
                   "input_value=ArgsKwargs((), {'model': '/opt/ml/model'}), input_type=ArgsKwargs]",
                   "(APIServer pid=7)     For further information visit https://errors.pydantic.dev/2.12/v/value_error"]
    assert failure_line(value_error) == "ModelConfig: Value error, Expecting value: line 1 column 1 (char 0)"
    assert failure_index(value_error) == 1


def test_entrypoint_refusal_wins_and_reason_is_bounded():
    assert failure_line(["peagle-container: error: drafter config x names no mask token id", "Traceback",
                         "ValueError: later"]) == "peagle-container: error: drafter config x names no mask token id"
    assert failure_line([]) == "the container exited without output"
    assert len(failure_line(["ValueError: " + "x" * 5000])) == 1024


def test_docker_run_argv_mounts_both_directories_where_sagemaker_does(tmp_path):
    env = {"HF_MODEL_ID": "/opt/ml/model", "SM_VLLM_SPECULATIVE_CONFIG": SPEC}
    mounts = Mounts(model=tmp_path / "t", channels={"eagle": tmp_path / "d"})
    docker = engine.Engine(name="docker")
    run = engine.run_command(docker, "peagle-vllm:0.1.0", {**env, "HF_TOKEN": "hf_secret"}, mounts, port=9000,
                             container="peagle-local-dev")
    assert run.argv == ["docker", "run", "--detach", "--name", "peagle-local-dev", "--publish", "127.0.0.1:9000:8080",
                        "--shm-size", "8g", "--gpus", "all", "--volume", f"{tmp_path}/t:/opt/ml/model:ro",
                        "--volume", f"{tmp_path}/d:/opt/ml/additional-model-data-sources/eagle:ro",
                        "--env", "HF_MODEL_ID", "--env", "HF_TOKEN", "--env", "SM_VLLM_SPECULATIVE_CONFIG",
                        "peagle-vllm:0.1.0", "serve"]
    # the values travel in the client's environment (`--env KEY` reads them there), never on the command line
    assert run.env == {**env, "HF_TOKEN": "hf_secret"}  # unchanged: the paths exist inside the container
    assert run.client_env({"PATH": "/bin", "HF_TOKEN": "other"}) == {"PATH": "/bin", **run.env}
    assert not any("hf_secret" in arg or SPEC in arg for arg in run.argv)
    assert docker_volumes(mounts) == run.argv[12:15:2]
    assert "--gpus" not in engine.run_command(docker, "i", env, mounts, port=1, container="x", gpus=None).argv


def test_engine_options_split_at_run_and_host_network_binds_the_port_itself(tmp_path):
    podman = engine.named_engine("podman", "--runtime runc --cgroup-manager cgroupfs run --network host "
                                           "--ulimit nofile=1024:1024 --ipc=host", environ={}, which=lambda n: None)
    assert podman.global_options == ["--runtime", "runc", "--cgroup-manager", "cgroupfs"]
    assert podman.run_options == ["--network", "host", "--ulimit", "nofile=1024:1024", "--ipc=host"]
    assert podman.host_network
    mounts = Mounts(model=tmp_path / "t")
    run = engine.run_command(podman, "img", {"HF_MODEL_ID": "/opt/ml/model"}, mounts, port=9001, container="c",
                             gpus=None, detach=False, extra_env={"VLLM_CPU_KVCACHE_SPACE": "1"})
    assert run.argv[:12] == ["podman", "--runtime", "runc", "--cgroup-manager", "cgroupfs", "run", "--rm", "--name",
                             "c", "--network", "host", "--ulimit"]
    assert "--publish" not in run.argv and run.argv[-2:] == ["img", "serve"]
    assert "--shm-size" not in run.argv  # --ipc=host in the options replaces peagle's /dev/shm size
    assert [run.argv[i + 1] for i, a in enumerate(run.argv) if a == "--env"] == sorted(run.env)
    assert run.env == {"HF_MODEL_ID": "/opt/ml/model", "PEAGLE_PORT": "9001", "SM_VLLM_HOST": "127.0.0.1",
                       "VLLM_CPU_KVCACHE_SPACE": "1"}
    assert podman.describe() == "podman --runtime runc --cgroup-manager cgroupfs"
    for options in ("--network=host", "run --net=host", "run --net host"):
        assert engine.named_engine("podman", options, environ={}).host_network == ("run" in options)
    assert engine.parse_options(None) == ([], [])
    assert engine.gpu_options(podman, "all") == ["--device", "nvidia.com/gpu=all"]
    assert engine.gpu_options(podman, "device=0,1") == ["--device", "nvidia.com/gpu=0", "--device", "nvidia.com/gpu=1"]
    assert engine.gpu_options(engine.Engine(name="docker"), "2") == ["--gpus", "2"]
    with pytest.raises(UsageError, match="--gpus '2' has no Podman equivalent"):
        engine.gpu_options(podman, "2")
    with pytest.raises(UsageError, match="not valid shell quoting"):
        engine.parse_options("run --env 'A=1")


class Engines:
    """Stand-ins for the engines' `info`: name -> (exit code, stderr)."""

    def __init__(self, answers):
        self.answers, self.calls = answers, []

    def which(self, name):
        return f"/usr/bin/{name}" if name in self.answers else None

    def run(self, argv, **kwargs):
        self.calls.append(argv)
        code, err = self.answers[argv[0]]
        return subprocess.CompletedProcess(argv, code, stdout="" if code else "4.3.1\n", stderr=err)


def test_engine_found_by_asking_each_on_path(monkeypatch):
    docker_down = ("docker", (1, "Cannot connect to the Docker daemon at unix:///var/run/docker.sock."))
    engines = Engines(dict([docker_down, ("podman", (0, ""))]))
    found = engine.find_engine(None, "--runtime runc run --network host", environ={}, runner=engines.run,
                               which=engines.which)
    assert found.name == "podman" and found.global_options == ["--runtime", "runc"]
    assert engines.calls == [["docker", "--runtime", "runc", "info", "--format", "{{.ServerVersion}}"],
                             ["podman", "--runtime", "runc", "info", "--format", "{{.Version.Version}}"]]
    # the environment variables are the defaults; the options win over them
    engines = Engines({"podman": (0, ""), "docker": (0, "")})
    found = engine.find_engine(environ={"PEAGLE_ENGINE": "podman", "PEAGLE_ENGINE_OPTIONS": "--log-level error"},
                               runner=engines.run, which=engines.which)
    assert (found.name, found.global_options) == ("podman", ["--log-level", "error"])
    assert engine.find_engine("docker", "", environ={"PEAGLE_ENGINE": "podman"}, runner=engines.run,
                              which=engines.which) == engine.Engine(name="docker")


@pytest.mark.parametrize("answers,requested,message", [
    ({}, None, "--docker needs the docker or podman command, which is not on PATH"),
    ({"docker": (0, "")}, "podman", "--docker needs the podman command, which is not on PATH"),
    ({"docker": (0, "")}, "containerd", "--engine 'containerd' is not one of docker, podman"),
    ({"docker": (1, "Cannot connect to the Docker daemon"), "podman": (125, "Error: cannot re-exec process")}, None,
     "no container engine answers (docker: Cannot connect to the Docker daemon; podman: Error: cannot re-exec"),
])
def test_engine_refused_in_one_line(answers, requested, message):
    engines = Engines(answers)
    with pytest.raises(UsageError) as raised:
        engine.find_engine(requested, None, environ={}, runner=engines.run, which=engines.which)
    assert message in str(raised.value) and "\n" not in str(raised.value)


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


# issue 49 item 6: `peagle local start` without vLLM said "cannot start vllm: No such file or directory (exit code
# 127)", exit 6, after starting; now one line before anything starts, exit 2, naming what to do and whether a GPU
# is visible.

@pytest.mark.parametrize("gpu", [False, True], ids=["no-gpu", "gpu"])
def test_start_without_vllm_on_path_says_what_to_do_before_starting(tmp_path, monkeypatch, gpu):
    from peagle_deploy.local import runner

    from .cli_runner import run_cli
    from .local_helpers import model_dirs

    target, drafter = model_dirs(tmp_path / "models")
    monkeypatch.setattr(runner, "gpu_visible", lambda: (gpu, "nvidia-smi lists 1 GPU" if gpu else
                                                         "no nvidia-smi on PATH and no /dev/nvidia0"))
    env = {"PATH": str(tmp_path / "empty-bin"), "HOME": str(tmp_path), "PEAGLE_STATE_DIR": str(tmp_path / "state")}
    done = run_cli("local", "start", str(target), "--drafter", str(drafter), "--model", "qwen3-coder", env=env,
                   cwd=tmp_path)
    assert done.code == 2, done.stderr
    [line] = done.stderr.strip().splitlines()
    assert line.startswith("error: no vllm on PATH, so the entrypoint cannot start vLLM"), line
    assert ("GPU visible here (nvidia-smi lists 1 GPU)" if gpu else
            "no GPU is visible here (no nvidia-smi on PATH and no /dev/nvidia0)") in line, line
    assert "install vLLM (docs/vllm-cpu.md" in line and "or run the image with --docker" in line, line
    assert not (tmp_path / "state").exists() or not list((tmp_path / "state").rglob("*.json"))  # nothing started


def test_gpu_visibility_is_read_from_what_the_machine_shows(tmp_path, monkeypatch):
    from peagle_deploy.local import runner

    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setattr(runner, "NVIDIA_DEVICE", tmp_path / "nvidia0")
    visible, why = runner.gpu_visible()
    assert not visible and why == f"no nvidia-smi on PATH and no {tmp_path / 'nvidia0'}"
    (tmp_path / "nvidia0").touch()
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    assert runner.gpu_visible() == (False, "CUDA_VISIBLE_DEVICES is empty: no GPU is given to processes here")
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES")
    assert runner.gpu_visible() == (True, f"{tmp_path / 'nvidia0'} exists")
