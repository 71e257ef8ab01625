"""Reading peagle's tags back from SageMaker: the only way status and cleanup select resources."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from ..plan import MANAGED_TAG


def tag_dict(tags: list[dict[str, str]] | None) -> dict[str, str]:
    return {t["Key"]: t["Value"] for t in tags or []}


def list_tags(sm: Any, arn: str) -> dict[str, str]:
    tags: list[dict[str, str]] = []
    for page in sm.get_paginator("list_tags").paginate(ResourceArn=arn):
        tags.extend(page.get("Tags", []))
    return tag_dict(tags)


def is_managed(tags: dict[str, str]) -> bool:
    return tags.get(MANAGED_TAG) == "true"


def parse_time(value: str | None) -> datetime | None:
    if not value:
        return None
    try:
        return datetime.fromisoformat(value)
    except ValueError:
        return None
