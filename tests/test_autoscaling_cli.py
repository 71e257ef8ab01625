"""Issue 15 item 2 (autoscaling) through the CLI (in-process; the signal test forked) against the emulator server: deploy registers
the variant after InService, a failure or signal there rolls everything back, status shows it (a read failure
as unknown), cleanup deregisters before deleting the endpoint and never touches an unmanaged endpoint's target."""

from __future__ import annotations

import json
import signal

import pytest
from peagle_deploy.autoscale import CONCURRENCY_METRIC, INVOCATIONS_METRIC

from .cli_runner import run_cli_completed
from .forked_peagle import forked_peagle
from .peagle_process import PeagleProcess

NAME = "scaled"
EMPTY = {"endpoints": [], "configs": [], "models": []}
TARGET = f"endpoint/{NAME}/variant/AllTraffic"
DIMENSION = "sagemaker:variant:DesiredInstanceCount"


def peagle(emu, *args):
    return run_cli_completed(*args, env={**emu.env, "COLUMNS": "200"})


def deploy(emu, *extra):
    return peagle(emu, "deploy", "qwen3-coder", "--name", NAME, "--role", emu.role_arn, "--yes", *extra)


def their_scaled_endpoint(emu, name="theirs"):
    """Someone else's endpoint (no peagle tags) with its own scaling target and policy."""
    emu.create_endpoint_stack(name)
    aas = emu.client("application-autoscaling")
    rid = f"endpoint/{name}/variant/AllTraffic"
    aas.register_scalable_target(ServiceNamespace="sagemaker", ResourceId=rid, ScalableDimension=DIMENSION,
                                 MinCapacity=1, MaxCapacity=3)
    aas.put_scaling_policy(PolicyName="their-policy", ServiceNamespace="sagemaker", ResourceId=rid,
                           ScalableDimension=DIMENSION, PolicyType="TargetTrackingScaling",
                           TargetTrackingScalingPolicyConfiguration={"TargetValue": 70.0, "PredefinedMetricSpecification": {
                               "PredefinedMetricType": INVOCATIONS_METRIC}})
    return rid


def test_deploy_registers_the_variant_after_in_service_and_verification(emu):
    emu.script_endpoints(creating_polls=2)
    out = deploy(emu, "--autoscale", "2:5", "--target-concurrency", "8", "--json")
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    assert doc["deployed"]["autoscaling"]["policy"] == {"min_capacity": 2, "max_capacity": 5,
                                                         "metric": "concurrency", "target": 8.0}
    assert emu.scalable_targets() == {TARGET: {"min": 2, "max": 5, "policies": ["peagle-target-tracking"]}}
    policy = emu.client("application-autoscaling").describe_scaling_policies(
        ServiceNamespace="sagemaker", ResourceId=TARGET)["ScalingPolicies"][0]
    assert policy["PolicyType"] == "TargetTrackingScaling"
    assert policy["TargetTrackingScalingPolicyConfiguration"] == {
        "TargetValue": 8.0, "PredefinedMetricSpecification": {"PredefinedMetricType": CONCURRENCY_METRIC}}
    # registered only once the endpoint was InService and verified (the last describes are verification's)
    calls = emu.calls
    assert calls.index("RegisterScalableTarget") > max(i for i, c in enumerate(calls) if c == "DescribeEndpoint")
    assert calls.index("RegisterScalableTarget") > calls.index("DescribeEndpointConfig")
    assert calls.index("PutScalingPolicy") > calls.index("RegisterScalableTarget")
    # no --instance-count: the endpoint starts at the minimum
    config = emu.client("sagemaker").describe_endpoint_config(EndpointConfigName=NAME)
    assert config["ProductionVariants"][0]["InitialInstanceCount"] == 2
    sm = emu.client("sagemaker")
    arn = sm.describe_endpoint(EndpointName=NAME)["EndpointArn"]
    tags = {t["Key"]: t["Value"] for t in sm.list_tags(ResourceArn=arn)["Tags"]}
    assert tags["peagle:autoscale"] == "2:5 concurrency=8"


def test_status_shows_autoscaling_and_the_desired_count(emu):
    assert deploy(emu, "--autoscale", "1:4", "--target-concurrency", "6", "--instance-count", "3").returncode == 0
    doc = json.loads(peagle(emu, "status", "--json").stdout)
    assert doc["endpoints"][0]["autoscaling"] == {
        "state": "on", "min_capacity": 1, "max_capacity": 4, "metric": CONCURRENCY_METRIC, "target": 6.0,
        "desired_instances": 3, "current_instances": 3, "detail": None, "tagged": True}
    human = peagle(emu, "status")
    assert human.returncode == 0, human.stderr
    assert f"{NAME}: autoscaling 1-4 instances on concurrency=6; desired 3, running 3" in human.stdout


def test_an_application_auto_scaling_read_failure_is_unknown_not_an_endpoint_failure(emu):
    assert deploy(emu, "--autoscale", "1:2", "--target-concurrency", "4").returncode == 0
    emu.fail("DescribeScalableTargets", "AccessDeniedException", "not allowed (emulated)", times=2)
    out = peagle(emu, "status", NAME, "--json")
    assert out.returncode == 0, out.stderr
    row = json.loads(out.stdout)["endpoints"][0]
    assert row["status"] == "InService"
    assert row["autoscaling"]["state"] == "unknown" and "AccessDenied" in row["autoscaling"]["detail"]
    assert "could not read Application Auto Scaling" in out.stderr and "shown as unknown" in out.stderr
    human = peagle(emu, "status")
    assert human.returncode == 0 and f"{NAME}: autoscaling unknown" in human.stdout


def test_an_unreadable_application_auto_scaling_stays_quiet_for_endpoints_without_autoscaling(emu):
    """An account that never used autoscaling may not allow reading it: status says nothing about it for an
    endpoint deployed without --autoscale (the --json row still says 'unknown', truthfully)."""
    assert deploy(emu).returncode == 0
    emu.fail("DescribeScalableTargets", "AccessDeniedException", "not allowed (emulated)", times=2)
    out = peagle(emu, "status", NAME, "--json")
    assert out.returncode == 0, out.stderr
    scaling = json.loads(out.stdout)["endpoints"][0]["autoscaling"]
    assert scaling["state"] == "unknown" and scaling["tagged"] is False
    assert "Application Auto Scaling" not in out.stderr
    human = peagle(emu, "status")
    assert human.returncode == 0 and "autoscaling" not in human.stdout + human.stderr


def test_a_failed_scaling_policy_rolls_back_everything_peagle_created(emu):
    emu.fail("PutScalingPolicy", "AccessDeniedException", "no application-autoscaling:PutScalingPolicy (emulated)")
    out = deploy(emu, "--autoscale", "1:3", "--target-concurrency", "8")
    lines = out.stderr.strip().splitlines()
    assert out.returncode == 3, out.stderr
    assert lines[-1].startswith("error: AWS refused PutScalingPolicy (AccessDeniedException)")
    assert "rolled back: scalable target, endpoint, endpoint config, model deleted" in lines[-1]
    assert "Traceback" not in out.stderr
    assert emu.resource_names() == EMPTY and emu.scalable_targets() == {}
    # the target was deregistered before the endpoint was deleted
    assert emu.calls.index("DeregisterScalableTarget") < emu.calls.index("DeleteEndpoint")


def test_a_refused_registration_rolls_back_and_keep_on_failure_keeps_it_for_cleanup(emu):
    emu.fail("RegisterScalableTarget", "ValidationException", "refused (emulated)")
    out = deploy(emu, "--autoscale", "1:3", "--target-concurrency", "8")
    assert out.returncode == 2, out.stderr
    assert "rolled back: endpoint, endpoint config, model deleted" in out.stderr
    assert emu.resource_names() == EMPTY

    emu.fail("PutScalingPolicy", "ThrottlingException", "slow down (emulated)", times=100)
    kept = deploy(emu, "--autoscale", "1:3", "--target-concurrency", "8", "--keep-on-failure")
    assert kept.returncode == 4, kept.stderr
    assert f"remove with 'peagle cleanup {NAME} --region us-east-1 --yes'" in kept.stderr
    assert emu.scalable_targets() == {TARGET: {"min": 1, "max": 3, "policies": []}}
    emu._faults.clear()
    cleaned = peagle(emu, "cleanup", NAME, "--yes")
    assert cleaned.returncode == 0, cleaned.stderr
    assert emu.resource_names() == EMPTY and emu.scalable_targets() == {}


def test_a_signal_while_registering_rolls_back_the_registration_too(emu):
    gate = emu.gate("RegisterScalableTarget", when="after")  # registered, the answer still on its way
    run = PeagleProcess(["deploy", "qwen3-coder", "--name", NAME, "--role", emu.role_arn, "--yes",
                         "--autoscale", "1:2", "--target-concurrency", "8"], emu.env, program=forked_peagle())
    run.wait_for_gate(gate)
    run.signal(signal.SIGTERM)
    run.wait_for_stderr("received SIGTERM")
    gate.release()
    code = run.finish()
    last = run.stderr.strip().splitlines()[-1]
    assert code == 130, run.stderr
    assert last.startswith("error: interrupted by SIGTERM") and "rolled back:" in last and "scalable target" in last
    assert emu.resource_names() == EMPTY and emu.scalable_targets() == {}


def test_cleanup_deregisters_first_and_never_touches_an_unmanaged_endpoints_target(emu):
    theirs = their_scaled_endpoint(emu)
    assert deploy(emu, "--autoscale", "1:3", "--target-concurrency", "8").returncode == 0
    emu.calls.clear()
    out = peagle(emu, "cleanup", "--all", "--yes", "--json")
    assert out.returncode == 0, out.stderr
    deleted = [(d["kind"], d["name"]) for d in json.loads(out.stdout)["deleted"]
               if d["kind"] not in ("metric_filter", "alarm")]  # the acceptance alarm's: docs/monitoring.md
    assert deleted[:3] == [("scaling_policy", "peagle-target-tracking"), ("scalable_target", TARGET),
                           ("endpoint", NAME)]
    calls = emu.calls
    assert calls.index("DeleteScalingPolicy") < calls.index("DeregisterScalableTarget") < calls.index("DeleteEndpoint")
    assert emu.scalable_targets() == {theirs: {"min": 1, "max": 3, "policies": ["their-policy"]}}
    assert emu.resource_names()["endpoints"] == ["theirs"]
    refused = peagle(emu, "cleanup", "theirs", "--yes")
    assert refused.returncode == 2 and "was not created by peagle" in refused.stderr
    assert emu.scalable_targets() == {theirs: {"min": 1, "max": 3, "policies": ["their-policy"]}}
    assert not [c for c in emu.calls[len(calls):] if c.startswith(("Delete", "Deregister"))]


def test_cleanup_without_autoscaling_does_not_need_application_auto_scaling(emu):
    """An account that never used autoscaling may not allow reading it: cleanup of an endpoint deployed without
    --autoscale goes on (nothing is known to be registered; DeleteEndpoint deregisters what it finds itself)."""
    assert deploy(emu).returncode == 0
    emu.fail("DescribeScalableTargets", "AccessDeniedException", "not allowed (emulated)", times=5)
    out = peagle(emu, "cleanup", NAME, "--yes")
    assert out.returncode == 0, out.stderr
    assert emu.resource_names() == EMPTY


def test_cleanup_says_when_it_could_not_remove_registered_autoscaling(emu):
    """With autoscaling registered (the endpoint's peagle:autoscale tag), a refused read is a failed outcome
    (exit 3, named), while the endpoint that bills is still deleted."""
    assert deploy(emu, "--autoscale", "1:2", "--target-concurrency", "8").returncode == 0
    emu.fail("DescribeScalableTargets", "AccessDeniedException", "not allowed (emulated)", times=5)
    out = peagle(emu, "cleanup", NAME, "--yes")
    assert out.returncode == 3, out.stderr
    assert f"failed scalable target {TARGET}" in out.stdout
    assert out.stderr.strip().splitlines()[-1].startswith(f"error: could not delete scalable target {TARGET}")
    assert emu.resource_names() == EMPTY


def test_dry_run_shows_the_autoscaling_requests_and_writes_nothing(emu):
    text = peagle(emu, "deploy", "qwen3-coder", "--dry-run", "--autoscale", "1:4", "--target-concurrency", "8")
    assert text.returncode == 0, text.stderr
    for needle in ("RegisterScalableTarget", "PutScalingPolicy", CONCURRENCY_METRIC, '"MaxCapacity": 4',
                   "autoscaling", "1-4 instances, target 8 concurrent requests per instance"):
        assert needle in text.stdout
    doc = json.loads(peagle(emu, "deploy", "qwen3-coder", "--dry-run", "--autoscale", "2:3",
                            "--target-invocations", "120", "--json").stdout)["plan"]
    assert doc["register_scalable_target"]["MinCapacity"] == 2 and doc["instance_count"] == 2
    assert doc["put_scaling_policy"]["TargetTrackingScalingPolicyConfiguration"] == {
        "TargetValue": 120.0, "PredefinedMetricSpecification": {"PredefinedMetricType": INVOCATIONS_METRIC}}
    assert doc["max_price_per_hour_usd"] == pytest.approx(3 * doc["price_per_hour_usd"] / 2)
    assert {"Key": "peagle:autoscale", "Value": "2:3 invocations=120"} in doc["create_endpoint"]["Tags"]
    assert not [c for c in emu.calls if c.startswith(("Create", "Register", "Put", "Delete"))]
