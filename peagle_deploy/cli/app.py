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
from typer.core import TyperGroup

from .. import __version__

# Every command: name -> (its module in peagle_deploy.cli, the line `peagle --help` shows for it). `peagle
# --help` lists these without importing any command module, and running a command imports its own module
# only (its `register(app)` adds it). A new command is one row here; tests/test_cli_lazy_commands.py checks every row
# against the module's real command and that every module with a `register` has its rows.
COMMANDS: dict[str, tuple[str, str]] = {
    "models": ("models", "List the four supported models: alias, JumpStart id, default instance, K, drafter, gating."),
    "deploy": ("deploy", "Deploy MODEL with P-EAGLE on an ml.g7e SageMaker endpoint (or print the plan with --dry-run)."),
    "update": ("update", "Change K, mode or instances of a peagle endpoint: new config, blue/green UpdateEndpoint, "
                         "verify, tidy up."),
    "status": ("lifecycle", "peagle-managed endpoints: status, model, mode, K, instances, age, expiry, cost so far."),
    "cleanup": ("lifecycle", "Delete endpoint, endpoint config and model that peagle created. Never touches anything "
                             "else."),
    "recover": ("recover", "Finish an interrupted deploy, update, cleanup or sweep teardown: complete or revert, "
                           "restore scaling, tidy up."),
    "invoke": ("invoke", "Send an OpenAI-style chat completion; print tokens live, then TTFT, latency and tokens/s."),
    "openai": ("openai_route", "The OpenAI base URL of an endpoint (SageMaker's OpenAI-compatible route) and a "
                               "short-lived bearer token."),
    "metrics": ("metrics", "Mean acceptance length, acceptance rate and per-position acceptance over a window."),
    "logs": ("logs", "Print the container's log lines of endpoint NAME (CloudWatch Logs group "
                     "/aws/sagemaker/Endpoints/NAME)."),
    "sweep": ("sweep", "Deploy, verify, bench and tear down each (mode, K) under a --budget; one report like the "
                       "published table."),
    "iam-policy": ("iam", "The IAM actions each command calls (docs/iam.md); with --json, an identity policy to "
                          "attach."),
    "bench": ("bench", "Benchmark a target: 'peagle bench TARGET \\[options]' (same as 'peagle bench run'), compare "
                       "runs, advise K."),
    "datasets": ("datasets", "The published benchmark sets 'peagle bench --dataset' reads: humaneval, mt-bench "
                             "(fetched on first use)."),
    "drafter": ("drafter", "Drafters peagle fetches for you: 'peagle drafter stage MODEL --method dflash --to "
                           "s3://BUCKET/PREFIX'."),
    "container": ("container", "The bundled vLLM + P-EAGLE container: its argv and its Dockerfile."),
    "local": ("local", "Run the SageMaker container environment on this machine (vLLM + P-EAGLE), then invoke, bench "
                       "and metrics against it."),
}


class LazyCommands(TyperGroup):
    """The root group: lists COMMANDS from the table, imports a command's module when it is run (or when
    code reads `.commands`, which loads them all: docs generation, tests)."""

    @property
    def commands(self):  # noqa: ANN201 - Click's attribute
        for name in COMMANDS:
            self._load(name)
        return self._commands

    @commands.setter
    def commands(self, value) -> None:  # noqa: ANN001
        self._commands = value

    def _load(self, name: str):  # noqa: ANN202
        if name not in self._commands and name in COMMANDS:
            import importlib

            import typer.main

            module = importlib.import_module(f"{__package__}.{COMMANDS[name][0]}")
            holder = typer.Typer(rich_markup_mode="rich")
            module.register(holder)
            for loaded, command in typer.main.get_group(holder).commands.items():
                _strict_numbers(command)
                self._commands.setdefault(loaded, command)
        return self._commands.get(name)

    def list_commands(self, ctx) -> list[str]:  # noqa: ANN001
        return [*COMMANDS, *(name for name in self._commands if name not in COMMANDS)]

    def get_command(self, ctx, cmd_name: str):  # noqa: ANN001, ANN201
        """A loaded command, or for listing (help, completion of names) a stand-in with the table's line."""
        if cmd_name in self._commands or cmd_name not in COMMANDS:
            return self._commands.get(cmd_name)
        from typer.core import TyperCommand

        return TyperCommand(cmd_name, help=COMMANDS[cmd_name][1], rich_markup_mode="rich")

    def resolve_command(self, ctx, args):  # noqa: ANN001, ANN201
        if args:
            self._load(ctx.token_normalize_func(args[0]) if ctx.token_normalize_func else args[0])
        return super().resolve_command(ctx, args)


class _StrictNumber:
    """A numeric option's coercion, after the value as typed is read by peagle's one rule (inputs.strict_number):
    Typer's own (pydantic's) would take ' 3', '+3', '1_0' and other scripts' digits."""

    def __init__(self, inner, flag: str, whole: bool):  # noqa: ANN001 - Typer's RuntimeParam
        self.inner, self.flag, self.whole = inner, flag, whole

    def coerce(self, value, param, ctx):  # noqa: ANN001, ANN201 - Typer's signature
        from ..inputs import strict_number

        return self.inner.coerce(strict_number(value, self.flag, self.whole), param=param, ctx=ctx)


class _NotEmptyPath:
    """A path parameter's coercion, refusing an empty one first: Typer reads '' as '.', the current folder, so
    `peagle bench advise ''` said 'result file . is a directory'."""

    def __init__(self, inner, label: str, help_text: str):  # noqa: ANN001 - Typer's RuntimeParam
        self.inner, self.label, self.help = inner, label, help_text

    def coerce(self, value, param, ctx):  # noqa: ANN001, ANN201 - Typer's signature
        from ..errors import UsageError

        for item in value if isinstance(value, (list, tuple)) else [value]:
            if isinstance(item, str) and not item.strip():
                raise UsageError(f"{self.label} is empty", f"pass a path: {self.help}" if self.help else "pass a path")
        return self.inner.coerce(value, param=param, ctx=ctx)


def _strict_numbers(command) -> None:  # noqa: ANN001 - a Click command or group
    """Every int or float option of `command` (and of its subcommands) read by peagle's rule before Typer's, and
    every path parameter refusing an empty value."""
    import pathlib
    import typing

    for sub in getattr(command, "commands", {}).values():
        _strict_numbers(sub)
    for param in command.params:
        descriptor = getattr(param, "type_descriptor", None)
        opts = list(getattr(param, "opts", []))
        flags = [opt for opt in opts if opt.startswith("--")]
        if descriptor is None or isinstance(param.get_runtime_param(), (_StrictNumber, _NotEmptyPath)):
            continue
        kinds, todo = set(), [descriptor.annotation]
        while todo:
            kind = todo.pop()
            if kind in (int, float, bool, pathlib.Path):
                kinds.add(kind)
            todo.extend(typing.get_args(kind))
        if flags and kinds & {int, float} and bool not in kinds:
            param._runtime_param = _StrictNumber(param.get_runtime_param(), max(flags, key=len), float not in kinds)
        elif pathlib.Path in kinds:
            label = max(flags, key=len) if flags else (param.name or "path").upper()
            first = (getattr(param, "help", None) or "").split(". ")[0].rstrip(".")
            param._runtime_param = _NotEmptyPath(param.get_runtime_param(), label, first[:1].lower() + first[1:])


app = typer.Typer(
    cls=LazyCommands,
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


def main(argv: list[str] | None = None) -> None:
    """Console entry point: usage errors become one line and exit 2, never a help box or traceback."""
    import sys

    from ..errors import PeagleError
    from ..output import stdout_closed

    args = sys.argv[1:] if argv is None else list(argv)
    if len(args) <= 2 or "-h" in args or "--help" in args:  # a help page may be printed: no option name cut
        from typer import rich_utils

        rich_utils._print_options_panel = _options_panel
    _usable_stdio()
    stdout_was_devnull = _stdout_is_devnull()
    try:
        code = app(args=args, prog_name="peagle", standalone_mode=False)
    except typer.Abort:
        _fail("aborted", None, 130, args)
    except PeagleError as exc:  # a value refused while Click reads the options (inputs.strict_number)
        _fail(exc.message, exc.hint, int(exc.exit_code), args)
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


# The options panel of `--help`, laid out so that no option name is ever cut (issue 49 item 8): Typer's own puts
# the long, short and negative names (`--no-wait`), the type and the help in six columns, and at 80 columns Rich
# shrinks them all and cuts names (`--capacity-reservation-p…`). Here all names of an option share one column, one
# per line and never wrapped, the type beside them, and only the help wraps (a word longer than its column folds).
def _options_panel(*, name: str, params: list, ctx, markup_mode, console) -> None:  # noqa: ANN001 - Typer's
    from rich.panel import Panel
    from rich.table import Column, Table
    from rich.text import Text
    from typer import rich_utils as ru
    from typer.core import TyperArgument

    rows = []
    for param in params:
        if isinstance(param, TyperArgument):
            names = [param.display_name_raw + ("..." if param.metavar is None and param.nargs != 1 else "")]
        else:
            # long names first, then short ones (-h): Click keeps --help's names in a set, in no fixed order
            names = sorted(param.opts, key=lambda o: not o.startswith("--")) + list(param.secondary_opts)
        label = Text()
        for i, option in enumerate(names):
            negative = option in getattr(param, "secondary_opts", [])
            label.append(("\n" if i else "") + option, style=ru.STYLE_NEGATIVE_OPTION if negative else ru.STYLE_OPTION)
        kind = Text(style=ru.STYLE_TYPES, overflow="fold")
        shown = param.display_type_rich(ctx=ctx)
        if shown is not None:
            kind.append(shown)
        if param._get_number_range_help_str():
            kind.append(ru.RANGE_STRING.format(param._get_number_range_help_str()))
        required = Text(ru.REQUIRED_SHORT_STRING, style=ru.STYLE_REQUIRED_SHORT) if param.required else Text("")
        helped = ru._get_parameter_help(param=param, ctx=ctx, markup_mode=markup_mode)
        for item in getattr(helped, "renderables", []):  # a word longer than the column folds, never '…'
            if isinstance(item, Text):
                item.overflow = "fold"
        rows.append((required, label, kind, helped))
    if not rows:
        return
    any_required = any(str(row[0]) for row in rows)
    columns = ([Column(no_wrap=True)] if any_required else []) + [
        Column(no_wrap=True), Column(no_wrap=True), Column(overflow="fold", ratio=1)]
    table = Table(*columns, highlight=True, show_header=False, expand=True, box=None, pad_edge=False,
                  padding=(0, 1))
    for required, *rest in rows:
        table.add_row(*([required] if any_required else []), *rest)
    console.print(Panel(table, border_style=ru.STYLE_OPTIONS_PANEL_BORDER, title=name,
                        title_align=ru.ALIGN_OPTIONS_PANEL))



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
