"""Shared by the `peagle local` and container-backend tests: `peagle` as a process (forked,
tests/forked_peagle.py), a stand-in `vllm` on PATH, tiny model directories the entrypoint accepts, a free port."""

from __future__ import annotations

import json
import os
import socket
import subprocess
from pathlib import Path

from peagle_deploy.testing.vllm_stand_in import install

from .conftest import PEAGLE
from .forked_peagle import forked_peagle

__all__ = ["PEAGLE", "free_port", "model_dirs", "peagle", "stand_in_env"]


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def model_dirs(root: Path, *, mask_token: bool = True) -> tuple[Path, Path]:
    """A target dir (any non-empty dir: the stand-in loads nothing) and a drafter whose config.json names a
    mask token (the entrypoint checks it before starting vLLM)."""
    target, drafter = root / "target", root / "drafter"
    target.mkdir(parents=True)
    drafter.mkdir(parents=True)
    (target / "config.json").write_text(json.dumps({"architectures": ["LlamaForCausalLM"]}))
    drafter_config = {"architectures": ["LlamaForCausalLMEagle3"]}
    if mask_token:
        drafter_config["mask_token_id"] = 4
    (drafter / "config.json").write_text(json.dumps(drafter_config))
    return target, drafter


def stand_in_env(root: Path, **extra: str) -> dict[str, str]:
    """This environment with the stand-in `vllm` first on PATH and a private peagle state directory."""
    bin_dir = root / "bin"
    if not (bin_dir / "vllm").exists():
        install(bin_dir)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "PEAGLE_", "SM_VLLM_"))}
    env.update(PATH=f"{bin_dir}{os.pathsep}{os.environ['PATH']}", PEAGLE_STATE_DIR=str(root / "state"),
               COLUMNS="200", **extra)
    return env


def peagle(*args: str, env: dict[str, str], timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run([forked_peagle(), *args], env=env, capture_output=True, text=True, timeout=timeout,
                          stdin=subprocess.DEVNULL)
