"""Issue 15 item 2, units: the policy model and its flags, the plan's new requests and tag, the metric choice
against botocore's own service model, and lifecycle.autoscaling against the in-process emulator."""

from __future__ import annotations

import pytest

from peagle_deploy import autoscale
from peagle_deploy.autoscale import (
    CONCURRENCY_METRIC,
    INVOCATIONS_METRIC,
    AutoscalePolicy,
    metric_known,
    parse_autoscale,
)
from peagle_deploy.errors import UsageError
from peagle_deploy.tags import PeagleTags

from .aws_shapes import assert_valid_request
from .plan_inputs import resolver_for

POLICY = AutoscalePolicy(min_capacity=1, max_capacity=4, metric="concurrency", target=8)


def test_botocore_lists_both_metrics_peagle_uses():
    """The concurrency metric is chosen because the installed botocore's Application Auto Scaling model lists
    it; the fallback metric is listed by every botocore."""
    assert metric_known(CONCURRENCY_METRIC) and metric_known(INVOCATIONS_METRIC)
    assert not metric_known("SageMakerVariantMadeUpMetric")


def test_an_older_botocore_without_the_concurrency_metric_names_the_fix(monkeypatch):
    monkeypatch.setattr(autoscale, "metric_known", lambda metric: metric == INVOCATIONS_METRIC)
    with pytest.raises(UsageError) as caught:
        parse_autoscale("1:4", target_concurrency=8)
    assert "does not know the metric " + CONCURRENCY_METRIC in caught.value.one_line()
    assert "--target-invocations" in caught.value.one_line()
    policy, _ = parse_autoscale("1:4", target_invocations=100)
    assert policy.predefined_metric == INVOCATIONS_METRIC


@pytest.mark.parametrize("args,expected", [
    (dict(autoscale=None), (None, 1)),
    (dict(autoscale=None, instance_count=3), (None, 3)),
    (dict(autoscale="2:5", target_concurrency=8), (AutoscalePolicy(min_capacity=2, max_capacity=5, target=8), 2)),
    (dict(autoscale=" 1 : 3 ", target_concurrency=2.5, instance_count=3),
     (AutoscalePolicy(min_capacity=1, max_capacity=3, target=2.5), 3)),
    (dict(autoscale="4:4", target_invocations=60),
     (AutoscalePolicy(min_capacity=4, max_capacity=4, metric="invocations", target=60), 4)),
])
def test_parse_autoscale(args, expected):
    assert parse_autoscale(**args) == expected


def test_tag_round_trip_and_an_unreadable_tag_is_a_problem_not_a_crash():
    for policy in (POLICY, AutoscalePolicy(min_capacity=2, max_capacity=9, metric="invocations", target=0.5),
                   AutoscalePolicy(min_capacity=1, max_capacity=2, target=1e-5)):
        assert AutoscalePolicy.from_tag(policy.to_tag()) == policy
        assert PeagleTags.from_aws(PeagleTags(managed=True, autoscale=policy).to_aws()).autoscale == policy
    assert POLICY.to_tag() == "1:4 concurrency=8"
    tags = PeagleTags.from_aws({"peagle:managed": "true", "peagle:autoscale": "lots"})
    assert tags.autoscale is None and tags.problems == ["peagle:autoscale 'lots' is not MIN:MAX METRIC=TARGET"]
    assert PeagleTags.from_aws({"peagle:autoscale": "5:1 concurrency=8"}).problems  # min above max


def test_requests_use_the_sagemaker_variant_resource_id():
    assert POLICY.register_request("ep", "AllTraffic") == {
        "ServiceNamespace": "sagemaker", "ResourceId": "endpoint/ep/variant/AllTraffic",
        "ScalableDimension": "sagemaker:variant:DesiredInstanceCount", "MinCapacity": 1, "MaxCapacity": 4,
        "Tags": {"peagle:managed": "true"}}  # what `peagle iam-policy`'s autoscaling statements require
    body = POLICY.policy_request("ep", "AllTraffic")
    assert body["PolicyType"] == "TargetTrackingScaling"
    assert body["TargetTrackingScalingPolicyConfiguration"] == {
        "TargetValue": 8.0, "PredefinedMetricSpecification": {"PredefinedMetricType": CONCURRENCY_METRIC}}


@pytest.mark.parametrize("policy", [POLICY, AutoscalePolicy(min_capacity=2, max_capacity=9, metric="invocations",
                                                             target=0.5)], ids=["concurrency", "invocations"])
def test_both_request_bodies_are_valid_for_botocores_model(policy):
    """The bodies satisfy botocore's own model of the two operations, strictly (tests/aws_shapes.py: enum,
    range, length and pattern too, which botocore's parameter validator does not check)."""
    for operation, body in (("RegisterScalableTarget", policy.register_request("ep", "AllTraffic")),
                            ("PutScalingPolicy", policy.policy_request("ep", "AllTraffic"))):
        assert_valid_request("application-autoscaling", operation, body)


def plan_for(**request):
    from peagle_deploy.plan import PlanRequest, build_plan

    return build_plan(PlanRequest(model="qwen3-coder", **request), resolver=resolver_for())


def test_the_plan_carries_the_requests_the_tag_and_the_price_at_the_maximum(emu_in_process):
    # the emulator answers the Pricing API: a known hourly price (without it the price is unknown, and so its max)
    plan = plan_for(autoscale=POLICY, instance_count=2)
    assert plan.price_per_hour_usd is not None
    assert plan.autoscaling == POLICY
    assert plan.register_scalable_target == POLICY.register_request(plan.endpoint_name, "AllTraffic")
    assert plan.put_scaling_policy == POLICY.policy_request(plan.endpoint_name, "AllTraffic")
    assert plan.tags["peagle:autoscale"] == "1:4 concurrency=8"
    assert plan.max_price_per_hour_usd == pytest.approx(plan.price_per_hour_usd * 2)
    assert any("Application Auto Scaling" in note for note in plan.notes)
    plain = plan_for()
    assert plain.register_scalable_target is None and plain.put_scaling_policy is None
    assert "peagle:autoscale" not in plain.tags
    with pytest.raises(UsageError, match="--instance-count 5 is outside --autoscale 1:4"):
        plan_for(autoscale=POLICY, instance_count=5)


def test_apply_read_and_remove_against_the_emulator(emu_in_process):
    from peagle_deploy.lifecycle.autoscaling import apply_autoscaling, read_autoscaling, remove_autoscaling

    emu_in_process.create_endpoint_stack("ep")
    aas = emu_in_process.client("application-autoscaling")
    sm = emu_in_process.client("sagemaker")
    policy = AutoscalePolicy(min_capacity=2, max_capacity=3, target=4)
    applied = apply_autoscaling(aas, "ep", "AllTraffic", policy)
    assert applied.resource_id == "endpoint/ep/variant/AllTraffic" and applied.policy_arn
    assert apply_autoscaling(aas, "ep", "AllTraffic", policy).policy == policy  # idempotent
    described = sm.describe_endpoint(EndpointName="ep")
    state = read_autoscaling(aas, {"ep": described})["ep"]
    assert (state.state, state.min_capacity, state.max_capacity, state.metric, state.target) == (
        "on", 2, 3, CONCURRENCY_METRIC, 4.0)
    assert state.desired_instances == 2  # registration moved the 1 instance into 2..3, as AWS does
    outcomes = remove_autoscaling(aas, "ep", ["AllTraffic"])
    assert [(o.kind, o.result) for o in outcomes] == [("scaling_policy", "deleted"), ("scalable_target", "deleted")]
    assert remove_autoscaling(aas, "ep", ["AllTraffic"]) == []  # nothing left: nothing to say
    assert read_autoscaling(aas, {"ep": described})["ep"].state == "off"


def test_the_emulator_refuses_what_aws_refuses(emu_in_process):
    import botocore.exceptions

    aas = emu_in_process.client("application-autoscaling")
    with pytest.raises(botocore.exceptions.ClientError, match="no endpoint variant"):
        aas.register_scalable_target(**POLICY.register_request("missing", "AllTraffic"))
    with pytest.raises(botocore.exceptions.ClientError) as caught:
        aas.put_scaling_policy(**POLICY.policy_request("missing", "AllTraffic"))
    assert caught.value.response["Error"]["Code"] == "ObjectNotFoundException"
    emu_in_process.create_endpoint_stack("ep")
    aas.register_scalable_target(**POLICY.register_request("ep", "AllTraffic"))
    wrong = POLICY.policy_request("ep", "AllTraffic")
    wrong["TargetTrackingScalingPolicyConfiguration"]["PredefinedMetricSpecification"]["PredefinedMetricType"] = \
        "ECSServiceAverageCPUUtilization"
    with pytest.raises(botocore.exceptions.ClientError, match="does not apply"):
        aas.put_scaling_policy(**wrong)
    aas.put_scaling_policy(**POLICY.policy_request("ep", "AllTraffic"))
    emu_in_process.client("sagemaker").delete_endpoint(EndpointName="ep")  # SageMaker deregisters it itself
    assert emu_in_process.scalable_targets() == {}


def test_the_emulator_fault_injection_reaches_application_auto_scaling(emu_in_process):
    from peagle_deploy.lifecycle.autoscaling import read_autoscaling

    emu_in_process.fail("DescribeScalableTargets", "AccessDeniedException", "no (emulated)")
    state = read_autoscaling(emu_in_process.client("application-autoscaling"), {"ep": {}})["ep"]
    assert state.state == "unknown" and "AccessDeniedException" in state.detail
    assert "DescribeScalableTargets" in emu_in_process.calls


def test_the_emulator_refuses_an_instance_type_update_of_a_registered_variant():
    """The emulator's UpdateEndpoint (h8's block) refuses a change of a registered variant's instance type as
    SageMaker refuses it; a K change (a new model, same instance type) goes through."""
    import botocore.exceptions

    from peagle_deploy.testing import SageMakerEmulator

    with SageMakerEmulator.in_process(seed_jumpstart=False) as emu:
        emu.script_update(updating_polls=0)  # Updating until the next describe
        emu.create_endpoint_stack("ep")
        sm, aas = emu.client("sagemaker"), emu.client("application-autoscaling")
        aas.register_scalable_target(**POLICY.register_request("ep", "AllTraffic"))
        for name, instance_type in (("same-type", "ml.g7e.2xlarge"), ("bigger", "ml.g7e.12xlarge")):
            sm.create_endpoint_config(EndpointConfigName=name, ProductionVariants=[{
                "VariantName": "AllTraffic", "ModelName": "ep", "InstanceType": instance_type,
                "InitialInstanceCount": 1}])
        sm.update_endpoint(EndpointName="ep", EndpointConfigName="same-type")
        assert sm.describe_endpoint(EndpointName="ep")["EndpointConfigName"] == "same-type"
        with pytest.raises(botocore.exceptions.ClientError, match="registered for autoscaling"):
            sm.update_endpoint(EndpointName="ep", EndpointConfigName="bigger")
        assert len(emu.update_requests) == 1
        aas.deregister_scalable_target(ServiceNamespace="sagemaker", ResourceId="endpoint/ep/variant/AllTraffic",
                                       ScalableDimension="sagemaker:variant:DesiredInstanceCount")
        sm.update_endpoint(EndpointName="ep", EndpointConfigName="bigger")
        assert len(emu.update_requests) == 2
