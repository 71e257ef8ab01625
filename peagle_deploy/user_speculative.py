"""The user's additions to peagle's speculative config: `--env SM_VLLM_SPECULATIVE_CONFIG='{...}'`.

Mode and K are peagle's (`--mode`, `--k`): the keys that carry them (model, method, num_speculative_tokens,
parallel_drafting) stay peagle's and are refused here. Any other key vLLM's SpeculativeConfig takes
(`draft_sample_method`, `num_speculative_tokens_per_batch_size`, `rejection_sample_method`, ...) is added to
peagle's config, after it, and checked as the bundled container checks it before vLLM starts
(container/lossless.py): a lossy rejection method (`fly`, `synthetic`) is refused unless `--allow-lossy`, which also
lets the bundled container run it (PEAGLE_ALLOW_LOSSY). Another spelling of the variable (`SM_VLLM_speculative_config`,
a prefix vLLM's argparse completes) is refused: it would reach vLLM unchecked. Pure: no AWS call, so a refusal
writes nothing.
"""

from __future__ import annotations

import json
from typing import Any

from .container import lossless
from .container.args import ContainerConfigError
from .errors import UsageError
from .speculative import ENV_VAR

# the keys of peagle's own config, and the flag that sets each
OWNED = {"model": "--mode (the drafter channel)", "method": "--mode", "num_speculative_tokens": "--k",
         "parallel_drafting": "--mode"}
LOSSY_HINT = "pass --allow-lossy to deploy it anyway (bench agree shows what it changes), or drop it"


def additions(user_env: dict[str, str]) -> dict[str, Any]:
    """The keys the user adds through --env SM_VLLM_SPECULATIVE_CONFIG (empty when not given)."""
    other = lossless.speculative_spellings(user_env)
    if other:
        raise UsageError(f"--env {other[0]} reaches vLLM as --speculative-config and skips peagle's checks",
                         f"spell it {ENV_VAR}")
    raw = user_env.get(ENV_VAR)
    if raw is None or not raw.strip():
        return {}
    try:
        extra = json.loads(raw)
    except ValueError as exc:
        raise UsageError(f"--env {ENV_VAR} is not valid JSON ({exc.msg} at column {exc.colno})",
                         "pass one JSON object of the keys to add, e.g. '{\"draft_sample_method\": \"greedy\"}'") \
            from None
    if not isinstance(extra, dict):
        raise UsageError(f"--env {ENV_VAR} must be one JSON object, got {type(extra).__name__}",
                         "pass the keys to add as one JSON object")
    owned = [key for key in extra if key in OWNED]
    if owned:
        raise UsageError(f"--env {ENV_VAR} sets {owned[0]}, which peagle sets from --mode and --k",
                         f"use {OWNED[owned[0]]} instead")
    from .container.validate import ALLOWED_FIELDS

    unknown = sorted(set(extra) - ALLOWED_FIELDS)
    if unknown:
        raise UsageError(f"--env {ENV_VAR} has fields vLLM's SpeculativeConfig does not accept: {', '.join(unknown)}",
                         "check the spelling against vLLM's speculative config")
    return extra


def merged(base: dict[str, Any] | None, extra: dict[str, Any], *, allow_lossy: bool, mode: str) -> dict[str, Any] | None:
    """peagle's config with the user's keys after it, checked as the container checks it (vLLM version unknown
    here: the values any supported vLLM takes)."""
    if not extra:
        return base
    if base is None:
        raise UsageError(f"--env {ENV_VAR} adds to a speculative config, and --mode {mode} has none",
                         "drop it, or choose --mode p-eagle or eagle3")
    config = {**base, **extra}
    refusal = lossless.lossy_refusal(config)
    if refusal is not None and not allow_lossy:
        raise UsageError(f"--env {ENV_VAR} {refusal}", LOSSY_HINT)
    try:  # the values (the lossy check is done above)
        lossless.check_config(config, {lossless.ALLOW_LOSSY_ENV: "true"}, None, installed=False)
    except ContainerConfigError as exc:
        raise UsageError(f"--env {exc}", "fix the value") from None
    return config


def notes(config: dict[str, Any] | None) -> list[str]:
    """The plan's lines for what the user's keys do that is worth saying (lossy, synthetic acceptance)."""
    lines = []
    if config and config.get("rejection_sample_method") == "synthetic":
        lines.append("synthetic acceptance (rejection_sample_method synthetic): vLLM accepts drafts by a configured "
                     "rate, not by the target, so bench's acceptance and speed-up measure no drafter")
    if config and (refusal := lossless.lossy_refusal(config)):
        lines.append(f"LOSSY: {refusal} (--allow-lossy); peagle bench agree against --mode off shows the change")
    return lines
