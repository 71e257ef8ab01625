"""Application Auto Scaling on a peagle endpoint's production variant: apply, remove, read.

- `apply_autoscaling(aas, endpoint_name, variant, policy)`: RegisterScalableTarget, then a target tracking
  PutScalingPolicy. Deploy calls it once the endpoint is InService and verified; `peagle update` calls it after
  an update (SageMaker refuses an UpdateEndpoint that changes the instance type of a registered variant, so
  an update removes autoscaling first and applies it again once InService).
- `remove_autoscaling(aas, endpoint_name, variants)`: deletes the variant's scaling policies, then deregisters
  its scalable target. Teardown calls it before deleting an endpoint peagle manages, never for another.
- `read_autoscaling(aas, described)`: what `peagle status` shows; a failed read is 'unknown', never an
  endpoint failure.

`aas` is `session.client("application-autoscaling")` (aws.py builds every client); AWS failures are classified
by `aws.translate_error` like every other call.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field

from ..autoscale import NAMESPACE, SCALABLE_DIMENSION, AutoscalePolicy, resource_id
from ..aws import error_code, error_message, is_not_found, translate_error
from .outcome import Outcome  # not from teardown, which imports this module: no import circle

SERVICE = "application-autoscaling"
_METRIC_NAMES = {"SageMakerVariantConcurrentRequestsPerModelHighResolution": "concurrency",
                 "SageMakerVariantInvocationsPerInstance": "invocations"}


class Applied(BaseModel):
    """What apply_autoscaling registered."""

    resource_id: str
    scalable_target_arn: str | None = None
    policy_name: str
    policy_arn: str | None = None
    policy: AutoscalePolicy


class AutoscalingStatus(BaseModel):
    """One endpoint's autoscaling as Application Auto Scaling and SageMaker report it now."""

    state: Literal["on", "off", "unknown"]
    min_capacity: int | None = None
    max_capacity: int | None = None
    metric: str | None = Field(default=None, description="the policy's predefined metric type")
    target: float | None = None
    desired_instances: int | None = Field(default=None, description="the variant's DesiredInstanceCount")
    current_instances: int | None = Field(default=None, description="the variant's CurrentInstanceCount")
    detail: str | None = Field(default=None, description="why the state is unknown")
    tagged: bool = Field(default=False, description="the endpoint's peagle:autoscale tag says peagle registered it")

    @property
    def worth_saying(self) -> bool:
        """On, or unknown where peagle registered it; an unreadable 'probably off' stays quiet (an account that
        never used autoscaling may not allow reading it)."""
        return self.state == "on" or (self.state == "unknown" and self.tagged)

    def summary(self) -> str:
        now = (f"; desired {self.desired_instances}, running {self.current_instances}"
               if self.desired_instances is not None else "")
        if self.state == "unknown":
            return f"autoscaling unknown ({self.detail}){now}"
        if self.state == "off":
            return f"autoscaling off{now}"
        metric = _METRIC_NAMES.get(self.metric or "", self.metric or "no target tracking policy")
        target = "" if self.target is None else f"={self.target:g}"
        return f"autoscaling {self.min_capacity}-{self.max_capacity} instances on {metric}{target}{now}"


def apply_autoscaling(aas: Any, endpoint_name: str, variant: str, policy: AutoscalePolicy) -> Applied:
    """Register the variant as a scalable target and attach the target tracking policy (both idempotent:
    registering again updates MIN/MAX, putting the same policy name again replaces it)."""
    registered = aas.register_scalable_target(**policy.register_request(endpoint_name, variant))
    body = policy.policy_request(endpoint_name, variant)
    put = aas.put_scaling_policy(**body)
    return Applied(resource_id=resource_id(endpoint_name, variant),
                   scalable_target_arn=registered.get("ScalableTargetARN"), policy_name=body["PolicyName"],
                   policy_arn=put.get("PolicyARN"), policy=policy)


def variants_of(described: dict[str, Any] | None, default: str) -> list[str]:
    """The variant names of a DescribeEndpoint answer (plus `default`, which peagle always uses)."""
    names = [v["VariantName"] for v in (described or {}).get("ProductionVariants", []) if v.get("VariantName")]
    return names + [default] if default not in names else names


def _not_registered(exc: BaseException) -> bool:
    """Application Auto Scaling's 'nothing to delete': ObjectNotFoundException, or a ValidationException 'No ...'."""
    return is_not_found(exc) or error_code(exc) in ("ObjectNotFoundException",) or (
        error_code(exc) == "ValidationException" and error_message(exc).lower().startswith("no scal"))


def _failed(kind: str, name: str, exc: BaseException) -> Outcome:
    error = translate_error(exc)
    if error is None:
        raise exc
    return Outcome(kind=kind, name=name, result="failed", reason=error.one_line(),  # type: ignore[arg-type]
                   exit_code=int(error.exit_code))


def remove_autoscaling(aas: Any, endpoint_name: str, variants: list[str], *, expected: bool = True) -> list[Outcome]:
    """Delete the scaling policies and deregister the scalable targets of `endpoint_name`'s `variants`.

    One Outcome per policy and target found. When the targets cannot be read, that is a failed outcome if
    autoscaling is `expected` (the endpoint's peagle:autoscale tag says peagle registered it), otherwise nothing:
    an account that never used Application Auto Scaling may not allow reading it, and DeleteEndpoint itself
    deregisters a target it finds when the caller may."""
    ids = [resource_id(endpoint_name, v) for v in variants]
    try:
        targets = [t for page in aas.get_paginator("describe_scalable_targets").paginate(
            ServiceNamespace=NAMESPACE, ResourceIds=ids, ScalableDimension=SCALABLE_DIMENSION)
            for t in page.get("ScalableTargets", [])]
    except Exception as exc:  # noqa: BLE001 - an AWS failure becomes an outcome; anything else raises
        if translate_error(exc) is None:
            raise
        return [_failed("scalable_target", ids[0], exc)] if expected else []
    outcomes: list[Outcome] = []
    for target in targets:
        rid = target["ResourceId"]
        try:
            policies = [p for page in aas.get_paginator("describe_scaling_policies").paginate(
                ServiceNamespace=NAMESPACE, ResourceId=rid, ScalableDimension=SCALABLE_DIMENSION)
                for p in page.get("ScalingPolicies", [])]
        except Exception as exc:  # noqa: BLE001
            outcomes.append(_failed("scaling_policy", rid, exc))
            policies = []
        for policy in policies:
            outcomes.append(_delete(aas.delete_scaling_policy, "scaling_policy", policy["PolicyName"],
                                    PolicyName=policy["PolicyName"], ServiceNamespace=NAMESPACE, ResourceId=rid,
                                    ScalableDimension=SCALABLE_DIMENSION))
        outcomes.append(_delete(aas.deregister_scalable_target, "scalable_target", rid, ServiceNamespace=NAMESPACE,
                                ResourceId=rid, ScalableDimension=SCALABLE_DIMENSION))
    return outcomes


def _delete(call: Any, kind: str, name: str, **request: Any) -> Outcome:
    try:
        call(**request)
    except Exception as exc:  # noqa: BLE001
        if _not_registered(exc):
            return Outcome(kind=kind, name=name, result="already gone")  # type: ignore[arg-type]
        return _failed(kind, name, exc)
    return Outcome(kind=kind, name=name, result="deleted")  # type: ignore[arg-type]


def read_autoscaling(aas: Any, described: dict[str, dict[str, Any]]) -> dict[str, AutoscalingStatus]:
    """Autoscaling of each endpoint in `described` (name -> DescribeEndpoint answer), read with two listings
    for all of them. A failed read makes every state 'unknown' (with the AWS error's one line)."""
    counts = {name: _counts(d) for name, d in described.items()}
    try:
        targets = [t for page in aas.get_paginator("describe_scalable_targets").paginate(
            ServiceNamespace=NAMESPACE, ScalableDimension=SCALABLE_DIMENSION) for t in page.get("ScalableTargets", [])]
        policies = [p for page in aas.get_paginator("describe_scaling_policies").paginate(
            ServiceNamespace=NAMESPACE) for p in page.get("ScalingPolicies", [])] if targets else []
    except Exception as exc:  # noqa: BLE001
        error = translate_error(exc)
        if error is None:
            raise
        return {name: AutoscalingStatus(state="unknown", detail=error.one_line(), **counts[name]) for name in described}
    result: dict[str, AutoscalingStatus] = {}
    for name in described:
        mine = [t for t in targets if t.get("ResourceId", "").startswith(f"endpoint/{name}/variant/")]
        if not mine:
            result[name] = AutoscalingStatus(state="off", **counts[name])
            continue
        target = mine[0]
        tracking = next((p.get("TargetTrackingScalingPolicyConfiguration") for p in policies
                         if p.get("ResourceId") == target["ResourceId"]
                         and p.get("TargetTrackingScalingPolicyConfiguration")), None) or {}
        metric = (tracking.get("PredefinedMetricSpecification") or {}).get("PredefinedMetricType")
        result[name] = AutoscalingStatus(state="on", min_capacity=target.get("MinCapacity"),
                                         max_capacity=target.get("MaxCapacity"), metric=metric,
                                         target=tracking.get("TargetValue"), **counts[name])
    return result


def _counts(described: dict[str, Any]) -> dict[str, int | None]:
    variants = described.get("ProductionVariants") or []

    def total(key: str) -> int | None:
        values = [v.get(key) for v in variants]
        return sum(values) if values and all(isinstance(x, int) for x in values) else None

    return {"desired_instances": total("DesiredInstanceCount"), "current_instances": total("CurrentInstanceCount")}
