"""The autoscaling a user asks for (`--autoscale MIN:MAX --target-concurrency N`), as one validated model.

Pure data, no AWS calls: the plan renders the two Application Auto Scaling requests it implies, the
lifecycle (`lifecycle.autoscaling`) sends them after the endpoint is InService and verified.

Metric: target tracking on SageMaker's concurrency metric, `SageMakerVariantConcurrentRequestsPerModelHighResolution`
(in-flight requests per model container, i.e. per instance here, reported every 10 s). An LLM request streams
for seconds to minutes, so requests per minute (`SageMakerVariantInvocationsPerInstance`, 1-minute resolution)
says little about how loaded a vLLM server is, while concurrency is exactly the axis `peagle bench` measures
throughput and latency on: pick N from the bench table. The concurrency metric is used when the installed
botocore's Application Auto Scaling model lists it (any recent botocore); otherwise, or where an account
or region refuses it, `--target-invocations N` (invocations per instance per minute) is the documented fallback.
"""

from __future__ import annotations

import math
import re
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from .errors import UsageError
from .tag_keys import MANAGED

NAMESPACE = "sagemaker"
SCALABLE_DIMENSION = "sagemaker:variant:DesiredInstanceCount"
CONCURRENCY_METRIC = "SageMakerVariantConcurrentRequestsPerModelHighResolution"
INVOCATIONS_METRIC = "SageMakerVariantInvocationsPerInstance"
METRICS = {"concurrency": CONCURRENCY_METRIC, "invocations": INVOCATIONS_METRIC}
POLICY_NAME = "peagle-target-tracking"
MAX_CAPACITY = 100  # the same guard as --instance-count (inputs.MAX_INSTANCE_COUNT)
_RANGE_RE = re.compile(r"^\s*(\d+)\s*:\s*(\d+)\s*$")
_TAG_RE = re.compile(r"^(\d+):(\d+) (concurrency|invocations)=([0-9.eE+-]+)$")

Metric = Literal["concurrency", "invocations"]


class AutoscalePolicy(BaseModel):
    """Target tracking on one production variant: keep `metric` near `target`, between min and max instances."""

    model_config = ConfigDict(frozen=True)

    min_capacity: int = Field(ge=1, le=MAX_CAPACITY)
    max_capacity: int = Field(ge=1, le=MAX_CAPACITY)
    metric: Metric = "concurrency"
    target: float = Field(gt=0, description="concurrent requests per instance, or invocations per instance per minute")

    @model_validator(mode="after")
    def _ordered(self) -> AutoscalePolicy:
        if self.min_capacity > self.max_capacity:
            raise ValueError(f"min_capacity {self.min_capacity} is above max_capacity {self.max_capacity}")
        return self

    @property
    def predefined_metric(self) -> str:
        return METRICS[self.metric]

    def describe(self) -> str:
        unit = "concurrent requests per instance" if self.metric == "concurrency" else "invocations per instance per minute"
        return f"{self.min_capacity}-{self.max_capacity} instances, target {self.target:g} {unit} ({self.predefined_metric})"

    def to_tag(self) -> str:
        """The `peagle:autoscale` tag value, e.g. '1:4 concurrency=8' (characters AWS tags allow)."""
        return f"{self.min_capacity}:{self.max_capacity} {self.metric}={self.target:g}"

    @classmethod
    def from_tag(cls, value: str) -> AutoscalePolicy:
        """Parse a `peagle:autoscale` tag value; ValueError when it is not one peagle writes."""
        match = _TAG_RE.match(value.strip())
        if match is None:
            raise ValueError(f"{value!r} is not MIN:MAX METRIC=TARGET")
        return cls(min_capacity=int(match[1]), max_capacity=int(match[2]), metric=match[3],  # type: ignore[arg-type]
                   target=float(match[4]))

    def register_request(self, endpoint_name: str, variant: str) -> dict:
        """RegisterScalableTarget's body. The target is tagged peagle:managed=true: `peagle iam-policy` allows the
        autoscaling writes only on targets so tagged (AWS applies the tags when the registration creates it)."""
        return {"ServiceNamespace": NAMESPACE, "ResourceId": resource_id(endpoint_name, variant),
                "ScalableDimension": SCALABLE_DIMENSION, "MinCapacity": self.min_capacity,
                "MaxCapacity": self.max_capacity, "Tags": {MANAGED: "true"}}

    def policy_request(self, endpoint_name: str, variant: str) -> dict:
        """PutScalingPolicy's body (target tracking; cooldowns are AWS's defaults for SageMaker variants)."""
        return {"PolicyName": POLICY_NAME, "ServiceNamespace": NAMESPACE,
                "ResourceId": resource_id(endpoint_name, variant), "ScalableDimension": SCALABLE_DIMENSION,
                "PolicyType": "TargetTrackingScaling",
                "TargetTrackingScalingPolicyConfiguration": {
                    "TargetValue": float(self.target),
                    "PredefinedMetricSpecification": {"PredefinedMetricType": self.predefined_metric}}}


def resource_id(endpoint_name: str, variant: str) -> str:
    """Application Auto Scaling's id of a SageMaker production variant."""
    return f"endpoint/{endpoint_name}/variant/{variant}"


def metric_known(metric_type: str) -> bool:
    """Whether the installed botocore's Application Auto Scaling model lists `metric_type` (no AWS call)."""
    from .botocore_facts import service_model

    model = service_model("application-autoscaling")
    return metric_type in (model.shape_for("MetricType").enum or [])


def parse_autoscale(autoscale: str | None, *, target_concurrency: float | None = None,
                    target_invocations: float | None = None, instance_count: int | None = None,
                    wait: bool = True, component: bool = False) -> tuple[AutoscalePolicy | None, int]:
    """The flags as (policy or None, the instance count to start with); one UsageError per mistake. `component`:
    the model is hosted as an inference component (`--hosting component`), which scales to zero only with
    `--scale-to-zero`.

    The endpoint starts with --instance-count instances, which must lie within MIN..MAX (SageMaker would move
    it into the range at registration anyway); without --instance-count it starts at MIN."""
    targets = [t for t in (target_concurrency, target_invocations) if t is not None]
    if autoscale is None:
        if targets:
            flag = "--target-concurrency" if target_concurrency is not None else "--target-invocations"
            raise UsageError(f"{flag} only applies with --autoscale", "add --autoscale MIN:MAX, e.g. --autoscale 1:4")
        return None, 1 if instance_count is None else instance_count
    match = _RANGE_RE.match(autoscale)
    if match is None:
        raise UsageError(f"--autoscale {autoscale!r} is not MIN:MAX", "pass e.g. --autoscale 1:4")
    low, high = int(match[1]), int(match[2])
    if low < 1 and component:
        raise UsageError(f"--autoscale minimum must be at least 1, got {low} (an inference component scales to zero "
                         "with --scale-to-zero)", f"pass --autoscale 1:{max(high, 1)}, and add --scale-to-zero for "
                         "zero copies when idle")
    if low < 1:
        raise UsageError(f"--autoscale minimum must be at least 1, got {low}",
                         "pass e.g. --autoscale 1:4 (an instance-based endpoint cannot scale to zero; --scale-to-zero "
                         "hosts the model as an inference component that does)")
    if low > high:
        raise UsageError(f"--autoscale {autoscale.strip()} has its minimum above its maximum",
                         f"pass MIN:MAX with MIN <= MAX, e.g. --autoscale {high}:{low}")
    if high > MAX_CAPACITY:
        raise UsageError(f"--autoscale maximum {high} is above peagle's limit of {MAX_CAPACITY}",
                         f"pass a maximum of at most {MAX_CAPACITY}")
    if not targets:
        raise UsageError("--autoscale needs a target",
                         "add --target-concurrency N (concurrent requests per instance, e.g. from peagle bench)")
    if len(targets) > 1:
        raise UsageError("--target-concurrency and --target-invocations are two metrics; a policy tracks one",
                         "pass only one of them")
    target = targets[0]
    flag = "--target-concurrency" if target_concurrency is not None else "--target-invocations"
    if not math.isfinite(target) or target <= 0:
        raise UsageError(f"{flag} must be a positive number, got {target:g}", f"pass e.g. {flag} 8")
    metric: Metric = "concurrency" if target_concurrency is not None else "invocations"
    if not metric_known(METRICS[metric]):
        import botocore

        raise UsageError(f"the installed botocore {botocore.__version__} does not know the metric {METRICS[metric]}",
                         "upgrade boto3 (pip install -U boto3) or scale on --target-invocations PER_MINUTE")
    if not wait:
        raise UsageError("--autoscale is registered once the endpoint is InService, so it needs the deploy to wait",
                         "drop --no-wait")
    policy = AutoscalePolicy(min_capacity=low, max_capacity=high, metric=metric, target=target)
    count = low if instance_count is None else instance_count
    check_count_within(count, policy, where="--autoscale")
    return policy, count


def check_count_within(count: int, policy: AutoscalePolicy, *, where: str) -> None:
    """An instance count outside the autoscaling range is refused: by deploy (`--autoscale`) and by update (the
    endpoint's registered range), since Application Auto Scaling would move it back into the range at once."""
    low, high = policy.min_capacity, policy.max_capacity
    if not low <= count <= high:
        raise UsageError(f"--instance-count {count} is outside {where} {low}:{high}",
                         f"pass --instance-count between {low} and {high}, or leave it out to start at {low}"
                         if where.startswith("--") else
                         f"pass --instance-count between {low} and {high}, or widen the range with it: --autoscale "
                         f"{min(low, count)}:{max(high, count)} --target-{policy.metric} {policy.target:g}")
