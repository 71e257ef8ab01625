"""The one rule for what a user types (issue 49 item 9; peagle_deploy/inputs.py, docs/configuration.md "How peagle
reads what you type"): every number, duration, choice, list and name is taken in the one spelling peagle's help and
docs show, or refused in one line that names that spelling, exit 2, before any AWS call.

Each case runs the command a user typed in this process (tests/cli_runner.py), without credentials where the
command needs none to refuse it, and follows the hint: the spelling it names is accepted."""

from __future__ import annotations

import pytest

from .cli_runner import run_cli

DRY = ["deploy", "qwen3-coder", "--dry-run"]


def one_error(stderr: str) -> str:
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), stderr
    return lines[0]


# (argv, the error line it gets, the argv its hint leads to, which must be accepted)
LONG_TAIL = [
    # numbers: ASCII digits, nothing around them
    ([*DRY, "--k", " 3"], "error: --k ' 3' has spaces around the number: pass --k 3", [*DRY, "--k", "3"]),
    ([*DRY, "--k", "\u0663"], "error: --k '\u0663' is written with digits other than 0-9: pass --k 3",
     [*DRY, "--k", "3"]),
    ([*DRY, "--k", "+3"], "error: --k '+3' is not written as peagle writes numbers: pass --k 3", [*DRY, "--k", "3"]),
    ([*DRY, "--instance-count", " 2"], "error: --instance-count ' 2' has spaces around the number: pass "
                                       "--instance-count 2", [*DRY, "--instance-count", "2"]),
    ([*DRY, "--instance-count", "1_0"], "error: --instance-count '1_0' is not written as peagle writes numbers: "
                                        "pass --instance-count 10", [*DRY, "--instance-count", "10"]),
    ([*DRY, "--max-price-per-hour", " 30"], "error: --max-price-per-hour ' 30' has spaces around the number: pass "
                                            "--max-price-per-hour 30", [*DRY, "--max-price-per-hour", "30"]),
    # durations: whole lower-case units, largest first, no spaces, within the flag's bounds
    ([*DRY, "--ttl", "30s"], "error: --ttl '30s' is shorter than 15m (an endpoint takes about 10 minutes to come "
                             "InService): pass e.g. 15m, 2h, 1h30m or 2d", [*DRY, "--ttl", "15m"]),
    ([*DRY, "--ttl", "1.5h"], "error: --ttl '1.5h' is not in whole units: pass --ttl 1h30m", [*DRY, "--ttl", "1h30m"]),
    ([*DRY, "--ttl", "4 h"], "error: --ttl '4 h' has spaces: pass --ttl 4h", [*DRY, "--ttl", "4h"]),
    ([*DRY, "--ttl", "4H"], "error: --ttl '4H' has upper-case units: pass --ttl 4h", [*DRY, "--ttl", "4h"]),
    ([*DRY, "--ttl", "2hours"], "error: --ttl '2hours' spells out its units: pass --ttl 2h", [*DRY, "--ttl", "2h"]),
    ([*DRY, "--scale-to-zero", "--idle", "15M"], "error: --idle '15M' has upper-case units: pass --idle 15m",
     [*DRY, "--scale-to-zero", "--idle", "15m"]),
    # choices: exactly as listed
    ([*DRY, "--mode", "P-EAGLE"], "error: --mode 'P-EAGLE' is not a mode: pass --mode p-eagle",
     [*DRY, "--mode", "p-eagle"]),
    ([*DRY, "--mode", "peagle"], "error: --mode 'peagle' is not a mode: pass --mode p-eagle",
     [*DRY, "--mode", "p-eagle"]),
    ([*DRY, "--hosting", "COMPONENT"], "error: --hosting 'COMPONENT' is not a hosting: pass --hosting component",
     [*DRY, "--hosting", "component"]),
    (["sweep", "qwen3-coder", "--dry-run", "--modes", "off,EAGLE3"],
     "error: --modes 'off,EAGLE3': 'EAGLE3' is not a mode: pass --modes off,eagle3",
     ["sweep", "qwen3-coder", "--dry-run", "--modes", "off,eagle3"]),
    # lists: commas without spaces, no empty entries
    (["sweep", "qwen3-coder", "--dry-run", "--concurrency", "1, 4"],
     "error: --concurrency '1, 4' has spaces around its commas: pass --concurrency 1,4",
     ["sweep", "qwen3-coder", "--dry-run", "--concurrency", "1,4"]),
    (["sweep", "qwen3-coder", "--dry-run", "--k", "3, 7"], "error: --k '3, 7' has spaces around its commas: pass "
                                                           "--k 3,7", ["sweep", "qwen3-coder", "--dry-run", "--k", "3,7"]),
    ([*DRY, "--instance-type", "ml.g7e.2xlarge, ml.g7e.4xlarge"],
     "error: --instance-type 'ml.g7e.2xlarge, ml.g7e.4xlarge' has spaces around its commas: pass --instance-type "
     "ml.g7e.2xlarge,ml.g7e.4xlarge", [*DRY, "--instance-type", "ml.g7e.2xlarge,ml.g7e.4xlarge"]),
    # the wake-up's wait
    (["invoke", "my-endpoint", "hi", "--wait-timeout", " 5m"], "error: --wait-timeout ' 5m' has spaces: pass "
                                                               "--wait-timeout 5m", None),
]


@pytest.mark.parametrize(("argv", "line", "fixed"), LONG_TAIL, ids=[" ".join(c[0][3:] or c[0]) for c in LONG_TAIL])
def test_the_long_tail_is_refused_naming_the_one_spelling(no_aws, tmp_path, argv, line, fixed):
    done = run_cli(*argv, cwd=tmp_path)
    assert (done.code, one_error(done.stderr)) == (2, line)
    if fixed is not None:  # the hint, followed: accepted
        again = run_cli(*fixed, cwd=tmp_path)
        assert again.code == 0, again.stderr


def test_an_empty_name_is_refused_not_read_as_every_endpoint(no_aws, tmp_path):
    """`status ''` listed every endpoint: an empty NAME is a mistake, refused before any AWS call."""
    done = run_cli("status", "", cwd=tmp_path)
    assert (done.code, one_error(done.stderr)) == (
        2, "error: NAME is empty: pass the endpoint's name, or no NAME for every peagle endpoint")


def test_bake_on_a_component_update_is_refused(emu, tmp_path):
    """A component's update has no baking period: `--bake` is refused, not ignored."""
    made = run_cli("deploy", "qwen3-coder", "--name", "c1", "--hosting", "component", "--role", emu.role_arn,
                   "--yes", env=emu.env, cwd=tmp_path)
    assert made.code == 0, made.stderr
    emu.calls.clear()
    done = run_cli("update", "c1", "--k", "5", "--bake", "10m", "--yes", env=emu.env, cwd=tmp_path)
    assert done.code == 2, done.stderr
    assert one_error(done.stderr) == ("error: --bake is the baking period of an endpoint's blue/green update; c1 "
                                      "hosts its model as an inference component, whose update has none: drop "
                                      "--bake")
    assert not [c for c in emu.calls if c.startswith(("Create", "Update", "Delete", "Put", "Add"))]


def test_the_rule_is_one_module():
    """numbers.py and durations.py only pass on what inputs.py holds: one rule, one place."""
    from peagle_deploy import durations, inputs, numbers

    assert numbers.check is inputs.check_number and numbers.BOUNDS is inputs.BOUNDS
    assert durations.parse_duration is inputs.parse_duration and durations.BOUNDS is inputs.DURATION_BOUNDS


@pytest.mark.parametrize(("text", "seconds"), [
    ("90s", 90), ("15m", 900), ("2h", 7200), ("1h30m", 5400), ("1d12h", 129600), ("2w", 1209600),
    ("12m05s", 725), ("1h30m15s", 5415),
])
def test_durations_in_the_one_spelling(text, seconds):
    from datetime import timedelta

    from peagle_deploy.inputs import canonical_duration, parse_duration

    assert parse_duration(text, flag="--since") == timedelta(seconds=seconds)
    assert parse_duration(canonical_duration(seconds), flag="--since") == timedelta(seconds=seconds)


# issue 49 item 7: lists half understood ---------------------------------------------------------------------------

@pytest.mark.parametrize("argv", [["sweep", "qwen3-coder", "--dry-run"], ["invoke", "my-endpoint", "hi"],
                                  ["logs", "my-endpoint"], ["update", "my-endpoint", "--k", "5"]],
                         ids=lambda argv: argv[0])
def test_a_region_list_where_one_region_is_taken_is_refused_before_any_aws_read(no_aws, tmp_path, argv):
    """`sweep --region us-east-1,us-west-2` said the region "has no JumpStart bucket" after AWS reads; a command that
    works in one region says so, naming the first."""
    done = run_cli(*argv, "--region", "us-east-1,us-west-2", cwd=tmp_path)
    assert done.code == 2, done.stderr
    assert one_error(done.stderr) == (f"error: --region 'us-east-1,us-west-2' lists 2 regions; peagle {argv[0]} works "
                                      "in one: pass --region us-east-1, and run it again for each other region")


def test_a_type_left_out_of_an_update_list_is_said(emu, tmp_path):
    """`update --instance-type ml.g7e.2xlarge,ml.g7e.4xlarge` on gpt-oss-20b answered "nothing to update" without
    saying that 4xlarge was dropped (its JumpStart spec has no image for it)."""
    made = run_cli("deploy", "gpt-oss-20b", "--name", "g1", "--role", emu.role_arn, "--yes", env=emu.env, cwd=tmp_path)
    assert made.code == 0, made.stderr
    done = run_cli("update", "g1", "--instance-type", "ml.g7e.2xlarge,ml.g7e.4xlarge", "--dry-run", env=emu.env,
                   cwd=tmp_path)
    assert done.code == 2, done.stderr
    line = one_error(done.stderr)
    assert "already serves K=3, 1 x ml.g7e.2xlarge" in line and "ml.g7e.4xlarge left out (the JumpStart spec has no " \
        "image for it" in line, line


def test_a_reservation_that_does_not_exist_is_refused_before_any_create(emu, tmp_path):
    """A capacity reservation ARN that does not exist reached CreateModel and CreateEndpointConfig before it was
    refused. Where SageMaker's API reads one (a training plan: DescribeTrainingPlan), peagle reads it first: one
    line, exit 2, nothing created; one that exists deploys."""
    missing = "arn:aws:sagemaker:us-east-1:123456789012:training-plan/no-such-plan"
    emu.calls.clear()
    done = run_cli("deploy", "qwen3-coder", "--name", "reserved", "--role", emu.role_arn, "--yes",
                   "--capacity-reservation", missing, env=emu.env, cwd=tmp_path)
    assert done.code == 2, done.stderr  # after the plan it showed: the one error line
    errors = [line for line in done.stderr.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1 and errors[0].startswith(f"error: --capacity-reservation {missing}: SageMaker has no "
                                                     "such training plan in us-east-1"), done.stderr
    assert not [call for call in emu.calls if call.startswith(("Create", "Put", "Add", "Register"))], emu.calls
    plan = emu.add_capacity_reservation("ml.g7e.2xlarge", 1, name="team-a", kind="training-plan")
    assert plan == "arn:aws:sagemaker:us-east-1:123456789012:training-plan/team-a"
    made = run_cli("deploy", "qwen3-coder", "--name", "reserved", "--role", emu.role_arn, "--yes",
                   "--capacity-reservation", plan, env=emu.env, cwd=tmp_path)
    assert made.code == 0, made.stderr
