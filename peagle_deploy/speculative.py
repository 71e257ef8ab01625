"""Speculative-decoding settings: mode and K -> the exact SM_VLLM_SPECULATIVE_CONFIG value.

vLLM (>= 0.16) facts this follows: always send "method": "eagle3" explicitly (with it unset vLLM guesses
from the drafter path and gets P-EAGLE heads wrong); `parallel_drafting` turns one-pass P-EAGLE drafting
on; `num_speculative_tokens` must be > 0; no `tensor_parallel_size` inside the speculative config.
DFlash (vLLM's method "dflash", a block-diffusion drafter that drafts K tokens in one pass) is its own method:
`{"method": "dflash", "model": ..., "num_speculative_tokens": K}` with `--attention-backend flash_attn` (its
drafter attends non-causally; BRIEF 16, vllm/config/speculative.py), mounted from its own channel.
"""

from __future__ import annotations

import json
from enum import StrEnum

from pydantic import BaseModel, ConfigDict, Field

from .errors import UsageError

ENV_VAR = "SM_VLLM_SPECULATIVE_CONFIG"
CHANNEL_ROOT = "/opt/ml/additional-model-data-sources"
DRAFTER_CHANNEL = "eagle"  # JumpStart's P-EAGLE drafter channel (P-EAGLE and EAGLE-3 share the head)
DRAFTER_PATH = f"{CHANNEL_ROOT}/{DRAFTER_CHANNEL}"
DFLASH_CHANNEL = "dflash"  # the DFlash drafter `peagle drafter stage` put in the user's bucket
DRAFTER_CHANNELS = (DRAFTER_CHANNEL, DFLASH_CHANNEL)  # every channel peagle mounts a drafter from
# DFlash's drafter attends to its block non-causally: vLLM needs an attention backend that can (BRIEF 16)
ATTENTION_ENV, DFLASH_ATTENTION_BACKEND = "SM_VLLM_ATTENTION_BACKEND", "flash_attn"


class Mode(StrEnum):
    P_EAGLE = "p-eagle"  # eagle3 method, parallel drafting: all K draft tokens in one drafter pass
    EAGLE3 = "eagle3"  # the same head drafting sequentially: K drafter passes (the comparison baseline)
    DFLASH = "dflash"  # vLLM's dflash method: a block-diffusion drafter, all K tokens in one pass (own drafter)
    OFF = "off"  # no speculation, no drafter channel: the plain baseline


# every spelling of a mode any command accepts, case, spaces, '-' and '_' aside: P-EAGLE, peagle, EAGLE-3, none,
# DFlash. A new mode is one entry here (and one in Mode).
_MODE_SPELLINGS = {"peagle": Mode.P_EAGLE, "eagle3": Mode.EAGLE3, "dflash": Mode.DFLASH, "off": Mode.OFF,
                   "none": Mode.OFF}
SPECULATIVE_MODES = tuple(m.value for m in Mode if m is not Mode.OFF)  # p-eagle, eagle3, dflash


def drafter_channel(mode: Mode) -> str | None:
    """The data channel a mode's drafter is mounted from (None: no drafter)."""
    return {Mode.P_EAGLE: DRAFTER_CHANNEL, Mode.EAGLE3: DRAFTER_CHANNEL, Mode.DFLASH: DFLASH_CHANNEL}.get(mode)


def mode_of(method: object, parallel_drafting: object) -> str | None:
    """The peagle mode a vLLM speculative config names (eagle3 needs parallel_drafting said: True or False/absent
    as sent); None when it names none of peagle's."""
    if method == "dflash":
        return Mode.DFLASH.value
    if method == "eagle3" and isinstance(parallel_drafting, bool):
        return (Mode.P_EAGLE if parallel_drafting else Mode.EAGLE3).value
    return None


def parse_mode(value: str, *, flag: str | None = None) -> Mode:
    """The one mode parser (deploy, update, local, bench, advise, sweep --modes and --url): `flag` names the option
    in the refusal."""
    key = "".join(ch for ch in (value or "").lower() if ch not in " _-")
    if key in _MODE_SPELLINGS:
        return _MODE_SPELLINGS[key]
    message = f"{flag} {value!r} is not a mode" if flag else f"unknown mode {value!r}"
    raise UsageError(message, f"use one of {', '.join(m.value for m in Mode)}")


def parse_k(value: str | int | None, *, max_k: int, model: str) -> int | None:
    """K from the command line: a whole number from 1 to the drafter's trained depth (never beyond numbers.MAX_K,
    the bound every command shares)."""
    from .numbers import MAX_K

    if value is None:
        return None
    max_k = min(max_k, MAX_K)
    text = str(value).strip()
    try:
        k = int(text)
    except ValueError:
        raise UsageError(f"--k must be a whole number, got {text!r}", f"pass --k 1..{max_k}") from None
    if k <= 0:
        raise UsageError(f"--k must be at least 1, got {k}", f"pass --k 1..{max_k}, or --mode off for no speculation")
    if k > max_k:
        if not model:  # the form only (the model is not known yet): the bound every command shares
            raise UsageError(f"--k {k} is above peagle's limit of {max_k}", f"pass --k 1..{max_k}")
        raise UsageError(
            f"--k {k} is deeper than the {model} drafter was trained for ({max_k})",
            f"pass --k 1..{max_k}",
        )
    return k


class SpeculativeSettings(BaseModel):
    model_config = ConfigDict(frozen=True)

    mode: Mode = Mode.P_EAGLE
    k: int | None = Field(default=None, gt=0, description="num_speculative_tokens; None when mode is off")

    @property
    def enabled(self) -> bool:
        return self.mode is not Mode.OFF

    def config(self) -> dict[str, object] | None:
        """The speculative config object, key order as JumpStart's own default."""
        if not self.enabled:
            return None
        if self.mode is Mode.DFLASH:
            return {"model": f"{CHANNEL_ROOT}/{DFLASH_CHANNEL}", "method": "dflash", "num_speculative_tokens": self.k}
        return {
            "model": DRAFTER_PATH,
            "method": "eagle3",
            "num_speculative_tokens": self.k,
            "parallel_drafting": self.mode is Mode.P_EAGLE,
        }

    def render(self) -> str | None:
        """The SM_VLLM_SPECULATIVE_CONFIG value, or None (the variable must be absent) when off."""
        config = self.config()
        return None if config is None else json.dumps(config)


def settings_for(mode: Mode, k: int | None, *, default_k: int) -> SpeculativeSettings:
    if mode is Mode.OFF:
        if k is not None:
            raise UsageError("--k has no effect with --mode off", "drop --k, or choose --mode p-eagle, eagle3 or dflash")
        return SpeculativeSettings(mode=mode, k=None)
    return SpeculativeSettings(mode=mode, k=k if k is not None else default_k)
