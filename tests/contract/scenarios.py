"""The contract scenarios: plain functions of an `Account` (account.py), the same against the emulator (the fast
suite, tests/contract/test_contract_emulator.py) and against a real account (`pytest -m aws`,
tests/contract/test_contract_aws.py).

A *run* builds one stack with the tier's minimal container, observes what SageMaker, Application Auto Scaling and
CloudWatch answer, removes the stack with peagle's own cleanup (`cleanup.remove`) and returns what it saw; it never
asserts. A *behaviour* is one thing docs/ci.md marks *assumed* or takes from a third party: its check reads the
observation of its run (`account.once`: a run happens once per account, however many behaviours read it) and
asserts what the emulator models, so a real account that answers otherwise fails that test, naming what it did and
what would change in peagle. Behaviours with no run are listed too (`aws_skip`: why it cannot be shown cheaply).

Each run's cost is declared next to it (`Footprint`: costs.py prices it before anything starts).
"""

from __future__ import annotations

import base64
import json
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from . import stacks
from .account import Account, NotWithin
from .cleanup import remove
from .stacks import VARIANT, Answer, refusal

MINUTE = 60.0


# the registries ---------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Footprint:
    """What a run keeps running: at most `instances` of the account's instance type at once, typically
    `expected_instance_minutes` in all, and never for longer than `bound_minutes` (the sum of its waits' timeouts,
    plus its removal): at most `instances` x `bound_minutes`."""

    instances: int
    expected_instance_minutes: float
    bound_minutes: float
    why: str


@dataclass(frozen=True)
class Run:
    key: str
    observe: Callable[[Account], Any]
    footprint: Footprint


@dataclass(frozen=True)
class Behaviour:
    check: Callable[[Account], None]
    run: str | None  # the run whose observation it reads; None: no scenario (aws_skip says why)
    aws_skip: str | None = None

    @property
    def name(self) -> str:
        return self.check.__name__

    @property
    def id(self) -> str:
        """The test id: 'RUN-NAME' (so `-k RUN` selects one run's behaviours), or the name alone."""
        return f"{self.run}-{self.name}" if self.run else self.name

    @property
    def doc(self) -> str:
        return " ".join((self.check.__doc__ or "").split())


RUNS: dict[str, Run] = {}
BEHAVIOURS: list[Behaviour] = []


def run(key: str, footprint: Footprint) -> Callable[[Callable[[Account], Any]], Callable[[Account], Any]]:
    def register(observe: Callable[[Account], Any]) -> Callable[[Account], Any]:
        RUNS[key] = Run(key, observe, footprint)
        return observe
    return register


def behaviour(run_key: str | None, *, aws_skip: str | None = None) -> Callable[[Callable[[Account], None]], Any]:
    def register(check: Callable[[Account], None]) -> Callable[[Account], None]:
        BEHAVIOURS.append(Behaviour(check, run_key, aws_skip))
        return check
    return register


def observe(account: Account, key: str) -> Any:
    """The observation of run `key` on this account (run on first use)."""
    return account.once(key, RUNS[key].observe)


def not_shown(account: Account, reason: str) -> None:
    pytest.skip(f"not shown on {'the emulator' if account.emulated else 'AWS'}: {reason}")


# helpers ----------------------------------------------------------------------------------------------------------
def _scaling(account: Account, component: str) -> None:
    """peagle's own scale-to-zero requests (AWS's recipe: the target with minimum 0, target tracking with scale-in,
    the wake-up step policy and alarm), sent by peagle's own code."""
    from peagle_deploy.lifecycle.components import apply_scaling
    from peagle_deploy.scale_to_zero import ComponentScaling, IdleRule

    plan = ComponentScaling.planned(component, copies=1, idle=IdleRule(), autoscale=None)
    apply_scaling(account.client("application-autoscaling"), account.client("cloudwatch"),
                  plan.requests(account.tags(component)))


def _copies_now(account: Account, component: str) -> tuple[int, int]:
    described = stacks.describe_component(account, component)
    return stacks.copies(described) if described else (-1, -1)


def _at_zero(account: Account, component: str) -> Callable[[], bool]:
    return lambda: _copies_now(account, component) == (0, 0)


def _component_stack(account: Account, key: str, *, fraction: float, max_instances: int, min_instances: int = 1,
                     extra_components: tuple[str, ...] = ()) -> str:
    """Model, component-based endpoint and one component (all named `stack`), InService."""
    stack = account.name(key)
    stacks.create_model(account, stack, stack)
    stacks.component_endpoint(account, stack, max_instances=max_instances, min_instances=min_instances,
                              components=[stack, *extra_components])
    stacks.create_component(account, stack, stack, stack, memory=stacks.memory_mb(account, fraction))
    return stack


def _since(account: Account, start: float) -> float:
    return round(account.now() - start, 1)


# run: scale to zero by AWS's recipe -------------------------------------------------------------------------------
@dataclass
class ScaleToZero:
    component: str
    zero_after_s: float | None = None  # copies 0/0, from the component's InService and its scaling in place
    zero_missed: str | None = None  # what was seen instead, when it did not
    peagle_last_scale_in: datetime | None = None  # peagle's reader (status) on DescribeScalingActivities
    activities: list[str] = field(default_factory=list)
    instances_zero_after_s: float | None = None  # the endpoint's instances 0, after the copies went
    instances_missed: str | None = None
    refusal: Answer | None = None  # the first request at zero
    peagle_says_no_capacity: bool | None = None  # peagle's matcher (runtime.failures.is_no_capacity) on it
    woke_after_s: float | None = None  # from the first refused request to the first answer
    refused: int = 0
    wake_missed: str | None = None
    failures_sum: float | None = None  # NoCapacityInvocationFailures, in the minutes of the refusals
    invocations_sum: float | None = None  # Invocations, the same minutes


@run("s2z", Footprint(
    instances=1, expected_instance_minutes=10 + 5 + 18 + 10 + 12 + 6,
    bound_minutes=30 + 30 + 45 + 30 + 25 + 10 + 15,
    why="one copy on one instance: created (10), loaded (5), idle until target tracking's scale-in (15 + a few), "
        "released about 10 min after the last copy, woken (12), metrics read (6)"))
def scale_to_zero(account: Account) -> ScaleToZero:
    """A component with peagle's scale-to-zero requests and no traffic: to zero copies, then zero instances; one
    request at zero, refused; the refused requests, with peagle's back-off, until one is answered; the metrics of
    those minutes."""
    from peagle_deploy.lifecycle.components import last_scale_in
    from peagle_deploy.runtime.failures import is_no_capacity
    from peagle_deploy.runtime.waking import backoff

    stack = account.name("s2z")
    seen = ScaleToZero(component=stack)
    try:
        _component_stack(account, "s2z", fraction=0.25, max_instances=2, min_instances=0)
        _scaling(account, stack)
        start = account.now()
        try:
            account.wait("copies 0/0 (target tracking's scale-in)", _at_zero(account, stack),
                         timeout_s=45 * MINUTE, every_s=MINUTE)
            seen.zero_after_s = _since(account, start)
        except NotWithin:
            seen.zero_missed = "{}/{} copies".format(*_copies_now(account, stack))
            return seen
        activities = account.client("application-autoscaling").describe_scaling_activities(
            ServiceNamespace="sagemaker", ResourceId=f"inference-component/{stack}")["ScalingActivities"]
        seen.activities = [a.get("Description", "") for a in activities]
        seen.peagle_last_scale_in = last_scale_in(activities)
        gone = account.now()
        try:
            account.wait("no instance", lambda: stacks.current_instances(account, stack) == 0,
                         timeout_s=30 * MINUTE, every_s=MINUTE)
            seen.instances_zero_after_s = _since(account, gone)
        except NotWithin:
            seen.instances_missed = f"{stacks.current_instances(account, stack)} instance(s)"
        first = account.now()
        delays = backoff()
        while True:
            answer = stacks.invoke(account, stack, stack)
            if answer.ok:
                seen.woke_after_s = _since(account, first)
                break
            seen.refused += 1
            if seen.refusal is None:
                seen.refusal = answer
                seen.peagle_says_no_capacity = is_no_capacity(answer.code, answer.message)
            if not is_no_capacity(answer.code, answer.message):
                seen.wake_missed = f"refused otherwise: {answer.code}: {answer.message}"
                return seen
            if account.now() - first > 25 * MINUTE:
                seen.wake_missed = f"still refused after 25 min ({seen.refused} requests)"
                return seen
            account.sleep(next(delays))
        seen.failures_sum, seen.invocations_sum = _refusal_metrics(account, stack, first, account.now())
        return seen
    finally:
        remove(account, stack)


def _refusal_metrics(account: Account, component: str, first: float, answered: float) -> tuple[float, float]:
    """The sums of NoCapacityInvocationFailures and Invocations over the whole minutes from the first refusal to
    the minute before the answer (CloudWatch publishes a minute or more late: up to 10 min of waiting)."""
    cw = account.client("cloudwatch")
    start = datetime.fromtimestamp(first // 60 * 60, UTC)
    end = datetime.fromtimestamp(answered // 60 * 60, UTC)  # the answer's own minute is left out
    if end <= start:
        end = start + timedelta(minutes=1)

    def total(metric: str) -> float:
        points = cw.get_metric_statistics(
            Namespace="AWS/SageMaker", MetricName=metric, StartTime=start, EndTime=end, Period=60,
            Dimensions=[{"Name": "InferenceComponentName", "Value": component}], Statistics=["Sum"])["Datapoints"]
        return float(sum(p.get("Sum", 0.0) for p in points))

    try:
        failures = account.wait("NoCapacityInvocationFailures published", lambda: total(
            "NoCapacityInvocationFailures") or None, timeout_s=10 * MINUTE, every_s=MINUTE)
    except NotWithin:
        failures = 0.0
    return failures, total("Invocations")


@behaviour("s2z")
def idle_rule_reaches_zero(account: Account) -> None:
    """The idle rule (AWS's guide "Scale an endpoint to zero instances" and the blog "Unlock cost savings with the
    new scale down to zero feature in SageMaker Inference"; the emulator's details *assumed*: a minute without a
    datapoint counts as low, the scale-in at the window's end): a component with peagle's `--scale-to-zero`
    requests (target tracking with scale-in, minimum 0, the wake-up policy and alarm) and no request reaches 0
    copies within 45 minutes (about 15 expected), and peagle's status reader finds that scale-in in
    DescribeScalingActivities (its "Setting desired copy count to N." wording, *assumed*). If not: the plan's
    "$0.00/h at zero" is false; peagle would say so in the plan and status and stop offering `--scale-to-zero`
    until a rule that reaches zero is found (this tier's older-rule behaviour tells whether its own alarm would)."""
    seen = observe(account, "s2z")
    assert seen.zero_after_s is not None, (
        f"{seen.component} did not reach zero copies within 45 min of idleness: {seen.zero_missed}; target "
        "tracking's scale-in did not take it to zero")
    assert seen.peagle_last_scale_in is not None, (
        f"peagle's reader of DescribeScalingActivities found no scale-in in {seen.activities!r}: the wording differs "
        "from 'Setting desired copy count to N.'; fix lifecycle.components.last_scale_in and the emulator's wording")


@behaviour("s2z")
def instance_released_after_the_last_copy(account: Account) -> None:
    """Managed instance scaling releases the instance after the last copy goes (the blog: "after 10 additional
    minutes"; the emulator's `instance_release_s` 600): within 30 minutes of the copies reaching 0. If not, the hours
    at zero bill (status's cost so far would undercount, and the plan's "$0.00/h at zero" would be false)."""
    seen = observe(account, "s2z")
    if seen.zero_after_s is None:
        pytest.fail(f"the component never reached zero copies ({seen.zero_missed}): see idle_rule_reaches_zero")
    assert seen.instances_zero_after_s is not None, (
        f"{seen.component}'s endpoint still had {seen.instances_missed} 30 min after its last copy went")


@behaviour("s2z")
def a_request_at_zero_is_refused_with_the_no_capacity_text(account: Account) -> None:
    """A request to a component at zero copies is refused at once with SageMaker's no-capacity ValidationError
    (the blog's text, "Inference Component has no capacity to process this request..."), which peagle's matcher
    (runtime.failures.is_no_capacity) recognises: `peagle invoke` and `bench` wake on exactly that refusal. If not,
    they would report a failure instead of waking; the matcher (and the emulator's text) would follow AWS's."""
    seen = observe(account, "s2z")
    if seen.refusal is None:
        pytest.fail("no request was refused at zero: " + (seen.zero_missed or seen.wake_missed or "answered at once"))
    assert seen.refusal.code in ("ValidationError", "ValidationException") and seen.peagle_says_no_capacity, (
        f"the refusal at zero was {seen.refusal.code}: {seen.refusal.message!r}, which peagle does not take for "
        "SageMaker's no-capacity refusal")


@behaviour("s2z")
def a_refused_request_wakes_the_component(account: Account) -> None:
    """At zero, the refused request counts in NoCapacityInvocationFailures, whose alarm (peagle's wake-up alarm,
    Sum >= 1 over 60 s) runs the step policy that sets the copies back (AWS's guide): requests sent with peagle's
    back-off (5 s growing to 30 s) are answered within 25 minutes. If not, `--scale-to-zero` endpoints would never
    wake by themselves; peagle would set the copies back itself in `invoke`/`bench` (UpdateInferenceComponent-
    RuntimeConfig) and change its alarm."""
    seen = observe(account, "s2z")
    if seen.refusal is None:
        pytest.fail("never at zero, so never woken: " + (seen.zero_missed or "answered at once"))
    assert seen.woke_after_s is not None, f"{seen.component} did not wake: {seen.wake_missed}"


@behaviour("s2z")
def refused_requests_count_as_no_capacity_failures_not_invocations(account: Account) -> None:
    """The minutes in which requests were refused for want of a copy have NoCapacityInvocationFailures datapoints
    (AWS's guide: the wake-up alarm's metric) and no Invocations (*assumed*: that a refused request is not an
    invocation). If refused requests counted as Invocations, an older peagle's metric-math idle alarm would never
    see an idle minute while a client retries; today's rule (target tracking) does not read Invocations."""
    seen = observe(account, "s2z")
    if seen.woke_after_s is None:
        pytest.fail("no wake-up to read the metrics of: " + (seen.zero_missed or seen.wake_missed or ""))
    assert seen.failures_sum and seen.failures_sum >= 1, (
        f"NoCapacityInvocationFailures summed {seen.failures_sum} over the {seen.refused} refusals' minutes")
    assert not seen.invocations_sum, f"Invocations summed {seen.invocations_sum} over the refusals' minutes"


# run: an older peagle's idle rule ---------------------------------------------------------------------------------
@dataclass
class LegacyIdle:
    component: str
    zero_after_s: float | None = None
    missed: str | None = None


@run("legacy", Footprint(
    instances=1, expected_instance_minutes=10 + 5 + 33 + 10, bound_minutes=30 + 30 + 60 + 15,
    why="one copy on one instance: created (10), loaded (5), the older rule's 15-minute warm-up and 15 idle "
        "minutes (33), removed (10)"))
def legacy_idle_rule(account: Account) -> LegacyIdle:
    """A component with an older peagle's own idle rule (tests/legacy_scale_to_zero.py's bodies verbatim: target
    tracking removed, a step policy ExactCapacity 0 on a metric-math alarm FILL(Invocations,0) +
    FILL(NoCapacityInvocationFailures,0) < 1 for 15 periods, missing data breaching) and no traffic."""
    from ..legacy_scale_to_zero import make_legacy

    stack = account.name("legacy")
    seen = LegacyIdle(component=stack)
    try:
        _component_stack(account, "legacy", fraction=0.25, max_instances=2, min_instances=0)
        _scaling(account, stack)
        make_legacy(account.client("application-autoscaling"), account.client("cloudwatch"), stack, minutes=15,
                    tags=account.tags(stack))
        start = account.now()
        try:
            account.wait("copies 0/0 (the older idle rule)", _at_zero(account, stack), timeout_s=60 * MINUTE,
                         every_s=MINUTE)
            seen.zero_after_s = _since(account, start)
        except NotWithin:
            seen.missed = "{}/{} copies".format(*_copies_now(account, stack))
        return seen
    finally:
        remove(account, stack)


@behaviour("legacy")
def an_older_peagles_metric_math_idle_rule_reaches_zero(account: Account) -> None:
    """That Application Auto Scaling computes a step adjustment from a metric-math alarm with a FILLed value
    (*assumed*: no AWS source says so; the emulator models it so that the move away from it is tested): the older
    rule takes an idle component to zero within 60 minutes. If it does not, the emulator must stop acting on such
    alarms (alarm_emulation) and peagle's move to AWS's recipe was necessary, not only prudent; if it does, an
    explicit option for another idle period could come back (docs/hosting.md)."""
    seen = observe(account, "legacy")
    assert seen.zero_after_s is not None, (
        f"the older idle rule left {seen.component} at {seen.missed} after 60 min: Application Auto Scaling did not "
        "act on the metric-math alarm")


# run: one component and what SageMaker answers around it ----------------------------------------------------------
@dataclass
class Probes:
    component: str
    log_version: str | None = None
    log_note: str | None = None
    log_groups_seen: list[str] = field(default_factory=list)
    without_header: Answer | None = None
    copy_count_0: tuple[str, str] | None = None
    duplicate: tuple[str, str] | None = None
    too_big: tuple[str, str] | None = None
    delete_while_creating: tuple[str, str] | None = None
    status_at_delete: str | None = None
    target_after_delete: list[str] = field(default_factory=list)
    second_write: tuple[str, str] | None = None
    delete_endpoint: tuple[str, str] | None = None
    after_delete_endpoint: str | None = None  # what the component was once DeleteEndpoint was accepted


PROBE_NAMES = ("zero", "big", "early", "scaled")


@run("probes", Footprint(
    instances=1, expected_instance_minutes=10 + 5 + 2 + 8 + 8 + 5 + 10, bound_minutes=30 + 30 + 5 + 30 + 30 + 30 + 30 + 15,
    why="one instance holding a small copy and, one at a time, small probe components: created (10), loaded (5), "
        "its log read (2), two probe components placed and deleted (8 + 8), a copy-count change (5), removed (10)"))
def component_probes(account: Account) -> Probes:
    """One component (a tenth of the instance's memory) on a component-based endpoint, then in turn: its log
    group; an invocation without the component; creates SageMaker should refuse; a delete while Creating; a
    component with a scalable target deleted; a second copy-count write while one is under way; DeleteEndpoint."""
    from peagle_deploy.log_groups import component_log_group as log_group
    from peagle_deploy.lifecycle.startup_log import read_cloudwatch

    stack = account.name("probes")
    probe = {short: f"{stack}-{short}" for short in PROBE_NAMES}
    seen = Probes(component=stack)
    sm = account.client("sagemaker")
    small = 128  # MB: the smallest copy botocore allows; it shares the instance with the main one
    try:
        _component_stack(account, "probes", fraction=0.1, max_instances=2, extra_components=tuple(probe.values()))
        logs = account.client("logs")

        def groups() -> list[str]:
            return [g["logGroupName"] for prefix in (f"/aws/sagemaker/InferenceComponents/{stack}",
                                                    f"/aws/sagemaker/Endpoints/{stack}")
                    for g in logs.describe_log_groups(logGroupNamePrefix=prefix)["logGroups"]]

        try:  # SageMaker makes the group when the container starts; its lines may come a minute or two later
            account.wait(f"log group {log_group(stack)}", lambda: log_group(stack) in groups(),
                         timeout_s=10 * MINUTE, every_s=stacks.POLL_S)
        except NotWithin:
            pass
        info = read_cloudwatch(logs, stack, group=log_group(stack), sleep=account.sleep, attempts=10, delay_s=30)
        seen.log_version, seen.log_note = info.version, info.note
        if not info.version:
            seen.log_groups_seen = groups()
        seen.without_header = stacks.invoke(account, stack)

        def create(name: str, memory: int, copies: int = 1) -> tuple[str, str] | None:
            return refusal(sm.create_inference_component, InferenceComponentName=name, EndpointName=stack,
                           VariantName=VARIANT, Tags=account.tags(stack), RuntimeConfig={"CopyCount": copies},
                           Specification={"ModelName": stack,
                                          "ComputeResourceRequirements": {"MinMemoryRequiredInMb": memory}})

        seen.copy_count_0 = create(probe["zero"], small, copies=0)
        seen.duplicate = create(stack, small)
        seen.too_big = create(probe["big"], stacks.memory_mb(account, 2.0))
        for accepted in (n for n, refused in ((probe["zero"], seen.copy_count_0), (probe["big"], seen.too_big))
                         if refused is None):  # accepted after all: asked to go now (else the run's removal waits)
            refusal(sm.delete_inference_component, InferenceComponentName=accepted)

        stacks.create_component(account, probe["early"], stack, stack, memory=small, wait=False)
        described = stacks.describe_component(account, probe["early"]) or {}
        seen.status_at_delete = described.get("InferenceComponentStatus")
        seen.delete_while_creating = refusal(sm.delete_inference_component, InferenceComponentName=probe["early"])
        if seen.delete_while_creating is not None:
            stacks.wait_component(account, probe["early"])
            sm.delete_inference_component(InferenceComponentName=probe["early"])
        stacks.wait_component(account, probe["early"], "gone")

        stacks.create_component(account, probe["scaled"], stack, stack, memory=small)
        aas = account.client("application-autoscaling")
        target = {"ServiceNamespace": "sagemaker", "ResourceId": f"inference-component/{probe['scaled']}",
                  "ScalableDimension": "sagemaker:inference-component:DesiredCopyCount"}
        aas.register_scalable_target(**target, MinCapacity=1, MaxCapacity=1, Tags={"peagle:managed": "true"})
        sm.delete_inference_component(InferenceComponentName=probe["scaled"])
        stacks.wait_component(account, probe["scaled"], "gone")
        seen.target_after_delete = [t["ResourceId"] for t in aas.describe_scalable_targets(
            ServiceNamespace="sagemaker", ResourceIds=[target["ResourceId"]])["ScalableTargets"]]

        sm.update_inference_component_runtime_config(InferenceComponentName=stack, DesiredRuntimeConfig={"CopyCount": 2})
        seen.second_write = refusal(sm.update_inference_component_runtime_config, InferenceComponentName=stack,
                                    DesiredRuntimeConfig={"CopyCount": 1})
        stacks.wait_copies(account, stack, 2 if seen.second_write is not None else 1)
        if seen.second_write is not None:
            sm.update_inference_component_runtime_config(InferenceComponentName=stack,
                                                         DesiredRuntimeConfig={"CopyCount": 1})
            stacks.wait_copies(account, stack, 1)

        seen.delete_endpoint = refusal(sm.delete_endpoint, EndpointName=stack)
        if seen.delete_endpoint is None:
            account.meter.end(stack, account.now())
            account.wait(f"endpoint {stack} gone", lambda: _endpoint_gone(account, stack),
                         timeout_s=stacks.ENDPOINT_TIMEOUT_S, every_s=stacks.POLL_S)
            described = stacks.describe_component(account, stack)
            seen.after_delete_endpoint = described["InferenceComponentStatus"] if described else "gone"
        return seen
    finally:
        remove(account, stack)


def _endpoint_gone(account: Account, name: str) -> bool:
    from peagle_deploy.describe import describe

    return describe(account.client("sagemaker"), "endpoint", name) is None


def _refused(found: tuple[str, str] | None, what: str, *, text: str | None = None) -> None:
    assert found is not None, f"SageMaker accepted {what}"
    code, message = found
    assert code in ("ValidationException", "ValidationError"), f"{what}: {code}: {message}"
    if text is not None:
        assert text.lower() in message.lower(), f"{what}: {message!r} does not say {text!r}"


@behaviour("probes")
def the_component_log_group_is_named_after_the_component(account: Account) -> None:
    """A component's container output goes to `/aws/sagemaker/InferenceComponents/NAME` (botocore and AWS's
    guides name the group; one stream per copy, *assumed*), where peagle's deploy verification, `logs` and
    `metrics` read it: peagle's start-up reader finds the container's vLLM lines there. If not, those commands
    would read an empty group; peagle would read the group SageMaker uses (the failure lists the groups seen)."""
    seen = observe(account, "probes")
    assert seen.log_version, (f"no vLLM start-up line in /aws/sagemaker/InferenceComponents/{seen.component} "
                              f"({seen.log_note}); groups naming it: {seen.log_groups_seen}")


@behaviour("probes")
def invoking_a_component_endpoint_without_the_component_is_refused(account: Account) -> None:
    """InvokeEndpoint of a component-based endpoint without `InferenceComponentName` is refused with "Inference
    Component Name header is required ..." (users' reports; LiteLLM's SageMaker handler matches it), which peagle
    turns into its one-line hint (runtime/targets.py). If the text differs, peagle's hint would fall back to a
    generic 'SageMaker rejected the request'; the matcher would follow AWS's text."""
    from peagle_deploy.testing.component_emulation import HEADER_REQUIRED

    seen = observe(account, "probes")
    answer = seen.without_header
    assert answer is not None and not answer.ok, f"answered without the component: {answer}"
    assert "inference component name header is required" in answer.message.lower(), (
        f"{answer.code}: {answer.message!r}, not {HEADER_REQUIRED!r}")


@behaviour("probes")
def creating_a_component_with_copy_count_0_is_refused(account: Account) -> None:
    """CreateInferenceComponent with CopyCount 0 is refused, "Inference components copy count an integer larger
    than 0" (stdapi-ai/stdapi.ai issue 43, measured), though UpdateInferenceComponentRuntimeConfig takes 0. peagle
    creates with the deploy's copies (at least 1) either way; the emulator would accept 0 if AWS does."""
    from peagle_deploy.testing.component_emulation import COPY_COUNT_AT_CREATE

    _refused(observe(account, "probes").copy_count_0, "a component created with CopyCount 0",
             text=COPY_COUNT_AT_CREATE)


@behaviour("probes")
def a_duplicate_component_name_is_refused(account: Account) -> None:
    """A second component of a name in use is refused, 'Cannot create already existing inference component
    "ARN".' (SageMaker's text for models, configs and endpoints; for components *assumed*): peagle's deploy
    reconciles a lost CreateInferenceComponent answer by that refusal. If the text differs, peagle's
    is_already_exists and the emulator's text would follow."""
    from peagle_deploy.aws import is_already_exists

    found = observe(account, "probes").duplicate
    _refused(found, "a second component of the same name")

    class Refusal(Exception):
        response = {"Error": {"Code": found[0], "Message": found[1]}}

    assert is_already_exists(Refusal()), f"peagle does not take {found[1]!r} for 'already exists'"


@behaviour("probes")
def a_copy_that_fits_no_instance_is_refused(account: Account) -> None:
    """A component whose copy asks more memory than the instance type has is refused at CreateInferenceComponent
    (*assumed*, case and text: "There is not enough hardware resources on the instances for this endpoint to create
    a copy of the inference component."). peagle sizes copies before any call (plan_component.py), so it never asks
    for one; if AWS accepts it and leaves it Creating, the emulator would model that."""
    _refused(observe(account, "probes").too_big, "a copy asking twice the instance's memory")


@behaviour("probes")
def deleting_a_component_while_it_is_creating_is_refused(account: Account) -> None:
    """DeleteInferenceComponent of a component still Creating is refused in SageMaker's in-progress form (state
    CREATE_IN_PROGRESS; *assumed*: stdapi-ai measured the form for updates only). peagle's rollback asks again
    once it settles (lifecycle.components._in_progress); if AWS accepts the delete, the emulator would too, and the
    rollback would go faster."""
    seen = observe(account, "probes")
    if seen.status_at_delete != "Creating":
        pytest.skip(f"the probe component was {seen.status_at_delete} at once: nothing to show")
    _refused(seen.delete_while_creating, "a delete of a Creating component", text="in_progress")


@behaviour("probes")
def deleting_a_component_deregisters_its_scalable_target(account: Account) -> None:
    """DeleteInferenceComponent takes the component's scalable target (with its policies and alarms) with it
    (*assumed*, as the emulator's DeleteEndpoint does for variants). peagle removes the scaling first anyway; if AWS
    leaves the target, the emulator would too, and peagle's cleanup of a component already gone must (and does,
    for names its endpoint's peagle:components tag lists) deregister it."""
    seen = observe(account, "probes")
    assert not seen.target_after_delete, f"still registered after the component went: {seen.target_after_delete}"


@behaviour("probes")
def a_second_write_during_a_copy_count_change_is_refused(account: Account) -> None:
    """A copy-count change while another is under way is refused, 'Cannot update inference component "ARN" while
    it is in state UPDATE_RC_IN_PROGRESS.' (stdapi-ai/stdapi.ai: the state name and form; wording *assumed*).
    peagle waits for InService between writes; the emulator would accept the second write if AWS does."""
    _refused(observe(account, "probes").second_write, "a second copy-count write under way",
             text="UPDATE_RC_IN_PROGRESS")


@behaviour("probes")
def delete_endpoint_with_components_attached_is_refused(account: Account) -> None:
    """DeleteEndpoint of an endpoint that still hosts an inference component is refused (*assumed*: the console
    refuses; no API source). If AWS accepts it and strands the component (the emulator's "strand" switch), peagle
    already handles the leftovers (status lists them, recover and cleanup --all remove them); the emulator's
    default would become "strand"."""
    seen = observe(account, "probes")
    assert seen.delete_endpoint is not None, (
        f"SageMaker deleted the endpoint under its component, which was then {seen.after_delete_endpoint}")
    _refused(seen.delete_endpoint, "DeleteEndpoint with a component on it")


# run: a rolling component update, with room -----------------------------------------------------------------------
@dataclass
class RollingUpdate:
    component: str
    peak_instances: int = 0
    during: list[Answer] = field(default_factory=list)
    final_model: str | None = None
    final_status: str | None = None
    failure: str | None = None
    beyond: dict[str, Any] = field(default_factory=dict)  # copies asked beyond what the instances hold


@run("roll", Footprint(
    instances=2, expected_instance_minutes=(10 + 5 + 12 + 12 + 10) + (12 + 10 + 12),
    bound_minutes=30 + 30 + 30 + 12 + 15,
    why="a copy of 55% of one instance, then its update's copy beside it on a second instance (12), the old one "
        "released (10), three copies asked of two instances (12), removed (10)"))
def rolling_update(account: Account) -> RollingUpdate:
    """A component whose copy takes 55% of the instance's memory (so a second copy cannot share it), MaxInstanceCount
    2, updated to a new model: invocations meanwhile, the instances it used, where it ends. Then a scalable target
    asking 3 copies of the 2 instances."""
    stack = account.name("roll")
    seen = RollingUpdate(component=stack)
    sm = account.client("sagemaker")
    try:
        _component_stack(account, "roll", fraction=0.55, max_instances=2)
        new_model = stacks.create_model(account, f"{stack}-v2", stack)
        memory = stacks.memory_mb(account, 0.55)
        sm.update_inference_component(InferenceComponentName=stack, Specification={
            "ModelName": new_model, "ComputeResourceRequirements": {"MinMemoryRequiredInMb": memory}})

        def done() -> bool:
            seen.during.append(stacks.invoke(account, stack, stack))
            seen.peak_instances = max(seen.peak_instances, stacks.current_instances(account, stack))
            described = stacks.describe_component(account, stack) or {}
            seen.final_status = described.get("InferenceComponentStatus")
            seen.final_model = (described.get("Specification") or {}).get("ModelName")
            seen.failure = described.get("FailureReason")
            return seen.final_status in ("InService", "Failed") and (
                seen.final_model == new_model or seen.final_status == "Failed" or bool(seen.failure))

        account.sleep(stacks.POLL_S)
        account.wait("the update done", done, timeout_s=30 * MINUTE, every_s=20)
        if seen.final_model == new_model and seen.final_status == "InService":
            account.container_output(stack, stack, new_model)
            aas = account.client("application-autoscaling")
            target = {"ServiceNamespace": "sagemaker", "ResourceId": f"inference-component/{stack}",
                      "ScalableDimension": "sagemaker:inference-component:DesiredCopyCount"}
            aas.register_scalable_target(**target, MinCapacity=3, MaxCapacity=3, Tags={"peagle:managed": "true"})
            account.sleep(10 * MINUTE)
            described = stacks.describe_component(account, stack) or {}
            current, desired = stacks.copies(described)
            seen.beyond = {"current": current, "desired": desired,
                           "status": described.get("InferenceComponentStatus"),
                           "instances": stacks.current_instances(account, stack)}
        return seen
    finally:
        remove(account, stack)


@behaviour("roll")
def a_component_update_starts_the_new_copy_beside_the_old(account: Account) -> None:
    """A component update is rolling (botocore's model of InferenceComponentRollingUpdatePolicy: SageMaker
    "provisions capacity on the new endpoint fleet, routes traffic to that fleet, and terminates capacity on the old
    endpoint fleet"; without a DeploymentConfig, all copies at once, *assumed*): with room (MaxInstanceCount 2) the
    new copy starts on a second instance while the old one answers, and the update ends serving the new model. If
    the old copy stopped first, peagle's room for an update (MaxInstanceCount above the copies, docs/hosting.md)
    would be unnecessary: the plan would drop it and its price."""
    seen = observe(account, "roll")
    assert seen.final_status == "InService" and seen.final_model == f"{seen.component}-v2", (
        f"the update ended {seen.final_status} on {seen.final_model} ({seen.failure})")
    refused = [a for a in seen.during if not a.ok]
    assert not refused, f"requests were refused during the update: {refused[:3]}"
    assert seen.peak_instances >= 2, (
        f"the update never ran a second instance (at most {seen.peak_instances}): the old copy made room first")


@behaviour("roll")
def copies_asked_beyond_the_instances_wait_unplaced(account: Account) -> None:
    """Copies that Application Auto Scaling asks for beyond what MaxInstanceCount instances hold wait unplaced:
    DesiredCopyCount above CurrentCopyCount, the component InService (*assumed*). peagle's status shows
    current/desired copies from these fields; if AWS refuses or fails the component instead, the emulator would."""
    seen = observe(account, "roll")
    beyond = seen.beyond
    if not beyond:
        pytest.fail(f"the update did not end serving the new model ({seen.final_status}): nothing to ask beyond")
    assert beyond["desired"] == 3 and beyond["current"] == 2 and beyond["status"] == "InService", (
        f"3 copies asked of 2 instances that hold 2: {beyond}")


# run: a component update without room -----------------------------------------------------------------------------
@dataclass
class UpdateWithoutRoom:
    component: str
    refused: tuple[str, str] | None = None
    final_status: str | None = None
    final_model: str | None = None
    failure: str | None = None


@run("noroom", Footprint(
    instances=1, expected_instance_minutes=10 + 5 + 2 + 10, bound_minutes=30 + 30 + 30 + 15,
    why="a copy of 55% of the only instance it may have (MaxInstanceCount 1), an update asked (refused at once, or "
        "waited for up to 30 min), removed (10)"))
def update_without_room(account: Account) -> UpdateWithoutRoom:
    """A component whose copy takes 55% of the instance and MaxInstanceCount 1 (no room beside it), updated to a new
    model: refused, or what it became."""
    stack = account.name("noroom")
    seen = UpdateWithoutRoom(component=stack)
    sm = account.client("sagemaker")
    try:
        _component_stack(account, "noroom", fraction=0.55, max_instances=1)
        new_model = stacks.create_model(account, f"{stack}-v2", stack)
        seen.refused = refusal(sm.update_inference_component, InferenceComponentName=stack, Specification={
            "ModelName": new_model,
            "ComputeResourceRequirements": {"MinMemoryRequiredInMb": stacks.memory_mb(account, 0.55)}})
        if seen.refused is None:
            account.sleep(stacks.POLL_S)

            def settled() -> bool:
                described = stacks.describe_component(account, stack) or {}
                seen.final_status = described.get("InferenceComponentStatus")
                seen.final_model = (described.get("Specification") or {}).get("ModelName")
                seen.failure = described.get("FailureReason")
                return seen.final_status in ("InService", "Failed")

            try:
                account.wait("the update settled", settled, timeout_s=30 * MINUTE, every_s=stacks.POLL_S)
            except NotWithin:
                pass
        return seen
    finally:
        remove(account, stack)


@behaviour("noroom")
def a_component_update_without_room_is_refused_at_once(account: Account) -> None:
    """An update whose new copy has no room beside the old one (MaxInstanceCount reached, the copy too large to
    share) is refused at once with a ValidationException (*assumed*; a real one may wait and roll back instead).
    Either way it must not end serving the new model by stopping the old copy first: peagle refuses such an update
    itself before any write (docs/hosting.md). If AWS waits, the emulator would model the wait and the rollback."""
    seen = observe(account, "noroom")
    assert seen.refused is not None, (
        f"SageMaker accepted the update without room: it ended {seen.final_status} on {seen.final_model} "
        f"({seen.failure})")
    _refused(seen.refused, "an update without room")


# run: a classic endpoint ------------------------------------------------------------------------------------------
@dataclass
class Classic:
    endpoint: str
    with_component: Answer | None = None
    delete_refused: tuple[str, str] | None = None  # DeleteEndpointConfig of the config the update moves to
    status: str | None = None
    config: str | None = None
    failure: str | None = None


@run("classic", Footprint(
    instances=2, expected_instance_minutes=(10 + 15 + 10) + 15, bound_minutes=30 + 45 + 15,
    why="a model on one instance (10), an UpdateEndpoint whose config goes (blue/green: a second instance for up to "
        "15 min), removed (10)"))
def classic_endpoint(account: Account) -> Classic:
    """A classic (model-based) endpoint: an invocation naming a component; then an UpdateEndpoint whose new config is
    deleted while the endpoint is Updating."""
    stack = account.name("classic")
    seen = Classic(endpoint=stack)
    sm = account.client("sagemaker")
    try:
        stacks.create_model(account, stack, stack)
        for config in (stack, f"{stack}-c2"):
            sm.create_endpoint_config(EndpointConfigName=config, Tags=account.tags(stack), ProductionVariants=[{
                "VariantName": VARIANT, "ModelName": stack, "InstanceType": account.instance_type,
                "InitialInstanceCount": 1}])
        stacks.create_endpoint(account, stack, stack)
        seen.with_component = stacks.invoke(account, stack, "peagle-ct-no-such-component")
        sm.update_endpoint(EndpointName=stack, EndpointConfigName=f"{stack}-c2")
        seen.delete_refused = refusal(sm.delete_endpoint_config, EndpointConfigName=f"{stack}-c2")
        described = stacks.wait_endpoint(account, stack, "InService", "Failed", timeout_s=45 * MINUTE)
        seen.status, seen.config = described["EndpointStatus"], described.get("EndpointConfigName")
        seen.failure = described.get("FailureReason")
        return seen
    finally:
        remove(account, stack)


@behaviour("classic")
def invoking_a_model_endpoint_with_a_component_is_refused(account: Account) -> None:
    """InvokeEndpoint naming an inference component on an endpoint that hosts a model is refused, "Inference
    Component Name header is not allowed for endpoints to which you dont plan to deploy inference components..."
    (LiteLLM's SageMaker tests). peagle addresses a component only when ListInferenceComponents names one; the
    emulator's text would follow AWS's."""
    from peagle_deploy.testing.component_emulation import HEADER_NOT_ALLOWED

    answer = observe(account, "classic").with_component
    assert answer is not None and not answer.ok, f"answered with a component header: {answer}"
    assert "header is not allowed" in answer.message.lower(), f"{answer.code}: {answer.message!r}, not " \
                                                                f"{HEADER_NOT_ALLOWED!r}"


@behaviour("classic")
def an_update_whose_new_config_is_deleted_while_updating_fails_back(account: Account) -> None:
    """If the config an update moves to is deleted while the endpoint is Updating, the update fails: InService on
    the old config with a FailureReason (*assumed*; real SageMaker may finish it from what it captured at
    UpdateEndpoint). peagle relies on neither (it never deletes a config an endpoint serves or moves to); if AWS
    finishes the update, the emulator would."""
    seen = observe(account, "classic")
    assert seen.delete_refused is None, (
        f"SageMaker refused to delete the config an update moves to ({seen.delete_refused}); the emulator accepts it "
        "(SageMaker's API reference: 'You must not delete an EndpointConfig in use', with no refusal)")
    assert seen.status == "InService" and seen.config == seen.endpoint and seen.failure, (
        f"after its new config was deleted mid-update the endpoint is {seen.status} on {seen.config} "
        f"(FailureReason: {seen.failure})")


# run: quotas ------------------------------------------------------------------------------------------------------
@dataclass
class Quotas:
    zero_type: str
    single: tuple[str, str] | None = None
    single_status: str | None = None
    pools: tuple[str, str] | None = None
    pools_status: str | None = None
    pools_serving: list[tuple[str, int]] = field(default_factory=list)


def zero_quota_type(account: Account) -> str | None:
    """An instance type whose endpoint quota is 0 here, in the tier's order: Service Quotas' applied values (one
    listing), named as peagle's quota check names them."""
    from peagle_deploy.lifecycle.quota import quota_name

    pages = account.client("service-quotas").get_paginator("list_service_quotas").paginate(ServiceCode="sagemaker")
    values = {q.get("QuotaName"): q.get("Value") for page in pages for q in page.get("Quotas", [])}
    return next((t for t in account.zero_quota_types if values.get(quota_name(t)) == 0), None)


@run("quota", Footprint(
    instances=1, expected_instance_minutes=0, bound_minutes=30 + 15,
    why="nothing if SageMaker refuses both creates, as expected; if it accepts the pool list, the first pool's "
        "instance until the endpoint is InService (30) and removed (15)"))
def quotas(account: Account) -> Quotas:
    """With an instance type Z whose quota is 0: CreateEndpoint of a variant of Z alone; then of a pool variant
    [the tier's instance type first, Z second]."""
    from peagle_deploy.pools import serving_pools

    zero = zero_quota_type(account)
    if zero is None:
        pytest.skip(f"no instance type with endpoint quota 0 among {', '.join(account.zero_quota_types)} in "
                    f"{account.region} (Service Quotas): set PEAGLE_AWS_ZERO_QUOTA_TYPE to one")
    stack = account.name("quota")
    seen = Quotas(zero_type=zero)
    sm = account.client("sagemaker")
    try:
        stacks.create_model(account, stack, stack)
        one, pooled = f"{stack}-one", f"{stack}-pools"
        sm.create_endpoint_config(EndpointConfigName=one, Tags=account.tags(stack), ProductionVariants=[{
            "VariantName": VARIANT, "ModelName": stack, "InstanceType": zero, "InitialInstanceCount": 1}])
        sm.create_endpoint_config(EndpointConfigName=pooled, Tags=account.tags(stack), ProductionVariants=[{
            "VariantName": VARIANT, "ModelName": stack, "InitialInstanceCount": 1, "RoutingConfig": dict(stacks.ROUTING),
            "VariantInstanceProvisionTimeoutInSeconds": 600,
            "InstancePools": [{"InstanceType": account.instance_type, "Priority": 1},
                              {"InstanceType": zero, "Priority": 2}]}])
        for name, config in ((one, one), (pooled, pooled)):
            found = refusal(sm.create_endpoint, EndpointName=name, EndpointConfigName=config, Tags=account.tags(stack))
            status, serving = None, []
            if found is None:
                account.meter.start(name, account.instance_type, account.now())
                described = stacks.wait_endpoint(account, name, "InService", "Failed")
                status = f"{described['EndpointStatus']} ({described.get('FailureReason') or 'no FailureReason'})"
                serving = serving_pools((described.get("ProductionVariants") or [{}])[0])
            if name == one:
                seen.single, seen.single_status = found, status
            else:
                seen.pools, seen.pools_status, seen.pools_serving = found, status, serving
        return seen
    finally:
        remove(account, stack)


@behaviour("quota")
def creating_an_endpoint_past_the_quota_is_refused_with_the_limit_text(account: Account) -> None:
    """CreateEndpoint of a variant of a type whose quota is 0 is refused at once, ResourceLimitExceeded "The
    account-level service limit 'TYPE for endpoint usage' is 0 Instances, ..." (aws-samples/aws-genai-llm-chatbot
    issue 244), which peagle parses (pools.quota_refusal) to plan again without that type. If the text differs,
    peagle would stop at the refusal instead of planning again; the parser would follow AWS's text."""
    from peagle_deploy.pools import quota_refusal

    seen = observe(account, "quota")
    assert seen.single is not None, f"SageMaker accepted an endpoint of {seen.zero_type} (quota 0): {seen.single_status}"
    code, message = seen.single
    assert code == "ResourceLimitExceeded", f"{code}: {message}"
    assert quota_refusal(message) == (seen.zero_type, 0.0), f"peagle's parser does not read {message!r}"


@behaviour("quota")
def a_pool_list_with_a_quota_0_type_is_refused_whole(account: Account) -> None:
    """With instance pools, CreateEndpoint checks the quota of every pool's type: a list whose second pool has quota
    0 is refused whole, though the first has both quota and capacity ("quota does not fall back, capacity does":
    Deepgram's SageMaker deployment documentation, measured on real accounts). peagle leaves such a type out
    beforehand where Service Quotas can be read, and plans again once where it cannot; if AWS accepts the list
    (serving from the first pool), peagle's leaving-out is unnecessary and the emulator would accept it too."""
    seen = observe(account, "quota")
    assert seen.pools is not None, (
        f"SageMaker accepted pools [{account.instance_type}, {seen.zero_type} (quota 0)]: {seen.pools_status}, "
        f"serving from {seen.pools_serving}")
    code, message = seen.pools
    assert code == "ResourceLimitExceeded" and seen.zero_type in message, f"{code}: {message}"


# run: endpoint configs (free: no instance) ------------------------------------------------------------------------
OTHER_CPU_TYPES = ("ml.c5.large", "ml.m5.xlarge")


@run("configs", Footprint(instances=0, expected_instance_minutes=0, bound_minutes=0,
                          why="endpoint configs and a model only: SageMaker bills no instance for them"))
def endpoint_configs(account: Account) -> dict[str, tuple[str, str] | None]:
    """CreateEndpointConfig of configs SageMaker may refuse or take: the answer of each (None: accepted)."""
    stack = account.name("cfg")
    sm = account.client("sagemaker")
    other = next(t for t in OTHER_CPU_TYPES if t != account.instance_type)
    account_id = account.client("sts").get_caller_identity()["Account"]
    pools = [{"InstanceType": account.instance_type, "Priority": 1}, {"InstanceType": other, "Priority": 2}]
    base = {"VariantName": VARIANT, "ModelName": stack, "InitialInstanceCount": 1}
    probes: dict[str, tuple[dict[str, Any], dict[str, Any]]] = {
        "pools": ({**base, "InstancePools": pools, "RoutingConfig": dict(stacks.ROUTING)}, {}),
        "pools-no-routing": ({**base, "InstancePools": pools}, {}),
        "pools-and-type": ({**base, "InstancePools": pools, "InstanceType": account.instance_type}, {}),
        "pools-same-type": ({**base, "InstancePools": [pools[0], {**pools[0], "Priority": 2}]}, {}),
        "pools-same-priority": ({**base, "InstancePools": [pools[0], {**pools[1], "Priority": 1}]}, {}),
        "pools-no-model": ({**base, "InstancePools": [pools[0], {**pools[1], "ModelNameOverride": account.name(
            "no-such-model")}]}, {}),
        "reservation": ({**base, "InstanceType": account.instance_type, "CapacityReservationConfig": {
            "CapacityReservationPreference": "capacity-reservations-only",
            "MlReservationArn": f"arn:aws:sagemaker:{account.region}:{account_id}:ml-reservation/{stack}-none"}}, {}),
        "scaling-with-model": ({**base, "InstanceType": account.instance_type, "ManagedInstanceScaling": {
            "Status": "ENABLED", "MinInstanceCount": 1, "MaxInstanceCount": 2}}, {}),
        "component-no-role": ({"VariantName": VARIANT, "InstanceType": account.instance_type,
                               "InitialInstanceCount": 1, "ManagedInstanceScaling": {
                                   "Status": "ENABLED", "MinInstanceCount": 1, "MaxInstanceCount": 2}}, {}),
        "min-above-max": ({"VariantName": VARIANT, "InstanceType": account.instance_type, "InitialInstanceCount": 1,
                           "ManagedInstanceScaling": {"Status": "ENABLED", "MinInstanceCount": 2,
                                                      "MaxInstanceCount": 1}},
                          {"ExecutionRoleArn": account.role_arn}),
    }
    try:
        stacks.create_model(account, stack, stack)
        return {key: refusal(sm.create_endpoint_config, EndpointConfigName=f"{stack}-{key}", Tags=account.tags(stack),
                             ProductionVariants=[variant], **extra)
                for key, (variant, extra) in probes.items()}
    finally:
        remove(account, stack)


@behaviour("configs")
def a_pool_variant_takes_routing_config_and_needs_none(account: Account) -> None:
    """A pool variant with `RoutingConfig` LEAST_OUTSTANDING_REQUESTS (what peagle sends) is accepted, and one
    without it too (one public sample of instance pools says SageMaker requires it; botocore allows both; the
    emulator refuses neither). Shown at CreateEndpointConfig, which costs nothing; a refusal at CreateEndpoint would
    show in the quota run's pool list, which carries it as peagle's does. If SageMaker refused it, peagle's pools
    would have to drop it."""
    answers = observe(account, "configs")
    assert answers["pools"] is None, f"a pool variant with RoutingConfig was refused: {answers['pools']}"
    assert answers["pools-no-routing"] is None, (
        f"a pool variant without RoutingConfig was refused: {answers['pools-no-routing']}: the emulator should "
        "refuse it too")


@behaviour("configs")
def instance_pool_configs_sagemaker_refuses(account: Account) -> None:
    """CreateEndpointConfig refuses (*assumed*, each): InstancePools together with InstanceType; two pools of one
    type; two pools of one priority; a ModelNameOverride naming no model; a capacity reservation that does not
    exist. peagle plans none of these (plan_pools.py); the emulator's refusals would follow AWS's answers."""
    answers = observe(account, "configs")
    assert answers["pools"] is None, f"SageMaker refused even a valid pool variant: {answers['pools']}"
    accepted = [key for key in ("pools-and-type", "pools-same-type", "pools-same-priority", "pools-no-model",
                                "reservation") if answers[key] is None]
    assert not accepted, f"SageMaker accepted: {accepted}"
    for key in ("pools-and-type", "pools-same-type", "pools-same-priority", "pools-no-model", "reservation"):
        _refused(answers[key], key)


@behaviour("configs")
def managed_instance_scaling_on_a_model_variant_is_refused(account: Account) -> None:
    """ManagedInstanceScaling on a variant with a ModelName is refused, "ManagedInstanceScaling is only supported for
    inference component endpoints." (hashicorp/terraform-provider-aws PR 45926's acceptance test output). peagle
    sends it only on component variants; the emulator's text and moment (CreateEndpointConfig) would follow."""
    from peagle_deploy.testing.component_emulation import MANAGED_SCALING_NEEDS_COMPONENTS

    _refused(observe(account, "configs")["scaling-with-model"], "ManagedInstanceScaling on a model variant",
             text=MANAGED_SCALING_NEEDS_COMPONENTS)


@behaviour("configs")
def component_configs_without_a_role_or_with_min_above_max_are_refused(account: Account) -> None:
    """A component-based config (a variant without ModelName) without ExecutionRoleArn is refused (stdapi-ai issue
    43, measured; wording *assumed*), and so is MinInstanceCount above MaxInstanceCount (*assumed*). peagle sends the
    role and a valid range; the emulator's refusals would follow."""
    answers = observe(account, "configs")
    _refused(answers["component-no-role"], "a component-based config without ExecutionRoleArn")
    _refused(answers["min-above-max"], "MinInstanceCount above MaxInstanceCount")


# run: the OpenAI route's refusals (free: no endpoint) -------------------------------------------------------------
OTHER_REGION = {"us-east-1": "us-west-2"}


@run("route", Footprint(instances=0, expected_instance_minutes=0, bound_minutes=0,
                        why="requests to the route of an endpoint that does not exist: no resource at all"))
def openai_route(account: Account) -> dict[str, tuple[int, str]]:
    """Requests to the OpenAI route of an endpoint that does not exist, each with one thing wrong with its token (or
    none): the HTTP status and the message of each answer."""
    from peagle_deploy.aws import AwsSession
    from peagle_deploy.runtime.openai_route import base_url, make_token

    url = base_url(account.session, account.name("route-none")) + "/chat/completions"
    valid = make_token(account.session).value.get_secret_value()
    prefix, encoded = valid[:len("sagemaker-api-key-")], valid[len("sagemaker-api-key-"):]
    presigned = base64.b64decode(encoded).decode()
    head, _, signature = presigned.partition("X-Amz-Signature=")
    forged_query = f"{head}X-Amz-Signature={'1' if signature[0] == '0' else '0'}{signature[1:]}"
    elsewhere = AwsSession(OTHER_REGION.get(account.region, "us-east-1"))
    answers = {"valid": _route_request(url, valid),
               "missing": _route_request(url, None),
               "malformed": _route_request(url, "not-a-sagemaker-token"),
               "forged": _route_request(url, prefix + base64.b64encode(forged_query.encode()).decode()),
               "region": _route_request(url, make_token(elsewhere).value.get_secret_value())}
    short = make_token(account.session, timedelta(seconds=1)).value.get_secret_value()
    account.sleep(MINUTE)
    answers["expired"] = _route_request(url, short)
    return answers


def _route_request(url: str, token: str | None) -> tuple[int, str]:
    headers = {"Content-Type": "application/json"}
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    body = json.dumps({"model": "", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 1}).encode()
    request = urllib.request.Request(url, data=body, headers=headers, method="POST")
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, response.read().decode(errors="replace")[:300]
    except urllib.error.HTTPError as exc:
        text = exc.read().decode(errors="replace")
        try:
            document = json.loads(text)
            text = document.get("message") or document.get("Message") or (document.get("error") or {}).get(
                "message") or text
        except ValueError:
            pass
        return exc.code, text


@behaviour("route")
def openai_route_token_refusals(account: Account) -> None:
    """The OpenAI route checks its bearer token before the endpoint: no token 401 "Missing Authentication Token";
    not a token 403 "Invalid API Key format: ..."; a forged one 403 "Authentication failed: Please make sure your API
    Key is valid." (the statuses and these texts: AWS's bearer-token front end for Bedrock API keys, the same
    format); an expired one and one of another region 403 with SigV4's wording (*assumed*); a valid one reaches
    the endpoint check (400, the endpoint not found). peagle's `openai` and the OpenAI SDK map 401/403 to their
    errors; the emulator's REFUSALS table would follow AWS's texts."""
    from peagle_deploy.testing.openai_route import REFUSALS

    answers = observe(account, "route")
    status, text = answers["valid"]
    assert status == 400 and "not found" in text.lower(), f"a valid token: {status} {text!r}"
    wrong = {key: answers[key] for key, (want, _code, message) in REFUSALS.items()
             if answers[key][0] != want or message.lower() not in answers[key][1].lower()}
    assert not wrong, "answers that differ from the emulator's: " + "; ".join(
        f"{key}: {status} {text!r} (emulator: {REFUSALS[key][0]} {REFUSALS[key][2]!r})"
        for key, (status, text) in wrong.items())


# behaviours with no cheap scenario --------------------------------------------------------------------------------
def _no_scenario(reason: str) -> Callable[[Account], None]:
    def check(account: Account) -> None:
        not_shown(account, reason)
    return check


def _listed(name: str, doc: str, reason: str) -> None:
    check = _no_scenario(reason)
    check.__name__ = check.__qualname__ = name
    check.__doc__ = f"{doc} Not shown: {reason}"
    BEHAVIOURS.append(Behaviour(check, None, aws_skip=reason))


_CAPACITY = ("it needs SageMaker to run out of capacity for an instance type (InsufficientInstanceCapacity), which "
             "no account can cause on demand")
_listed("the_capacity_failure_reason_text",
        "An endpoint SageMaker cannot find capacity for turns Failed with \"Unable to provision requested ML compute "
        "capacity due to InsufficientInstanceCapacity error...\" (aws/deep-learning-containers' quoted failure; "
        "DIAGNijmegen/rse-grand-challenge issue 2631 for the older form); peagle matches its first words.", _CAPACITY)
_listed("a_pool_variant_out_of_capacity_fails_without_the_pools_advice",
        "A pool variant that runs out of capacity fails with that text without its last sentence (*assumed*).",
        _CAPACITY)
_listed("without_a_provision_timeout_there_is_no_wait",
        "Without VariantInstanceProvisionTimeoutInSeconds the endpoint fails at the first moment no capacity is "
        "found (*assumed*).", _CAPACITY)
_listed("scaling_a_classic_endpoint_does_not_move_capacity",
        "Application Auto Scaling of a classic endpoint keeps the capacity it was provisioned with (*assumed*; the "
        "emulator's capacity accounting).", _CAPACITY)
_listed("reserved_instances_count_against_the_quota",
        "Instances from an ML capacity reservation count against the instance type's quota like on-demand ones "
        "(*assumed*).",
        "it needs an ML capacity reservation, which bills for its whole term (days), far above the tier's cap")
_listed("inference_router_refusal_texts",
        "An inference router's refusals: ResourceAlreadyExists 'Cannot create already existing inference router "
        "\"ARN\".' and ResourceNotFound \"Could not find inference router 'ARN'.\" (*assumed*, SageMaker's wording "
        "for endpoints).",
        "peagle neither makes nor removes inference routers, so its cleanup could not guarantee the router's "
        "removal, and the Pricing API gives the tier no price to cap it by")
_listed("a_step_policys_default_cooldown_is_300_s",
        "A step policy without Cooldown waits 300 s between its adjustments (*assumed*).",
        "peagle's wake-up policy sets its own Cooldown (60 s), so the default never applies to peagle; showing it "
        "needs two wake-ups within five minutes")
_listed("the_scale_in_window_restarts_at_a_refused_request_or_a_scale_out",
        "Target tracking's idle window starts again at a refused request, a scale-out or a copy coming into service "
        "(*assumed*).",
        "it needs a second idle period after the wake-up (another 25 minutes of an instance) and peagle relies on "
        "none of it: status reads only whether the scale-in acted")
_listed("a_copy_goes_to_the_oldest_instance_that_holds_it",
        "Where several instances would hold a copy, it goes to the oldest (*assumed*).",
        "no API answer says which instance a copy runs on (DescribeInferenceComponent names none)")
_listed("the_whole_instance_memory_is_schedulable",
        "A copy may ask for the instance's whole memory (*assumed*; SageMaker keeps part for itself).",
        "a copy that cannot be placed is not refused at once on AWS as far as any source says, so the probe could "
        "bill an instance until the tier's timeout; peagle asks half (plan_component.memory_mb), and the update runs "
        "here place copies of 55%")
_listed("iam_decides_as_the_policy_evaluator_does",
        "IAM's decisions on peagle's calls match peagle_deploy.testing.iam_enforcement's (its *assumed* resources: "
        "DescribeAlarms by prefix on alarm:*, a standalone AddTags without sagemaker:TaggingAction, a new "
        "scalable target's ARN).",
        "it needs a second principal that holds only `peagle iam-policy`'s policy; the tier runs as one principal "
        "with broader rights. Run the tier as a role with that policy attached to see AccessDenied where the "
        "evaluator is wrong")
