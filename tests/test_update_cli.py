"""`peagle update` in-process (tests/cli_runner.py) against the emulator in server mode (AWS_ENDPOINT_URL)."""

from __future__ import annotations

import json

import pytest

from .cli_runner import run_cli_completed


@pytest.fixture
def emu(emu_recorded):
    """A fresh emulator per test (conftest's `emu` is one per module): updates script its status."""
    return emu_recorded


def peagle(emu, *args, caller="test"):
    env = {**emu.env, "COLUMNS": "200", "NO_COLOR": "1", "AWS_SDK_UA_APP_ID": caller}
    return run_cli_completed(*args, env=env)


def deploy(emu, name="prod"):
    done = peagle(emu, "deploy", "qwen3-coder", "--name", name, "--role", emu.role_arn, "--yes", "--json")
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def live_k(emu, name="prod"):
    sm = emu.client("sagemaker")
    config = sm.describe_endpoint_config(EndpointConfigName=sm.describe_endpoint(EndpointName=name)["EndpointConfigName"])
    model = sm.describe_model(ModelName=config["ProductionVariants"][0]["ModelName"])
    return json.loads(model["PrimaryContainer"]["Environment"]["SM_VLLM_SPECULATIVE_CONFIG"])["num_speculative_tokens"]


def test_update_k_3_to_7_live_without_downtime(emu):
    deploy(emu)
    emu.script_update(updating_polls=1)
    done = peagle(emu, "update", "prod", "--k", "7", "--bake", "0s", "--yes", "--json")
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    result = doc["updated"]
    new = result["serving"]["endpoint_config"]
    assert (result["previous"]["k"], result["serving"]["k"]) == (3, 7)
    # every check that could run agreed; the emulator has no container log, so vLLM's start-up is not verified
    states = {check["name"]: check["state"] for check in result["verification"]}
    assert set(states.values()) == {"verified", "not verified"} and states["vLLM start-up"] == "not verified"
    assert doc["verification"] == "not verified"
    assert live_k(emu) == 7
    assert emu.resource_names() == {"endpoints": ["prod"], "configs": [new], "models": [new]}
    assert "prod: Updating" in done.stderr  # progress was visible
    assert set(emu.status_history["prod"]) <= {"InService", "Updating"} and "Updating" in emu.status_history["prod"]
    writes = emu.recorder.writes("test")
    assert writes[-13:] == ["AddTags", "CreateModel", "CreateEndpointConfig", "PutMetricFilter", "PutMetricFilter",
                            "PutMetricAlarm", "UpdateEndpoint", "AddTags", "DeleteEndpointConfig", "DeleteModel",
                            "DeleteMetricFilter", "DeleteMetricFilter", "DeleteTags"]
    [row] = json.loads(peagle(emu, "status", "prod", "--json").stdout)["endpoints"]
    assert (row["k"], row["mode"], row["status"]) == (7, "p-eagle", "InService")  # the endpoint's tags follow


def test_failed_update_rolls_back_and_exits_6(emu):
    deploy(emu)
    emu.script_update(updating_polls=1, fail=True, reason="alarm p99-latency went to ALARM during baking")
    done = peagle(emu, "update", "prod", "--k", "7", "--yes")
    assert done.returncode == 6, done.stderr
    errors = [line for line in done.stderr.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1
    assert "failed and SageMaker rolled it back: alarm p99-latency went to ALARM" in errors[0]
    assert "the endpoint still serves the old configuration (K=3)" in errors[0]
    assert live_k(emu) == 3
    assert emu.resource_names() == {"endpoints": ["prod"], "configs": ["prod"], "models": ["prod"]}
    tags = emu.client("sagemaker").list_tags(ResourceArn=emu.client("sagemaker").describe_endpoint(
        EndpointName="prod")["EndpointArn"])["Tags"]
    assert {"Key": "peagle:k", "Value": "3"} in tags

    as_json = peagle(emu, "update", "prod", "--k", "7", "--yes", "--json")
    assert as_json.returncode == 6
    assert json.loads(as_json.stdout)["error"]["exit_code"] == 6


def test_dry_run_lists_every_write_and_makes_none(emu):
    deploy(emu)
    done = peagle(emu, "update", "prod", "--k", "7", "--instance-count", "2", "--dry-run", "--json", caller="dry")
    assert done.returncode == 0, done.stderr
    plan = json.loads(done.stdout)["update"]
    assert [w.split()[0] for w in plan["writes"]] == ["AddTags", "CreateModel", "CreateEndpointConfig",
                                                      "PutMetricFilter", "PutMetricFilter", "PutMetricAlarm",
                                                      "UpdateEndpoint", "AddTags", "DeleteEndpointConfig",
                                                      "DeleteModel", "DeleteMetricFilter", "DeleteTags"]
    # the acceptance alarm at the new K is a rollback alarm of the update, said in the plan
    assert plan["update_endpoint"]["DeploymentConfig"]["AutoRollbackConfiguration"] == {
        "Alarms": [{"AlarmName": "peagle-acceptance-prod"}]}
    assert plan["acceptance_alarm"]["k"] == 7
    assert any(n.startswith("acceptance alarm peagle-acceptance-prod") and "rolls this update back" in n
               for n in plan["notes"])
    assert plan["update_endpoint"]["DeploymentConfig"]["BlueGreenUpdatePolicy"]["TrafficRoutingConfiguration"] == {
        "Type": "ALL_AT_ONCE", "WaitIntervalInSeconds": 300}
    assert plan["create_endpoint_config"]["ProductionVariants"][0]["InitialInstanceCount"] == 2
    assert emu.recorder.writes("dry") == []
    human = peagle(emu, "update", "prod", "--k", "7", "--dry-run", caller="dry")
    assert human.returncode == 0 and "7. UpdateEndpoint prod -> prod-u" in human.stdout
    assert emu.recorder.writes("dry") == []
    # the tags the new model and config share are printed once; --json keeps both lists whole
    tags = plan["create_model"]["Tags"]
    assert tags == plan["create_endpoint_config"]["Tags"] and len(tags) > 5
    assert "\nTags (on the model and the endpoint config)\n" in human.stdout
    assert human.stdout.count(f'"Tags": "the {len(tags)} tags above"') == 2 and '"Key"' not in human.stdout


def test_shared_config_is_kept_and_said(emu):
    deploy(emu)
    emu.client("sagemaker").create_endpoint(EndpointName="team-endpoint", EndpointConfigName="prod")
    done = peagle(emu, "update", "prod", "--k", "7", "--yes")
    assert done.returncode == 0, done.stderr
    assert "previous endpoint config prod: left: still used by endpoint team-endpoint" in done.stdout
    assert "prod" in emu.resource_names()["configs"] and "prod" in emu.resource_names()["models"]


def test_unmanaged_endpoint_is_refused_without_a_write(emu):
    emu.create_endpoint_stack("theirs")
    done = peagle(emu, "update", "theirs", "--k", "7", "--yes", caller="theirs")
    assert done.returncode == 2
    assert done.stderr.strip().startswith("error: endpoint 'theirs' was not created by peagle")
    assert emu.recorder.writes("theirs") == []


def test_a_fleet_above_the_price_guard_needs_max_price_per_hour(emu):
    deploy(emu)
    refused = peagle(emu, "update", "prod", "--instance-count", "40", "--yes", caller="pricey")
    assert refused.returncode == 2, refused.stderr
    assert "above the $100.00/h price guard" in refused.stderr and "--max-price-per-hour" in refused.stderr
    assert emu.recorder.writes("pricey") == []


def test_secret_container_values_from_deploy_are_never_printed(emu):
    done = peagle(emu, "deploy", "qwen3-coder", "--name", "prod", "--role", emu.role_arn, "--yes",
                  "--env", "HF_TOKEN=hf_supersecretvalue123")
    assert done.returncode == 0, done.stderr
    for args in (["--dry-run"], ["--dry-run", "--json"], ["--yes", "--json"]):
        shown = peagle(emu, "update", "prod", "--k", "5", *args)
        assert shown.returncode == 0, shown.stderr
        assert "hf_supersecretvalue123" not in shown.stdout + shown.stderr
        assert "HF_TOKEN" in shown.stdout or "--yes" in args


def test_an_autoscaling_only_update_shows_what_the_new_range_does_to_the_running_count(emu):
    deploy(emu)
    done = peagle(emu, "update", "prod", "--autoscale", "2:3", "--target-concurrency", "4", "--dry-run", caller="as")
    assert done.returncode == 0, done.stderr
    assert "note the endpoint runs 1 instance; registering autoscaling 2-3 raises it to 2 at once (the new minimum)" \
        in done.stdout
    as_json = json.loads(peagle(emu, "update", "prod", "--autoscale", "2:3", "--target-concurrency", "4", "--dry-run",
                                "--json", caller="as").stdout)
    assert as_json["update"]["notes"] == [
        "the endpoint runs 1 instance; registering autoscaling 2-3 raises it to 2 at once (the new minimum)"]
    assert emu.recorder.writes("as") == []
