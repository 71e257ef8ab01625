"""`peagle` (the installed executable, or a forked one) as a child process whose stderr a test can wait on,
line by line (the fault tests' emulator fixtures, `emulator_server` and `emu`, are in conftest.py).

Every wait is for a cause (a line, a held call) or the child's exit, never a speed budget: a loaded 2-core machine
may take a minute to start a child. The bound (HANG_GUARD_S) only turns a hang into a failure. A child still
running when its test ends is killed (conftest's `_no_peagle_left_running`), so it cannot reach the next test's
gate."""

from __future__ import annotations

import queue
import subprocess
import threading
import time
import weakref

from peagle_deploy.testing.emulator import HANG_GUARD_S

from .conftest import PEAGLE

RUNNING: weakref.WeakSet[PeagleProcess] = weakref.WeakSet()


class PeagleProcess:
    def __init__(self, args: list[str], env: dict[str, str], program: str = PEAGLE):
        """`program`: the installed executable, or `forked_peagle()` (tests/forked_peagle.py)."""
        self.proc = subprocess.Popen([program, *args], env={**env, "COLUMNS": "200"}, stdin=subprocess.DEVNULL,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.stderr_lines: list[str] = []
        self._lines: queue.Queue[str | None] = queue.Queue()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        self.stdout = ""
        RUNNING.add(self)

    def _read(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.stderr_lines.append(line)
            self._lines.put(line)
        self._lines.put(None)

    def wait_for_gate(self, gate) -> None:
        """Until this child's call is held at `gate` (emulator.Gate); fails at once, with its stderr, if it exits."""
        try:
            gate.wait_entered(unless=lambda: self.proc.poll() is not None)
        except TimeoutError as exc:
            self._reader.join(5)
            raise AssertionError(f"{exc}: {self.stderr}") from None

    def wait_for_stderr(self, text: str, timeout: float = HANG_GUARD_S) -> str:
        """Block until a stderr line containing `text` arrives (or the child exits: a failure)."""
        deadline = time.monotonic() + timeout
        for line in self.stderr_lines:
            if text in line:
                return line
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise AssertionError(f"no stderr line with {text!r} in {timeout}s: {''.join(self.stderr_lines)}")
            try:
                line = self._lines.get(timeout=remaining)
            except queue.Empty:
                continue
            if line is None:
                raise AssertionError(f"peagle exited before printing {text!r}: {''.join(self.stderr_lines)}")
            if text in line:
                return line

    def signal(self, signum: int) -> None:
        self.proc.send_signal(signum)

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(HANG_GUARD_S)

    def finish(self, timeout: float = HANG_GUARD_S) -> int:
        assert self.proc.stdout is not None
        self.stdout = self.proc.stdout.read()
        code = self.proc.wait(timeout)
        self._reader.join(timeout)
        return code

    @property
    def stderr(self) -> str:
        return "".join(self.stderr_lines)
