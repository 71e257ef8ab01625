"""Issue 23: an update plan is built by the code that builds a deploy plan for the new target. For each change
(K, mode, instance type and so TP degree, count), the update's CreateModel and CreateEndpointConfig bodies equal a
fresh deploy plan's for that target, but for the names, the tags and what the update keeps on purpose."""

from __future__ import annotations

import copy

import pytest

from peagle_deploy import lifecycle
from peagle_deploy.aws import AwsSession
from peagle_deploy.lifecycle.update import UpdateRequest, prepare
from peagle_deploy.plan import PlanRequest, build_plan
from peagle_deploy.speculative import Mode

NO_SLEEP = lambda _s: None  # noqa: E731
DEPLOYED = dict(model="qwen3-coder", mode=Mode.P_EAGLE, k=3, instance_type="ml.g7e.2xlarge", instance_count=1)


def _without_names(body: dict) -> dict:
    """A request body with what names it (the update's NAME-u<time>-<hex>, deploy's NAME) and its tags removed."""
    body = copy.deepcopy(body)
    for key in ("ModelName", "EndpointConfigName", "Tags"):
        body.pop(key, None)
    for variant in body.get("ProductionVariants", []):
        variant.pop("ModelName", None)
    return body


@pytest.mark.parametrize("change,target", [
    ({"k": 7}, {"k": 7}),
    ({"mode": Mode.EAGLE3}, {"mode": Mode.EAGLE3}),
    ({"mode": Mode.OFF}, {"mode": Mode.OFF, "k": None}),
    ({"instance_type": "ml.g7e.4xlarge"}, {"instance_type": "ml.g7e.4xlarge"}),  # one GPU, as before
    ({"instance_type": "ml.g7e.12xlarge"}, {"instance_type": "ml.g7e.12xlarge"}),  # 2 GPUs: a new TP degree
    ({"instance_count": 2}, {"instance_count": 2}),
    ({"k": 5, "instance_type": "ml.g7e.8xlarge", "instance_count": 2},
     {"k": 5, "instance_type": "ml.g7e.8xlarge", "instance_count": 2}),
], ids=["k", "eagle3", "off", "instance-type", "two-gpus", "count", "all-at-once"])
def test_the_update_plan_equals_a_deploy_plan_for_the_new_target(emu_in_process, change, target):
    emu = emu_in_process
    deployed = build_plan(PlanRequest(role=emu.role_arn, region=emu.region, name="prod", **DEPLOYED))
    lifecycle.deploy(deployed, AwsSession(emu.region), sleep=NO_SLEEP, handle_signals=False)

    update = prepare(AwsSession(emu.region), UpdateRequest(name="prod", region=emu.region, **change), sleep=NO_SLEEP)
    fresh = build_plan(PlanRequest(role=emu.role_arn, region=emu.region, name="prod",
                                   **{**DEPLOYED, **target}))

    config, expected_config = update.create_endpoint_config, fresh.create_endpoint_config
    assert _without_names(config) == _without_names(expected_config)
    if update.create_model is None:  # nothing in the container changes (K, mode, GPUs per instance): kept
        live = emu.client("sagemaker").describe_model(ModelName=deployed.create_model["ModelName"])
        assert _without_names({k: live[k] for k in ("PrimaryContainer", "EnableNetworkIsolation")}) == \
            _without_names({k: fresh.create_model[k] for k in ("PrimaryContainer", "EnableNetworkIsolation")})
    else:
        assert _without_names(update.create_model) == _without_names(fresh.create_model)
    if change.get("instance_type") == "ml.g7e.12xlarge":  # the container's GPU count changed with the type
        assert update.create_model is not None
        assert update.create_model["PrimaryContainer"]["Environment"] != deployed.create_model["PrimaryContainer"][
            "Environment"]
