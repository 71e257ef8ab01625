"""The sweep's state file: JSON, rewritten atomically after every step, so a killed sweep can resume.

Paths in it (the report folder, each configuration's result file) are stored relative to the state file's
own folder when they lie beside or below it, else absolute; never relative to the working directory. So a
sweep folder copied or moved elsewhere resumes and reports from its new place, from any directory.

Each configuration moves pending -> deploying -> deployed -> benched -> done (or failed / stopped);
`endpoint` is recorded BEFORE the first create call, so resume (and the interrupt handler) knows
every endpoint that may exist. Spend is instance-seconds x price, accumulated as endpoints live. In the component
layout (`--hosting component`) a configuration's `endpoint` is its inference component, and `host` is the one
endpoint they join, recorded the same way: its spend is the sweep's.
`measured` is set once its bench finished and never unset: whatever happens at its teardown, a measured
configuration is not deployed or benched again (resume only removes what is left of it). A configuration whose
teardown failed keeps its live status and the error, so resume tries the delete again.
"""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field, ValidationError

from ..errors import UsageError
from .config import SweepRequest
from .estimate import SweepPlan

Status = Literal["pending", "deploying", "deployed", "benched", "done", "failed", "stopped"]
LIVE: tuple[str, ...] = ("deploying", "deployed", "benched")  # an endpoint may exist
STATE_VERSION = 1
STATE_NAME = "sweep-state.json"  # in the --out folder unless --state says otherwise


class ConfigState(BaseModel):
    label: str
    status: Status = "pending"
    endpoint: str | None = None
    created_at: float | None = Field(None, description="sweep clock when the first create call was made")
    deleted_at: float | None = None
    price_per_hour_usd: float | None = None
    spent_usd: float = 0.0
    result_file: str | None = None
    measured: bool = Field(False, description="its bench finished; never measured again")
    outputs_file: str | None = Field(None, description="greedy outputs kept for the agreement check against off")
    outputs_note: str | None = Field(None, description="why no outputs were kept")
    error: str | None = None


class SweepState(BaseModel):
    version: int = STATE_VERSION
    request: SweepRequest
    plan: SweepPlan
    configs: dict[str, ConfigState]
    status: Literal["running", "done", "stopped", "interrupted", "failed"] = "running"
    stopped_reason: str | None = None
    spent_usd: float = 0.0
    removed: list[str] = Field(default_factory=list, description="endpoints (and components) the sweep tore down")
    host: ConfigState | None = Field(None, description="--hosting component: the one endpoint every configuration's "
                                                       "component joins (its name, life and spend)")
    out_dir: str = Field(".", description="the report folder, relative to the state file's folder (or absolute)")

    def live(self) -> list[ConfigState]:
        return [c for c in self.configs.values() if c.status in LIVE and c.endpoint]


class StateFile:
    """The state and its path; `save()` is atomic (safe_write: temp file + os.replace, never through a link),
    private (0600), redacted like every file (a --url's password is not kept: --resume asks for it) and
    thread-safe."""

    def __init__(self, path: Path, state: SweepState):
        self.path = Path(path).absolute()
        self.state = state
        self.lock = threading.RLock()

    # the one path model: relative to the state file's folder, never to the working directory -----------
    def relative(self, path: str | Path) -> str:
        """`path` as stored: relative to the state file's folder when inside it, else absolute."""
        full = Path(path).absolute()
        try:
            return str(full.relative_to(self.path.parent))
        except ValueError:
            return str(full)

    def resolve(self, stored: str | Path) -> Path:
        """A stored path as a usable one (an absolute path stays as it is)."""
        return self.path.parent / stored

    @property
    def out_dir(self) -> Path:
        return self.resolve(self.state.out_dir)

    def set_out_dir(self, out_dir: Path) -> None:
        self.state.out_dir = self.relative(out_dir)

    def save(self) -> None:
        with self.lock:
            from ..safe_write import write_text

            # redacted like every file: a --url is written without its credentials (sweep/config.py: --resume
            # reads the password from the variable the state names, or from --url given again)
            write_text(self.path, self.state.model_dump_json(indent=2) + "\n", private=True)

    def update(self, label: str, **changes: object) -> ConfigState:
        with self.lock:
            config = self.state.configs[label]
            for key, value in changes.items():
                setattr(config, key, value)
            self.save()
            return config

    @classmethod
    def load(cls, path: Path) -> StateFile:
        try:
            data = json.loads(Path(path).read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise UsageError(f"state file {path} not found", "pass the --state file of the sweep to resume") from None
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise UsageError(f"{path} is not a sweep state file ({type(exc).__name__})",
                             "pass the --state file written by peagle sweep") from None
        if not isinstance(data, dict) or data.get("version") != STATE_VERSION:
            raise UsageError(f"{path} is not a version {STATE_VERSION} sweep state file",
                             "pass the --state file written by this peagle's sweep")
        try:
            return cls(path, SweepState.model_validate(data))
        except ValidationError as exc:
            err = exc.errors()[0]
            where = ".".join(str(p) for p in err.get("loc", ()))
            raise UsageError(f"{path} is not a valid sweep state file ({where}: {err.get('msg')})",
                             "pass the --state file written by peagle sweep") from None
