"""A plan is made from the request and its facts (spec, price, instance), each resolved once per command
(`plan.FactSource`), and checked before its price is read; the hosting shape is part of the request and the plan."""

from __future__ import annotations

import pytest

from peagle_deploy.errors import UsageError
from peagle_deploy.plan import FactSource, PlanRequest, build_plan
from peagle_deploy.hosting import Hosting

from .plan_inputs import resolver_for
from .test_plan import NOW, listed_price


def counting_prices():
    calls = []

    def lookup(kind, region, count):
        calls.append((kind, region, count))
        return listed_price(kind, region, count)

    lookup.calls = calls
    return lookup


def test_one_fact_source_resolves_each_spec_and_price_once():
    resolver, prices = resolver_for(), counting_prices()
    facts = FactSource(resolver=resolver, price_lookup=prices)
    for k in (3, 5, 7):  # a sweep's configurations, an update's two plans: one spec, one price
        build_plan(PlanRequest(model="qwen3-coder", k=k, instance_type="ml.g7e.2xlarge"), facts=facts, now=NOW)
    assert len(resolver.calls) == 1 and prices.calls == [("ml.g7e.2xlarge", "us-east-1", 1)]
    build_plan(PlanRequest(model="qwen3-coder", instance_type="ml.g7e.12xlarge"), facts=facts, now=NOW)
    assert [kwargs["instance_type"] for _, kwargs in resolver.calls] == ["ml.g7e.2xlarge", "ml.g7e.12xlarge"]
    assert len(prices.calls) == 2


@pytest.mark.parametrize("request_kwargs", [
    {"tags": {f"t{i}": "v" for i in range(37)}},  # over SageMaker's 50 tags with peagle's own
    {"env": {f"E{i}": "v" for i in range(100)}},  # over the container's environment limit with the spec's
    {"instance_type": "ml.g7e.48xlarge"},  # a type the spec does not list
], ids=["tags", "env", "unsupported-type"])
def test_a_request_refused_against_its_spec_reads_no_price(request_kwargs):
    prices = counting_prices()
    with pytest.raises(UsageError):
        build_plan(PlanRequest(model="qwen3-coder", **request_kwargs), resolver=resolver_for(), now=NOW,
                   price_lookup=prices)
    assert prices.calls == []


@pytest.mark.parametrize("hosting", list(Hosting))
def test_every_hosting_shape_plans_valid_request_bodies(hosting):
    """The shape is part of the request and of the plan; each one plans bodies SageMaker accepts."""
    from .aws_shapes import assert_valid_request

    plan = build_plan(PlanRequest(model="qwen3-coder", hosting=hosting, role="arn:aws:iam::123456789012:role/r"),
                      resolver=resolver_for(), now=NOW, price_lookup=listed_price)
    assert plan.hosting is hosting
    for operation, body in (("CreateModel", plan.create_model), ("CreateEndpointConfig", plan.create_endpoint_config),
                            ("CreateEndpoint", plan.create_endpoint)):
        assert_valid_request("sagemaker", operation, body)
