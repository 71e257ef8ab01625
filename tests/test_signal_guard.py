"""SignalGuard takes every signal at once, even one the main thread did not see (issue 38 item 7).

Python runs a signal handler only in the main thread, between two bytecodes. A signal taken at C level elsewhere
(by another thread, as the kernel may hand a process signal to any thread that allows it, or in the instants
before the main thread's `poll()`) sets Python's flag but does not wake a main thread waiting for an answer.
Here the main thread waits in a socket read inside `critical(...)`, as a held AWS call does, and a helper thread
takes the signal itself (`signal.pthread_kill` on its own thread): the main thread's wait is never interrupted by
the signal, exactly the state that held `test_a_lost_answer_is_reconciled_by_name_and_tag`'s acknowledgment back.
The helper waits for causes, never for time: the main thread asleep in its read (/proc), the handler's record.
"""

from __future__ import annotations

import os
import signal
import socket
import threading
import time

import pytest

from peagle_deploy.lifecycle.signals import Signalled, SignalGuard

BOUND_S = 30.0  # a bound for a cause that comes in milliseconds; reaching it is the failure
pytestmark = pytest.mark.skipif(not os.path.exists(f"/proc/self/task/{threading.get_native_id()}/wchan"),
                                reason="needs /proc (Linux) to see that the main thread waits for the answer")


def _asleep_in_poll(tid: int) -> bool:
    """The thread sleeps in poll()/select(): a socket read with a timeout, as botocore's."""
    with open(f"/proc/self/task/{tid}/wchan") as handle:
        where = handle.read()
    return "poll" in where or "select" in where


def _until(condition, what: str) -> None:
    deadline = time.monotonic() + BOUND_S
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {BOUND_S:.0f} s: {what}")
        time.sleep(0.002)


class HeldCall:
    """The main thread's side: a call in flight whose answer the helper holds until it says so."""

    def __init__(self):
        self.main_tid = threading.get_native_id()
        self.client, self.server = socket.socketpair()
        self.client.settimeout(60)
        self.seen_while_held: list[list[str]] = []
        self.failure: BaseException | None = None

    def wait_in_critical(self, guard: SignalGuard, label: str = "CreateEndpointConfig") -> None:
        with guard.critical(label):
            self.client.recv(1)

    def helper(self, guard: SignalGuard, script) -> threading.Thread:
        def run():
            try:
                script(self, guard)
            except BaseException as exc:  # noqa: BLE001 - reported by the test's main thread
                self.failure = exc
            finally:
                self.server.sendall(b"a")  # the answer: the main thread's read returns in every case

        thread = threading.Thread(target=run, daemon=True)
        thread.start()
        return thread

    def signal_here(self, signum: int = signal.SIGINT) -> None:
        """The helper takes the signal: the main thread's poll() is not interrupted."""
        _until(lambda: _asleep_in_poll(self.main_tid), "the main thread waits for the answer")
        signal.pthread_kill(threading.get_ident(), signum)


def held_call_signalled(script, what: str = "rolling back") -> list[list[str]]:
    """Run a held call in this (the main) thread while the helper runs `script`; the guard must stop it with
    Signalled. Returns what the helper recorded while the answer was still held."""
    call = HeldCall()
    with pytest.raises(Signalled), SignalGuard(what) as guard:
        helper = call.helper(guard, script)
        call.wait_in_critical(guard)
    helper.join(BOUND_S)
    assert call.failure is None, call.failure
    return call.seen_while_held


def test_a_signal_taken_by_another_thread_is_acknowledged_while_the_answer_is_held(capfd):
    def script(call, guard):
        call.signal_here()
        _until(lambda: guard.received, "the main thread's handler took the signal")
        call.seen_while_held.append(list(guard.received))

    seen = held_call_signalled(script, "rolling back what this deploy created")
    assert seen == [["SIGINT"]]  # acknowledged before the answer came, and deferred until it did
    assert "peagle: received SIGINT: letting CreateEndpointConfig finish, then rolling back" in capfd.readouterr().err


def test_a_second_signal_taken_elsewhere_stops_the_held_call_at_once():
    def script(call, guard):
        call.signal_here()
        _until(lambda: guard.received == ["SIGINT"], "the first signal was taken")
        call.signal_here()  # the main thread is back in its read
        _until(lambda: len(guard.received) == 2, "the second signal was taken")
        call.seen_while_held.append(list(guard.received))

    assert held_call_signalled(script) == [["SIGINT", "SIGINT"]]


def test_two_signals_python_merges_into_one_handler_call_are_two():
    """Both taken at C level before the main thread runs its handler: Python calls it once; peagle counts two
    (the second stops the held call) instead of acknowledging one."""
    def script(call, guard):
        _until(lambda: _asleep_in_poll(call.main_tid), "the main thread waits for the answer")
        signal.pthread_kill(threading.get_ident(), signal.SIGTERM)
        signal.pthread_kill(threading.get_ident(), signal.SIGTERM)
        _until(lambda: len(guard.received) == 2, "both signals were taken")
        call.seen_while_held.append(list(guard.received))

    assert held_call_signalled(script) == [["SIGTERM", "SIGTERM"]]


def test_the_guard_leaves_no_thread_handler_or_wakeup_fd_behind():
    before = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGURG)}
    threads = set(threading.enumerate())
    with SignalGuard("stopping"):
        assert any(t.name == "peagle-signal-watcher" for t in threading.enumerate())
    assert set(threading.enumerate()) <= threads
    assert {s: signal.getsignal(s) for s in before} == before
    assert signal.set_wakeup_fd(-1) == -1  # none left set (and none set now)


def test_outside_the_main_thread_the_guard_does_nothing():
    result = {}

    def run():
        with SignalGuard("stopping") as guard:
            result["enabled"] = guard.enabled
            result["watcher"] = any(t.name == "peagle-signal-watcher" for t in threading.enumerate())

    thread = threading.Thread(target=run)
    thread.start()
    thread.join(BOUND_S)
    assert result == {"enabled": False, "watcher": False}
