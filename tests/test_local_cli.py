"""`peagle local` through the installed executable, with a stand-in `vllm` on PATH (the real one is in
tests/real_vllm/test_local.py): start -> invoke/metrics -> status -> stop, failures, refusals."""

import json
import signal
import subprocess
import time

import pytest

from peagle_deploy.local.process import group_members

from .local_helpers import PEAGLE, free_port, model_dirs, peagle, stand_in_env


@pytest.fixture
def dirs(tmp_path):
    return model_dirs(tmp_path / "models")


def test_start_invoke_metrics_status_stop(tmp_path, dirs):
    target, drafter = dirs
    env, port = stand_in_env(tmp_path), free_port()
    started = peagle("local", "start", str(target), "--drafter", str(drafter), "--model", "qwen3-coder", "--k", "5",
                     "--port", str(port), "--env", "SM_VLLM_MAX_MODEL_LEN=512", "--json", env=env)
    assert started.returncode == 0, started.stderr
    result = json.loads(started.stdout)
    server = result["local"]
    pid = server["pid"]
    try:
        assert server["url"] == f"http://127.0.0.1:{port}"
        # the plan's environment (qwen3-coder's shipped spec), mapped: the drafter channel and /opt/ml/model
        assert server["environment"]["SAGEMAKER_SUBMIT_DIRECTORY"] == f"{target}/code"
        assert json.loads(server["environment"]["SM_VLLM_SPECULATIVE_CONFIG"]) == {
            "model": str(drafter), "method": "eagle3", "num_speculative_tokens": 5, "parallel_drafting": True}
        assert server["command"][:5] == ["vllm", "serve", str(target), "--port", str(port)]
        assert "--max-model-len" in server["command"] and "512" in server["command"]
        assert result["startup"]["version"] == "0.32.0" and result["startup"]["speculative"]["num_speculative_tokens"] == 5

        invoked = peagle("invoke", server["url"], "hello", "--max-tokens", "9", env=env)
        assert invoked.returncode == 0, invoked.stderr
        assert invoked.stdout.strip() == "!" * 9
        metrics = peagle("metrics", server["url"], "--window", "0s", "--json", env=env)
        assert metrics.returncode == 0, metrics.stderr
        assert json.loads(metrics.stdout)["acceptance"]["mean_acceptance_length"] == 6.0

        status = peagle("local", "status", env=env)
        assert status.returncode == 0 and "healthy (p-eagle, K=5)" in status.stdout
        assert "vLLM 0.32.0, model runner V2, speculative p-eagle, K=5" in status.stdout
        logs = peagle("local", "logs", "-n", "200", "--json", env=env)
        assert any("SpecDecoding metrics" in line for line in json.loads(logs.stdout)["lines"])

        again = peagle("local", "start", str(target), "--drafter", str(drafter), "--port", str(free_port()), env=env)
        assert again.returncode == 2 and "already running" in again.stderr
    finally:
        stopped = peagle("local", "stop", env=env)
    assert stopped.returncode == 0 and "stopped default" in stopped.stdout
    assert group_members(pid) == []
    assert peagle("local", "status", env=env).stdout.strip() == "no local servers"
    again = peagle("local", "stop", env=env)  # nothing was done: exit 2, as local logs and status --name
    assert again.returncode == 2 and "no local server named 'default'" in again.stderr


def test_runner_fallback_warning_at_start(tmp_path, dirs):
    env = stand_in_env(tmp_path, PEAGLE_STAND_IN_RUNNER="parallel-fallback", PEAGLE_STAND_IN_VERSION="0.25.1")
    out = peagle("local", "start", str(dirs[0]), "--drafter", str(dirs[1]), "--port", str(free_port()), env=env)
    try:
        assert out.returncode == 0, out.stderr
        assert "vLLM 0.25.1, model runner V1 (fallback), speculative p-eagle, K=3" in out.stdout
        stderr = " ".join(out.stderr.split())  # (the console may wrap a long warning)
        warning = stderr[stderr.rindex("warning: "):]
        assert warning.startswith("warning: vLLM 0.25.1 runs P-EAGLE on its older V1 model runner (it logged: Model "
                                  "Runner V2 does not yet support parallel drafting for EAGLE speculative decoding; "
                                  "using the V1 model runner instead.)")
        assert "benchmark P-EAGLE against EAGLE-3 on this version" in warning
    finally:
        peagle("local", "stop", env=env)


def test_container_that_dies_gives_its_error_line_exit_6_and_leaves_nothing(tmp_path, dirs):
    env = stand_in_env(tmp_path, PEAGLE_STAND_IN_FAIL="ValueError: mask_hidden not found in weights")
    out = peagle("local", "start", str(dirs[0]), "--drafter", str(dirs[1]), "--port", str(free_port()), env=env)
    assert out.returncode == 6
    last = out.stderr.strip().splitlines()[-1]
    assert last.startswith("error: the container exited during start-up: ValueError: mask_hidden not found in "
                           "weights (exit code 1)")
    assert "full log:" in last and "Traceback" not in out.stderr
    assert not list((tmp_path / "state").glob("*.json"))


def test_refused_before_anything_starts(tmp_path, dirs):
    target, drafter = dirs
    env = stand_in_env(tmp_path)
    no_mask = model_dirs(tmp_path / "nomask", mask_token=False)
    cases = [
        (["local", "start", str(target)], "--mode p-eagle needs the drafter"),
        (["local", "start", str(target), "--drafter", str(drafter), "--mode", "off"], "--drafter has no effect"),
        (["local", "start", str(tmp_path / "absent"), "--drafter", str(drafter)], "is not a directory"),
        (["local", "start", str(target), "--drafter", str(no_mask[1])], "names no mask token id"),
        (["local", "start", str(target), "--drafter", str(drafter), "--docker", "--image", "x"],
         "--docker needs the docker or podman command"),
        (["local", "start", str(target), "--drafter", str(drafter), "--name", "a b"], "not a valid server name"),
        (["local", "start", str(target), "--drafter", str(drafter), "--env",
          'SM_VLLM_SPECULATIVE_CONFIG={"num_speculative_tokens": 5}'],
         "sets num_speculative_tokens, which peagle sets from --mode and --k"),
        (["local", "start", str(target), "--drafter", str(drafter), "--env",
          'SM_VLLM_SPECULATIVE_CONFIG={"rejection_sample_method": "fly"}'], "rejection_sample_method 'fly' is lossy"),
    ]
    env_no_docker = {**env, "PATH": env["PATH"].split(":", 1)[0] + ":" + str(tmp_path / "nowhere")}
    for argv, message in cases:
        out = peagle(*argv, env=env_no_docker if "--docker" in argv else env)
        lines = out.stderr.strip().splitlines()
        assert out.returncode == 2 and len(lines) == 1 and message in lines[0], (argv, out.stderr)
    assert not (tmp_path / "state").exists() or not list((tmp_path / "state").glob("*.json"))


def test_port_in_use_is_refused(tmp_path, dirs):
    import socket

    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        out = peagle("local", "start", str(dirs[0]), "--drafter", str(dirs[1]), "--port",
                     str(busy.getsockname()[1]), env=stand_in_env(tmp_path))
    assert out.returncode == 2 and "already in use" in out.stderr


def test_timeout_stops_the_server(tmp_path, dirs):
    env = stand_in_env(tmp_path, PEAGLE_STAND_IN_DELAY_S="60")
    out = peagle("local", "start", str(dirs[0]), "--drafter", str(dirs[1]), "--port", str(free_port()),
                 "--timeout", "1", env=env)
    assert out.returncode == 5 and "stopped it" in out.stderr
    assert not list((tmp_path / "state").glob("*.json"))


def test_interrupt_during_start_stops_the_server(tmp_path, dirs):
    """Through the installed executable: SIGTERM to the very process that started the server's group."""
    env = stand_in_env(tmp_path, PEAGLE_STAND_IN_DELAY_S="60")
    proc = subprocess.Popen([PEAGLE, "local", "start", str(dirs[0]), "--drafter", str(dirs[1]), "--port",
                             str(free_port())], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    state_file = tmp_path / "state" / "default.json"
    for _ in range(600):  # bounded: the state file appears once the server was launched
        if state_file.exists():
            break
        time.sleep(0.05)
    pid = json.loads(state_file.read_text())["pid"]
    proc.send_signal(signal.SIGTERM)
    _, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 130, stderr
    assert group_members(pid) == [] and not state_file.exists()


def test_dry_run_docker_prints_the_command_without_an_engine(tmp_path, dirs):
    out = peagle("local", "start", str(dirs[0]), "--drafter", str(dirs[1]), "--model", "gpt-oss-20b", "--engine",
                 "docker", "--dry-run", "--json", env=stand_in_env(tmp_path))
    assert out.returncode == 0, out.stderr
    command = json.loads(out.stdout)["command"]
    assert command[:2] == ["docker", "run"] and command[-2].startswith("763104351884.dkr.ecr.us-east-1.amazonaws.com/")
    assert command[-1] == "serve"  # as SageMaker starts it
    assert f"{dirs[1]}:/opt/ml/additional-model-data-sources/eagle:ro" in command
