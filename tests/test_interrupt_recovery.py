"""Issue 27's cases 1-5 and 7, each command a process of its own (forked from the suite's fork server, as the
fault matrix's: tests/interrupt_helpers.py `Forked`; SIGKILL of the shim kills the command) against the emulator
server, with an unmanaged stack present throughout. Each interrupts an update, a cleanup or a sweep the way the
issue saw it (emulator gates, faults and scripted updates pin the moment: no sleeps), then checks that `peagle status`
names what is left and that the one recovery command, `peagle recover NAME`, leaves exactly the endpoint
serving the config SageMaker settled on, autoscaling as intended, no unused peagle config or model, and the
unmanaged stack untouched; a second `peagle recover` finds nothing to do.
"""

from __future__ import annotations

import json
import tempfile
import os
import signal
from contextlib import contextmanager
from datetime import timedelta

import pytest

from peagle_deploy.autoscale import AutoscalePolicy

from .interrupt_helpers import (LATER, UNMANAGED, Forked, assert_recovered, settled_state, stack,
                                unmanaged_snapshot)

NAME = "ep1"
POLICY = AutoscalePolicy(min_capacity=1, max_capacity=4, metric="concurrency", target=8)
peagle = Forked()


@pytest.fixture(scope="module")
def plans():
    """Deploy plans to copy endpoints from (offline: the shipped specs, the emulator's JumpStart bucket's)."""
    from peagle_deploy.plan import PlanRequest, build_plan

    role = "arn:aws:iam::123456789012:role/peagle-emulator"
    return {"plain": build_plan(PlanRequest(model="qwen3-coder", role=role, name="x", offline=True)),
            "autoscaled": build_plan(PlanRequest(model="qwen3-coder", role=role, name="x", offline=True,
                                                 autoscale=POLICY))}


@pytest.fixture
def world(emu, plans):
    """ep1 (P-EAGLE, K=3) beside someone else's endpoint; updates take two status polls."""
    emu.script_update(updating_polls=2)
    emu.create_endpoint_stack(UNMANAGED)
    before = unmanaged_snapshot(emu)
    yield emu
    assert unmanaged_snapshot(emu) == before  # untouched throughout


def env(emu, caller="test", **extra):
    return {**emu.env, "AWS_SDK_UA_APP_ID": caller, **extra}


def status_of(emu, name=NAME, **extra):
    done = peagle.run(["status", name, "--json"], env(emu, **extra))
    assert done.code == 0, done.stderr
    return json.loads(done.stdout), done


def recover_and_check(emu, *, k=None, autoscaling=None, name=NAME, **extra):
    done = peagle.run(["recover", name], env(emu, **extra))
    assert done.code == 0, done.stderr
    state = settled_state(emu, name)
    assert_recovered(state, k=k, autoscaling=autoscaling)
    again = peagle.run(["recover", name], env(emu, **extra))
    assert again.code == 0 and "nothing left to finish" in again.stdout, again.stdout + again.stderr
    return state, done


@contextmanager
def aws_env(emu):
    """This process's boto3 pointed at the emulator server (for in-process set-up)."""
    saved = {k: v for k, v in os.environ.items() if k.startswith("AWS_")}
    os.environ.update({k: v for k, v in emu.env.items() if k.startswith("AWS_")})
    try:
        yield
    finally:
        for key in [k for k in os.environ if k.startswith("AWS_")]:
            del os.environ[key]
        os.environ.update(saved)


@pytest.mark.parametrize("when", ["before", "after"])
def test_case1_sigterm_while_update_endpoint_is_in_flight_never_deletes_what_it_moves_to(world, plans, when):
    emu = world
    stack(emu, plans["plain"], NAME)
    gate = emu.gate("UpdateEndpoint", when=when, caller="upd")
    run = peagle.start(["update", NAME, "--k", "7", "--bake", "0s", "--yes"], env(emu, "upd"))
    gate.wait_entered()
    run.signal(signal.SIGTERM)
    run.wait_for_stderr("received SIGTERM: letting UpdateEndpoint finish")
    gate.release()
    assert run.finish() == 130, run.stderr
    line = run.last_error
    assert line.startswith("error: interrupted by SIGTERM: finish with 'peagle recover ep1 --region us-east-1'")
    assert "SageMaker accepted the update" in line and "nothing was deleted" in line
    new = line.split("moves to ")[1].split(" ")[0]
    assert new in emu.resource_names()["configs"] and new in emu.resource_names()["models"]

    document, shown = status_of(emu)
    row = document["endpoints"][0]
    assert row["update"]["to_config"] == new and row["recover_command"] == "peagle recover ep1 --region us-east-1"
    human = peagle.run(["status", NAME], env(emu))
    assert f"ep1: update in progress: ep1 -> {new}" in human.stdout or f"ep1: update did not finish: ep1 -> {new}" \
        in human.stdout, human.stdout
    assert "finish with 'peagle recover ep1 --region us-east-1'" in human.stdout

    state, done = recover_and_check(emu, k=7)
    assert state["serves"] == new and f"the update ep1 -> {new} was completed" in done.stdout


def test_case1_a_500_answering_an_applied_update_endpoint_goes_on_to_success(world, plans):
    """SageMaker applied UpdateEndpoint but answered HTTP 500; botocore's retry meets 'Cannot update in-progress
    endpoint'. peagle reads the endpoint, sees it moving to this update's config, and finishes the update."""
    emu = world
    stack(emu, plans["plain"], NAME)
    emu.fail("UpdateEndpoint", status=500, after=True, caller="upd")
    done = peagle.run(["update", NAME, "--k", "7", "--bake", "0s", "--yes", "--json"], env(emu, "upd"))
    assert done.code == 0, done.stderr
    assert "but SageMaker took the update" in done.stderr
    assert emu.calls.count("UpdateEndpoint") == 2  # the retry was refused as in-progress
    result = json.loads(done.stdout)["updated"]
    assert_recovered(settled_state(emu, NAME), k=7)
    assert settled_state(emu, NAME)["serves"] == result["serving"]["endpoint_config"]


def test_emulator_fails_an_update_whose_new_config_was_deleted_like_a_rollback(emu_in_process, plans):
    """Today's main: a KeyError, then HTTP 500 on every DescribeEndpoint of the endpoint."""
    emu = emu_in_process
    stack(emu, plans["plain"], NAME)
    sm = emu.client("sagemaker")
    sm.create_endpoint_config(EndpointConfigName="next", ProductionVariants=[{
        "VariantName": "AllTraffic", "ModelName": NAME, "InstanceType": "ml.g7e.2xlarge",
        "InitialInstanceCount": 1}])
    emu.script_update(updating_polls=1)
    sm.update_endpoint(EndpointName=NAME, EndpointConfigName="next")
    described = sm.describe_endpoint(EndpointName=NAME)
    assert described["EndpointStatus"] == "Updating"
    assert described["PendingDeploymentSummary"]["EndpointConfigName"] == "next"
    sm.delete_endpoint_config(EndpointConfigName="next")
    described = sm.describe_endpoint(EndpointName=NAME)
    assert described["EndpointStatus"] == "InService" and described["EndpointConfigName"] == NAME
    assert "next was deleted while the endpoint was updating" in described["FailureReason"]


def test_case2_an_update_that_read_a_config_which_no_longer_serves_is_refused(world, plans):
    """B reads the endpoint (K=3), A runs to completion (K=5), B goes on: B is refused in one line, exit 2, before
    any write; A's config serves and nothing is orphaned."""
    emu = world
    stack(emu, plans["plain"], NAME)
    gate = emu.gate("DescribeEndpoint", skip=1, caller="b")  # B's re-check after the prompt
    b = peagle.start(["update", NAME, "--k", "7", "--bake", "0s", "--yes"], env(emu, "b"))
    gate.wait_entered()
    # A runs on another machine: this host's lock of `peagle update ep1` (held by B) does not see it
    other_host = tempfile.mkdtemp(prefix="peagle-other-host-")
    a = peagle.run(["update", NAME, "--k", "5", "--bake", "0s", "--yes"], env(emu, "a", PEAGLE_STATE_DIR=other_host))
    assert a.code == 0, a.stderr
    gate.release()
    assert b.finish() == 2, b.stderr
    errors = [line for line in b.stderr_lines if line.strip() and not line.startswith(("note", " ", "│", "╭", "╰"))]
    assert b.last_error.startswith("error: endpoint 'ep1' now serves ep1-u"), b.stderr
    assert "not ep1 (K=3) which this update read" in b.last_error and "run this update again" in b.last_error
    assert "Traceback" not in b.stderr and len([e for e in errors if e.startswith("error")]) == 1
    assert emu.recorder.writes("b") == []
    document, _ = status_of(emu)
    assert (document["endpoints"][0]["k"], document["endpoints"][0]["spec_source"]) == (5, "served config")
    assert document["unused"] == []
    recover_and_check(emu, k=5)


def test_case3_sigkill_while_an_autoscaled_instance_type_change_is_updating(world, plans):
    emu = world
    stack(emu, plans["autoscaled"], NAME)
    gate = emu.gate("DescribeEndpoint", skip=3, caller="upd")  # read, two re-checks: the first poll of the wait
    run = peagle.start(["update", NAME, "--instance-type", "ml.g7e.4xlarge", "--bake", "0s", "--yes"],
                       env(emu, "upd"))
    gate.wait_entered()
    run.signal(signal.SIGKILL)
    run.finish()
    gate.release()
    assert run.code == -signal.SIGKILL
    assert emu.scalable_targets() == {}  # deregistered for the change, nobody registered it again yet

    human = peagle.run(["status", NAME], env(emu, **LATER))  # its lease has expired: the update is abandoned
    assert human.code == 0, human.stderr
    assert "ep1: update in progress: ep1 -> ep1-u" in human.stdout or "ep1: update did not finish: ep1 -> ep1-u" \
        in human.stdout, human.stdout
    assert "finish with 'peagle recover ep1 --region us-east-1'" in human.stdout
    again = peagle.run(["update", NAME, "--autoscale", "1:4", "--target-concurrency", "8", "--yes"], env(emu))
    assert again.code == 2 and "peagle recover ep1" in again.last_error, again.stderr

    state, done = recover_and_check(emu, autoscaling=POLICY, **LATER)
    assert state["instance_type"] == "ml.g7e.4xlarge"
    assert "autoscaling registered again: 1-4 instances" in done.stdout
    assert "autoscaling" not in peagle.run(["recover", NAME], env(emu, **LATER)).stdout


def test_case4_sigterm_during_cleanup_after_an_update_is_finished_by_tag(world, plans):
    emu = world
    stack(emu, plans["plain"], NAME)
    with aws_env(emu):
        from peagle_deploy.aws import AwsSession
        from peagle_deploy.lifecycle.update_plan import UpdateRequest, prepare
        from peagle_deploy.lifecycle.update_run import run_update

        session = AwsSession(emu.region)
        plan = prepare(session, UpdateRequest(name=NAME, region=emu.region, k="7", bake=timedelta(0)),
                       sleep=lambda _s: None)
        run_update(plan, session, sleep=lambda _s: None, handle_signals=False)
    new = plan.target.endpoint_config
    assert emu.resource_names()["models"] == sorted([new, UNMANAGED])

    gate = emu.gate("DeleteEndpointConfig", caller="clean")  # the endpoint is gone by then
    run = peagle.start(["cleanup", NAME, "--yes"], env(emu, "clean"))
    gate.wait_entered()
    run.signal(signal.SIGTERM)
    assert run.finish() == 130, run.stderr
    gate.release()
    gate.done.wait(30)
    assert run.last_error == "error: interrupted by SIGTERM: finish with 'peagle recover ep1 --region us-east-1'"
    assert NAME not in emu.resource_names()["endpoints"] and new in emu.resource_names()["models"]

    shown = peagle.run(["status", NAME], env(emu))
    assert shown.code == 0, shown.stderr
    assert (f"unused model {new} (peagle made it for ep1; no endpoint uses it): remove with "
            "'peagle recover ep1 --region us-east-1'") in shown.stdout
    done = peagle.run(["recover", NAME], env(emu))
    assert done.code == 0 and f"deleted model {new}" in done.stdout, done.stderr
    assert settled_state(emu, NAME) == {"configs": [], "models": [], "endpoint": False, "autoscaling": None}
    gone = peagle.run(["recover", NAME], env(emu))  # idempotent: finished is finished
    assert gone.code == 0 and "no endpoint named ep1 and nothing peagle made for it in us-east-1: nothing left to " \
        "finish" in gone.stdout, gone.stdout + gone.stderr


def test_case4_cleanup_name_finds_an_updated_endpoints_model_by_tag(world, plans):
    emu = world
    stack(emu, plans["plain"], NAME)
    sm = emu.client("sagemaker")
    model = dict(plans["plain"].create_model, ModelName="ep1-u261122200000-3f9a",
                 Tags=[{"Key": "peagle:managed", "Value": "true"}, {"Key": "peagle:endpoint", "Value": NAME}])
    sm.create_model(**model)
    sm.delete_endpoint(EndpointName=NAME)
    done = peagle.run(["cleanup", NAME, "--yes"], env(emu))
    assert done.code == 0, done.stderr
    assert settled_state(emu, NAME)["models"] == []


def test_recover_all_takes_an_endpoint_deleted_between_its_describe_and_its_tags_as_gone(world, plans):
    """Seen when documents ran side by side: another command deleted an endpoint while `recover --all` went
    through the list (its DescribeEndpoint answered, its ListTags did not find it). Gone is not a failure."""
    emu = world
    stack(emu, plans["plain"], NAME)
    stack(emu, plans["plain"], "ep2")
    gate = emu.gate("ListTags", skip=1, caller="rec", resource=NAME)  # the listing's ListTags, then recover's
    run = peagle.start(["recover", "--all"], env(emu, "rec"))
    gate.wait_entered()
    emu.client("sagemaker").delete_endpoint(EndpointName=NAME)
    gate.release()
    assert run.finish() == 0, run.stderr
    assert "error" not in run.stderr.lower(), run.stderr
    assert emu.endpoint_status("ep2") == "InService" and NAME not in emu.resource_names()["endpoints"]


def test_status_name_of_an_endpoint_deleted_between_its_describe_and_its_tags(world, plans):
    """The same moment for `status NAME`: not an AWS error, the endpoint is gone and what it left is named."""
    emu = world
    stack(emu, plans["plain"], NAME)
    gate = emu.gate("ListTags", caller="st", resource=NAME)
    run = peagle.start(["status", NAME, "--json"], env(emu, "st"))
    gate.wait_entered()
    emu.client("sagemaker").delete_endpoint(EndpointName=NAME)
    gate.release()
    assert run.finish() == 0, run.stderr  # as if it had gone before: no row, what it left named with its command
    shown = json.loads(run.stdout)
    assert shown["endpoints"] == [] and {(u["kind"], u["command"]) for u in shown["unused"]} == {
        ("endpoint_config", "peagle recover ep1 --region us-east-1"), ("model", "peagle recover ep1 --region us-east-1")}


def test_case5_sigkill_while_updating_then_status_tells_the_served_truth(world, plans):
    emu = world
    stack(emu, plans["plain"], NAME)
    emu.script_update(updating_polls=3)
    gate = emu.gate("DescribeEndpoint", skip=3, caller="upd")
    run = peagle.start(["update", NAME, "--k", "7", "--bake", "0s", "--yes"], env(emu, "upd"))
    gate.wait_entered()
    run.signal(signal.SIGKILL)
    run.finish()
    gate.release()
    for _ in range(4):  # SageMaker finishes the update on its own
        emu.client("sagemaker").describe_endpoint(EndpointName=NAME)
    assert emu.endpoint_status(NAME) == "InService"

    document, _ = status_of(emu, **LATER)  # its lease has expired: the update is abandoned
    row = document["endpoints"][0]
    new = row["endpoint_config"]
    assert new.startswith("ep1-u") and (row["k"], row["spec_source"]) == (7, "served config")
    assert row["update"] == {"from_config": "ep1", "to_config": new, "state": "unfinished"}
    assert [(u["kind"], u["name"]) for u in document["unused"]] == [("endpoint_config", "ep1"), ("model", "ep1")]
    human = peagle.run(["status", NAME], env(emu, **LATER))
    assert f"ep1: serves {new} (p-eagle K=7, read from its model's SM_VLLM_SPECULATIVE_CONFIG)" in human.stdout
    assert "the tags say peagle:k=3, the served config" in human.stderr
    assert "unused endpoint config ep1 (peagle made it for ep1; no endpoint uses it): remove with " \
           "'peagle recover ep1 --region us-east-1'" in human.stdout
    rerun = peagle.run(["update", NAME, "--k", "7", "--yes"], env(emu))
    assert rerun.code == 2 and "an update of 'ep1' did not finish" in rerun.last_error
    assert "'peagle recover ep1 --region us-east-1'" in rerun.last_error
    state, _ = recover_and_check(emu, k=7, **LATER)
    assert state["serves"] == new


def test_case5_a_status_read_that_keeps_failing_is_not_an_update_failure(world, plans):
    """The wait's DescribeEndpoint answers 500 until peagle gives up: an AWS error (exit 1), not 'endpoint
    failed', and the recovery command; the update lands anyway and recover finishes it."""
    emu = world
    stack(emu, plans["plain"], NAME)
    emu.fail("DescribeEndpoint", status=500, times=100, skip=3, caller="upd")
    run = peagle.run(["update", NAME, "--k", "7", "--bake", "0s", "--yes"], env(emu, "upd", AWS_MAX_ATTEMPTS="1"))
    assert run.code == 1, run.stderr
    assert "finish with 'peagle recover ep1 --region us-east-1' once SageMaker settles" in run.last_error
    assert "aws sagemaker" not in run.stderr
    emu._faults.clear()
    recover_and_check(emu, k=7)


def test_case7_sweep_refused_delete_is_a_failure_and_recover_finishes_it(emu_server, tmp_path):
    from peagle_deploy.testing.sweep_standins import SweepStandIn

    emu = emu_server
    emu.create_endpoint_stack(UNMANAGED)
    before = unmanaged_snapshot(emu)
    standin = SweepStandIn(emu).install()
    emu.fail("DeleteEndpoint", "AccessDeniedException", "not allowed to delete (emulated)", times=2)
    args = ["sweep", "qwen3-coder", "--modes", "p-eagle", "--k", "3", "--concurrency", "1", "--num-prompts", "1",
            "--warmup", "0", "--logs-wait", "0", "--provision-estimate", "60", "--budget", "40", "--role",
            emu.role_arn, "--yes", "--out", str(tmp_path)]
    run = peagle.run(args, {**emu.env})
    assert run.code == 3, run.stderr
    endpoint = next(e for e in emu.resource_names()["endpoints"] if e != UNMANAGED)
    assert f"removed {endpoint}" not in run.stderr
    assert f"could not delete endpoint {endpoint}: " in run.last_error and "it keeps billing" in run.last_error
    assert f"'peagle recover {endpoint} --region us-east-1'" in run.last_error
    state = json.loads((tmp_path / "sweep-state.json").read_text())
    config = state["configs"]["p-eagle K=3"]
    assert config["measured"] is True and config["status"] == "benched" and "could not delete" in config["error"]
    assert state["removed"] == []

    shown = peagle.run(["status", endpoint], {**emu.env})
    assert f"finish with 'peagle recover {endpoint} --region us-east-1'" in shown.stdout, shown.stdout
    done = peagle.run(["recover", endpoint], {**emu.env})
    assert done.code == 0, done.stderr
    assert emu.resource_names() == {"endpoints": [UNMANAGED], "configs": [UNMANAGED], "models": [UNMANAGED]}
    served = dict(standin.served)
    resumed = peagle.run(["sweep", "--resume", str(tmp_path / "sweep-state.json"), "--json"], {**emu.env})
    assert resumed.code == 0, resumed.stderr
    assert "removed" not in resumed.stderr  # nothing was left, so nothing is said to be removed
    assert standin.served == served  # measured once: never deployed or benched again
    report = json.loads(resumed.stdout)["report"]
    assert [c["status"] for c in report["configurations"]] == ["done"]
    assert unmanaged_snapshot(emu) == before
