"""SIGINT, SIGTERM and SIGHUP all mean 'stop and roll back' (docker stop, Kubernetes and CI cancellation
send SIGTERM; a closed terminal sends SIGHUP).

`SignalGuard` turns each into `Signalled` (a KeyboardInterrupt, so every `except Exception` lets it
through) in the main thread. Inside `guard.critical(...)` (a create call in flight) the first signal is
deferred until the call returns: its answer then says what exists, so the rollback knows instead of
guessing. A second signal interrupts at once (the answer is then lost, and the rollback reconciles by
name and tag). Each signal is acknowledged at once on stderr with a raw write (safe inside a handler).

"At once" needs help while the main thread waits in a system call (an AWS answer): Python runs a handler only in
the main thread, between two bytecodes, and a signal can be taken at C level where that never wakes the main
thread: by another thread (numpy's OpenBLAS workers, started by sagemaker-core's import, take a process signal
like any thread), or in the few instructions between Python's last check and the `poll()` of a socket read. The
answer ends the wait, but an answer that never comes (a held call, a stalled network) would hold the
acknowledgment for the read timeout, and a second Ctrl-C meanwhile merges with the first. So the guard also
watches: every signal Python takes is written to a wakeup pipe (`signal.set_wakeup_fd`); a watcher thread counts
them and, while the main thread's handler has not taken them all, interrupts the main thread with SIGURG (its
default is to ignore) until it has; SIGURG's handler takes what is left. Counted signals are never merged.
"""

from __future__ import annotations

import os
import select
import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType
from typing import Any

SIGNALS = tuple(getattr(signal, name) for name in ("SIGINT", "SIGTERM", "SIGHUP") if hasattr(signal, name))
NUDGE = getattr(signal, "SIGURG", None)  # wakes the main thread: ignored by default, unused by peagle otherwise
NUDGE_AFTER_S = 0.05  # how long the main thread may leave a signal untaken before it is interrupted


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
        self._counts = _Counts()
        self._watcher: _Watcher | None = None

    def __enter__(self) -> SignalGuard:
        if self.enabled:
            for signum in SIGNALS:
                self._previous[signum] = signal.signal(signum, self._handle)
            if NUDGE is not None and hasattr(signal, "pthread_kill"):  # POSIX; elsewhere the handlers alone
                self._previous[NUDGE] = signal.signal(NUDGE, self._catch_up)
                self._watcher = _Watcher(self._counts)
        return self

    def __exit__(self, *exc_info: object) -> None:
        if self._watcher is not None:
            self._watcher.stop()
            self._watcher = None
        for signum, previous in self._previous.items():
            signal.signal(signum, previous)
        self._previous.clear()

    @property
    def signalled(self) -> bool:
        return bool(self.received)

    def _handle(self, signum: int, _frame: FrameType | None) -> None:
        self._counts.take_one(signum, forced=True)  # the watcher may not have counted it yet
        self._take(signum)
        self._catch_up(0, None)  # Python merges two signals into one call: the watcher counted both

    def _catch_up(self, _signum: int, _frame: FrameType | None) -> None:
        """Take, one by one, the signals the watcher counted that no handler call has taken yet (SIGURG's
        handler). One that raises leaves the rest counted: the watcher interrupts again, so the next is taken
        where the first led (a second Ctrl-C during the rollback stops the rollback)."""
        for signum in SIGNALS:
            while self._counts.take_one(signum):
                self._take(signum)

    def _take(self, signum: int) -> None:
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


class _Counts:
    """Signals seen at C level (by the watcher, one pipe byte each) and taken by the main thread's handler."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.seen = dict.fromkeys(SIGNALS, 0)
        self.taken = dict.fromkeys(SIGNALS, 0)

    def take_one(self, signum: int, *, forced: bool = False) -> bool:
        """Mark one signal of `signum` taken: one the watcher counted, or (forced) the one a handler call was made
        for before the watcher read its byte (it then finds it taken)."""
        with self.lock:
            if forced or self.seen[signum] > self.taken[signum]:
                self.taken[signum] += 1
                return True
            return False

    def add(self, data: bytes) -> None:
        with self.lock:
            for signum in data:
                if signum in self.seen:
                    self.seen[signum] += 1

    def behind(self) -> bool:
        with self.lock:
            return any(self.seen[s] > self.taken[s] for s in SIGNALS)


class _Watcher:
    """The thread that makes sure the main thread takes every signal promptly (see the module docstring)."""

    def __init__(self, counts: _Counts):
        self.counts = counts
        self.main = threading.main_thread().ident
        self.read_fd, self.write_fd = os.pipe()
        self.stop_read, self.stop_write = os.pipe()
        self.stopping = threading.Event()
        os.set_blocking(self.write_fd, False)
        self.old_wakeup_fd = signal.set_wakeup_fd(self.write_fd, warn_on_full_buffer=False)
        self.thread = threading.Thread(target=self._run, name="peagle-signal-watcher", daemon=True)
        self.thread.start()

    def _run(self) -> None:
        signal.pthread_sigmask(signal.SIG_BLOCK, SIGNALS)  # never this thread: the kernel may pick any that allows
        while True:
            ready, _, _ = select.select([self.read_fd, self.stop_read], [], [])
            if self.stop_read in ready:
                return
            self.counts.add(os.read(self.read_fd, 512))
            while self.counts.behind() and not self.stopping.wait(NUDGE_AFTER_S):
                if self.counts.behind():
                    try:
                        signal.pthread_kill(self.main, NUDGE)
                    except (OSError, ValueError):  # the main thread is gone: nobody left to tell
                        return

    def stop(self) -> None:
        self.stopping.set()
        os.write(self.stop_write, b"x")
        self.thread.join(5)
        signal.set_wakeup_fd(self.old_wakeup_fd)
        for fd in (self.read_fd, self.write_fd, self.stop_read, self.stop_write):
            os.close(fd)

