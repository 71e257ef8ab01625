"""Application Auto Scaling for the emulator: what moto (5.2) lacks for SageMaker variants and inference components.

moto already serves `application-autoscaling` in both modes (server mode routes it by the request's signing
name, so AWS_ENDPOINT_URL alone is enough) and accepts the `sagemaker` namespace. Added here:
- fault injection, gates and delays for its actions too (`emulator.fail("RegisterScalableTarget", ...)`);
- RegisterScalableTarget refuses a SageMaker endpoint or variant that does not exist, and moves the variant's
  desired instance count into MIN..MAX (AWS does; moto registers anything and changes nothing);
- PutScalingPolicy needs a registered target (ObjectNotFoundException otherwise) and, for a variant's instance
  count, one of the SageMaker variant metrics;
- DeregisterScalableTarget deletes the target's policies (AWS does; moto keeps them);
- DeleteEndpoint deregisters the endpoint's targets, as SageMaker does when the caller may (so a tool that
  forgets to deregister is caught by looking at the order of `emulator.calls`, not by leftovers);
- UpdateEndpoint (where the emulator serves it) is refused when it would change the instance type of a variant
  registered for autoscaling, as SageMaker refuses it ("Update endpoints that use auto scaling" in its guide);
- inference components (`component_emulation`), each found in its own region: the
  `sagemaker:inference-component:DesiredCopyCount` dimension on `inference-component/NAME` (moto refuses it), min 0
  allowed, the component must exist, its desired copy count moved into MIN..MAX at registration; target-tracking
  policies only on the component metrics, with the two CloudWatch alarms Application Auto Scaling creates for them
  (`TargetTracking-...-AlarmHigh/-AlarmLow`, deleted with the policy; its documentation on target tracking: the
  policy makes and owns them); scale-in (`target_tracking_events`): with no request the per-copy metric is 0 (or
  missing: *assumed* to count as low), so the AlarmLow alarm goes to ALARM after its datapoints (90 of 10 s for the
  high-resolution metric, AWS's blog "Unlock cost savings with the new scale down to zero feature in SageMaker
  Inference"; 15 of 60 s for the other, target tracking's documented scale-in alarm), counted from the last request
  (served or refused), scale-out or copy in service, and Application Auto Scaling sets the copies to the target's
  minimum (0 with MinCapacity 0: AWS's scale-to-zero recipe; that it reaches 0 from a metric of 0 is the recipe's,
  the timing the sources' above), no sooner than ScaleInCooldown (default 300 s) after the previous scale-in; a
  request (or a scale-out) puts the alarm back to OK; `components.scale_in_acts = False` leaves the alarm in ALARM
  and the copies as they are (for `peagle status`'s warning); scale-out by load is not modelled (the emulator has no
  load); step-scaling policies run when an alarm whose action is their ARN goes to (or stays in) ALARM
  (`run_policy`, called by `alarm_emulation`), within their cooldown;
- RegisterScalableTarget keeps the `Tags` of a registration that creates the target (moto drops them; botocore's
  model: "Use this parameter to tag the scalable target when it is created. To tag an existing scalable target, use
  the TagResource operation"), on `target.tags`: what a policy's `aws:ResourceTag` reads (`iam_enforcement`);
- DescribeScalingActivities (moto has none) for inference components: each copy-count change Application Auto
  Scaling made (a policy, or a registration that moved the count into its range), from the emulator's activity log,
  "Setting desired copy count to N." (that wording is *assumed*; the variant's is "instance count").

`autoscaling_patches(emulator)` is added to the emulator's own patches (see `SageMakerEmulator._patches`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any
from unittest import mock

from .patching import stacked

VARIANT_METRICS = {"SageMakerVariantInvocationsPerInstance", "SageMakerVariantConcurrentRequestsPerModelHighResolution"}
DIMENSION = "sagemaker:variant:DesiredInstanceCount"
IC_DIMENSION = "sagemaker:inference-component:DesiredCopyCount"
IC_PREFIX = "inference-component/"
# predefined metric -> (CloudWatch metric, AlarmHigh (period s, periods), AlarmLow (period s, periods)) of the alarms
# AWS creates; the low alarm of the high-resolution metric is 90 periods of 10 s (AWS's blog "Unlock cost savings with
# the new scale down to zero feature"), the other target tracking's documented 15 one-minute datapoints
IC_METRICS = {
    "SageMakerInferenceComponentConcurrentRequestsPerCopyHighResolution": ("ConcurrentRequestsPerCopy", (60, 1),
                                                                           (10, 90)),
    "SageMakerInferenceComponentInvocationsPerCopy": ("InvocationsPerCopy", (60, 3), (60, 15)),
}
IDLE_WINDOW_S = 900.0  # both low alarms above: 15 minutes without invocations before target tracking scales in
SCALE_IN_COOLDOWN_S = 300.0  # target tracking's ScaleInCooldown when the policy names none (SageMaker's default)
STEP_COOLDOWN_S = 300.0  # a step policy's Cooldown when it names none


def _error(code: str, message: str) -> Exception:
    from moto.core.exceptions import JsonRESTError

    return JsonRESTError(code, message)


def _endpoint_and_variant(resource_id: str) -> tuple[str, str] | None:
    parts = resource_id.split("/")
    if len(parts) == 4 and parts[0] == "endpoint" and parts[2] == "variant":
        return parts[1], parts[3]
    return None


def _variant(account: str, region: str, resource_id: str) -> dict[str, Any]:
    """The SageMaker variant a resource id names (ValidationException when there is none)."""
    from moto.sagemaker.models import sagemaker_backends

    names = _endpoint_and_variant(resource_id)
    endpoint = sagemaker_backends[account][region].endpoints.get(names[0]) if names else None
    variant = next((v for v in (endpoint.production_variants if endpoint else [])
                    if v.get("VariantName") == names[1]), None) if names else None
    if variant is None:
        raise _error("ValidationException", f"SageMaker has no endpoint variant {resource_id} (emulated)")
    return variant


def autoscaling_patches(emulator: Any, call_action: Callable[[Any], Any]) -> list[Any]:
    """`call_action`: the emulator's own wrapper of moto's BaseResponse.call_action (faults, gates, delays)."""
    from moto.applicationautoscaling import models as aas_models
    from moto.applicationautoscaling.responses import ApplicationAutoScalingResponse
    from moto.sagemaker import models as sm_models
    from moto.sagemaker.responses import SageMakerResponse

    backend_cls = aas_models.ApplicationAutoscalingBackend

    def register(original: Any) -> Any:
        def wrapped(backend: Any, namespace: str, r_id: str, dimension: str, min_capacity: Any, max_capacity: Any,
                    *args: Any, **kwargs: Any) -> Any:
            variant = component = None
            if namespace == "sagemaker" and dimension == DIMENSION:
                variant = _variant(backend.account_id, backend.region_name, r_id)
            if namespace == "sagemaker" and dimension == IC_DIMENSION:
                component = emulator.components.peek(r_id.removeprefix(IC_PREFIX), backend.region_name)
                if component is None or component["status"] == "Deleting":
                    raise _error("ValidationException", f"SageMaker has no inference component {r_id} (emulated)")
            target = original(backend, namespace, r_id, dimension, min_capacity, max_capacity, *args, **kwargs)
            if variant is not None:  # AWS moves the capacity into the new range at once
                desired = variant.get("DesiredInstanceCount") or variant.get("CurrentInstanceCount") or 1
                clamped = max(target.min_capacity or desired, min(target.max_capacity or desired, desired))
                variant["DesiredInstanceCount"] = variant["CurrentInstanceCount"] = clamped
            if component is not None:
                desired = component["desired"]
                low = desired if target.min_capacity is None else target.min_capacity
                high = desired if target.max_capacity is None else target.max_capacity
                if not low <= desired <= high:
                    emulator.components.set_desired(r_id.removeprefix(IC_PREFIX), max(low, min(high, desired)),
                                                    "RegisterScalableTarget", region=backend.region_name)
            return target
        return wrapped

    def put_policy(original: Any) -> Any:
        def wrapped(backend: Any, policy_name: str, service_namespace: str, resource_id: str,
                    scalable_dimension: str, policy_body: dict[str, Any], policy_type: str | None) -> Any:
            if not backend._scalable_target_exists(resource_id, scalable_dimension):
                raise _error("ObjectNotFoundException", f"No scalable target registered for service namespace: "
                             f"{service_namespace}, resource ID: {resource_id}, scalable dimension: {scalable_dimension}")
            metric = ((policy_body or {}).get("PredefinedMetricSpecification") or {}).get("PredefinedMetricType")
            allowed = {DIMENSION: VARIANT_METRICS, IC_DIMENSION: set(IC_METRICS)}.get(scalable_dimension)
            if (allowed is not None and policy_type == "TargetTrackingScaling" and metric is not None
                    and metric not in allowed):
                raise _error("ValidationException", f"PredefinedMetricType {metric} does not apply to "
                             f"{scalable_dimension} (emulated)")
            return original(backend, policy_name, service_namespace, resource_id, scalable_dimension, policy_body,
                            policy_type)
        return wrapped

    def deregister(original: Any) -> Any:
        def wrapped(backend: Any, namespace: str, r_id: str, dimension: str) -> None:
            original(backend, namespace, r_id, dimension)
            for key, policy in list(backend.policies.items()):  # AWS deletes the target's policies with it
                if (policy.service_namespace, policy.resource_id, policy.scalable_dimension) == (namespace, r_id,
                                                                                                 dimension):
                    policy.delete_alarms(backend.account_id, backend.region_name)  # as DeleteScalingPolicy does
                    del backend.policies[key]
        return wrapped

    def delete_endpoint(original: Any) -> Any:
        def wrapped(sm_backend: Any, endpoint_name: str) -> Any:
            result = original(sm_backend, endpoint_name)
            aas = aas_models.applicationautoscaling_backends[sm_backend.account_id][sm_backend.region_name]
            for dimension, targets in list(aas.targets.items()):
                for r_id in [r for r in targets if r.startswith(f"endpoint/{endpoint_name}/variant/")]:
                    aas.deregister_scalable_target("sagemaker", r_id, dimension)
            return result
        return wrapped

    def update_endpoint(original: Any) -> Any:
        def wrapped(response_self: Any) -> Any:
            import json

            body = json.loads(response_self.body or "{}")
            sm_backend = response_self.sagemaker_backend
            endpoint = sm_backend.endpoints.get(body.get("EndpointName", ""))
            config = sm_backend.endpoint_configs.get(body.get("EndpointConfigName", ""))
            if endpoint is not None and config is not None:
                aas = aas_models.applicationautoscaling_backends[sm_backend.account_id][sm_backend.region_name]
                new_types = {v.get("VariantName"): v.get("InstanceType") for v in config.production_variants}
                old_config = sm_backend.endpoint_configs.get(endpoint.endpoint_config_name)
                for variant in (old_config.production_variants if old_config else []):
                    name = variant.get("VariantName")
                    registered = f"endpoint/{endpoint.endpoint_name}/variant/{name}" in aas.targets.get(DIMENSION, {})
                    if registered and new_types.get(name) != variant.get("InstanceType"):
                        raise _error("ValidationException", f"variant {name} of {endpoint.endpoint_name} is registered "
                                     "for autoscaling: deregister it before changing its instance type (emulated)")
            return original(response_self)
        return wrapped

    def settled_call(response_self: Any) -> Any:
        emulator.components.on_call()
        return call_action(response_self)

    def describe_scaling_activities(response_self: Any) -> str:
        import json

        body = json.loads(response_self.body or "{}")
        return json.dumps({"ScalingActivities": scaling_activities(emulator.components, body, response_self.region)})

    return [
        mock.patch.object(ApplicationAutoScalingResponse, "call_action", settled_call),
        mock.patch.object(ApplicationAutoScalingResponse, "describe_scaling_activities", describe_scaling_activities,
                          create=True),
        *_dimension_patches(),
        stacked(aas_models.FakeApplicationAutoscalingPolicy, "create_alarms", _with_component_alarms),
        stacked(backend_cls, "register_scalable_target", register),
        stacked(ApplicationAutoScalingResponse, "register_scalable_target", _keeping_tags),
        stacked(backend_cls, "put_scaling_policy", put_policy),
        stacked(backend_cls, "deregister_scalable_target", deregister),
        stacked(sm_models.SageMakerModelBackend, "delete_endpoint", delete_endpoint),
        stacked(SageMakerResponse, "update_endpoint", update_endpoint),  # the emulator's own, where it has one
    ]


def _keeping_tags(original: Any) -> Any:
    """The tags of a registration that creates its target, kept on it (module docstring)."""
    def wrapped(response_self: Any) -> Any:
        backend = response_self.applicationautoscaling_backend
        r_id, dimension = response_self._get_param("ResourceId"), response_self._get_param("ScalableDimension")
        new = not backend._scalable_target_exists(r_id, dimension)
        answer = original(response_self)
        if new and backend._scalable_target_exists(r_id, dimension):
            backend.targets[dimension][r_id].tags = dict(response_self._get_param("Tags") or {})
        return answer
    return wrapped


def _dimension_patches() -> list[Any]:
    """moto's list of scalable dimensions, which predates inference components, with theirs added."""
    from enum import Enum

    from moto.applicationautoscaling import models as aas_models
    from moto.applicationautoscaling import responses as aas_responses

    known = {member.name: member.value for member in aas_models.ScalableDimensionValueSet}
    if IC_DIMENSION in known.values():
        return []
    extended = Enum("ScalableDimensionValueSet",  # type: ignore[misc]
                    {**known, "SAGEMAKER_INFERENCE_COMPONENT_DESIRED_COPY_COUNT": IC_DIMENSION})
    return [mock.patch.object(module, "ScalableDimensionValueSet", extended) for module in (aas_models, aas_responses)]


def _with_component_alarms(original: Any) -> Any:
    """A target-tracking policy on a component gets the two alarms AWS creates for it (moto creates them for
    DynamoDB and ECS only); moto's DeleteScalingPolicy deletes a policy's alarms."""
    def wrapped(policy: Any) -> None:
        original(policy)
        config = policy.target_tracking_scaling_policy_configuration or {}
        metric = (config.get("PredefinedMetricSpecification") or {}).get("PredefinedMetricType")
        if policy.policy_type != "TargetTrackingScaling" or policy.scalable_dimension != IC_DIMENSION \
                or metric not in IC_METRICS:
            return
        from moto.cloudwatch.models import cloudwatch_backends
        from moto.moto_api._internal import mock_random

        cloudwatch = cloudwatch_backends[policy.account_id][policy.region_name]
        name, high, low = IC_METRICS[metric]
        action = f"{policy.policy_arn}:createdBy/{mock_random.uuid4()}"
        target = float(config.get("TargetValue") or 0)
        for suffix, operator, threshold, (period, periods) in (
                ("AlarmHigh", "GreaterThanThreshold", target, high),
                ("AlarmLow", "LessThanThreshold", target * 0.9, low)):
            policy.alarms.append(cloudwatch.put_metric_alarm(
                name=f"TargetTracking-{policy.resource_id}-{suffix}-{mock_random.uuid4()}",
                namespace="AWS/SageMaker", metric_name=name, metric_data_queries=[], comparison_operator=operator,
                evaluation_periods=periods, period=period, threshold=threshold, statistic="Average",
                description=f"DO NOT EDIT OR DELETE. For TargetTrackingScaling policy {action}",
                dimensions=[{"Name": "InferenceComponentName", "Value": policy.resource_id.removeprefix(IC_PREFIX)}],
                alarm_actions=[action]))
    return wrapped


def scaling_activities(components: Any, body: dict[str, Any], region: str | None = None) -> list[dict[str, Any]]:
    """DescribeScalingActivities' answer for inference components of `region` (newest first), from
    `components.activities`; a change made with SageMaker's own API (UpdateInferenceComponent*) is not Application
    Auto Scaling's."""
    wanted = body.get("ResourceId")
    found = []
    for number, activity in enumerate(components.activities):
        resource = IC_PREFIX + activity["component"]
        if region is not None and activity.get("region", region) != region:
            continue
        if (wanted and resource != wanted) or str(activity["cause"]).startswith("UpdateInferenceComponent") \
                or body.get("ServiceNamespace", "sagemaker") != "sagemaker" \
                or body.get("ScalableDimension", IC_DIMENSION) != IC_DIMENSION:
            continue
        found.append({"ActivityId": f"00000000-0000-0000-0000-{number:012d}", "ServiceNamespace": "sagemaker",
                      "ResourceId": resource, "ScalableDimension": IC_DIMENSION,
                      "Description": f"Setting desired copy count to {activity['to']}.",
                      "Cause": f"{activity['cause']} (emulated)", "StartTime": activity["time"],
                      "EndTime": activity["time"], "StatusCode": "Successful",
                      "StatusMessage": f"Successfully set desired copy count to {activity['to']}."})
    return sorted(found, key=lambda a: a["StartTime"], reverse=True)


def _component_policies(aas: Any, resource_id: str, policy_type: str) -> list[Any]:
    return [p for p in aas.policies.values() if (p.resource_id, p.scalable_dimension, p.policy_type)
            == (resource_id, IC_DIMENSION, policy_type)]


def target_tracking_events(components: Any, aas: Any, store: Any,
                           region: str | None = None) -> list[tuple[float, Callable[[float], None]]]:
    """(when, act) of target tracking's scale-in on each component (module docstring): its AlarmLow alarm goes to
    ALARM once the component has been idle for the alarm's window (`components.times.scale_in_idle_s` overrides
    it), measured from its last request, its last scale-out or its newest copy coming into service, whichever is
    latest; Application Auto Scaling then sets the copies to the target's minimum, no sooner than the policy's
    ScaleInCooldown after its previous scale-in (never while `components.scale_in_acts` is False); a request or a
    scale-out after the alarm fired puts it back to OK."""
    due = []
    for resource_id, target in list(aas.targets.get(IC_DIMENSION, {}).items()):
        name = resource_id.removeprefix(IC_PREFIX)
        component = store.components.get(name)
        if component is None:
            continue
        floor = int(target.min_capacity or 0)
        busy = max(t for t in (component.created, component.last_invocation, component.last_scale_out,
                               *(c.ready_at for c in component.copies)) if t is not None)
        for policy in _component_policies(aas, resource_id, "TargetTrackingScaling"):
            config = policy.target_tracking_scaling_policy_configuration or {}
            if config.get("DisableScaleIn"):
                continue
            fired = getattr(policy, "_peagle_low_at", None)
            if fired is not None and busy > fired:  # in use again since the alarm fired: back to OK

                def clear(at: float, policy: Any = policy) -> None:
                    policy._peagle_low_at = None
                    _low_alarm_state(policy, "OK", at)

                due.append((busy, clear))
                break
            if component.desired <= floor or component.status != "InService":
                break
            if fired is None:

                def fire(at: float, policy: Any = policy) -> None:
                    policy._peagle_low_at = at
                    _low_alarm_state(policy, "ALARM", at)

                due.append((busy + (components.times.scale_in_idle_s or IDLE_WINDOW_S), fire))
                break
            if not components.scale_in_acts:
                break
            previous = getattr(policy, "_peagle_scaled_in_at", None)
            when = fired if previous is None else max(
                fired, previous + float(config.get("ScaleInCooldown", SCALE_IN_COOLDOWN_S)))

            def scale_in(at: float, name: str = name, floor: int = floor, policy: Any = policy) -> None:
                policy._peagle_scaled_in_at = at
                components.set_desired(name, floor, f"TargetTracking {policy.policy_name}", at, region=region)

            due.append((when, scale_in))
            break
    return due


def _low_alarm_state(policy: Any, state: str, at: float) -> None:
    """Target tracking's AlarmLow alarm (made with the policy) to `state`, stamped with the emulator's time."""
    from .alarm_emulation import set_state

    for alarm in policy.alarms:
        if "-AlarmLow-" in alarm.name and alarm.state_value != state:
            reason = ("Threshold Crossed: the per-copy metric was below the scale-in threshold for the whole window "
                      "(emulated)" if state == "ALARM" else "Threshold Crossed: in use again (emulated)")
            set_state(alarm, state, reason, at)


def run_policy(components: Any, aas: Any, arn: str, value: float, threshold: float, when: float,
               region: str | None = None) -> None:
    """An alarm action: the step-scaling policy with this ARN adjusts its component's DesiredCopyCount by the step
    that holds `value - threshold`, within the target's MIN..MAX, unless its Cooldown since its last run is not
    over (a step that lowers the copies does nothing while `components.scale_in_acts` is False). Other ARNs (SNS
    topics, target tracking's own alarms, variant policies) are not modelled."""
    policy = next((p for p in aas.policies.values() if p.policy_arn == arn), None)
    if policy is None or policy.policy_type != "StepScaling" or policy.scalable_dimension != IC_DIMENSION:
        return
    target = aas.targets.get(IC_DIMENSION, {}).get(policy.resource_id)
    name = policy.resource_id.removeprefix(IC_PREFIX)
    state = components.peek(name, region)
    if target is None or state is None:
        return
    config = policy.step_scaling_policy_configuration or {}
    previous = getattr(policy, "_peagle_ran_at", None)
    if previous is not None and when < previous + float(config.get("Cooldown", STEP_COOLDOWN_S)):
        return
    delta = value - threshold
    step = next((s for s in config.get("StepAdjustments") or []
                 if (s.get("MetricIntervalLowerBound") is None or delta >= s["MetricIntervalLowerBound"])
                 and (s.get("MetricIntervalUpperBound") is None or delta < s["MetricIntervalUpperBound"])), None)
    if step is None:
        return
    current, adjustment = state["desired"], int(step["ScalingAdjustment"])
    kind = config.get("AdjustmentType", "ChangeInCapacity")
    if kind == "ExactCapacity":
        wanted = adjustment
    elif kind == "PercentChangeInCapacity":
        change = int(current * adjustment / 100)
        floor = int(config.get("MinAdjustmentMagnitude") or 0)
        wanted = current + (max(abs(change), floor) * (1 if adjustment >= 0 else -1) if floor else change)
    else:
        wanted = current + adjustment
    low = 0 if target.min_capacity is None else int(target.min_capacity)
    high = wanted if target.max_capacity is None else int(target.max_capacity)
    wanted = max(low, min(high, wanted))
    if wanted < current and not components.scale_in_acts:
        return
    policy._peagle_ran_at = when
    if wanted != current:
        components.set_desired(name, wanted, f"StepScaling {policy.policy_name}", when, region=region)
