"""The installed `peagle` without its start-up cost: one server process imports `peagle_deploy.cli.app`
(and boto3) once; each run is a child forked from it that becomes the executable's process.

A run is asked for by `peagle` shim executables (tests/forked_peagle.py writes one): the shim sends its
argv, environment, working directory, umask, the signals it inherited as ignored or blocked, and its own stdin,
stdout and stderr file descriptors (SCM_RIGHTS) over a Unix socket; the forked child takes all of them
over, then runs the console script's `sys.exit(main())` and what Python does at exit (non-daemon threads
joined, atexit handlers, stdio flushed, a KeyboardInterrupt ending by SIGINT; `run_console_script`). The server
answers the shim with the child's pid, then its wait status; the shim forwards the signals it receives
to the child and ends the way the child ended (its exit code, or killed by the same signal). A shim
that disappears (SIGKILL) takes its child with it.

What is shared with the executable is only Python's start-up and the imports below, which read no
environment (peagle's own modules: tests/fork_preload.py), and Typer's Click tree of every command, built from
them (tests/command_tree.py: a child runs its command from it instead of building it). What differs, and why the suite keeps a small
set of tests on the executable itself:
the child's parent is this server (not the caller), it is not the process group leader the caller may
have made, and the console-script wrapper file itself does not run.

Protocol: the shim sends 8 bytes (big-endian length) + a JSON object {"argv0", "argv", "env", "cwd",
"umask", "ignored", "blocked"} with three fds on the first byte; the server answers lines `{"pid": N}` and
`{"status": <os.waitpid status>}`.
"""

from __future__ import annotations

import io
import json
import os
import selectors
import signal
import socket
import struct
import sys

import boto3  # noqa: F401 - most commands reach it: import once, here
import botocore.loaders  # noqa: F401
import botocore.session  # noqa: F401
# The SDK's core (about 4 s of pydantic classes), which peagle's JumpStart resolution imports: it reads no
# AWS setting. Its `jumpstart` modules do (they build a boto3 session for a default region, which fails on
# a missing AWS_PROFILE), so each child imports those itself, as the executable would (0.2 s).
import sagemaker.core  # noqa: F401

from peagle_deploy.cli.app import main
from peagle_deploy import clock
from botocore_data import PEAGLE_SERVICES, preload, share_botocore_data  # tests/ is this script's folder, sys.path[0]

from aws_shapes import check_every_request, precompile  # noqa: E402
from command_tree import share_command_tree  # noqa: E402
from fork_preload import import_peagle  # noqa: E402

share_botocore_data()
check_every_request()  # a child's request bodies are checked strictly, as in the pytest process
preload()  # AWS's data files parsed once here, not in each child
precompile(PEAGLE_SERVICES)  # the strict check's patterns too (0.7 s of CPU per child that sent a request)
import_peagle()  # every command's own modules (none reads the environment at import): once here, not per child
share_command_tree(load_all=True)  # and Typer's Click tree of every command (40 ms of CPU per child otherwise)

HEADER = struct.Struct(">Q")
# the signals a shim forwards to its child (tests/forked_peagle.py: SHIM)
FORWARDED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR1, signal.SIGUSR2)
# in the environment a test gives the shim: keep real time between polls (an emulator whose endpoints turn
# InService in real time, e.g. with a ContainerBackend). Taken out before the command runs; peagle never sees it.
REAL_CLOCK = "FORKED_PEAGLE_REAL_CLOCK"
# in the environment a test gives the shim: run the command that many seconds later by the wall clock that leases
# are judged by (`peagle_deploy.clock.now`: a lease that has expired, without waiting for it). Taken out too.
CLOCK_OFFSET = "FORKED_PEAGLE_CLOCK_OFFSET_S"
# in the environment a test gives the shim (with the fake clock): the lease heartbeat (`lifecycle.lease`) beats on the
# fake clock too, so a command whose polls wait a lease period of fake time refreshes its lease, as one waiting that
# long in real time does (`_fake_clock_heartbeat`). Taken out too.
LEASE_BEATS = "FORKED_PEAGLE_LEASE_BEATS"
# in the environment a test gives the shim: the host name the command's leases record and judge by
# (`peagle_deploy.lifecycle.lease_owner.host_name`): another machine's peagle, which cannot see this machine's
# processes, so a lease of this machine counts by its expiry alone. Taken out too.
HOST = "FORKED_PEAGLE_HOST"
_SERVER_STDIO: list = []


def _receive(conn: socket.socket) -> tuple[dict, list[int]]:
    data, fds, _flags, _addr = socket.recv_fds(conn, 1 << 16, 3)
    while len(data) < HEADER.size:
        more = conn.recv(1 << 16)
        if not more:
            raise ConnectionError("the shim went away mid-request")
        data += more
    (length,) = HEADER.unpack_from(data)
    body = data[HEADER.size:]
    while len(body) < length:
        more = conn.recv(1 << 16)
        if not more:
            raise ConnectionError("the shim went away mid-request")
        body += more
    return json.loads(body.decode("utf-8", "surrogateescape")), list(fds)


def _become(request: dict, fds: list[int]) -> None:
    """In the forked child: the executable's process state, as a fresh interpreter would have it."""
    import tempfile

    for fd, target in zip(fds, (0, 1, 2)):
        os.dup2(fd, target)
    for fd in set(fds) - {0, 1, 2}:
        os.close(fd)
    os.chdir(request["cwd"])
    os.umask(request["umask"])
    os.environ.clear()
    os.environ.update(request["env"])
    real_clock = os.environ.pop(REAL_CLOCK, None) == "1"
    offset = float(os.environ.pop(CLOCK_OFFSET, None) or 0)
    lease_beats = os.environ.pop(LEASE_BEATS, None) == "1"
    host = os.environ.pop(HOST, None)
    # what an exec from the shim would leave: its ignored signals ignored, its blocked ones blocked, every other
    # forwarded one as a fresh interpreter sets it, whatever this server inherited when it was started
    for signum in FORWARDED:
        signal.signal(signum, signal.SIG_IGN if signum in request["ignored"] else
                      signal.default_int_handler if signum == signal.SIGINT else signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_SETMASK, request["blocked"])
    tempfile.tempdir = None  # computed from TMPDIR on first use, as in a new process
    unbuffered = bool(os.environ.get("PYTHONUNBUFFERED"))
    encoding, errors = sys.__stdout__.encoding, sys.__stdout__.errors

    def stream(fd: int, mode: str, errors: str, line_buffering: bool) -> io.TextIOWrapper:
        raw = io.FileIO(fd, mode, closefd=False)
        interactive = raw.isatty()
        buffered = io.BufferedReader(raw) if mode == "r" else io.BufferedWriter(raw)
        text = io.TextIOWrapper(buffered, encoding=encoding, errors=errors,
                                line_buffering=line_buffering or (interactive and mode == "w"),
                                write_through=unbuffered and mode == "w")
        text.mode = mode
        return text

    _SERVER_STDIO.extend((sys.stdin, sys.stdout, sys.stderr))  # never finalized: they would close fds 0-2
    sys.stdin = sys.__stdin__ = stream(0, "r", errors, False)
    sys.stdout = sys.__stdout__ = stream(1, "w", errors, False)
    sys.stderr = sys.__stderr__ = stream(2, "w", "backslashreplace", True)
    sys.argv = [request["argv0"], *request["argv"]]
    sys.path[0] = os.path.dirname(request["argv0"])  # the console script's folder, not tests/
    if not real_clock:  # the waits between AWS polls do not wait in real time (tests/cli_runner.py: FakeClock)
        now = [1000.0]
        clock.sleep = lambda seconds: now.__setitem__(0, now[0] + max(0.0, seconds))
        clock.monotonic = lambda: now[0]
        if lease_beats:
            _fake_clock_heartbeat(now)
    if host:
        from peagle_deploy.lifecycle import lease_owner

        lease_owner.host_name = lambda: host
    if offset:
        from datetime import timedelta

        wall = clock.now
        clock.now = lambda: wall() + timedelta(seconds=offset)


def _fake_clock_heartbeat(now: list[float]) -> None:
    """Each lease holder's heartbeat on the fake clock: registered when the holder starts (`__enter__`), its
    `refresh()` (the real one) runs in the thread whose fake sleep passes a period since the last, before that sleep
    returns; the holder's own thread only waits to be stopped. Deterministic: a deploy whose polls wait 60 s of fake
    time refreshes its lease once, whatever the machine's load."""
    import threading

    from peagle_deploy.lifecycle.lease import LeaseHolder

    due: dict[LeaseHolder, float] = {}
    beating = threading.Lock()
    start, enter = clock.sleep, LeaseHolder.__enter__

    def entering(holder: LeaseHolder) -> LeaseHolder:
        due[holder] = now[0] + holder.period_s
        return enter(holder)

    def waiting(holder: LeaseHolder, wait=None) -> None:  # the thread's loop: the beats come from `sleeping`
        holder._stop.wait()
        due.pop(holder, None)

    def sleeping(seconds: float) -> None:
        start(seconds)
        if not beating.acquire(blocking=False):  # a beat's own waits, or another thread beating: no second beat
            return
        try:
            for holder, at in list(due.items()):
                if now[0] >= at and not holder._stop.is_set():
                    due[holder] = now[0] + holder.period_s
                    holder.refresh()
        finally:
            beating.release()

    LeaseHolder.__enter__, LeaseHolder.beat = entering, waiting
    clock.sleep = sleeping


def serve(path: str) -> bool:
    """Serve until stdin closes (returns False), or, in a forked child, return True to run the command."""
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen(64)
    selector = selectors.DefaultSelector()
    selector.register(listener, selectors.EVENT_READ, ("accept", None))
    selector.register(sys.stdin, selectors.EVENT_READ, ("stdin", None))
    running: dict[int, tuple[socket.socket, int]] = {}  # pid -> (connection, pidfd)
    sys.stdout.write("ready\n")
    sys.stdout.flush()
    while True:
        for key, _ in selector.select():
            kind, data = key.data
            if kind == "stdin":
                if not sys.stdin.readline():
                    for pid, (conn, _) in running.items():
                        os.kill(pid, signal.SIGKILL)
                    listener.close()
                    os.unlink(path)
                    return False
            elif kind == "accept":
                conn, _ = listener.accept()
                try:
                    request, fds = _receive(conn)
                except (ConnectionError, ValueError, OSError):
                    conn.close()
                    continue
                pid = os.fork()
                if pid == 0:
                    selector.close()
                    listener.close()
                    for other, pidfd in running.values():
                        other.close()
                        os.close(pidfd)
                    conn.close()
                    _become(request, fds)
                    return True
                for fd in fds:
                    os.close(fd)
                pidfd = os.pidfd_open(pid)
                running[pid] = (conn, pidfd)
                selector.register(pidfd, selectors.EVENT_READ, ("exited", pid))
                selector.register(conn, selectors.EVENT_READ, ("shim", pid))
                _answer(conn, {"pid": pid})
            elif kind == "shim":  # the shim should say nothing more: EOF means it is gone
                conn = key.fileobj
                if not conn.recv(1):
                    selector.unregister(conn)
                    try:
                        os.kill(data, signal.SIGKILL)
                    except ProcessLookupError:
                        pass
            elif kind == "exited":
                conn, pidfd = running.pop(data)
                _, status = os.waitpid(data, 0)
                selector.unregister(pidfd)
                os.close(pidfd)
                try:
                    selector.unregister(conn)
                except KeyError:
                    pass
                _answer(conn, {"status": status})
                conn.close()


def _answer(conn: socket.socket, message: dict) -> None:
    try:
        conn.sendall((json.dumps(message) + "\n").encode())
    except OSError:
        pass  # the shim is gone


def run_console_script() -> None:
    """The console script's `sys.exit(main())`, then what the interpreter does at exit: wait for non-daemon
    threads, run atexit handlers, flush stdout and stderr (exit 120 if that fails), and end with the exit
    code, or by SIGINT after an uncaught KeyboardInterrupt. Only the module teardown that follows in a
    real interpreter is skipped (it frees the SDK's thousands of classes: seconds for nothing)."""
    import atexit
    import threading
    import traceback

    interrupted = False
    try:
        code = main()
    except SystemExit as exc:
        code = exc.code
    except KeyboardInterrupt:
        traceback.print_exc()
        code, interrupted = 1, True
    except BaseException:  # noqa: BLE001 - what the interpreter does with it
        traceback.print_exc()
        code = 1
    if code is None:
        code = 0
    elif not isinstance(code, int):
        print(code, file=sys.stderr)
        code = 1
    threading._shutdown()  # noqa: SLF001 - the interpreter's own call at exit
    atexit._run_exitfuncs()  # noqa: SLF001
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:  # noqa: BLE001 - Python reports it and exits 120
            code = 120
    if interrupted:
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGINT)
    os._exit(code & 0xFF)


if __name__ == "__main__":
    import gc

    gc.freeze()  # the imports stay shared with every child: their GC does not touch (and copy) them
    if serve(sys.argv[1]):
        run_console_script()
