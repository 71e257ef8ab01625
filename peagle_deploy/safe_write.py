"""The one way peagle writes a file: whole or not at all, never through a link, secrets redacted.

Every writer (bench results JSON/Markdown/PNG, `bench compare`, sweep reports and state, `peagle local`'s
state file and server log, `container dockerfile --output`) goes through here:

- `replace_file` / `write_text` / `write_bytes`: a temporary file in the same directory (created exclusively,
  mode 0600), filled, flushed and fsynced, then renamed over the name. A reader sees the old file or the
  new one, never half of one; an interrupted write leaves the old file; and a symbolic link planted at the
  name is *replaced* by the new file, never followed (its target is not touched).
- `claim_unique`: a new result name that no one else has (created with O_EXCL|O_NOFOLLOW, so a link planted
  at a predicted name is skipped, and two runs in the same millisecond get different names).
- `make_dir(private=True)`: 0700 whatever the umask, and only a directory this user owns.
- `refuse_links`: one line (exit 2) for a fixed output name in `--out` that is a link, before any work.
- Text is passed through `redaction.redact`, and so is every file name (`safe_name` if it held a secret).

`private=True` files are 0600 whatever the umask; the others get the mode a plain `open(..., "w")` gives
(0666 less the umask).
"""

from __future__ import annotations

import os
import stat
import tempfile
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any

from .errors import UsageError
from .redaction import redact, safe_name

PRIVATE_FILE = 0o600
PRIVATE_DIR = 0o700


def _current_umask() -> int:
    """The process umask, read without changing it where Linux tells it (os.umask's get-by-set races threads)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def _public_mode() -> int:
    return 0o666 & ~_current_umask()


def checked_path(path: Path) -> Path:
    """`path` with a file name that holds no secret (a redacted, cleaned name if it did)."""
    path = Path(path)
    if redact(path.name) == path.name:
        return path
    stem, dot, suffix = path.name.rpartition(".")
    cleaned = safe_name(stem if dot else path.name) + (f".{suffix}" if dot and suffix.isalnum() else "")
    return path.with_name(cleaned)


@contextmanager
def replace_file(path: Path, *, private: bool = False, binary: bool = False) -> Iterator[IO[Any]]:
    """Yield a file to fill; on success it atomically becomes `path` (a link there is replaced, not followed)."""
    path = checked_path(path)
    directory = path.parent
    _make_parent(directory)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=directory)
    try:
        os.fchmod(fd, PRIVATE_FILE if private else _public_mode())
        with os.fdopen(fd, "wb" if binary else "w", **({} if binary else {"encoding": "utf-8"})) as handle:
            yield handle
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _make_parent(directory: Path) -> None:
    """mkdir -p; a file in the way or no permission is the user's path (one line, exit 2), not a bug."""
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except (FileExistsError, NotADirectoryError, PermissionError) as exc:
        raise UsageError(f"cannot write into {directory}: {exc.strerror or type(exc).__name__}",
                         "choose an output folder you can write to (not a file)") from None


def write_text(path: Path, text: str, *, private: bool = False, redact_text: bool = True) -> Path:
    """Write `text` whole (redacted unless the file must keep a secret a later command needs: then private)."""
    path = checked_path(path)
    with replace_file(path, private=private) as handle:
        handle.write(redact(text) if redact_text else text)
    return path


def write_bytes(path: Path, data: bytes, *, private: bool = False) -> Path:
    path = checked_path(path)
    with replace_file(path, private=private, binary=True) as handle:
        handle.write(data)
    return path


def write_with(path: Path, fill: Callable[[IO[bytes]], None], *, private: bool = False) -> Path:
    """Let `fill` write binary content (matplotlib's `savefig` to a file object), then replace `path` with it."""
    path = checked_path(path)
    with replace_file(path, private=private, binary=True) as handle:
        fill(handle)
    return path


def claim_unique(directory: Path, stem: str, suffix: str, *, beside: Sequence[str] = (),
                 attempts: int = 1000) -> Path:
    """Create `directory/stem+suffix` exclusively (an empty file, then filled with `write_*`), or `stem-2`, `stem-3`
    ... when that name is taken: by an earlier run, a concurrent one, or a link someone planted there. Names
    with a file or link at any `beside` suffix (the .md and .png of a result) are skipped too."""
    directory = Path(directory)
    _make_parent(directory)
    stem = checked_path(directory / stem).name
    for n in range(1, attempts + 1):
        candidate = directory / (f"{stem}{suffix}" if n == 1 else f"{stem}-{n}{suffix}")
        if any(os.path.lexists(candidate.with_suffix(s)) for s in beside):
            continue
        try:
            fd = os.open(candidate, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, _public_mode())
        except FileExistsError:
            continue
        os.close(fd)
        return candidate
    raise UsageError(f"{attempts} result files named {stem}* already exist in {directory}", "choose another --out")


def make_dir(path: Path, *, private: bool = False) -> Path:
    """mkdir -p; a private directory is 0700 whatever the umask and must belong to this user."""
    path = Path(path)
    if not private:
        path.mkdir(parents=True, exist_ok=True)
        return path
    missing = []
    for parent in [path, *path.parents]:
        if os.path.lexists(parent):
            break
        missing.append(parent)
    for directory in reversed(missing):
        try:
            os.mkdir(directory, PRIVATE_DIR)
        except FileExistsError:
            pass
    info = os.stat(path)  # a link to a directory is fine if that directory is ours
    if not stat.S_ISDIR(info.st_mode):
        raise UsageError(f"{path} is not a directory", "remove it, or point PEAGLE_STATE_DIR elsewhere")
    if hasattr(os, "geteuid") and info.st_uid != os.geteuid():
        raise UsageError(f"the state directory {path} belongs to another user",
                         "point PEAGLE_STATE_DIR (or XDG_STATE_HOME) at a directory of your own")
    if stat.S_IMODE(info.st_mode) != PRIVATE_DIR:
        os.chmod(path, PRIVATE_DIR)
    for directory in missing[1:]:  # parents made here: private too, whatever the umask
        os.chmod(directory, PRIVATE_DIR)
    return path


@contextmanager
def tidy_new_dirs(*directories: Path) -> Iterator[None]:
    """The folders among `directories` (and their parents) that do not exist yet are removed again when the block
    ends, if still empty: a refused command leaves no empty --out behind. A folder that existed before, or that
    holds anything, is never removed (rmdir refuses a folder that is not empty)."""
    new: list[Path] = []
    for directory in directories:
        for folder in [Path(directory), *Path(directory).parents]:
            if os.path.lexists(folder):
                break
            new.append(folder)
    try:
        yield
    finally:
        for folder in sorted(set(new), key=lambda p: len(p.absolute().parts), reverse=True):  # deepest first
            try:
                folder.rmdir()
            except OSError:
                pass  # not empty, or gone: it stays as it is


def probe(directory: Path) -> None:
    """mkdir -p `directory` and create and remove a temporary in it (exclusively: no planted name is touched);
    OSError when it cannot take a file."""
    Path(directory).mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".peagle-write-test-", dir=directory)
    os.close(fd)
    os.unlink(tmp)


def probe_writable(directory: Path, *, flag: str) -> None:
    """Fail (exit 2, one line) before the work when `directory` cannot take a file: a file where the folder
    should be (or above it), no permission. The user's paths are never a bug (exit 1)."""
    directory = Path(directory)
    blocker = next((d for d in [directory, *directory.parents] if d.exists() and not d.is_dir()), None)
    if blocker is not None:
        where = "" if blocker == directory else f" ({blocker} is a {kind_of(blocker)})"
        raise UsageError(f"{flag} {directory} is not a folder{where}" if where
                         else f"{flag} {directory} is a {kind_of(directory)}, not a folder",
                         f"pass a folder for {flag} (peagle creates it if missing), not a file")
    try:
        probe(directory)
    except OSError as exc:
        raise UsageError(f"{flag} {directory} is not a writable folder ({exc.strerror or exc})",
                         "pass a folder you can write to") from None


def kind_of(path: Path) -> str:
    """'directory', 'file', 'fifo', 'socket', 'device', 'link' or 'missing' (a link is not followed)."""
    try:
        mode = os.lstat(path).st_mode
    except (FileNotFoundError, NotADirectoryError):
        return "missing"
    except OSError:
        return "path that cannot be read"
    for test, name in ((stat.S_ISLNK, "link"), (stat.S_ISDIR, "directory"), (stat.S_ISREG, "file"),
                       (stat.S_ISFIFO, "fifo"), (stat.S_ISSOCK, "socket")):
        if test(mode):
            return name
    return "device"


def regular_file(path: Path, *, what: str, hint: str) -> Path:
    """A file the user named for peagle to read: refused in one line when it is missing, a directory, or a fifo,
    socket or device (reading a fifo would block for ever)."""
    kind = kind_of(Path(path))
    if kind == "missing":
        raise UsageError(f"{what} {path} not found", hint)
    if kind not in ("file", "link") or (kind == "link" and not Path(path).is_file()):
        raise UsageError(f"{what} {path} is a {kind if kind != 'link' else 'link to no file'}, not a file", hint)
    return Path(path)


def check_file_path(path: Path, *, flag: str, must_exist: bool, example: str) -> Path:
    """A state file given by `flag`: a regular file (or, unless `must_exist`, nothing yet), never a directory, a
    fifo (reading one blocks), a device or a link. `example` is the file name suggested inside a directory."""
    path = Path(path)
    kind = kind_of(path)
    if kind == "missing":
        if must_exist:
            raise UsageError(f"{flag} {path} not found", f"pass the {example} a sweep wrote")
        return path
    if kind == "file":
        return path
    inside = path / example
    hint = (f"pass {flag} {inside}" if kind == "directory" and (not must_exist or inside.is_file())
            else f"pass {flag} with the path of a file")
    raise UsageError(f"{flag} {path} is a {kind}, not a file", hint)


def refuse_links(directory: Path, names: Sequence[str], *, flag: str = "--out") -> None:
    """One line (exit 2) when a file peagle is about to write in `directory` is a symbolic link: someone else may
    have planted it, and peagle does not write through links."""
    for name in names:
        entry = Path(directory) / name
        if entry.is_symlink():
            raise UsageError(f"{flag} {directory}: {name} is a symbolic link (to {os.readlink(entry)}); peagle does "
                             "not write through links", f"remove {entry}, or choose another {flag}")


def fresh_file(path: Path, *, private: bool = False) -> Path:
    """An empty new file at `path`, replacing whatever was there (a planted link included) without following it."""
    return write_bytes(path, b"", private=private)


def open_append(path: Path) -> IO[bytes]:
    """`path` opened for appending (created 0600 if missing), refusing to follow a link."""
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW, PRIVATE_FILE)
    return os.fdopen(fd, "ab")
