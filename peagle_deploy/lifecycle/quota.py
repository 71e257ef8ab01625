"""Service Quotas check before CreateEndpoint: 'ResourceLimitExceeded' after minutes of waiting is worse."""

from __future__ import annotations

from typing import Any

from ..aws import is_not_found
from ..errors import QuotaError


def quota_name(instance_type: str) -> str:
    return f"{instance_type} for endpoint usage"


def read_quota(session: Any, instance_type: str) -> float | None:
    """The account's applied quota for this instance type on endpoints, or None when it cannot be read."""
    from ..aws import translate_error

    name = quota_name(instance_type)
    try:
        client = session.client("service-quotas")
        for page in client.get_paginator("list_service_quotas").paginate(ServiceCode="sagemaker"):
            for quota in page.get("Quotas", []):
                if quota.get("QuotaName") == name:
                    return float(quota["Value"])
    except Exception as exc:  # any AWS failure: the quota is unknown, CreateEndpoint will say if it is short
        if translate_error(exc) is None:
            raise
        return None
    return None


def instances_in_use(sm: Any, instance_type: str, scaling: Any = None) -> int:
    """Instances of this type that endpoints in the account and region run now or may scale to
    (`instances_in_use_by_type`)."""
    return instances_in_use_by_type(sm, scaling).get(instance_type, 0)


def instances_in_use_by_type(sm: Any, scaling: Any = None) -> dict[str, int]:
    """Instance type -> instances that endpoints in the account and region run now or may scale to.

    Per variant of one instance type: the most of the config's InitialInstanceCount, DescribeEndpoint's
    CurrentInstanceCount and DesiredInstanceCount (an autoscaled endpoint may run more than it started with) and,
    when Application Auto Scaling has the variant registered, its MaxCapacity. A variant with instance pools holds
    what DescribeEndpoint's InstancePools report per type (SageMaker decides which pool it provisions from). An
    update in progress (blue/green) runs both fleets, so the pending deployment's variants count too.
    `scaling`: an application-autoscaling client (None: not read)."""
    registered = _registered_maxima(scaling) if scaling is not None else {}
    used: dict[str, int] = {}

    def add(instance_type: str | None, count: int) -> None:
        if instance_type and count:
            used[instance_type] = used.get(instance_type, 0) + count

    for page in sm.get_paginator("list_endpoints").paginate():
        for summary in page.get("Endpoints", []):
            if summary.get("EndpointStatus") in ("Deleting", "Failed"):
                continue
            name = summary["EndpointName"]
            try:
                described = sm.describe_endpoint(EndpointName=name)
                config = sm.describe_endpoint_config(EndpointConfigName=described["EndpointConfigName"])
            except Exception as exc:  # deleted between the list and the describe: it holds nothing now
                if is_not_found(exc):
                    continue
                raise
            live = {v.get("VariantName"): v for v in described.get("ProductionVariants") or []}
            for variant in config.get("ProductionVariants", []):
                now = live.get(variant.get("VariantName"), {})
                if variant.get("InstancePools"):
                    for pool in now.get("InstancePools") or []:
                        add(pool.get("InstanceType"), int(pool.get("CurrentInstanceCount") or 0))
                    continue
                add(variant.get("InstanceType"),
                    max(int(variant.get("InitialInstanceCount") or 0), int(now.get("CurrentInstanceCount") or 0),
                        int(now.get("DesiredInstanceCount") or 0),
                        registered.get(f"endpoint/{name}/variant/{variant.get('VariantName')}", 0)))
            pending = (described.get("PendingDeploymentSummary") or {}).get("ProductionVariants") or []
            for variant in pending:
                for pool in variant.get("InstancePools") or []:
                    add(pool.get("InstanceType"), int(pool.get("CurrentInstanceCount") or 0))
                if not variant.get("InstancePools"):
                    add(variant.get("InstanceType"), max(int(variant.get("CurrentInstanceCount") or 0),
                                                         int(variant.get("DesiredInstanceCount") or 0)))
    return used


def _registered_maxima(scaling: Any) -> dict[str, int]:
    """ResourceId -> MaxCapacity of every SageMaker variant Application Auto Scaling has registered; {} when that
    cannot be read (then the counts SageMaker reports are all there is)."""
    from ..aws import translate_error

    maxima: dict[str, int] = {}
    try:
        for page in scaling.get_paginator("describe_scalable_targets").paginate(ServiceNamespace="sagemaker"):
            for target in page.get("ScalableTargets", []):
                maxima[target["ResourceId"]] = int(target.get("MaxCapacity") or 0)
    except Exception as exc:  # any AWS failure (no permission included): count what SageMaker reports
        if translate_error(exc) is None:
            raise
        return {}
    return maxima


def check_quota(session: Any, instance_type: str, count: int) -> str:
    """Raise QuotaError (exit 4) when the plan needs more instances than the quota leaves; else a note."""
    limit = read_quota(session, instance_type)
    name = quota_name(instance_type)
    if limit is None:
        return f"could not read the Service Quotas value '{name}'; going on (CreateEndpoint fails if it is short)"
    used = instances_in_use(session.client("sagemaker"), instance_type, session.client("application-autoscaling"))
    if used + count > limit:
        raise QuotaError(
            f"quota '{name}' is {limit:g}, {used} in use, this deploy needs {count}",
            "request an increase in the Service Quotas console (SageMaker) or pick another --instance-type",
        )
    return f"quota '{name}': {limit:g}, {used} in use, {count} requested"
