"""`interruptible.sleep`, the wait of `status --watch`, `logs --follow` and `metrics --window`: Ctrl-C ends it
whenever it comes (time.sleep kept one that came just before its system call for the whole interval), another
signal's handler that does not raise leaves it waiting, and the process's wakeup pipe is as it was after it."""

from __future__ import annotations

import os
import signal
import threading
import time

import pytest

from peagle_deploy import interruptible


def _wakeup_fd() -> int:
    fd = signal.set_wakeup_fd(-1)
    signal.set_wakeup_fd(fd)
    return fd


def test_a_ctrl_c_whenever_it_comes_ends_the_wait():
    before = _wakeup_fd()
    for _ in range(20):  # the signal lands before, at or during the wait: each must end it, not the 60 s
        with pytest.raises(KeyboardInterrupt):
            threading.Timer(0, os.kill, (os.getpid(), signal.SIGINT)).start()
            interruptible.sleep(60)
    assert _wakeup_fd() == before


def test_a_signal_whose_handler_returns_leaves_the_wait_to_its_end():
    seen: list[int] = []
    previous = signal.signal(signal.SIGUSR1, lambda signum, _frame: seen.append(signum))
    try:
        started = time.monotonic()
        sender = threading.Timer(0, os.kill, (os.getpid(), signal.SIGUSR1))
        sender.start()
        interruptible.sleep(0.3)
        waited = time.monotonic() - started
        sender.join()
        time.sleep(0)  # the main thread's next check runs the handler, if the signal came after the wait
    finally:
        signal.signal(signal.SIGUSR1, previous)
    assert waited >= 0.3
    assert seen == [signal.SIGUSR1]


def test_outside_the_main_thread_it_is_a_plain_sleep():
    errors: list[BaseException] = []

    def wait() -> None:
        try:
            interruptible.sleep(0.01)
        except BaseException as exc:  # noqa: BLE001 - set_wakeup_fd would refuse a thread: none is expected
            errors.append(exc)

    worker = threading.Thread(target=wait)
    worker.start()
    worker.join()
    assert errors == []


def test_another_wakeup_pipe_in_place_is_left_alone():
    read_fd, write_fd = os.pipe()
    os.set_blocking(write_fd, False)
    previous = signal.set_wakeup_fd(write_fd)
    try:
        interruptible.sleep(0.01)
        assert _wakeup_fd() == write_fd
    finally:
        signal.set_wakeup_fd(previous)
        os.close(read_fd)
        os.close(write_fd)
