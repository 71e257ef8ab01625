"""Reading a resource's tags from SageMaker; what they mean is `peagle_deploy.tags.PeagleTags`."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..describe import describe
from ..tags import PeagleTags, is_managed

__all__ = ["PeagleTags", "described_with_tags", "is_managed", "list_tags", "list_tags_if_present", "read_tags"]


def list_tags(sm: Any, arn: str) -> dict[str, str]:
    tags: dict[str, str] = {}
    for page in sm.get_paginator("list_tags").paginate(ResourceArn=arn):
        tags.update({t["Key"]: t["Value"] for t in page.get("Tags", [])})
    return tags


def list_tags_if_present(sm: Any, arn: str) -> dict[str, str] | None:
    """The tags, or None when the resource is gone: an endpoint listed a moment ago can be deleted before its tags
    are read (another cleanup, a sweep's teardown), which is not a failure of whoever lists."""
    from ..aws import is_not_found

    try:
        return list_tags(sm, arn)
    except Exception as exc:
        if is_not_found(exc):
            return None
        raise


def read_tags(sm: Any, arn: str) -> PeagleTags:
    return PeagleTags.from_aws(list_tags(sm, arn))


def described_with_tags(sm: Any, name: str, read: Callable[[Callable[[], Any]], Any]) -> tuple[dict[str, Any],
                                                                                             dict[str, str]] | None:
    """Endpoint `name`'s description and tags (each through `read`), or None when it is gone: also when it was
    deleted between the two reads (another cleanup, a sweep's teardown)."""
    described = read(lambda: describe(sm, "endpoint", name))
    tags = read(lambda: list_tags_if_present(sm, described["EndpointArn"])) if described is not None else None
    return (described, tags) if tags is not None else None
