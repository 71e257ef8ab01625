"""What a bench target is: its parsed reference, and (for a SageMaker endpoint) instance and peagle tags."""

from __future__ import annotations

from typing import Any

from ..errors import UsageError
from .results import TargetInfo


def describe_endpoint(sagemaker: Any, name: str) -> TargetInfo:
    """Instance type and count from the endpoint config; mode/K/model from peagle's tags, if any."""
    from ..aws import error_code, translate_error

    try:
        ep = sagemaker.describe_endpoint(EndpointName=name)
    except Exception as exc:  # botocore's errors, through the one AWS classifier
        if error_code(exc) in ("ValidationException", "ValidationError"):
            raise UsageError(f"endpoint {name!r} not found", "check the name and --region") from None
        translated = translate_error(exc)
        if translated is None:
            raise
        raise translated from None
    if ep.get("EndpointStatus") not in (None, "InService"):
        raise UsageError(
            f"endpoint {name!r} is {ep.get('EndpointStatus')}, not InService",
            "wait for it ('peagle deploy' waits) or bench another endpoint",
        )
    info = TargetInfo(kind="sagemaker", name=name)
    try:
        config = sagemaker.describe_endpoint_config(EndpointConfigName=ep["EndpointConfigName"])
        variant = (config.get("ProductionVariants") or [{}])[0]
        info.instance_type = variant.get("InstanceType")
        info.instance_count = variant.get("InitialInstanceCount")
    except Exception as exc:  # noqa: BLE001 - the config may be gone; the bench still runs
        if not error_code(exc):
            raise
    try:
        tags = {t["Key"]: t["Value"] for t in sagemaker.list_tags(ResourceArn=ep["EndpointArn"]).get("Tags", [])}
    except Exception as exc:  # noqa: BLE001
        if not error_code(exc):
            raise
        tags = {}
    if "peagle:mode" in tags:
        info.mode = tags["peagle:mode"]
        info.k = int(tags["peagle:k"]) if tags.get("peagle:k", "").isdigit() else None
        info.mode_source = "tags"
    info.model = tags.get("peagle:model")
    return info
