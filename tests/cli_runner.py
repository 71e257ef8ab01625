"""Run the real `peagle` entry point in-process and capture exit code, stdout and stderr."""

from __future__ import annotations

import io
from contextlib import redirect_stderr, redirect_stdout
from dataclasses import dataclass


@dataclass
class CliResult:
    code: int
    stdout: str
    stderr: str


def run_cli(*args: str) -> CliResult:
    from peagle_deploy.cli.app import main

    out, err = io.StringIO(), io.StringIO()
    code = 0
    with redirect_stdout(out), redirect_stderr(err):
        try:
            main(list(args))
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 1
    return CliResult(code, out.getvalue(), err.getvalue())
