"""The fast suite never runs the real-vLLM tier; `-m real_vllm` selects it (collection only, no vLLM needed)."""

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _collect(*args):
    return subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-p", "no:cacheprovider",
                           *args, "tests/real_vllm"], cwd=ROOT, capture_output=True, text=True, timeout=120)


def test_default_run_deselects_the_real_tier():
    out = _collect()
    assert out.returncode == 5, out.stdout + out.stderr  # everything deselected
    assert re.search(r"(\d+) deselected", out.stdout) and "real_vllm" not in out.stderr


def test_marker_selects_every_real_test():
    out = _collect("-m", "real_vllm")
    assert out.returncode == 0, out.stdout + out.stderr
    selected = [line for line in out.stdout.splitlines() if "::" in line]
    assert len(selected) >= 20 and all(line.startswith("tests/real_vllm/") for line in selected)
