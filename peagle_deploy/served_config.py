"""What a SageMaker endpoint is configured to serve, read back from AWS (never from peagle's tags).

DescribeEndpoint names the endpoint config it runs; DescribeEndpointConfig names the model and the
instances; DescribeModel holds the container environment, whose `SM_VLLM_SPECULATIVE_CONFIG` says the
mode and K (absent: no speculation). `speculation_from_config` also reads the config vLLM logged at
start-up, so every source of "what runs" speaks the same words: p-eagle, eagle3, dflash, off.

The endpoint's `peagle:k` and `peagle:mode` tags are labels written by whoever deployed or updated it last;
an interrupted update can leave them behind the truth. `read_served` (status, recover) reads one config
through the caller's retrying `read`, and a read failure is a `problem` on the answer, never an exception:
not being able to read a config says nothing about the endpoint. `read_served_config` (verification) reads
the full speculative config, method and parallel drafting included.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from pydantic import BaseModel, Field

from .describe import describe
from .pools import configured_pools
from .speculative import ENV_VAR, Mode, mode_of


class Speculation(BaseModel):
    """One server's speculative decoding: mode p-eagle / eagle3 / off (or another vLLM method), K."""

    mode: str | None = Field(description="p-eagle, eagle3, dflash, off, another vLLM method; None: could not be read")
    k: int | None = None
    method: str | None = None
    parallel_drafting: bool | None = None
    note: str | None = None

    def describe(self) -> str:
        if self.mode is None:
            return f"speculative K={self.k}" if self.k else (self.note or "unknown")
        return self.mode if self.mode == "off" or self.k is None else f"{self.mode} K={self.k}"


def speculation_from_config(config: dict[str, Any] | None) -> Speculation:
    """A parsed speculative config (the env value, or what vLLM logged) -> mode and K. None: off."""
    if not config:
        return Speculation(mode="off")
    method = config.get("method")
    k = config.get("num_speculative_tokens")
    parallel = config.get("parallel_drafting")
    k = int(k) if isinstance(k, int) or (isinstance(k, str) and k.isdigit()) else None
    note = None
    if method == "eagle3" and "parallel_drafting" not in config:  # vLLM's engine line does not say which
        mode, note = None, "eagle3 method; parallel drafting not stated, so P-EAGLE or EAGLE-3"
    elif method == "eagle3":
        mode = "p-eagle" if parallel is True else "eagle3"
    else:
        mode = str(method) if method else None
        note = None if mode else "the speculative config names no method"
    return Speculation(mode=mode, k=k, method=method, parallel_drafting=parallel if isinstance(parallel, bool) else None,
                       note=note)


class _Unparsable(ValueError):
    """SM_VLLM_SPECULATIVE_CONFIG that is not a JSON object; `str(exc)` says which ('not JSON', ...)."""


def _config_object(value: str) -> dict[str, Any]:
    """The one parse of an SM_VLLM_SPECULATIVE_CONFIG value (both readers below)."""
    try:
        parsed = json.loads(value)
    except ValueError:
        raise _Unparsable("not JSON") from None
    if not isinstance(parsed, dict):
        raise _Unparsable("not a JSON object")
    return parsed


def speculation_from_env(env: dict[str, str] | None) -> Speculation:
    """From a container environment: SM_VLLM_SPECULATIVE_CONFIG (JSON), absent meaning off."""
    value = (env or {}).get(ENV_VAR)
    if value is None:
        return Speculation(mode="off")
    try:
        parsed = _config_object(value)
    except _Unparsable as exc:
        return Speculation(mode=None, note=f"{ENV_VAR} is {exc}" + (f": {value[:80]!r}" if str(exc) == "not JSON"
                                                                    else ""))
    return speculation_from_config(parsed)


class ServedConfig(BaseModel):
    """The endpoint config an endpoint runs now, its model and what that model's container is told."""

    endpoint: str
    endpoint_config: str | None = None
    model: str | None = None
    instance_type: str | None = None
    instance_count: int | None = None
    instance_pools: list[str] = Field(default_factory=list, description="the variant's InstancePools by priority "
                                      "(instance_type is then None: DescribeEndpoint says which pool serves)")
    speculation: Speculation = Field(default_factory=lambda: Speculation(mode=None, note="not read"))
    source: str = ""


def read_served_config(sm: Any, endpoint: str, described: dict[str, Any] | None = None,
                       model: str | None = None) -> ServedConfig:
    """Three reads (DescribeEndpoint unless given, DescribeEndpointConfig, DescribeModel). A read that fails
    leaves the rest unknown (said in `speculation.note`); AWS errors other than a missing resource raise.
    `model`: the one an inference component names, for a config whose variant names none."""
    from .aws import error_code, is_not_found

    described = described if described is not None else sm.describe_endpoint(EndpointName=endpoint)
    config_name = described.get("EndpointConfigName")
    served = ServedConfig(endpoint=endpoint, endpoint_config=config_name,
                          source=f"served config of {endpoint} ({config_name}: {ENV_VAR})")
    try:
        config = sm.describe_endpoint_config(EndpointConfigName=config_name)
    except Exception as exc:
        if not (is_not_found(exc) or error_code(exc) in ("ValidationException", "ValidationError")):
            raise
        served.speculation = Speculation(mode=None, note=f"the endpoint config {config_name} is gone")
        return served
    variant = (config.get("ProductionVariants") or [{}])[0]
    served.model = variant.get("ModelName") or model
    served.instance_type = variant.get("InstanceType")
    served.instance_count = variant.get("InitialInstanceCount")
    served.instance_pools = configured_pools(variant)
    if not served.model:
        served.speculation = Speculation(mode=None, note=f"the endpoint config {config_name} names no model (an "
                                                         "inference component's is read from the component)")
        return served
    try:
        model = sm.describe_model(ModelName=served.model)
    except Exception as exc:
        if not (is_not_found(exc) or error_code(exc) in ("ValidationException", "ValidationError")):
            raise
        served.speculation = Speculation(mode=None, note=f"the model {served.model} is gone")
        return served
    served.speculation = speculation_from_env((model.get("PrimaryContainer") or {}).get("Environment"))
    return served


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
    instance_pools: list[str] = Field(default_factory=list, description="InstancePools by priority ([]: none)")
    problem: str | None = None
    speculation: Speculation | None = Field(default=None, exclude=True, description="the model's full speculative "
                                            "config (method, parallel drafting), for checking vLLM's start-up log")

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
        config = _config_object(value)
    except _Unparsable as exc:
        return SpeculativeSpec(mode=None, k=None, problem=f"{ENV_VAR} is {exc}")
    k = config.get("num_speculative_tokens")
    k = k if isinstance(k, int) and not isinstance(k, bool) and k > 0 else None
    method = config.get("method")
    if method in ("eagle3", "dflash"):  # eagle3: parallel drafting absent is EAGLE-3 (vLLM's default)
        mode = mode_of(method, config.get("parallel_drafting") is True)
        return SpeculativeSpec(mode=mode, k=k, problem=None if k else f"{ENV_VAR} has no num_speculative_tokens")
    return SpeculativeSpec(mode=str(method) if method else None, k=k,
                           problem=f"{ENV_VAR} method {method!r} is not one peagle deploys")


def read_served(sm: Any, config_name: str, *, read: Callable[[Callable[[], Any]], Any],
                model: str | None = None) -> Served:
    """DescribeEndpointConfig, then DescribeModel of its (single) variant's model (`model`: the one an inference
    component names, for a config whose variant names none)."""
    from .aws import error_line

    served = Served(endpoint_config=config_name)
    try:
        config = read(lambda: describe(sm, "endpoint_config", config_name))
    except Exception as exc:  # noqa: BLE001 - a read failure is a problem to show, not a failure
        served.problem = f"could not read endpoint config {config_name} ({error_line(exc)})"
        return served
    if config is None:
        served.problem = f"endpoint config {config_name} no longer exists"
        return served
    variants = config.get("ProductionVariants") or []
    if not variants:
        served.problem = f"endpoint config {config_name} has no production variant"
        return served
    variant = variants[0]
    served.model = variant.get("ModelName") or model
    served.instance_type = variant.get("InstanceType")
    served.instance_count = variant.get("InitialInstanceCount")
    served.instance_pools = configured_pools(variant)
    if len(variants) > 1:
        served.problem = f"endpoint config {config_name} has {len(variants)} variants; the first one is shown"
    if not served.model:
        served.problem = served.problem or f"endpoint config {config_name} names no model"
        return served
    try:
        model = read(lambda: describe(sm, "model", served.model))
    except Exception as exc:  # noqa: BLE001
        served.problem = f"could not read model {served.model} ({error_line(exc)})"
        return served
    if model is None:
        served.problem = f"model {served.model} of endpoint config {config_name} no longer exists"
        return served
    environment = (model.get("PrimaryContainer") or {}).get("Environment")
    spec = spec_of_environment(environment)
    served.mode, served.k = spec.mode, spec.k
    served.speculation = speculation_from_env(environment)
    served.problem = served.problem or spec.problem
    return served


