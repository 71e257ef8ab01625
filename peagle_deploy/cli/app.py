"""The Typer application. Importing this must stay cheap: no boto3, no SageMaker SDK."""

from __future__ import annotations

import typer

from .. import __version__

app = typer.Typer(
    name="peagle",
    help="P-EAGLE speculative decoding endpoints on Amazon SageMaker: deploy, invoke, bench, clean up.",
    no_args_is_help=True,
    add_completion=False,
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
    from . import bench, container, deploy, invoke, lifecycle, local, metrics, models

    for module in (models, deploy, lifecycle, invoke, bench, metrics, container, local):
        module.register(app)


_register()


def main(argv: list[str] | None = None) -> None:
    """Console entry point: usage errors become one line and exit 2, never a help box or traceback."""
    import sys

    try:
        code = app(args=argv, prog_name="peagle", standalone_mode=False)
    except typer.Abort:
        _fail("aborted", 130)
    except Exception as exc:  # Click's usage errors (typer vendors Click; its classes are private)
        if hasattr(exc, "format_message") and isinstance(getattr(exc, "exit_code", None), int):
            ctx = getattr(exc, "ctx", None)
            where = f"peagle {ctx.command_path.split(' ', 1)[1]}" if ctx and " " in ctx.command_path else "peagle"
            _fail(f"{exc.format_message()}: see '{where} --help'", 2 if exc.exit_code in (1, 2) else exc.exit_code)
        raise
    sys.exit(code if isinstance(code, int) else 0)


def _fail(message: str, code: int) -> None:
    import sys

    from ..output import redact

    sys.stderr.write(redact(f"error: {' '.join(message.split())}") + "\n")
    sys.exit(code)
