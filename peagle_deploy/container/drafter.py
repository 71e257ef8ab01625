"""Checks on a local P-EAGLE or DFlash drafter directory that vLLM would otherwise fail on a minute into start-up.

- config.json names a mask token id under a key the installed vLLM version reads (vllm_version.py);
- P-EAGLE: the weights hold `mask_hidden` (an EAGLE drafter's hidden state for the parallel slots);
- DFlash: config.json is a DFlash drafter's (`dflash_config`, or an architecture naming DFlash), its weights hold no
  `mask_hidden` (vLLM's DFlash loader asserts there is none: it embeds masked slots through the mask token), and K
  fits its block (`block_size`: one bonus query and K mask queries, vllm/config/speculative.py). Only the
  safetensors headers are read (8-byte little-endian length, then a JSON header), sharded checkpoints
  through their index (`model.safetensors.index.json` or `pytorch_model.bin.index.json`); the standard
  library is enough. Unsharded `.bin` (pickled torch) weights are opened with torch when it is installed
  (it always is beside vLLM): memory-mapped and weights-only, so only the names are materialised.
"""

from __future__ import annotations

import json
import os
import struct
from pathlib import Path
from typing import Any

from .args import ContainerConfigError
from .vllm_version import ANY_VERSION_KEYS, PARALLEL_DRAFTING_SINCE, has_key, mask_token_rule, release

MASK_HIDDEN = "mask_hidden"
INDEX_FILE = "model.safetensors.index.json"
INDEX_FILES = (INDEX_FILE, "pytorch_model.bin.index.json")
MAX_HEADER_BYTES = 100 * 1024 * 1024


def read_config(drafter: str) -> dict[str, Any]:
    path = os.path.join(drafter, "config.json")
    try:
        with open(path, encoding="utf-8") as handle:
            config = json.load(handle)
    except (OSError, ValueError) as exc:
        raise ContainerConfigError(f"cannot read drafter config {path}: {exc}") from None
    if not isinstance(config, dict):
        raise ContainerConfigError(f"drafter config {path} is not a JSON object")
    return config


def check_mask_token(config: dict[str, Any], path: str, vllm_version: str | None) -> None:
    """The version's rule; with the version unknown, any key some supported version reads."""
    if vllm_version is not None:
        key = release(vllm_version)
        if key is not None and key < PARALLEL_DRAFTING_SINCE:
            raise ContainerConfigError(f"vLLM {vllm_version} has no parallel drafting (it arrived in 0.16); "
                                       "use a newer vLLM image or set parallel_drafting to false")
    rule = mask_token_rule(vllm_version)
    keys = rule.keys if rule else ANY_VERSION_KEYS
    if any(has_key(config, k) for k in keys):
        return
    present = next((k for k in ANY_VERSION_KEYS if has_key(config, k)), None)
    wanted = next(k for k in keys if "." not in k)
    value = _value(config, present) if present else "<mask token id>"
    who = f"vLLM {vllm_version}" if rule else "vLLM"
    found = f" ({present} is not one of them)" if present else ""
    raise ContainerConfigError(f"drafter config {path} names no mask token id {who} reads "
                               f"({', '.join(keys)}){found}; add \"{wanted}\": {value}")


def _value(config: dict[str, Any], key: str) -> str:
    if key == "dflash_config.mask_token_id":
        return json.dumps(config["dflash_config"]["mask_token_id"])
    return json.dumps(config[key])


def safetensors_tensor_names(path: Path) -> set[str]:
    """Tensor names in one safetensors file's header, without reading the tensors."""
    try:
        with open(path, "rb") as handle:
            prefix = handle.read(8)
            if len(prefix) != 8:
                raise ValueError("shorter than a safetensors header")
            (size,) = struct.unpack("<Q", prefix)
            if size > MAX_HEADER_BYTES:
                raise ValueError(f"header length {size} is not plausible")
            header = json.loads(handle.read(size))
    except (OSError, ValueError) as exc:
        raise ContainerConfigError(f"cannot read drafter weights {path}: {exc}") from None
    if not isinstance(header, dict):
        raise ContainerConfigError(f"cannot read drafter weights {path}: header is not a JSON object")
    return {name for name in header if name != "__metadata__"}


def weight_names(drafter: str) -> set[str] | None:
    """All tensor names of the drafter's weights; None when it has none peagle can read."""
    root = Path(drafter)
    for index in (root / name for name in INDEX_FILES):
        if index.is_file():
            try:
                weight_map = json.loads(index.read_text(encoding="utf-8"))["weight_map"]
                return set(weight_map)
            except (OSError, ValueError, KeyError, TypeError) as exc:
                raise ContainerConfigError(f"cannot read {index}: {exc!r}") from None
    files = sorted(root.glob("*.safetensors"))
    if not files:
        return torch_bin_tensor_names(sorted(root.glob("*.bin")))
    names: set[str] = set()
    for file in files:
        names |= safetensors_tensor_names(file)
    return names


def torch_bin_tensor_names(files: list[Path]) -> set[str] | None:
    """Tensor names in pickled torch checkpoints; None without files or without torch to read them."""
    if not files:
        return None
    try:
        import torch  # only beside vLLM; the CLI never needs it
    except ImportError:
        return None
    names: set[str] = set()
    for file in files:
        try:
            state = torch.load(file, map_location="cpu", weights_only=True, mmap=True)
        except Exception as exc:  # noqa: BLE001 - torch raises many types for a corrupt file
            raise ContainerConfigError(f"cannot read drafter weights {file}: {exc}") from None
        if not isinstance(state, dict):
            raise ContainerConfigError(f"cannot read drafter weights {file}: not a state dict")
        names |= {str(name) for name in state}
    return names


def check_mask_hidden(drafter: str) -> None:
    """vLLM's EAGLE-3 loader matches any weight name containing `mask_hidden`."""
    names = weight_names(drafter)
    if names is None:
        return  # nothing readable (e.g. .bin weights without torch installed): vLLM will say
    if not any(MASK_HIDDEN in name for name in names):
        raise ContainerConfigError(f"drafter weights in {drafter} have no {MASK_HIDDEN} tensor; parallel drafting "
                                   f"with an EAGLE drafter needs one ([1, 3 x target hidden size]), or set "
                                   "parallel_drafting to false")


def check_dflash_drafter(drafter: str, config: dict[str, Any], k: int) -> None:
    """A DFlash drafter vLLM can load for this K."""
    nested = config.get("dflash_config")
    architectures = [a for a in config.get("architectures") or [] if isinstance(a, str)]
    if not isinstance(nested, dict) and not any("dflash" in a.lower() for a in architectures):
        raise ContainerConfigError(f"drafter config {os.path.join(drafter, 'config.json')} is not a DFlash drafter's "
                                   f"(no dflash_config; architectures {architectures or 'none'}); stage one with "
                                   "peagle drafter stage MODEL --method dflash")
    block = config.get("block_size", nested.get("block_size") if isinstance(nested, dict) else None)
    if isinstance(block, int) and not isinstance(block, bool) and block > 1 and k > block - 1:
        raise ContainerConfigError(f"num_speculative_tokens {k} does not fit the DFlash drafter's block of {block} "
                                   f"(one bonus and at most {block - 1} mask tokens); set K to {block - 1} or less")
    names = weight_names(drafter)
    if names is not None and any(MASK_HIDDEN in name for name in names):
        raise ContainerConfigError(f"drafter weights in {drafter} hold a {MASK_HIDDEN} tensor: that is a P-EAGLE "
                                   "head, not a DFlash drafter (vLLM's DFlash loader refuses it)")

