"""The emulator models the knob `--idle` sets (peagle_deploy/testing/alarm_emulation.py): a metric-math alarm
(`FILL(Invocations, 0) + FILL(NoCapacityInvocationFailures, 0) < 1` for N one-minute periods) with a warm-up of N
minutes, whose step policy sets the copies to 0; a request at zero (refused, counted in
NoCapacityInvocationFailures) wakes the component and keeps the idle alarm from putting it straight back; and
DescribeScalingActivities lists each change. The requests are peagle's own (scale_to_zero.ComponentScaling,
sent by lifecycle.components.apply_scaling), in-process, on a ManualClock."""

from __future__ import annotations

import botocore.exceptions
import pytest

from peagle_deploy.lifecycle.components import apply_scaling
from peagle_deploy.scale_to_zero import ComponentScaling, IdleRule, idle_alarm_name
from peagle_deploy.testing.component_emulation import ManualClock

ROLE = "arn:aws:iam::123456789012:role/peagle-emulator"


@pytest.fixture
def world(emu_in_process):
    emu = emu_in_process
    emu.clock = clock = ManualClock()
    (name,) = emu.components.create_stack("ep")  # no scaling of its own: peagle's is added below
    return emu, clock, name


def scaled(emu, name, minutes):
    tags = [{"Key": "peagle:managed", "Value": "true"}]
    requests = ComponentScaling(component=name, min_copies=0, max_copies=1, idle=IdleRule(minutes=minutes)).requests(tags)
    return apply_scaling(emu.client("application-autoscaling"), emu.client("cloudwatch"), requests)


def refused(emu, name):
    with pytest.raises(botocore.exceptions.ClientError):
        emu.client("sagemaker-runtime").invoke_endpoint(EndpointName="ep", InferenceComponentName=name, Body=b"{}",
                                                        ContentType="application/json")


def test_the_idle_alarm_waits_out_its_warm_up_then_scales_to_zero_after_n_idle_minutes(world):
    emu, clock, name = world
    start = clock()
    scaled(emu, name, 20)
    clock.advance(19 * 60)
    assert emu.components.state(name)["desired"] == 1  # the warm-up: no evaluation yet
    clock.advance(2 * 60)
    assert emu.components.state(name)["desired"] == 0
    [change] = [a for a in emu.components.activities if a["to"] == 0]
    assert 20 * 60 <= change["time"] - start <= 21 * 60 + 1  # at the first period end after the warm-up
    alarm = emu.client("cloudwatch").describe_alarms(AlarmNames=[idle_alarm_name(name)])["MetricAlarms"][0]
    assert alarm["StateValue"] == "ALARM"


def test_a_served_request_restarts_the_idle_period(world):
    emu, clock, name = world
    scaled(emu, name, 10)
    clock.advance(8 * 60)
    emu.client("sagemaker-runtime").invoke_endpoint(EndpointName="ep", InferenceComponentName=name, Body=b"{}",
                                                    ContentType="application/json")
    clock.advance(8 * 60)  # 16 minutes after the alarm was made, 8 after the request
    assert emu.components.state(name)["desired"] == 1
    clock.advance(4 * 60)
    assert emu.components.state(name)["desired"] == 0


def test_a_request_at_zero_wakes_it_and_the_idle_alarm_does_not_put_it_back(world):
    emu, clock, name = world
    scaled(emu, name, 5)
    clock.advance(7 * 60)
    assert emu.components.state(name)["desired"] == 0
    refused(emu, name)
    clock.advance(90)
    assert emu.components.state(name)["desired"] == 1  # the wake-up alarm and its step policy
    clock.advance(3 * 60)
    assert emu.components.state(name)["desired"] == 1  # the refused request counts: not idle yet
    clock.advance(3 * 60)
    assert emu.components.state(name)["desired"] == 0  # five idle minutes after it
    activities = emu.client("application-autoscaling").describe_scaling_activities(
        ServiceNamespace="sagemaker", ResourceId=f"inference-component/{name}")["ScalingActivities"]
    assert [a["Description"] for a in activities] == ["Setting desired copy count to 0.",
                                                      "Setting desired copy count to 1.",
                                                      "Setting desired copy count to 0."]
    assert activities[0]["StartTime"] > activities[1]["StartTime"] > activities[2]["StartTime"]
    assert "peagle-scale-to-zero" in activities[0]["Cause"] and "peagle-wake-up" in activities[1]["Cause"]


def test_copy_count_changes_made_with_sagemakers_own_api_are_not_scaling_activities(world):
    emu, clock, name = world
    emu.client("sagemaker").update_inference_component_runtime_config(InferenceComponentName=name,
                                                                      DesiredRuntimeConfig={"CopyCount": 0})
    assert emu.components.state(name)["desired"] == 0
    assert emu.client("application-autoscaling").describe_scaling_activities(
        ServiceNamespace="sagemaker", ResourceId=f"inference-component/{name}")["ScalingActivities"] == []
