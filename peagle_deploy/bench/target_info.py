"""What a bench target is: its kind, URL, and (for a SageMaker endpoint) instance and peagle tags."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

from ..errors import CredentialsError, UsageError
from .results import TargetInfo


def target_kind(target: str) -> str:
    """'openai' for URLs with a /v1 path, 'container' for other URLs, else 'sagemaker' (an endpoint name)."""
    if target.startswith(("http://", "https://")):
        path = urlsplit(target).path.rstrip("/")
        return "openai" if "/v1" in path else "container"
    if not target or len(target) > 63 or not all(c.isalnum() or c == "-" for c in target):
        raise UsageError(
            f"{target!r} is neither a URL nor a SageMaker endpoint name",
            "pass http(s)://host:port[/v1] or an endpoint name (letters, digits, hyphens)",
        )
    return "sagemaker"


def request_url(target: str, kind: str) -> str:
    base = target.rstrip("/")
    if kind == "container":
        return base if base.endswith("/invocations") else base + "/invocations"
    if base.endswith("/chat/completions"):
        return base
    return base + "/chat/completions"


def describe_endpoint(sagemaker: Any, name: str) -> TargetInfo:
    """Instance type and count from the endpoint config; mode/K/model from peagle's tags, if any."""
    import botocore.exceptions

    from ..aws import error_code

    try:
        ep = sagemaker.describe_endpoint(EndpointName=name)
    except botocore.exceptions.NoCredentialsError:
        raise CredentialsError("no AWS credentials found", "configure them, or bench a URL target") from None
    except Exception as exc:
        code = error_code(exc)
        if code == "ValidationException":
            raise UsageError(f"endpoint {name!r} not found", "check the name and --region") from None
        if code in (
            "AccessDeniedException",
            "UnrecognizedClientException",
            "ExpiredTokenException",
            "InvalidClientTokenId",
        ):
            raise CredentialsError(
                f"AWS refused DescribeEndpoint ({code})", "check the credentials and their permissions"
            ) from None
        raise
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
    from ..tags import PeagleTags  # the one reader of peagle's tags

    peagle_tags = PeagleTags.from_aws(tags)
    if peagle_tags.mode:
        info.mode = peagle_tags.mode
        info.k = peagle_tags.k
        info.mode_source = "tags"
    info.model = peagle_tags.model
    return info
