"""`forked_peagle()`: the path of a `peagle` executable that runs as a child of the suite's fork server
(tests/peagle_forkserver.py) instead of starting Python and importing peagle and boto3 again.

It is a drop-in for the installed executable in `subprocess.run([...])`, `bash -c` pipelines and PATH: a
tiny shim (Python with -I -S: no site, no imports beyond the standard library's socket) hands its argv,
environment, working directory, umask and its own stdin/stdout/stderr to the server, forwards the signals
it receives (SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2) to the forked child, and ends as the
child ended (its exit code, or the same signal). Killing the shim (SIGKILL) kills the child.

One server per pytest process, started on first use and stopped at the end of the session (conftest).
The waits between AWS polls run on a fake clock (as in-process, tests/cli_runner.py) unless the
environment given to the shim holds REAL_CLOCK=1 (removed before the command runs); with LEASE_BEATS=1 the lease
heartbeat (`lifecycle.lease`, every 60 s) beats on that fake clock too.
"""

from __future__ import annotations

import atexit
import os
import shutil
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

SHIM = r'''#!{python} -IS
# peagle, run by the test suite's fork server (tests/forked_peagle.py); not for use outside the suite
import json, os, signal, socket, struct, sys

FORWARDED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR1, signal.SIGUSR2)
child = None
pending = []


def forward(signum, _frame):
    if child is None:
        pending.append(signum)
    else:
        try:
            os.kill(child, signum)
        except ProcessLookupError:
            pass


ignored = [s for s in FORWARDED if signal.getsignal(s) == signal.SIG_IGN]
blocked = [int(s) for s in signal.pthread_sigmask(signal.SIG_BLOCK, [])]  # inherited, as an exec keeps them
for s in FORWARDED:
    if s not in ignored:
        signal.signal(s, forward)
umask = os.umask(0)
os.umask(umask)
request = json.dumps({{"argv0": {argv0!r}, "argv": sys.argv[1:], "env": dict(os.environ), "cwd": os.getcwd(),
                      "umask": umask, "ignored": [int(s) for s in ignored], "blocked": blocked}}).encode("utf-8", "surrogateescape")
conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
try:
    conn.connect({socket_path!r})
    data = struct.pack(">Q", len(request)) + request
    sent = socket.send_fds(conn, [data], [0, 1, 2])
    conn.sendall(data[sent:])
except OSError as exc:
    sys.stderr.write(f"forked peagle: the suite's fork server is not there ({{exc}})\n")
    os._exit(1)
null = os.open(os.devnull, os.O_RDWR)
for fd in (0, 1, 2):  # the child holds them now: a reader sees EOF when the child closes its copy
    os.dup2(null, fd)
reader = conn.makefile("r")
status = None
for line in reader:
    answer = json.loads(line)
    if "pid" in answer:
        child = answer["pid"]
        for signum in pending:
            forward(signum, None)
    else:
        status = answer["status"]
        break
if status is None:
    os._exit(1)
if os.WIFSIGNALED(status):
    signum = os.WTERMSIG(status)
    try:
        signal.signal(signum, signal.SIG_DFL)
    except (OSError, ValueError):  # SIGKILL, SIGSTOP: no handler to reset, they end the shim as they are
        pass
    os.kill(os.getpid(), signum)
os._exit(os.waitstatus_to_exitcode(status))
'''

REAL_CLOCK = "FORKED_PEAGLE_REAL_CLOCK"
LEASE_BEATS = "FORKED_PEAGLE_LEASE_BEATS"  # "1": the lease heartbeat beats on the fake clock (peagle_forkserver.py)
_lock = threading.Lock()
_server: dict = {}


def forked_peagle() -> str:
    """The shim's path (its folder can go first on PATH); starts this process's fork server once."""
    with _lock:
        if not _server:
            _start()
        return _server["shim"]


def forked_peagle_server_pid() -> int:
    """The fork server's pid (its children are the forked commands)."""
    forked_peagle()
    return _server["proc"].pid


def stop() -> None:
    with _lock:
        if not _server:
            return
        proc = _server["proc"]
        proc.stdin.close()
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(30)
        shutil.rmtree(_server["dir"], ignore_errors=True)
        _server.clear()


def _start() -> None:
    folder = Path(tempfile.mkdtemp(prefix="peagle-fork-"))
    socket_path = str(folder / "s")
    # the server's imports read no AWS setting (tests/peagle_forkserver.py); this makes sure of it
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "PEAGLE_"))}
    env.update(AWS_CONFIG_FILE=os.devnull, AWS_SHARED_CREDENTIALS_FILE=os.devnull, AWS_EC2_METADATA_DISABLED="true")
    proc = subprocess.Popen([sys.executable, str(Path(__file__).with_name("peagle_forkserver.py")), socket_path],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env, cwd=folder)
    if proc.stdout.readline().strip() != "ready":
        proc.kill()
        raise RuntimeError("the peagle fork server did not start (see its stderr above)")
    bin_dir = folder / "bin"
    bin_dir.mkdir()
    shim = bin_dir / "peagle"
    installed = str(Path(sys.executable).parent / "peagle")
    shim.write_text(SHIM.format(python=sys.executable, argv0=installed, socket_path=socket_path), encoding="utf-8")
    shim.chmod(0o755)
    _server.update(proc=proc, dir=folder, shim=str(shim))


atexit.register(stop)
