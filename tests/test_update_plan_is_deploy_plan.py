"""Issue 23: an update plan is built by the code that builds a deploy plan for the new target. For each change
(K, mode, instance type and so TP degree, count), the update's CreateModel and CreateEndpointConfig bodies equal a
fresh deploy plan's for that target, but for the names, the tags and what the update keeps on purpose."""

from __future__ import annotations

import copy

import pytest

from peagle_deploy import lifecycle
from peagle_deploy.aws import AwsSession
from peagle_deploy.lifecycle.update_plan import UpdateRequest, prepare
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


def _deploy_with(emu, **changes):
    """An endpoint as an older peagle (or a hand) left it: deploy's plan for DEPLOYED, with `changes` applied to
    its container (env, image) and variant (instance type, timeouts) before it is created."""
    plan = build_plan(PlanRequest(role=emu.role_arn, region=emu.region, name="prod", **DEPLOYED))
    model, config = copy.deepcopy(plan.create_model), copy.deepcopy(plan.create_endpoint_config)
    model["PrimaryContainer"]["Environment"].update(changes.get("env", {}))
    model["PrimaryContainer"].update(changes.get("container", {}))
    config["ProductionVariants"][0].update(changes.get("variant", {}))
    plan = plan.model_copy(update={"create_model": model, "create_endpoint_config": config})
    sm = emu.client("sagemaker")
    sm.create_model(**plan.create_model)
    sm.create_endpoint_config(**plan.create_endpoint_config)
    sm.create_endpoint(**plan.create_endpoint)
    return plan


def _k_config(k: int) -> str:
    from peagle_deploy.speculative import settings_for

    return settings_for(Mode.P_EAGLE, k, default_k=3).render()


OLD_IMAGE = "763104351884.dkr.ecr.us-east-1.amazonaws.com/djl-inference:0.30.0-lmi12.0.0-cu124"


@pytest.mark.parametrize("why", ["k-beyond-the-drafter", "instance-type-the-spec-dropped"])
def test_without_a_plan_of_what_serves_only_the_speculative_config_and_the_tp_degree_follow(emu_in_process, why):
    """When deploy cannot plan what serves now (a live K the drafter no longer takes, an instance type the spec
    no longer lists), nothing tells peagle what of the live container the user set: it is all kept (image, env,
    timeouts), the speculative config is the new target's, and the TP degree follows the new instance type."""
    from peagle_deploy.hosting import TP_ENV
    from peagle_deploy.speculative import ENV_VAR

    emu = emu_in_process
    variant = {"ContainerStartupHealthCheckTimeoutInSeconds": 1234}
    env = {ENV_VAR: _k_config(25)} if why == "k-beyond-the-drafter" else {}
    if why == "instance-type-the-spec-dropped":
        variant["InstanceType"] = "ml.g6e.2xlarge"
    deployed = _deploy_with(emu, container={"Image": OLD_IMAGE}, env=env, variant=variant)
    deployed_env = deployed.create_model["PrimaryContainer"]["Environment"]

    update = prepare(AwsSession(emu.region), UpdateRequest(name="prod", region=emu.region, k=5,
                                                           instance_type="ml.g7e.12xlarge", allow_any_instance=True),
                     sleep=NO_SLEEP)

    container = update.create_model["PrimaryContainer"]
    assert container["Image"] == OLD_IMAGE  # kept: whether the user chose it cannot be told
    assert container["Environment"] == {**deployed_env, ENV_VAR: _k_config(5), TP_ENV: "2"}
    assert f"{TP_ENV} set to 2 for ml.g7e.12xlarge" in update.notes
    variant = update.create_endpoint_config["ProductionVariants"][0]
    assert variant["ContainerStartupHealthCheckTimeoutInSeconds"] == 1234
    assert (variant["InstanceType"], variant["InitialInstanceCount"]) == ("ml.g7e.12xlarge", 1)
    assert update.speculative_config == _k_config(5) and update.target.k == 5
