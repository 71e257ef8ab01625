"""Where `peagle local` remembers what it started: one JSON file and one log file per server name.

$PEAGLE_STATE_DIR, else $XDG_STATE_HOME/peagle/local, else ~/.local/state/peagle/local. The directory is
0700 and its files 0600 whatever the umask, written by `safe_write` (never through a planted link); the
state keeps the names of secret-looking variables, never their values (no later command needs them).
"""

from __future__ import annotations

import json
import os
import re
from datetime import datetime
from pathlib import Path

from pydantic import BaseModel, ValidationError

from ..errors import UsageError
from .engine import Engine

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,62}\Z")


class LocalServer(BaseModel):
    name: str
    url: str
    port: int
    pid: int | None = None
    start_time: str | None = None  # /proc start time of pid: a later process with the same pid is not ours
    container_id: str | None = None  # with --docker
    engine: Engine | None = None  # the engine and its settings that started container_id (None: plain docker)
    log_path: str
    started_at: datetime
    model_dir: str
    drafter_dir: str | None
    mode: str
    k: int | None
    speculative_config: str | None
    environment: dict[str, str]
    command: list[str]


def state_dir() -> Path:
    if os.environ.get("PEAGLE_STATE_DIR"):
        return Path(os.environ["PEAGLE_STATE_DIR"])
    base = Path(os.environ.get("XDG_STATE_HOME") or Path.home() / ".local" / "state")
    return base / "peagle" / "local"


def check_name(name: str) -> str:
    if not _NAME.match(name):
        raise UsageError(f"--name {name!r} is not a valid server name", "use letters, digits, '-' or '_' (max 63)")
    return name


def state_path(name: str) -> Path:
    return state_dir() / f"{check_name(name)}.json"


def log_path(name: str) -> Path:
    return state_dir() / f"{check_name(name)}.log"


def private_dir() -> Path:
    """The state directory, made (or narrowed to) 0700."""
    from ..safe_write import make_dir

    return make_dir(state_dir(), private=True)


def masked(server: LocalServer) -> LocalServer:
    """`server` with the values of secret-looking variables and flags as ***."""
    from ..redaction import mask_argv, mask_env

    return server.model_copy(update={"environment": mask_env(server.environment),
                                     "command": mask_argv(server.command)})


def save(server: LocalServer) -> None:
    from ..safe_write import write_text

    private_dir()
    write_text(state_path(server.name), masked(server).model_dump_json(indent=1), private=True)


def load(name: str) -> LocalServer | None:
    path = state_path(name)
    try:
        return LocalServer.model_validate(json.loads(path.read_text(encoding="utf-8")))
    except FileNotFoundError:
        return None
    except (OSError, ValueError, ValidationError):
        raise UsageError(f"the state file {path} is unreadable", f"stop the server by hand, then delete {path}") from None


def lock(name: str, doing: str):
    """The lock of one server name (locks.hold): two `peagle local start` (or a start and a stop) of one name never
    interleave their state writes; the second is refused in one line naming the first."""
    from ..locks import hold

    path = private_dir() / f"{check_name(name)}.lock"
    return hold(path, f"{doing} local server {name!r}", hint="wait for it to finish, or pass another --name")


def remove(name: str) -> None:
    state_path(name).unlink(missing_ok=True)


def names() -> list[str]:
    directory = state_dir()
    return sorted(p.stem for p in directory.glob("*.json")) if directory.is_dir() else []
