"""Application Auto Scaling for the emulator: what moto (5.2) lacks for SageMaker variants.

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
  registered for autoscaling, as SageMaker refuses it ("Update endpoints that use auto scaling" in its guide).

`autoscaling_patches(emulator)` is added to the emulator's own patches (see `SageMakerEmulator._patches`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any
from unittest import mock

from .patching import stacked

VARIANT_METRICS = {"SageMakerVariantInvocationsPerInstance", "SageMakerVariantConcurrentRequestsPerModelHighResolution"}
DIMENSION = "sagemaker:variant:DesiredInstanceCount"


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
            variant = None
            if namespace == "sagemaker" and dimension == DIMENSION:
                variant = _variant(backend.account_id, backend.region_name, r_id)
            target = original(backend, namespace, r_id, dimension, min_capacity, max_capacity, *args, **kwargs)
            if variant is not None:  # AWS moves the capacity into the new range at once
                desired = variant.get("DesiredInstanceCount") or variant.get("CurrentInstanceCount") or 1
                clamped = max(target.min_capacity or desired, min(target.max_capacity or desired, desired))
                variant["DesiredInstanceCount"] = variant["CurrentInstanceCount"] = clamped
            return target
        return wrapped

    def put_policy(original: Any) -> Any:
        def wrapped(backend: Any, policy_name: str, service_namespace: str, resource_id: str,
                    scalable_dimension: str, policy_body: dict[str, Any], policy_type: str | None) -> Any:
            if not backend._scalable_target_exists(resource_id, scalable_dimension):
                raise _error("ObjectNotFoundException", f"No scalable target registered for service namespace: "
                             f"{service_namespace}, resource ID: {resource_id}, scalable dimension: {scalable_dimension}")
            metric = ((policy_body or {}).get("PredefinedMetricSpecification") or {}).get("PredefinedMetricType")
            if (scalable_dimension == DIMENSION and policy_type == "TargetTrackingScaling" and metric is not None
                    and metric not in VARIANT_METRICS):
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

    return [
        mock.patch.object(ApplicationAutoScalingResponse, "call_action", call_action),
        stacked(backend_cls, "register_scalable_target", register),
        stacked(backend_cls, "put_scaling_policy", put_policy),
        stacked(backend_cls, "deregister_scalable_target", deregister),
        stacked(sm_models.SageMakerModelBackend, "delete_endpoint", delete_endpoint),
        stacked(SageMakerResponse, "update_endpoint", update_endpoint),  # the emulator's own, where it has one
    ]
