"""What an older peagle (before issue 44) made for a `--scale-to-zero` component, its bodies verbatim: no target
tracking (or one with `DisableScaleIn` under `--autoscale`), the wake-up policy and alarm (the same as today's),
and its own idle rule: a step policy `peagle-scale-to-zero` (`ExactCapacity` 0) on a metric-math alarm
`peagle-idle-NAME`, `FILL(Invocations, 0) + FILL(NoCapacityInvocationFailures, 0) < 1` for N one-minute periods,
with a warm-up of N minutes. Tests turn a component this peagle deployed into one an older peagle made
(`make_legacy`), to show that `update` and `recover` move it to AWS's recipe and that `cleanup` removes it whole;
the emulator still evaluates such an alarm (alarm_emulation's metric math), so the old rule's behaviour is tested
too. A plain function, reusable by a contract test against a real account."""

from __future__ import annotations

from typing import Any

LEGACY_POLICY = "peagle-scale-to-zero"
TRACKING = "peagle-target-tracking"


def legacy_alarm(component: str) -> str:
    return f"peagle-idle-{component}"


def _target(component: str) -> dict[str, str]:
    return {"ServiceNamespace": "sagemaker", "ResourceId": f"inference-component/{component}",
            "ScalableDimension": "sagemaker:inference-component:DesiredCopyCount"}


def legacy_idle_alarm_body(component: str, minutes: int, policy_arn: str,
                           tags: list[dict[str, str]]) -> dict[str, Any]:
    dimension = [{"Name": "InferenceComponentName", "Value": component}]
    return {
        "AlarmName": legacy_alarm(component),
        "AlarmDescription": f"peagle: inference component {component} got no request for {minutes} min; sets its "
                            f"copies to 0 (step policy {LEGACY_POLICY})",
        "ActionsEnabled": True, "AlarmActions": [policy_arn],
        "Metrics": [
            {"Id": "requests", "Expression": "FILL(served, 0) + FILL(refused, 0)",
             "Label": "requests (served, and refused for want of a copy)", "ReturnData": True},
            *({"Id": key, "ReturnData": False, "MetricStat": {"Metric": {
                "Namespace": "AWS/SageMaker", "MetricName": metric, "Dimensions": dimension},
                "Period": 60, "Stat": "Sum"}}
              for key, metric in (("served", "Invocations"), ("refused", "NoCapacityInvocationFailures")))],
        "EvaluationPeriods": minutes, "DatapointsToAlarm": minutes,
        "Threshold": 1.0, "ComparisonOperator": "LessThanThreshold", "TreatMissingData": "breaching",
        "WarmUpConfiguration": {"WarmUpPeriodDurationInMinutes": minutes,
                                "OnlyStartEvaluatingAfterWarmUpPeriodEnds": True},
        "Tags": tags}


def make_legacy(aas: Any, cloudwatch: Any, component: str, *, minutes: int = 20,
                tags: list[dict[str, str]] | None = None, autoscale_target: float | None = None) -> None:
    """The component's scaling as an older peagle left it: this peagle's target tracking removed (an older one had
    none without --autoscale; with `autoscale_target`, one with scale-in disabled), the older idle step policy and
    its metric-math alarm added (tagged peagle:managed, as it tagged them). The scalable target and the wake-up
    policy and alarm stay: they are the same in both."""
    target = _target(component)
    names = [p["PolicyName"] for p in aas.describe_scaling_policies(**target)["ScalingPolicies"]]
    if TRACKING in names:
        aas.delete_scaling_policy(PolicyName=TRACKING, **target)
    if autoscale_target is not None:
        aas.put_scaling_policy(**target, PolicyName=TRACKING, PolicyType="TargetTrackingScaling",
                               TargetTrackingScalingPolicyConfiguration={
                                   "TargetValue": autoscale_target, "DisableScaleIn": True,
                                   "PredefinedMetricSpecification": {"PredefinedMetricType":
                                       "SageMakerInferenceComponentConcurrentRequestsPerCopyHighResolution"}})
    arn = aas.put_scaling_policy(**target, PolicyName=LEGACY_POLICY, PolicyType="StepScaling",
                                 StepScalingPolicyConfiguration={
                                     "AdjustmentType": "ExactCapacity", "MetricAggregationType": "Maximum",
                                     "Cooldown": 60,
                                     "StepAdjustments": [{"MetricIntervalUpperBound": 0.0,
                                                          "ScalingAdjustment": 0}]})["PolicyARN"]
    cloudwatch.put_metric_alarm(**legacy_idle_alarm_body(
        component, minutes, arn, tags or [{"Key": "peagle:managed", "Value": "true"}]))
