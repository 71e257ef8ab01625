"""An inference component's scaling (`--hosting component`, `--scale-to-zero`), as pure data.

No AWS calls: the plan renders the requests, `lifecycle.components` sends them once the component is InService
and verified, and removes them before the component.

AWS's recipe, which peagle follows ("Scale an endpoint to zero instances", SageMaker developer guide; AWS Machine
Learning Blog, "Unlock cost savings with the new scale down to zero feature in SageMaker Inference"):
- the endpoint config's variant has `ManagedInstanceScaling` with `MinInstanceCount` 0 (plan_component.py);
- each component is registered with Application Auto Scaling on `sagemaker:inference-component:DesiredCopyCount`
  (`inference-component/NAME`) with `MinCapacity` 0;
- a target tracking policy on the copies, scale-in enabled, on SageMaker's predefined per-copy metric
  (`SageMakerInferenceComponentConcurrentRequestsPerCopyHighResolution`, the guide's): Application Auto Scaling makes
  and owns its two alarms; its scale-in alarm (AlarmLow) fires after 90 datapoints of 10 s below the target (about
  15 minutes; Application Auto Scaling's documentation on target tracking: the scale-in alarm waits for 15
  one-minute datapoints), and with no request the metric is 0, so it takes the copies to 0;
- a step-scaling policy on a CloudWatch alarm over `NoCapacityInvocationFailures` brings a copy back when a request
  finds none (target tracking cannot: at zero copies there is no per-copy metric).

So the idle period is AWS's, about 15 minutes, and nothing in a request sets it: `--idle` accepts only that
(`parse_idle`). An older peagle made its own idle rule instead (target tracking's scale-in disabled, a step policy
`peagle-scale-to-zero` on a metric-math alarm `peagle-idle-NAME`); no AWS source says Application Auto Scaling acts
on such an alarm, so those endpoints are recognised by these names (`LEGACY_IDLE_POLICY`, `legacy_idle_alarm_name`)
and moved to AWS's rule (`lifecycle/scaling_migration.py`).
"""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from .autoscale import POLICY_NAME, AutoscalePolicy
from .errors import UsageError
from .tag_keys import MANAGED

NAMESPACE = "sagemaker"
COPY_DIMENSION = "sagemaker:inference-component:DesiredCopyCount"
METRICS_NAMESPACE = "AWS/SageMaker"
NO_CAPACITY_METRIC = "NoCapacityInvocationFailures"
INVOCATIONS_METRIC = "Invocations"
# --autoscale's metric -> the component's target tracking metric (per copy, as the variant's are per instance)
COPY_METRICS = {"concurrency": "SageMakerInferenceComponentConcurrentRequestsPerCopyHighResolution",
                "invocations": "SageMakerInferenceComponentInvocationsPerCopy"}
SCALE_IN_METRIC = COPY_METRICS["concurrency"]  # the guide's: published every 10 s, 0 when no request is in flight
DEFAULT_TARGET = 5.0  # concurrent requests per copy: the guide's example value, when --autoscale sets none
WAKE_POLICY = "peagle-wake-up"
ALARM_PREFIX = "peagle-"  # peagle's alarms: peagle-wake-up-COMPONENT (and an older peagle's peagle-idle-COMPONENT)
PERIOD_S = 60  # SageMaker's invocation metrics are one-minute metrics
AWS_IDLE_MINUTES = 15  # target tracking's scale-in alarm: 90 x 10 s (15 x 60 s for one-minute metrics)
STEP_COOLDOWN_S = 60  # the guide's wake-up policy
# an older peagle's own idle rule (before AWS's recipe): recognised, removed, never made again
LEGACY_IDLE_POLICY = "peagle-scale-to-zero"
# in a dry run the alarms name their policy by this until PutScalingPolicy answers its ARN
ARN_PLACEHOLDER = "<PolicyARN of PutScalingPolicy {policy}>"
_IDLE_TAG = re.compile(r"^(\d+)m$")
IDLE_FIX = ("drop --idle (AWS's target tracking takes a component to zero after about 15 minutes without a request; "
            "no setting changes that)")

Step = Literal["scalable_target", "target_tracking", "wake_policy", "wake_alarm"]


class IdleRule(BaseModel):
    """Scale to zero by AWS's recipe: target tracking's own scale-in, about 15 minutes without a request."""

    model_config = ConfigDict(frozen=True)

    minutes: Literal[15] = Field(AWS_IDLE_MINUTES, description="about how long without a request: target "
                                                              "tracking's scale-in alarm (AWS's, not settable)")

    def to_tag(self) -> str:
        """The `peagle:scale-to-zero` tag value, '15m'."""
        return f"{self.minutes}m"

    @classmethod
    def from_tag(cls, value: str) -> IdleRule:
        """Any 'MINUTESm' (an older peagle wrote --idle's value): scale to zero is on, by AWS's rule now."""
        if _IDLE_TAG.match(value.strip()) is None:
            raise ValueError(f"{value!r} is not MINUTESm")
        return cls()

    def describe(self) -> str:
        return (f"to zero copies after about {self.minutes} min without a request (target tracking's own scale-in, "
                "AWS's recipe); the first request at zero wakes it (NoCapacityInvocationFailures alarm)")


def parse_idle(text: str | None) -> IdleRule:
    """`--idle`: only AWS's period (about 15 minutes) is true of AWS's recipe; anything else is one line naming
    the fix (a malformed value too: its hint is the same, but a misspelt 15 minutes names the one spelling)."""
    from datetime import timedelta

    from .durations import parse_duration

    if text is None:
        return IdleRule()
    try:
        value = parse_duration(text, flag="--idle", minimum=None, maximum=None)
    except UsageError as exc:
        if exc.hint == f"pass --idle {AWS_IDLE_MINUTES}m":  # a spelling of AWS's period (the one input rule)
            raise
        raise UsageError(exc.message, IDLE_FIX) from None
    if value != timedelta(minutes=AWS_IDLE_MINUTES):
        raise UsageError(f"--idle {text.strip()}: the idle period is AWS's target tracking scale-in, about "
                         f"{AWS_IDLE_MINUTES} minutes", IDLE_FIX)
    return IdleRule()


def resource_id(component: str) -> str:
    """Application Auto Scaling's id of an inference component."""
    return f"inference-component/{component}"


def wake_alarm_name(component: str) -> str:
    return f"{ALARM_PREFIX}wake-up-{component}"


def legacy_idle_alarm_name(component: str) -> str:
    """An older peagle's metric-math idle alarm of `component`."""
    return f"{ALARM_PREFIX}idle-{component}"


def placeholder(policy: str) -> str:
    return ARN_PLACEHOLDER.format(policy=policy)


class ScalingRequest(BaseModel):
    """One request of a component's scaling, in the order they are sent (an alarm after its policy)."""

    model_config = ConfigDict(frozen=True)

    step: Step
    service: Literal["application-autoscaling", "cloudwatch"]
    operation: Literal["RegisterScalableTarget", "PutScalingPolicy", "PutMetricAlarm"]
    body: dict[str, Any]
    policy: str | None = Field(None, description="an alarm: the policy whose ARN goes in its AlarmActions")

    @property
    def title(self) -> str:
        return {"scalable_target": "RegisterScalableTarget (once the component is InService and verified)",
                "target_tracking": "PutScalingPolicy (target tracking on copies, scale-in on: to zero when idle)",
                "wake_policy": "PutScalingPolicy (step scaling: wake up)",
                "wake_alarm": "PutMetricAlarm (wake up: a request found no copy)"}[self.step]


class ComponentScaling(BaseModel):
    """What a component's copies scale on: Application Auto Scaling between `min_copies` and `max_copies`, target
    tracking (with `autoscale`, or with `idle`: AWS's scale-to-zero recipe), and with `idle` the wake-up."""

    model_config = ConfigDict(frozen=True)

    component: str
    min_copies: int = Field(ge=0)
    max_copies: int = Field(ge=1)
    autoscale: AutoscalePolicy | None = None
    idle: IdleRule | None = None
    wake_copies: int = Field(1, ge=1, description="the copies a wake-up sets: those the deploy started with")

    @classmethod
    def planned(cls, component: str, *, copies: int, idle: IdleRule | None,
                autoscale: AutoscalePolicy | None) -> ComponentScaling:
        """The scaling a deploy of `copies` copies asks for; a pure function of the request, so whatever knows
        the copies, the idle rule (`peagle:scale-to-zero`) and the autoscaling can rebuild the same requests."""
        if idle is not None:
            low, high = 0, autoscale.max_capacity if autoscale else copies
        elif autoscale is not None:
            low, high = autoscale.min_capacity, autoscale.max_capacity
        else:
            low = high = copies
        return cls(component=component, min_copies=low, max_copies=high, autoscale=autoscale, idle=idle,
                   wake_copies=copies)

    @property
    def registered(self) -> bool:
        """Whether anything is registered with Application Auto Scaling at all."""
        return self.autoscale is not None or self.idle is not None

    @property
    def tracking(self) -> tuple[str, float]:
        """(predefined metric, target value) of the target tracking policy."""
        if self.autoscale is not None:
            return COPY_METRICS[self.autoscale.metric], float(self.autoscale.target)
        return SCALE_IN_METRIC, DEFAULT_TARGET

    def requests(self, tags: list[dict[str, str]]) -> list[ScalingRequest]:
        """Every request, in order; `tags` go on the alarm. The scalable target is tagged peagle:managed=true, as
        a variant's is: `peagle iam-policy` allows the autoscaling writes only on targets so tagged."""
        if not self.registered:
            return []
        target = {"ServiceNamespace": NAMESPACE, "ResourceId": resource_id(self.component),
                  "ScalableDimension": COPY_DIMENSION}
        metric, value = self.tracking
        found = [
            ScalingRequest(step="scalable_target", service="application-autoscaling",
                           operation="RegisterScalableTarget",
                           body={**target, "MinCapacity": self.min_copies, "MaxCapacity": self.max_copies,
                                 "Tags": {MANAGED: "true"}}),
            ScalingRequest(step="target_tracking", service="application-autoscaling", operation="PutScalingPolicy",
                           body={**target, "PolicyName": POLICY_NAME, "PolicyType": "TargetTrackingScaling",
                                 "TargetTrackingScalingPolicyConfiguration": {  # scale-in on: AWS's way to zero
                                     "TargetValue": value,
                                     "PredefinedMetricSpecification": {"PredefinedMetricType": metric}}})]
        if self.idle is None:
            return found
        dimension = [{"Name": "InferenceComponentName", "Value": self.component}]
        found += [
            ScalingRequest(step="wake_policy", service="application-autoscaling", operation="PutScalingPolicy",
                           body={**target, "PolicyName": WAKE_POLICY, "PolicyType": "StepScaling",
                                 "StepScalingPolicyConfiguration": {
                                     "AdjustmentType": "ExactCapacity", "MetricAggregationType": "Maximum",
                                     "Cooldown": STEP_COOLDOWN_S,
                                     "StepAdjustments": [{"MetricIntervalLowerBound": 0.0,
                                                          "ScalingAdjustment": self.wake_copies}]}}),
            ScalingRequest(step="wake_alarm", service="cloudwatch", operation="PutMetricAlarm", policy=WAKE_POLICY,
                           body={
                "AlarmName": wake_alarm_name(self.component),
                "AlarmDescription": f"peagle: a request found no copy of inference component {self.component}; "
                                    f"sets its copies to {self.wake_copies} (step policy {WAKE_POLICY})",
                "ActionsEnabled": True, "AlarmActions": [placeholder(WAKE_POLICY)],
                "Namespace": METRICS_NAMESPACE, "MetricName": NO_CAPACITY_METRIC, "Dimensions": dimension,
                "Statistic": "Sum", "Period": PERIOD_S, "EvaluationPeriods": 1, "DatapointsToAlarm": 1,
                "Threshold": 1.0, "ComparisonOperator": "GreaterThanOrEqualToThreshold",
                "TreatMissingData": "notBreaching", "Tags": tags}),
        ]
        return found

    def missing(self, registered: RegisteredScaling) -> list[Step]:
        """The steps of `requests` that Application Auto Scaling and CloudWatch do not hold as asked (none
        registered, or registered otherwise), in order: what `peagle recover` sends and `status` names. A wake-up
        policy sent again takes its alarm along (the alarm's action names the policy's ARN)."""
        if not self.registered:
            return []
        found: list[Step] = []
        target = registered.target or {}
        if not target or (target.get("MinCapacity"), target.get("MaxCapacity")) != (self.min_copies, self.max_copies):
            found.append("scalable_target")
        metric, value = self.tracking
        tracking = registered.policy(POLICY_NAME).get("TargetTrackingScalingPolicyConfiguration") or {}
        if (tracking.get("TargetValue") != value or tracking.get("DisableScaleIn")
                or (tracking.get("PredefinedMetricSpecification") or {}).get("PredefinedMetricType") != metric):
            found.append("target_tracking")
        if self.idle is None:
            return found
        wake = registered.policy(WAKE_POLICY)
        step = wake.get("StepScalingPolicyConfiguration") or {}
        adjustments = [a.get("ScalingAdjustment") for a in step.get("StepAdjustments") or []]
        if step.get("AdjustmentType") != "ExactCapacity" or adjustments != [self.wake_copies]:
            found.append("wake_policy")
        alarm = registered.wake_alarm or {}
        if ("wake_policy" in found or alarm.get("MetricName") != NO_CAPACITY_METRIC
                or alarm.get("AlarmActions") != [wake.get("PolicyARN")]):
            found.append("wake_alarm")
        return found

    def describe(self) -> str:
        """The scaling asked for, in one phrase ('copies 0-1: target tracking ..., the wake-up ...')."""
        metric, value = self.tracking
        text = (f"copies {self.min_copies}-{self.max_copies}: target tracking {POLICY_NAME} on {metric}={value:g} "
                "with scale-in")
        if self.idle is not None:
            text += (f" (to zero after about {self.idle.minutes} min idle), wake-up {WAKE_POLICY} and its alarm "
                     f"{wake_alarm_name(self.component)}")
        return text

    def step_label(self, step: Step) -> str:
        """One step of `requests` by what it makes, for a 'registered: ...' or 'missing: ...' list."""
        return {"scalable_target": f"scalable target (copies {self.min_copies}-{self.max_copies})",
                "target_tracking": f"target tracking {POLICY_NAME} with scale-in",
                "wake_policy": f"wake-up policy {WAKE_POLICY}",
                "wake_alarm": f"wake-up alarm {wake_alarm_name(self.component)}"}[step]

    @property
    def steps(self) -> list[Step]:
        """Every step this scaling is made of, in order."""
        if not self.registered:
            return []
        return ["scalable_target", "target_tracking", *(["wake_policy", "wake_alarm"] if self.idle else [])]


class RegisteredScaling(BaseModel):
    """What Application Auto Scaling and CloudWatch hold for one component, as their describe calls answer
    (lifecycle code reads it; `ComponentScaling.missing` compares)."""

    target: dict[str, Any] | None = Field(None, description="its DescribeScalableTargets entry; None: not registered")
    policies: list[dict[str, Any]] = Field(default_factory=list, description="DescribeScalingPolicies")
    wake_alarm: dict[str, Any] | None = Field(None, description="DescribeAlarms of its wake-up alarm")

    def policy(self, name: str) -> dict[str, Any]:
        return next((p for p in self.policies if p.get("PolicyName") == name), {})


def scaling_from_live(component: str, target: dict[str, Any] | None, policies: list[dict[str, Any]], *,
                      copies: int = 1) -> ComponentScaling:
    """The scaling AWS's recipe asks for, from the component's live scalable target and policies (pure): minimum 0,
    the maximum it has, the wake-up's copies (its step policy's ExactCapacity; `copies` where it has none), and
    target tracking on the concurrency per copy with the target it had (an older `--autoscale`), else the guide's."""
    wake = next((p for p in policies if p.get("PolicyName") == WAKE_POLICY), None)
    steps = ((wake or {}).get("StepScalingPolicyConfiguration") or {}).get("StepAdjustments") or []
    wake_copies = max(1, int(steps[0].get("ScalingAdjustment") or 1)) if steps else max(1, copies)
    most = max(wake_copies, int((target or {}).get("MaxCapacity") or wake_copies))
    tracking = next((p.get("TargetTrackingScalingPolicyConfiguration") for p in policies
                     if p.get("TargetTrackingScalingPolicyConfiguration")), None) or {}
    metric = (tracking.get("PredefinedMetricSpecification") or {}).get("PredefinedMetricType")
    autoscale = None
    if tracking.get("TargetValue") and metric == SCALE_IN_METRIC:
        autoscale = AutoscalePolicy(min_capacity=1, max_capacity=most, metric="concurrency",
                                    target=float(tracking["TargetValue"]))
    return ComponentScaling(component=component, min_copies=0, max_copies=most, autoscale=autoscale,
                            idle=IdleRule(), wake_copies=wake_copies)


def intended_scaling(component: str, *, copies: int, idle: IdleRule | None, autoscale: AutoscalePolicy | None,
                     registered: RegisteredScaling) -> ComponentScaling | None:
    """The scaling a component's deploy asked for (None: none, its copies are fixed), from what peagle recorded:
    its copies, its idle rule (`peagle:scale-to-zero`) and its `--autoscale` (`peagle:copies-autoscale`). An older
    peagle recorded no `--autoscale` of a component, so for scale to zero without that record, where a scalable
    target is registered, the range and target registered stand (`scaling_from_live`)."""
    if idle is None and autoscale is None:
        return None
    if autoscale is None and registered.target is not None:
        return scaling_from_live(component, registered.target, registered.policies, copies=copies)
    return ComponentScaling.planned(component, copies=copies, idle=idle, autoscale=autoscale)


def with_policy_arns(request: ScalingRequest, arns: dict[str, str]) -> dict[str, Any]:
    """An alarm's body with its policy's real ARN in AlarmActions (others: the body as it is)."""
    if request.policy is None:
        return request.body
    return {**request.body, "AlarmActions": [arns[request.policy]]}
