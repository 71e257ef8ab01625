"""Issue 35's core through the CLI (in-process) against the emulator server: `peagle deploy --scale-to-zero`
(--hosting component) creates the model, the instances-only endpoint, the inference component and its scaling
(target, policies, alarms), all tagged; `status` shows the component, copies and instances, the idle rule and the
wake-up alarm; after the idle period the copies and instances go to zero and the cost stops growing; a request at
zero wakes it; `cleanup` removes everything of peagle's in SageMaker's order and nothing of an unmanaged
component-based stack beside it."""

from __future__ import annotations

import json
import re
import subprocess

import pytest

from peagle_deploy.scale_to_zero import IDLE_POLICY, WAKE_POLICY, idle_alarm_name, wake_alarm_name
from .cli_runner import run_cli_completed

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
    out = deploy(emu, "--scale-to-zero", "--idle", "20m", "--json")
    assert out.returncode == 0, out.stderr
    calls = list(emu.calls)
    doc = json.loads(out.stdout)
    assert doc["plan"]["hosting"] == "component"
    assert doc["deployed"]["inference_component"] == NAME
    sm = emu.client("sagemaker")
    config = sm.describe_endpoint_config(EndpointConfigName=NAME)
    variant = config["ProductionVariants"][0]
    assert "ModelName" not in variant and config["ExecutionRoleArn"] == emu.role_arn
    assert variant["ManagedInstanceScaling"] == {"Status": "ENABLED", "MinInstanceCount": 0, "MaxInstanceCount": 1}
    component = sm.describe_inference_component(InferenceComponentName=NAME)
    assert component["InferenceComponentStatus"] == "InService"
    assert component["Specification"]["ModelName"] == NAME  # the ModelName form: the drafter channel is the model's
    assert component["Specification"]["ComputeResourceRequirements"] == {
        "NumberOfAcceleratorDevicesRequired": 1.0, "MinMemoryRequiredInMb": 32768}  # half of 64 GiB
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
    assert target == {"min": 0, "max": 1, "policies": sorted([IDLE_POLICY, WAKE_POLICY])}
    wake, idle = alarms(emu)[wake_alarm_name(NAME)], alarms(emu)[idle_alarm_name(NAME)]
    policies = {p["PolicyName"]: p["PolicyARN"] for p in emu.client("application-autoscaling").describe_scaling_policies(
        ServiceNamespace="sagemaker", ResourceId=f"inference-component/{NAME}")["ScalingPolicies"]}
    assert wake["AlarmActions"] == [policies[WAKE_POLICY]] and idle["AlarmActions"] == [policies[IDLE_POLICY]]
    assert wake["MetricName"] == "NoCapacityInvocationFailures" and idle["EvaluationPeriods"] == 20
    # everything carries peagle's tags: the component's ARN and both alarms too
    cw = emu.client("cloudwatch")
    for arn in (component["InferenceComponentArn"], sm.describe_endpoint(EndpointName=NAME)["EndpointArn"]):
        tags = tags_of(sm.list_tags(ResourceArn=arn)["Tags"])
        assert tags["peagle:managed"] == "true" and tags["peagle:hosting"] == "component"
        assert tags["peagle:scale-to-zero"] == "20m" and tags["peagle:components"] == NAME
    for alarm in (wake, idle):
        assert tags_of(cw.list_tags_for_resource(ResourceARN=alarm["AlarmArn"])["Tags"])["peagle:managed"] == "true"
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
    assert component["idle"] == {"minutes": 15} and sorted(component["policies"]) == sorted([IDLE_POLICY, WAKE_POLICY])
    assert component["wake_alarm"]["name"] == wake_alarm_name(NAME)
    human = peagle(emu, "status", NAME)
    assert f"{NAME}: inference component {NAME} InService: 1/1 copies, 1 instance; copies 0-1, to zero after 15 min " \
           f"idle ({IDLE_POLICY}" in human.stdout
    assert f"wake-up {WAKE_POLICY}" in human.stdout

    clocked.advance(14 * 60)  # not yet idle long enough
    assert emu.components.state(NAME)["desired"] == 1
    clocked.advance(2 * 60 + 600 + 60)  # the idle alarm, then managed scaling releases the instance
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
    assert deploy(emu, "--scale-to-zero").returncode == 0
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
