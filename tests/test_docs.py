"""docs/cli.md is generated from the real --help; it must not drift from the code."""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_cli_reference_is_current():
    out = subprocess.run([sys.executable, str(ROOT / "tools" / "gen_cli_docs.py"), "--check"],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr


def test_readme_commands_exist():
    text = (ROOT / "README.md").read_text()
    for command in ("models", "deploy", "status", "invoke", "bench", "metrics", "cleanup", "container"):
        assert f"peagle {command}" in text
