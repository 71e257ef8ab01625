"""The component shape of the one plan builder (plan_component.py, scale_to_zero.py): `peagle deploy --scale-to-zero
--dry-run` with no credentials prints every body (config, component, scalable target, target tracking with scale-in,
the wake-up policy and alarm: AWS's recipe; no metric-math idle alarm; caching on), each valid against botocore's
shapes, with the price at zero and when up and the room for an update; the sizes from the instance facts; `--idle`,
which only AWS's period passes; and `hosting_of`, which the client commands use to address a component."""

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
    # AWS's recipe ("Scale an endpoint to zero instances"): min 0, target tracking WITH scale-in on the guide's
    # per-copy metric, the wake-up step policy and its NoCapacityInvocationFailures alarm; nothing else
    assert [r["step"] for r in plan["component_requests"]] == [
        "scalable_target", "target_tracking", "wake_policy", "wake_alarm"]
    target, tracking, wake, alarm = (r["body"] for r in plan["component_requests"])
    # the target is tagged on registration, as `peagle iam-policy`'s scaling writes require
    assert target["Tags"] == {"peagle:managed": "true"} and (target["MinCapacity"], target["MaxCapacity"]) == (0, 1)
    assert tracking["PolicyType"] == "TargetTrackingScaling"
    assert tracking["TargetTrackingScalingPolicyConfiguration"] == {  # no DisableScaleIn: scale-in is how it idles
        "TargetValue": 5.0, "PredefinedMetricSpecification": {
            "PredefinedMetricType": "SageMakerInferenceComponentConcurrentRequestsPerCopyHighResolution"}}
    assert wake["StepScalingPolicyConfiguration"]["StepAdjustments"] == [{"MetricIntervalLowerBound": 0.0,
                                                                          "ScalingAdjustment": 1}]
    assert alarm["MetricName"] == "NoCapacityInvocationFailures" and alarm["AlarmName"].startswith("peagle-wake-up-")
    # no metric-math idle alarm, no step policy to zero: no alarm of peagle's decides when it idles
    alarms = [r["body"] for r in plan["component_requests"] if r["operation"] == "PutMetricAlarm"]
    assert len(alarms) == 1 and not any("Metrics" in a for a in alarms)
    assert not [r for r in plan["component_requests"] if r["body"].get("PolicyName") == "peagle-scale-to-zero"]
    for service, operation, body in bodies:
        assert request_errors(service, operation, body) == [], (operation, body)
    spec = plan["create_inference_component"]["Specification"]
    assert spec["ModelName"] == plan["create_model"]["ModelName"]  # the ModelName form
    assert spec["DataCacheConfig"] == {"EnableCaching": True}  # botocore's shape has it: caching on
    assert "AdditionalModelDataSources" in plan["create_model"]["PrimaryContainer"]  # the drafter, on the model
    scaling = plan["create_endpoint_config"]["ProductionVariants"][0]["ManagedInstanceScaling"]
    assert (scaling["MinInstanceCount"], scaling["MaxInstanceCount"]) == (0, 2)  # room for an update's new copy
    human = run_cli_completed("deploy", "qwen3-coder", "--dry-run", "--scale-to-zero", env=None)
    assert human.returncode == 0, human.stderr
    for text in ("CreateInferenceComponent", "RegisterScalableTarget",
                 "PutScalingPolicy (target tracking on copies, scale-in on: to zero when idle)",
                 "PutScalingPolicy (step scaling: wake up)", "PutMetricAlarm (wake up: a request found no copy)",
                 "$0.00/h (no instance-hours)", "with 1 copy up: an unknown price",  # no credentials: no Pricing API
                 "room for an update: MaxInstanceCount 2", "about 15 min without a request"):
        assert text in human.stdout, text
    assert "idle: no request" not in human.stdout and "FILL(" not in human.stdout


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
    # the room an update needs (two more instances beside the two) is priced too: it bills only during an update
    assert ("room for an update: MaxInstanceCount 4 (2 for the copies, 2 more so that an update's new copies start "
            "beside the old") in " ".join(plan["notes"])
    assert f"${2 * EMULATED_HOSTING_USD['ml.g7e.2xlarge']:,.2f}/h more while one runs" in " ".join(plan["notes"])
    assert list(emu.calls) == ["GetProducts"]


def test_component_hosting_without_scale_to_zero_registers_nothing_and_keeps_one_instance(no_aws):
    plan = dry_run("--hosting", "component")
    assert plan["component_requests"] == [] and plan["price_at_zero_usd_per_hour"] is None
    assert plan["create_endpoint_config"]["ProductionVariants"][0]["ManagedInstanceScaling"] == {
        "Status": "ENABLED", "MinInstanceCount": 1, "MaxInstanceCount": 2}  # one instance, and room for an update
    assert dry_run()["hosting"] == "endpoint"  # the default is unchanged


def test_autoscale_scales_copies_and_its_target_tracking_is_the_one_that_scales_in_to_zero(no_aws):
    plan = dry_run("--scale-to-zero", "--autoscale", "1:4", "--target-concurrency", "6")
    tracking = plan["component_requests"][1]["body"]
    assert tracking["TargetTrackingScalingPolicyConfiguration"] == {
        "TargetValue": 6.0, "PredefinedMetricSpecification": {
            "PredefinedMetricType": "SageMakerInferenceComponentConcurrentRequestsPerCopyHighResolution"}}
    assert [r["step"] for r in plan["component_requests"]].count("target_tracking") == 1
    assert plan["component_requests"][0]["body"]["MaxCapacity"] == 4
    # four copies' instances, and one more for an update's new copy beside the deploy's one
    assert plan["create_endpoint_config"]["ProductionVariants"][0]["ManagedInstanceScaling"]["MaxInstanceCount"] == 5
    assert "peagle:autoscale" not in plan["tags"]  # a variant's tag: status and recover read it for variants
    plain = dry_run("--hosting", "component", "--autoscale", "2:3", "--target-invocations", "30")
    assert plain["component_requests"][0]["body"]["MinCapacity"] == 2
    assert "DisableScaleIn" not in plain["component_requests"][1]["body"]["TargetTrackingScalingPolicyConfiguration"]


def test_a_copy_takes_the_tp_degree_and_half_the_host_memory_of_its_gpus(no_aws):
    whole = dry_run("--scale-to-zero", "--instance-type", "ml.g7e.24xlarge")
    assert whole["create_inference_component"]["Specification"]["ComputeResourceRequirements"] == {
        "NumberOfAcceleratorDevicesRequired": 4.0, "MinMemoryRequiredInMb": 524288}
    assert whole["create_endpoint_config"]["ProductionVariants"][0]["ManagedInstanceScaling"]["MaxInstanceCount"] == 2
    one = dry_run("--scale-to-zero", "--instance-type", "ml.g7e.24xlarge", "--env", "SM_VLLM_TENSOR_PARALLEL_SIZE=1",
                  "--instance-count", "3")
    assert one["create_inference_component"]["Specification"]["ComputeResourceRequirements"] == {
        "NumberOfAcceleratorDevicesRequired": 1.0, "MinMemoryRequiredInMb": 131072}
    assert one["create_inference_component"]["RuntimeConfig"] == {"CopyCount": 3}
    assert one["create_endpoint_config"]["ProductionVariants"][0]["InitialInstanceCount"] == 1  # 4 copies fit one
    # 3 copies and an update's 3 new ones beside them: 6 copies, two instances of four
    assert one["create_endpoint_config"]["ProductionVariants"][0]["ManagedInstanceScaling"]["MaxInstanceCount"] == 2
    assert memory_mb(64, 1, 1) == 32768 and memory_mb(192, 4, 4) == 98304  # JumpStart's own figures


@pytest.mark.parametrize("text", ["15m", "900s", "0h15m", None])
def test_idle_is_awss_period_only(text):
    """With AWS's recipe the idle period is target tracking's own scale-in alarm (about 15 minutes)."""
    assert parse_idle(text) == IdleRule() and IdleRule().minutes == 15


@pytest.mark.parametrize("text", ["90s", "30s", "0m", "-5m", "", "1m", "30m", "24h", "25h", "2d", "15", "soon"])
def test_any_other_idle_is_refused_naming_the_fix(text):
    with pytest.raises(UsageError) as refused:
        parse_idle(text)
    assert refused.value.hint.startswith("drop --idle (AWS's target tracking takes a component to zero")


def test_the_idle_hint_is_a_command_that_works(no_aws):
    """issue 49 item 4: `--idle 0m`, `30s`, `-5m` and `''` suggested "e.g. 90s", which --idle refused. Now each
    hint is "drop --idle", and the command without it runs."""
    for value in ("0m", "30s", "-5m", "", "30m"):
        out = run_cli_completed("deploy", "qwen3-coder", "--dry-run", "--scale-to-zero", "--idle", value)
        line = out.stderr.strip()
        assert out.returncode == 2 and len(line.splitlines()) == 1 and ": drop --idle (" in line, out.stderr
    assert run_cli_completed("deploy", "qwen3-coder", "--dry-run", "--scale-to-zero").returncode == 0


def test_target_invocations_is_refused_under_scale_to_zero(no_aws):
    out = run_cli_completed("deploy", "qwen3-coder", "--dry-run", "--scale-to-zero", "--autoscale", "1:2",
                            "--target-invocations", "30")
    assert out.returncode == 2 and "pass --target-concurrency 30 instead" in out.stderr, out.stderr


def test_an_older_peagles_idle_tag_reads_as_awss_rule():
    """An older peagle tagged --idle's value (e.g. 20m): scale to zero is on, by AWS's rule now."""
    assert IdleRule.from_tag("20m") == IdleRule() and IdleRule().to_tag() == "15m"


def test_hosting_of_reads_the_tags_and_the_description():
    component = {"ProductionVariants": [{"VariantName": "AllTraffic", "ManagedInstanceScaling": {
        "Status": "ENABLED", "MinInstanceCount": 0, "MaxInstanceCount": 1}}]}
    tags = {"peagle:managed": "true", "peagle:hosting": "component", "peagle:components": "a b",
            "peagle:scale-to-zero": "20m"}
    shape = hosting_of(component, tags)
    assert (shape.hosting, shape.components, shape.scale_to_zero) == ("component", ["a", "b"], IdleRule())
    assert hosting_of(component, {}).hosting == "component"  # someone else's: the description says it
    assert hosting_of({"ProductionVariants": [{"VariantName": "AllTraffic"}]}, {}).hosting == "endpoint"


def test_the_scaling_an_older_idle_rule_moves_to_is_a_pure_function_of_what_is_registered():
    """scale_to_zero.scaling_from_live: the live target and policies -> the same scaling a deploy of
    that shape plans today (recover and update call it; issue 45's recover can too)."""
    from peagle_deploy.autoscale import AutoscalePolicy
    from peagle_deploy.scale_to_zero import scaling_from_live
    from peagle_deploy.scale_to_zero import ComponentScaling

    concurrency = "SageMakerInferenceComponentConcurrentRequestsPerCopyHighResolution"
    wake = {"PolicyName": "peagle-wake-up", "StepScalingPolicyConfiguration": {
        "StepAdjustments": [{"MetricIntervalLowerBound": 0.0, "ScalingAdjustment": 2}]}}
    older = {"PolicyName": "peagle-scale-to-zero", "StepScalingPolicyConfiguration": {
        "StepAdjustments": [{"MetricIntervalUpperBound": 0.0, "ScalingAdjustment": 0}]}}
    tracking = {"PolicyName": "peagle-target-tracking", "TargetTrackingScalingPolicyConfiguration": {
        "TargetValue": 8.0, "DisableScaleIn": True, "PredefinedMetricSpecification": {
            "PredefinedMetricType": concurrency}}}
    moved = scaling_from_live("c", {"MinCapacity": 0, "MaxCapacity": 4}, [wake, older, tracking])
    assert moved == ComponentScaling.planned("c", copies=2, idle=IdleRule(), autoscale=AutoscalePolicy(
        min_capacity=1, max_capacity=4, metric="concurrency", target=8.0))
    [body] = [r.body for r in moved.requests([]) if r.step == "target_tracking"]
    assert body["TargetTrackingScalingPolicyConfiguration"] == {  # scale-in on again
        "TargetValue": 8.0, "PredefinedMetricSpecification": {"PredefinedMetricType": concurrency}}
    plain = scaling_from_live("c", {"MinCapacity": 0, "MaxCapacity": 1}, [
        {**wake, "StepScalingPolicyConfiguration": {"StepAdjustments": [{"ScalingAdjustment": 1}]}}, older])
    assert plain == ComponentScaling.planned("c", copies=1, idle=IdleRule(), autoscale=None)


def test_what_of_a_components_scaling_is_missing_is_a_pure_comparison_with_what_is_registered():
    """Issue 45 item 2: `ComponentScaling.missing` (what `status` names and `recover` sends): each step of the
    deploy's scaling that Application Auto Scaling and CloudWatch do not hold as asked, in order; a wake-up policy
    sent again takes its alarm along; nothing once all of it is there."""
    from peagle_deploy.scale_to_zero import ComponentScaling, RegisteredScaling

    scaling = ComponentScaling.planned("c", copies=1, idle=IdleRule(), autoscale=None)
    bodies = {r.step: r.body for r in scaling.requests([])}
    target = {"MinCapacity": 0, "MaxCapacity": 1}
    tracking = {"PolicyName": "peagle-target-tracking", **{k: bodies["target_tracking"][k] for k in (
        "PolicyType", "TargetTrackingScalingPolicyConfiguration")}}
    wake = {"PolicyName": "peagle-wake-up", "PolicyARN": "arn:wake",
            "StepScalingPolicyConfiguration": bodies["wake_policy"]["StepScalingPolicyConfiguration"]}
    alarm = {"AlarmName": "peagle-wake-up-c", "MetricName": "NoCapacityInvocationFailures",
             "AlarmActions": ["arn:wake"]}
    every = ["scalable_target", "target_tracking", "wake_policy", "wake_alarm"]
    assert scaling.missing(RegisteredScaling()) == every
    assert scaling.missing(RegisteredScaling(target=target)) == every[1:]
    assert scaling.missing(RegisteredScaling(target=target, policies=[tracking])) == every[2:]
    assert scaling.missing(RegisteredScaling(target=target, policies=[tracking, wake])) == ["wake_alarm"]
    assert scaling.missing(RegisteredScaling(target=target, policies=[tracking, wake], wake_alarm=alarm)) == []
    # registered otherwise: a range that is not the deploy's, scale-in disabled, a wake-up of other copies
    assert scaling.missing(RegisteredScaling(target={"MinCapacity": 1, "MaxCapacity": 1}, policies=[
        tracking, wake], wake_alarm=alarm)) == ["scalable_target"]
    no_scale_in = {**tracking, "TargetTrackingScalingPolicyConfiguration": {
        **tracking["TargetTrackingScalingPolicyConfiguration"], "DisableScaleIn": True}}
    assert scaling.missing(RegisteredScaling(target=target, policies=[no_scale_in, wake], wake_alarm=alarm)) == [
        "target_tracking"]
    two = {**wake, "StepScalingPolicyConfiguration": {**wake["StepScalingPolicyConfiguration"], "StepAdjustments": [
        {"MetricIntervalLowerBound": 0.0, "ScalingAdjustment": 2}]}}
    assert scaling.missing(RegisteredScaling(target=target, policies=[tracking, two], wake_alarm=alarm)) == [
        "wake_policy", "wake_alarm"]
    fixed = ComponentScaling.planned("c", copies=1, idle=None, autoscale=None)
    assert fixed.missing(RegisteredScaling()) == [] and fixed.steps == []


def test_the_scaling_a_component_deploy_asked_for_comes_from_its_tags_or_an_older_peagles_registration():
    """`intended_scaling`: the copies, the idle rule and a component's --autoscale peagle tagged (peagle:copies-
    autoscale); an older peagle tagged no --autoscale of a component, so a registered range and target stand."""
    from peagle_deploy.autoscale import AutoscalePolicy
    from peagle_deploy.scale_to_zero import ComponentScaling, RegisteredScaling, intended_scaling
    from peagle_deploy.tags import PeagleTags

    policy = AutoscalePolicy(min_capacity=1, max_capacity=4, metric="concurrency", target=3)
    tags = PeagleTags.from_aws(PeagleTags(managed=True, hosting="component", components=["c"], instance_count=2,
                                          scale_to_zero=IdleRule(), copies_autoscale=policy).to_aws())
    assert tags.copies_autoscale == policy and tags.autoscale is None  # a variant's autoscale is another tag
    asked = intended_scaling("c", copies=2, idle=IdleRule(), autoscale=policy, registered=RegisteredScaling())
    assert asked == ComponentScaling.planned("c", copies=2, idle=IdleRule(), autoscale=policy)
    assert (asked.min_copies, asked.max_copies, asked.wake_copies, asked.tracking[1]) == (0, 4, 2, 3.0)
    older = intended_scaling("c", copies=1, idle=IdleRule(), autoscale=None, registered=RegisteredScaling(
        target={"MinCapacity": 0, "MaxCapacity": 4}))
    assert (older.max_copies, older.wake_copies) == (4, 1)
    assert intended_scaling("c", copies=1, idle=None, autoscale=None, registered=RegisteredScaling()) is None


def test_the_model_of_an_endpoint_awaiting_its_component_is_not_unused():
    """Issue 45 item 1: an endpoint made for an inference component (its config names no model) that hosts none
    holds the model its deploy made for the component; once a component is there (or none can be listed), the
    rule is the usual one."""
    from peagle_deploy.lifecycle.components import ComponentRef
    from peagle_deploy.lifecycle.leftovers import References

    refs = References(endpoint_config={"c1": "c1", "classic": "classic"},
                      config_models={"c1": [], "classic": ["classic"]})
    assert refs.awaiting_component() == {"c1"}
    refs.components = {"c1": ComponentRef("c1", "c1", "arn")}
    assert refs.awaiting_component() == set()
    refs.components, refs.components_unknown = {}, "AccessDenied"
    assert refs.awaiting_component() == set()


def test_recover_waits_for_a_creating_endpoint_made_for_a_component_it_must_still_make():
    """`recover._finishing`: a component endpoint Creating has no component yet (SageMaker takes one only on an
    endpoint in service), so recover has something of peagle's to finish once it settles; a classic one does not."""
    from peagle_deploy.lifecycle.recover import _finishing
    from peagle_deploy.tags import PeagleTags

    creating = {"EndpointStatus": "Creating", "ProductionVariants": []}
    component = PeagleTags(managed=True, hosting="component", components=["c1"], scale_to_zero=IdleRule()).to_aws()
    assert "its inference component c1 and its scaling" in _finishing(component, PeagleTags.from_aws(component),
                                                                       None, creating)
    classic = PeagleTags(managed=True).to_aws()
    assert _finishing(classic, PeagleTags.from_aws(classic), None, creating) is None
    sweep = PeagleTags(managed=True, hosting="component", sweep_id="s1").to_aws()  # a sweep's host: the sweep's
    assert _finishing(sweep, PeagleTags.from_aws(sweep), None, creating) is None
