"""One SageMaker resource's Describe* answer, by kind and name; None when it is gone.

Below the lifecycle on purpose: `served_config` (what an endpoint serves), teardown, status and recover all read
resources this way, and none of them may import another's module for it.
"""

from __future__ import annotations

from typing import Any, Literal

from .aws import is_not_found

Kind = Literal["endpoint", "endpoint_config", "model"]

# kind -> (the Describe* method, its name parameter, the answer's ARN key)
DESCRIBE = {"endpoint": ("describe_endpoint", "EndpointName", "EndpointArn"),
            "endpoint_config": ("describe_endpoint_config", "EndpointConfigName", "EndpointConfigArn"),
            "model": ("describe_model", "ModelName", "ModelArn")}


def describe(sm: Any, kind: Kind, name: str) -> dict[str, Any] | None:
    method, key, _ = DESCRIBE[kind]
    try:
        return getattr(sm, method)(**{key: name})
    except Exception as exc:
        if is_not_found(exc):
            return None
        raise
