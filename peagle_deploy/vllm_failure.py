"""The one line that says why a container died, picked from its output (vLLM's, or the entrypoint's).

Read by `peagle local`, `peagle logs`, the start-up log reader and the emulator's container backend: a module of
its own below all of them.

vLLM's start-up failures end with a wrapper ("RuntimeError: Engine core initialization failed. See
root cause above ...") printed after the engine core's own traceback, so the last exception line is
rarely the reason: the last exception line that is not such a wrapper is. The entrypoint's own refusal
(`peagle-container: error: ...`) and argparse's (`vllm serve: error: ...`) win over everything.

A config vLLM refuses raises pydantic's ValidationError, whose reason is on the lines after its header,
before pydantic's docs URL (the container's last line):

    pydantic_core._pydantic_core.ValidationError: 1 validation error for SpeculativeConfig
      Value error, ... [type=value_error, input_value=ArgsKwargs(...), input_type=ArgsKwargs]
        For further information visit https://errors.pydantic.dev/2.12/v/value_error

The reason is then that detail line (`Value error, ...` or a field's `Input should be ...`), without pydantic's
`[type=..., input_value=...]` echo, named after the config class: `SpeculativeConfig: Value error, ...`.
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
_PYDANTIC = re.compile(r"ValidationError: \d+ validation errors? for (?P<model>\w+)")
_PYDANTIC_DETAIL = re.compile(r"\s\[type=[\w.]+(?:,.*)?\]$")
_DOCS_URL = "For further information visit https://errors.pydantic.dev/"
MAX_REASON = 1024  # SageMaker's FailureReason limit


def clean(line: str) -> str:
    return _PREFIX.sub("", line.rstrip("\r\n")).strip()


def failure_index(lines: Iterable[str]) -> int | None:
    """The position of the line that says why the container stopped (a direct refusal, else the last
    exception that is not a wrapper, else the last exception; for a pydantic error its reason line);
    None when no line reads as one."""
    lines = list(lines)
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
    if not chosen:
        return None
    return _pydantic_detail(lines, chosen[-1]) or chosen[-1]


def _pydantic_detail(lines: list[str], header: int) -> int | None:
    """The first reason line after a pydantic ValidationError header (before its docs URL), if any."""
    if not _PYDANTIC.search(clean(lines[header])):
        return None
    for index in range(header + 1, min(header + 8, len(lines))):
        line = clean(lines[index])
        if line.startswith(_DOCS_URL) or _EXCEPTION.match(line):
            return None
        if line.startswith("Value error, ") or _PYDANTIC_DETAIL.search(line):
            return index
    return None


def _reason(lines: list[str], index: int) -> str:
    """The line at index; a pydantic detail line named after its config class (and field), without the echo."""
    line = clean(lines[index])
    if not _PYDANTIC_DETAIL.search(line) and not line.startswith("Value error, "):
        return line
    header = next((m for i in range(index - 1, max(-1, index - 8), -1)
                   if (m := _PYDANTIC.search(clean(lines[i])))), None)
    if header is None:
        return line
    detail = _PYDANTIC_DETAIL.sub("", line)
    field = clean(lines[index - 1])
    if not detail.startswith("Value error, ") and re.fullmatch(r"[\w.\[\]-]+", field) and not _PYDANTIC.search(field):
        detail = f"{field}: {detail}"
    return f"{header['model']}: {detail}"


def failure_line(lines: Iterable[str], exit_code: int | None = None) -> str:
    """The reason a container stopped, in one line of at most 1024 characters."""
    lines = list(lines)
    index = failure_index(lines)
    last = next((clean(raw) for raw in reversed(lines) if clean(raw) and not clean(raw).startswith(_DOCS_URL)), "")
    reason = _reason(lines, index) if index is not None else last
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
