"""Staged drafters: where `peagle drafter stage` put a model's DFlash drafter, so `deploy --mode dflash` finds it.

A stage leaves two records of the same facts (the hub repository, the revision asked for and the commit got, each
file with its size and checksum, the license, the S3 prefix and its region):
- `peagle-drafter.json` in the S3 prefix itself, beside the drafter's files (vLLM reads only config.json, the
  weights and the code; the record is provenance for whoever finds the prefix);
- a local record, `$PEAGLE_STATE_DIR/drafters/<model>-<method>.json` (else `$XDG_STATE_HOME/peagle/drafters`,
  else `~/.local/state/peagle/drafters`), which deploy, update, sweep and `local` read when no `--drafter` is
  given. `--drafter s3://BUCKET/PREFIX` always wins over it (another machine's stage, a prefix of your own).
"""

from __future__ import annotations

import os
from datetime import datetime
from pathlib import Path

from pydantic import BaseModel, Field, ValidationError

from .errors import UsageError

MANIFEST = "peagle-drafter.json"


class StagedFile(BaseModel):
    path: str
    size: int
    sha256: str = Field(description="of the bytes uploaded")
    checked_against: str = Field(description="what the hash was checked against: the hub's LFS sha256, the hub's "
                                             "git blob id, or 'nothing the hub gave' (then only recorded)")


class StagedDrafter(BaseModel):
    model: str = Field(description="peagle's alias of the target model")
    method: str = "dflash"
    repo: str
    revision: str = Field(description="the revision asked for (the catalog's)")
    commit: str | None = Field(None, description="the commit the hub served for it")
    license: str | None = None
    target_check: str = Field(description="how the drafter was found to name its target model")
    block_size: int | None = Field(None, description="the drafter config's block_size (K is at most this less one)")
    files: list[StagedFile]
    s3_uri: str = Field(description="s3://BUCKET/PREFIX/, the drafter channel's S3Uri")
    region: str | None = Field(None, description="the region the bucket was written in")
    staged_at: datetime


def records_dir() -> Path:
    if os.environ.get("PEAGLE_STATE_DIR"):
        return Path(os.environ["PEAGLE_STATE_DIR"]) / "drafters"
    base = Path(os.environ.get("XDG_STATE_HOME") or Path.home() / ".local" / "state")
    return base / "peagle" / "drafters"


def record_path(model: str, method: str = "dflash") -> Path:
    return records_dir() / f"{model}-{method}.json"


def write_record(staged: StagedDrafter) -> Path:
    from .safe_write import make_dir, write_text

    make_dir(records_dir(), private=True)
    return write_text(record_path(staged.model, staged.method), staged.model_dump_json(indent=2) + "\n", private=True)


def read_record(model: str, method: str = "dflash") -> StagedDrafter | None:
    """The local record of the model's staged drafter; None when there is none (a broken one is said in one line)."""
    path = record_path(model, method)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise UsageError(f"cannot read the staged-drafter record {path} ({exc.strerror or exc})",
                         "pass --drafter s3://BUCKET/PREFIX") from None
    try:
        return StagedDrafter.model_validate_json(text)
    except ValidationError:
        raise UsageError(f"the staged-drafter record {path} is not one peagle wrote",
                         f"stage the drafter again (peagle drafter stage {model} --method {method} --to "
                         "s3://BUCKET/PREFIX) or pass --drafter s3://BUCKET/PREFIX") from None


def locate(model: str, drafter: str | None, region: str) -> tuple[str | None, str | None]:
    """(the drafter channel's S3 prefix, where it came from) for --mode dflash: --drafter, else the local record of a
    stage (refused in one line when it is in another region: SageMaker reads model data in the endpoint's region);
    (None, None) when neither exists (the plan says what is missing)."""
    if drafter is not None:
        return drafter, "--drafter"
    staged = read_record(model)
    if staged is None:
        return None, None
    if staged.region and staged.region != region:
        raise UsageError(f"the {model} DFlash drafter was staged in {staged.region} ({staged.s3_uri}), the endpoint "
                         f"is in {region}: SageMaker reads a drafter channel from a bucket in the endpoint's region",
                         f"stage it in {region} (peagle drafter stage {model} --method dflash --region {region} "
                         "--to s3://BUCKET/PREFIX) or pass --drafter")
    when = f"{staged.staged_at:%Y-%m-%d %H:%M}"
    commit = f"@{staged.commit[:12]}" if staged.commit else f"@{staged.revision}"
    return staged.s3_uri, f"staged from {staged.repo}{commit} on {when}, {record_path(model)}"
