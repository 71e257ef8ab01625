"""`peagle --help` lists every command from cli/app.py's COMMANDS table without importing a command module,
and running a command imports its own module only: a new command module costs nothing to the others."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import typer.main

from peagle_deploy.cli import app as app_module
from tests.cli_runner import run_cli

CLI = Path(app_module.__file__).parent
HEAVY = ("boto3", "botocore", "sagemaker", "pydantic", "aiohttp", "pandas", "numpy", "matplotlib", "moto")


def _loaded_after(args: list[str]) -> set[str]:
    """Modules a fresh `peagle ARGS` process has imported when it is done (the subject is the process)."""
    probe = ("import sys\nfrom peagle_deploy.cli.app import main\ntry:\n    main(sys.argv[1:])\n"
             "except SystemExit:\n    pass\nprint('\\n'.join(sys.modules))")
    out = subprocess.run([sys.executable, "-c", probe, *args], capture_output=True, text=True, timeout=120)
    return set(out.stdout.split())


def test_the_table_matches_every_command_module():
    registered = {f.stem for f in CLI.glob("*.py") if re.search(r"^def register\(", f.read_text(), re.M)}
    assert registered == {module for module, _ in app_module.COMMANDS.values()}  # a module without a row: add it
    root = typer.main.get_command(app_module.app)
    real = root.commands  # loads every module
    assert list(real) == list(app_module.COMMANDS)
    for name, (module, line) in app_module.COMMANDS.items():
        command = real[name]
        first_paragraph = (command.help or "").split("\n\n")[0]
        assert line == first_paragraph, name
        owner = command.callback.__module__ if command.callback else None
        assert owner in (None, f"peagle_deploy.cli.{module}"), name


def test_root_help_lists_every_command_and_the_stand_ins_show_the_real_lines():
    res = run_cli("--help")
    assert res.code == 0
    for name in app_module.COMMANDS:
        assert re.search(rf"│ {re.escape(name)}\s", res.stdout), name


def test_help_imports_no_command_module_and_nothing_heavy():
    loaded = _loaded_after(["--help"])
    commands = {m for m in loaded if m.startswith("peagle_deploy.cli.") and m != "peagle_deploy.cli.app"}
    assert not commands, sorted(commands)
    assert not {m.split(".")[0] for m in loaded} & set(HEAVY)


def test_a_command_imports_its_own_module_only():
    loaded = _loaded_after(["status", "--help"])
    commands = {m.rsplit(".", 1)[1] for m in loaded if m.startswith("peagle_deploy.cli.")}
    assert commands <= {"app", "lifecycle", "common"}, sorted(commands)
    assert "peagle_deploy.lifecycle.apply" not in loaded and "peagle_deploy.plan" not in loaded
    assert not {m.split(".")[0] for m in loaded} & {"boto3", "botocore", "sagemaker", "aiohttp"}


def test_a_mistyped_command_still_suggests_the_right_one():
    res = run_cli("stauts")
    assert res.code == 2 and "status" in res.stderr
