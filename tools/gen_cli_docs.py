"""Write docs/cli.md from the real `peagle ... --help` output (run after changing any option).

    python tools/gen_cli_docs.py            # rewrite docs/cli.md
    python tools/gen_cli_docs.py --check    # exit 1 if docs/cli.md is stale (the test suite runs this)
"""

from __future__ import annotations

import io
import os
import sys
from contextlib import redirect_stdout
from pathlib import Path

DOC = Path(__file__).resolve().parent.parent / "docs" / "cli.md"
HEADER = """# CLI reference

Generated from the real `--help` output by `python tools/gen_cli_docs.py`; do not edit by hand.
Exit codes and `--json` behaviour are shared by every command: see [configuration.md](configuration.md#exit-codes).

Conventions of every command:
- `-h` is `--help`. `peagle` (or `peagle container`, `peagle bench`) with no arguments prints its help
  and exits 2, as Click does: nothing was done.
- Bad input is one stderr line `error: ... : <how to fix it>` and exit 2. With `--json`, every failure
  also prints one JSON document on stdout: `{"error": {"message", "hint", "exit_code", "kind"}}`
  (`kind` names the exit code: usage, auth, quota, timeout, failed, interrupted, unexpected). When a
  command has already printed its result (a benchmark whose every request failed), that result is the
  one document and the error is the stderr line and the exit code.
- Off a terminal nothing is wrapped (names, URIs and JSON strings stay on one line), there is no
  colour, and progress is plain lines on stderr (a line per phase, a heartbeat), not a spinner. On a
  terminal too narrow for a table, each row becomes a block with its name on a line of its own.
- A reader that closes stdout early (`peagle models | head -1`) is not a failure: peagle stops writing
  and exits 0; what the command did stands.
- Shell completion (Typer's): `peagle --install-completion` for the current shell, or
  `peagle --show-completion bash >> ~/.bashrc` (also zsh, fish, powershell).
- `peagle status --watch [--interval SECONDS]` refreshes until Ctrl-C (which exits 0): redrawn in place
  on a terminal; elsewhere a timestamped line per endpoint, then a line when one appears, changes status
  or goes away. It cannot be combined with `--json` (one document); poll `peagle status --json` instead.
"""


def command_paths() -> list[list[str]]:
    import typer.main

    from peagle_deploy.cli.app import app

    def walk(command, prefix):
        yield prefix
        for name, sub in sorted(getattr(command, "commands", {}).items()):
            yield from walk(sub, [*prefix, name])

    return list(walk(typer.main.get_command(app), []))


def help_text(path: list[str]) -> str:
    from peagle_deploy.cli.app import main

    buffer = io.StringIO()
    with redirect_stdout(buffer):
        try:
            main([*path, "--help"])
        except SystemExit:
            pass
    return "\n".join(line.rstrip() for line in buffer.getvalue().strip("\n").splitlines())


def render() -> str:
    os.environ.update({"COLUMNS": "100", "TERM": "dumb", "NO_COLOR": "1"})
    os.environ.pop("FORCE_COLOR", None)
    parts = [HEADER]
    for path in command_paths():
        title = " ".join(["peagle", *path])
        parts.append(f"## `{title}`\n\n```text\n{help_text(path)}\n```\n")
    return "\n".join(parts)


def main() -> int:
    text = render()
    if "--check" in sys.argv:
        if not DOC.exists() or DOC.read_text(encoding="utf-8") != text:
            print("docs/cli.md is stale: run python tools/gen_cli_docs.py", file=sys.stderr)
            return 1
        return 0
    DOC.write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
