"""`peagle drafter stage`: a model's public DFlash drafter from the hub into the user's S3 bucket, checked.

1. What to fetch comes from the catalog (templates/models/<model>.toml `[dflash]`: repository, revision, file
   patterns). `plan_stage` adds what the hub says (the commit the revision is at, each file's size and LFS sha256 or
   git blob id, the license, whether it is gated) through huggingface_hub's `model_info`; offline (--offline,
   HF_HUB_OFFLINE, or no answer) those are "unknown offline", never guessed.
2. `stage` downloads each file at that commit (huggingface_hub's `hf_hub_download`, into a temporary directory;
   no token unless the repository asks for one: then HF_TOKEN or the token `hf auth login` stored, registered with
   redaction so no output prints it), checks each file against the hub's checksum (LFS sha256; else the git blob
   id), checks the drafter (a DFlash config, a mask token id, its block size against K, the target model it names),
   shows the license, then uploads with boto3's managed transfer (multipart, progress) and records where it is
   (`drafters.py`).

huggingface_hub is imported lazily, only here (the `hub` extra); `peagle --help` never imports it.
"""

from __future__ import annotations

import fnmatch
import hashlib
import json
import os
import tempfile
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from .catalog import DFlashDrafter, ModelEntry, require_dflash
from .drafters import MANIFEST, StagedDrafter, StagedFile, write_record
from .errors import PeagleError, UsageError

UNKNOWN_OFFLINE = "unknown offline"
HUB_EXTRA = "pip install 'peagle-deploy[hub]' (huggingface_hub)"
TARGET_KEYS = ("target_model", "target_model_name_or_path", "target_model_id", "base_model", "base_model_name_or_path")
Progress = Callable[[str], None]


class HubFile(BaseModel):
    path: str
    size: int | None = None
    sha256: str | None = Field(None, description="the hub's LFS sha256 (large files)")
    blob_id: str | None = Field(None, description="the hub's git blob id (small files)")


class StagePlan(BaseModel):
    """What a stage fetches and where it puts it; `--dry-run` prints this and stops."""

    model: str
    method: str = "dflash"
    repo: str
    revision: str
    commit: str | None = Field(None, description="the commit the hub serves the revision at; None: not asked")
    hub: str = Field(description="the hub endpoint (HF_ENDPOINT, else huggingface.co)")
    patterns: list[str]
    files: list[HubFile] = Field(default_factory=list, description="the repository's files the patterns select")
    size_bytes: int | None = None
    license: str | None = None
    license_source: str
    gated: bool | None = None
    token: str = Field(description="whether a token is sent, and why")
    to: str
    region: str
    hub_answer: str = Field(description="what the hub said, or why it was not asked")
    not_fetched: str | None = Field(None, description="why a stage could not fetch now (offline, no answer)")
    unverified: dict[str, str] = Field(default_factory=dict)

    def describe_size(self) -> str:
        if self.size_bytes is None:
            return UNKNOWN_OFFLINE if self.commit is None else "unknown (the hub gave no sizes)"
        return f"{_human(self.size_bytes)} in {len(self.files)} files"


def _human(size: float) -> str:
    for unit in ("B", "kB", "MB", "GB"):
        if size < 1000 or unit == "GB":
            return f"{size:,.0f} {unit}" if unit == "B" else f"{size:,.1f} {unit}"
        size /= 1000
    return f"{size:,.1f} GB"


def hub_endpoint() -> str:
    return (os.environ.get("HF_ENDPOINT") or "https://huggingface.co").rstrip("/")


def _offline_env() -> bool:
    return os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in ("1", "true", "yes", "on")


def _hub() -> Any:
    """huggingface_hub, imported on first use; one line naming the extra when it is not installed."""
    try:
        import huggingface_hub
    except ImportError:
        raise UsageError("peagle drafter stage needs huggingface_hub to fetch from the hub", HUB_EXTRA) from None
    return huggingface_hub


def selected(paths: list[str], patterns: list[str]) -> list[str]:
    return [p for p in paths if any(fnmatch.fnmatch(p, pattern) for pattern in patterns)]


def _token() -> str | None:
    """The user's hub token (HF_TOKEN, else what `hf auth login` stored), registered as a secret; None: none."""
    token = os.environ.get("HF_TOKEN") or os.environ.get("HUGGING_FACE_HUB_TOKEN")
    if not token:
        try:
            token = _hub().get_token()
        except Exception:  # noqa: BLE001 - no stored token is the same as none
            token = None
    if token:
        from .redaction import register_secret

        register_secret(token, "HF_TOKEN")
    return token or None


class HubRefused(UsageError):
    """The hub answered 401/403: the repository asks for a token (whose account accepted its terms)."""


class HubUnreachable(UsageError):
    """The hub did not answer (offline, no route, a timeout)."""


def unreachable(dflash: DFlashDrafter, model: str, why: str) -> UsageError:
    return HubUnreachable(f"cannot fetch the {model} DFlash drafter {dflash.repo}@{dflash.revision}: {why}",
                      f"where the hub is reachable run `peagle drafter stage {model} --method dflash --to "
                      "s3://BUCKET/PREFIX` (HF_ENDPOINT names a mirror); --dry-run shows what it would fetch")


def _hub_error(exc: BaseException, dflash: DFlashDrafter, model: str) -> PeagleError:
    """A hub failure as one line: not found, gated without a token, or not reachable."""
    name = type(exc).__name__
    status = getattr(getattr(exc, "response", None), "status_code", None)
    if name in ("RepositoryNotFoundError", "RevisionNotFoundError", "EntryNotFoundError") or status == 404:
        what = "revision" if name == "RevisionNotFoundError" else "repository"
        return UsageError(f"the hub has no {what} {dflash.repo}@{dflash.revision} ({hub_endpoint()})",
                          "check HF_ENDPOINT; the catalog's repository may have moved (templates/models/"
                          f"{model}.toml)")
    if name == "GatedRepoError" or status in (401, 403):
        return HubRefused(f"the hub refused {dflash.repo} ({status or name}): the repository asks for a token "
                          "whose account accepted its terms", "accept the terms on the hub, then set HF_TOKEN")
    return unreachable(dflash, model, f"the hub at {hub_endpoint()} did not answer ({name})")


def _info(dflash: DFlashDrafter, model: str, token: str | bool) -> Any:
    hub = _hub()
    api = hub.HfApi(endpoint=hub_endpoint(), token=token)
    try:
        return api.model_info(dflash.repo, revision=dflash.revision, files_metadata=True)
    except Exception as exc:  # noqa: BLE001 - classified into one line
        raise _hub_error(exc, dflash, model) from None


def _card(info: Any, key: str) -> Any:
    card = getattr(info, "card_data", None) or getattr(info, "cardData", None)
    if card is None:
        return None
    return card.get(key) if hasattr(card, "get") else getattr(card, key, None)


def plan_stage(entry: ModelEntry, to: str, region: str, *, offline: bool) -> tuple[StagePlan, Any]:
    """The plan, and the hub's model info when it was asked (None offline)."""
    dflash = require_dflash(entry)
    plan = StagePlan(model=entry.alias, repo=dflash.repo, revision=dflash.revision, hub=hub_endpoint(),
                     patterns=dflash.files, license=dflash.license,
                     license_source="the catalog" if dflash.license else UNKNOWN_OFFLINE,
                     token="none unless the repository asks for one (then HF_TOKEN)", to=to, region=region,
                     hub_answer="not asked", unverified=dict(dflash.unverified))
    if offline or _offline_env():
        plan.not_fetched = "--offline" if offline else "HF_HUB_OFFLINE is set"
        plan.hub_answer = f"not asked: {plan.not_fetched}"
        return plan, None
    try:
        info = _info(dflash, entry.alias, token=False)
    except HubRefused:  # gated: ask again with the user's token, if there is one
        token = _token()
        if token is None:
            raise
        info = _info(dflash, entry.alias, token=token)
        plan.token = "HF_TOKEN (the repository asks for one)"
    except HubUnreachable as exc:
        plan.not_fetched = exc.message.split(": ", 1)[-1]
        plan.hub_answer = f"{plan.not_fetched}: sizes and license are {UNKNOWN_OFFLINE}"
        return plan, None
    _fill(plan, info)
    return plan, info


def _fill(plan: StagePlan, info: Any) -> None:
    plan.commit = getattr(info, "sha", None)
    plan.gated = bool(getattr(info, "gated", False))
    files = []
    for sibling in getattr(info, "siblings", None) or []:
        lfs = getattr(sibling, "lfs", None)
        sha256 = (lfs.get("sha256") if isinstance(lfs, dict) else getattr(lfs, "sha256", None)) if lfs else None
        files.append(HubFile(path=sibling.rfilename, size=getattr(sibling, "size", None), sha256=sha256,
                             blob_id=getattr(sibling, "blob_id", None)))
    chosen = set(selected([f.path for f in files], plan.patterns))
    plan.files = [f for f in files if f.path in chosen]
    sizes = [f.size for f in plan.files]
    plan.size_bytes = sum(s for s in sizes if s is not None) if plan.files and None not in sizes else None
    license = _card(info, "license")
    if license:
        plan.license, plan.license_source = str(license), "the hub's model card"
    plan.hub_answer = f"{plan.repo}@{plan.revision} is commit {plan.commit}"
    if plan.commit and plan.revision != plan.commit:
        plan.unverified.pop("revision", None)
        plan.unverified["commit"] = (f"the catalog pins the branch {plan.revision}, which the hub now serves at "
                                     f"{plan.commit}; the stage records that commit")


# the drafter's own checks -----------------------------------------------------------------------------------------
def _git_blob_id(path: Path) -> str:
    digest = hashlib.sha1(f"blob {path.stat().st_size}\0".encode())  # noqa: S324 - git's object id, not security
    with path.open("rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def check_file(path: Path, hub: HubFile) -> StagedFile:
    """The downloaded bytes against the hub's size and checksum (LFS sha256, else git blob id)."""
    size, sha256 = path.stat().st_size, _sha256(path)
    if hub.size is not None and size != hub.size:
        raise UsageError(f"{hub.path} from the hub is {size} bytes, the hub lists {hub.size}: nothing was uploaded",
                         "stage again (an interrupted download); if it persists, the hub's copy is inconsistent")
    if hub.sha256:
        if sha256 != hub.sha256:
            raise UsageError(f"{hub.path} from the hub has sha256 {sha256}, the hub's LFS record says {hub.sha256}: "
                             "nothing was uploaded", "stage again; if it persists, report it to the repository")
        checked = "the hub's LFS sha256"
    elif hub.blob_id:
        if _git_blob_id(path) != hub.blob_id:
            raise UsageError(f"{hub.path} from the hub does not match its git blob id {hub.blob_id}: nothing was "
                             "uploaded", "stage again; if it persists, report it to the repository")
        checked = "the hub's git blob id"
    else:
        checked = "nothing the hub gave (recorded only)"
    return StagedFile(path=hub.path, size=size, sha256=sha256, checked_against=checked)


def _names(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, (list, tuple)):
        return [v for v in value if isinstance(v, str)]
    return []


def check_config(config: Any, dflash: DFlashDrafter, model: str, card_base: Any) -> tuple[str, int | None]:
    """A DFlash drafter for this model: (how the target was checked, its block size). UsageError otherwise."""
    if not isinstance(config, dict):
        raise UsageError(f"{dflash.repo}'s config.json is not a JSON object", "check the catalog's repository")
    architectures = _names(config.get("architectures"))
    dflash_config = config.get("dflash_config") if isinstance(config.get("dflash_config"), dict) else {}
    if not dflash_config and not any("dflash" in a.lower() for a in architectures):
        raise UsageError(f"{dflash.repo} is not a DFlash drafter (config.json has no dflash_config and its "
                         f"architectures are {architectures or 'none'})", "check the catalog's repository")
    from .container.vllm_version import ANY_VERSION_KEYS, has_key

    if not any(has_key(config, key) for key in ANY_VERSION_KEYS):
        raise UsageError(f"{dflash.repo}'s config.json names no mask token id (one of {', '.join(ANY_VERSION_KEYS)})",
                         "vLLM refuses such a drafter at start-up; check the catalog's repository")
    block = config.get("block_size", dflash_config.get("block_size"))
    block = block if isinstance(block, int) and not isinstance(block, bool) and block > 1 else None
    named = [(f"config.json {key}", name) for key in TARGET_KEYS for name in _names(config.get(key))]
    named += [(f"config.json dflash_config.{key}", name) for key in TARGET_KEYS
              for name in _names(dflash_config.get(key))]
    named += [("the model card's base_model", name) for name in _names(card_base)]
    target = dflash.target_repo.lower()
    short = target.rsplit("/", 1)[-1]
    for where, name in named:
        if name.lower() == target or name.lower().rsplit("/", 1)[-1] == short:
            return f"verified: {where} names {name}", block
    if named:
        where, name = named[0]
        raise UsageError(f"{dflash.repo} was made for {name} ({where}), not {dflash.target_repo} ({model})",
                         "check the catalog's repository")
    return (f"not verified: neither config.json ({', '.join(TARGET_KEYS)}) nor the model card names a target "
            f"model; peagle's catalog pairs it with {dflash.target_repo}"), block


# the stage --------------------------------------------------------------------------------------------------------
def _download(plan: StagePlan, dflash: DFlashDrafter, token: str | bool, into: Path, progress: Progress) -> None:
    hub = _hub()
    for number, hub_file in enumerate(plan.files, start=1):
        size = f" ({_human(hub_file.size)})" if hub_file.size is not None else ""
        progress(f"downloading {hub_file.path}{size}, file {number} of {len(plan.files)}")
        try:
            hub.hf_hub_download(plan.repo, hub_file.path, revision=plan.commit or plan.revision, local_dir=into,
                                token=token, endpoint=plan.hub)
        except Exception as exc:  # noqa: BLE001 - classified into one line
            raise _hub_error(exc, dflash, plan.model) from None


def _upload(s3: Any, bucket: str, prefix: str, root: Path, files: list[StagedFile], progress: Progress) -> None:
    """boto3's managed transfer (multipart above its threshold, parallel parts), reporting bytes as they go."""
    from boto3.s3.transfer import TransferConfig

    total, sent = sum(f.size for f in files) or 1, 0
    config = TransferConfig(multipart_threshold=64 * 1024 * 1024, multipart_chunksize=64 * 1024 * 1024)
    for staged in files:
        def moved(count: int, name: str = staged.path) -> None:
            nonlocal sent
            sent += count
            progress(f"uploading {name}: {_human(sent)} of {_human(total)} ({sent / total:.0%})")

        s3.upload_file(str(root / staged.path), bucket, f"{prefix}/{staged.path}", Callback=moved, Config=config)


def abort_leftovers(s3: Any, bucket: str, prefix: str) -> list[str]:
    """Abort the unfinished multipart uploads under `prefix/` (a stage killed mid-upload leaves its parts, which S3
    bills and no listing of objects shows); returns their keys. The stage that follows writes the same keys.
    Raises what the list raises (the caller says what could not be looked at)."""
    pages = s3.get_paginator("list_multipart_uploads").paginate(Bucket=bucket, Prefix=f"{prefix}/")
    uploads = [u for page in pages for u in page.get("Uploads", [])]
    for upload in uploads:
        s3.abort_multipart_upload(Bucket=bucket, Key=upload["Key"], UploadId=upload["UploadId"])
    return [u["Key"] for u in uploads]


def stage(plan: StagePlan, info: Any, entry: ModelEntry, *, s3: Any, bucket: str, prefix: str,
          progress: Progress, show_license: Callable[[StagePlan], None],
          before_upload: Callable[[], None] = lambda: None) -> StagedDrafter:
    """Fetch, check, show the license, upload, record. `info`: the hub's answer from `plan_stage` (needed).
    `before_upload`: run once the license is accepted, before the first byte goes (`abort_leftovers`)."""
    dflash = require_dflash(entry)
    if info is None:
        raise unreachable(dflash, entry.alias, plan.not_fetched or plan.hub_answer)
    if not plan.files:
        raise UsageError(f"{plan.repo}@{plan.commit} has no file the catalog's patterns ({', '.join(plan.patterns)}) "
                         "select", f"check templates/models/{entry.alias}.toml")
    if "config.json" not in {f.path for f in plan.files}:
        raise UsageError(f"{plan.repo}@{plan.commit} has no config.json", "check the catalog's repository")
    token: str | bool = False
    if plan.gated or plan.token.startswith("HF_TOKEN"):
        token = _token() or False
        if token is False:
            raise UsageError(f"{plan.repo} asks for a token to download", "accept its terms on the hub, then set "
                             "HF_TOKEN")
    with tempfile.TemporaryDirectory(prefix="peagle-drafter-") as tmp:
        root = Path(tmp)
        _download(plan, dflash, token, root, progress)
        files = [check_file(root / f.path, f) for f in plan.files]
        try:
            config = json.loads((root / "config.json").read_text(encoding="utf-8"))
        except (OSError, ValueError):
            raise UsageError(f"{plan.repo}'s config.json is not JSON", "check the catalog's repository") from None
        target_check, block = check_config(config, dflash, entry.alias, _card(info, "base_model"))
        if block is not None and dflash.max_k > block - 1:
            raise UsageError(f"{plan.repo} drafts blocks of {block} tokens, so K is at most {block - 1}; the catalog "
                             f"allows {dflash.max_k}", f"set max_k = {block - 1} in templates/models/{entry.alias}.toml")
        show_license(plan)
        uri = f"s3://{bucket}/{prefix}/"
        staged = StagedDrafter(model=entry.alias, repo=plan.repo, revision=plan.revision, commit=plan.commit,
                               license=plan.license, target_check=target_check, block_size=block, files=files,
                               s3_uri=uri, region=plan.region, staged_at=datetime.now(UTC).replace(microsecond=0))
        before_upload()
        _upload(s3, bucket, prefix, root, files, progress)
        s3.put_object(Bucket=bucket, Key=f"{prefix}/{MANIFEST}", Body=staged.model_dump_json(indent=2).encode(),
                      ContentType="application/json")
    write_record(staged)
    return staged
