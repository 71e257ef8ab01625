"""The four supported models. Their data lives in templates/models/*.toml, validated here at load."""

from __future__ import annotations

import difflib
import tomllib
from functools import cache

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from .errors import UsageError
from .resources import templates_dir


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
