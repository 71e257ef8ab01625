"""Issue 36: "`status`, `recover` and `cleanup` find peagle's resources in every region a deploy used", through
`peagle` processes (forked, tests/forked_peagle.py) against one emulator serving us-east-1 and us-west-2, with
another team's stack in each region present and untouched throughout.

- what a `--region A,B` deploy creates carries `peagle:regions-tried` (the regions tried up to that one), on AWS;
- status / recover / cleanup take `--region A,B`, search each listed region and say "checked R: nothing of
  peagle's" where nothing is; an endpoint whose tag names other regions makes them look there too;
- a deploy SIGKILLed during the first region's attempt (its rollback held in the emulator, then the process
  killed) leaves a model there: another machine (its own PEAGLE_STATE_DIR, no shared local state) finds it with
  `status --region A,B` and removes it with `recover --region A,B` once the dead deploy's lease expired;
- a one-type deploy whose CreateEndpoint is refused for quota in us-east-1 moves to us-west-2 in one line.
"""

from __future__ import annotations

import json
import signal

import pytest

from .interrupt_helpers import LATER, Forked

EAST, WEST = "us-east-1", "us-west-2"
G2, G4 = "ml.g7e.2xlarge", "ml.g7e.4xlarge"
NAME = "regional-qwen"
THEIRS = "team-endpoint"
BOTH = f"{EAST},{WEST}"
peagle = Forked()


@pytest.fixture(scope="module")
def emulator_server():
    """This module's emulator: us-east-1 (the default) and us-west-2, both seeded with JumpStart."""
    from peagle_deploy.testing import SageMakerEmulator

    with SageMakerEmulator.server(set_env=False, regions=(WEST,)) as emulator:
        yield emulator


@pytest.fixture
def world(emu, tmp_path):
    """Another team's stack in each region (untouched at the end), and two machines' state directories."""
    for region in (EAST, WEST):
        emu.create_endpoint_stack(THEIRS, instance_type="ml.g7e.8xlarge", region=region)
    emu.machines = {m: str(tmp_path / f"machine-{m}") for m in ("a", "b")}
    yield emu
    for region in (EAST, WEST):
        assert emu.endpoint_status(THEIRS, region=region) == "InService"
        names = emu.resource_names(region)
        assert all(THEIRS in names[kind] for kind in ("endpoints", "configs", "models")), (region, names)


def on(emu, machine, **extra):
    return {**emu.env, "COLUMNS": "200", "NO_COLOR": "1", "PEAGLE_STATE_DIR": emu.machines[machine], **extra}


def ours(emu, region):
    names = emu.resource_names(region)
    return {kind: sorted(n for n in found if n != THEIRS) for kind, found in names.items()}


NOTHING = {"endpoints": [], "configs": [], "models": []}


def tags_of(emu, kind, name, region):
    sm = emu.client("sagemaker", region=region)
    arn = {"endpoint": lambda: sm.describe_endpoint(EndpointName=name)["EndpointArn"],
           "model": lambda: sm.describe_model(ModelName=name)["ModelArn"]}[kind]()
    return {t["Key"]: t["Value"] for t in sm.list_tags(ResourceArn=arn)["Tags"]}


def deploy_in_west(emu):
    """A two-region deploy that finds no capacity in us-east-1 and serves in us-west-2."""
    for instance_type in (G2, G4):
        emu.set_capacity(instance_type, 0, region=EAST)
    deployed = peagle.run(["deploy", "qwen3-coder", "--name", NAME, "--instance-type", f"{G2},{G4}", "--region", BOTH,
                           "--role", emu.role_arn, "--provision-timeout", "300", "--yes"], on(emu, "a"))
    assert deployed.code == 0, deployed.stderr
    assert ours(emu, EAST) == NOTHING and ours(emu, WEST)["endpoints"] == [NAME]


def nothing_of_name(region: str) -> str:
    """What a region search for NAME says of a region without it (issue 49: not "nothing of peagle's")."""
    return f"checked {region}: no endpoint named {NAME} and nothing peagle made for it"


def test_the_endpoint_a_deploy_landed_names_the_regions_it_tried_and_status_cleanup_look_there(world):
    emu = world
    deploy_in_west(emu)
    assert tags_of(emu, "endpoint", NAME, WEST)["peagle:regions-tried"] == f"{EAST} {WEST}"

    shown = peagle.run(["status", NAME, "--region", WEST], on(emu, "b"))  # another machine, one region named
    assert shown.code == 0, shown.stderr
    assert nothing_of_name(EAST) in shown.stdout.splitlines(), shown.stdout
    assert f"peagle endpoints in {WEST}" in shown.stdout and NAME in shown.stdout
    document = json.loads(peagle.run(["status", "--region", WEST, "--json"], on(emu, "b")).stdout)
    assert document["regions_checked"] == [WEST, EAST]
    assert [(row["name"], row["region"], row["regions_tried"]) for row in document["endpoints"]] == [
        (NAME, WEST, [EAST, WEST])]

    cleaned = peagle.run(["cleanup", NAME, "--region", WEST, "--yes"], on(emu, "b"))
    assert cleaned.code == 0, cleaned.stderr
    lines = cleaned.stdout.splitlines()
    assert f"{WEST}: deleted endpoint {NAME}" in lines and nothing_of_name(EAST) in lines, lines
    assert ours(emu, WEST) == NOTHING and ours(emu, EAST) == NOTHING


def test_cleanup_lists_but_never_deletes_in_a_region_only_a_tag_led_it_to(world):
    emu = world
    deploy_in_west(emu)
    emu.set_capacity(G2, None, region=EAST)
    emu.create_endpoint_stack(NAME, region=EAST, tags=[{"Key": "peagle:managed", "Value": "true"}])  # since then
    cleaned = peagle.run(["cleanup", NAME, "--region", WEST, "--yes", "--json"], on(emu, "b"))
    assert cleaned.code == 0, cleaned.stderr
    document = json.loads(cleaned.stdout)
    [west, east] = document["regions"]
    assert west["region"] == WEST and ("endpoint", NAME, "deleted") in [
        (o["kind"], o["name"], o["result"]) for o in west["outcomes"]]
    assert east == {"region": EAST, "said": f"checked {EAST}: peagle's endpoint {NAME} (InService) (a deploy found "
                    f"here tried it; not deleted: remove with 'peagle cleanup {NAME} --region {EAST} --yes')"}
    assert ours(emu, WEST) == NOTHING and ours(emu, EAST)["endpoints"] == [NAME]
    listed = peagle.run(["cleanup", NAME, "--region", BOTH, "--yes"], on(emu, "b"))  # listed: removed
    assert listed.code == 0 and f"{EAST}: deleted endpoint {NAME}" in listed.stdout.splitlines(), listed.stdout
    assert ours(emu, EAST) == NOTHING


def test_one_region_and_no_regions_tag_keeps_todays_output(world):
    emu = world
    emu.create_endpoint_stack("lonely", region=EAST, tags=[{"Key": "peagle:managed", "Value": "true"}])
    shown = peagle.run(["status", "--region", EAST, "--json"], on(emu, "b"))
    assert shown.code == 0, shown.stderr
    assert json.loads(shown.stdout)["regions_checked"] == [EAST]
    cleaned = peagle.run(["cleanup", "lonely", "--region", EAST, "--yes"], on(emu, "b"))
    assert cleaned.code == 0, cleaned.stderr
    assert "deleted endpoint lonely" in cleaned.stdout.splitlines() and "checked" not in cleaned.stdout


def test_cleanup_of_a_name_in_no_listed_region_is_one_line_exit_2_and_unmanaged_stacks_stay(world):
    emu = world
    missing = peagle.run(["cleanup", "nowhere", "--region", BOTH, "--yes"], on(emu, "b"))
    assert missing.code == 2, missing.stderr
    assert missing.last_error.startswith(f"error: no endpoint, endpoint config or model named 'nowhere' in {EAST}, "
                                         f"{WEST}"), missing.stderr
    theirs = peagle.run(["cleanup", THEIRS, "--region", BOTH, "--yes"], on(emu, "b"))
    assert theirs.code == 2 and "was not created by peagle" in theirs.last_error, theirs.stderr
    everything = peagle.run(["cleanup", "--all", "--region", BOTH, "--yes"], on(emu, "b"))
    assert everything.code == 0, everything.stderr
    assert [line for line in everything.stdout.splitlines() if line.startswith("checked ")] == [
        f"checked {EAST}: nothing of peagle's", f"checked {WEST}: nothing of peagle's"], everything.stdout


def test_a_deploy_sigkilled_in_the_first_regions_attempt_is_found_and_removed_from_another_machine(world):
    emu = world
    for instance_type in (G2, G4):
        emu.set_capacity(instance_type, 0, region=EAST)
    gate = emu.gate("DeleteModel", resource=NAME)  # us-east-1's rollback, held: its model is still there
    a = peagle.start(["deploy", "qwen3-coder", "--name", NAME, "--instance-type", f"{G2},{G4}", "--region", BOTH,
                      "--role", emu.role_arn, "--provision-timeout", "300", "--yes"], on(emu, "a"))
    gate.wait_entered()
    a.signal(signal.SIGKILL)
    a.finish()
    assert a.code == -signal.SIGKILL
    assert ours(emu, EAST) == {"endpoints": [], "configs": [], "models": [NAME]} and ours(emu, WEST) == NOTHING
    assert tags_of(emu, "model", NAME, EAST)["peagle:regions-tried"] == EAST

    shown = peagle.run(["status", "--region", BOTH], on(emu, "b", **LATER))
    assert shown.code == 0, shown.stderr
    assert f"unused model {NAME} (peagle made it for {NAME}; no endpoint uses it): remove with " \
           f"'peagle recover {NAME} --region {EAST}'" in shown.stdout, shown.stdout
    assert f"checked {WEST}: nothing of peagle's" in shown.stdout.splitlines(), shown.stdout

    done = peagle.run(["recover", NAME, "--region", BOTH], on(emu, "b", **LATER))
    assert done.code == 0, done.stderr
    lines = done.stdout.splitlines()
    assert f"{EAST}: deleted model {NAME}" in lines and nothing_of_name(WEST) in lines, lines
    gate.release()  # the dead deploy's held DeleteModel now finds nothing
    gate.done.wait(30)
    assert ours(emu, EAST) == NOTHING and ours(emu, WEST) == NOTHING
    again = peagle.run(["recover", NAME, "--region", BOTH, "--json"], on(emu, "b", **LATER))
    assert again.code == 0, again.stderr
    assert [r["region"] for r in json.loads(again.stdout)["regions"]] == [EAST, WEST]


@pytest.mark.parametrize("refused_by", ["CreateEndpoint", "Service Quotas"])
def test_a_one_type_deploy_refused_for_quota_in_the_first_region_serves_in_the_next(world, refused_by):
    from peagle_deploy.testing.capacity_emulation import quota_message

    emu = world
    if refused_by == "CreateEndpoint":  # the quota read before it said nothing short: SageMaker's own refusal
        emu.fail("CreateEndpoint", code="ResourceLimitExceeded", message=quota_message(G2, 0, 0, 1))
    else:  # Service Quotas says 0: refused before any write there
        emu.set_quota(G2, 0, region=EAST)
    start = len(emu.calls)
    deployed = peagle.run(["deploy", "qwen3-coder", "--name", NAME, "--instance-type", G2, "--region", BOTH,
                           "--role", emu.role_arn, "--yes", "--json"], on(emu, "a"))
    assert deployed.code == 0, deployed.stderr
    notes = [line for line in deployed.stderr.splitlines() if line.startswith(f"note: {EAST}:")]
    assert len(notes) == 1 and notes[0].startswith(f"note: {EAST}: no ml.g7e quota (") and notes[0].endswith(
        f"rolled back, nothing left there; trying {WEST}"), deployed.stderr
    assert G2 in notes[0], notes
    document = json.loads(deployed.stdout)
    assert [(a["region"], a["outcome"]) for a in document["attempts"]] == [(EAST, "no quota"), (WEST, "deployed")]
    assert emu.calls[start:].count("CreateEndpoint") == (2 if refused_by == "CreateEndpoint" else 1)
    assert ours(emu, EAST) == NOTHING
    assert emu.serving(NAME, region=WEST) == {"AllTraffic": {G2: {"instances": 1, "model": NAME}}}
    cleaned = peagle.run(["cleanup", NAME, "--region", BOTH, "--yes"], on(emu, "a"))
    assert cleaned.code == 0, cleaned.stderr
    assert nothing_of_name(EAST) in cleaned.stdout.splitlines(), cleaned.stdout
    assert ours(emu, EAST) == NOTHING and ours(emu, WEST) == NOTHING


def test_the_search_looks_in_each_listed_region_then_each_tagged_one_once_and_never_a_made_up_one():
    from peagle_deploy.lifecycle.region_search import search_regions, tagged_regions
    from peagle_deploy.tags import PeagleTags

    tags = {EAST: [WEST, "eu-west-1"], WEST: [EAST, "ap-south-1"], "eu-west-1": [], "ap-south-1": [WEST]}
    looked = search_regions([EAST], lambda region: region, lambda region: tags[region])
    assert [region for region, _ in looked] == [EAST, WEST, "eu-west-1", "ap-south-1"]
    edited = PeagleTags.from_aws({"peagle:managed": "true", "peagle:regions-tried": f"{EAST} moon-base;1 {WEST}"})
    assert tagged_regions([edited]) == [EAST, WEST]
