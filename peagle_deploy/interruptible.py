"""A wait that Ctrl-C always ends at once (`status --watch`, `logs --follow`, `metrics --window`).

`time.sleep` loses a signal that arrives just before its system call starts: Python's handler only notes it and
runs at the next bytecode, which comes after the whole interval (a Ctrl-C ignored for up to `--interval` seconds;
seen about once in 300 Ctrl-Cs on a loaded machine). Here the wait is a `select` on a pipe that Python writes each
signal's number to (`signal.set_wakeup_fd`), so a signal that came before the wait starts wakes it too, and the
handler (KeyboardInterrupt for SIGINT) runs as soon as the wait returns.
"""

from __future__ import annotations

import os
import select
import signal
import threading
import time


def sleep(seconds: float) -> None:
    """Wait `seconds`, or until a signal's handler raises. Outside the main thread, or while another wakeup pipe
    is in place (a `SignalGuard`'s, which re-interrupts its own waits), this is `time.sleep`."""
    if seconds <= 0:
        return
    if threading.current_thread() is not threading.main_thread():
        time.sleep(seconds)
        return
    read_fd, write_fd = os.pipe()
    os.set_blocking(read_fd, False)
    os.set_blocking(write_fd, False)
    try:
        previous = signal.set_wakeup_fd(write_fd, warn_on_full_buffer=False)
        try:
            if previous != -1:
                signal.set_wakeup_fd(previous)
                previous = -2  # put back already
                time.sleep(seconds)
                return
            deadline = time.monotonic() + seconds
            while (left := deadline - time.monotonic()) > 0:
                if select.select([read_fd], [], [], left)[0]:
                    os.read(read_fd, 512)  # a signal whose handler did not raise (SIGCHLD, ...): wait on
        finally:
            if previous != -2:
                signal.set_wakeup_fd(previous)
    finally:
        os.close(read_fd)
        os.close(write_fd)
