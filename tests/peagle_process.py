"""`peagle` (the installed executable, or a forked one) as a child process whose stderr a test can wait on,
line by line (bounded waits) (the fault tests' emulator fixtures, `emulator_server` and `emu`, are in conftest.py)."""

from __future__ import annotations

import queue
import subprocess
import threading
import time

from .conftest import PEAGLE


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

    def _read(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.stderr_lines.append(line)
            self._lines.put(line)
        self._lines.put(None)

    def wait_for_stderr(self, text: str, timeout: float = 60.0) -> str:
        """Block until a stderr line containing `text` arrives (or fail after `timeout`)."""
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

    def finish(self, timeout: float = 120.0) -> int:
        assert self.proc.stdout is not None
        self.stdout = self.proc.stdout.read()
        code = self.proc.wait(timeout)
        self._reader.join(timeout)
        return code

    @property
    def stderr(self) -> str:
        return "".join(self.stderr_lines)
