"""An inference component's scaling (`--hosting component`, `--scale-to-zero --idle 15m`), as pure data.

No AWS calls: the plan renders the requests, `lifecycle.components` sends them once the component is InService
and verified, and removes them before the component.

AWS's recipe ("Scale an endpoint to zero instances", SageMaker developer guide): the endpoint config's variant has
`ManagedInstanceScaling` with `MinInstanceCount` 0; each component is registered with Application Auto Scaling on
`sagemaker:inference-component:DesiredCopyCount` (`inference-component/NAME`) with `MinCapacity` 0; a step-scaling
policy on a CloudWatch alarm over `NoCapacityInvocationFailures` brings a copy back when a request finds none.

The idle period (`--idle`) is peagle's own scale-in, not target tracking's: the guide scales in with target
tracking, whose scale-in alarm Application Auto Scaling makes and owns (15 one-minute datapoints, or 90 of 10 s
for the high-resolution concurrency metric: about 15 minutes, not settable), and `ScaleInCooldown` only spaces one
scale-in from the next, it does not say when the first one starts. So `--idle N` is a step-scaling policy
(`ExactCapacity` 0) on a CloudWatch alarm of peagle's that goes to ALARM after N one-minute periods, every one of
them without a request to the component: `FILL(Invocations, 0) + FILL(NoCapacityInvocationFailures, 0) < 1`.
Counting the refused requests too keeps a component that is being woken from being put back to zero. The alarm's
warm-up (`WarmUpConfiguration`, N minutes) keeps it from acting in its first N minutes, when its window still
reaches back before the component existed. CloudWatch allows EvaluationPeriods x Period up to one day: `--idle`
is whole minutes from 1 to 1440. Target tracking (only with `--autoscale`: copies 1..MAX by load) has its scale-in
disabled under scale to zero, so the idle rule alone decides when the component goes to zero.
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
WAKE_POLICY = "peagle-wake-up"
IDLE_POLICY = "peagle-scale-to-zero"
ALARM_PREFIX = "peagle-"  # peagle's alarms: peagle-wake-up-COMPONENT, peagle-idle-COMPONENT (iam_policy scopes them)
PERIOD_S = 60  # SageMaker's invocation metrics are one-minute metrics
MIN_IDLE_MINUTES, MAX_IDLE_MINUTES = 1, 1440  # CloudWatch: EvaluationPeriods x Period <= 86,400 s
DEFAULT_IDLE = "15m"  # as long as target tracking's own scale-in window
STEP_COOLDOWN_S = 60  # the guide's wake-up policy
# in a dry run the alarms name their policy by this until PutScalingPolicy answers its ARN
ARN_PLACEHOLDER = "<PolicyARN of PutScalingPolicy {policy}>"
_IDLE_TAG = re.compile(r"^(\d+)m$")

Step = Literal["scalable_target", "target_tracking", "wake_policy", "wake_alarm", "idle_policy", "idle_alarm"]


class IdleRule(BaseModel):
    """Scale to zero after `minutes` without a request."""

    model_config = ConfigDict(frozen=True)

    minutes: int = Field(ge=MIN_IDLE_MINUTES, le=MAX_IDLE_MINUTES)

    def to_tag(self) -> str:
        """The `peagle:scale-to-zero` tag value, e.g. '15m'."""
        return f"{self.minutes}m"

    @classmethod
    def from_tag(cls, value: str) -> IdleRule:
        match = _IDLE_TAG.match(value.strip())
        if match is None:
            raise ValueError(f"{value!r} is not MINUTESm")
        return cls(minutes=int(match[1]))

    def describe(self) -> str:
        return (f"to zero copies after {_minutes(self.minutes)} without a request (peagle's alarm and step policy); "
                "the first request at zero wakes it (NoCapacityInvocationFailures alarm)")


def _minutes(minutes: int) -> str:
    hours, rest = divmod(minutes, 60)
    if not hours:
        return f"{minutes} min"
    return f"{hours} h" + (f" {rest} min" if rest else "")


def parse_idle(text: str | None) -> IdleRule:
    """`--idle` as an IdleRule: whole minutes from 1 to 1440 (what CloudWatch accepts for one alarm)."""
    from .durations import parse_duration

    value = parse_duration(text if text is not None else DEFAULT_IDLE, flag="--idle")
    seconds = value.total_seconds()
    if seconds % PERIOD_S:
        raise UsageError(f"--idle {text} is not a whole number of minutes",
                         "pass whole minutes, e.g. --idle 15m (CloudWatch's periods for SageMaker's metrics are 60 s)")
    minutes = int(seconds // PERIOD_S)
    if not MIN_IDLE_MINUTES <= minutes <= MAX_IDLE_MINUTES:
        raise UsageError(f"--idle {text} is outside 1m..24h",
                         "pass from --idle 1m to --idle 24h (a CloudWatch alarm looks back at most one day)")
    return IdleRule(minutes=minutes)


def resource_id(component: str) -> str:
    """Application Auto Scaling's id of an inference component."""
    return f"inference-component/{component}"


def wake_alarm_name(component: str) -> str:
    return f"{ALARM_PREFIX}wake-up-{component}"


def idle_alarm_name(component: str) -> str:
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
                "target_tracking": "PutScalingPolicy (target tracking on copies)",
                "wake_policy": "PutScalingPolicy (step scaling: wake up)",
                "wake_alarm": "PutMetricAlarm (wake up: a request found no copy)",
                "idle_policy": "PutScalingPolicy (step scaling: to zero)",
                "idle_alarm": "PutMetricAlarm (idle: no request)"}[self.step]


def _step_policy(step: Step, target: dict[str, str], name: str, *,
                 bound: Literal["MetricIntervalLowerBound", "MetricIntervalUpperBound"], copies: int
                 ) -> ScalingRequest:
    """A step-scaling policy that sets the component's copies to `copies` when its alarm fires: the alarm's
    metric at or above its threshold (`bound` MetricIntervalLowerBound, wake-up) or below it (Upper, idle)."""
    return ScalingRequest(step=step, service="application-autoscaling", operation="PutScalingPolicy", body={
        **target, "PolicyName": name, "PolicyType": "StepScaling",
        "StepScalingPolicyConfiguration": {
            "AdjustmentType": "ExactCapacity", "MetricAggregationType": "Maximum", "Cooldown": STEP_COOLDOWN_S,
            "StepAdjustments": [{bound: 0.0, "ScalingAdjustment": copies}]}})


class ComponentScaling(BaseModel):
    """What a component's copies scale on: Application Auto Scaling between `min_copies` and `max_copies`, target
    tracking with `autoscale`, and with `idle` scale to zero and back."""

    model_config = ConfigDict(frozen=True)

    component: str
    min_copies: int = Field(ge=0)
    max_copies: int = Field(ge=1)
    autoscale: AutoscalePolicy | None = None
    idle: IdleRule | None = None
    wake_copies: int = Field(1, ge=1, description="the copies a wake-up sets: those the deploy started with")

    @property
    def registered(self) -> bool:
        """Whether anything is registered with Application Auto Scaling at all."""
        return self.autoscale is not None or self.idle is not None

    def requests(self, tags: list[dict[str, str]]) -> list[ScalingRequest]:
        """Every request, in order; `tags` go on the alarms. The scalable target is tagged peagle:managed=true, as
        a variant's is: `peagle iam-policy` allows the autoscaling writes only on targets so tagged."""
        if not self.registered:
            return []
        target = {"ServiceNamespace": NAMESPACE, "ResourceId": resource_id(self.component),
                  "ScalableDimension": COPY_DIMENSION}
        found = [ScalingRequest(step="scalable_target", service="application-autoscaling",
                                operation="RegisterScalableTarget",
                                body={**target, "MinCapacity": self.min_copies, "MaxCapacity": self.max_copies,
                                      "Tags": {MANAGED: "true"}})]
        if self.autoscale is not None:
            tracking: dict[str, Any] = {"TargetValue": float(self.autoscale.target), "PredefinedMetricSpecification": {
                "PredefinedMetricType": COPY_METRICS[self.autoscale.metric]}}
            if self.idle is not None:
                tracking["DisableScaleIn"] = True  # the idle rule scales in; target tracking only adds copies
            found.append(ScalingRequest(step="target_tracking", service="application-autoscaling",
                                        operation="PutScalingPolicy", body={
                                            **target, "PolicyName": POLICY_NAME, "PolicyType": "TargetTrackingScaling",
                                            "TargetTrackingScalingPolicyConfiguration": tracking}))
        if self.idle is None:
            return found
        dimension = [{"Name": "InferenceComponentName", "Value": self.component}]
        found += [
            _step_policy("wake_policy", target, WAKE_POLICY, bound="MetricIntervalLowerBound", copies=self.wake_copies),
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
            _step_policy("idle_policy", target, IDLE_POLICY, bound="MetricIntervalUpperBound", copies=0),
            ScalingRequest(step="idle_alarm", service="cloudwatch", operation="PutMetricAlarm", policy=IDLE_POLICY,
                           body={
                "AlarmName": idle_alarm_name(self.component),
                "AlarmDescription": f"peagle: inference component {self.component} got no request for "
                                    f"{_minutes(self.idle.minutes)}; sets its copies to 0 (step policy {IDLE_POLICY})",
                "ActionsEnabled": True, "AlarmActions": [placeholder(IDLE_POLICY)],
                "Metrics": [
                    {"Id": "requests", "Expression": "FILL(served, 0) + FILL(refused, 0)",
                     "Label": "requests (served, and refused for want of a copy)", "ReturnData": True},
                    *({"Id": key, "ReturnData": False, "MetricStat": {"Metric": {
                        "Namespace": METRICS_NAMESPACE, "MetricName": metric, "Dimensions": dimension},
                        "Period": PERIOD_S, "Stat": "Sum"}}
                      for key, metric in (("served", INVOCATIONS_METRIC), ("refused", NO_CAPACITY_METRIC)))],
                "EvaluationPeriods": self.idle.minutes, "DatapointsToAlarm": self.idle.minutes,
                "Threshold": 1.0, "ComparisonOperator": "LessThanThreshold", "TreatMissingData": "breaching",
                "WarmUpConfiguration": {"WarmUpPeriodDurationInMinutes": self.idle.minutes,
                                        "OnlyStartEvaluatingAfterWarmUpPeriodEnds": True},
                "Tags": tags}),
        ]
        return found


def with_policy_arns(request: ScalingRequest, arns: dict[str, str]) -> dict[str, Any]:
    """An alarm's body with its policy's real ARN in AlarmActions (others: the body as it is)."""
    if request.policy is None:
        return request.body
    return {**request.body, "AlarmActions": [arns[request.policy]]}
