"""Instance pools through the one plan builder (issue 36): `--instance-type A,B` plans every type from its own spec,
price and quota, leaves out with the reason a type that cannot serve, shares the main model where the containers
are the same, and one type stays today's plain InstanceType variant. Specs are the ones peagle ships (offline), read
through the SDK as a deploy reads them; prices and quotas are FactSource's lookups, given here."""

from __future__ import annotations

import json

import pytest

from peagle_deploy.errors import ExitCode, QuotaError, UsageError
from peagle_deploy.plan import FactSource, PlanRequest, build_plan
from peagle_deploy.inputs import parse_instance_types
from peagle_deploy.pools import CapacityReservation, Quota, parse_capacity_reservation

from .aws_shapes import assert_valid_request
from .test_plan import NOW, listed_price

G2, G4, G12 = "ml.g7e.2xlarge", "ml.g7e.4xlarge", "ml.g7e.12xlarge"
ROLE = "arn:aws:iam::123456789012:role/r"
EACH = {G2: 5.0, G4: 6.0, G12: 12.0}


def prices(kind, region, count):
    return listed_price(kind, region, count, each=EACH.get(kind, 6.5))


def quotas(**limits):
    """A quota lookup: each type's limit (absent: not listed), nothing in use but what `used` says."""
    used = limits.pop("used", {})

    def lookup(kind, region):
        if kind not in limits:
            return Quota(limit=None, detail="Service Quotas lists none")
        return Quota(limit=limits[kind], used=used.get(kind, 0), detail="test")
    return lookup


def plan(types, *, quota=None, **kwargs):
    request = PlanRequest(model="qwen3-coder", name="ep", role=ROLE, offline=True, instance_pools=types, **kwargs)
    return build_plan(request, facts=FactSource(price_lookup=prices, quota_lookup=quota), now=NOW)


def variant(p):
    return p.create_endpoint_config["ProductionVariants"][0]


def test_one_type_stays_a_plain_variant_and_its_plan_names_no_pool():
    single = build_plan(PlanRequest(model="qwen3-coder", name="ep", role=ROLE, offline=True, instance_type=G2),
                        facts=FactSource(price_lookup=prices), now=NOW)
    assert variant(single)["InstanceType"] == G2 and "InstancePools" not in variant(single)
    assert "VariantInstanceProvisionTimeoutInSeconds" not in variant(single)
    dumped = single.model_dump(mode="json")
    assert not {"pools", "create_pool_models", "provision_timeout_s", "capacity_reservation"} & set(dumped)
    assert parse_instance_types(G2) == [G2]  # the CLI's one value: the plain variant above


def test_pools_in_priority_order_share_the_main_model_where_the_container_is_the_same():
    p = plan([G2, G12, G4], provision_timeout_s=900)
    assert variant(p)["InstancePools"] == [{"InstanceType": G2, "Priority": 1},
                                           {"InstanceType": G12, "Priority": 2, "ModelNameOverride": "ep-p2"},
                                           {"InstanceType": G4, "Priority": 3}]
    assert "InstanceType" not in variant(p) and variant(p)["VariantInstanceProvisionTimeoutInSeconds"] == 900
    assert [(x.instance_type, x.model_name, x.own_model) for x in p.pools] == [
        (G2, "ep", False), (G12, "ep-p2", True), (G4, "ep", False)]
    # ml.g7e.12xlarge has two GPUs: its own container runs them both (the spec's TP for that type)
    [own] = p.create_pool_models
    env = own["PrimaryContainer"]["Environment"]
    assert env["SM_VLLM_TENSOR_PARALLEL_SIZE"] == "2"
    assert p.create_model["PrimaryContainer"]["Environment"]["SM_VLLM_TENSOR_PARALLEL_SIZE"] == "1"
    assert env["SM_VLLM_SPECULATIVE_CONFIG"] == p.speculative_config  # one speculative config everywhere
    assert own["Tags"] == p.create_model["Tags"] and own["ExecutionRoleArn"] == ROLE
    assert p.tags["peagle:instance-type"] == f"{G2}+{G12}+{G4}"
    assert any("ml.g7e.2xlarge, ml.g7e.4xlarge share the main model" in n and "ml.g7e.12xlarge runs its own model "
               "ep-p2 (SM_VLLM_TENSOR_PARALLEL_SIZE=2" in n for n in p.notes), p.notes
    for operation, body in (("CreateModel", p.create_model), ("CreateModel", own),
                            ("CreateEndpointConfig", p.create_endpoint_config)):
        assert_valid_request("sagemaker", operation, body)


def test_each_pool_has_its_price_fit_and_quota_and_the_plan_is_priced_at_the_dearest():
    p = plan([G2, G4], quota=quotas(**{G2: 4, G4: 2}, used={G2: 1}))
    first, second = p.pools
    assert (first.price.usd_per_hour, second.price.usd_per_hour) == (5.0, 6.0)
    assert (first.quota.limit, first.quota.used, second.quota.limit) == (4, 1, 2)
    assert first.fit == "fits" and "JumpStart deploys the model on ml.g7e.2xlarge (96 GB)" in first.fit_detail
    assert p.price_per_hour_usd == 6.0
    assert first.line() == ("1. ml.g7e.2xlarge: $5.00/h; quota 4, 1 in use; fits (96 GB of GPU memory; JumpStart "
                            "deploys the model on ml.g7e.2xlarge (96 GB)); model ep")


def test_a_type_without_quota_is_left_out_with_one_line_and_the_rest_deploys():
    p = plan([G2, G4], quota=quotas(**{G2: 0}))
    assert p.pool_types == [G4] and variant(p)["InstancePools"] == [{"InstanceType": G4, "Priority": 1}]
    assert p.instance_type == G4 and p.price_per_hour_usd == 6.0
    left = p.pools[0]
    assert (left.kept, left.priority, left.left_out) == (False, None, "quota 0 in us-east-1")
    assert "ml.g7e.2xlarge: quota 0 in us-east-1; deploying with ml.g7e.4xlarge" in p.notes


def test_a_type_over_the_price_limit_or_without_an_image_is_left_out_with_why():
    p = plan([G12, "ml.g6e.2xlarge", G2], allow_any_instance=True, max_price_per_hour_usd=10)
    assert p.pool_types == [G2]
    reasons = {x.instance_type: x.left_out for x in p.pools}
    assert reasons[G12] == "$12.00/h is over --max-price-per-hour 10"
    assert reasons["ml.g6e.2xlarge"].startswith("the JumpStart spec has no image for it")
    assert p.pools[1].fit == "not checked"  # peagle has no GPU facts for that type: never guessed


def test_nothing_left_is_one_line_exit_2_or_exit_4_when_quota_is_why():
    with pytest.raises(UsageError) as caught:
        plan([G12, G2], max_price_per_hour_usd=1)
    assert caught.value.exit_code == ExitCode.USAGE
    assert caught.value.one_line().startswith("no instance type of ml.g7e.12xlarge, ml.g7e.2xlarge can serve this "
                                              "deploy (ml.g7e.12xlarge: $12.00/h is over --max-price-per-hour 1; ")
    with pytest.raises(QuotaError) as caught:
        plan([G2, G4], quota=quotas(**{G2: 0, G4: 1}, used={G4: 1}))
    assert caught.value.exit_code == ExitCode.QUOTA
    assert "(ml.g7e.2xlarge: quota 0 in us-east-1; ml.g7e.4xlarge: quota 1 in us-east-1, 1 in use)" in str(
        caught.value)


def test_a_request_no_pool_can_take_is_refused_as_deploy_refuses_it():
    """The licence of a gated model is the request's: said once, as a one-type deploy says it."""
    with pytest.raises(UsageError, match="gated by a licence") as caught:
        build_plan(PlanRequest(model="gemma-4-31b", offline=True, instance_pools=[G2, G4]),
                   facts=FactSource(price_lookup=prices), now=NOW)
    assert "no instance type of" not in str(caught.value)


def test_provision_timeout_and_pools_are_checked_before_any_fact():
    facts = FactSource(resolver=lambda *a, **k: pytest.fail("no spec may be read"),
                       price_lookup=lambda *a: pytest.fail("no price may be read"))
    for kwargs, words in (({"instance_type": G2, "provision_timeout_s": 600}, "applies to instance pools"),
                          ({"instance_pools": [G2, G4], "provision_timeout_s": 299}, "outside SageMaker's 300-3600"),
                          ({"instance_pools": [G2, G2]}, "each once"),
                          ({"instance_pools": [G2, "ml.m5.large"]}, "not an ml.g7e instance"),
                          ({"instance_type": G2, "instance_pools": [G2, G4]}, "both instance_type and instance_pools")):
        with pytest.raises(UsageError, match=words):
            build_plan(PlanRequest(model="qwen3-coder", **kwargs), facts=facts, now=NOW)


def test_a_capacity_reservation_goes_on_the_variant_as_botocore_shapes_it():
    arn = "arn:aws:sagemaker:us-east-1:123456789012:ml-reservation/team-a"
    reservation = parse_capacity_reservation(arn, "capacity-reservations-only", "us-east-1")
    p = plan([G2, G4], capacity_reservation=reservation)
    assert variant(p)["CapacityReservationConfig"] == {"CapacityReservationPreference": "capacity-reservations-only",
                                                       "MlReservationArn": arn}
    assert p.capacity_reservation == reservation
    single = build_plan(PlanRequest(model="qwen3-coder", offline=True, instance_type=G2,
                                    capacity_reservation=CapacityReservation(arn=arn)),
                        facts=FactSource(price_lookup=prices), now=NOW)
    assert variant(single)["CapacityReservationConfig"] == {"MlReservationArn": arn}
    assert variant(single)["InstanceType"] == G2
    assert_valid_request("sagemaker", "CreateEndpointConfig", p.create_endpoint_config)
    with pytest.raises(UsageError, match="is in us-west-2, the deploy in us-east-1"):
        parse_capacity_reservation(arn.replace("us-east-1", "us-west-2"), None, "us-east-1")


def test_the_plan_json_carries_the_pools():
    document = json.loads(plan([G2, G4], quota=quotas(**{G2: 0})).model_dump_json())
    assert [(x["instance_type"], x["kept"], x["left_out"]) for x in document["pools"]] == [
        (G2, False, "quota 0 in us-east-1"), (G4, True, None)]
