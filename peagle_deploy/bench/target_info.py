"""What a bench target is: its parsed reference, and (for a SageMaker endpoint) instance and peagle tags."""

from __future__ import annotations

from typing import Any

from ..errors import UsageError
from .results import TargetInfo


def describe_endpoint(sagemaker: Any, name: str) -> TargetInfo:
    """Instance type, count and speculative config from the served config; a mode/K label and the model
    from peagle's tags, if any."""
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
    from ..served_config import read_served_config
    from .server_facts import ServerFacts, from_speculation

    try:
        served = read_served_config(sagemaker, name, described=ep)
        info.instance_type, info.instance_count = served.instance_type, served.instance_count
        if served.instance_pools:  # instance pools: the one that serves is what runs and what is billed
            from ..pools import serving_pools, serving_words

            serving = serving_pools((ep.get("ProductionVariants") or [{}])[0])
            info.instance_type, info.instance_count = serving[0] if serving else (None, None)
            info.instance_pool = serving_words(serving, served.instance_pools)
        info.server = from_speculation(served.speculation, served.source)
    except Exception as exc:  # noqa: BLE001 - a read failure is not an endpoint failure; the bench still runs
        if not error_code(exc):
            raise
        info.server = ServerFacts(notes=[f"could not read the served config of {name} ({error_code(exc)})"])
    try:
        tags = {t["Key"]: t["Value"] for t in sagemaker.list_tags(ResourceArn=ep["EndpointArn"]).get("Tags", [])}
    except Exception as exc:  # noqa: BLE001
        if not error_code(exc):
            raise
        tags = {}
    from ..tags import PeagleTags  # the one reader of peagle's tags

    peagle_tags = PeagleTags.from_aws(tags)
    if peagle_tags.mode:  # a label: the runner weighs it against the served config
        info.label_mode, info.label_k, info.label_source = peagle_tags.mode, peagle_tags.k, "tags"
    info.model = peagle_tags.model
    return info
