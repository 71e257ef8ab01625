"""peagle's Click command tree built once per test process, not once per command run.

Typer turns the `app` into Click commands on every `app(...)` call (`typer.main.get_command`): the root group, its
completion options and, through `LazyCommands`, the command that runs (its parameters read from the function's
signature). A process that runs one command (the installed executable) builds it once; the suite's in-process runs
(tests/cli_runner.py) and forked children (tests/peagle_forkserver.py) ran it anew each time: about 40 ms of CPU
per run, a fifth of a rejected command's in-process run. `share_command_tree()` keeps the tree this process built
for the `app` (and loads each command into it at most once); Click builds a new context for every invocation, so
nothing of one run is left in it for the next. The tree depends on one setting read while it is built (Typer's
`_TYPER_COMPLETE_TEST_DISABLE_SHELL_DETECTION`): a tree is kept per value of it.

Used by conftest (the pytest process) and the fork server, which builds every command before it forks. A test that
replaces a command's own function after its first run would not see it here; none does (patch what it calls).
"""

from __future__ import annotations

import os
import threading

_lock = threading.Lock()
_trees: dict[str | None, object] = {}


def share_command_tree(load_all: bool = False) -> None:
    """Keep the tree of peagle's `app` once built; with `load_all`, build it and every command now."""
    import typer.main

    from peagle_deploy.cli.app import app

    if not getattr(typer.main.get_command, "shared", False):
        build = typer.main.get_command

        def get_command(typer_instance):
            if typer_instance is not app:
                return build(typer_instance)
            key = os.environ.get("_TYPER_COMPLETE_TEST_DISABLE_SHELL_DETECTION")
            with _lock:
                if key not in _trees:
                    _trees[key] = build(app)
                return _trees[key]

        get_command.shared = True
        typer.main.get_command = get_command
    if load_all:
        typer.main.get_command(app).commands  # noqa: B018 - LazyCommands loads every command's module and tree
