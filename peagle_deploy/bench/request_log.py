"""`peagle bench --save-requests FILE`: every finished request as one JSON line, streamed to disk.

Per-request detail never stays in memory (bench.aggregate folds each request into the level's figures);
whoever wants it gets it here, as `vllm bench serve --save-detailed` does. The file is private (0600),
written under a temporary name beside it and renamed into place when the run ends, so a reader never
sees a half-written file under the final name.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import IO

from .aggregate import request_line
from .loadgen import RequestRecord


class RequestLog:
    def __init__(self, path: Path):
        self.path = path
        fd, self._tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent or Path("."))
        self._file: IO[str] | None = os.fdopen(fd, "w", encoding="utf-8", buffering=1 << 16)
        self.level_start = 0.0
        self.concurrency = 0
        self.lines = 0

    def level(self, concurrency: int, start: float) -> None:
        self.concurrency, self.level_start = concurrency, start

    def __call__(self, record: RequestRecord) -> None:
        if self._file is not None:
            self._file.write(json.dumps(request_line(record, self.level_start, self.concurrency)) + "\n")
            self.lines += 1

    def close(self) -> None:
        if self._file is None:
            return
        self._file.close()
        self._file = None
        os.replace(self._tmp, self.path)
