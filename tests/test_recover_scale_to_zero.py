"""Issue 45 items 1-2: a `--scale-to-zero` deploy SIGKILLed at each of its writes, the call landing after the kill,
then `peagle status` and ONE `peagle recover NAME`: the endpoint either scales to zero as asked (the registered target
min 0, target tracking with scale-in, the wake-up policy and alarm; idle past AWS's period it goes to 0 copies and 0
instances, and a request wakes it), or nothing of it is left. On the killing machine with no wait (the dead local
lease is abandoned at once), and from a second machine after the lease expired (`interrupt_helpers.ELSEWHERE`,
`LATER`). An unmanaged component stack that scales to zero is present throughout and checked untouched after each.

Every kill point runs as its own deploy (its own name and AWS_SDK_UA_APP_ID, so its gate holds only its call) against
the module's one emulator server, all of them at once (PEAGLE_S2Z_WORKERS, default 3), each command forked
(tests/forked_peagle.py); the emulator's clock is a ManualClock, moved once past the idle period for all of them.
"""

from __future__ import annotations

import os
import re
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import pytest

from peagle_deploy.autoscale import POLICY_NAME
from peagle_deploy.scale_to_zero import WAKE_POLICY, wake_alarm_name

from .conftest import emptied
from .interrupt_helpers import ELSEWHERE, LATER, Forked, sigkill_owner

THEIRS = "theirs"
# (id, the action held, calls of it let through first, whose lease names the deploy's pid, how it must end)
KILL_POINTS = [
    ("CreateModel", "CreateModel", 0, "model", "nothing left"),
    ("CreateEndpointConfig", "CreateEndpointConfig", 0, "model", "nothing left"),
    ("CreateEndpoint", "CreateEndpoint", 0, "endpoint", "scales to zero"),
    ("CreateInferenceComponent", "CreateInferenceComponent", 0, "endpoint", "scales to zero"),
    ("RegisterScalableTarget", "RegisterScalableTarget", 0, "endpoint", "scales to zero"),
    ("PutScalingPolicy-tracking", "PutScalingPolicy", 0, "endpoint", "scales to zero"),
    ("PutScalingPolicy-wake", "PutScalingPolicy", 1, "endpoint", "scales to zero"),
    ("PutMetricAlarm-wake", "PutMetricAlarm", 0, "endpoint", "scales to zero"),
]
# what `status` says is missing of the idle rule right after each kill (the steps before it landed)
STEPS = ["scalable target (copies 0-1)", f"target tracking {POLICY_NAME} with scale-in",
         f"wake-up policy {WAKE_POLICY}", "wake-up alarm"]
LANDED = {"CreateEndpoint": 0, "CreateInferenceComponent": 0, "RegisterScalableTarget": 1,
          "PutScalingPolicy-tracking": 2, "PutScalingPolicy-wake": 3, "PutMetricAlarm-wake": 4}
MACHINES = {"here": {}, "elsewhere": {**ELSEWHERE, **LATER}}
AGAIN = {("CreateEndpoint", "here"), ("RegisterScalableTarget", "elsewhere")}  # a second recover: nothing to do
SCENARIOS = [(point, machine) for point in KILL_POINTS for machine in MACHINES]
GONE = re.compile(r" abandoned \(its process \(pid (\d+)\) is no longer running on \S+\)")
EXPIRED = re.compile(r" abandoned \(lease expired at \S+\)")


@dataclass
class Outcome:
    name: str
    pid: int = 0
    status: Any = None
    recover: Any = None
    again: Any = None
    theirs_after: dict[str, Any] = field(default_factory=dict)


def _name(point: str, machine: str) -> str:
    return f"s2z-{point.lower()}-{machine}"[:63]


def theirs_snapshot(emu: Any) -> dict[str, Any]:
    """The unmanaged component stack as SageMaker, Application Auto Scaling and CloudWatch hold it (its copies
    move by its own scaling, so they are not in it)."""
    sm = emu.client("sagemaker")
    endpoint = sm.describe_endpoint(EndpointName=THEIRS)
    component = sm.describe_inference_component(InferenceComponentName=f"{THEIRS}-1")
    return {"config": endpoint["EndpointConfigName"], "tags": sm.list_tags(ResourceArn=endpoint["EndpointArn"])["Tags"],
            "models": [m for m in emu.resource_names()["models"] if m == THEIRS],
            "component": (component["InferenceComponentStatus"], component["Specification"]),
            "targets": {k: v for k, v in emu.scalable_targets().items() if THEIRS in k},
            "alarms": sorted(a["AlarmName"] for a in emu.client("cloudwatch").describe_alarms()["MetricAlarms"]
                             if THEIRS in a["AlarmName"])}


def everything_of(emu: Any, name: str) -> dict[str, Any]:
    """Every resource of endpoint `name` a deploy makes (empty lists: nothing of it is left)."""
    names = emu.resource_names()
    return {"endpoints": [e for e in names["endpoints"] if e == name],
            "configs": [c for c in names["configs"] if c == name], "models": [m for m in names["models"] if m == name],
            "components": [c for c in emu.components.names() if c == name],
            "targets": [t for t in emu.scalable_targets() if t == f"inference-component/{name}"],
            "alarms": [a["AlarmName"] for a in emu.client("cloudwatch").describe_alarms()["MetricAlarms"]
                       if a["AlarmName"].endswith(f"/{name}") or a["AlarmName"] == wake_alarm_name(name)
                       or f"inference-component/{name}-" in a["AlarmName"]]}


def _kill_and_recover(emu: Any, runner: Forked, point: tuple, machine: str, before: dict[str, Any]) -> Outcome:
    label, action, skip, kind, _ = point
    name = _name(label, machine)
    caller = f"s2z-{label}-{machine}"
    out = Outcome(name)
    gate = emu.gate(action, skip=skip, when="after", caller=caller)  # the call lands; its answer is never seen
    run = runner.start(["deploy", "qwen3-coder", "--name", name, "--role", emu.role_arn, "--yes", "--scale-to-zero"],
                       {**emu.env, "AWS_SDK_UA_APP_ID": caller})
    gate.wait_entered(unless=lambda: run.code is not None)
    out.pid = sigkill_owner(emu, run, kind, name, gate)
    after = {**emu.env, "AWS_SDK_UA_APP_ID": caller + "-after", "COLUMNS": "250", **MACHINES[machine]}
    out.status = runner.run(["status", name], after)
    out.recover = runner.run(["recover", name], after)
    if (label, machine) in AGAIN:  # idempotent: a second recover writes nothing and says so
        out.again = runner.run(["recover", name], after)
    out.theirs_after = theirs_snapshot(emu)
    assert out.theirs_after == before
    return out


@pytest.fixture(scope="module")
def world(emulator_server, request):
    """Every selected scenario run once (at once, one emulator), then the clock moved past the idle period for
    all of them."""
    from peagle_deploy.testing.component_emulation import ManualClock

    emu = emptied(emulator_server)
    emu.clock = clock = ManualClock()
    emu.components.create_stack(THEIRS, scale_to_zero=True)
    before = theirs_snapshot(emu)
    runner = Forked()
    workers = int(os.environ.get("PEAGLE_S2Z_WORKERS", "3"))
    selected = _selected(request)
    try:
        with ThreadPoolExecutor(workers) as pool:
            futures = {(point[0], machine): pool.submit(_kill_and_recover, emu, runner, point, machine, before)
                       for point, machine in SCENARIOS if f"{point[0]}-{machine}" in selected}
            outcomes = {key: future.result() for key, future in futures.items()}
        scaled = [o.name for (label, _), o in outcomes.items() if dict((p[0], p[4]) for p in KILL_POINTS)[label]
                  == "scales to zero"]
        serving = {name: (emu.components.state(name), emu.components.instances(name)) for name in scaled}
        clock.advance(16 * 60 + 600 + 120)  # AWS's idle period, then managed scaling releases the instance
        at_zero = {name: (emu.components.state(name), emu.components.instances(name)) for name in scaled}
        runtime = emu.client("sagemaker-runtime")
        refused = {}
        for name in scaled:  # a request at zero copies: refused, and counted where the wake-up alarm looks
            try:
                runtime.invoke_endpoint(EndpointName=name, InferenceComponentName=name, Body=b'{"prompt": "hi"}',
                                        ContentType="application/json")
                refused[name] = None
            except Exception as exc:  # noqa: BLE001 - the refusal is the point
                refused[name] = str(exc)
        clock.advance(180)  # the wake-up alarm's minute, its step policy, the copy on a new instance
        woken = {name: (emu.components.state(name), emu.components.instances(name)) for name in scaled}
        yield {"outcomes": outcomes, "serving": serving, "at_zero": at_zero, "refused": refused, "woken": woken,
               "theirs": (before, theirs_snapshot(emu)), "emu": emu}
    finally:
        runner.close()
        emu.release_gates()


def _selected(request: Any) -> set[str]:
    """The scenarios this session runs (`-k` picks a few)."""
    test = test_a_scale_to_zero_deploy_killed_at_each_write_is_finished_or_removed_by_one_recover.__name__
    return {item.callspec.id for item in request.session.items
            if item.module is request.module and item.originalname == test}


def _shown(got: Outcome) -> str:
    return (f"status {got.status.code}: {got.status.stdout}{got.status.stderr}\nrecover {got.recover.code}: "
            f"{got.recover.stdout}{got.recover.stderr}")


@pytest.mark.parametrize(("point", "machine"), SCENARIOS, ids=[f"{p[0]}-{m}" for p, m in SCENARIOS])
def test_a_scale_to_zero_deploy_killed_at_each_write_is_finished_or_removed_by_one_recover(world, point, machine):
    label, _, _, _, ending = point
    got: Outcome = world["outcomes"][(label, machine)]
    emu, name, shown = world["emu"], got.name, _shown(got)
    assert "Traceback" not in got.status.stderr + got.recover.stderr, shown
    # status right after the kill: abandoned (at once here, by its expiry elsewhere), never in progress
    assert got.status.code == 0, shown
    assert "in progress" not in got.status.stdout, shown
    if label in LANDED:
        abandoned = GONE if machine == "here" else EXPIRED
        [line] = [x for x in got.status.stdout.splitlines() if abandoned.search(x)]
        assert line.startswith(f"{name}: deploy on "), shown
        if machine == "here":
            assert GONE.search(line)[1] == str(got.pid), line
    else:  # no endpoint yet: its model (and config) are unused, not in progress
        assert f"unused model {name} (peagle made it for {name}; no endpoint uses it): remove with " \
               f"'peagle recover {name} --region us-east-1'" in got.status.stdout, shown
    if label in LANDED and LANDED[label] < len(STEPS):  # the idle rule said, registered and missing
        registered, missing = STEPS[:LANDED[label]], STEPS[LANDED[label]:]
        line = next(x for x in got.status.stdout.splitlines() if "scaling intended: " in x)
        assert f"scaling intended: copies 0-1: target tracking {POLICY_NAME} on " in line, line
        assert f"; registered: {', '.join(registered) or 'nothing'}; missing: " in line, line
        assert line.endswith(", ".join(missing[:-1] + [f"wake-up alarm {wake_alarm_name(name)}"])), line
        assert f"{name}: finish with 'peagle recover {name} --region us-east-1'" in got.status.stdout, shown
        if label == "CreateEndpoint":
            assert f"{name}: inference component {name} missing" in got.status.stdout, shown
            assert f"unused model {name}" not in got.status.stdout, shown  # the model its component needs
    elif label in LANDED:  # the whole rule is there; the status line says it
        assert "to zero after about 15 min idle" in got.status.stdout and f"wake-up {WAKE_POLICY} (alarm " \
            in got.status.stdout, shown

    # ONE recover, with no wait
    assert got.recover.code == 0, shown
    if label in LANDED:
        assert f"{name}: took over from deploy on " in got.recover.stdout, shown
    left = everything_of(emu, name)
    if ending == "nothing left":
        assert left == {k: [] for k in left}, shown
        assert f"deleted model {name}" in got.recover.stdout, shown
    else:
        assert left["endpoints"] == left["configs"] == left["models"] == left["components"] == [name], shown
        assert left["targets"] == [f"inference-component/{name}"], shown
        sm, aas = emu.client("sagemaker"), emu.client("application-autoscaling")
        [target] = aas.describe_scalable_targets(ServiceNamespace="sagemaker", ResourceIds=[
            f"inference-component/{name}"])["ScalableTargets"]
        assert (target["MinCapacity"], target["MaxCapacity"]) == (0, 1), target
        policies = {p["PolicyName"]: p for p in aas.describe_scaling_policies(
            ServiceNamespace="sagemaker", ResourceId=f"inference-component/{name}")["ScalingPolicies"]}
        assert sorted(policies) == sorted([POLICY_NAME, WAKE_POLICY]), policies
        assert not policies[POLICY_NAME]["TargetTrackingScalingPolicyConfiguration"].get("DisableScaleIn")
        [wake] = emu.client("cloudwatch").describe_alarms(AlarmNames=[wake_alarm_name(name)])["MetricAlarms"]
        assert wake["AlarmActions"] == [policies[WAKE_POLICY]["PolicyARN"]], wake
        tags = {t["Key"]: t["Value"] for t in sm.list_tags(ResourceArn=sm.describe_endpoint(
            EndpointName=name)["EndpointArn"])["Tags"]}
        assert "peagle:lease" not in tags, tags
        if label == "CreateEndpoint":
            assert f"{name}: created inference component {name} (the deploy's plan: model {name}, 1 copy, " \
                   "1 GPU(s) and 32768 MB per copy)" in got.recover.stdout, shown
        if label in LANDED and LANDED[label] < len(STEPS):
            assert f"{name}: scaling of {name} registered: " in got.recover.stdout, shown
        # it scales to zero as asked, and a request wakes it
        state, instances = world["serving"][name]
        assert (state["status"], state["desired"], state["current"], instances["current"]) == (
            "InService", 1, 1, 1), (state, instances)
        state, instances = world["at_zero"][name]
        assert (state["desired"], state["current"], instances) == (0, 0, {"current": 0, "desired": 0}), state
        assert "NoCapacity" in (world["refused"][name] or "") or "capacity" in (world["refused"][name] or ""), \
            world["refused"][name]
        state, instances = world["woken"][name]
        assert (state["desired"], state["current"], instances["current"]) == (1, 1, 1), (state, instances)
    if got.again is not None:
        assert got.again.code == 0 and got.again.stdout.strip().endswith("nothing left to finish"), got.again.stdout
        assert "registered" not in got.again.stdout and "created" not in got.again.stdout, got.again.stdout


def test_the_unmanaged_component_stack_was_never_touched(world):
    before, after = world["theirs"]
    assert before == after
    assert all(o.theirs_after == before for o in world["outcomes"].values())



def _cut_short(emu: Any, name: str, *, component: bool = False, **request: Any) -> None:
    """What a `--scale-to-zero` deploy killed right after its CreateEndpoint (or, `component`, its
    CreateInferenceComponent) leaves: its model, config and endpoint (and component) from the plan's own bodies,
    tagged as deploy tags them (no lease: it expired long ago). `request`: other PlanRequest fields."""
    from peagle_deploy.hosting import Hosting
    from peagle_deploy.plan import PlanRequest, build_plan
    from peagle_deploy.scale_to_zero import IdleRule

    plan = build_plan(PlanRequest(model="qwen3-coder", role=emu.role_arn, name=name, offline=True,
                                  hosting=Hosting.COMPONENT, **{"scale_to_zero": IdleRule(), **request}))
    sm = emu.client("sagemaker")
    sm.create_model(**plan.create_model)
    sm.create_endpoint_config(**plan.create_endpoint_config)
    sm.create_endpoint(**plan.create_endpoint)
    if component:
        sm.create_inference_component(**plan.create_inference_component)


def test_a_components_autoscale_cut_short_is_compared_and_registered_as_its_deploy_asked(emu):
    """Issue 45 item 2, `--hosting component --autoscale 1:3 --target-concurrency 4` (no scale to zero) killed
    after its component: status compares the copies' range and target its deploy asked for (peagle:copies-autoscale)
    with what is registered and names recover; recover registers exactly that, and a second one nothing."""
    from peagle_deploy.autoscale import AutoscalePolicy

    from .cli_runner import run_cli_completed

    policy = AutoscalePolicy(min_capacity=1, max_capacity=3, metric="concurrency", target=4)
    _cut_short(emu, "auto", component=True, scale_to_zero=None, autoscale=policy)
    env = {**emu.env, "COLUMNS": "250"}
    shown = run_cli_completed("status", "auto", env=env)
    assert shown.returncode == 0, shown.stderr
    assert (f"auto: scaling intended: copies 1-3: target tracking {POLICY_NAME} on "
            "SageMakerInferenceComponentConcurrentRequestsPerCopyHighResolution=4 with scale-in; registered: nothing; "
            f"missing: scalable target (copies 1-3), target tracking {POLICY_NAME} with scale-in") in shown.stdout, \
        shown.stdout
    assert "auto: finish with 'peagle recover auto --region us-east-1'" in shown.stdout
    done = run_cli_completed("recover", "auto", env=env)
    assert done.returncode == 0, done.stderr
    assert "auto: scaling of auto registered: scalable target (copies 1-3), target tracking " in done.stdout
    aas = emu.client("application-autoscaling")
    [target] = aas.describe_scalable_targets(ServiceNamespace="sagemaker", ResourceIds=[
        "inference-component/auto"])["ScalableTargets"]
    assert (target["MinCapacity"], target["MaxCapacity"]) == (1, 3)
    [tracking] = aas.describe_scaling_policies(ServiceNamespace="sagemaker", ResourceId="inference-component/auto")[
        "ScalingPolicies"]
    assert tracking["TargetTrackingScalingPolicyConfiguration"]["TargetValue"] == 4.0
    assert not emu.client("cloudwatch").describe_alarms(AlarmNames=[wake_alarm_name("auto")])["MetricAlarms"]
    again = run_cli_completed("recover", "auto", env=env)
    assert again.returncode == 0 and "nothing left to finish" in again.stdout, again.stdout
    assert "scaling intended" not in run_cli_completed("status", "auto", env=env).stdout


@pytest.mark.parametrize("why", ["endpoint Failed", "model gone"])
def test_a_deploy_that_cannot_be_completed_is_removed_whole_and_nothing_unmanaged_is_touched(emu, why):
    """Issue 45 item 1: where recover cannot complete the deploy (the endpoint Failed, the model it needs gone), it
    removes the whole stack in SageMaker's order, as the deploy's rollback would have; the status before names
    recover; someone else's component stack beside it is untouched."""
    from .cli_runner import run_cli_completed

    emu.components.create_stack(THEIRS, scale_to_zero=True)
    before = theirs_snapshot(emu)
    if why == "endpoint Failed":
        emu.script_endpoints(final="Failed", reason="CapacityError: no ml.g7e.2xlarge capacity (emulated)")
    _cut_short(emu, "cut")
    if why == "model gone":
        emu.client("sagemaker").delete_model(ModelName="cut")
    env = {**emu.env, "COLUMNS": "250"}
    shown = run_cli_completed("status", "cut", env=env)
    assert shown.returncode == 0 and "cut: finish with 'peagle recover cut --region us-east-1'" in shown.stdout, \
        shown.stdout
    done = run_cli_completed("recover", "cut", env=env)
    assert done.returncode == 0, done.stderr
    reason = ("endpoint cut is Failed: CapacityError: no ml.g7e.2xlarge capacity (emulated)" if why == "endpoint Failed"
              else "no model peagle made for its component cut is left")
    assert f"cut: its deploy cannot be completed ({reason}), so what it made was removed: " in done.stdout, \
        done.stdout
    assert everything_of(emu, "cut") == {k: [] for k in everything_of(emu, "cut")}
    assert theirs_snapshot(emu) == before
    again = run_cli_completed("recover", "cut", env=env)
    assert again.returncode == 0 and "nothing left to finish" in again.stdout, again.stdout
