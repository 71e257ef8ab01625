"""One way for the emulator's modules to patch moto: on top of what is already there."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any
from unittest import mock


@contextmanager
def stacked(owner: Any, name: str, make: Callable[[Any], Any]) -> Iterator[None]:
    """Patch `owner.name` with `make(current)`, where `current` is what is there when the patch starts (so it
    stacks on the emulator's own patches of the same method instead of bypassing them); nothing when absent."""
    current = getattr(owner, name, None)
    if current is None:
        yield
        return
    with mock.patch.object(owner, name, make(current)):
        yield
