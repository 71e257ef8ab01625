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
acknowledgment for the read timeout, and a second Ctrl-C meanwhile merges with the first. So every signal Python
takes is also written, one byte each, to a wakeup pipe (`signal.set_wakeup_fd`) that only the main thread's
handler reads: each byte is one signal, never merged. A watcher thread interrupts the main thread with SIGURG
(ignored by default; here it runs the same handler) whenever a byte waits unread, until none does. No lock:
a handler may run inside another in the main thread, which then leaves the pipe to the outer one.
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
        self._pipe: _WakeupPipe | None = None
        self._unread: list[int] = []  # signals read from the pipe, not taken yet (one raised before them)
        self._reading = False  # a handler is reading the pipe: one that runs inside it leaves the pipe to it

    def __enter__(self) -> SignalGuard:
        if self.enabled:
            for signum in SIGNALS:
                self._previous[signum] = signal.signal(signum, self._handle)
            if NUDGE is not None and hasattr(signal, "pthread_kill"):  # POSIX; elsewhere the handlers alone
                self._previous[NUDGE] = signal.signal(NUDGE, self._handle)
                self._pipe = _WakeupPipe(lambda: bool(self._unread))
        return self

    def __exit__(self, *exc_info: object) -> None:
        if self._pipe is not None:
            self._pipe.close()
            self._pipe = None
        for signum, previous in self._previous.items():
            signal.signal(signum, previous)
        self._previous.clear()

    @property
    def signalled(self) -> bool:
        return bool(self.received)

    def _handle(self, signum: int, _frame: FrameType | None) -> None:
        if self._pipe is None:  # no wakeup pipe (or closed): this call's signal, as Python reports it
            if signum in SIGNALS:  # a late SIGURG from the watcher says nothing
                self._take(signum)
            return
        if self._reading:  # inside the handler that is reading the pipe: it reads this signal's byte too
            return
        self._reading = True
        try:
            while self._unread or self._read_pipe():
                self._take(self._unread.pop(0))  # one that raises leaves the rest for the next call
        finally:
            self._reading = False

    def _read_pipe(self) -> bool:
        assert self._pipe is not None
        self._unread += [s for s in self._pipe.read() if s in SIGNALS]  # SIGURG's own bytes say nothing
        return bool(self._unread)

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


class _WakeupPipe:
    """The pipe Python writes each signal's number to, and the thread that interrupts the main thread (SIGURG)
    while a byte waits unread in it (or `unread()`: read, not taken yet)."""

    def __init__(self, unread: Any):
        self.unread = unread
        self.main = threading.main_thread().ident
        self.read_fd, self.write_fd = os.pipe()
        self.stop_read, self.stop_write = os.pipe()
        for fd in (self.read_fd, self.write_fd):
            os.set_blocking(fd, False)
        self.stopping = threading.Event()
        self.old_wakeup_fd = signal.set_wakeup_fd(self.write_fd, warn_on_full_buffer=False)
        self.thread = threading.Thread(target=self._watch, name="peagle-signal-watcher", daemon=True)
        self.thread.start()

    def read(self) -> bytes:
        """Everything waiting (the main thread's handler only)."""
        data = b""
        while True:
            try:
                chunk = os.read(self.read_fd, 512)
            except BlockingIOError:
                return data
            if not chunk:
                return data
            data += chunk

    def _waiting(self) -> bool:
        return bool(select.select([self.read_fd], [], [], 0)[0]) or self.unread()

    def _watch(self) -> None:
        signal.pthread_sigmask(signal.SIG_BLOCK, SIGNALS)  # never this thread: the kernel may pick any that allows
        while True:
            ready, _, _ = select.select([self.read_fd, self.stop_read], [], [])
            if self.stop_read in ready:
                return
            # a signal came: the main thread's handler normally reads it at once; interrupt it until it has
            while not self.stopping.wait(NUDGE_AFTER_S) and self._waiting():
                try:
                    signal.pthread_kill(self.main, NUDGE)
                except (OSError, ValueError):  # the main thread is gone: nobody left to tell
                    return

    def close(self) -> None:
        self.stopping.set()
        os.write(self.stop_write, b"x")
        self.thread.join(5)
        signal.set_wakeup_fd(self.old_wakeup_fd)
        for fd in (self.read_fd, self.write_fd, self.stop_read, self.stop_write):
            os.close(fd)
