"""SIGINT, SIGTERM and SIGHUP all mean 'stop and roll back' (docker stop, Kubernetes and CI cancellation
send SIGTERM; a closed terminal sends SIGHUP).

`SignalGuard` turns each into `Signalled` (a KeyboardInterrupt, so every `except Exception` lets it
through) in the main thread. Inside `guard.critical(...)` (a create call in flight) the first signal is
deferred until the call returns: its answer then says what exists, so the rollback knows instead of
guessing. A second signal interrupts at once (the answer is then lost, and the rollback reconciles by
name and tag). Each signal is acknowledged at once on stderr with a raw write (safe inside a handler).
"""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType
from typing import Any

SIGNALS = tuple(getattr(signal, name) for name in ("SIGINT", "SIGTERM", "SIGHUP") if hasattr(signal, name))


class Signalled(KeyboardInterrupt):
    def __init__(self, signum: int):
        super().__init__(signal.Signals(signum).name)
        self.signum = signum
        self.name = signal.Signals(signum).name


class SignalGuard:
    def __init__(self, what: str = "stopping", *, enabled: bool = True):
        self.what = what
        self.enabled = enabled and threading.current_thread() is threading.main_thread()
        self.received: list[str] = []
        self._previous: dict[int, Any] = {}
        self._critical: str | None = None
        self._pending: int | None = None

    def __enter__(self) -> SignalGuard:
        if self.enabled:
            for signum in SIGNALS:
                self._previous[signum] = signal.signal(signum, self._handle)
        return self

    def __exit__(self, *exc_info: object) -> None:
        for signum, previous in self._previous.items():
            signal.signal(signum, previous)
        self._previous.clear()

    @property
    def signalled(self) -> bool:
        return bool(self.received)

    def _handle(self, signum: int, _frame: FrameType | None) -> None:
        name = signal.Signals(signum).name
        first = not self.received
        self.received.append(name)
        if self._critical and first:
            self._pending = signum
            _say(f"peagle: received {name}: letting {self._critical} finish, then {self.what}")
            return
        _say(f"peagle: received {name}: {self.what}" if first else
             f"peagle: received {name} again: stopping now, the cleanup command follows")
        raise Signalled(signum)

    @contextmanager
    def critical(self, label: str) -> Iterator[None]:
        """A call whose answer must not be lost: a first signal waits until it returns."""
        self._critical = label
        try:
            yield
        finally:
            self._critical = None
            pending, self._pending = self._pending, None
            if pending is not None:
                raise Signalled(pending)


def _say(text: str) -> None:
    try:
        os.write(2, (text + "\n").encode())
    except OSError:
        pass
