"""The bundled entrypoint as a process on this machine: start it, wait for /ping, stop its whole group.

The process gets its own session (process group), so it outlives the `peagle local start` that
launched it and stopping it reaches vLLM's engine-core children too. Its output goes to a log file,
which is what `peagle local logs`, the failure line and the start-up verification read.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Literal

ENTRYPOINT = (sys.executable, "-m", "peagle_deploy.container")
Outcome = Literal["ready", "exited", "timeout"]


def launch(env: Mapping[str, str], log_path: Path, *, command: Sequence[str] = ENTRYPOINT,
           cwd: Path | None = None) -> subprocess.Popen[bytes]:
    """Start `command` (default: the bundled entrypoint) with exactly `env`, output appended to log_path."""
    from ..safe_write import open_append

    log_path.parent.mkdir(parents=True, exist_ok=True)
    with open_append(log_path) as log:  # 0600 when new; never through a link planted at the name
        return subprocess.Popen(list(command), env=dict(env), stdout=log, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, start_new_session=True, cwd=cwd)


def ping(port: int, host: str = "127.0.0.1", timeout: float = 2.0) -> bool:
    """True when the server answers GET /ping with 200 (SageMaker's health check)."""
    try:
        with urllib.request.urlopen(f"http://{host}:{port}/ping", timeout=timeout) as response:
            return response.status == 200
    except (urllib.error.URLError, OSError, ValueError):
        return False


def wait_ready(port: int, exited: Callable[[], bool], *, timeout_s: float,
               on_progress: Callable[[float], None] | None = None, interval_s: float = 1.0,
               sleep: Callable[[float], None] = time.sleep, clock: Callable[[], float] = time.monotonic,
               check: Callable[[int], bool] = ping) -> Outcome:
    """Poll /ping until it answers, the process exits or timeout_s passes (bounded in every case)."""
    start = clock()
    while True:
        if exited():
            return "exited"
        if check(port):
            return "ready"
        elapsed = clock() - start
        if elapsed >= timeout_s:
            return "timeout"
        if on_progress:
            on_progress(elapsed)
        sleep(min(interval_s, max(0.0, timeout_s - elapsed)) or interval_s)


def start_time(pid: int) -> str | None:
    """The process's start time in clock ticks (Linux /proc), to tell it from a later process with its pid."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat.rsplit(")", 1)[1].split()[19]


def alive(pid: int) -> bool:
    """Running (a zombie child of this process is reaped and counts as gone)."""
    try:
        if os.waitpid(pid, os.WNOHANG)[0] == pid:
            return False
    except ChildProcessError:
        pass
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return True


def group_members(pgid: int) -> list[int]:
    """Live (non-zombie) processes of a process group, from /proc; [pgid] or [] where /proc is missing."""
    proc = Path("/proc")
    if not proc.is_dir():
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return []
        except PermissionError:
            pass
        return [pgid]
    members = []
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if fields[0] != "Z" and int(fields[2]) == pgid:
            members.append(int(entry.name))
    return members


def stop_group(pid: int, *, grace_s: float = 30.0, sleep: Callable[[float], None] = time.sleep,
               clock: Callable[[], float] = time.monotonic) -> bool:
    """SIGTERM the process group led by pid (vLLM shuts down cleanly), SIGKILL what is left after grace_s.

    Returns True when something was running. The group is the session the process was started in.
    """
    if not alive(pid) and not group_members(pid):
        return False
    for sig, wait_s in ((signal.SIGTERM, grace_s), (signal.SIGKILL, 10.0)):
        try:
            os.killpg(pid, sig)
        except ProcessLookupError:
            return True
        deadline = clock() + wait_s
        while clock() < deadline:
            if not alive(pid) and not group_members(pid):
                return True
            sleep(0.2)
    alive(pid)  # reap
    return True
