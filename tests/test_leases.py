"""Issue 38 items 1-3: `peagle recover` and `peagle status` beside work in flight on another machine.

Two state directories (PEAGLE_STATE_DIR: the update's lock lives there) and two host names (B's from
interrupt_helpers.ELSEWHERE: B cannot see A's processes) stand for two machines, A doing the work and B looking at it; every command is a process of its own (tests/interrupt_helpers.py `Forked`) against the
emulator server, with an unmanaged stack present throughout. Emulator gates hold A at the moment the issue saw
(no sleeps). "Later" is B's wall clock moved past the lease's expiry (FORKED_PEAGLE_CLOCK_OFFSET_S, read by the
fork server: `peagle_deploy.clock.now`), never a wait.
"""

from __future__ import annotations

import json
import signal

import pytest

from .interrupt_helpers import (ELSEWHERE, FAST_SWEEP, LATER, UNMANAGED, Forked, assert_recovered, settled_state,
                                stack, unmanaged_snapshot)

NAME = "ep1"
DEPLOYED = "ep2"
RECOVER = "peagle recover ep1 --region us-east-1"
peagle = Forked()


@pytest.fixture
def world(emu, tmp_path):
    """The emulator with someone else's endpoint (never touched), and two machines' state directories."""
    emu.script_update(updating_polls=2)
    emu.create_endpoint_stack(UNMANAGED)
    before = unmanaged_snapshot(emu)
    emu.machines = {m: str(tmp_path / f"machine-{m}") for m in ("a", "b")}
    emu.callers = {m: f"{m}-{tmp_path.name}" for m in ("a", "b")}  # the module's emulator records by caller
    yield emu
    assert unmanaged_snapshot(emu) == before


def test_later_is_past_the_lease_expiry():
    from peagle_deploy.lifecycle.lease import EXPIRY_S

    assert float(LATER["FORKED_PEAGLE_CLOCK_OFFSET_S"]) > EXPIRY_S


def on(emu, machine, **extra):
    host = ELSEWHERE if machine == "b" else {}
    return {**emu.env, "AWS_SDK_UA_APP_ID": emu.callers[machine], "PEAGLE_STATE_DIR": emu.machines[machine], **host,
            **extra}


def writes_of(emu, machine):
    return emu.recorder.writes(emu.callers[machine])


def peagle_resources(emu):
    names = emu.resource_names()
    return {kind: sorted(n for n in found if n != UNMANAGED) for kind, found in names.items()}


# item 1: recover beside a running update ------------------------------------------------------------------------
def test_item1_recover_on_another_machine_leaves_a_running_update_alone(world, plain_plan):
    emu = world
    stack(emu, plain_plan, NAME)
    gate = emu.gate("CreateEndpointConfig", caller=emu.callers["a"])  # A made its new model, its config is on the way
    a = peagle.start(["update", NAME, "--k", "7", "--bake", "0s", "--yes"], on(emu, "a"))
    gate.wait_entered()

    shown = peagle.run(["status", NAME], on(emu, "b"))
    assert shown.code == 0, shown.stderr
    line = next(x for x in shown.stdout.splitlines() if "in progress on" in x)
    assert line.startswith("ep1: update in progress on ") and " since " in line and "(lease fresh until " in line, line
    assert "peagle recover" not in shown.stdout and "unused" not in shown.stdout, shown.stdout
    document = json.loads(peagle.run(["status", NAME, "--json"], on(emu, "b")).stdout)
    row = document["endpoints"][0]
    assert (row["lease"]["operation"], row["lease"]["fresh"], row["recover_command"]) == ("update", True, None)
    assert document["unused"] == [] and [u["kind"] for u in document["in_progress"]] == ["model"]

    done = peagle.run(["recover", NAME], on(emu, "b"))
    assert done.code == 0, done.stderr
    skipped = [x for x in done.stdout.splitlines() if x.startswith("ep1: skipped")]
    assert len(skipped) == 1 and "update in progress on" in skipped[0], done.stdout
    assert "it counts as abandoned after " in skipped[0] and f"'{RECOVER} --force' takes it over now" in skipped[0]
    assert "rolled back" not in done.stdout and "deleted" not in done.stdout, done.stdout
    assert writes_of(emu, "b") == []

    gate.release()
    assert a.finish() == 0, a.stderr  # A's update finishes untouched
    state = settled_state(emu, NAME)
    assert_recovered(state, k=7)
    assert "peagle:lease" not in state["tags"], state["tags"]
    again = peagle.run(["recover", NAME], on(emu, "b"))
    assert again.code == 0 and "nothing left to finish" in again.stdout, again.stdout


def _killed_update(emu):
    """A's update SIGKILLed between CreateModel and CreateEndpointConfig (the config lands after it died)."""
    gate = emu.gate("CreateEndpointConfig", caller=emu.callers["a"])
    a = peagle.start(["update", NAME, "--k", "7", "--bake", "0s", "--yes"], on(emu, "a"))
    gate.wait_entered()
    a.signal(signal.SIGKILL)
    a.finish()
    gate.release()
    gate.done.wait(30)
    assert a.code == -signal.SIGKILL
    assert len(peagle_resources(emu)["models"]) == 2


def test_item1_an_abandoned_update_is_finished_by_one_recover_once_its_lease_expired(world, plain_plan):
    emu = world
    stack(emu, plain_plan, NAME)
    _killed_update(emu)

    soon = peagle.run(["recover", NAME], on(emu, "b"))  # its lease is still fresh: A may be alive, for all B knows
    assert soon.code == 0 and "ep1: skipped the update ep1 -> ep1-u" in soon.stdout, soon.stdout
    assert writes_of(emu, "b") == []

    later = peagle.run(["status", NAME], on(emu, "b", **LATER))
    assert later.code == 0, later.stderr
    assert "ep1: update on " in later.stdout and " abandoned (lease expired at " in later.stdout, later.stdout
    assert f"finish with '{RECOVER}'" in later.stdout
    done = peagle.run(["recover", NAME], on(emu, "b", **LATER))
    assert done.code == 0, done.stderr
    assert "abandoned (lease expired at " in done.stdout and "was rolled back" in done.stdout, done.stdout
    state = settled_state(emu, NAME)
    assert_recovered(state, k=3)
    assert "peagle:lease" not in state["tags"]
    again = peagle.run(["recover", NAME], on(emu, "b", **LATER))
    assert again.code == 0 and "nothing left to finish" in again.stdout, again.stdout


def test_item1_recover_force_takes_a_fresh_lease_over_and_says_whose(world, plain_plan):
    emu = world
    stack(emu, plain_plan, NAME)
    _killed_update(emu)
    done = peagle.run(["recover", NAME, "--force"], on(emu, "b"))
    assert done.code == 0, done.stderr
    assert "ep1: --force: took over from update in progress on " in done.stdout, done.stdout
    assert_recovered(settled_state(emu, NAME), k=3)


# item 2: recover --all beside a deploy in flight --------------------------------------------------------------
def test_item2_recover_all_on_another_machine_leaves_a_deploy_in_flight_alone(world):
    emu = world
    gate = emu.gate("CreateEndpoint", caller=emu.callers["a"])  # A made config and model, the endpoint is on the way
    a = peagle.start(["deploy", "qwen3-coder", "--name", DEPLOYED, "--role", emu.role_arn, "--yes"], on(emu, "a"))
    gate.wait_entered()

    document = json.loads(peagle.run(["status", "--json"], on(emu, "b")).stdout)
    assert document["unused"] == [], document["unused"]
    assert sorted((u["kind"], u["name"], u["lease"]["operation"], u["lease"]["fresh"])
                  for u in document["in_progress"]) == [("endpoint_config", "ep2", "deploy", True),
                                                        ("model", "ep2", "deploy", True)]
    shown = peagle.run(["status"], on(emu, "b"))
    assert "endpoint config ep2: deploy in progress on " in shown.stdout and "unused" not in shown.stdout

    done = peagle.run(["recover", "--all"], on(emu, "b"))
    assert done.code == 0, done.stderr
    [skipped] = [x for x in done.stdout.splitlines() if x.startswith("skipped")]  # one line for the one deploy
    assert skipped.startswith("skipped endpoint config ep2, model ep2: deploy in progress on "), done.stdout
    assert "'peagle recover ep2 --region us-east-1 --force' takes it over now" in skipped
    assert writes_of(emu, "b") == []

    gate.release()
    assert a.finish() == 0, a.stderr  # A's deploy finishes untouched
    assert peagle_resources(emu) == {"endpoints": ["ep2"], "configs": ["ep2"], "models": ["ep2"]}
    sm = emu.client("sagemaker")
    for arn in (sm.describe_endpoint(EndpointName="ep2")["EndpointArn"],
                sm.describe_endpoint_config(EndpointConfigName="ep2")["EndpointConfigArn"],
                sm.describe_model(ModelName="ep2")["ModelArn"]):
        assert "peagle:lease" not in {t["Key"] for t in sm.list_tags(ResourceArn=arn)["Tags"]}  # released


def test_item2_an_abandoned_deploys_config_and_model_go_once_its_lease_expired(world):
    emu = world
    gate = emu.gate("CreateEndpoint", caller=emu.callers["a"])
    a = peagle.start(["deploy", "qwen3-coder", "--name", DEPLOYED, "--role", emu.role_arn, "--yes"], on(emu, "a"))
    gate.wait_entered()
    a.signal(signal.SIGKILL)
    a.finish()
    soon = peagle.run(["recover", "--all"], on(emu, "b"))
    assert soon.code == 0 and "skipped endpoint config ep2" in soon.stdout, soon.stdout
    later = peagle.run(["status"], on(emu, "b", **LATER))
    assert "unused endpoint config ep2 (peagle made it for ep2; no endpoint uses it): remove with " \
           "'peagle recover ep2 --region us-east-1'" in later.stdout, later.stdout
    done = peagle.run(["recover", "--all"], on(emu, "b", **LATER))
    assert done.code == 0, done.stderr
    assert "deleted endpoint config ep2" in done.stdout and "deleted model ep2" in done.stdout, done.stdout
    gate.release()  # the dead deploy's CreateEndpoint, held in the emulator, now finds no config
    gate.done.wait(30)
    assert peagle_resources(emu) == {"endpoints": [], "configs": [], "models": []}


def test_item2_a_deploy_whose_config_was_removed_meanwhile_says_so_in_one_line(world):
    emu = world
    gate = emu.gate("CreateEndpoint", caller=emu.callers["a"])
    a = peagle.start(["deploy", "qwen3-coder", "--name", DEPLOYED, "--role", emu.role_arn, "--yes"], on(emu, "a"))
    gate.wait_entered()
    forced = peagle.run(["recover", "--all", "--force"], on(emu, "b"))
    assert forced.code == 0, forced.stderr
    assert "--force: took over from deploy in progress on " in forced.stdout, forced.stdout
    assert "deleted endpoint config ep2" in forced.stdout
    gate.release()
    assert a.finish() == 1, a.stderr
    assert a.last_error.startswith("error: the endpoint config ep2 and model ep2 this deploy created were removed by "
                                   "someone else before CreateEndpoint"), a.stderr
    assert "Could not find" not in a.last_error and "Traceback" not in a.stderr
    assert peagle_resources(emu) == {"endpoints": [], "configs": [], "models": []}


# item 3: a killed sweep's endpoint, from another machine ------------------------------------------------------
def test_item3_a_killed_sweeps_endpoint_is_removed_by_recover_all_from_another_machine(world, tmp_path):
    from peagle_deploy.testing.sweep_standins import SweepStandIn

    emu = world
    SweepStandIn(emu).install()
    gate = emu.gate("CreateEndpoint", skip=1, when="after", caller=emu.callers["a"])  # the second endpoint exists
    a = peagle.start(["sweep", "qwen3-coder", "--modes", "off,p-eagle", "--k", "3", *FAST_SWEEP, "--role",
                      emu.role_arn, "--yes", "--out", str(tmp_path / "sweep")], on(emu, "a"))
    gate.wait_entered()
    a.signal(signal.SIGKILL)
    a.finish()
    gate.release()
    gate.done.wait(30)
    [endpoint] = peagle_resources(emu)["endpoints"]
    assert endpoint.endswith("-p-eagle-k3")
    recover = f"peagle recover {endpoint} --region us-east-1"

    shown = peagle.run(["status", endpoint], on(emu, "b"))  # no state file on B
    assert f"{endpoint}: sweep in progress on " in shown.stdout and "(lease fresh until " in shown.stdout, shown.stdout
    soon = peagle.run(["recover", "--all"], on(emu, "b"))
    assert soon.code == 0 and f"{endpoint}: skipped the sweep's endpoint" in soon.stdout, soon.stdout
    assert writes_of(emu, "b") == []

    later = peagle.run(["status", endpoint], on(emu, "b", **LATER))
    assert f"{endpoint}: sweep on " in later.stdout and " abandoned (lease expired at " in later.stdout, later.stdout
    assert f"finish with '{recover}'" in later.stdout
    done = peagle.run(["recover", "--all"], on(emu, "b", **LATER))
    assert done.code == 0, done.stderr
    assert f"{endpoint}: removed what the abandoned sweep left, as its teardown would: endpoint {endpoint} deleted" \
        in done.stdout, done.stdout
    assert peagle_resources(emu) == {"endpoints": [], "configs": [], "models": []}
    again = peagle.run(["recover", "--all"], on(emu, "b", **LATER))
    assert again.code == 0 and "nothing left to finish" in again.stdout, again.stdout
