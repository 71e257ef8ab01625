"""The component shape of the one plan builder (plan_component.py, scale_to_zero.py): `peagle deploy --scale-to-zero
--dry-run` with no credentials prints every body (config, component, scalable target, the policies, the alarms),
each valid against botocore's shapes, with the price at zero and when up; the sizes from the instance facts; the
idle rule's bounds; and `hosting_of`, which the client commands use to address a component."""

from __future__ import annotations

import json

import pytest

from peagle_deploy.errors import UsageError
from peagle_deploy.lifecycle.components import hosting_of
from peagle_deploy.plan_component import memory_mb
from peagle_deploy.scale_to_zero import IdleRule, parse_idle

from .aws_shapes import request_errors
from .cli_runner import run_cli_completed


def dry_run(*args):
    out = run_cli_completed("deploy", "qwen3-coder", "--dry-run", "--json", *args)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)["plan"]


def test_the_scale_to_zero_dry_run_has_every_body_valid_and_the_price_at_zero(no_aws):
    plan = dry_run("--scale-to-zero")
    assert plan["hosting"] == "component" and plan["price_at_zero_usd_per_hour"] == 0.0
    bodies = [("sagemaker", "CreateModel", plan["create_model"]),
              ("sagemaker", "CreateEndpointConfig", plan["create_endpoint_config"]),
              ("sagemaker", "CreateEndpoint", plan["create_endpoint"]),
              ("sagemaker", "CreateInferenceComponent", plan["create_inference_component"]),
              *((r["service"], r["operation"], r["body"]) for r in plan["component_requests"])]
    assert [r["step"] for r in plan["component_requests"]] == [
        "scalable_target", "wake_policy", "wake_alarm", "idle_policy", "idle_alarm"]
    # the target is tagged on registration, as `peagle iam-policy`'s scaling writes require
    assert plan["component_requests"][0]["body"]["Tags"] == {"peagle:managed": "true"}
    for service, operation, body in bodies:
        assert request_errors(service, operation, body) == [], (operation, body)
    spec = plan["create_inference_component"]["Specification"]
    assert spec["ModelName"] == plan["create_model"]["ModelName"]  # the ModelName form
    assert "AdditionalModelDataSources" in plan["create_model"]["PrimaryContainer"]  # the drafter, on the model
    assert plan["create_endpoint_config"]["ProductionVariants"][0]["ManagedInstanceScaling"]["MinInstanceCount"] == 0
    idle = plan["component_requests"][-1]["body"]
    assert idle["EvaluationPeriods"] == idle["DatapointsToAlarm"] == 15
    assert idle["WarmUpConfiguration"] == {"WarmUpPeriodDurationInMinutes": 15,
                                           "OnlyStartEvaluatingAfterWarmUpPeriodEnds": True}
    human = run_cli_completed("deploy", "qwen3-coder", "--dry-run", "--scale-to-zero", env=None)
    assert human.returncode == 0, human.stderr
    for text in ("CreateInferenceComponent", "RegisterScalableTarget", "PutScalingPolicy (step scaling: wake up)",
                 "PutMetricAlarm (idle: no request)", "$0.00/h (no instance-hours)",
                 "with 1 copy up: an unknown price"):  # no credentials: the Pricing API was not asked
        assert text in human.stdout, text


def test_the_scale_to_zero_dry_run_prices_the_copies_up_from_the_pricing_api_and_writes_nothing(emu):
    """Must-show 1 with credentials: the price when up is the instances' hourly price read from the Pricing API
    (the emulator's), the price at zero is no instance-hours; a dry run reads the price and nothing else."""
    from peagle_deploy.testing.pricing_emulation import EMULATED_HOSTING_USD

    out = run_cli_completed("deploy", "qwen3-coder", "--scale-to-zero", "--instance-count", "2", "--dry-run", "--json",
                            env=emu.env)
    assert out.returncode == 0, out.stderr
    plan = json.loads(out.stdout)["plan"]
    up = 2 * EMULATED_HOSTING_USD["ml.g7e.2xlarge"]  # two copies, one per ml.g7e.2xlarge (one GPU each)
    assert plan["create_endpoint_config"]["ProductionVariants"][0]["InitialInstanceCount"] == 2
    assert plan["price"]["source"] == "aws-pricing-api" and plan["price_per_hour_usd"] == up
    assert plan["price_at_zero_usd_per_hour"] == 0.0
    assert f"at zero: $0.00/h (no instance-hours); with 2 copies up: ${up:,.2f}/h (2 x ml.g7e.2xlarge)" in " ".join(
        plan["notes"])
    assert list(emu.calls) == ["GetProducts"]


def test_component_hosting_without_scale_to_zero_registers_nothing_and_keeps_one_instance(no_aws):
    plan = dry_run("--hosting", "component")
    assert plan["component_requests"] == [] and plan["price_at_zero_usd_per_hour"] is None
    assert plan["create_endpoint_config"]["ProductionVariants"][0]["ManagedInstanceScaling"] == {
        "Status": "ENABLED", "MinInstanceCount": 1, "MaxInstanceCount": 1}
    assert dry_run()["hosting"] == "endpoint"  # the default is unchanged


def test_autoscale_scales_copies_and_target_tracking_never_scales_in_under_scale_to_zero(no_aws):
    plan = dry_run("--scale-to-zero", "--autoscale", "1:4", "--target-concurrency", "6")
    tracking = plan["component_requests"][1]["body"]
    assert tracking["TargetTrackingScalingPolicyConfiguration"] == {
        "TargetValue": 6.0, "DisableScaleIn": True, "PredefinedMetricSpecification": {
            "PredefinedMetricType": "SageMakerInferenceComponentConcurrentRequestsPerCopyHighResolution"}}
    assert plan["component_requests"][0]["body"]["MaxCapacity"] == 4
    assert plan["create_endpoint_config"]["ProductionVariants"][0]["ManagedInstanceScaling"]["MaxInstanceCount"] == 4
    assert "peagle:autoscale" not in plan["tags"]  # a variant's tag: status and recover read it for variants
    plain = dry_run("--hosting", "component", "--autoscale", "2:3", "--target-invocations", "30")
    assert plain["component_requests"][0]["body"]["MinCapacity"] == 2
    assert "DisableScaleIn" not in plain["component_requests"][1]["body"]["TargetTrackingScalingPolicyConfiguration"]


def test_a_copy_takes_the_tp_degree_and_half_the_host_memory_of_its_gpus(no_aws):
    whole = dry_run("--scale-to-zero", "--instance-type", "ml.g7e.24xlarge")
    assert whole["create_inference_component"]["Specification"]["ComputeResourceRequirements"] == {
        "NumberOfAcceleratorDevicesRequired": 4.0, "MinMemoryRequiredInMb": 524288}
    one = dry_run("--scale-to-zero", "--instance-type", "ml.g7e.24xlarge", "--env", "SM_VLLM_TENSOR_PARALLEL_SIZE=1",
                  "--instance-count", "3")
    assert one["create_inference_component"]["Specification"]["ComputeResourceRequirements"] == {
        "NumberOfAcceleratorDevicesRequired": 1.0, "MinMemoryRequiredInMb": 131072}
    assert one["create_inference_component"]["RuntimeConfig"] == {"CopyCount": 3}
    assert one["create_endpoint_config"]["ProductionVariants"][0]["InitialInstanceCount"] == 1  # 4 copies fit one
    assert memory_mb(64, 1, 1) == 32768 and memory_mb(192, 4, 4) == 98304  # JumpStart's own figures


@pytest.mark.parametrize("text,minutes", [("15m", 15), ("1m", 1), ("24h", 1440), ("1h30m", 90), (None, 15)])
def test_idle_periods_aws_accepts(text, minutes):
    assert parse_idle(text) == IdleRule(minutes=minutes)


@pytest.mark.parametrize("text", ["90s", "30s", "25h", "2d", "15", "soon"])
def test_idle_periods_aws_refuses(text):
    with pytest.raises(UsageError):
        parse_idle(text)


def test_hosting_of_reads_the_tags_and_the_description():
    component = {"ProductionVariants": [{"VariantName": "AllTraffic", "ManagedInstanceScaling": {
        "Status": "ENABLED", "MinInstanceCount": 0, "MaxInstanceCount": 1}}]}
    tags = {"peagle:managed": "true", "peagle:hosting": "component", "peagle:components": "a b",
            "peagle:scale-to-zero": "20m"}
    shape = hosting_of(component, tags)
    assert (shape.hosting, shape.components, shape.scale_to_zero) == ("component", ["a", "b"], IdleRule(minutes=20))
    assert hosting_of(component, {}).hosting == "component"  # someone else's: the description says it
    assert hosting_of({"ProductionVariants": [{"VariantName": "AllTraffic"}]}, {}).hosting == "endpoint"
