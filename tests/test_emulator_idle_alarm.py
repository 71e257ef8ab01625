"""The emulator models the idle rule of AWS's scale-to-zero recipe (peagle_deploy/testing/autoscaling_emulation.py):
target tracking on the copies, scale-in on, MinCapacity 0. Application Auto Scaling makes the policy's AlarmHigh and
AlarmLow alarms; with no request the AlarmLow alarm goes to ALARM after its window (about 15 minutes) and the copies
go to 0; a request puts it back to OK and restarts the window; a request at zero wakes the component (the wake-up
alarm and step policy) and target tracking leaves it up for a whole window again; DescribeScalingActivities lists
each change, and `peagle status`'s reading of one component (`read_component`) says whether the scale-in acted, or
that it is in ALARM and did not. The requests are peagle's own (scale_to_zero.ComponentScaling, sent by
lifecycle.components.apply_scaling), in-process, on a ManualClock.

An older peagle's idle rule (a metric-math alarm and a step policy: tests/legacy_scale_to_zero.py) is still
evaluated by the emulator, as before: its warm-up, its N idle minutes, a request restarting them."""

from __future__ import annotations

from datetime import UTC, datetime

import botocore.exceptions
import pytest

from peagle_deploy.lifecycle.components import apply_scaling, read_component, summary
from peagle_deploy.scale_to_zero import ComponentScaling, IdleRule
from peagle_deploy.tags import PeagleTags
from peagle_deploy.testing.component_emulation import ManualClock

from .legacy_scale_to_zero import legacy_alarm, make_legacy


@pytest.fixture
def world(emu_in_process):
    emu = emu_in_process
    emu.clock = clock = ManualClock(start=1_800_000_000.0)
    (name,) = emu.components.create_stack("ep")  # no scaling of its own: peagle's is added below
    return emu, clock, name


def scaled(emu, name):
    tags = [{"Key": "peagle:managed", "Value": "true"}]
    requests = ComponentScaling.planned(name, copies=1, idle=IdleRule(), autoscale=None).requests(tags)
    return apply_scaling(emu.client("application-autoscaling"), emu.client("cloudwatch"), requests)


def invoke(emu, name):
    emu.client("sagemaker-runtime").invoke_endpoint(EndpointName="ep", InferenceComponentName=name, Body=b"{}",
                                                    ContentType="application/json")


def refused(emu, name):
    with pytest.raises(botocore.exceptions.ClientError):
        invoke(emu, name)


def low_alarm(emu, name) -> dict:
    (alarm,) = [a for a in emu.client("cloudwatch").describe_alarms()["MetricAlarms"]
                if a["AlarmName"].startswith(f"TargetTracking-inference-component/{name}-AlarmLow-")]
    return alarm


def status_of(emu, name, clock):
    sm = emu.client("sagemaker")
    return read_component(sm, emu.client("application-autoscaling"), emu.client("cloudwatch"), name,
                          sm.describe_endpoint(EndpointName="ep"), PeagleTags(scale_to_zero=IdleRule()),
                          now=datetime.fromtimestamp(clock(), UTC))


def test_target_tracking_takes_an_idle_component_to_zero_after_its_scale_in_alarm(world):
    emu, clock, name = world
    start = clock()
    scaled(emu, name)
    clock.advance(14 * 60)
    assert emu.components.state(name)["desired"] == 1
    assert low_alarm(emu, name)["StateValue"] != "ALARM"
    clock.advance(2 * 60)
    assert emu.components.state(name)["desired"] == 0
    [change] = [a for a in emu.components.activities if a["to"] == 0]
    assert change["time"] - start == 15 * 60  # the AlarmLow window: 90 x 10 s of the high-resolution metric
    alarm = low_alarm(emu, name)
    assert alarm["StateValue"] == "ALARM"
    assert alarm["StateUpdatedTimestamp"] == datetime.fromtimestamp(start + 15 * 60, UTC)  # the emulator's time
    row = status_of(emu, name, clock)
    assert row.scale_in == "target-tracking" and row.scale_in_alarm.state == "ALARM"
    assert row.last_scale_in == datetime.fromtimestamp(start + 15 * 60, UTC) and row.warning is None
    assert "to zero after about 15 min idle (target tracking peagle-target-tracking, alarm ALARM; last scaled in " \
           in summary(row)


def test_a_served_request_restarts_the_window_and_puts_the_alarm_back_to_ok(world):
    emu, clock, name = world
    scaled(emu, name)
    clock.advance(8 * 60)
    invoke(emu, name)
    clock.advance(14 * 60)  # 22 minutes after the scaling, 14 after the request
    assert emu.components.state(name)["desired"] == 1
    clock.advance(2 * 60)
    assert emu.components.state(name)["desired"] == 0
    invoke_at_zero = clock.advance(60)
    refused(emu, name)
    clock.advance(1)
    assert low_alarm(emu, name)["StateValue"] == "OK"  # in use again
    assert low_alarm(emu, name)["StateUpdatedTimestamp"] == datetime.fromtimestamp(invoke_at_zero, UTC)


def test_a_request_at_zero_wakes_it_and_target_tracking_leaves_it_up_for_a_whole_window(world):
    emu, clock, name = world
    scaled(emu, name)
    clock.advance(16 * 60)
    assert emu.components.state(name)["desired"] == 0
    refused(emu, name)
    clock.advance(90)
    assert emu.components.state(name)["desired"] == 1  # the wake-up alarm and its step policy
    clock.advance(10 * 60)
    assert emu.components.state(name)["desired"] == 1  # the refused request and the wake-up count: not idle yet
    clock.advance(6 * 60)
    assert emu.components.state(name)["desired"] == 0  # a whole window after the wake-up
    activities = emu.client("application-autoscaling").describe_scaling_activities(
        ServiceNamespace="sagemaker", ResourceId=f"inference-component/{name}")["ScalingActivities"]
    assert [a["Description"] for a in activities] == ["Setting desired copy count to 0.",
                                                      "Setting desired copy count to 1.",
                                                      "Setting desired copy count to 0."]
    assert activities[0]["StartTime"] > activities[1]["StartTime"] > activities[2]["StartTime"]
    assert "peagle-target-tracking" in activities[0]["Cause"] and "peagle-wake-up" in activities[1]["Cause"]


def test_an_alarm_in_alarm_that_application_auto_scaling_never_acts_on_is_said_with_what_to_do(world):
    """What a real account could do (and the contract tier checks): the scale-in alarm fires, nothing scales in, the
    copy bills. `peagle status` says so in one line, with what to do; before the grace period it says nothing."""
    emu, clock, name = world
    emu.components.scale_in_acts = False
    scaled(emu, name)
    clock.advance(16 * 60)
    assert emu.components.state(name)["desired"] == 1 and low_alarm(emu, name)["StateValue"] == "ALARM"
    assert status_of(emu, name, clock).warning is None  # one minute in ALARM: Application Auto Scaling may yet act
    clock.advance(20 * 60)
    row = status_of(emu, name, clock)
    assert row.last_scale_in is None and "not scaled in yet" in summary(row)
    assert row.warning.startswith(f"warning: the scale-in rule of {name} did not act: its alarm "
                                  f"TargetTracking-inference-component/{name}-AlarmLow-"), row.warning
    assert "so 1 copy keep billing" in row.warning
    assert (f"'aws sagemaker update-inference-component-runtime-config --inference-component-name {name} "
            "--desired-runtime-config CopyCount=0'") in row.warning
    assert len(row.warning.splitlines()) == 1


def test_copy_count_changes_made_with_sagemakers_own_api_are_not_scaling_activities(world):
    emu, clock, name = world
    emu.client("sagemaker").update_inference_component_runtime_config(InferenceComponentName=name,
                                                                      DesiredRuntimeConfig={"CopyCount": 0})
    assert emu.components.state(name)["desired"] == 0
    assert emu.client("application-autoscaling").describe_scaling_activities(
        ServiceNamespace="sagemaker", ResourceId=f"inference-component/{name}")["ScalingActivities"] == []


# an older peagle's idle rule, as the emulator still evaluates it --------------------------------------------------
def legacy(emu, name, minutes):
    aas, cw = emu.client("application-autoscaling"), emu.client("cloudwatch")
    requests = ComponentScaling.planned(name, copies=1, idle=IdleRule(), autoscale=None).requests(
        [{"Key": "peagle:managed", "Value": "true"}])
    apply_scaling(aas, cw, requests)
    make_legacy(aas, cw, name, minutes=minutes)


def test_the_older_idle_alarm_waits_out_its_warm_up_then_scales_to_zero_after_n_idle_minutes(world):
    emu, clock, name = world
    start = clock()
    legacy(emu, name, 20)
    clock.advance(19 * 60)
    assert emu.components.state(name)["desired"] == 1  # the warm-up: no evaluation yet
    clock.advance(2 * 60)
    assert emu.components.state(name)["desired"] == 0
    [change] = [a for a in emu.components.activities if a["to"] == 0]
    assert 20 * 60 <= change["time"] - start <= 21 * 60 + 1  # at the first period end after the warm-up
    alarm = emu.client("cloudwatch").describe_alarms(AlarmNames=[legacy_alarm(name)])["MetricAlarms"][0]
    assert alarm["StateValue"] == "ALARM"
    row = status_of(emu, name, clock)
    assert row.scale_in == "legacy-alarm" and "unconfirmed on AWS: 'peagle update ep --scale-to-zero'" in summary(row)


def test_the_older_idle_alarm_restarts_on_a_served_request_and_a_wake_up_is_not_undone(world):
    emu, clock, name = world
    legacy(emu, name, 10)
    clock.advance(8 * 60)
    invoke(emu, name)
    clock.advance(8 * 60)  # 16 minutes after the alarm was made, 8 after the request
    assert emu.components.state(name)["desired"] == 1
    clock.advance(4 * 60)
    assert emu.components.state(name)["desired"] == 0
    refused(emu, name)
    clock.advance(90)
    assert emu.components.state(name)["desired"] == 1  # the wake-up alarm and its step policy
    clock.advance(5 * 60)
    assert emu.components.state(name)["desired"] == 1  # the refused request counts: not idle yet
    clock.advance(7 * 60)
    assert emu.components.state(name)["desired"] == 0  # ten idle minutes after it
    activities = emu.client("application-autoscaling").describe_scaling_activities(
        ServiceNamespace="sagemaker", ResourceId=f"inference-component/{name}")["ScalingActivities"]
    assert "peagle-scale-to-zero" in activities[0]["Cause"] and "peagle-wake-up" in activities[1]["Cause"]


def test_an_older_idle_alarm_that_never_acts_is_said_with_the_move_to_awss_rule(world):
    emu, clock, name = world
    emu.components.scale_in_acts = False
    legacy(emu, name, 5)
    clock.advance(30 * 60)
    row = status_of(emu, name, clock)
    assert emu.components.state(name)["desired"] == 1
    assert row.warning.startswith(f"warning: the scale-in rule of {name} did not act: its alarm {legacy_alarm(name)}")
    assert row.warning.endswith("move it to AWS's rule (target tracking's own scale-in) with 'peagle update ep "
                                "--scale-to-zero'")
