"""One cross-process lock for everything that writes state or creates names: a sweep's state and report
folder, `peagle update` of one endpoint, a `peagle local` server name.

`hold(path, what)` takes an exclusive `flock` on `path` (created 0600, never through a link) for as long as
the `with` block runs, and writes who holds it (pid, host, command, since) into the file. A second peagle
asking for the same lock is refused at once, in one line naming the holder, so two runs never interleave
their writes. The kernel releases the lock when the holder exits, however it exits (SIGKILL included), so
a lock is never stale. The holder removes the file when it lets go (a refused sweep leaves no lock file in
its --out); a taker checks, once it holds the flock, that the name still is the file it locked, and opens
it again if the last holder removed it meanwhile, so removing never lets two hold one lock. Only a killed
holder leaves the file, which the next holder takes over and removes.

flock is advisory and per host: two machines sharing a folder over NFS are not serialised (SageMaker names
are made unique beyond one second for that case).
"""

from __future__ import annotations

import json
import os
import socket
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from .errors import UsageError

try:  # POSIX; elsewhere peagle runs without the lock (and says so nowhere: Windows is not a target)
    import fcntl
except ImportError:  # pragma: no cover
    fcntl = None  # type: ignore[assignment]


class Busy(UsageError):
    """Another peagle holds the lock: nothing was done (exit 2)."""


def _holder_text(path: Path) -> str:
    try:
        info = json.loads(path.read_text(encoding="utf-8") or "{}")
    except (OSError, ValueError):
        info = {}
    if not isinstance(info, dict) or "pid" not in info:
        return "another peagle"
    since = time.strftime("%H:%M:%S", time.localtime(info.get("since", 0)))
    return f"peagle (pid {info['pid']} on {info.get('host', 'this host')}, since {since}: {info.get('command', '?')})"


@contextmanager
def hold(path: Path, what: str, *, hint: str) -> Iterator[Path]:
    """Hold the lock at `path` for `what` ('a sweep writing to peagle-sweep'); refuse with `hint` when taken."""
    path = Path(path)
    if fcntl is None:  # pragma: no cover
        yield path
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = _take(path, what, hint)
    try:
        os.ftruncate(fd, 0)
        from .redaction import redact

        command = redact(" ".join(["peagle", *sys.argv[1:2]]))
        os.pwrite(fd, json.dumps({"pid": os.getpid(), "host": socket.gethostname(), "command": command,
                                  "since": time.time()}).encode(), 0)
        yield path
    finally:
        try:
            if _is_at(fd, path):
                os.unlink(path)  # while still holding it: a taker that opened it finds it gone and opens anew
        except OSError:
            pass  # a lock file that cannot be removed is only a file; the flock is what locks
        os.close(fd)  # releases the flock


def _take(path: Path, what: str, hint: str) -> int:
    """An fd of the file at `path` with the flock held; refused (Busy) when another holds it."""
    while True:
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)
        except OSError as exc:
            raise UsageError(f"cannot take the lock {path} for {what} ({exc.strerror or exc})",
                             f"check that {path.parent} is a folder you can write to") from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise Busy(f"{_holder_text(path)} is already {what}", hint) from None
        except BaseException:
            os.close(fd)
            raise
        if _is_at(fd, path):
            return fd
        os.close(fd)  # the holder removed it between our open and our flock: the lock is the new file's


def _is_at(fd: int, path: Path) -> bool:
    """Whether `path` still names the file `fd` has open (it was not removed, or replaced, meanwhile)."""
    try:
        here = os.stat(path, follow_symlinks=False)
    except OSError:
        return False
    mine = os.fstat(fd)
    return (here.st_dev, here.st_ino) == (mine.st_dev, mine.st_ino)


def lock_dir() -> Path:
    """Where locks that belong to no output folder live (`peagle update` of an endpoint): $PEAGLE_STATE_DIR/locks,
    else $XDG_STATE_HOME/peagle/locks, else ~/.local/state/peagle/locks (0700)."""
    from .safe_write import make_dir

    if os.environ.get("PEAGLE_STATE_DIR"):
        return make_dir(Path(os.environ["PEAGLE_STATE_DIR"]) / "locks", private=True)
    base = Path(os.environ.get("XDG_STATE_HOME") or Path.home() / ".local" / "state")
    return make_dir(base / "peagle" / "locks", private=True)
