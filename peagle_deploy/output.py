"""The one output sink: human output with Rich, or exactly one JSON document on stdout.

Results go to stdout; progress, notes and errors go to stderr. Everything passes through
`redaction.redact` so credentials never reach a terminal or a CI log.

One console configuration (`make_console`) for every stream: on a terminal Rich measures it; off a
terminal (a pipe, a file, a CI log) nothing is ever wrapped, because a wrapped endpoint name, URI or
JSON string cannot be copied or parsed. Off a terminal, progress is plain lines, not a spinner.
With --json a failure is one JSON error document on stdout too (`error_document`).
"""

from __future__ import annotations

import json
import os
import re
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import IO, TYPE_CHECKING, Any, NoReturn

from .redaction import redact, revealing  # the one redaction: every output goes through it

if TYPE_CHECKING:  # Rich is imported lazily: --json paths and tests need little of it
    from rich.console import Console


# Off a terminal Rich would wrap at 80 columns (or $COLUMNS); nothing peagle prints is this wide, and
# every renderable peagle uses sizes to its content (no expanding panels, rules or bars off a terminal).
UNBOUNDED_WIDTH = 100_000


def make_console(stream: IO[str], *, stderr: bool = False) -> Console:
    """The one Rich console configuration, for stdout and stderr alike."""
    from rich.console import Console

    class PeagleConsole(Console):
        def on_broken_pipe(self) -> None:  # Rich's own exits 1
            self.quiet = True
            stdout_closed()

    writer = _RedactingWriter(stream)
    if writer.isatty():
        return PeagleConsole(file=writer, highlight=False, stderr=stderr)
    return PeagleConsole(file=writer, highlight=False, stderr=stderr, width=UNBOUNDED_WIDTH)


def stdout_closed() -> NoReturn:
    """The reader of stdout went away (`peagle models | head -1`). Not a failure: stop writing and exit
    0 quietly; what the command did stands. stdout is pointed at /dev/null first so that the
    interpreter's last flush cannot fail again."""
    try:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.__stdout__.fileno())
    except (OSError, AttributeError, ValueError):
        pass
    raise SystemExit(0)


def human_duration(seconds: float | None) -> str:
    """1h05m, 6m16s, 45s, 2d03h (durations.format_duration); '-' for unknown. The sign is the caller's to phrase."""
    from .inputs import format_duration

    return "-" if seconds is None else format_duration(round(abs(seconds)))


def human_expiry(seconds: float | None) -> str:
    """'in 3h55m', 'expired 6m16s ago', or 'never'."""
    if seconds is None:
        return "never"
    if seconds <= 0:
        return f"expired {human_duration(seconds)} ago"
    return f"in {human_duration(seconds)}"


def print_table(console: Console, headers: Sequence[str], rows: Sequence[Sequence[str]], *,
                title: str | None = None, justify: Sequence[str] | None = None) -> None:
    """A table whose cells are never wrapped (names and URIs stay copyable).

    When the terminal is too narrow for it, each row becomes a block instead: its first cell (the
    name) on a line of its own, then one `header: value` line per other cell, soft-wrapped (Rich
    inserts no line break; the terminal folds the line for display and copying keeps it whole).
    """
    if _table_fits(console.width, headers, rows):
        console.print(_table(headers, rows, title, justify))
        return
    for text in _blocks(headers, rows, title):
        console.print(text, markup=False, highlight=False, soft_wrap=True)


def table_view(width: int, headers: Sequence[str], rows: Sequence[Sequence[str]], *,
               title: str | None = None) -> Any:
    """`print_table` as one renderable, for a live display (which cannot soft-wrap: a line longer
    than a narrow terminal is folded there)."""
    from rich.console import Group
    from rich.text import Text

    if _table_fits(width, headers, rows):
        return _table(headers, rows, title)
    return Group(*(Text(text, overflow="fold") for text in _blocks(headers, rows, title)))


def _table_fits(width: int, headers: Sequence[str], rows: Sequence[Sequence[str]]) -> bool:
    from rich.cells import cell_len

    widths = [max([cell_len(h), *(cell_len(r[i]) for r in rows)]) for i, h in enumerate(headers)]
    return sum(w + 3 for w in widths) + 1 <= width


def _table(headers: Sequence[str], rows: Sequence[Sequence[str]], title: str | None,
           justify: Sequence[str] | None = None) -> Any:
    from rich.console import Group
    from rich.table import Table
    from rich.text import Text

    table = Table()
    for i, header in enumerate(headers):
        table.add_column(header, no_wrap=True, justify=justify[i] if justify else "left")  # type: ignore[arg-type]
    for row in rows:
        table.add_row(*row)
    # the title is a line of its own: a Rich table wraps its title to the table's width (a narrow table of
    # numbers would break "sweep ... of MODEL: output tokens/s" over three lines, even in a pipe)
    return Group(Text(title, style="table.title"), table) if title else table


def _blocks(headers: Sequence[str], rows: Sequence[Sequence[str]], title: str | None) -> list[str]:
    lines = [title] if title else []
    for row in rows:
        lines.append(row[0])
        lines.extend(f"  {header}: {value}" for header, value in zip(headers[1:], row[1:]))
    return lines


def print_key_values(console: Console, rows: Sequence[tuple[str, str]], *, title: str) -> None:
    """A titled panel of `key  value` lines, or plain `key: value` lines (soft-wrapped) when the
    terminal is too narrow for it: a value (an image URI, an S3 URI, a name) is never folded in a box."""
    from rich.cells import cell_len
    from rich.panel import Panel
    from rich.table import Table

    key_width = max(cell_len(k) for k, _ in rows)
    needed = max(key_width + 2 + max(cell_len(v) for _, v in rows), cell_len(title) + 2) + 4
    if needed <= console.width:
        grid = Table.grid(padding=(0, 2))
        grid.add_column(style="bold", no_wrap=True)
        grid.add_column(no_wrap=True)
        for key, value in rows:
            grid.add_row(key, value)
        console.print(Panel(grid, title=title, expand=False))
        return
    console.print(title, style="bold", markup=False, highlight=False, soft_wrap=True)
    for key, value in rows:
        console.print(f"  {key}: {value}", markup=False, highlight=False, soft_wrap=True)


def error_document(exc: Any) -> dict[str, Any]:
    """The --json document of a failure: {"error": {message, hint, exit_code, kind}}."""
    from .errors import ExitCode

    code = int(getattr(exc, "exit_code", ExitCode.UNEXPECTED))
    try:
        kind = ExitCode(code).name.lower()
    except ValueError:
        kind = "unexpected"
    hint = getattr(exc, "hint", None)
    return {"error": {"message": redact(str(getattr(exc, "message", exc))), "hint": redact(hint) if hint else hint,
                      "exit_code": code, "kind": kind}}


def to_jsonable(data: Any) -> Any:
    """pydantic models and other objects to plain JSON data."""
    if hasattr(data, "model_dump"):
        return data.model_dump(mode="json", by_alias=True)
    if isinstance(data, dict):
        return {str(k): to_jsonable(v) for k, v in data.items()}
    if isinstance(data, (list, tuple)):
        return [to_jsonable(v) for v in data]
    return data


class Output:
    """Human (Rich) or machine (--json) output. Nothing else in peagle prints."""

    def __init__(self, json_mode: bool = False, *, stdout: IO[str] | None = None, stderr: IO[str] | None = None):
        self.json_mode = json_mode
        self._stdout = stdout
        self._stderr = stderr
        self._console: Console | None = None
        self._err_console: Console | None = None
        self._emitted = False

    @property
    def stdout(self) -> IO[str]:
        return self._stdout or sys.stdout

    @property
    def stderr(self) -> IO[str]:
        return self._stderr or sys.stderr

    @property
    def console(self) -> Console:
        """Rich console on stdout, for human results."""
        if self._console is None:
            self._console = make_console(self.stdout)
        return self._console

    @property
    def err_console(self) -> Console:
        """Rich console on stderr, for progress, notes and errors."""
        if self._err_console is None:
            self._err_console = make_console(self.stderr, stderr=True)
        return self._err_console

    # results -------------------------------------------------------------------------------
    def result(self, data: Any, human: Callable[[Console], None] | None = None, *,
               reveal: Sequence[str] = ()) -> None:
        """The command's result: one JSON document with --json, else `human(console)`. `reveal`: secrets this
        result shows because the user asked for exactly them (`peagle openai`'s token); all else is redacted."""
        with revealing(reveal):
            self._result(data, human)

    def _result(self, data: Any, human: Callable[[Console], None] | None) -> None:
        if self.json_mode:
            if self._emitted:
                raise RuntimeError("a command emitted two JSON documents")
            self._emitted = True
            text = json.dumps(to_jsonable(data), indent=2, sort_keys=False, default=str)
            self.stdout.write(redact(text) + "\n")
            self.stdout.flush()
        elif human is not None:
            human(self.console)
        else:
            self.console.print_json(json.dumps(to_jsonable(data), default=str))

    def fail(self, exc: Any) -> None:
        """A failure: one stderr line; with --json also the error document, unless a result went out."""
        self.error(exc.one_line() if hasattr(exc, "one_line") else str(exc))
        if self.json_mode and not self._emitted:
            self._emitted = True
            self.stdout.write(json.dumps(error_document(exc), indent=2) + "\n")
            self.stdout.flush()

    def write_live(self, text: str) -> None:
        """Streamed text (tokens as they arrive), human mode only; unbuffered."""
        if self.json_mode:
            return
        self.stdout.write(redact(text))
        self.stdout.flush()

    # notes ---------------------------------------------------------------------------------
    # soft_wrap: Rich inserts no line breaks; a terminal folds long lines itself and copying keeps them whole
    def info(self, message: str) -> None:
        self.err_console.print(message, markup=False, soft_wrap=True, highlight=False)

    def note(self, message: str) -> None:
        self.err_console.print(f"note: {message}", style="cyan", markup=False, soft_wrap=True, highlight=False)

    def warn(self, message: str) -> None:
        self.err_console.print(f"warning: {message}", style="yellow", markup=False, soft_wrap=True,
                               highlight=False)

    def error(self, message: str) -> None:
        # plain write: an error line must never be wrapped or styled into two lines
        self.stderr.write(redact(f"error: {message}") + "\n")
        self.stderr.flush()

    @property
    def interactive(self) -> bool:
        """stderr is a terminal: spinners and live redraws are fine there, nowhere else."""
        return self.err_console.is_terminal

    @contextmanager
    def status(self, message: str, *, clock: Callable[[], float] = time.monotonic
               ) -> Iterator[Callable[[str], None]]:
        """A spinner on a terminal, else plain progress lines (one per update that starts a new phase,
        a heartbeat otherwise); yields a function that updates the text."""
        if self.interactive:
            with self.err_console.status(message) as live:
                yield lambda text: live.update(text)
            return
        # no line for `message` itself: a step that fails at once leaves only its one error line
        yield PlainProgress(self.info, clock=clock)

    def interactive_input(self) -> bool:
        """Whether a question can be asked (stdin is a terminal)."""
        return sys.stdin is not None and sys.stdin.isatty()

    def confirm(self, question: str, *, yes: bool) -> None:
        """Ask before something that costs money or deletes. No terminal and no --yes: refuse."""
        from .errors import UsageError

        if yes:
            return
        stdin = sys.stdin
        if stdin is None or not stdin.isatty():
            raise UsageError(f"{question} needs confirmation", "pass --yes to confirm without a terminal")
        from rich.prompt import Confirm

        if not Confirm.ask(question, console=self.err_console, default=False):
            from .errors import Interrupted

            raise Interrupted("cancelled at the prompt", "nothing was changed")


class PlainProgress:
    """Progress as plain lines (no terminal): a line when the text changes other than in its numbers
    (a new phase), and otherwise at most one every `every_s` seconds, so a CI log shows life without
    a line per poll."""

    def __init__(self, emit: Callable[[str], None], *, every_s: float = 30.0,
                 clock: Callable[[], float] = time.monotonic):
        self._emit = emit
        self._every_s = every_s
        self._clock = clock
        self._last_shape: str | None = None
        self._last_at = 0.0

    def __call__(self, text: str) -> None:
        shape = re.sub(r"\d+(?:\.\d+)?", "#", text)
        now = self._clock()
        if shape != self._last_shape or now - self._last_at >= self._every_s:
            self._emit(text)
            self._last_shape, self._last_at = shape, now


class _RedactingWriter:
    """A file-like wrapper that redacts whatever Rich writes through it."""

    def __init__(self, target: IO[str]):
        self._target = target

    def write(self, text: str) -> int:
        return self._target.write(redact(text))

    def flush(self) -> None:
        self._target.flush()

    def isatty(self) -> bool:
        return bool(getattr(self._target, "isatty", lambda: False)())

    def fileno(self) -> int:
        return self._target.fileno()

    @property
    def encoding(self) -> str:
        return getattr(self._target, "encoding", "utf-8") or "utf-8"
