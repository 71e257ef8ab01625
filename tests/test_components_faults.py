"""A component deploy's new steps under failure, signal and lost answer (issue 35), against the emulator server:
CreateInferenceComponent, the component's wait, its scaling (target, policies) and alarms. Each ends with nothing
of peagle's left (components, scalable targets, policies and alarms included), or with the printed command that
removes what is left; bad input is refused in one line with no AWS write. Signals are pinned by emulator gates
(no sleeps), as in test_fault_signals.py."""

from __future__ import annotations

import signal

import pytest


from .cli_runner import run_cli_completed
from .forked_peagle import forked_peagle
from .peagle_process import PeagleProcess

NAME = "ic-faults"
EMPTY = {"endpoints": [], "configs": [], "models": [], "components": [], "targets": [], "alarms": []}


def left(emu) -> dict:
    alarms = [a["AlarmName"] for a in emu.client("cloudwatch").describe_alarms()["MetricAlarms"]]
    return {**emu.resource_names(), "components": emu.components.names(), "targets": sorted(emu.scalable_targets()),
            "alarms": sorted(alarms)}


def deploy_args(emu, *extra):
    return ["deploy", "qwen3-coder", "--name", NAME, "--role", emu.role_arn, "--yes", "--scale-to-zero", *extra]


def deploy(emu, *extra):
    return run_cli_completed(*deploy_args(emu, *extra), env={**emu.env, "COLUMNS": "250"})


def test_a_component_that_fails_rolls_back_with_its_reason(emu):
    emu.components.script(creating_polls=2, final="Failed", reason="CUDA out of memory loading the drafter")
    out = deploy(emu)
    last = out.stderr.strip().splitlines()[-1]
    assert out.returncode == 6, out.stderr
    assert "inference component ic-faults is Failed: CUDA out of memory loading the drafter" in last
    assert "rolled back: inference component, endpoint, endpoint config, model deleted" in last
    assert left(emu) == EMPTY


@pytest.mark.parametrize("action,skip,code,exit_code", [
    ("RegisterScalableTarget", 0, "AccessDeniedException", 3),
    ("PutScalingPolicy", 1, "ValidationException", 2),  # target tracking made, the wake-up policy refused
    ("PutMetricAlarm", 0, "AccessDeniedException", 3),  # both policies made, the wake-up alarm refused
])
def test_a_refused_scaling_or_alarm_write_rolls_back_everything(emu, action, skip, code, exit_code):
    emu.fail(action, code, f"not allowed (emulated {code})", skip=skip)
    out = deploy(emu)
    last = out.stderr.strip().splitlines()[-1]
    assert out.returncode == exit_code, out.stderr
    assert f"AWS refused {action}" in last or "not allowed" in last
    assert "rolled back:" in last and "inference component" in last and "Traceback" not in out.stderr
    assert left(emu) == EMPTY
    calls = emu.calls  # SageMaker's order: the scaling and alarms, then the component, then the endpoint
    assert calls.index("DeleteInferenceComponent") < calls.index("DeleteEndpoint")
    if skip:
        assert calls.index("DeregisterScalableTarget") < calls.index("DeleteInferenceComponent")


def test_a_lost_answer_of_put_metric_alarm_is_reconciled(emu):
    """The wake-up alarm was made but its answer never came: the rollback finds it by name and its peagle tag."""
    emu.fail("PutMetricAlarm", "ServiceUnavailable", "answer lost (emulated)", status=503, after=True, times=10)
    out = deploy(emu)
    assert out.returncode != 0 and "Traceback" not in out.stderr
    assert "rolled back:" in out.stderr
    assert left(emu) == EMPTY


def test_a_lost_answer_of_create_inference_component_is_reconciled(emu):
    emu.fail("CreateInferenceComponent", "ServiceUnavailable", "answer lost (emulated)", status=503, after=True,
             times=10)
    out = deploy(emu)
    assert out.returncode != 0 and "Traceback" not in out.stderr, out.stderr
    assert "inference component" in out.stderr.strip().splitlines()[-1]
    assert left(emu) == EMPTY


# (moment, action held, calls let through first, before or after SageMaker acts)
MOMENTS = [
    ("in-CreateInferenceComponent", "CreateInferenceComponent", 0, "before"),
    ("CreateInferenceComponent-answer-in-flight", "CreateInferenceComponent", 0, "after"),
    ("during-component-wait", "DescribeInferenceComponent", 1, "before"),  # call 1: the existence check
    ("RegisterScalableTarget-answer-in-flight", "RegisterScalableTarget", 0, "after"),
    ("in-PutScalingPolicy", "PutScalingPolicy", 1, "before"),
    ("PutMetricAlarm-answer-in-flight", "PutMetricAlarm", 0, "after"),
]
CASES = [(signal.SIGTERM, *moment) for moment in MOMENTS] + [
    (signal.SIGINT, *MOMENTS[1]), (signal.SIGHUP, *MOMENTS[5])]


@pytest.mark.parametrize("signum,moment,action,skip,when", CASES, ids=[f"{c[1]}-{c[0].name}" for c in CASES])
def test_a_signal_at_each_new_step_leaves_nothing(emu, signum, moment, action, skip, when):
    gate = emu.gate(action, skip=skip, when=when)
    run = PeagleProcess(deploy_args(emu), emu.env, program=forked_peagle())
    gate.wait_entered()
    run.signal(signum)
    run.wait_for_stderr(f"received {signum.name}")
    gate.release()
    code = run.finish()
    last = run.stderr.strip().splitlines()[-1]
    assert code == 130, run.stderr
    assert last.startswith(f"error: interrupted by {signum.name}") and "rolled back:" in last, run.stderr
    assert "Traceback" not in run.stderr
    assert left(emu) == EMPTY, run.stderr


def test_a_signal_mid_scaling_stops_after_the_write_in_flight_and_names_only_what_was_made(emu):
    """Issue 45 item 6: SIGTERM while the second PutScalingPolicy is in flight: that write finishes, no later one is
    sent, and `rolled back:` lists what was made (a policy per PutScalingPolicy sent, an alarm per PutMetricAlarm),
    never a step the deploy had not reached."""
    gate = emu.gate("PutScalingPolicy", skip=1)
    run = PeagleProcess(deploy_args(emu), emu.env, program=forked_peagle())
    gate.wait_entered()
    run.signal(signal.SIGTERM)
    run.wait_for_stderr("received SIGTERM: letting PutScalingPolicy finish")
    gate.release()
    assert run.finish() == 130, run.stderr
    writes = [c for c in emu.calls if c in ("RegisterScalableTarget", "PutScalingPolicy", "PutMetricAlarm")]
    assert writes[-1] == "PutScalingPolicy" and writes.count("PutScalingPolicy") == 2, writes  # none after it
    rolled = run.stderr.strip().splitlines()[-1].split("rolled back: ")[1].split(" deleted")[0].split(", ")
    assert rolled.count("scaling policy") == 2 and rolled.count("alarm") == writes.count("PutMetricAlarm"), rolled
    assert rolled.count("scalable target") == 1 and rolled[-4:] == ["inference component", "endpoint",
                                                                     "endpoint config", "model"], rolled
    assert left(emu) == EMPTY


@pytest.mark.parametrize("argv,message", [
    (["--scale-to-zero", "--hosting", "endpoint"], "--scale-to-zero needs inference components, not --hosting endpoint"),
    (["--scale-to-zero", "--idle", "90s"], "--idle 90s: the idle period is AWS's target tracking scale-in"),
    (["--scale-to-zero", "--idle", "2d"], "--idle 2d: the idle period is AWS's target tracking scale-in"),
    (["--scale-to-zero", "--idle", "30s"], ": drop --idle (AWS's target tracking takes a component to zero"),
    (["--idle", "15m"], "--idle only applies with --scale-to-zero"),
    (["--hosting", "serverless"], "--hosting 'serverless' is not a hosting: pass --hosting endpoint or component"),
    (["--hosting", "component", "--env", "SM_VLLM_TENSOR_PARALLEL_SIZE=2"],
     "the component needs 2 GPUs (tensor parallel degree) and ml.g7e.2xlarge has 1"),
    (["--hosting", "component", "--no-wait"], "an inference component is created once its endpoint is InService"),
    (["--scale-to-zero", "--autoscale", "2:4", "--target-concurrency", "8"],
     "--autoscale 2:4 with --scale-to-zero: the minimum is zero copies"),
])
def test_bad_component_input_is_one_line_exit_2_and_no_aws_write(emu, argv, message):
    emu.calls.clear()
    out = run_cli_completed("deploy", "qwen3-coder", "--name", NAME, "--role", emu.role_arn, "--yes", *argv,
                            env={**emu.env, "COLUMNS": "250"})
    lines = out.stderr.strip().splitlines()
    assert out.returncode == 2, out.stderr
    assert len(lines) == 1 and lines[0].startswith("error: ") and message in lines[0], out.stderr
    assert not [c for c in emu.calls if c.startswith(("Create", "Put", "Register", "Delete"))]


def test_an_instance_without_the_facts_a_component_needs_is_refused_in_the_dry_run(no_aws):
    out = run_cli_completed("deploy", "qwen3-coder", "--scale-to-zero", "--dry-run", "--instance-type",
                            "ml.g7e.2xlarge", "--env", "SM_VLLM_TENSOR_PARALLEL_SIZE=4")
    assert out.returncode == 2 and "needs 4 GPUs" in out.stderr
