"""`peagle bench --save-requests FILE`: every finished request as one JSON line, streamed to disk.

Per-request detail never stays in memory (bench.aggregate folds each request into the level's figures);
whoever wants it gets it here, as `vllm bench serve --save-detailed` does. As every peagle writer
(safe_write): the file is private (0600), written under a temporary name beside it and renamed into
place when the run ends (a link planted at the name is replaced, never followed), its name and its
lines (the servers' error texts) are redacted.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import IO, Any

from ..redaction import redact
from .records import RequestRecord


class RequestLog:
    def __init__(self, path: Path):
        from ..safe_write import PRIVATE_FILE, checked_path

        self.path = path = checked_path(path)
        fd, self._tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent or Path("."))
        os.fchmod(fd, PRIVATE_FILE)
        self._file: IO[str] | None = os.fdopen(fd, "w", encoding="utf-8", buffering=1 << 16)
        self.level_start = 0.0
        self.concurrency = 0
        self.lines = 0
        self.failure: str | None = None  # why writing stopped (a full disk): the run goes on without it

    def level(self, concurrency: int, start: float) -> None:
        self.concurrency, self.level_start = concurrency, start

    def __call__(self, record: RequestRecord) -> None:
        if self._file is not None and self.failure is None:
            try:
                line = json.dumps(request_line(record, self.level_start, self.concurrency))
                self._file.write((redact(line) if record.error_text else line) + "\n")
            except OSError as exc:
                self.failure = f"{exc.strerror or exc} after {self.lines} lines"
                return
            self.lines += 1

    def close(self) -> None:
        if self._file is None:
            return
        try:
            self._file.flush()
            os.fsync(self._file.fileno())
            self._file.close()
        except OSError as exc:
            self.failure = self.failure or f"{exc.strerror or exc} after {self.lines} lines"
        self._file = None
        os.replace(self._tmp, self.path)


def request_line(r: RequestRecord, level_start: float, concurrency: int) -> dict[str, Any]:
    """One finished request as a JSON-ready dict (the optional per-request detail file)."""
    def rel(t: float | None) -> float | None:
        return None if t is None else round(t - level_start, 6)

    return {"concurrency": concurrency, "index": r.index, "warmup": r.warmup, "start_s": rel(r.start),
            "end_s": rel(r.end), "ttft_s": None if r.first is None else round(r.first - r.start, 6),
            "ttfc_s": None if r.first_content is None else round(r.first_content - r.start, 6),
            "chunks": r.chunks, "usage_tokens": r.usage_tokens, "cut": r.cut, "error": r.error,
            "error_text": r.error_text, "spec_decoding": r.spec_decoding}
