"""The contract tier's own machinery, on the emulator: a check fails (naming what the account did) when the account
answers otherwise; the sweep removes everything of the tier's prefix with peagle's cleanup and nothing else, and
says the exact command for what it cannot remove; the estimate prices each run once and the cap refuses; docs/ci.md
names every behaviour."""

from __future__ import annotations

import io
import re
from pathlib import Path

import pytest

from peagle_deploy.pricing import Price

from . import stacks
from .cleanup import sweep
from .conftest import _final_sweep, emulated_account
from .costs import estimate, refusal, render
from .scenarios import (BEHAVIOURS, RUNS, _component_stack, _scaling, a_refused_request_wakes_the_component,
                        delete_endpoint_with_components_attached_is_refused, idle_rule_reaches_zero)

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def account(emu, monkeypatch):
    return emulated_account(emu, monkeypatch)


def test_the_idle_rule_check_fails_when_the_scale_in_does_not_act(account):
    """A real account whose Application Auto Scaling does not act on target tracking's scale-in alarm (the
    emulator's `scale_in_acts = False`): the contract check fails saying so, and so does the wake-up's."""
    account.emu.components.scale_in_acts = False
    with pytest.raises(AssertionError, match=r"did not reach zero copies within 45 min of idleness: 1/1 copies"):
        idle_rule_reaches_zero(account)
    with pytest.raises(pytest.fail.Exception, match="never at zero, so never woken: 1/1 copies"):
        a_refused_request_wakes_the_component(account)
    assert sweep(account) == ([], [])


def test_the_delete_endpoint_check_fails_when_sagemaker_strands_the_component(account):
    """A real account that deletes an endpoint under its component (the emulator's "strand"): the check fails
    naming what the component became, and the run's cleanup still removes the stranded component."""
    account.emu.components.delete_endpoint_with_components = "strand"
    with pytest.raises(AssertionError, match=r"deleted the endpoint under its component, which was then InService"):
        delete_endpoint_with_components_attached_is_refused(account)
    assert not [n for n in account.emu.components.names() if n.startswith(account.prefix)]
    assert sweep(account) == ([], [])


def _everything(emu) -> dict:
    aas = emu.client("application-autoscaling")
    return {**emu.resource_names(), "components": emu.components.names(),
            "alarms": sorted(a["AlarmName"] for a in emu.client("cloudwatch").describe_alarms()["MetricAlarms"]),
            "targets": sorted(t["ResourceId"] for t in aas.describe_scalable_targets(
                ServiceNamespace="sagemaker")["ScalableTargets"])}


def test_the_sweep_removes_everything_of_its_prefix_with_peagles_cleanup_and_nothing_else(account, monkeypatch):
    """What a failed session leaves (a component stack with peagle's scaling and alarms, a component stranded by
    its endpoint's deletion, a config and a model alone) goes; someone else's component stack and another tier
    session's stack stay."""
    emu = account.emu
    emu.components.create_stack("theirs", scale_to_zero=True)
    other = emulated_account(emu, monkeypatch)  # another session of the tier: its own prefix
    _component_stack(other, "s2z", fraction=0.25, max_instances=2, min_instances=0)
    before = _everything(emu)

    stack = _component_stack(account, "s2z", fraction=0.25, max_instances=2, min_instances=0)
    _scaling(account, stack)
    emu.components.delete_endpoint_with_components = "strand"
    stranded = _component_stack(account, "probes", fraction=0.1, max_instances=1)
    emu.client("sagemaker").delete_endpoint(EndpointName=stranded)
    emu.components.delete_endpoint_with_components = "refuse"
    alone = account.name("quota")
    stacks.create_model(account, alone, alone)
    emu.client("sagemaker").create_endpoint_config(EndpointConfigName=f"{alone}-one", Tags=account.tags(alone),
                                                   ProductionVariants=[{"VariantName": "AllTraffic",
                                                                        "ModelName": alone,
                                                                        "InstanceType": "ml.m5.large",
                                                                        "InitialInstanceCount": 1}])
    made = _everything(emu)
    assert f"peagle-wake-up-{stack}" in made["alarms"] and stranded in made["components"]

    assert sweep(account) == ([], [])
    assert _everything(emu) == before


def test_what_the_sweep_cannot_remove_is_said_with_the_exact_command(account):
    """peagle's cleanup refused every DeleteEndpoint: the session's report names the endpoint left and the command
    that removes it, and says how much it ran."""
    stack = _component_stack(account, "classic", fraction=0.1, max_instances=1)
    account.emu.fail("DeleteEndpoint", code="AccessDeniedException", times=50)
    stream = io.StringIO()
    lines = _final_sweep(account, stream=stream)
    region = account.region
    assert f"  peagle cleanup {stack} --region {region} --yes" in lines
    assert any(line.startswith("peagle's cleanup failed: ") for line in lines)
    assert re.match(r"measured: \d+\.\d\d instance-hours of ml\.m5\.large", lines[0])
    assert stream.getvalue().splitlines() == lines
    account.emu.clear_faults()
    assert sweep(account) == ([], [])
    assert _final_sweep(account, stream=stream)[-1] == f"everything named {account.prefix}* was removed by " \
                                                      "peagle's cleanup"


def _price(usd: float | None) -> Price:
    if usd is None:
        return Price(instance_type="ml.m5.large", usd_per_hour=None, source="unknown", hint="no credentials: add them")
    return Price(instance_type="ml.m5.large", usd_per_hour=usd, usd_per_hour_each=usd, source="aws-pricing-api",
                 detail="AWS Price List API (test)")


def test_the_estimate_prices_each_run_once_and_the_cap_refuses_above_it_or_unknown():
    by_name = {b.name: b for b in BEHAVIOURS}
    selected = [by_name["idle_rule_reaches_zero"], by_name["a_refused_request_wakes_the_component"],
                by_name["a_pool_variant_takes_routing_config_and_needs_none"],
                by_name["inference_router_refusal_texts"]]
    found = estimate(selected, instance_type="ml.m5.large", region="us-east-1", price_of=lambda t, r: _price(0.2))
    assert [line.run for line in found.lines] == ["s2z", "configs"]  # one s2z run for both of its behaviours
    s2z = RUNS["s2z"].footprint
    assert found.expected_usd == round(s2z.expected_instance_minutes / 60 * 0.2, 2)
    assert found.bound_usd == round(s2z.bound_minutes / 60 * 0.2, 2)
    assert (found.behaviours, found.listed) == (3, 1)
    text = "\n".join(render(found, prefix="peagle-ct-abc123-", max_cost=5.0))
    assert f"estimated cost: ${found.expected_usd:.2f} expected, at most ${found.bound_usd:.2f}" in text
    assert "the most it can cost is under it" in text
    assert refusal(found, 5.0) is None
    assert "it may cost up to" in refusal(found, found.bound_usd / 2)
    unknown = estimate(selected, instance_type="ml.m5.large", region="us-east-1", price_of=lambda t, r: _price(None))
    assert "estimated cost: unknown expected, at most unknown" in "\n".join(render(unknown, prefix="p", max_cost=5))
    assert "its cost is unknown (unknown: no credentials: add them)" in refusal(unknown, 5.0)
    free = estimate([by_name["openai_route_token_refusals"]], instance_type="ml.m5.large", region="us-east-1",
                    price_of=lambda t, r: _price(None))
    assert refusal(free, 5.0) is None and free.bound_usd == 0.0  # no instance at all: nothing to price


def test_docs_ci_names_every_behaviour_and_its_run():
    """docs/ci.md's table of the contract tier lists every behaviour (test name) with its run, and no other."""
    text = (ROOT / "docs" / "ci.md").read_text()
    rows = dict(re.findall(r"^\| `([a-z0-9_]+)` \| ([a-z0-9-]+|none) \|", text, flags=re.M))
    assert rows == {b.name: b.run or "none" for b in BEHAVIOURS}
    shown = sum(b.run is not None for b in BEHAVIOURS)
    flat = " ".join(text.split())
    assert f"{shown} have a scenario" in flat and f"{len(BEHAVIOURS) - shown} cannot be shown cheaply" in flat
