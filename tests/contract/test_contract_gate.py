"""The contract tier's gate, as a user runs it (a pytest of its own, against the emulator's loopback server for
credentials and the Pricing API): `PEAGLE_AWS_TESTS=1 pytest -m aws --collect-only` prints the cost estimate and
lists one test per behaviour; a run whose estimate is above `PEAGLE_AWS_MAX_COST` refuses to start; the fast
suite's own `-m` deselects the tier."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from .scenarios import BEHAVIOURS, RUNS

ROOT = Path(__file__).resolve().parents[2]
PRICE = 0.25  # the emulator's Pricing API answer for ml.m5.large here (not AWS's price)


def _pytest(emu, *args: str, **env: str) -> subprocess.CompletedProcess:
    emu.set_price("ml.m5.large", PRICE, region=emu.region)
    environ = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "PEAGLE_AWS_"))}
    environ.update(emu.env, PEAGLE_AWS_TESTS="1", PEAGLE_AWS_REGION=emu.region, **env)
    return subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *args,
                           "tests/contract/test_contract_aws.py"],
                          cwd=ROOT, env=environ, capture_output=True, text=True, timeout=300)


def test_collect_only_prints_the_estimate_and_lists_one_test_per_behaviour(emu):
    out = _pytest(emu, "-m", "aws", "--collect-only")
    assert out.returncode == 0, out.stdout + out.stderr
    listed = re.findall(r"::test_on_aws\[([a-z0-9_-]+)\]$", out.stdout, flags=re.M)
    assert sorted(listed) == sorted(b.id for b in BEHAVIOURS) and len(listed) == len(set(listed))
    runs = {b.run for b in BEHAVIOURS if b.run and not b.aws_skip}
    hours = sum(RUNS[r].footprint.instances * RUNS[r].footprint.bound_minutes for r in runs) / 60
    expected = sum(RUNS[r].footprint.expected_instance_minutes for r in runs) / 60
    assert f"estimated cost: ${expected * PRICE:,.2f} expected, at most ${hours * PRICE:,.2f}" in out.stdout
    assert "price of one ml.m5.large: $0.25/h ($6.00/day), SageMaker hosting: AWS Price List API" in out.stdout
    assert re.search(r"every name starting peagle-ct-[0-9a-f]{6}-, on ml\.m5\.large", out.stdout)
    assert out.stdout.index("estimated cost") < out.stdout.index("::test_on_aws[")  # before anything else


def test_a_run_above_the_cap_refuses_to_start(emu):
    out = _pytest(emu, "-m", "aws", PEAGLE_AWS_MAX_COST="0.01", PEAGLE_AWS_ROLE_ARN=emu.role_arn,
                  PEAGLE_AWS_IMAGE="123456789012.dkr.ecr.us-east-1.amazonaws.com/peagle-contract:1")
    assert out.returncode == 4, out.stdout + out.stderr  # pytest's usage error: nothing ran
    assert "the contract tier refuses to start: it may cost up to $" in out.stderr
    assert "above the cap of $0.01" in out.stderr and "passed" not in out.stdout
    assert not emu.resource_names()["endpoints"]


def test_the_default_selection_leaves_the_tier_out():
    """pyproject's addopts deselect `aws` as they do the other opt-in tiers (the fast suite never reaches AWS)."""
    import tomllib

    options = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["pytest"]["ini_options"]
    assert "and not aws'" in options["addopts"] and any(m.startswith("aws:") for m in options["markers"])
