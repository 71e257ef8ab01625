"""Issue 45 item 5: `peagle recover --all` beside other people's endpoints, as the README's cron-style use runs it.

It waits only on what it is finishing, names what it left alone and why (one line each), and its exit says whether
anything of peagle's is left unfinished: an endpoint peagle did not make that is Creating or Failed is named and
never waited on or counted; a peagle endpoint SageMaker is still creating with nothing of peagle's to finish (a
`deploy --no-wait`) is named and not waited on; a peagle endpoint that Failed is named and makes the exit 6, after
the rest is finished. In-process runs against the module's emulator (the waits between polls on a fake clock: a
wait that should not happen shows as a timeout, exit 5, never as real time).
"""

from __future__ import annotations

import json

from peagle_deploy.autoscale import AutoscalePolicy

from .cli_runner import run_cli
from .interrupt_helpers import stack

FOREVER = 10**6  # describes an endpoint stays Creating: any wait for it runs into --timeout
POLICY = AutoscalePolicy(min_capacity=1, max_capacity=2, metric="concurrency", target=4)


def plan(**extra):
    from peagle_deploy.plan import PlanRequest, build_plan

    return build_plan(PlanRequest(model="qwen3-coder", role="arn:aws:iam::123456789012:role/peagle-emulator",
                                  name="x", offline=True, **extra))


def others(emu):
    """Someone else's endpoint still Creating, and another that Failed (capacity)."""
    emu.script_endpoints(creating_polls=FOREVER)
    emu.create_endpoint_stack("theirs-creating")
    emu.script_endpoints(creating_polls=0, final="Failed", reason="Unable to provision requested ML compute capacity")
    emu.create_endpoint_stack("theirs-failed")
    emu.client("sagemaker").describe_endpoint(EndpointName="theirs-failed")  # the emulator's script turns it Failed
    emu.script_endpoints(creating_polls=0)


def recover_all(emu, *args):
    return run_cli("recover", "--all", "--timeout", "600", *args, env={**emu.env, "COLUMNS": "250"})


def lines_naming(stdout: str, name: str) -> list[str]:
    return [line for line in stdout.splitlines() if name in line]


def test_other_peoples_creating_and_failed_endpoints_are_named_never_waited_on_and_exit_0(emu):
    others(emu)
    stack(emu, plan(autoscale=POLICY), "ours")  # peagle's, with its autoscaling to register again
    emu.client("application-autoscaling").deregister_scalable_target(
        ServiceNamespace="sagemaker", ResourceId="endpoint/ours/variant/AllTraffic",
        ScalableDimension="sagemaker:variant:DesiredInstanceCount")
    emu.calls.clear()

    done = recover_all(emu)
    assert done.code == 0, done.stdout + done.stderr
    assert "ours: autoscaling registered again: 1-2 instances" in done.stdout, done.stdout
    assert lines_naming(done.stdout, "theirs-creating") == [
        "left alone endpoint theirs-creating (Creating): not made by peagle, nothing of peagle's to finish"]
    assert lines_naming(done.stdout, "theirs-failed") == [
        "left alone endpoint theirs-failed (Failed): not made by peagle, nothing of peagle's to finish"]
    assert emu.endpoint_status("theirs-creating") == "Creating" and "waiting" not in done.stderr
    document = json.loads(recover_all(emu, "--json").stdout)
    assert document["ok"] and len(document["recovered"]["others"]) == 2


def test_a_peagle_endpoint_still_creating_with_nothing_to_finish_is_named_not_waited_on(emu):
    others(emu)
    emu.script_endpoints(creating_polls=FOREVER)
    deployed = run_cli("deploy", "qwen3-coder", "--name", "nowait", "--role", emu.role_arn, "--yes", "--no-wait",
                       env=emu.env)
    assert deployed.code == 0, deployed.stderr

    done = recover_all(emu)
    assert done.code == 0, done.stdout + done.stderr
    assert lines_naming(done.stdout, "nowait") == [
        "nowait: Creating: nothing of peagle's to finish; SageMaker is on it ('peagle status nowait' follows it)"]
    assert emu.endpoint_status("nowait") == "Creating" and "waiting" not in done.stderr
    again = run_cli("recover", "nowait", "--timeout", "600", env=emu.env)  # by name, the same
    assert again.code == 0 and "nothing of peagle's to finish" in again.stdout, again.stdout + again.stderr


def test_a_peagle_endpoint_creating_with_autoscaling_to_register_is_waited_for(emu):
    emu.script_endpoints(creating_polls=3)
    deployed = run_cli("deploy", "qwen3-coder", "--name", "scaled", "--role", emu.role_arn, "--yes", "--no-wait",
                       env=emu.env)
    assert deployed.code == 0, deployed.stderr
    sm = emu.client("sagemaker")
    sm.add_tags(ResourceArn=sm.describe_endpoint(EndpointName="scaled")["EndpointArn"],
                Tags=[{"Key": "peagle:autoscale", "Value": POLICY.to_tag()}])  # as an autoscaled deploy tags it

    done = recover_all(emu)
    assert done.code == 0, done.stdout + done.stderr
    assert "scaled is Creating: waiting until SageMaker settles, then finishing its autoscaling" in done.stderr
    assert "scaled: autoscaling registered again: 1-2 instances" in done.stdout, done.stdout


def test_a_failed_peagle_endpoint_is_named_and_exits_6_after_the_rest_is_finished(emu):
    others(emu)
    emu.script_endpoints(creating_polls=0, final="Failed", reason="CUDA out of memory")
    emu.create_endpoint_stack("ours-failed", tags=[{"Key": "peagle:managed", "Value": "true"}])
    emu.client("sagemaker").describe_endpoint(EndpointName="ours-failed")
    emu.script_endpoints(creating_polls=0)
    stack(emu, plan(autoscale=POLICY), "ours")
    emu.client("application-autoscaling").deregister_scalable_target(
        ServiceNamespace="sagemaker", ResourceId="endpoint/ours/variant/AllTraffic",
        ScalableDimension="sagemaker:variant:DesiredInstanceCount")

    done = recover_all(emu)
    assert done.code == 6, done.stdout + done.stderr
    assert "ours: autoscaling registered again: 1-2 instances" in done.stdout, done.stdout
    assert lines_naming(done.stdout, "ours-failed") == [
        "ours-failed: not finished: endpoint ours-failed is Failed: CUDA out of memory: nothing peagle can finish: "
        "see 'peagle logs ours-failed', remove it with 'peagle cleanup ours-failed --yes'"]
    assert len(lines_naming(done.stdout, "theirs-")) == 2
