"""The Typer application. Importing this must stay cheap: no boto3, no SageMaker SDK.

Conventions every command shares (docs/cli.md, README):
- `-h` and `--help` on every command; `peagle` (or a command group) with no arguments prints its help
  and exits 2, as Click does: nothing was done, and a script must be able to tell.
- Usage errors are one stderr line and exit 2; with `--json` also one JSON error document on stdout.
- A reader that closes stdout early (`peagle models | head -1`) is not a failure: peagle stops writing
  and exits 0 quietly, and whatever the command did stands (stderr still carries errors).
- Shell completion is Typer's: `peagle --install-completion`, or `peagle --show-completion SHELL`.
"""

from __future__ import annotations

import typer

from .. import __version__

app = typer.Typer(
    name="peagle",
    help="P-EAGLE speculative decoding endpoints on Amazon SageMaker: deploy, invoke, bench, clean up.",
    no_args_is_help=True,
    add_completion=True,
    context_settings={"help_option_names": ["-h", "--help"]},
    pretty_exceptions_enable=False,
    pretty_exceptions_show_locals=False,
    rich_markup_mode="rich",
)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"peagle {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: bool = typer.Option(False, "--version", callback=_version, is_eager=True, help="Show the version."),
) -> None:
    """P-EAGLE speculative decoding endpoints on Amazon SageMaker."""


def _register() -> None:
    from . import bench, container, deploy, iam, invoke, lifecycle, local, logs, metrics, models, sweep, update

    for module in (models, deploy, update, lifecycle, invoke, bench, metrics, logs, container, local, sweep, iam):
        module.register(app)


_register()


def main(argv: list[str] | None = None) -> None:
    """Console entry point: usage errors become one line and exit 2, never a help box or traceback."""
    import sys

    from ..output import stdout_closed

    args = sys.argv[1:] if argv is None else list(argv)
    _usable_stdio()
    stdout_was_devnull = _stdout_is_devnull()
    try:
        code = app(args=args, prog_name="peagle", standalone_mode=False)
    except typer.Abort:
        _fail("aborted", None, 130, args)
    except BrokenPipeError:
        stdout_closed()
    except SystemExit as exc:
        # Click (PacifyFlushWrapper) and Rich (Typer's help console: stdout moved to /dev/null) both
        # turn a closed stdout into exit 1
        if _stdout_was_closed() or (exc.code == 1 and not stdout_was_devnull and _stdout_is_devnull()):
            stdout_closed()
        raise
    except Exception as exc:  # Click's usage errors (typer vendors Click; its classes are private)
        if type(exc).__name__ == "NoArgsIsHelpError":
            sys.exit(2)  # the help is already on stdout
        if hasattr(exc, "format_message") and isinstance(getattr(exc, "exit_code", None), int):
            ctx = getattr(exc, "ctx", None)
            where = f"peagle {ctx.command_path.split(' ', 1)[1]}" if ctx and " " in ctx.command_path \
                else _command_path(args)
            _fail(exc.format_message(), f"see '{where} --help'", 2 if exc.exit_code in (1, 2) else exc.exit_code,
                  args)
        raise
    try:
        sys.stdout.flush()
    except BrokenPipeError:
        stdout_closed()
    sys.exit(code if isinstance(code, int) else 0)


def _usable_stdio() -> None:
    """The user's environment is never a bug (exit 1): a stdout or stderr closed before the start (`peagle
    models >&-`) is /dev/null (what the command does stands, as with a reader that went away), and a stream
    whose encoding cannot show every character (PYTHONIOENCODING=ascii, a C locale) shows '?' for it."""
    import codecs
    import os
    import sys

    for name in ("stdout", "stderr"):
        stream = getattr(sys, name)
        if stream is None:  # fd closed at start-up: Python leaves sys.stdout None
            setattr(sys, name, open(os.devnull, "w", encoding="utf-8"))  # noqa: SIM115 - lives as long as peagle
            continue
        encoding = getattr(stream, "encoding", None) or "utf-8"
        try:
            unicode_safe = codecs.lookup(encoding).name.startswith("utf")
        except LookupError:
            unicode_safe = False
        if not unicode_safe and getattr(stream, "errors", "strict") == "strict" and hasattr(stream, "reconfigure"):
            stream.reconfigure(errors="replace")


def _command_path(args: list[str]) -> str:
    """'peagle status' for ['status', '--region']: Click gives some usage errors no context."""
    import typer.main

    command, path = typer.main.get_command(app), ["peagle"]
    for arg in args:
        sub = getattr(command, "commands", {}).get(arg)
        if sub is None:
            break
        command, path = sub, [*path, arg]
    return " ".join(path)


def _json_requested(args: list[str]) -> bool:
    return "--json" in (args[: args.index("--")] if "--" in args else args)


def _fail(message: str, hint: str | None, code: int, args: list[str]) -> None:
    """One stderr line (and with --json the error document), then exit `code`."""
    import sys

    from ..errors import PeagleError
    from ..output import Output

    error = PeagleError(message, hint)
    error.exit_code = code  # Click's own code; ExitCode names only the README's
    Output(_json_requested(args)).fail(error)
    sys.exit(code)


def _stdout_is_devnull() -> bool:
    import os
    import sys

    try:
        fd, null = os.fstat(sys.__stdout__.fileno()), os.stat(os.devnull)
    except (OSError, AttributeError, ValueError):
        return False
    return (fd.st_dev, fd.st_ino) == (null.st_dev, null.st_ino)


def _stdout_was_closed() -> bool:
    import sys

    return type(sys.stdout).__name__ == "PacifyFlushWrapper"
