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


MODEL_TABLE_HEADER = "| model alias | JumpStart model id | default instance | K | max K | gated |"


def _model_row(entry) -> str:
    """The README row of one catalog entry: a value peagle could not verify says so (as `peagle models` marks it)."""
    def said(field: str, text: str) -> str:
        return text if entry.is_verified(field) else f"{text} (unverified)"

    model_id = f"`{entry.model_id}`"
    if not entry.is_verified("model_id"):
        model_id += " (unverified; `--model-id` overrides)"
    cells = [f"`{entry.alias}`", model_id, said("default_instance_type", entry.default_instance_type),
             said("default_k", str(entry.default_k)), said("max_k", str(entry.max_k)),
             "yes: `--accept-eula`" if entry.gated else "no"]
    return "| " + " | ".join(cells) + " |"


def test_readme_model_table_is_the_catalog():
    """The README's model table says what templates/models/*.toml say: every model, its id, default instance,
    K, max K and gating, each unverified value marked. On failure the message is the table's rows to paste."""
    from peagle_deploy.catalog import load_catalog

    lines = (ROOT / "README.md").read_text().splitlines()
    assert MODEL_TABLE_HEADER in lines, f"the README has no model table headed {MODEL_TABLE_HEADER}"
    start = lines.index(MODEL_TABLE_HEADER) + 2  # past the header and its |---| line
    end = next((i for i in range(start, len(lines)) if not lines[i].startswith("|")), len(lines))
    expected = [_model_row(entry) for entry in load_catalog().values()]
    assert sorted(lines[start:end]) == sorted(expected), "\n".join(expected)
