"""Issue 36's region fallback through `peagle` processes (forked, tests/forked_peagle.py) against one emulator
serving us-east-1 and us-west-2, with another team's stack in each region present and untouched:

- no capacity for any pool in us-east-1 -> rolled back there (one line), serving in us-west-2, nothing left in
  us-east-1; --json reports every attempt;
- SIGINT during the second region's attempt -> exit 130, nothing left in either region;
- a crashed container in the first region -> no second attempt;
- `--dry-run` with two types and two regions prints each region's ordered plan with price, quota and fit;
- a malformed or repeated region: one line, exit 2, no AWS write.
"""

from __future__ import annotations

import json
import signal
import subprocess

import pytest

from peagle_deploy.testing.capacity_emulation import POOLS_CAPACITY_REASON

from .forked_peagle import forked_peagle
from .peagle_process import PeagleProcess

EAST, WEST = "us-east-1", "us-west-2"
G2, G4 = "ml.g7e.2xlarge", "ml.g7e.4xlarge"
POOLS = f"{G2},{G4}"
NAME = "regional-qwen"
THEIRS = "team-endpoint"


@pytest.fixture(scope="module")
def emulator_server():
    """This module's emulator: us-east-1 (the default) and us-west-2, both seeded with JumpStart."""
    from peagle_deploy.testing import SageMakerEmulator

    with SageMakerEmulator.server(set_env=False, regions=(WEST,)) as emulator:
        yield emulator


def peagle(emu, *args):
    env = {**emu.env, "COLUMNS": "200", "NO_COLOR": "1"}
    return subprocess.run([forked_peagle(), *args], env=env, capture_output=True, text=True, timeout=300,
                          stdin=subprocess.DEVNULL)


def deploy_args(*extra):
    return ["deploy", "qwen3-coder", "--name", NAME, "--instance-type", POOLS, "--region", f"{EAST},{WEST}",
            *extra]


@pytest.fixture
def theirs(emu):
    """Another team's stack in each region: every test ends with both as they were."""
    for region in (EAST, WEST):
        emu.create_endpoint_stack(THEIRS, instance_type="ml.g7e.8xlarge", region=region)
    yield
    for region in (EAST, WEST):
        assert emu.endpoint_status(THEIRS, region=region) == "InService"


def only_theirs(emu, region):
    return emu.resource_names(region) == {"endpoints": [THEIRS], "configs": [THEIRS], "models": [THEIRS]}


def creates(emu, start):
    return emu.calls[start:].count("CreateEndpoint")


def test_no_capacity_in_the_first_region_rolls_back_there_and_serves_in_the_next(emu, theirs):
    for instance_type in (G2, G4):
        emu.set_capacity(instance_type, 0, region=EAST)
    start = len(emu.calls)
    deployed = peagle(emu, *deploy_args("--role", emu.role_arn, "--provision-timeout", "300", "--yes", "--json"))
    assert deployed.returncode == 0, deployed.stderr
    line = (f'note: {EAST}: no ml.g7e capacity (SageMaker: "{POOLS_CAPACITY_REASON.rstrip(".")}"); rolled back, '
            f"nothing left there; trying {WEST}")
    assert deployed.stderr.count(line) == 1, deployed.stderr
    document = json.loads(deployed.stdout)
    assert [(a["region"], a["outcome"]) for a in document["attempts"]] == [(EAST, "no capacity"), (WEST, "deployed")]
    assert document["deployed"]["region"] == WEST and document["plan"]["region"] == WEST
    assert creates(emu, start) == 2
    assert only_theirs(emu, EAST)  # rolled back there
    assert emu.endpoint_status(NAME, region=WEST) == "InService"
    assert emu.serving(NAME, region=WEST) == {"AllTraffic": {G2: {"instances": 1, "model": NAME}}}

    cleaned = peagle(emu, "cleanup", NAME, "--region", WEST, "--yes")
    assert cleaned.returncode == 0, cleaned.stderr
    assert only_theirs(emu, WEST) and only_theirs(emu, EAST)


def test_no_capacity_in_any_region_is_exit_4_naming_every_attempt(emu, theirs):
    for region in (EAST, WEST):
        for instance_type in (G2, G4):
            emu.set_capacity(instance_type, 0, region=region)
    failed = peagle(emu, *deploy_args("--role", emu.role_arn, "--provision-timeout", "300", "--yes"))
    assert failed.returncode == 4, failed.stderr
    last = failed.stderr.strip().splitlines()[-1]
    assert last.startswith(f"error: no region of {EAST}, {WEST} can serve this deploy ({EAST}: no capacity"), last
    assert f"{WEST}: no capacity" in last and "Traceback" not in failed.stderr
    assert only_theirs(emu, EAST) and only_theirs(emu, WEST)


def test_sigint_during_the_second_regions_attempt_leaves_nothing_in_either_region(emu, theirs):
    for instance_type in (G2, G4):
        emu.set_capacity(instance_type, 0, region=EAST)
    gate = emu.gate("CreateEndpoint", skip=1, resource=NAME)  # the second region's CreateEndpoint
    run = PeagleProcess(deploy_args("--role", emu.role_arn, "--provision-timeout", "300", "--yes"), emu.env,
                        program=forked_peagle())
    run.wait_for_gate(gate)
    run.signal(signal.SIGINT)
    run.wait_for_stderr("received SIGINT")
    gate.release()
    assert run.finish() == 130, run.stderr
    assert f"{EAST}: no ml.g7e capacity" in run.stderr
    last = run.stderr.strip().splitlines()[-1]
    assert last.startswith("error: interrupted by SIGINT") and "rolled back:" in last, run.stderr
    assert only_theirs(emu, EAST) and only_theirs(emu, WEST)


def test_a_crashed_container_in_the_first_region_is_not_tried_in_the_next(emu, theirs):
    emu.script_endpoints(final="Failed", reason="CannotStartContainerError: the container exited with code 139")
    start = len(emu.calls)
    failed = peagle(emu, *deploy_args("--role", emu.role_arn, "--yes"))
    assert failed.returncode == 6, failed.stderr
    assert "CannotStartContainerError" in failed.stderr.strip().splitlines()[-1]
    assert creates(emu, start) == 1 and "trying" not in failed.stderr
    assert only_theirs(emu, EAST) and only_theirs(emu, WEST)


def test_dry_run_with_two_types_and_two_regions_prints_each_regions_ordered_plan(emu, theirs):
    emu.set_quota(G2, 0, region=EAST)
    emu.set_quota(G2, 3, region=WEST)
    emu.set_price(G4, 7.5, region=WEST)
    start = len(emu.calls)
    shown = peagle(emu, *deploy_args("--dry-run"))
    assert shown.returncode == 0, shown.stderr
    lines = [line.strip("│ ") for line in shown.stdout.splitlines()]
    heads = [line for line in lines if line.startswith("region ") and " of " in line]
    assert heads == [f"region 1 of 2: {EAST}", f"region 2 of 2: {WEST}"], heads
    assert [line.split()[-1] for line in lines if line.startswith("region ") and " of " not in line] == [EAST, WEST]
    rows = [line.split("  ", 1)[1].strip() for line in lines if line.startswith(("pool ", "left out "))]
    assert [row.split(";")[0] for row in rows] == [
        "-  ml.g7e.2xlarge: $5.00/h", "1. ml.g7e.4xlarge: $6.00/h",  # us-east-1: quota 0 leaves 2xlarge out
        "1. ml.g7e.2xlarge: $5.00/h", "2. ml.g7e.4xlarge: $7.50/h"], rows  # us-west-2: its own quota and price
    assert f"LEFT OUT: quota 0 in {EAST}" in rows[0] and "quota 3, 0 in use; fits" in rows[2]
    assert not any(c.startswith("Create") for c in emu.calls[start:])
    document = json.loads(peagle(emu, *deploy_args("--dry-run", "--json")).stdout)
    assert [(r["region"], r["plan"]["region"]) for r in document["regions"]] == [(EAST, EAST), (WEST, WEST)]


@pytest.mark.parametrize("regions,said", [
    (f"{EAST},{EAST}", f"--region lists {EAST} twice"),
    (f"{EAST},uswest2", "'uswest2' is not an AWS region name"),
    (f"{EAST},", "has an empty entry"),
])
def test_a_bad_region_list_is_one_line_exit_2_and_no_aws_call(emu, regions, said):
    start = len(emu.calls)
    refused = peagle(emu, "deploy", "qwen3-coder", "--role", emu.role_arn, "--region", regions, "--yes")
    assert refused.returncode == 2, refused.stderr
    assert refused.stderr.strip().count("\n") == 0 and said in refused.stderr, refused.stderr
    assert emu.calls[start:] == []


def test_scale_to_zero_with_no_capacity_in_the_first_region_serves_idles_and_wakes_in_the_next(emu, theirs, clocked):
    """Must show (issue 44): `--scale-to-zero --region A,B` with no capacity in A is rolled back there and serves
    from B; the emulator's autoscaling finds the component in its own region, so AWS's recipe takes it to zero in B
    (target tracking's scale-in, then managed scaling releases the instance) and a request there wakes it. In
    process, on the emulator's clock (hours in no time)."""
    from .cli_runner import run_cli_completed

    env = {**emu.env, "COLUMNS": "250"}
    emu.set_capacity(G2, 0, region=EAST)
    out = run_cli_completed("deploy", "qwen3-coder", "--name", NAME, "--region", f"{EAST},{WEST}", "--scale-to-zero",
                            "--role", emu.role_arn, "--yes", "--json", env=env)
    assert out.returncode == 0, out.stderr
    document = json.loads(out.stdout)
    assert [(a["region"], a["outcome"]) for a in document["attempts"]] == [(EAST, "no capacity"), (WEST, "deployed")]
    assert only_theirs(emu, EAST) and emu.components.names(EAST) == []
    assert emu.components.state(NAME, WEST)["current"] == 1
    clocked.advance(16 * 60 + 600)
    assert emu.components.state(NAME, WEST)["desired"] == 0
    assert emu.components.instances(NAME, WEST) == {"current": 0, "desired": 0}
    status = json.loads(run_cli_completed("status", NAME, "--region", WEST, "--json", env=env).stdout)
    [row] = status["endpoints"]
    assert row["component"]["current_copies"] == 0 and row["component"]["last_scale_in"] is not None

    emu.components.scaling(instance_start_s=100, copy_start_s=300)
    woke = run_cli_completed("invoke", NAME, "hello", "--region", WEST, env=env, fake_clock=False)
    assert woke.returncode == 0, woke.stderr
    assert woke.stderr.startswith(f"waking inference component {NAME} of endpoint {NAME}"), woke.stderr
    assert emu.components.state(NAME, WEST)["current"] == 1
    assert [a["to"] for a in emu.components.activities if a["region"] == WEST and a["component"] == NAME] == [0, 1]

    cleaned = run_cli_completed("cleanup", NAME, "--region", WEST, "--yes", env=env)
    assert cleaned.returncode == 0, cleaned.stderr
    assert only_theirs(emu, WEST) and emu.components.names(WEST) == []
