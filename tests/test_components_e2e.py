"""Issue 35's core through the CLI (in-process) against the emulator server: `peagle deploy --scale-to-zero`
(--hosting component) creates the model, the instances-only endpoint, the inference component (caching on) and its
scaling by AWS's recipe (target, target tracking with scale-in, the wake-up policy and alarm), all tagged; `status`
shows the component, copies and instances, the scale-in rule and the wake-up alarm; after target tracking's idle
window the copies and instances go to zero and the cost stops growing; a request at zero wakes it; `cleanup`
removes everything of peagle's in SageMaker's order and nothing of an unmanaged component-based stack beside it;
an endpoint an older peagle made (its own metric-math idle rule) is moved to AWS's recipe by `update` or `recover`
and removed whole by `cleanup`."""

from __future__ import annotations

import json
import re
import subprocess

import pytest

from peagle_deploy.acceptance_alarm import PREFIX as ACCEPTANCE
from peagle_deploy.autoscale import POLICY_NAME
from peagle_deploy.scale_to_zero import WAKE_POLICY, wake_alarm_name

from .cli_runner import run_cli_completed
from .legacy_scale_to_zero import LEGACY_POLICY, legacy_alarm, make_legacy

NAME = "stz"
THEIRS = "theirs"


def peagle(emu, *args):
    return run_cli_completed(*args, env={**emu.env, "COLUMNS": "250"})


def deploy(emu, *extra):
    return peagle(emu, "deploy", "qwen3-coder", "--name", NAME, "--role", emu.role_arn, "--yes", *extra)


def alarms(emu) -> dict[str, dict]:
    cw = emu.client("cloudwatch")
    return {a["AlarmName"]: a for a in cw.describe_alarms()["MetricAlarms"]}


def tags_of(client_tags) -> dict[str, str]:
    return {t["Key"]: t["Value"] for t in client_tags}


def everything(emu) -> dict:
    """Every resource of the emulated region a cleanup could touch."""
    return {**emu.resource_names(), "components": emu.components.names(),
            "targets": sorted(emu.scalable_targets()),
            "alarms": sorted(a for a in alarms(emu) if not a.startswith("TargetTracking-"))}


@pytest.fixture
def theirs(emu, clocked):
    """Someone else's component-based stack that scales to zero: it must come through untouched."""
    (component,) = emu.components.create_stack(THEIRS, scale_to_zero=True)
    emu.calls.clear()  # the calls a test looks at are peagle's
    return component


def test_deploy_scale_to_zero_creates_the_component_and_its_scaling_tagged_in_order(emu, clocked, theirs):
    out = deploy(emu, "--scale-to-zero", "--json")
    assert out.returncode == 0, out.stderr
    calls = list(emu.calls)
    doc = json.loads(out.stdout)
    assert doc["plan"]["hosting"] == "component"
    assert doc["deployed"]["inference_component"] == NAME
    sm = emu.client("sagemaker")
    config = sm.describe_endpoint_config(EndpointConfigName=NAME)
    variant = config["ProductionVariants"][0]
    assert "ModelName" not in variant and config["ExecutionRoleArn"] == emu.role_arn
    # min 0 (AWS's recipe), max 2: the copy's instance and room for an update's new copy beside it
    assert variant["ManagedInstanceScaling"] == {"Status": "ENABLED", "MinInstanceCount": 0, "MaxInstanceCount": 2}
    component = sm.describe_inference_component(InferenceComponentName=NAME)
    assert component["InferenceComponentStatus"] == "InService"
    assert component["Specification"]["ModelName"] == NAME  # the ModelName form: the drafter channel is the model's
    assert component["Specification"]["ComputeResourceRequirements"] == {
        "NumberOfAcceleratorDevicesRequired": 1.0, "MinMemoryRequiredInMb": 32768}  # half of 64 GiB
    assert component["Specification"]["DataCacheConfig"] == {"EnableCaching": True}
    model = sm.describe_model(ModelName=NAME)["PrimaryContainer"]
    assert "SM_VLLM_SPECULATIVE_CONFIG" in model["Environment"]
    assert [c["ChannelName"] for c in model["AdditionalModelDataSources"]] == ["eagle"]
    # the order: creates, the endpoint InService, the component, its wait, then the scaling after verification
    assert calls.index("CreateEndpoint") < calls.index("CreateInferenceComponent")
    assert calls.index("CreateInferenceComponent") < calls.index("RegisterScalableTarget")
    assert max(i for i, c in enumerate(calls) if c == "DescribeInferenceComponent") < calls.index(
        "RegisterScalableTarget")
    assert calls.index("RegisterScalableTarget") < calls.index("PutScalingPolicy") < calls.index("PutMetricAlarm")
    target = emu.scalable_targets()[f"inference-component/{NAME}"]
    assert target == {"min": 0, "max": 1, "policies": sorted([POLICY_NAME, WAKE_POLICY])}
    wake = alarms(emu)[wake_alarm_name(NAME)]
    described = {p["PolicyName"]: p for p in emu.client("application-autoscaling").describe_scaling_policies(
        ServiceNamespace="sagemaker", ResourceId=f"inference-component/{NAME}")["ScalingPolicies"]}
    assert wake["AlarmActions"] == [described[WAKE_POLICY]["PolicyARN"]]
    assert wake["MetricName"] == "NoCapacityInvocationFailures"
    tracking = described[POLICY_NAME]["TargetTrackingScalingPolicyConfiguration"]
    assert "DisableScaleIn" not in tracking  # AWS's recipe: target tracking's own scale-in takes it to zero
    # Application Auto Scaling's two alarms for it, and no alarm of peagle's but the wake-up one
    assert sorted(a["AlarmName"].rsplit("-", 5)[0] for a in described[POLICY_NAME]["Alarms"]) == [
        f"TargetTracking-inference-component/{NAME}-AlarmHigh", f"TargetTracking-inference-component/{NAME}-AlarmLow"]
    assert [a for a in alarms(emu) if a.startswith("peagle-") and not a.startswith(ACCEPTANCE)] == [
        wake_alarm_name(NAME)]
    # everything carries peagle's tags: the component's ARN and both alarms too
    cw = emu.client("cloudwatch")
    for arn in (component["InferenceComponentArn"], sm.describe_endpoint(EndpointName=NAME)["EndpointArn"]):
        tags = tags_of(sm.list_tags(ResourceArn=arn)["Tags"])
        assert tags["peagle:managed"] == "true" and tags["peagle:hosting"] == "component"
        assert tags["peagle:scale-to-zero"] == "15m" and tags["peagle:components"] == NAME
    assert tags_of(cw.list_tags_for_resource(ResourceARN=wake["AlarmArn"])["Tags"])["peagle:managed"] == "true"
    assert emu.components.state(theirs)["status"] == "InService"


def wake_at_zero(emu) -> subprocess.CompletedProcess:
    """The wake step of issue 35's Must-show cycle: `peagle invoke NAME` at zero copies. Its waits are on the
    emulator's clock (`clocked`), so the minutes of the wake-up pass in no time: an instance starts in 100 s and the
    model loads in 300 s once the wake-up alarm (one-minute periods) has set the copies back."""
    emu.components.scaling(instance_start_s=100, copy_start_s=300)
    emu.calls.clear()
    return run_cli_completed("invoke", NAME, "hello", env={**emu.env, "COLUMNS": "250"}, fake_clock=False)


def test_the_must_show_cycle_deploy_status_idle_to_zero_wake_and_cleanup(emu, clocked, theirs):
    before = everything(emu)
    assert deploy(emu, "--scale-to-zero", "--idle", "15m").returncode == 0
    status = peagle(emu, "status", NAME, "--json")
    assert status.returncode == 0, status.stderr
    row = json.loads(status.stdout)["endpoints"][0]
    assert row["hosting"] == "component" and row["mode"] == "p-eagle" and row["k"] == 3
    component = row["component"]
    assert (component["name"], component["current_copies"], component["current_instances"]) == (NAME, 1, 1)
    assert component["scaling"] == "on" and (component["min_copies"], component["max_copies"]) == (0, 1)
    assert component["idle"] == {"minutes": 15} and sorted(component["policies"]) == sorted([POLICY_NAME, WAKE_POLICY])
    assert component["wake_alarm"]["name"] == wake_alarm_name(NAME) and component["scale_in"] == "target-tracking"
    assert component["scale_in_alarm"]["name"].startswith(f"TargetTracking-inference-component/{NAME}-AlarmLow-")
    assert component["last_scale_in"] is None and component["warning"] is None
    human = peagle(emu, "status", NAME)
    assert f"{NAME}: inference component {NAME} InService: 1/1 copies, 1 instance; copies 0-1, to zero after about " \
           f"15 min idle (target tracking {POLICY_NAME}, alarm " in human.stdout
    assert "not scaled in yet" in human.stdout and f"wake-up {WAKE_POLICY}" in human.stdout

    clocked.advance(14 * 60)  # not yet idle long enough
    assert emu.components.state(NAME)["desired"] == 1
    clocked.advance(2 * 60 + 600 + 60)  # target tracking's scale-in, then managed scaling releases the instance
    assert emu.components.state(NAME)["desired"] == 0
    assert emu.components.instances(NAME) == {"current": 0, "desired": 0}
    first = json.loads(peagle(emu, "status", NAME, "--json").stdout)["endpoints"][0]
    assert first["component"]["current_copies"] == 0 and first["component"]["current_instances"] == 0
    assert first["instance_count"] == 0 and first["price_per_hour_usd"] == 0.0
    clocked.advance(3 * 3600)
    later = json.loads(peagle(emu, "status", NAME, "--json").stdout)["endpoints"][0]
    assert later["cost_so_far_usd"] == first["cost_so_far_usd"] > 0  # the cost stopped growing at zero
    assert "instance-hours" in later["cost_how"]
    at_zero = peagle(emu, "status", NAME).stdout
    assert "0 x ml.g7e.2xlarge" in at_zero and "now $0.00/h for the 0 instances running" in at_zero
    assert f"inference component {NAME} InService: 0/0 copies, 0 instances" in at_zero
    assert "last scaled in " in at_zero and "did not act" not in at_zero  # the scale-in acted, and status says so

    woke = wake_at_zero(emu)
    assert woke.returncode == 0, woke.stderr
    assert woke.stdout.strip(), "the answer"
    lines = woke.stderr.splitlines()
    assert lines[0].startswith(f"waking inference component {NAME} of endpoint {NAME}: it has no copy in service "
                               "(scaled to zero), and the refused request counts in its NoCapacityInvocationFailures, "
                               "whose wake-up alarm sets the copies back"), woke.stderr
    assert any(re.fullmatch(rf"waking {NAME}: \d+m\d\ds elapsed, \d+ requests? refused", line) for line in lines)
    refused = len(emu.runtime.requests) - 1  # every invocation the emulator saw; the last one answered
    assert refused >= 2 and not [c for c in emu.calls if c.startswith(("Create", "Update", "Delete", "Put"))]
    cold = re.search(r"cold start: (\d+)m(\d\d)s \((\d+) requests refused while it woke", woke.stderr)
    assert cold and int(cold[3]) == refused, woke.stderr
    assert 400 <= int(cold[1]) * 60 + int(cold[2]) <= 400 + 60 + 30  # the instance, the model, the alarm, a retry
    assert emu.components.state(NAME)["desired"] == 1
    assert emu.components.state(NAME)["current"] == 1
    woken = json.loads(peagle(emu, "status", NAME, "--json").stdout)["endpoints"][0]
    assert woken["component"]["current_copies"] == 1 and woken["price_per_hour_usd"] > 0

    out = peagle(emu, "cleanup", NAME, "--yes", "--json")
    assert out.returncode == 0, out.stderr
    done = json.loads(out.stdout)
    kinds = [o["kind"] for o in done["outcomes"] if o["result"] == "deleted"]
    assert kinds.index("scalable_target") < kinds.index("alarm") < kinds.index("inference_component") \
        < kinds.index("endpoint") < kinds.index("endpoint_config") < kinds.index("model")
    assert everything(emu) == before  # nothing of peagle's is left, and theirs is all there
    assert emu.components.state(theirs)["status"] == "InService"
    calls = emu.calls
    assert calls.index("DeregisterScalableTarget") < calls.index("DeleteAlarms") \
        < calls.index("DeleteInferenceComponent") < calls.index("DeleteEndpoint")


def test_cleanup_all_and_expired_never_touch_an_unmanaged_component_stack(emu, clocked, theirs):
    before = everything(emu)
    assert deploy(emu, "--scale-to-zero", "--ttl", "1h").returncode == 0
    clocked.advance(7200)
    out = peagle(emu, "cleanup", "--expired", "--yes")
    assert out.returncode == 0, out.stderr
    assert everything(emu) == before
    assert deploy(emu, "--hosting", "component").returncode == 0
    assert peagle(emu, "cleanup", "--all", "--yes").returncode == 0
    assert everything(emu) == before


def test_cleanup_refuses_to_strand_a_component_peagle_did_not_make(emu, clocked):
    assert deploy(emu, "--hosting", "component").returncode == 0
    sm = emu.client("sagemaker")
    sm.create_inference_component(  # someone adds theirs to peagle's endpoint
        InferenceComponentName="guest", EndpointName=NAME, VariantName="AllTraffic",
        Specification={"ModelName": NAME, "ComputeResourceRequirements": {"MinMemoryRequiredInMb": 1024}},
        RuntimeConfig={"CopyCount": 1})
    out = peagle(emu, "cleanup", NAME, "--yes", "--json")
    outcomes = {(o["kind"], o["name"]): o for o in json.loads(out.stdout)["outcomes"]}
    assert outcomes[("inference_component", NAME)]["result"] == "deleted"
    assert outcomes[("inference_component", "guest")]["result"] == "left"
    assert outcomes[("endpoint", NAME)]["result"] == "left"
    assert "guest" in emu.components.names() and NAME in emu.resource_names()["endpoints"]
    assert outcomes[("model", NAME)]["result"] == "left"  # the guest names it


def test_an_endpoint_deleted_under_its_component_leaves_a_leftover_that_recover_removes(emu, clocked):
    """Should a real account strand components when their endpoint is deleted (the emulator refuses, *assumed*;
    "strand" is the other answer), status and recover handle the leftover."""
    assert deploy(emu, "--scale-to-zero").returncode == 0
    emu.components.delete_endpoint_with_components = "strand"
    emu.client("sagemaker").delete_endpoint(EndpointName=NAME)  # by hand: SageMaker strands the component
    status = json.loads(peagle(emu, "status", "--json").stdout)
    assert {(u["kind"], u["name"]) for u in status["unused"]} >= {("inference_component", NAME)}
    assert ("model", NAME) not in {(u["kind"], u["name"]) for u in status["unused"]}  # the component names it
    human = peagle(emu, "status").stdout
    assert f"stranded inference component {NAME} (its endpoint {NAME} was deleted under it" in human
    assert f"remove with 'peagle recover {NAME}" in human
    out = peagle(emu, "recover", NAME, "--json")
    assert out.returncode == 0, out.stderr
    assert emu.components.names() == [] and emu.resource_names() == {"endpoints": [], "configs": [], "models": []}
    assert emu.scalable_targets() == {} and not [a for a in alarms(emu) if a.startswith("peagle-")]


def test_verification_reads_vllms_start_up_lines_from_the_components_own_log_group(emu, clocked):
    """SageMaker writes a component's container output to /aws/sagemaker/InferenceComponents/NAME (a stream per
    copy), not to the endpoint's group: that is where deploy checks the speculative config vLLM parsed."""
    import time

    logs = emu.client("logs")
    group = f"/aws/sagemaker/InferenceComponents/{NAME}"
    logs.create_log_group(logGroupName=group)
    logs.create_log_stream(logGroupName=group, logStreamName="AllTraffic/copy-1")
    args = {"model": "/opt/ml/additional-model-data-sources/eagle", "method": "eagle3", "num_speculative_tokens": 3,
            "parallel_drafting": True}
    at = int(time.time() * 1000) + 60_000  # written once the copy starts, after the deploy began
    logs.put_log_events(logGroupName=group, logStreamName="AllTraffic/copy-1", logEvents=[
        {"timestamp": at, "message": "INFO vLLM server version 0.32.0, serving model /opt/ml/model"},
        {"timestamp": at + 1, "message": "INFO non-default args: {'speculative_config': " + repr(args) + "}"}])
    out = deploy(emu, "--hosting", "component", "--json")
    assert out.returncode == 0, out.stderr
    checks = {c["name"]: c for c in json.loads(out.stdout)["deployed"]["verification"]}
    assert checks["vLLM start-up"]["state"] == "verified", checks["vLLM start-up"]
    assert checks["vLLM start-up"]["actual"]["source"] == f"cloudwatch:{group}"
    assert checks["inference component"]["state"] == "verified"
    assert checks["speculative config"]["state"] == checks["drafter channel"]["state"] == "verified"


def test_update_refuses_an_instance_change_of_a_component_based_endpoint_in_one_line_and_writes_nothing(emu, clocked):
    """K and mode of a component are updated (tests/test_components_update.py); its instances are not."""
    assert deploy(emu, "--scale-to-zero").returncode == 0
    emu.calls.clear()
    out = peagle(emu, "update", NAME, "--instance-type", "ml.g7e.4xlarge", "--yes")
    lines = out.stderr.strip().splitlines()
    assert out.returncode == 2 and len(lines) == 1 and lines[0].startswith("error: "), out.stderr
    assert "hosts its model as an inference component" in lines[0] and f"peagle cleanup {NAME}" in lines[0]
    assert not [c for c in emu.calls if c.startswith(("Create", "Update", "Delete", "Put", "Register", "Add"))]


def test_deleting_the_endpoint_by_hand_is_refused_while_peagles_component_is_on_it(emu, clocked):
    """The emulator's answer (*assumed*, as the console refuses): nothing is stranded, peagle's cleanup still works."""
    import botocore.exceptions

    assert deploy(emu, "--scale-to-zero").returncode == 0
    with pytest.raises(botocore.exceptions.ClientError) as refused:
        emu.client("sagemaker").delete_endpoint(EndpointName=NAME)
    assert f"while it hosts inference components ({NAME})" in str(refused.value)
    assert peagle(emu, "cleanup", NAME, "--yes").returncode == 0
    assert emu.components.names() == [] and emu.resource_names()["endpoints"] == []


# an endpoint an older peagle made: its own idle rule, moved to AWS's recipe ---------------------------------------
def legacy_endpoint(emu, *extra) -> None:
    """peagle's scale-to-zero component as an older peagle left it (tests/legacy_scale_to_zero.py)."""
    assert deploy(emu, "--scale-to-zero", *extra).returncode == 0
    make_legacy(emu.client("application-autoscaling"), emu.client("cloudwatch"), NAME, minutes=20)
    emu.calls.clear()


def rule_of(emu) -> dict:
    policies = {p["PolicyName"]: p for p in emu.client("application-autoscaling").describe_scaling_policies(
        ServiceNamespace="sagemaker", ResourceId=f"inference-component/{NAME}")["ScalingPolicies"]}
    return {"policies": sorted(policies), "peagle_alarms": sorted(a for a in alarms(emu) if a.startswith("peagle-")
                                                                                and not a.startswith(ACCEPTANCE)),
            "scale_in": "DisableScaleIn" not in (
                policies.get(POLICY_NAME, {}).get("TargetTrackingScalingPolicyConfiguration") or {"DisableScaleIn": 1})}


AWS_RULE = {"policies": sorted([POLICY_NAME, WAKE_POLICY]), "peagle_alarms": [wake_alarm_name(NAME)], "scale_in": True}


def test_update_scale_to_zero_moves_an_older_idle_rule_to_awss_recipe_leaving_nothing_of_it(emu, clocked, theirs):
    legacy_endpoint(emu)
    assert rule_of(emu) == {"policies": sorted([LEGACY_POLICY, WAKE_POLICY]),
                            "peagle_alarms": sorted([legacy_alarm(NAME), wake_alarm_name(NAME)]), "scale_in": False}
    status = peagle(emu, "status", NAME).stdout
    assert f"to zero by an older peagle's idle rule ({LEGACY_POLICY}" in status
    assert f"unconfirmed on AWS: 'peagle update {NAME} --scale-to-zero' moves it to AWS's rule" in status
    dry = peagle(emu, "update", NAME, "--scale-to-zero", "--dry-run", "--json")
    assert dry.returncode == 0, dry.stderr
    writes = json.loads(dry.stdout)["update"]["writes"]
    assert [w.split(" (")[0] for w in writes] == [
        f"PutScalingPolicy {POLICY_NAME} on inference-component/{NAME}",
        f"DeleteScalingPolicy {LEGACY_POLICY} on inference-component/{NAME}", f"DeleteAlarms {legacy_alarm(NAME)}"]
    assert not [c for c in emu.calls if c.startswith(("Put", "Delete", "Register"))]  # a dry run writes nothing
    moved = peagle(emu, "update", NAME, "--scale-to-zero", "--yes")
    assert moved.returncode == 0, moved.stderr
    assert "scales to zero by AWS's recipe" in moved.stdout
    assert rule_of(emu) == AWS_RULE  # nothing of the old rule is left
    again = peagle(emu, "update", NAME, "--scale-to-zero", "--yes")
    assert again.returncode == 0 and "already scales to zero by AWS's recipe; nothing was changed" in again.stdout
    clocked.advance(16 * 60)  # and AWS's rule takes it to zero
    assert emu.components.state(NAME)["desired"] == 0
    assert emu.components.state(theirs)["status"] == "InService"


def test_recover_moves_an_older_idle_rule_and_cleanup_removes_one_whole(emu, clocked, theirs):
    before = everything(emu)
    legacy_endpoint(emu)
    out = peagle(emu, "recover", NAME, "--json")
    assert out.returncode == 0, out.stderr
    actions = json.loads(out.stdout)["recovered"]["endpoints"][0]["actions"]
    assert any(a.startswith(f"scaling of {NAME} moved to AWS's recipe: ") for a in actions), actions
    assert rule_of(emu) == AWS_RULE
    assert peagle(emu, "recover", NAME).returncode == 0 and rule_of(emu) == AWS_RULE  # idempotent
    make_legacy(emu.client("application-autoscaling"), emu.client("cloudwatch"), NAME)  # an older rule again
    cleaned = peagle(emu, "cleanup", NAME, "--yes", "--json")
    assert cleaned.returncode == 0, cleaned.stderr
    deleted = {(o["kind"], o["name"]) for o in json.loads(cleaned.stdout)["outcomes"] if o["result"] == "deleted"}
    assert ("alarm", legacy_alarm(NAME)) in deleted and ("scaling_policy", LEGACY_POLICY) in deleted
    assert everything(emu) == before


def test_an_update_of_k_moves_an_older_idle_rule_too(emu, clocked):
    legacy_endpoint(emu)
    dry = json.loads(peagle(emu, "update", NAME, "--k", "5", "--dry-run", "--json").stdout)["update"]["writes"]
    assert dry[-1] == f"DeleteAlarms {legacy_alarm(NAME)} (its metric-math idle alarm) (after success)"
    out = peagle(emu, "update", NAME, "--k", "5", "--yes")
    assert out.returncode == 0, out.stderr
    assert f"scaling of {NAME}: the older idle alarm {legacy_alarm(NAME)} deleted" in out.stderr
    assert rule_of(emu) == AWS_RULE


def test_an_older_idle_alarm_that_is_not_peagles_is_never_touched(emu, clocked):
    legacy_endpoint(emu)
    cw = emu.client("cloudwatch")
    arn = alarms(emu)[legacy_alarm(NAME)]["AlarmArn"]
    cw.untag_resource(ResourceARN=arn, TagKeys=["peagle:managed"])  # someone else's alarm of that name
    out = peagle(emu, "update", NAME, "--scale-to-zero", "--yes", "--json")
    assert out.returncode == 0, out.stderr
    assert legacy_alarm(NAME) in alarms(emu)  # left
    assert f"alarm {legacy_alarm(NAME)} left: not created by peagle" in " ".join(
        json.loads(out.stdout)["updated"]["done"])
