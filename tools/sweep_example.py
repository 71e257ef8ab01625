"""The worked example of docs/sweep.md: a 7-configuration sweep against the emulator and stand-in
endpoints (peagle_deploy.testing.sweep_standins), through the installed `peagle`.

    .venv/bin/python tools/sweep_example.py OUT_DIR
    .venv/bin/python tools/sweep_example.py OUT_DIR --components    # the sweep on inference components

prints the commands and what they printed (stdout and stderr), ready to paste into the docs.
"""

from __future__ import annotations

import shlex
import subprocess
import sys
from pathlib import Path

from peagle_deploy.testing import SageMakerEmulator
from peagle_deploy.testing.sweep_standins import SpecModel, SweepStandIn

PEAGLE = str(Path(sys.executable).parent / "peagle")


def show(env: dict, *args: str) -> None:
    print("$ peagle " + " ".join(shlex.quote(a) for a in args))
    res = subprocess.run([PEAGLE, *args], env={**env, "COLUMNS": "100"}, capture_output=True, text=True)
    print(res.stderr.rstrip() + ("\n" if res.stderr.strip() else "") + res.stdout.rstrip())
    print(f"(exit {res.returncode})\n")


class _Quiet:
    """moto's server prints a line for each Pricing API call it has no backend for (bench asks for the
    on-demand price, then falls back to peagle's table): keep those out of the example."""

    def __init__(self, target):
        self.target = target

    def write(self, text: str) -> int:
        return 0 if text.startswith("Unable to find appropriate backend") else self.target.write(text)

    def flush(self) -> None:
        self.target.flush()


def components(out: Path) -> None:
    """off, EAGLE-3 and P-EAGLE as three components of one endpoint, beside the classic layout's estimate."""
    with SageMakerEmulator.server() as emu:
        SweepStandIn(emu, SpecModel(base_tok_s=30)).install()
        common = ["--hosting", "component", "--modes", "off,eagle3,p-eagle", "--k", "3", "--concurrency", "1,4",
                  "--duration", "3", "--logs-wait", "0"]
        show(emu.env, "sweep", "qwen3-coder", *common, "--budget", "10", "--dry-run")
        show(emu.env, "sweep", "qwen3-coder", *common, "--budget", "10", "--role", emu.role_arn, "--yes", "--out",
             str(out))
        show(emu.env, "status")


def main() -> None:
    sys.stdout = _Quiet(sys.stdout)
    out = Path(sys.argv[1] if len(sys.argv) > 1 else "sweep-example")
    if "--components" in sys.argv[2:]:
        components(out)
        return
    with SageMakerEmulator.server() as emu:
        SweepStandIn(emu, SpecModel(base_tok_s=30)).install()
        emu.set_quota("ml.g7e.2xlarge", 2)
        common = ["--concurrency", "1,4,8,32", "--duration", "3", "--logs-wait", "0"]
        show(emu.env, "sweep", "qwen3-coder", *common, "--budget", "10", "--parallel", "2", "--dry-run")
        show(emu.env, "sweep", "qwen3-coder", *common, "--budget", "1", "--role", emu.role_arn, "--yes")
        show(emu.env, "sweep", "qwen3-coder", *common, "--budget", "10", "--parallel", "2", "--role", emu.role_arn,
             "--yes", "--out", str(out))
        show(emu.env, "status")


if __name__ == "__main__":
    main()
