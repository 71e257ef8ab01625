"""`peagle update NAME --autoscale MIN:MAX --target-...` alone (lifecycle/rescale.py), the command docs/update.md
shows, end to end in-process against the emulator: the dry run writes nothing, the real run registers the new
range and policy and moves the endpoint's peagle:autoscale tag; the endpoint's fleet is untouched."""

from __future__ import annotations

import json

import pytest
from peagle_deploy.autoscale import CONCURRENCY_METRIC, INVOCATIONS_METRIC

from .cli_runner import run_cli_completed

NAME = "as-ep"
TARGET = f"endpoint/{NAME}/variant/AllTraffic"


@pytest.fixture
def emu(emu_recorded):
    return emu_recorded


def peagle(emu, *args, caller="test"):
    return run_cli_completed(*args, env={**emu.env, "COLUMNS": "200", "NO_COLOR": "1", "AWS_SDK_UA_APP_ID": caller})


def deployed(emu, *extra):
    done = peagle(emu, "deploy", "qwen3-coder", "--name", NAME, "--role", emu.role_arn, "--yes", *extra,
                  caller="deploy")
    assert done.returncode == 0, done.stderr


def endpoint_tags(emu) -> dict[str, str]:
    sm = emu.client("sagemaker")
    arn = sm.describe_endpoint(EndpointName=NAME)["EndpointArn"]
    return {t["Key"]: t["Value"] for t in sm.list_tags(ResourceArn=arn)["Tags"]}


def policy_of(emu) -> dict:
    [policy] = emu.client("application-autoscaling").describe_scaling_policies(
        ServiceNamespace="sagemaker", ResourceId=TARGET)["ScalingPolicies"]
    return policy["TargetTrackingScalingPolicyConfiguration"]


def fleet(emu) -> tuple[str, str]:
    sm = emu.client("sagemaker")
    config = sm.describe_endpoint(EndpointName=NAME)["EndpointConfigName"]
    return config, sm.describe_endpoint_config(EndpointConfigName=config)["ProductionVariants"][0]["ModelName"]


def test_dry_run_prints_the_plan_and_writes_nothing(emu):
    deployed(emu, "--autoscale", "1:2", "--target-concurrency", "8")
    human = peagle(emu, "update", NAME, "--autoscale", "2:3", "--target-concurrency", "4", "--dry-run", caller="dry")
    assert human.returncode == 0, human.stderr
    assert "1-2 instances, target 8 concurrent requests per instance" in human.stdout  # now
    assert "2-3 instances, target 4 concurrent requests per instance" in human.stdout  # after
    assert f"RegisterScalableTarget {TARGET} (2-3 instances)" in human.stdout
    assert "K=3, 1 x ml.g7e.2xlarge (unchanged)" in human.stdout  # what it serves, read from the live model
    doc = peagle(emu, "update", NAME, "--autoscale", "2:3", "--target-concurrency", "4", "--dry-run", "--json",
                 caller="dry")
    assert doc.returncode == 0, doc.stderr
    plan = json.loads(doc.stdout)["update"]
    assert plan["before"] == {"min_capacity": 1, "max_capacity": 2, "metric": "concurrency", "target": 8.0}
    assert plan["after"] == {"min_capacity": 2, "max_capacity": 3, "metric": "concurrency", "target": 4.0}
    assert emu.recorder.writes("dry") == []
    assert emu.scalable_targets() == {TARGET: {"min": 1, "max": 2, "policies": ["peagle-target-tracking"]}}
    assert endpoint_tags(emu)["peagle:autoscale"] == "1:2 concurrency=8"


def test_yes_registers_the_new_range_policy_and_tag_and_keeps_the_fleet(emu):
    deployed(emu, "--autoscale", "1:2", "--target-concurrency", "8")
    before = fleet(emu)
    done = peagle(emu, "update", NAME, "--autoscale", "2:3", "--target-concurrency", "4", "--yes", "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["updated"]["after"]["min_capacity"] == 2
    assert emu.scalable_targets() == {TARGET: {"min": 2, "max": 3, "policies": ["peagle-target-tracking"]}}
    assert policy_of(emu) == {"TargetValue": 4.0,
                              "PredefinedMetricSpecification": {"PredefinedMetricType": CONCURRENCY_METRIC}}
    assert endpoint_tags(emu)["peagle:autoscale"] == "2:3 concurrency=4"
    assert fleet(emu) == before  # no new model, config or UpdateEndpoint
    assert emu.recorder.writes("test") == ["RegisterScalableTarget", "PutScalingPolicy", "AddTags"]


def test_target_invocations_on_an_endpoint_deployed_without_autoscaling(emu):
    deployed(emu)
    done = peagle(emu, "update", NAME, "--autoscale", "2:3", "--target-invocations", "100", "--yes")
    assert done.returncode == 0, done.stderr
    assert f"{NAME} autoscales 2-3 instances, target 100 invocations per instance per minute" in done.stdout
    assert emu.scalable_targets() == {TARGET: {"min": 2, "max": 3, "policies": ["peagle-target-tracking"]}}
    assert policy_of(emu)["PredefinedMetricSpecification"] == {"PredefinedMetricType": INVOCATIONS_METRIC}
    assert endpoint_tags(emu)["peagle:autoscale"] == "2:3 invocations=100"
