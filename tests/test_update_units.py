"""`lifecycle.update_plan` and `update_run`: the plan, guardrails, success, rollback and signals, against the in-process emulator
(sleeps injected: nothing waits on the wall clock)."""

from __future__ import annotations

import itertools
import json
import re
import signal
from datetime import UTC, datetime, timedelta

import pytest

from peagle_deploy import lifecycle
from peagle_deploy.aws import AwsSession
from peagle_deploy.errors import EndpointFailed, ExitCode, Interrupted, UsageError
from peagle_deploy.lifecycle.signals import Signalled
from peagle_deploy.lifecycle.update_plan import UpdateRequest, check_request, new_resource_name, prepare
from peagle_deploy.lifecycle.update_run import run_update
from peagle_deploy.plan import PlanRequest, build_plan
from peagle_deploy.speculative import DRAFTER_CHANNEL, ENV_VAR, Mode

NO_SLEEP = lambda _s: None  # noqa: E731


def deploy(emu, name="prod", **kwargs):
    plan = build_plan(PlanRequest(model="qwen3-coder", role=emu.role_arn, region=emu.region, name=name, **kwargs))
    lifecycle.deploy(plan, AwsSession(emu.region), sleep=NO_SLEEP, handle_signals=False)
    return plan


_SECONDS = itertools.count()


def update(emu, name="prod", **kwargs):
    """One update, a second after the one before on an injected clock (new names carry the UTC second, then four
    random hex digits, so they are unique either way; the clock keeps them in the order the updates ran)."""
    session = AwsSession(emu.region)
    now = datetime.now(UTC).replace(microsecond=0) + timedelta(seconds=next(_SECONDS))
    plan = prepare(session, UpdateRequest(name=name, region=emu.region, **kwargs), sleep=NO_SLEEP, now=now)
    return plan, run_update(plan, session, sleep=NO_SLEEP, handle_signals=False)


def live(emu, name="prod"):
    sm = emu.client("sagemaker")
    endpoint = sm.describe_endpoint(EndpointName=name)
    config = sm.describe_endpoint_config(EndpointConfigName=endpoint["EndpointConfigName"])
    model = sm.describe_model(ModelName=config["ProductionVariants"][0]["ModelName"])
    tags = {t["Key"]: t["Value"] for t in sm.list_tags(ResourceArn=endpoint["EndpointArn"])["Tags"]}
    return endpoint, config, model, tags


def k_of(model):
    value = model["PrimaryContainer"].get("Environment", {}).get(ENV_VAR)
    return None if value is None else json.loads(value)["num_speculative_tokens"]


def test_k_3_to_7_changes_the_live_config_and_removes_the_old_config_and_model(emu_in_process):
    emu = emu_in_process
    deploy(emu)
    emu.script_update(updating_polls=2)
    plan, result = update(emu, k="7", bake=timedelta(minutes=5), rollback_alarms=[])
    assert_valid_update_requests(plan)

    endpoint, config, model, tags = live(emu)
    assert endpoint["EndpointStatus"] == "InService"
    assert endpoint["EndpointConfigName"] == plan.target.endpoint_config != "prod"
    assert k_of(model) == 7
    assert tags["peagle:k"] == "7" and tags["peagle:mode"] == "p-eagle" and tags["peagle:managed"] == "true"
    assert emu.resource_names() == {"endpoints": ["prod"], "configs": [plan.target.endpoint_config],
                                    "models": [plan.target.model]}
    assert [(o.kind, o.name, o.result) for o in result.removed] == [("endpoint_config", "prod", "deleted"),
                                                                    ("model", "prod", "deleted")]
    assert [check.name for check in result.verification if not check.ok] == ["vLLM start-up"]
    # SageMaker's guardrails were asked for: blue/green, all at once after the baking period
    assert emu.update_requests[-1]["DeploymentConfig"] == {"BlueGreenUpdatePolicy": {"TrafficRoutingConfiguration": {
        "Type": "ALL_AT_ONCE", "WaitIntervalInSeconds": 300}}}
    # never a moment without a serving endpoint
    assert emu.status_history["prod"].count("Updating") == 2
    assert set(emu.status_history["prod"]) <= {"InService", "Updating"}


def assert_valid_update_requests(plan) -> None:
    """Every body the update sends, strictly against botocore's SageMaker model (tests/aws_shapes.py)."""
    from .aws_shapes import assert_valid_request

    if plan.create_model is not None:
        assert_valid_request("sagemaker", "CreateModel", plan.create_model)
    assert_valid_request("sagemaker", "CreateEndpointConfig", plan.create_endpoint_config)
    assert_valid_request("sagemaker", "UpdateEndpoint", plan.update_endpoint)


def test_the_new_model_keeps_the_live_container_and_the_drafter(emu_in_process):
    emu = emu_in_process
    deployed = deploy(emu, env={"MY_SETTING": "kept"})
    plan, _ = update(emu, k="5")
    assert_valid_update_requests(plan)
    container = plan.create_model["PrimaryContainer"]
    before = deployed.create_model["PrimaryContainer"]
    assert container["Environment"]["MY_SETTING"] == "kept"
    assert container["Image"] == before["Image"] and container["ModelDataSource"] == before["ModelDataSource"]
    assert container["AdditionalModelDataSources"] == before["AdditionalModelDataSources"]
    assert plan.create_model["ExecutionRoleArn"] == emu.role_arn
    variant = plan.create_endpoint_config["ProductionVariants"][0]
    assert variant["ModelName"] == plan.target.model
    assert variant["ContainerStartupHealthCheckTimeoutInSeconds"] == deployed.startup_health_check_timeout_s


def test_the_users_speculative_keys_are_carried_and_a_lossy_one_needs_allow_lossy_again(emu_in_process):
    """Issue 46: keys added at deploy (--env SM_VLLM_SPECULATIVE_CONFIG) stay in the new config; a lossy rejection
    method among them is refused by the update plan (nothing written) until --allow-lossy is given again."""
    emu = emu_in_process
    added = {"draft_sample_method": "probabilistic", "rejection_sample_method": "fly"}
    deploy(emu, env={ENV_VAR: json.dumps(added)}, allow_lossy=True)
    before = emu.resource_names()
    with pytest.raises(UsageError, match="rejection_sample_method 'fly' is lossy") as err:
        update(emu, k="5")
    assert "--allow-lossy" in err.value.hint and emu.resource_names() == before
    plan, _ = update(emu, k="5", allow_lossy=True)
    env = plan.create_model["PrimaryContainer"]["Environment"]
    assert json.loads(env[ENV_VAR]) == {"model": "/opt/ml/additional-model-data-sources/eagle", "method": "eagle3",
                                        "num_speculative_tokens": 5, "parallel_drafting": True, **added}
    assert env["PEAGLE_ALLOW_LOSSY"] == "true"
    off, _ = update(emu, mode=Mode.OFF)  # no speculative config: nothing of it, nor the allowance, is kept
    assert ENV_VAR not in off.create_model["PrimaryContainer"]["Environment"]
    assert "PEAGLE_ALLOW_LOSSY" not in off.create_model["PrimaryContainer"]["Environment"]


def test_mode_off_drops_the_drafter_and_turning_it_back_on_restores_it(emu_in_process):
    emu = emu_in_process
    deployed = deploy(emu)
    off, result = update(emu, mode=Mode.OFF)
    assert_valid_update_requests(off)
    _, _, model, tags = live(emu)
    assert ENV_VAR not in model["PrimaryContainer"].get("Environment", {})
    assert not model["PrimaryContainer"].get("AdditionalModelDataSources")
    assert tags["peagle:mode"] == "off" and tags["peagle:k"] == "0"
    assert result.serving.label() == "mode off"

    update(emu, mode=Mode.EAGLE3)
    _, _, model, tags = live(emu)
    channels = model["PrimaryContainer"]["AdditionalModelDataSources"]
    assert [c["ChannelName"] for c in channels] == [DRAFTER_CHANNEL]
    assert channels[0]["S3DataSource"]["S3Uri"] == deployed.drafter_channel["S3DataSource"]["S3Uri"]
    assert json.loads(model["PrimaryContainer"]["Environment"][ENV_VAR])["parallel_drafting"] is False
    assert tags["peagle:mode"] == "eagle3" and tags["peagle:k"] == "3"  # the model's default K


def test_instance_count_only_keeps_the_model_and_replaces_the_config(emu_in_process):
    emu = emu_in_process
    deploy(emu)
    plan, result = update(emu, instance_count=2)
    assert_valid_update_requests(plan)
    assert plan.create_model is None
    assert [w.split()[0] for w in plan.writes] == ["AddTags", "CreateEndpointConfig", "UpdateEndpoint", "AddTags",
                                                   "DeleteEndpointConfig", "DeleteTags"]
    endpoint, config, _, tags = live(emu)
    assert config["ProductionVariants"][0]["ModelName"] == "prod"
    assert config["ProductionVariants"][0]["InitialInstanceCount"] == 2
    assert tags["peagle:instance-count"] == "2"
    assert emu.resource_names()["models"] == ["prod"]
    assert emu.resource_names()["configs"] == [plan.target.endpoint_config]


def test_a_config_another_endpoint_still_uses_is_not_deleted(emu_in_process):
    emu = emu_in_process
    deploy(emu)
    sm = emu.client("sagemaker")
    sm.create_endpoint(EndpointName="someone-else", EndpointConfigName="prod")  # shares peagle's config
    plan, result = update(emu, k="7")
    outcomes = {(o.kind, o.name): o for o in result.removed}
    assert outcomes[("endpoint_config", "prod")].result == "left"
    assert "still used by endpoint someone-else" in outcomes[("endpoint_config", "prod")].reason
    assert outcomes[("model", "prod")].result == "left"
    assert sm.describe_endpoint(EndpointName="someone-else")["EndpointConfigName"] == "prod"
    assert sorted(emu.resource_names()["configs"]) == sorted(["prod", plan.target.endpoint_config])


def test_failed_update_rolls_back_removes_what_it_created_and_exits_6(emu_in_process):
    emu = emu_in_process
    deploy(emu)
    emu.script_update(updating_polls=1, fail=True, reason="alarm p99-latency in ALARM during the baking period")
    with pytest.raises(EndpointFailed) as failed:
        update(emu, k="7", rollback_alarms=[])
    error = failed.value
    assert error.exit_code == ExitCode.FAILED
    assert "rolled it back: alarm p99-latency in ALARM" in error.one_line()
    assert "the endpoint still serves the old configuration (K=3)" in error.one_line()
    endpoint, _, model, tags = live(emu)
    assert endpoint["EndpointConfigName"] == "prod" and endpoint["EndpointStatus"] == "InService"
    assert k_of(model) == 3 and tags["peagle:k"] == "3"
    assert emu.resource_names() == {"endpoints": ["prod"], "configs": ["prod"], "models": ["prod"]}


@pytest.mark.parametrize("action,left_created", [("CreateEndpointConfig", ["model"]),
                                                 ("UpdateEndpoint", ["model", "endpoint_config"])])
def test_a_refused_write_removes_what_this_update_created(emu_in_process, action, left_created):
    emu = emu_in_process
    deploy(emu)
    emu.fail(action, code="ValidationException", message="refused (emulated)")
    with pytest.raises(UsageError) as failed:
        update(emu, k="7")
    assert "the endpoint still serves the old configuration (K=3)" in failed.value.one_line()
    assert "removed the new" in failed.value.one_line()
    assert emu.resource_names() == {"endpoints": ["prod"], "configs": ["prod"], "models": ["prod"]}


def test_a_signal_while_creating_removes_the_new_model(emu_in_process, monkeypatch):
    emu = emu_in_process
    deploy(emu)
    session = AwsSession(emu.region)
    plan = prepare(session, UpdateRequest(name="prod", region=emu.region, k="7"), sleep=NO_SLEEP)
    sm = session.client("sagemaker")

    def interrupted(**_kwargs):
        raise Signalled(signal.SIGTERM)

    monkeypatch.setattr(sm, "create_endpoint_config", interrupted)
    with pytest.raises(Interrupted) as stopped:
        run_update(plan, session, sleep=NO_SLEEP, handle_signals=False)
    assert "interrupted by SIGTERM" in stopped.value.one_line()
    assert "the endpoint still serves the old configuration (K=3)" in stopped.value.one_line()
    assert emu.resource_names()["models"] == ["prod"]


def test_a_signal_while_updating_names_the_recovery_command_first_and_deletes_nothing(emu_in_process):
    emu = emu_in_process
    deploy(emu)
    emu.script_update(updating_polls=5)
    session = AwsSession(emu.region)
    plan = prepare(session, UpdateRequest(name="prod", region=emu.region, k="7"), sleep=NO_SLEEP)

    def sleep(_s):
        raise Signalled(signal.SIGINT)

    with pytest.raises(Interrupted) as stopped:
        run_update(plan, session, sleep=sleep, handle_signals=False)
    line = stopped.value.one_line()
    new = plan.target.endpoint_config
    assert line.startswith("interrupted by SIGINT: finish with 'peagle recover prod --region us-east-1'")
    assert f"moves to {new} (K=7) or rolls back to prod (K=3); nothing was deleted" in line
    assert "aws sagemaker" not in line
    # nothing was deleted behind SageMaker's back: the update still needs both
    assert sorted(emu.resource_names()["configs"]) == sorted(["prod", new])
    tags = live(emu)[3]
    assert (tags["peagle:update-from"], tags["peagle:update-to"]) == ("prod", new)  # the intent stays for recover


def test_rollback_alarms_must_exist_and_are_sent(emu_in_process):
    emu = emu_in_process
    deploy(emu)
    with pytest.raises(UsageError, match="CloudWatch alarm 'p99' does not exist in us-east-1"):
        update(emu, k="7", rollback_alarms=["p99"])
    assert emu.resource_names()["configs"] == ["prod"]  # nothing created
    emu.client("cloudwatch").put_metric_alarm(
        AlarmName="p99", MetricName="ModelLatency", Namespace="AWS/SageMaker", Statistic="Average", Period=60,
        EvaluationPeriods=1, Threshold=1.0, ComparisonOperator="GreaterThanThreshold")
    plan, _ = update(emu, k="7", rollback_alarms=["p99"], bake=timedelta(0))
    assert_valid_update_requests(plan)  # the alarms' AutoRollbackConfiguration too
    sent = emu.update_requests[-1]["DeploymentConfig"]
    assert sent["AutoRollbackConfiguration"] == {"Alarms": [{"AlarmName": "p99"}]}
    assert sent["BlueGreenUpdatePolicy"]["TrafficRoutingConfiguration"]["WaitIntervalInSeconds"] == 0


def test_only_peagle_endpoints_are_updated(emu_in_process):
    emu = emu_in_process
    emu.create_endpoint_stack("theirs")
    with pytest.raises(UsageError, match="endpoint 'theirs' was not created by peagle"):
        update(emu, name="theirs", k="7")
    with pytest.raises(UsageError, match="no endpoint named 'nope' in us-east-1"):
        update(emu, name="nope", k="7")
    assert emu.resource_names()["configs"] == ["theirs"]


def test_nothing_to_change_is_refused(emu_in_process):
    emu = emu_in_process
    deploy(emu)
    with pytest.raises(UsageError, match=r"already serves K=3, 1 x ml.g7e.2xlarge"):
        update(emu, k="3")
    with pytest.raises(UsageError, match="--k 19 is deeper than the qwen3-coder drafter was trained for"):
        update(emu, k="19")


@pytest.mark.parametrize("kwargs,message", [
    ({}, "nothing to update: pass --k, --mode"),
    ({"k": "0"}, "--k must be at least 1"),
    ({"k": "7", "mode": Mode.OFF}, "--k has no effect with --mode off"),
    ({"instance_count": 0}, "--instance-count must be at least 1"),
    ({"instance_type": "ml.m5.large"}, "is not an ml.g7e instance"),
    ({"k": "7", "rollback_alarms": ["a", "a"]}, "given twice"),
    ({"k": "7", "rollback_alarms": [f"a{i}" for i in range(11)]}, "SageMaker allows 10"),
])
def test_bad_requests_are_refused_before_aws(kwargs, message):
    with pytest.raises(UsageError, match=message.replace("(", r"\(")):
        check_request(UpdateRequest(name="prod", region="us-east-1", **kwargs))


def test_new_names_fit_sagemakers_limit_and_differ_within_one_second():
    now = datetime(2026, 11, 22, 20, 0, tzinfo=UTC)
    assert new_resource_name("prod", now, nonce="3f9a") == "prod-u261122200000-3f9a"
    long = new_resource_name("a" * 50 + "-" + "b" * 12, now)
    assert len(long) <= 63 and re.fullmatch(r"a+-u261122200000-[0-9a-f]{4}", long) and "--" not in long
    names = {new_resource_name("prod", now) for _ in range(50)}
    assert len(names) >= 45  # 4 random hex digits: two updates in one second do not collide


def test_k_on_an_endpoint_without_speculation_asks_for_a_mode(emu_in_process):
    emu = emu_in_process
    deploy(emu, mode=Mode.OFF)
    with pytest.raises(UsageError, match=r"runs with speculation off: pass --mode p-eagle \(or eagle3\) together"):
        update(emu, k="7")
    _, result = update(emu, mode=Mode.P_EAGLE, k="7")
    assert result.serving.label() == "K=7"
    _, _, model, _ = live(emu)
    assert [c["ChannelName"] for c in model["PrimaryContainer"]["AdditionalModelDataSources"]] == [DRAFTER_CHANNEL]


def test_autoscaling_survives_updates_and_an_instance_type_change_reregisters_it(emu_in_process):
    from peagle_deploy.autoscale import AutoscalePolicy

    emu = emu_in_process
    policy = AutoscalePolicy(min_capacity=1, max_capacity=4, metric="concurrency", target=8)
    deploy(emu, autoscale=policy)
    target_id = "endpoint/prod/variant/AllTraffic"
    assert target_id in emu.scalable_targets()

    emu.calls.clear()
    plan, _ = update(emu, k="7")  # K only: the variant keeps its instance type, the registration stays
    assert not plan.deregister_first and "DeregisterScalableTarget" not in emu.calls
    assert target_id in emu.scalable_targets()

    emu.calls.clear()
    plan, _ = update(emu, instance_type="ml.g7e.4xlarge")  # SageMaker refuses this while registered
    assert plan.deregister_first
    assert any(w.startswith("DeleteScalingPolicy + DeregisterScalableTarget") for w in plan.writes)
    assert emu.calls.index("DeregisterScalableTarget") < emu.calls.index("UpdateEndpoint") \
        < emu.calls.index("RegisterScalableTarget")
    assert emu.scalable_targets()[target_id]["min"] == 1 and emu.scalable_targets()[target_id]["max"] == 4
    _, config, _, tags = live(emu)
    assert config["ProductionVariants"][0]["InstanceType"] == "ml.g7e.4xlarge"
    assert tags["peagle:autoscale"] == policy.to_tag()

    wider = AutoscalePolicy(min_capacity=2, max_capacity=6, metric="concurrency", target=8)
    plan, _ = update(emu, autoscale=wider, instance_count=2)
    assert emu.scalable_targets()[target_id]["max"] == 6
    assert live(emu)[3]["peagle:autoscale"] == wider.to_tag()


def test_a_rolled_back_instance_type_change_registers_the_autoscaling_again(emu_in_process):
    from peagle_deploy.autoscale import AutoscalePolicy

    emu = emu_in_process
    policy = AutoscalePolicy(min_capacity=1, max_capacity=4, metric="concurrency", target=8)
    deploy(emu, autoscale=policy)
    emu.script_update(fail=True, reason="new fleet failed health checks")
    with pytest.raises(EndpointFailed) as failed:
        update(emu, instance_type="ml.g7e.4xlarge")
    assert "autoscaling registered again" in failed.value.one_line()
    assert emu.scalable_targets()["endpoint/prod/variant/AllTraffic"]["max"] == 4


def test_update_rollback_failed_ends_the_wait_at_once():
    """SageMaker's UpdateRollbackFailed is final: the wait says so instead of running into --timeout."""
    from peagle_deploy.errors import EndpointFailed
    from peagle_deploy.lifecycle.wait import wait_in_service

    answers = iter([{"EndpointStatus": "Updating"},
                    {"EndpointStatus": "UpdateRollbackFailed", "FailureReason": "rollback alarm fired twice"}])

    class Answers:
        calls = 0

        def describe_endpoint(self, EndpointName):  # noqa: N803 - boto3's keyword
            Answers.calls += 1
            return next(answers)

    slept: list[float] = []
    with pytest.raises(EndpointFailed, match="is UpdateRollbackFailed: rollback alarm fired twice"):
        wait_in_service(Answers(), "ep", timeout_s=3600, sleep=slept.append, clock=lambda: 0.0)
    assert Answers.calls == 2 and len(slept) == 1


def test_a_timeout_while_updating_names_recover_and_never_cleanup(emu_in_process):
    """deploy's timeout advice ('peagle cleanup NAME') would delete the production endpoint: an update says
    'peagle recover NAME' instead, and no raw aws command."""
    from peagle_deploy.errors import WaitTimeout

    emu = emu_in_process
    deploy(emu)
    emu.script_update(updating_polls=50)
    session = AwsSession(emu.region)
    plan = prepare(session, UpdateRequest(name="prod", region=emu.region, k="7"), sleep=NO_SLEEP)
    ticks = iter(range(0, 10**6, 100))
    with pytest.raises(WaitTimeout) as late:
        run_update(plan, session, timeout_s=250, sleep=NO_SLEEP, clock=lambda: float(next(ticks)),
                   handle_signals=False)
    line = late.value.one_line()
    assert "finish with 'peagle recover prod --region us-east-1' once SageMaker settles" in line
    assert "peagle cleanup" not in line and "aws sagemaker" not in line
    assert plan.target.endpoint_config in emu.resource_names()["configs"]


@pytest.mark.parametrize("change,specs", [({"k": "7"}, 1), ({"instance_type": "ml.g7e.12xlarge"}, 2)],
                         ids=["k", "instance-type"])
def test_an_update_resolves_each_spec_and_price_once(emu_in_process, change, specs):
    """The plan of what serves now and the plan of what comes next share one FactSource: a spec or a price both
    need is resolved once (a new instance type has its own spec and price)."""
    from peagle_deploy.jumpstart import resolve
    from peagle_deploy.plan import FactSource
    from peagle_deploy.pricing import instance_price

    emu = emu_in_process
    deploy(emu)
    resolved, priced = [], []

    def resolver(model_id, **kwargs):
        resolved.append(kwargs["instance_type"])
        return resolve(model_id, **kwargs)

    def prices(kind, region, count):
        priced.append(kind)
        return instance_price(kind, region, count=count)

    plan = prepare(AwsSession(emu.region), UpdateRequest(name="prod", region=emu.region, **change), sleep=NO_SLEEP,
                   facts=FactSource(resolver=resolver, price_lookup=prices))
    assert len(resolved) == len(set(resolved)) == specs and len(priced) == len(set(priced)) == specs
    assert plan.price.instance_type == plan.target.instance_type and plan.price_per_hour_usd is not None


def test_an_autoscaling_minimum_above_the_fleet_is_said_in_the_plan(emu_in_process):
    """Registering a range whose minimum is above the running count raises the count at once: the plan says so."""
    from peagle_deploy.autoscale import AutoscalePolicy
    from peagle_deploy.lifecycle.rescale import prepare_rescale

    emu = emu_in_process
    deploy(emu)
    wider = AutoscalePolicy(min_capacity=2, max_capacity=4, metric="concurrency", target=8)
    session = AwsSession(emu.region)
    request = UpdateRequest(name="prod", region=emu.region, autoscale=wider)
    assert prepare_rescale(session, request, sleep=NO_SLEEP).notes == [
        "the endpoint runs 1 instance; registering autoscaling 2-4 raises it to 2 at once (the new minimum)"]
    plan = prepare(session, UpdateRequest(name="prod", region=emu.region, k="7", autoscale=wider), sleep=NO_SLEEP)
    assert "the new fleet has 1 instance; registering autoscaling 2-4 raises it to 2 at once (the new minimum)" \
        in plan.notes
    within = AutoscalePolicy(min_capacity=1, max_capacity=4, metric="concurrency", target=8)
    assert prepare_rescale(session, UpdateRequest(name="prod", region=emu.region, autoscale=within),
                           sleep=NO_SLEEP).notes == []


def test_the_quota_the_current_fleet_holds_does_not_change_the_update(emu_in_process):
    """The plan of what serves now is not held to Service Quotas (its fleet holds the quota already): an update
    planned with the quota read is the update planned without it, even where the live pools are at their quota."""
    from peagle_deploy.lifecycle.capacity import QuotaReader
    from peagle_deploy.plan import FactSource

    emu = emu_in_process
    emu.set_capacity("ml.g7e.2xlarge", 0)
    deploy(emu, instance_pools=["ml.g7e.2xlarge", "ml.g7e.4xlarge"])
    assert emu.serving("prod") == {"AllTraffic": {"ml.g7e.4xlarge": {"instances": 1, "model": "prod"}}}
    emu.set_quota("ml.g7e.2xlarge", 0)
    emu.set_quota("ml.g7e.4xlarge", 1)  # the one instance of the live fleet
    session = AwsSession(emu.region)
    now = datetime.now(UTC).replace(microsecond=0)
    request = UpdateRequest(name="prod", region=emu.region, instance_type="ml.g7e.12xlarge")
    with_quota = prepare(session, request, sleep=NO_SLEEP, now=now,
                         facts=FactSource(quota_lookup=QuotaReader(session)))
    without = prepare(session, request, sleep=NO_SLEEP, now=now)
    def named(plan):  # what the update sends and says (new names end in four random hex digits)
        dumped = plan.model_dump(mode="json", include={"create_model", "create_pool_models", "create_endpoint_config",
                                                       "update_endpoint", "endpoint_tags", "target", "notes",
                                                       "price_per_hour_usd", "delete_after_success"})
        return json.loads(json.dumps(dumped).replace(plan.target.endpoint_config, "NEW"))
    assert named(with_quota) == named(without)
    # the plan of what serves now was made: the TP degree is the new plan's, not the no-plan fallback's
    assert "SM_VLLM_TENSOR_PARALLEL_SIZE set to 2 for ml.g7e.12xlarge" not in with_quota.notes


def test_an_instance_type_change_refused_by_aws_ends_with_nothing_for_recover(emu_in_process):
    """Issue 38 item 5: AWS refuses UpdateEndpoint for an autoscaled endpoint's new instance type. The update
    registers the autoscaling again and removes the config it made; the model it shares with the live config was
    kept on purpose (an instance type change makes no new model), which is not something left: no intent, no
    lease, no 'finish with peagle recover', and recover finds nothing to do."""
    from peagle_deploy.autoscale import AutoscalePolicy
    from peagle_deploy.lifecycle.recover import recover

    emu = emu_in_process
    policy = AutoscalePolicy(min_capacity=1, max_capacity=4, metric="concurrency", target=8)
    deploy(emu, autoscale=policy)
    emu.fail("UpdateEndpoint", code="ValidationException",
             message="The endpoint has autoscaling configured; deregister it before changing the instance type")
    with pytest.raises(UsageError) as refused:
        update(emu, instance_type="ml.g7e.4xlarge")
    line = refused.value.one_line()
    assert "the endpoint still serves the old configuration" in line
    assert "autoscaling registered again (1-4 instances" in line and "removed the new endpoint config" in line
    assert "peagle recover" not in line, line
    tags = live(emu)[3]
    assert not [key for key in tags if key.startswith(("peagle:update-", "peagle:lease"))], tags
    assert emu.resource_names() == {"endpoints": ["prod"], "configs": ["prod"], "models": ["prod"]}
    target = emu.scalable_targets()["endpoint/prod/variant/AllTraffic"]
    assert (target["min"], target["max"]) == (1, 4)
    report = recover(AwsSession(emu.region), "prod", sleep=NO_SLEEP)
    assert not report.did_something and report.error is None
