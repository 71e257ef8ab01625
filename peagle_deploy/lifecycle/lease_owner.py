"""The process a lease names (`lifecycle.lease`), judged on the machine that reads the lease.

A lease names its owner's host, process id and run. On that host, a reader can tell at once what the 10-minute
expiry only tells later: the owner's process is gone (SIGKILL, a crash, a closed terminal), or its pid now belongs
to another process, or (the reader being that very process) the run has ended. Elsewhere nothing can be seen of
the process, and only the expiry counts.

"That host" must mean one process table, not one name: containers share a host name with their host under
`--network host`, and two pid namespaces have their own pid 7. So the lease also records, on Linux, a short hash of
the kernel's boot id and the pid namespace (`pids=`), and the process's start time in clock ticks since boot
(`start=`, /proc/PID/stat's 22nd field: a pid reused by another process starts later). A reader judges the pid
only when its own host name and process table match the lease's; a lease without `pids=` (another system, or a
peagle before these fields) is judged by its expiry alone. Every read here is local (/proc, a signal 0): no AWS
call, nothing written.
"""

from __future__ import annotations

import hashlib
import os
import re
import socket
from functools import cache

_HOST_TEXT = re.compile(r"[^A-Za-z0-9._-]")
_RUNNING: set[str] = set()  # run ids of this process's lease holders that have not ended (LeaseHolder)


def host_name() -> str:
    """This machine's name as a lease records it (tag-safe, at most 63 characters)."""
    return _HOST_TEXT.sub("-", socket.gethostname() or "unknown-host")[:63] or "unknown-host"


@cache
def process_table() -> str | None:
    """8 hex digits for this boot and pid namespace (Linux); None where it cannot be told."""
    try:
        with open("/proc/sys/kernel/random/boot_id", encoding="ascii") as handle:
            boot = handle.read().strip()
        namespace = os.readlink("/proc/self/ns/pid")
    except OSError:
        return None
    return hashlib.sha256(f"{boot} {namespace}".encode()).hexdigest()[:8]


def started(pid: int) -> str | None:
    """When process `pid` started, in clock ticks since boot (Linux); None when it cannot be read."""
    fields = _stat(pid)
    return fields[19] if fields is not None and len(fields) > 19 else None


def alive(pid: int) -> bool:
    """Whether process `pid` exists and has not exited (a zombie, exited but not yet reaped, has)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process: it exists
        return True
    except OSError:
        return True  # cannot tell: it counts as alive
    fields = _stat(pid)
    return not (fields is not None and fields and fields[0] in ("Z", "X"))


def run_started(run_id: str) -> None:
    _RUNNING.add(run_id)


def run_ended(run_id: str) -> None:
    _RUNNING.discard(run_id)


def gone(host: str, pid: int, run_id: str, start: str | None, pids: str | None) -> str | None:
    """Why the owner a lease names no longer holds it, seen from this machine ('its process (pid N) is no longer
    running on HOST', ...); None when it may still (or nothing of it can be seen from here)."""
    if host != host_name() or pids is None or pids != process_table():
        return None
    if not alive(pid):
        return f"its process (pid {pid}) is no longer running on {host}"
    if start is not None and started(pid) not in (None, start):
        return f"pid {pid} on {host} is now another process"
    if pid == os.getpid() and run_id not in _RUNNING:
        return f"its run ended in this process (pid {pid})"
    return None


def _stat(pid: int) -> list[str] | None:
    """/proc/PID/stat's fields after the command name (state first); None when it cannot be read."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as handle:
            text = handle.read()
    except OSError:
        return None
    return text.rpartition(")")[2].split()
