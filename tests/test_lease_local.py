"""Issue 45 item 3: on the machine a lease names, a dead owner frees its lease at once.

Each case SIGKILLs the very process a lease names (its pid, read from the lease tag: the forked command itself, not
the shim in front of it), then runs `peagle status` and ONE `peagle recover` on the same machine with no wait (no
clock moved): status says "abandoned (its process (pid N) is no longer running on HOST)", never "in progress", and
recover finishes the work, for a classic deploy, an update, a cleanup and a sweep. From another machine
(interrupt_helpers.ELSEWHERE) the same lease still counts by its 10-minute expiry. Every command is forked from the
suite's fork server against the emulator server, an unmanaged stack present throughout.
"""

from __future__ import annotations

import json
import os
import re
import signal

import pytest

from peagle_deploy.autoscale import AutoscalePolicy
from peagle_deploy.testing.emulator import HANG_GUARD_S

from .interrupt_helpers import (ELSEWHERE, FAST_SWEEP, UNMANAGED, Forked, assert_recovered, lease_pid, reaped,
                                settled_state, sigkill_owner, stack, unmanaged_snapshot)

NAME = "ep1"
RECOVER = "peagle recover ep1 --region us-east-1"
POLICY = AutoscalePolicy(min_capacity=1, max_capacity=3, metric="concurrency", target=8)
GONE = re.compile(r" abandoned \(its process \(pid (\d+)\) is no longer running on \S+\)")
peagle = Forked()


@pytest.fixture
def world(emu):
    emu.script_update(updating_polls=2)
    emu.create_endpoint_stack(UNMANAGED)
    before = unmanaged_snapshot(emu)
    yield emu
    assert unmanaged_snapshot(emu) == before


def env(emu, caller="test", **extra):
    return {**emu.env, "AWS_SDK_UA_APP_ID": caller, "COLUMNS": "250", **extra}


def abandoned_line(stdout: str, pid: int) -> str:
    """The one status line of the abandoned work, naming the dead pid; no 'in progress' anywhere."""
    assert "in progress" not in stdout, stdout
    [line] = [x for x in stdout.splitlines() if GONE.search(x)]
    assert GONE.search(line)[1] == str(pid), line
    return line


def test_a_classic_deploy_killed_at_create_endpoint_is_abandoned_at_once_and_one_recover_finishes_it(world):
    emu = world
    gate = emu.gate("CreateEndpoint", when="after", caller="dep")  # the endpoint exists; its answer is held
    run = peagle.start(["deploy", "qwen3-coder", "--name", NAME, "--role", emu.role_arn, "--yes", "--autoscale",
                        "1:3", "--target-concurrency", "8"], env(emu, "dep"))
    gate.wait_entered()
    pid = sigkill_owner(emu, run, "model", NAME, gate)

    shown = peagle.run(["status", NAME], env(emu))
    assert shown.code == 0, shown.stderr
    line = abandoned_line(shown.stdout, pid)
    assert line.startswith("ep1: deploy on "), line
    assert f"ep1: finish with '{RECOVER}'" in shown.stdout  # its autoscaling was never registered
    elsewhere = peagle.run(["status", NAME], env(emu, **ELSEWHERE))  # another machine cannot see the process
    assert "ep1: deploy in progress on " in elsewhere.stdout and "(lease fresh until " in elsewhere.stdout

    done = peagle.run(["recover", NAME], env(emu))
    assert done.code == 0, done.stderr
    assert "ep1: took over from deploy on " in done.stdout and GONE.search(done.stdout), done.stdout
    assert "autoscaling registered again: 1-3 instances" in done.stdout
    state = settled_state(emu, NAME)
    assert_recovered(state, k=3, autoscaling=POLICY)
    assert "peagle:lease" not in state["tags"]
    again = peagle.run(["recover", NAME], env(emu))
    assert again.code == 0 and "nothing left to finish" in again.stdout, again.stdout


def test_a_classic_deploy_killed_before_its_endpoint_leaves_config_and_model_that_recover_removes_at_once(world):
    emu = world
    gate = emu.gate("CreateEndpoint", caller="dep")  # config and model made; the endpoint's create held
    run = peagle.start(["deploy", "qwen3-coder", "--name", NAME, "--role", emu.role_arn, "--yes"], env(emu, "dep"))
    gate.wait_entered()
    pid = lease_pid(emu, "model", NAME)
    os.kill(pid, signal.SIGKILL)
    assert run.finish() == -signal.SIGKILL
    reaped(pid)

    shown = peagle.run(["status"], env(emu))
    assert "in progress" not in shown.stdout and f"unused endpoint config ep1 (peagle made it for ep1; no endpoint " \
        f"uses it): remove with '{RECOVER}'" in shown.stdout, shown.stdout
    done = peagle.run(["recover", NAME], env(emu))
    assert done.code == 0, done.stderr
    assert "deleted endpoint config ep1" in done.stdout and "deleted model ep1" in done.stdout, done.stdout
    gate.release()  # the dead deploy's CreateEndpoint, held in the emulator, now finds no config
    gate.done.wait(HANG_GUARD_S)
    assert settled_state(emu, NAME) == {"configs": [], "models": [], "endpoint": False, "autoscaling": None}


def test_an_update_killed_mid_way_is_abandoned_at_once_and_one_recover_rolls_it_back(world, plain_plan):
    emu = world
    stack(emu, plain_plan, NAME)
    gate = emu.gate("CreateEndpointConfig", caller="upd")  # the new model made, its config on the way
    run = peagle.start(["update", NAME, "--k", "7", "--bake", "0s", "--yes"], env(emu, "upd"))
    gate.wait_entered()
    pid = sigkill_owner(emu, run, "endpoint", NAME, gate)

    shown = peagle.run(["status", NAME], env(emu))
    assert shown.code == 0, shown.stderr
    assert abandoned_line(shown.stdout, pid).startswith("ep1: update on "), shown.stdout
    assert f"ep1: finish with '{RECOVER}'" in shown.stdout
    document = json.loads(peagle.run(["status", NAME, "--json"], env(emu)).stdout)
    lease = document["endpoints"][0]["lease"]
    assert (lease["fresh"], lease["pid"]) == (False, pid) and "no longer running" in lease["gone"]

    done = peagle.run(["recover", NAME], env(emu))
    assert done.code == 0, done.stderr
    assert "was rolled back" in done.stdout and GONE.search(done.stdout), done.stdout
    state = settled_state(emu, NAME)
    assert_recovered(state, k=3)
    assert "peagle:lease" not in state["tags"]


def test_a_cleanup_killed_before_delete_endpoint_is_abandoned_at_once_and_one_recover_finishes_it(world, plain_plan):
    emu = world
    stack(emu, plain_plan, NAME)
    gate = emu.gate("DeleteEndpoint", caller="clean")  # peagle:deleting and the lease written; the delete held
    run = peagle.start(["cleanup", NAME, "--yes"], env(emu, "clean"))
    gate.wait_entered()
    pid = lease_pid(emu, "endpoint", NAME)
    os.kill(pid, signal.SIGKILL)
    assert run.finish() == -signal.SIGKILL
    reaped(pid)

    shown = peagle.run(["status", NAME], env(emu))
    assert abandoned_line(shown.stdout, pid).startswith("ep1: cleanup on "), shown.stdout
    assert f"ep1: finish with '{RECOVER}'" in shown.stdout
    done = peagle.run(["recover", NAME], env(emu))
    assert done.code == 0, done.stderr
    assert "ep1: the interrupted cleanup was finished: " in done.stdout and "endpoint ep1 deleted" in done.stdout
    gate.release()  # the dead cleanup's DeleteEndpoint, held in the emulator, finds the endpoint gone
    gate.done.wait(HANG_GUARD_S)
    assert settled_state(emu, NAME) == {"configs": [], "models": [], "endpoint": False, "autoscaling": None}


def test_a_sweep_killed_mid_way_is_abandoned_at_once_and_one_recover_all_removes_its_endpoint(world, tmp_path):
    from peagle_deploy.testing.sweep_standins import SweepStandIn

    emu = world
    SweepStandIn(emu).install()
    gate = emu.gate("CreateEndpoint", skip=1, when="after", caller="sweep")  # the second endpoint exists
    run = peagle.start(["sweep", "qwen3-coder", "--modes", "off,p-eagle", "--k", "3", *FAST_SWEEP, "--role",
                        emu.role_arn, "--yes", "--out", str(tmp_path / "sweep")], env(emu, "sweep"))
    gate.wait_entered()
    [endpoint] = [e for e in emu.resource_names()["endpoints"] if e != UNMANAGED]
    pid = sigkill_owner(emu, run, "endpoint", endpoint, gate)

    shown = peagle.run(["status", endpoint], env(emu))
    assert abandoned_line(shown.stdout, pid).startswith(f"{endpoint}: sweep on "), shown.stdout
    done = peagle.run(["recover", "--all"], env(emu))
    assert done.code == 0, done.stderr
    assert f"{endpoint}: removed what the abandoned sweep left, as its teardown would: endpoint {endpoint} deleted" \
        in done.stdout, done.stdout
    assert {k: [n for n in v if n != UNMANAGED] for k, v in emu.resource_names().items()} == {
        "endpoints": [], "configs": [], "models": []}


def test_a_scale_to_zero_deploy_killed_at_its_component_is_abandoned_at_once_not_in_progress(world):
    """The lease rule holds for a component deploy too (what recover then completes is issue 45 items 1-2)."""
    emu = world
    gate = emu.gate("CreateInferenceComponent", when="after", caller="dep")  # the component exists; answer held
    run = peagle.start(["deploy", "qwen3-coder", "--name", NAME, "--role", emu.role_arn, "--yes", "--scale-to-zero"],
                       env(emu, "dep"))
    gate.wait_entered()
    pid = sigkill_owner(emu, run, "endpoint", NAME, gate)

    shown = peagle.run(["status", NAME], env(emu))
    assert shown.code == 0, shown.stderr
    assert abandoned_line(shown.stdout, pid).startswith("ep1: deploy on "), shown.stdout
    elsewhere = peagle.run(["status", NAME], env(emu, **ELSEWHERE))
    assert "ep1: deploy in progress on " in elsewhere.stdout, elsewhere.stdout
    cleaned = peagle.run(["cleanup", NAME, "--yes"], env(emu))  # nothing of it is left behind either way
    assert cleaned.code == 0, cleaned.stderr
    assert emu.components.names() == []
