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
