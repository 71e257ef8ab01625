"""The one line that says why a container died, picked from its output.

vLLM's start-up failures end with a wrapper ("RuntimeError: Engine core initialization failed. See
root cause above ...") printed after the engine core's own traceback, so the last exception line is
rarely the reason: the last exception line that is not such a wrapper is. The entrypoint's own refusal
(`peagle-container: error: ...`) and argparse's (`vllm serve: error: ...`) win over everything.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

# logger prefixes vLLM puts before a message: "(EngineCore pid=7) ", "ERROR 11-22 10:00:00 [core.py:12] "
_PREFIX = re.compile(r"^(?:\([\w-]+ pid=\d+\)\s*)?(?:(?:ERROR|WARNING|INFO|CRITICAL)\s+\S+\s+\S+\s+\[[^\]]*\]\s*)?")
_EXCEPTION = re.compile(r"^(?:[A-Za-z_][\w]*\.)*[A-Z]\w*(?:Error|Exception|Exit|Failure|Interrupt)(?::\s.*)?$")
_DIRECT = re.compile(r"^(?:peagle-container|vllm(?: serve)?|usage:.*|[\w-]+): error: .+")
_WRAPPERS = ("See root cause above", "See stack trace for root cause", "Engine core initialization failed", "Worker failed", "EngineDeadError",
             "EngineCore encountered an issue", "SystemExit", "KeyboardInterrupt")
MAX_REASON = 1024  # SageMaker's FailureReason limit


def clean(line: str) -> str:
    return _PREFIX.sub("", line.rstrip("\r\n")).strip()


def failure_index(lines: Iterable[str]) -> int | None:
    """The position of the line that says why the container stopped (a direct refusal, else the last
    exception that is not a wrapper, else the last exception); None when no line reads as one."""
    direct: int | None = None
    exceptions: list[tuple[int, str]] = []
    for index, raw in enumerate(lines):
        line = clean(raw)
        if not line:
            continue
        if _DIRECT.match(line):
            direct = index
        elif _EXCEPTION.match(line):
            exceptions.append((index, line))
    if direct is not None:
        return direct
    specific = [i for i, e in exceptions if not any(w in e for w in _WRAPPERS)]
    chosen = specific or [i for i, _ in exceptions]
    return chosen[-1] if chosen else None


def failure_line(lines: Iterable[str], exit_code: int | None = None) -> str:
    """The reason a container stopped, in one line of at most 1024 characters."""
    lines = list(lines)
    index = failure_index(lines)
    last = next((clean(raw) for raw in reversed(lines) if clean(raw)), "")
    reason = clean(lines[index]) if index is not None else last
    if not reason:
        reason = "the container exited without output"
    if exit_code is not None:
        reason = f"{reason} (exit code {exit_code})"
    return reason if len(reason) <= MAX_REASON else reason[: MAX_REASON - 3] + "..."


def tail(path, max_bytes: int = 256_000) -> list[str]:
    """The last lines of a log file (at most max_bytes of it); [] when it cannot be read."""
    try:
        with open(path, "rb") as handle:
            handle.seek(0, 2)
            size = handle.tell()
            handle.seek(max(0, size - max_bytes))
            data = handle.read()
    except OSError:
        return []
    return data.decode("utf-8", errors="replace").splitlines()
