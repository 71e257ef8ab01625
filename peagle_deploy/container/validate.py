"""Refuse a speculative config that would make vLLM fail minutes later, before vLLM starts."""

from __future__ import annotations

import difflib
import json
import os
import re
from collections.abc import Mapping
from typing import Any

from .args import ContainerConfigError
from .drafter import check_dflash_drafter, check_mask_hidden, check_mask_token, read_config
from . import lossless
from .methods import known_methods
from .vllm_version import installed_vllm_version

ENV_VAR = "SM_VLLM_SPECULATIVE_CONFIG"
# User-settable fields of vLLM's SpeculativeConfig: those of vLLM main (vllm/config/speculative.py) plus
# older ones from the 0.16-0.18 line; anything else is a typo vLLM would reject at start-up.
# `tensor_parallel_size` is a vLLM field too, but only to warn users: it gets its own message here.
ALLOWED_FIELDS = {
    "model", "method", "num_speculative_tokens", "parallel_drafting", "draft_tensor_parallel_size",
    "enforce_eager", "quantization", "moe_backend", "attention_backend", "kv_cache_dtype", "max_model_len",
    "revision", "code_revision", "index_share_for_mtp_iteration", "disable_padded_drafter_batch",
    "disable_eagle_block_drop", "use_local_argmax_reduction", "use_heterogeneous_vocab",
    "prompt_lookup_max", "prompt_lookup_min", "num_speculative_tokens_per_batch_size",
    "suffix_decoding_max_tree_depth", "suffix_decoding_max_cached_requests", "suffix_decoding_max_spec_factor",
    "suffix_decoding_min_token_prob", "draft_load_config", "rejection_sample_method",
    "synthetic_acceptance_rates", "synthetic_acceptance_length", "enable_adaptive_verification",
    "draft_sample_method", "dspark_draft_topk", "speculative_token_tree", "disable_by_batch_size",
    "acceptance_method", "posterior_threshold", "posterior_alpha",
}


def validate(env: Mapping[str, str], vllm_version: str | None = None) -> dict[str, Any] | None:
    """The parsed speculative config (None when unset); ContainerConfigError on the first problem.

    The drafter checks follow `vllm_version`, by default the vLLM installed beside this code."""
    raw = env.get(ENV_VAR)
    lossless.check_environment(env, speculative=bool(raw and raw.strip()))
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
    if k is None:
        raise ContainerConfigError(f"{ENV_VAR} has no num_speculative_tokens; set K, e.g. 3")
    if isinstance(k, bool) or not isinstance(k, int):
        raise ContainerConfigError(f"{ENV_VAR} num_speculative_tokens must be a whole number, got {k!r}")
    if k <= 0:
        raise ContainerConfigError(f"{ENV_VAR} num_speculative_tokens must be > 0, got {k}")
    _check_method(config.get("method"), vllm_version)
    lossless.check_config(config, env, vllm_version if vllm_version is not None else installed_vllm_version())
    parallel = config.get("parallel_drafting") is True
    if parallel and config.get("method") != "eagle3":
        raise ContainerConfigError(f"{ENV_VAR} sets parallel_drafting but method is {config.get('method')!r}; "
                                   "P-EAGLE needs \"method\": \"eagle3\"")
    dflash = config.get("method") == "dflash"
    if dflash:
        _check_dflash_version(installed_vllm_version() if vllm_version is None else vllm_version)
    drafter = config.get("model")
    if drafter is not None and not isinstance(drafter, str):
        raise ContainerConfigError(f"{ENV_VAR} model must be a path or model id string, got {drafter!r}")
    local = bool(drafter) and (drafter.startswith("/") or os.path.exists(drafter))
    if dflash and not local:  # a hub id: its config is not here to say whether it attends causally
        _check_attention_backend(env)
    if local:
        if not os.path.isdir(drafter):
            channel = "dflash" if dflash else "eagle"
            raise ContainerConfigError(f"drafter directory {drafter} does not exist (is the {channel} channel "
                                       "mounted?)")
        path = os.path.join(drafter, "config.json")
        drafter_config = read_config(drafter)
        if dflash:  # DFlash drafts in parallel too (vLLM sets parallel_drafting itself): the same mask-token rule
            check_dflash_drafter(drafter, drafter_config, k)
            check_mask_token(drafter_config, path, installed_vllm_version() if vllm_version is None else vllm_version)
            _check_attention_backend(env, drafter_config)
        elif parallel:
            check_mask_token(drafter_config, path, installed_vllm_version() if vllm_version is None else vllm_version)
            check_mask_hidden(drafter)
    return config


ATTENTION_ENV = "SM_VLLM_ATTENTION_BACKEND"
# the attention backends whose vLLM class says supports_non_causal() (vLLM 0.28 source, vllm/v1/attention/backends)
NON_CAUSAL_BACKENDS = frozenset({"flash_attn", "flashinfer", "triton_attn", "flex_attention", "cpu_attn", "rocm_attn",
                                 "rocm_aiter_fa", "flashinfer_mla", "tokenspeed_mla", "auto"})
DFLASH_SINCE = (0, 20)  # vLLM's speculative methods name "dflash" from 0.20 (absent in 0.18.0 and 0.19.0)


def _check_dflash_version(vllm_version: str | None) -> None:
    from .vllm_version import release

    key = release(vllm_version) if vllm_version else None
    if key is not None and key < DFLASH_SINCE:
        raise ContainerConfigError(f"vLLM {vllm_version} has no DFlash (its speculative methods name \"dflash\" from "
                                   "0.20); use a newer vLLM image")


def _check_attention_backend(env: Mapping[str, str], drafter_config: dict[str, Any] | None = None) -> None:
    """DFlash's drafter attends to its block non-causally (unless its config says causal): a backend set that
    cannot do that makes vLLM fail once the drafter runs."""
    backend = (env.get(ATTENTION_ENV) or "").strip()
    if not backend or backend.lower() in NON_CAUSAL_BACKENDS:
        return
    nested = (drafter_config or {}).get("dflash_config")
    causal = (drafter_config or {}).get("is_causal") is True or (isinstance(nested, dict) and nested.get("causal") is True)
    if not causal:
        raise ContainerConfigError(f"{ATTENTION_ENV}={backend} cannot attend non-causally, which the DFlash drafter "
                                   f"needs; set {ATTENTION_ENV}=flash_attn")


def _check_method(method: Any, vllm_version: str | None) -> None:
    """Any method must be one vLLM knows (vLLM itself would die on it seconds later with a pydantic error)."""
    if method is None:
        return  # vLLM infers it from the drafter
    if not isinstance(method, str):
        raise ContainerConfigError(f"{ENV_VAR} method must be a string such as \"eagle3\", got {method!r}")
    known, whose = known_methods(vllm_version if vllm_version is not None else installed_vllm_version())
    if method in known:
        return
    squashed = re.sub(r"[^a-z0-9]", "", method.lower())
    if "eagle" in squashed and "eagle3" in known:  # eagle-3, EAGLE3, p-eagle, peagle: P-EAGLE and EAGLE-3 are eagle3
        close = ["eagle3"]
    else:
        close = difflib.get_close_matches(method.lower(), sorted(known), n=1, cutoff=0.6)
    hint = f'did you mean "{close[0]}"?' if close else 'P-EAGLE and EAGLE-3 use "eagle3"'
    raise ContainerConfigError(f"{ENV_VAR} method {method!r} is not one {whose} accepts; {hint}")
