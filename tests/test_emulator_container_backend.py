"""The emulator's real backend, driven through the installed `peagle` against the emulator server, with a
stand-in `vllm` behind the real entrypoint (the same story with real vLLM: tests/real_vllm/)."""

import json

import pytest

from peagle_deploy.local.process import group_members
from peagle_deploy.testing import SageMakerEmulator
from peagle_deploy.testing.container_backend import ContainerBackend
from peagle_deploy.testing.vllm_stand_in import install

from .forked_peagle import REAL_CLOCK
from .local_helpers import model_dirs, peagle

MODEL_URI = "s3://jumpstart-cache-prod-us-east-1/huggingface-llm/huggingface-llm-qwen3-coder-30b-a3b-instruct/"
DRAFTER_URI = "s3://jumpstart-cache-prod-us-east-1/lmi-eagle-heads/models/"


def backend_for(tmp_path, *, mask_token=True, **env):
    """The model data prefix maps to a folder that holds the spec's artifact path; the drafter prefix to a
    folder of heads (longest-prefix mapping, with the rest of the URI as a sub-path)."""
    target, drafter = model_dirs(tmp_path / "models", mask_token=mask_token)
    artifacts = tmp_path / "qwen" / "artifacts" / "inference-prepack" / "v1.0.0"
    artifacts.parent.mkdir(parents=True)
    target.rename(artifacts)
    drafter.rename(tmp_path / "models" / "qwen3-coder-30b-a3b-instruct-p-eagle")
    install(tmp_path / "bin")
    return ContainerBackend({MODEL_URI: tmp_path / "qwen", DRAFTER_URI: tmp_path / "models"},
                            vllm_bin=tmp_path / "bin", env=env)


def run(emu, *args, timeout=180):
    # real time between polls: the container turns the endpoint InService when it answers /ping
    return peagle(*args, env={**emu.env, "COLUMNS": "200", REAL_CLOCK: "1"}, timeout=timeout)


def _wait_for_log_line(emu, name: str, text: str, timeout: float = 60.0) -> None:
    """Until the container's line is in CloudWatch (bounded): the backend ships its log every poll."""
    import time

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        events = emu.client("logs").filter_log_events(logGroupName=f"/aws/sagemaker/Endpoints/{name}")["events"]
        if any(text in e["message"] for e in events):
            return
        time.sleep(0.05)
    raise AssertionError(f"no {text!r} line from {name}'s container in CloudWatch after {timeout}s")


def test_deploy_invoke_metrics_status_cleanup_against_the_running_container(tmp_path):
    # qwen3-coder's model data is a prefix of the mapped directory: /opt/ml/model = models/ (holds target/)
    backend = backend_for(tmp_path)
    with SageMakerEmulator.server(backend=backend) as emu:
        deployed = run(emu, "deploy", "qwen3-coder", "--name", "real-be", "--role", emu.role_arn, "--k", "4",
                       "--yes", "--json")
        assert deployed.returncode == 0, deployed.stderr
        checks = {c["name"]: c for c in json.loads(deployed.stdout)["deployed"]["verification"]}
        startup = checks["vLLM start-up"]
        assert startup["state"] == "verified" and startup["ok"]  # vLLM's own log says K=4, P-EAGLE
        assert startup["detail"] == "vLLM 0.32.0, model runner V2, speculative p-eagle, K=4"
        assert startup["warnings"] == []
        [pid] = [backend._containers["real-be"].process.pid]

        invoked = run(emu, "invoke", "real-be", "hi", "--max-tokens", "7")
        assert invoked.returncode == 0 and invoked.stdout.strip() == "!" * 7, invoked.stderr
        streamed = run(emu, "invoke", "real-be", "hi", "--max-tokens", "5", "--no-stream")
        assert streamed.returncode == 0 and streamed.stdout.strip() == "!" * 5, streamed.stderr

        _wait_for_log_line(emu, "real-be", "SpecDecoding metrics")  # shipped every 0.5 s by the backend
        metrics = run(emu, "metrics", "real-be", "--json")
        assert metrics.returncode == 0, metrics.stderr
        acceptance = json.loads(metrics.stdout)["acceptance"]
        assert acceptance["source"] == "cloudwatch:/aws/sagemaker/Endpoints/real-be"
        assert acceptance["mean_acceptance_length"] == 5.0 and acceptance["per_position"] == [1.0] * 4

        status = run(emu, "status", "real-be")
        assert "real-be: vLLM start-up verified (vLLM 0.32.0, model runner V2, speculative p-eagle, K=4)" in status.stdout

        events = emu.client("logs").filter_log_events(logGroupName="/aws/sagemaker/Endpoints/real-be")["events"]
        [exec_line] = [e["message"] for e in events if e["message"].startswith("peagle-container: exec vllm serve")]
        model_dir = tmp_path / "qwen" / "artifacts" / "inference-prepack" / "v1.0.0"
        assert exec_line.startswith(f"peagle-container: exec vllm serve {model_dir} --port ")
        assert f'"model": "{tmp_path}/models/qwen3-coder-30b-a3b-instruct-p-eagle"' in exec_line
        assert events[0]["logStreamName"].startswith("AllTraffic/i-")

        cleaned = run(emu, "cleanup", "real-be", "--yes")
        assert cleaned.returncode == 0, cleaned.stderr
        assert backend.running() == [] and group_members(pid) == []


def test_runner_fallback_in_the_container_log_ends_the_deploy_with_the_warning(tmp_path):
    backend = backend_for(tmp_path, PEAGLE_STAND_IN_RUNNER="parallel-fallback", PEAGLE_STAND_IN_VERSION="0.25.1")
    with SageMakerEmulator.server(backend=backend) as emu:
        deployed = run(emu, "deploy", "qwen3-coder", "--name", "fallback", "--role", emu.role_arn, "--yes")
        assert deployed.returncode == 0, deployed.stderr
        assert "vLLM start-up: verified (vLLM 0.25.1, model runner V1 (fallback), speculative p-eagle, K=3)" \
            in deployed.stdout
        stderr = " ".join(deployed.stderr.split())  # (the console may wrap a long warning)
        assert stderr.endswith("benchmark P-EAGLE against EAGLE-3 on this version before choosing (deploy --mode "
                               "eagle3 too, 'peagle bench run' both, then 'peagle bench compare')")
        assert "warning: vLLM 0.25.1 runs P-EAGLE on its older V1 model runner (it logged: Model Runner V2 does not " \
               "yet support parallel drafting for EAGLE speculative decoding; using the V1 model runner instead.)" \
            in stderr
        status = run(emu, "status", "fallback")
        assert "warning: fallback: vLLM 0.25.1 runs P-EAGLE" in " ".join(status.stderr.split())


@pytest.mark.parametrize("case,reason", [
    ("dies", "ValueError: mask_hidden not found in weights (exit code 1)"),
    ("no-mask-token", "peagle-container: error: drafter config"),
])
def test_container_that_dies_fails_the_endpoint_with_its_line_and_nothing_is_left(tmp_path, case, reason):
    env = {"PEAGLE_STAND_IN_FAIL": "ValueError: mask_hidden not found in weights"} if case == "dies" else {}
    backend = backend_for(tmp_path, mask_token=case != "no-mask-token", **env)
    with SageMakerEmulator.server(backend=backend) as emu:
        out = run(emu, "deploy", "qwen3-coder", "--name", "dies", "--role", emu.role_arn, "--yes")
        assert out.returncode == 6
        last = out.stderr.strip().splitlines()[-1]
        assert last.startswith(f"error: endpoint dies is Failed: {reason}") and "rolled back" in last
        sm = emu.client("sagemaker")
        assert sm.list_endpoints()["Endpoints"] == [] and sm.list_models()["Models"] == []
        assert backend.running() == []
        logged = emu.client("logs").filter_log_events(logGroupName="/aws/sagemaker/Endpoints/dies")["events"]
        assert any(reason.split(" (exit")[0] in e["message"] for e in logged)


def test_unmapped_model_data_fails_the_endpoint_with_the_fix(tmp_path):
    backend = ContainerBackend({"s3://elsewhere/": tmp_path})
    with SageMakerEmulator.server(backend=backend) as emu:
        out = run(emu, "deploy", "gpt-oss-20b", "--name", "unmapped", "--role", emu.role_arn, "--yes")
        assert out.returncode == 6
        assert "is Failed: no local directory for s3://jumpstart-cache-prod-us-east-1/" in out.stderr
        assert "map its S3 prefix in ContainerBackend(data=...)" in " ".join(out.stderr.split())


def test_mapped_directory_that_does_not_exist_fails_the_endpoint(tmp_path):
    backend = ContainerBackend({"s3://jumpstart-cache-prod-us-east-1/": tmp_path / "nothing-here"})
    with SageMakerEmulator.server(backend=backend) as emu:
        out = run(emu, "deploy", "gpt-oss-20b", "--name", "missing", "--role", emu.role_arn, "--yes")
        assert out.returncode == 6
        assert "which is not a directory (SageMaker's download would fail)" in " ".join(out.stderr.split())


def test_log_read_failure_is_never_an_endpoint_failure():
    """Scripted endpoints have no container and so no log group: the deploy still succeeds, and says why
    it could not verify vLLM's start-up."""
    from peagle_deploy import lifecycle
    from peagle_deploy.aws import AwsSession
    from peagle_deploy.plan import PlanRequest, build_plan

    with SageMakerEmulator.in_process() as emu:
        plan = build_plan(PlanRequest(model="qwen3-coder", role=emu.role_arn))
        result = lifecycle.deploy(plan, AwsSession(emu.region), sleep=lambda s: None)
    check = result.verification[-1]
    assert result.status == "InService" and check.name == "vLLM start-up"
    assert check.state == "not verified" and not check.ok  # nothing was checked: never "ok"
    assert check.detail == (f"the log group /aws/sagemaker/Endpoints/{plan.endpoint_name} does not exist (yet): "
                            "the container has written no log line there")
    assert check.how_to_check.startswith(f"peagle logs {plan.endpoint_name} --region us-east-1 --since 1h")
