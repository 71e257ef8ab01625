"""Where the shipped data files (templates/) live, installed or in a checkout."""

from __future__ import annotations

from functools import cache
from pathlib import Path


@cache
def templates_dir() -> Path:
    """`templates/` is packaged as `peagle_deploy/_templates` in a wheel; a checkout uses the folder."""
    packaged = Path(__file__).parent / "_templates"
    if packaged.is_dir():
        return packaged
    return Path(__file__).resolve().parent.parent / "templates"
