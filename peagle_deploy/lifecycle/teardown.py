"""Deleting what peagle created, and nothing else.

Every resource is checked for `peagle:managed=true` on itself (not only on its endpoint) before it
is deleted; deletes are idempotent (already gone counts as done) and run endpoint, endpoint config,
model, in that order.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any, Literal

from pydantic import BaseModel, Field

from ..errors import UsageError
from .errors import is_not_found
from .tags import is_managed, list_tags, parse_time

Kind = Literal["endpoint", "endpoint_config", "model"]


class Outcome(BaseModel):
    kind: Kind
    name: str
    result: Literal["deleted", "already gone", "left"]
    reason: str = ""


class CleanupReport(BaseModel):
    outcomes: list[Outcome] = Field(default_factory=list)

    @property
    def deleted(self) -> list[Outcome]:
        return [o for o in self.outcomes if o.result == "deleted"]

    @property
    def left(self) -> list[Outcome]:
        return [o for o in self.outcomes if o.result == "left"]


_DESCRIBE = {"endpoint": ("describe_endpoint", "EndpointName", "EndpointArn"),
             "endpoint_config": ("describe_endpoint_config", "EndpointConfigName", "EndpointConfigArn"),
             "model": ("describe_model", "ModelName", "ModelArn")}
_DELETE = {"endpoint": "delete_endpoint", "endpoint_config": "delete_endpoint_config", "model": "delete_model"}


def _describe(sm: Any, kind: Kind, name: str) -> dict[str, Any] | None:
    method, key, _ = _DESCRIBE[kind]
    try:
        return getattr(sm, method)(**{key: name})
    except Exception as exc:
        if is_not_found(exc):
            return None
        raise


def delete_one(sm: Any, kind: Kind, name: str, *, require_managed: bool = True) -> Outcome:
    described = _describe(sm, kind, name)
    if described is None:
        return Outcome(kind=kind, name=name, result="already gone")
    if require_managed and not is_managed(list_tags(sm, described[_DESCRIBE[kind][2]])):
        return Outcome(kind=kind, name=name, result="left", reason="not created by peagle (no peagle:managed tag)")
    try:
        getattr(sm, _DELETE[kind])(**{_DESCRIBE[kind][1]: name})
    except Exception as exc:
        if is_not_found(exc):
            return Outcome(kind=kind, name=name, result="already gone")
        raise
    return Outcome(kind=kind, name=name, result="deleted")


def delete_stack(sm: Any, name: str, *, wait: bool = True, require_managed: bool = True) -> list[Outcome]:
    """Endpoint, then its config, then the config's models (names read from SageMaker, not assumed)."""
    config_name, model_names = name, [name]
    endpoint = _describe(sm, "endpoint", name)
    if endpoint is not None:
        config_name = endpoint.get("EndpointConfigName", name)
    config = _describe(sm, "endpoint_config", config_name)
    if config is not None:
        model_names = [v["ModelName"] for v in config.get("ProductionVariants", []) if v.get("ModelName")] or [name]
    outcomes = [delete_one(sm, "endpoint", name, require_managed=require_managed)]
    if outcomes[0].result == "deleted" and wait:
        sm.get_waiter("endpoint_deleted").wait(EndpointName=name, WaiterConfig={"Delay": 5, "MaxAttempts": 180})
    if outcomes[0].result == "left":
        return outcomes  # never strip an unmanaged endpoint of its config or model
    outcomes.append(delete_one(sm, "endpoint_config", config_name, require_managed=require_managed))
    outcomes.extend(delete_one(sm, "model", m, require_managed=require_managed) for m in model_names)
    return outcomes


def _managed(sm: Any, paginator: str, key: str, name_key: str, arn_key: str) -> list[tuple[str, dict[str, str]]]:
    found = []
    for page in sm.get_paginator(paginator).paginate():
        for item in page.get(key, []):
            tags = list_tags(sm, item[arn_key])
            if is_managed(tags):
                found.append((item[name_key], tags))
    return found


def cleanup(session: Any, name: str | None = None, *, all_: bool = False, expired: bool = False,
            wait: bool = True, now: Callable[[], datetime] = lambda: datetime.now(UTC)) -> CleanupReport:
    if sum((bool(name), all_, expired)) != 1:
        raise UsageError("cleanup needs exactly one of NAME, --all or --expired", "see peagle cleanup --help")
    sm = session.client("sagemaker")
    report = CleanupReport()
    if name:
        report.outcomes.extend(delete_stack(sm, name, wait=wait))
        return report
    endpoints = _managed(sm, "list_endpoints", "Endpoints", "EndpointName", "EndpointArn")
    moment = now()
    for endpoint_name, tags in endpoints:
        expires = parse_time(tags.get("peagle:expires-at"))
        if expired and not (expires and expires <= moment):
            continue
        report.outcomes.extend(delete_stack(sm, endpoint_name, wait=wait))
    if all_:  # leftovers of an interrupted deploy or rollback: configs and models with no endpoint
        for config_name, _ in _managed(sm, "list_endpoint_configs", "EndpointConfigs", "EndpointConfigName",
                                       "EndpointConfigArn"):
            report.outcomes.append(delete_one(sm, "endpoint_config", config_name))
        for model_name, _ in _managed(sm, "list_models", "Models", "ModelName", "ModelArn"):
            report.outcomes.append(delete_one(sm, "model", model_name))
    return report
