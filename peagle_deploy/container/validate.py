"""Refuse a speculative config that would make vLLM fail minutes later, before vLLM starts."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from typing import Any

from .args import ContainerConfigError

ENV_VAR = "SM_VLLM_SPECULATIVE_CONFIG"
# Fields of vLLM's SpeculativeConfig (v0.16-v0.18) that a deployment sets; anything else is a typo.
ALLOWED_FIELDS = {
    "model", "method", "num_speculative_tokens", "parallel_drafting", "draft_tensor_parallel_size",
    "quantization", "max_model_len", "revision", "code_revision", "disable_padded_drafter_batch",
    "prompt_lookup_max", "prompt_lookup_min", "speculative_token_tree", "disable_by_batch_size",
    "acceptance_method", "posterior_threshold", "posterior_alpha", "enforce_eager",
}
MASK_TOKEN_KEYS = ("mask_token_id", "ptd_token_id", "pard_token")


def _has_mask_token(config: Any) -> bool:
    if not isinstance(config, dict):
        return False
    if any(config.get(key) is not None for key in MASK_TOKEN_KEYS):
        return True
    return any(_has_mask_token(config.get(nested)) for nested in ("eagle_config", "draft_config"))


def validate(env: Mapping[str, str]) -> dict[str, Any] | None:
    """The parsed speculative config (None when unset); ContainerConfigError on the first problem."""
    raw = env.get(ENV_VAR)
    if raw is None or not raw.strip():
        return None
    try:
        config = json.loads(raw)
    except ValueError as exc:
        raise ContainerConfigError(f"{ENV_VAR} is not valid JSON ({exc.msg} at column {exc.colno})") from None
    if not isinstance(config, dict):
        raise ContainerConfigError(f"{ENV_VAR} must be one JSON object, got {type(config).__name__}")
    if "tensor_parallel_size" in config:
        raise ContainerConfigError(f"{ENV_VAR} must not set tensor_parallel_size; use draft_tensor_parallel_size")
    unknown = sorted(set(config) - ALLOWED_FIELDS)
    if unknown:
        raise ContainerConfigError(f"{ENV_VAR} has fields vLLM does not accept: {', '.join(unknown)}")
    k = config.get("num_speculative_tokens")
    if isinstance(k, bool) or not isinstance(k, int):
        raise ContainerConfigError(f"{ENV_VAR} num_speculative_tokens must be a whole number, got {k!r}")
    if k <= 0:
        raise ContainerConfigError(f"{ENV_VAR} num_speculative_tokens must be > 0, got {k}")
    parallel = config.get("parallel_drafting") is True
    if parallel and config.get("method") != "eagle3":
        raise ContainerConfigError(f"{ENV_VAR} sets parallel_drafting but method is {config.get('method')!r}; "
                                   "P-EAGLE needs \"method\": \"eagle3\"")
    drafter = config.get("model")
    if drafter and (drafter.startswith("/") or os.path.exists(drafter)):
        if not os.path.isdir(drafter):
            raise ContainerConfigError(f"drafter directory {drafter} does not exist (is the eagle channel mounted?)")
        path = os.path.join(drafter, "config.json")
        try:
            with open(path, encoding="utf-8") as handle:
                drafter_config = json.load(handle)
        except (OSError, ValueError) as exc:
            raise ContainerConfigError(f"cannot read drafter config {path}: {exc}") from None
        if parallel and not _has_mask_token(drafter_config):
            raise ContainerConfigError(f"drafter config {path} names no mask token id ({', '.join(MASK_TOKEN_KEYS)}); "
                                       "parallel drafting needs one")
    return config
