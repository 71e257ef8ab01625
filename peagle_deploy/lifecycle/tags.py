"""Reading a resource's tags from SageMaker; what they mean is `peagle_deploy.tags.PeagleTags`."""

from __future__ import annotations

from typing import Any

from ..tags import PeagleTags, is_managed

__all__ = ["PeagleTags", "is_managed", "list_tags", "read_tags"]


def list_tags(sm: Any, arn: str) -> dict[str, str]:
    tags: dict[str, str] = {}
    for page in sm.get_paginator("list_tags").paginate(ResourceArn=arn):
        tags.update({t["Key"]: t["Value"] for t in page.get("Tags", [])})
    return tags


def read_tags(sm: Any, arn: str) -> PeagleTags:
    return PeagleTags.from_aws(list_tags(sm, arn))
