"""Speculation that stays lossless and measured: the newer speculative-config keys, checked before vLLM starts.

vLLM verifies drafts with its rejection sampler, chosen by `rejection_sample_method` (vllm/config/speculative.py,
`RejectionSampleMethod`): `standard` (the default) and `block` (block verification, Sun et al.) keep the target's
output; two do not:
- `synthetic` accepts a draft by a coin flip calibrated to `synthetic_acceptance_rates` / `_length` and then emits
  the DRAFT token, whatever the target says (`rejection_greedy_sample_kernel`, vllm/v1/sample/rejection_sampler.py,
  read in 0.32.0): the output is not the target's, and the acceptance vLLM reports is the one configured, so a
  benchmark of it measures no drafter;
- `fly` (vLLM 0.33) is lossy by design.
Either is refused unless PEAGLE_ALLOW_LOSSY is true (`peagle deploy --allow-lossy` sets it); synthetic acceptance is
said in one warning line whenever it runs. The other new keys get vLLM's own value rules (the installed vLLM's
Literal where it has one, else the values recorded here), so a typo fails in a second, not after a minute of start-up.

Two environment mistakes would bypass the checks: another spelling of SM_VLLM_SPECULATIVE_CONFIG (the entrypoint
lowercases flag names, and vLLM's argparse accepts an unambiguous prefix such as `--speculative-conf`), and vLLM's
per-request acceptance flag without speculation (vLLM refuses to start: `--per-request-spec-decode-metrics requires
speculative decoding`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .args import PER_REQUEST_ENV, PREFIX, ContainerConfigError, flag_of
from .methods import installed_literal

ENV_VAR = PREFIX + "SPECULATIVE_CONFIG"
FLAG = "--speculative-config"
ALLOW_LOSSY_ENV = "PEAGLE_ALLOW_LOSSY"

LOSSY = {
    "synthetic": "it accepts drafts by a coin flip calibrated to synthetic_acceptance_rates/length and emits the "
                 "draft token whatever the target says",
    "fly": "vLLM's fly rejection accepts drafts the target would not have produced",
}
# value rules: the installed vLLM's Literal by name, else these (vLLM 0.32.0's source, plus fly from 0.33)
LITERALS = {"rejection_sample_method": "RejectionSampleMethod", "draft_sample_method": "DraftSampleMethod"}
RECORDED = {"rejection_sample_method": frozenset({"standard", "synthetic", "block", "fly"}),
            "draft_sample_method": frozenset({"greedy", "probabilistic"})}


def allowed(env: Mapping[str, str]) -> bool:
    return str(env.get(ALLOW_LOSSY_ENV, "")).strip().lower() in ("1", "true", "yes")


def speculative_spellings(env: Mapping[str, str]) -> list[str]:
    """Keys other than SM_VLLM_SPECULATIVE_CONFIG that reach vLLM as --speculative-config (lowercased, or a prefix
    argparse completes: `--specu` is the shortest no other vLLM flag shares)."""
    return [key for key in env if key.startswith(PREFIX) and key != ENV_VAR
            and (flag := flag_of(key)).startswith("--specu") and FLAG.startswith(flag)]


def check_environment(env: Mapping[str, str], speculative: bool) -> None:
    """The environment as a whole: one spelling of the speculative config; the per-request flag only with it."""
    other = speculative_spellings(env)
    if other:
        raise ContainerConfigError(f"{other[0]} reaches vLLM as {FLAG} and skips every check of it; "
                                   f"spell it {ENV_VAR}")
    if not speculative and str(env.get(PER_REQUEST_ENV, "none")).strip().lower() not in ("none", "false"):
        raise ContainerConfigError(f"{PER_REQUEST_ENV} needs speculative decoding (vLLM refuses to start "
                                   f"without {ENV_VAR}); drop it or set {ENV_VAR}")


def lossy_method(config: Mapping[str, Any]) -> str | None:
    method = config.get("rejection_sample_method")
    return method if isinstance(method, str) and method in LOSSY else None


def lossy_refusal(config: Mapping[str, Any]) -> str | None:
    """Why the config is lossy, in one line (None: it keeps the target's output)."""
    method = lossy_method(config)
    if method is None:
        return None
    return f"rejection_sample_method {method!r} is lossy ({LOSSY[method]}): the output is no longer the target's"


def check_config(config: Mapping[str, Any], env: Mapping[str, str], vllm_version: str | None, *,
                 installed: bool = True) -> None:
    """The newer keys: a lossy rejection method unless allowed, then each value as vLLM checks it (`installed`:
    by the vLLM beside this code where there is one; else, as a plan does for an image, by the recorded values)."""
    refusal = lossy_refusal(config)
    if refusal is not None and not allowed(env):
        raise ContainerConfigError(f"{ENV_VAR} {refusal}; set {ALLOW_LOSSY_ENV}=true to run it anyway")
    for key, literal in LITERALS.items():
        value = config.get(key)
        if value is None:
            continue
        known = installed_literal(literal) if installed else None
        whose = f"vLLM {vllm_version or '(installed)'}" if known is not None else "vLLM"
        known = known if known is not None else RECORDED[key]
        if value not in known:
            raise ContainerConfigError(f"{ENV_VAR} {key} {value!r} is not one {whose} accepts "
                                       f"({', '.join(sorted(known))})")
    _check_synthetic(config)
    _check_schedule(config.get("num_speculative_tokens_per_batch_size"))


def _check_synthetic(config: Mapping[str, Any]) -> None:
    """vLLM's SpeculativeConfig rules (0.32.0): rates or length with synthetic only, exactly one of them, rates K
    non-increasing values in [0, 1], length in [1, K + 1]."""
    rates, length = config.get("synthetic_acceptance_rates"), config.get("synthetic_acceptance_length")
    k = config.get("num_speculative_tokens")
    if config.get("rejection_sample_method") != "synthetic":
        if rates is not None or length is not None:
            raise ContainerConfigError(f"{ENV_VAR} synthetic_acceptance_rates/length need rejection_sample_method "
                                       "\"synthetic\"")
        return
    if (rates is None) == (length is None):
        raise ContainerConfigError(f"{ENV_VAR} rejection_sample_method \"synthetic\" needs exactly one of "
                                   "synthetic_acceptance_rates or synthetic_acceptance_length")
    if length is not None:
        if isinstance(length, bool) or not isinstance(length, (int, float)) or not 1 <= length <= k + 1:
            raise ContainerConfigError(f"{ENV_VAR} synthetic_acceptance_length must be in [1, {k + 1}], got "
                                       f"{length!r}")
        return
    if (not isinstance(rates, list) or len(rates) != k
            or not all(isinstance(r, (int, float)) and not isinstance(r, bool) and 0 <= r <= 1 for r in rates)
            or any(later > earlier for earlier, later in zip(rates, rates[1:]))):
        raise ContainerConfigError(f"{ENV_VAR} synthetic_acceptance_rates must be {k} non-increasing values in "
                                   f"[0, 1], got {rates!r}")


def _check_schedule(schedule: Any) -> None:
    """num_speculative_tokens_per_batch_size as vLLM validates it (vllm/v1/spec_decode/dynamic/utils.py):
    [range_start, range_end, K] entries, positive inclusive ranges, K >= 0, not overlapping, the first from 1.
    vLLM caps each K at num_speculative_tokens."""
    if schedule is None:
        return
    where = f"{ENV_VAR} num_speculative_tokens_per_batch_size"
    if not isinstance(schedule, list) or not schedule:
        raise ContainerConfigError(f"{where} must be a non-empty list of [range_start, range_end, K] entries")
    entries = []
    for entry in schedule:
        if (not isinstance(entry, list) or len(entry) != 3
                or not all(isinstance(v, int) and not isinstance(v, bool) for v in entry)):
            raise ContainerConfigError(f"{where}: each entry is [range_start, range_end, K], got {entry!r}")
        start, end, k = entry
        if start <= 0 or end <= 0 or start > end or k < 0:
            raise ContainerConfigError(f"{where}: {entry!r} needs 0 < range_start <= range_end and K >= 0")
        entries.append((start, end))
    entries.sort()
    if entries[0][0] != 1:
        raise ContainerConfigError(f"{where}: the first range must start at batch size 1")
    if any(later[0] <= earlier[1] for earlier, later in zip(entries, entries[1:])):
        raise ContainerConfigError(f"{where}: the batch-size ranges overlap")


def warnings(config: Mapping[str, Any] | None) -> list[str]:
    """One line each for what runs but is worth saying: synthetic acceptance; a lossy method that was allowed."""
    if not config:
        return []
    lines = []
    if config.get("rejection_sample_method") == "synthetic":
        lines.append("synthetic acceptance: vLLM accepts drafts by a configured rate, not by the target, so the "
                     "acceptance and speed it shows measure no drafter")
    refusal = lossy_refusal(config)
    if refusal is not None:
        lines.append(f"{refusal}; running it because {ALLOW_LOSSY_ENV} is set")
    return lines
