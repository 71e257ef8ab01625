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


SPECULATIVE_MODES = tuple(m.value for m in Mode if m is not Mode.OFF)  # p-eagle, eagle3, dflash
# other words people write for a mode (lower case, without spaces, '-' or '_'): only to name the mode in a refusal
# (`--mode peagle` -> "pass --mode p-eagle"); a mode is taken as Mode spells it (inputs.py's rule)
_OTHER_WORDS = {"peagle": Mode.P_EAGLE.value, "parallel": Mode.P_EAGLE.value, "none": Mode.OFF.value,
                "baseline": Mode.OFF.value}


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


def parse_mode(value: str, *, flag: str = "--mode") -> Mode:
    """The one mode parser (deploy, update, local, bench, advise, sweep --modes and --url): exactly a `Mode` value
    (a table: a new mode is one entry); `flag` names the option in the refusal."""
    from .inputs import choose

    return choose(value, flag, {m.value: m for m in Mode}, what="a mode", spellings=_OTHER_WORDS)


def parse_mode_with_k(value: str, k: object | None, *, flag: str = "--mode") -> Mode:
    """`parse_mode`, for a command that also took --k: a misspelt off given with --k is told both fixes at once (the
    spelling's hint alone would lead into the next refusal, '--k has no effect with --mode off')."""
    try:
        return parse_mode(value, flag=flag)
    except UsageError as exc:
        if k is not None and exc.hint == f"pass {flag} {Mode.OFF.value}":
            raise UsageError(exc.message, f"pass {flag} {Mode.OFF.value} and drop --k (off drafts nothing, so it "
                                          "takes no K)") from None
        raise


def parse_modes(text: str, *, flag: str = "--modes", example: str = "off,eagle3,p-eagle") -> list[Mode]:
    """A comma-separated list of modes, each as `parse_mode` takes it."""
    from .inputs import choose_many

    return choose_many(text, flag, {m.value: m for m in Mode}, what="a mode", spellings=_OTHER_WORDS,
                       example=example)


def parse_k(value: str | int | None, *, max_k: int, model: str) -> int | None:
    """K from the command line: a whole number (inputs.py's rule) from 1 to the drafter's trained depth (never beyond
    inputs.MAX_K, the bound every command shares)."""
    from .inputs import MAX_K, read_number

    if value is None:
        return None
    max_k = min(max_k, MAX_K)
    k = value if isinstance(value, int) else read_number(str(value), "--k", whole=True)
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
