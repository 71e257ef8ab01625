"""What an endpoint really serves, read from SageMaker: its endpoint config, the model that config names, and
the mode and K of that model's SM_VLLM_SPECULATIVE_CONFIG.

The endpoint's `peagle:k` and `peagle:mode` tags are labels written by whoever deployed or updated it last;
an interrupted update can leave them behind the truth. The served config is the truth (`speculative.py`
writes the value this module reads back). Reads go through the caller's `read` (a retrying reader), and a
read failure is a `problem` on the answer, never an exception: not being able to read a config says nothing
about the endpoint.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from pydantic import BaseModel

from .speculative import ENV_VAR, Mode


class SpeculativeSpec(BaseModel):
    """Mode and K as the container's environment sets them (mode None: unreadable, see `problem`)."""

    mode: str | None
    k: int | None
    problem: str | None = None


class Served(BaseModel):
    """One endpoint config as SageMaker holds it: its model, instances, and the model's mode and K."""

    endpoint_config: str
    model: str | None = None
    mode: str | None = None
    k: int | None = None
    instance_type: str | None = None
    instance_count: int | None = None
    problem: str | None = None

    def label(self) -> str:
        if self.mode is None:
            return "unknown"
        if self.mode == Mode.OFF.value:
            return "mode off"
        return f"{self.mode} K={self.k}"


def spec_of_environment(environment: dict[str, str] | None) -> SpeculativeSpec:
    """Mode and K from a container environment: no SM_VLLM_SPECULATIVE_CONFIG is speculation off; eagle3 with
    parallel drafting is P-EAGLE, without it EAGLE-3."""
    value = (environment or {}).get(ENV_VAR)
    if value is None or not value.strip():
        return SpeculativeSpec(mode=Mode.OFF.value, k=None)
    try:
        config = json.loads(value)
    except json.JSONDecodeError:
        return SpeculativeSpec(mode=None, k=None, problem=f"{ENV_VAR} is not JSON")
    if not isinstance(config, dict):
        return SpeculativeSpec(mode=None, k=None, problem=f"{ENV_VAR} is not a JSON object")
    k = config.get("num_speculative_tokens")
    k = k if isinstance(k, int) and not isinstance(k, bool) and k > 0 else None
    method = config.get("method")
    if method == "eagle3":
        mode = Mode.P_EAGLE.value if config.get("parallel_drafting") is True else Mode.EAGLE3.value
        return SpeculativeSpec(mode=mode, k=k, problem=None if k else f"{ENV_VAR} has no num_speculative_tokens")
    return SpeculativeSpec(mode=str(method) if method else None, k=k,
                           problem=f"{ENV_VAR} method {method!r} is not one peagle deploys")


def read_served(sm: Any, config_name: str, *, read: Callable[[Callable[[], Any]], Any]) -> Served:
    """DescribeEndpointConfig, then DescribeModel of its (single) variant's model."""
    from .lifecycle.teardown import describe

    served = Served(endpoint_config=config_name)
    try:
        config = read(lambda: describe(sm, "endpoint_config", config_name))
    except Exception as exc:  # noqa: BLE001 - a read failure is a problem to show, not a failure
        served.problem = f"could not read endpoint config {config_name} ({_one_line(exc)})"
        return served
    if config is None:
        served.problem = f"endpoint config {config_name} no longer exists"
        return served
    variants = config.get("ProductionVariants") or []
    if not variants:
        served.problem = f"endpoint config {config_name} has no production variant"
        return served
    variant = variants[0]
    served.model = variant.get("ModelName")
    served.instance_type = variant.get("InstanceType")
    served.instance_count = variant.get("InitialInstanceCount")
    if len(variants) > 1:
        served.problem = f"endpoint config {config_name} has {len(variants)} variants; the first one is shown"
    if not served.model:
        served.problem = served.problem or f"endpoint config {config_name} names no model"
        return served
    try:
        model = read(lambda: describe(sm, "model", served.model))
    except Exception as exc:  # noqa: BLE001
        served.problem = f"could not read model {served.model} ({_one_line(exc)})"
        return served
    if model is None:
        served.problem = f"model {served.model} of endpoint config {config_name} no longer exists"
        return served
    spec = spec_of_environment((model.get("PrimaryContainer") or {}).get("Environment"))
    served.mode, served.k = spec.mode, spec.k
    served.problem = served.problem or spec.problem
    return served


def _one_line(exc: BaseException) -> str:
    from .aws import translate_error

    error = translate_error(exc)
    return error.one_line() if error is not None else f"{type(exc).__name__}: {exc}"
