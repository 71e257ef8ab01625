"""`peagle update NAME --k N | --mode M` of an endpoint that hosts its model as an inference component (issue 35),
against the emulator server: a new model through the one plan builder (the live model's own settings carried), then
UpdateInferenceComponent naming it; the component Updating -> InService on the new model, the old model removed
(peagle's own, unused); a dry run writes nothing; bad input is one line; a signal during the wait leaves an intent
that `peagle recover` finishes; an unmanaged component-based stack beside it is untouched."""

from __future__ import annotations

import json
import signal

import pytest

from .cli_runner import run_cli_completed
from .forked_peagle import forked_peagle
from .peagle_process import PeagleProcess

NAME = "icu"
THEIRS = "theirs"
WRITES = ("Create", "Update", "Delete", "Put", "Register", "Add", "Deregister")


def peagle(emu, *args):
    return run_cli_completed(*args, env={**emu.env, "COLUMNS": "250"})


def writes(emu) -> list[str]:
    return [c for c in emu.calls if c.startswith(WRITES)]


def component_model(emu, name=NAME) -> str:
    described = emu.client("sagemaker").describe_inference_component(InferenceComponentName=name)
    return described["Specification"]["ModelName"]


def served_env(emu, model: str) -> dict[str, str]:
    return emu.client("sagemaker").describe_model(ModelName=model)["PrimaryContainer"]["Environment"]


@pytest.fixture
def deployed(emu, clocked):
    """peagle's scale-to-zero component (with a user --env), and someone else's component stack beside it."""
    (theirs,) = emu.components.create_stack(THEIRS, scale_to_zero=True)
    out = peagle(emu, "deploy", "qwen3-coder", "--name", NAME, "--role", emu.role_arn, "--yes", "--scale-to-zero",
                 "--env", "MY_SETTING=kept")
    assert out.returncode == 0, out.stderr
    emu.calls.clear()
    return theirs


def theirs_state(emu, theirs) -> dict:
    sm = emu.client("sagemaker")
    described = sm.describe_inference_component(InferenceComponentName=theirs)
    return {"status": described["InferenceComponentStatus"], "model": described["Specification"]["ModelName"],
            "endpoint": sm.describe_endpoint(EndpointName=THEIRS)["EndpointConfigName"],
            "models": sorted(m["ModelName"] for m in sm.list_models()["Models"] if m["ModelName"].startswith(THEIRS))}


def new_copy_logs(emu, k: int) -> None:
    """What vLLM logs as the new copy starts (the component's own log group), after the update began."""
    import time

    logs = emu.client("logs")
    group = f"/aws/sagemaker/InferenceComponents/{NAME}"
    try:  # the deploy made it already for its acceptance alarm's filters
        logs.create_log_group(logGroupName=group)
    except logs.exceptions.ResourceAlreadyExistsException:
        pass
    logs.create_log_stream(logGroupName=group, logStreamName="AllTraffic/copy-2")
    args = {"model": "/opt/ml/additional-model-data-sources/eagle", "method": "eagle3", "num_speculative_tokens": k,
            "parallel_drafting": True}
    at = int(time.time() * 1000) + 60_000
    logs.put_log_events(logGroupName=group, logStreamName="AllTraffic/copy-2", logEvents=[
        {"timestamp": at, "message": "INFO vLLM server version 0.32.0, serving model /opt/ml/model"},
        {"timestamp": at + 1, "message": "INFO non-default args: {'speculative_config': " + repr(args) + "}"}])


def test_update_k_moves_the_component_to_a_new_model_and_removes_the_old_one(emu, deployed):
    before_theirs = theirs_state(emu, deployed)
    new_copy_logs(emu, 5)
    emu.calls.clear()
    old = component_model(emu)
    out = peagle(emu, "update", NAME, "--k", "5", "--yes", "--json")
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    new = component_model(emu)
    assert new != old and doc["updated"]["serving"]["model"] == new and doc["updated"]["serving"]["k"] == 5
    env = served_env(emu, new)
    assert json.loads(env["SM_VLLM_SPECULATIVE_CONFIG"])["num_speculative_tokens"] == 5
    assert env["MY_SETTING"] == "kept"  # the user's --env at deploy is carried (update_plan's carry rule)
    sm = emu.client("sagemaker")
    assert [c["ChannelName"] for c in sm.describe_model(ModelName=new)["PrimaryContainer"][
        "AdditionalModelDataSources"]] == ["eagle"]
    assert sm.describe_inference_component(InferenceComponentName=NAME)["InferenceComponentStatus"] == "InService"
    assert old not in [m["ModelName"] for m in sm.list_models()["Models"]]  # peagle's, unused: removed
    checks = {c["name"]: c["state"] for c in doc["updated"]["verification"]}
    assert checks == {**{name: "verified" for name in checks}}, checks  # the server-read K=5 from the new copy's log
    assert {"speculative config", "drafter channel", "inference component", "vLLM start-up"} <= set(checks)
    calls = writes(emu)
    assert calls.index("CreateModel") < calls.index("UpdateInferenceComponent") < calls.index("DeleteModel")
    assert "UpdateEndpoint" not in calls and "CreateEndpointConfig" not in calls
    status = json.loads(peagle(emu, "status", NAME, "--json").stdout)["endpoints"][0]
    assert status["k"] == 5 and status["mode"] == "p-eagle"
    assert status["startup_check"]["state"] == "verified", status["startup_check"]  # vLLM's K=5 agrees
    assert not any(k.startswith("peagle:update") for k in status.get("tags", {}))
    assert theirs_state(emu, deployed) == before_theirs


def test_update_k_of_a_full_instance_ends_serving_k5_from_a_copy_started_beside_the_old_one(emu, deployed, clocked):
    """Must show (issue 44): one copy takes the only GPU of its ml.g7e.2xlarge, so the instance is full; SageMaker's
    rolling update starts the new copy beside the old one before it removes it (botocore's model), and peagle's
    deploy left room for it (MaxInstanceCount 2, priced in the plan). The update ends serving K=5 from a copy on a
    second instance; the old instance is released once idle."""
    sm = emu.client("sagemaker")
    scaling = sm.describe_endpoint_config(EndpointConfigName=NAME)["ProductionVariants"][0]["ManagedInstanceScaling"]
    assert scaling["MaxInstanceCount"] == 2
    [old_instance] = emu.components.state(NAME)["instances"]
    assert emu.components.instances(NAME) == {"current": 1, "desired": 1}
    new_copy_logs(emu, 5)
    dry = json.loads(peagle(emu, "update", NAME, "--k", "5", "--dry-run", "--json").stdout)["update"]
    assert any(n.startswith("room for the update: the new copy starts beside the 1 serving (MaxInstanceCount 2 "
                            "holds 2)") for n in dry["notes"]), dry["notes"]
    out = peagle(emu, "update", NAME, "--k", "5", "--yes", "--json")
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["updated"]["serving"]["k"] == 5
    state = emu.components.state(NAME)
    assert state["status"] == "InService" and state["current"] == 1
    [new_instance] = state["instances"]
    assert new_instance != old_instance  # provisioned beside the old copy, not in its place
    assert emu.components.instances(NAME) == {"current": 2, "desired": 2}  # the old instance idles a while
    speculative = served_env(emu, component_model(emu))["SM_VLLM_SPECULATIVE_CONFIG"]
    assert json.loads(speculative)["num_speculative_tokens"] == 5
    clocked.advance(600)
    assert emu.components.instances(NAME) == {"current": 1, "desired": 1}


def test_an_endpoint_without_room_for_the_new_copy_is_refused_before_any_write(emu, deployed):
    """An older peagle's component endpoint (MaxInstanceCount = its copies) has no room beside its copy: the update
    would stall or fail on AWS, so it is refused in one line naming the fix, and nothing is written."""
    from moto.sagemaker.models import sagemaker_backends

    variant = sagemaker_backends["123456789012"][emu.region].endpoint_configs[NAME].production_variants[0]
    variant["ManagedInstanceScaling"] = {**variant["ManagedInstanceScaling"], "MaxInstanceCount": 1}
    out = peagle(emu, "update", NAME, "--k", "5", "--yes")
    lines = out.stderr.strip().splitlines()
    assert out.returncode == 2 and len(lines) == 1, out.stderr
    assert lines[0].startswith(f"error: endpoint '{NAME}' has no room for the update: SageMaker starts the new copies "
                               "beside the old ones, and MaxInstanceCount 1 x ml.g7e.2xlarge holds 1 copy of "), lines
    assert lines[0].endswith(f"then peagle cleanup {NAME}; nothing was changed")
    assert writes(emu) == []


def test_update_mode_off_then_back(emu, deployed):
    out = peagle(emu, "update", NAME, "--mode", "off", "--yes")
    assert out.returncode == 0, out.stderr
    assert "SM_VLLM_SPECULATIVE_CONFIG" not in served_env(emu, component_model(emu))
    out = peagle(emu, "update", NAME, "--mode", "p-eagle", "--k", "4", "--yes")
    assert out.returncode == 0, out.stderr
    assert json.loads(served_env(emu, component_model(emu))["SM_VLLM_SPECULATIVE_CONFIG"])[
        "num_speculative_tokens"] == 4


def test_dry_run_prints_now_and_after_and_writes_nothing(emu, deployed):
    out = peagle(emu, "update", NAME, "--k", "6", "--dry-run")
    assert out.returncode == 0, out.stderr
    assert "K=3 (model" in out.stdout and "K=6 (model" in out.stdout
    assert "UpdateInferenceComponent" in out.stdout and "CreateModel" in out.stdout
    doc = json.loads(peagle(emu, "update", NAME, "--k", "6", "--dry-run", "--json").stdout)
    assert doc["update"]["update_component"]["Specification"]["ModelName"] == doc["update"]["target"]["model"]
    assert writes(emu) == []


@pytest.mark.parametrize("argv,message", [
    (["--k", "0"], "--k"),
    (["--k", "abc"], "--k"),
    (["--instance-type", "ml.g7e.4xlarge"], "hosts its model as an inference component: peagle update changes its "
                                            "K or mode, not --instance-type"),
    (["--instance-count", "2"], "not --instance-count"),
    (["--autoscale", "0:2"], "not --autoscale: update K or mode only"),  # issue 45 item 6: not "instance-based"
    (["--autoscale", "0:2", "--target-concurrency", "8"], "not --autoscale: update K or mode only"),
    (["--k", "3"], "already serves K=3"),
])
def test_bad_input_is_one_line_exit_2_and_no_write(emu, deployed, argv, message):
    out = peagle(emu, "update", NAME, *argv, "--yes")
    lines = out.stderr.strip().splitlines()
    assert out.returncode == 2 and len(lines) == 1 and lines[0].startswith("error: "), out.stderr
    assert message in lines[0], out.stderr
    assert writes(emu) == []


def test_an_unmanaged_component_stack_is_refused(emu, deployed):
    out = peagle(emu, "update", THEIRS, "--k", "5", "--yes")
    assert out.returncode == 2 and "was not created by peagle" in out.stderr
    assert writes(emu) == []


@pytest.mark.parametrize("action,skip,when", [
    ("DescribeInferenceComponent", 3, "before"),  # the plan's read and the two rechecks, then the wait's first poll
    ("UpdateInferenceComponent", 0, "after"),  # SageMaker took it, its answer in flight
], ids=["during-the-wait", "UpdateInferenceComponent-answer-in-flight"])
def test_sigint_after_sagemaker_took_the_update_then_recover_completes_it(emu, deployed, action, skip, when):
    old = component_model(emu)
    emu.components.script(updating_polls=3)
    gate = emu.gate(action, skip=skip, when=when)
    run = PeagleProcess(["update", NAME, "--k", "5", "--yes"], emu.env, program=forked_peagle())
    gate.wait_entered()
    run.signal(signal.SIGINT)
    run.wait_for_stderr("received SIGINT")
    gate.release()
    code = run.finish()
    assert code == 130, run.stderr
    last = run.stderr.strip().splitlines()[-1]
    assert f"peagle recover {NAME}" in last and "Traceback" not in run.stderr, run.stderr
    new = component_model(emu)
    assert new != old  # SageMaker took the update; peagle deleted neither model
    names = [m["ModelName"] for m in emu.client("sagemaker").list_models()["Models"]]
    assert old in names and new in names
    status = peagle(emu, "status", NAME)
    assert f"update did not finish: {old} -> {new}" in status.stdout, status.stdout  # the models it moves between
    assert f"peagle recover {NAME} --region us-east-1" in status.stdout
    out = peagle(emu, "recover", NAME, "--json")
    assert out.returncode == 0, out.stderr
    recovered = json.loads(out.stdout)["recovered"]["endpoints"][0]
    assert recovered["update"] == "completed", recovered
    names = [m["ModelName"] for m in emu.client("sagemaker").list_models()["Models"]]
    assert old not in names and new in names
    tags = {t["Key"]: t["Value"] for t in emu.client("sagemaker").list_tags(
        ResourceArn=emu.client("sagemaker").describe_endpoint(EndpointName=NAME)["EndpointArn"])["Tags"]}
    assert tags["peagle:k"] == "5" and not any(k.startswith("peagle:update") for k in tags)
    again = json.loads(peagle(emu, "recover", NAME, "--json").stdout)
    assert not again["recovered"]["endpoints"][0]["actions"]  # idempotent


def test_a_sigkill_before_update_inference_component_then_recover_reverts(emu, deployed):
    """SIGKILL after the new model, before the component moved: the intent stays; recover (--force: the lease of
    the killed process is still fresh) finds the component on the old model, removes the new one, clears the
    intent, as it reverts a classic update."""
    old = component_model(emu)
    gate = emu.gate("DescribeInferenceComponent", skip=2, when="before")  # the recheck right before the move
    run = PeagleProcess(["update", NAME, "--k", "5", "--yes"], emu.env, program=forked_peagle())
    gate.wait_entered()
    run.signal(signal.SIGKILL)
    assert run.finish() == -signal.SIGKILL
    gate.release()
    sm = emu.client("sagemaker")
    arn = sm.describe_endpoint(EndpointName=NAME)["EndpointArn"]
    tags = {t["Key"]: t["Value"] for t in sm.list_tags(ResourceArn=arn)["Tags"]}
    new = tags["peagle:update-to"]
    assert component_model(emu) == old and new in [m["ModelName"] for m in sm.list_models()["Models"]]
    out = peagle(emu, "recover", NAME, "--force", "--json")
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["recovered"]["endpoints"][0]["update"] == "reverted"
    names = [m["ModelName"] for m in sm.list_models()["Models"]]
    assert new not in names and old in names
    tags = {t["Key"]: t["Value"] for t in sm.list_tags(ResourceArn=arn)["Tags"]}
    assert tags["peagle:k"] == "3" and not any(k.startswith(("peagle:update", "peagle:lease")) for k in tags)


def test_a_failed_update_that_sagemaker_rolls_back_removes_the_new_model_exit_6(emu, deployed):
    old = component_model(emu)
    emu.components.script(updating_polls=1, update_fails="CUDA out of memory")
    out = peagle(emu, "update", NAME, "--k", "5", "--yes")
    assert out.returncode == 6, out.stderr
    last = out.stderr.strip().splitlines()[-1]
    assert "SageMaker rolled it back" in last and "CUDA out of memory" in last and "removed the new model" in last
    sm = emu.client("sagemaker")
    assert component_model(emu) == old
    assert sm.describe_inference_component(InferenceComponentName=NAME)["InferenceComponentStatus"] == "InService"
    assert sorted(m["ModelName"] for m in sm.list_models()["Models"] if m["ModelName"].startswith(NAME)) == [old]
    tags = {t["Key"] for t in sm.list_tags(ResourceArn=sm.describe_endpoint(EndpointName=NAME)["EndpointArn"])["Tags"]}
    assert not any(k.startswith(("peagle:update", "peagle:lease")) for k in tags)


def test_a_lost_answer_of_update_inference_component_retried_into_in_progress_goes_on(emu, deployed):
    """SageMaker took UpdateInferenceComponent but its answer was lost; botocore's retry meets "Cannot update ...
    while it is in state UPDATE_...": the component names the new model, so the update goes on (its new model is
    never deleted) and completes."""
    old = component_model(emu)
    emu.components.script(updating_polls=2)
    emu.fail("UpdateInferenceComponent", "ServiceUnavailable", "answer lost (emulated)", status=503, after=True,
             times=1)
    out = peagle(emu, "update", NAME, "--k", "5", "--yes")
    assert out.returncode == 0, out.stderr
    assert "but SageMaker took it" in out.stderr
    new = component_model(emu)
    names = [m["ModelName"] for m in emu.client("sagemaker").list_models()["Models"]]
    assert new != old and new in names and old not in names
