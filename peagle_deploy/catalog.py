"""The four supported models. Their data lives in templates/models/*.toml, validated here at load.

A model's `[dflash]` table, where it has one, names its public DFlash drafter (the hub repository, the revision
`peagle drafter stage` fetches, the files it needs) and K as DFlash counts it: the mask slots of one block, at most
the drafter's block size less one (vLLM's "one bonus query followed by K mask queries", vllm/config/speculative.py).
"""

from __future__ import annotations

import difflib
import tomllib
from functools import cache

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from .errors import UsageError
from .resources import templates_dir


class DFlashDrafter(BaseModel):
    """A public DFlash drafter for one model, as peagle ships it (the hub is not asked for any of it offline)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    repo: str = Field(pattern=r"^[A-Za-z0-9][\w.-]*/[\w.-]+$", description="the hub repository (owner/name)")
    revision: str = Field(description="the revision `drafter stage` fetches: a commit, or a branch where no commit "
                                      "was pinned (then `unverified` says so and the stage records the commit)")
    target_repo: str = Field(description="the target model's own hub repository, which the drafter must name")
    files: list[str] = Field(description="what the stage fetches (hub allow patterns): config and weights")
    default_k: int = Field(gt=0)
    max_k: int = Field(gt=0, description="the block size less one: the mask slots one block drafts")
    gated: bool = Field(False, description="the repository asks for a token (HF_TOKEN) to download")
    license: str | None = Field(None, description="as shipped; None: read from the hub at stage time")
    unverified: dict[str, str] = Field(default_factory=dict, description="field -> why it is not verified")

    @model_validator(mode="after")
    def _consistent(self) -> DFlashDrafter:
        if self.default_k > self.max_k:
            raise ValueError(f"dflash default_k {self.default_k} exceeds max_k {self.max_k}")
        unknown = set(self.unverified) - set(type(self).model_fields)
        if unknown:
            raise ValueError(f"dflash.unverified names unknown fields: {sorted(unknown)}")
        return self


class ModelEntry(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    alias: str = Field(pattern=r"^[a-z0-9][a-z0-9-]*$")
    display_name: str
    model_id: str
    default_instance_type: str
    default_k: int = Field(gt=0)
    max_k: int = Field(gt=0, description="the deepest K the drafter was trained to predict in parallel")
    gated: bool = Field(description="weights under a licence the user must accept (--accept-eula)")
    drafter_repo: str | None = Field(default=None, description="the public P-EAGLE drafter head on Hugging Face")
    dflash: DFlashDrafter | None = Field(None, description="its public DFlash drafter; None: it has none")
    summary: str = ""
    unverified: dict[str, str] = Field(default_factory=dict,
                                       description="field -> why its value could not be verified")

    @model_validator(mode="after")
    def _consistent(self) -> ModelEntry:
        if self.default_k > self.max_k:
            raise ValueError(f"default_k {self.default_k} exceeds max_k {self.max_k}")
        unknown = set(self.unverified) - set(type(self).model_fields)
        if unknown:
            raise ValueError(f"unverified names unknown fields: {sorted(unknown)}")
        return self

    def is_verified(self, field: str) -> bool:
        return field not in self.unverified

    def k_bounds(self, mode: str) -> tuple[int, int]:
        """(default K, deepest K) of the drafter `mode` runs: DFlash's own, else the P-EAGLE head's."""
        if mode == "dflash" and self.dflash is not None:
            return self.dflash.default_k, self.dflash.max_k
        return self.default_k, self.max_k


def with_dflash() -> list[str]:
    """The aliases of the models that have a DFlash drafter."""
    return [alias for alias, entry in load_catalog().items() if entry.dflash is not None]


def require_dflash(entry: ModelEntry) -> DFlashDrafter:
    """The model's DFlash drafter, or one line naming the models that have one."""
    if entry.dflash is None:
        raise UsageError(f"{entry.alias} has no DFlash drafter",
                         f"--mode dflash is for {', '.join(with_dflash())}; use --mode p-eagle, eagle3 or off "
                         f"for {entry.alias}")
    return entry.dflash


@cache
def load_catalog() -> dict[str, ModelEntry]:
    """alias -> entry, from every templates/models/*.toml (a broken file is a packaging bug: fail loudly)."""
    entries: dict[str, ModelEntry] = {}
    for path in sorted((templates_dir() / "models").glob("*.toml")):
        try:
            entry = ModelEntry.model_validate(tomllib.loads(path.read_text(encoding="utf-8")))
        except (ValidationError, tomllib.TOMLDecodeError) as exc:
            raise RuntimeError(f"invalid model file {path.name}: {exc}") from exc
        if entry.alias in entries:
            raise RuntimeError(f"duplicate model alias {entry.alias!r} in {path.name}")
        entries[entry.alias] = entry
    return entries


def get_model(alias: str) -> ModelEntry:
    """The entry for an alias (or a JumpStart model id); unknown names suggest the closest alias."""
    catalog = load_catalog()
    if alias in catalog:
        return catalog[alias]
    for entry in catalog.values():
        if entry.model_id == alias:
            return entry
    key = alias.strip().lower()  # only to name the model meant (peagle takes it as `peagle models` spells it)
    meant = catalog[key].alias if key in catalog else next((e.alias for e in catalog.values() if e.model_id == key),
                                                           None)
    if meant is not None:
        raise UsageError(f"unknown model {alias!r}", f"pass {meant} (as peagle models spells it)")
    close = difflib.get_close_matches(key, list(catalog), n=1, cutoff=0.4)
    hint = f"did you mean {close[0]!r}?" if close else ""
    hint = (hint + " " if hint else "") + f"choose one of {', '.join(catalog)} (see peagle models)"
    raise UsageError(f"unknown model {alias!r}", hint)
