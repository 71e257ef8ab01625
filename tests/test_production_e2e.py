"""Issue 15's "Must show", through `peagle` processes (forked, tests/forked_peagle.py) against the emulator in
server mode:

deploy with autoscaling -> update K 3 -> 7 (the live config changes, the old config and model are gone, no moment
without an InService endpoint) -> a scripted failed update rolls back and the endpoint keeps serving K=7 -> logs ->
cleanup removes the scaling target, its policy, the endpoint, configs and models, and nothing unmanaged (unmanaged
resources, an unmanaged scaling target included, are created first).
"""

from __future__ import annotations

import json
import subprocess

import pytest

from .forked_peagle import forked_peagle

NAME = "prod-qwen"


@pytest.fixture
def emu(emu_recorded):
    """A fresh emulator per test (conftest's `emu` is one per module): updates script its status."""
    return emu_recorded


def peagle(emu, *args):
    env = {**emu.env, "COLUMNS": "200", "NO_COLOR": "1"}
    return subprocess.run([forked_peagle(), *args], env=env, capture_output=True, text=True, timeout=300,
                          stdin=subprocess.DEVNULL)


def serving(emu):
    """(endpoint status, config name, model name, K) as SageMaker holds them now."""
    sm = emu.client("sagemaker")
    endpoint = sm.describe_endpoint(EndpointName=NAME)
    config = sm.describe_endpoint_config(EndpointConfigName=endpoint["EndpointConfigName"])
    model_name = config["ProductionVariants"][0]["ModelName"]
    env = sm.describe_model(ModelName=model_name)["PrimaryContainer"]["Environment"]
    k = json.loads(env["SM_VLLM_SPECULATIVE_CONFIG"])["num_speculative_tokens"]
    return endpoint["EndpointStatus"], endpoint["EndpointConfigName"], model_name, k


def test_deploy_update_rollback_cleanup(emu):
    # someone else's resources, and a peagle-looking config another team's endpoint runs on: never touched
    emu.create_endpoint_stack("team-endpoint")
    emu.create_endpoint_stack("team-lookalike", tags=[{"Key": "peagle:managed", "Value": "false"}])
    aas = emu.client("application-autoscaling")
    aas.register_scalable_target(ServiceNamespace="sagemaker", ResourceId="endpoint/team-endpoint/variant/AllTraffic",
                                 ScalableDimension="sagemaker:variant:DesiredInstanceCount", MinCapacity=1,
                                 MaxCapacity=2)
    unmanaged = emu.resource_names()
    unmanaged_targets = emu.scalable_targets()
    target_id = f"endpoint/{NAME}/variant/AllTraffic"

    # deploy P-EAGLE K=3 with autoscaling
    emu.script_endpoints(creating_polls=1)
    deployed = peagle(emu, "deploy", "qwen3-coder", "--name", NAME, "--role", emu.role_arn, "--autoscale", "1:4",
                      "--target-concurrency", "8", "--yes", "--json")
    assert deployed.returncode == 0, deployed.stderr
    assert serving(emu) == ("InService", NAME, NAME, 3)
    scaling = emu.scalable_targets()[target_id]
    assert (scaling["min"], scaling["max"]) == (1, 4) and len(scaling["policies"]) == 1

    # update K 3 -> 7: blue/green, never without an InService endpoint
    emu.status_history.clear()
    emu.script_update(updating_polls=2)
    updated = peagle(emu, "update", NAME, "--k", "7", "--bake", "0s", "--yes", "--json")
    assert updated.returncode == 0, updated.stderr
    status, config, model, k = serving(emu)
    assert (status, k) == ("InService", 7)
    assert config != NAME and model == config
    history = emu.status_history[NAME]
    assert history.count("Updating") == 2 and set(history) == {"InService", "Updating"}, history
    names = emu.resource_names()
    assert NAME not in names["configs"] and NAME not in names["models"]  # the old config and model are gone
    assert set(names["configs"]) == set(unmanaged["configs"]) | {config}
    assert set(names["models"]) == set(unmanaged["models"]) | {model}
    assert emu.scalable_targets()[target_id] == scaling  # a K change keeps the variant's autoscaling

    # a scripted failed update: SageMaker rolls back, the endpoint keeps serving K=7
    emu.status_history.clear()
    emu.script_update(updating_polls=1, fail=True, reason="alarm prod-p99 went to ALARM during the baking period")
    failed = peagle(emu, "update", NAME, "--k", "11", "--yes")
    assert failed.returncode == 6, failed.stderr
    assert "the endpoint still serves the old configuration (K=7)" in failed.stderr
    assert f"container logs: peagle logs {NAME} --region us-east-1" in failed.stderr
    assert serving(emu) == ("InService", config, model, 7)
    assert set(emu.status_history[NAME]) == {"InService", "Updating"}
    assert emu.resource_names() == names  # the new config and model of the failed update were removed
    [row] = json.loads(peagle(emu, "status", NAME, "--json").stdout)["endpoints"]
    assert (row["k"], row["status"]) == (7, "InService")

    assert emu.scalable_targets()[target_id] == scaling

    # logs: the container's lines, merged in time order
    emu.put_log_lines(NAME, ["INFO vLLM API server version 0.18.0", "INFO speculative config: eagle3, K=7"])
    logs = peagle(emu, "logs", NAME, "--since", "10m")
    assert logs.returncode == 0, logs.stderr
    assert logs.stdout.index("vLLM API server version") < logs.stdout.index("speculative config: eagle3, K=7")

    # cleanup removes the scaling target and policy, the endpoint, its config and model, and nothing unmanaged
    cleaned = peagle(emu, "cleanup", "--all", "--yes", "--json")
    assert cleaned.returncode == 0, cleaned.stderr
    assert emu.resource_names() == unmanaged
    assert emu.scalable_targets() == unmanaged_targets
    assert emu.client("sagemaker").describe_endpoint(EndpointName="team-endpoint")["EndpointStatus"] == "InService"
