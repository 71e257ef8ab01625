"""docs/iam.md is true: every AWS call each command really makes is allowed by the actions listed for it in
peagle_deploy/iam_policy.py, and every listed action is really used (or says why the emulator cannot see it).

`peagle` runs each command against the emulator server, forked (tests/forked_peagle.py; the commands that
only read run at once); a WSGI recorder notes every request (reads and writes, S3 and the runtime included)
by the process's AWS_SDK_UA_APP_ID. Scenarios cover the
paths that call more than the happy path (a deploy that fails and rolls back, cleanup --all/--expired).

New commands and options slot in: a registered command without a scenario or without an IAM list fails
here until both exist (`update`, when it lands, has a scenario already); deploy's `--autoscale` is exercised
as soon as deploy has it, so Application Auto Scaling's calls must then be listed for deploy, status and cleanup.
"""

from __future__ import annotations

import json
import subprocess
from concurrent.futures import ThreadPoolExecutor

import pytest

from peagle_deploy import iam_policy
from tests.forked_peagle import forked_peagle

NAME = "iam-probe"
DRAFTER_BUCKET = "iam-probe-drafters"
FAILING = "iam-probe-fails"
SPEC_LINE = ("INFO [metrics.py:96] SpecDecoding metrics: Mean acceptance length: 2.41, Accepted throughput: 90.00 "
             "tokens/s, Drafted throughput: 120.00 tokens/s, Accepted: 900 tokens, Drafted: 1200 tokens, "
             "Per-position acceptance rate: 0.850, 0.700, 0.560, Avg Draft acceptance rate: 70.3%")
# commands that call no AWS API
NO_AWS = {"models", "container", "local", "iam-policy", "datasets"}


def _registered() -> tuple[set[str], set[str]]:
    """The CLI's commands, and deploy's options (so new ones are exercised as soon as they exist)."""
    import typer.main

    from peagle_deploy.cli.app import app

    root = typer.main.get_command(app)
    deploy_options = {opt for param in root.commands["deploy"].params for opt in getattr(param, "opts", [])}
    return set(root.commands), deploy_options


COMMANDS, DEPLOY_OPTIONS = _registered()
AUTOSCALE = ["--autoscale", "1:2", "--target-concurrency", "8"] if "--autoscale" in DEPLOY_OPTIONS else []
ZERO = ["--scale-to-zero"] if "--scale-to-zero" in DEPLOY_OPTIONS else []  # an inference component, its alarms


def _scenarios(role: str, out_dir: str) -> list[tuple[str, list[str], str | None]]:
    """(command, argv, emulator setup) in the order a user would run them; the last field scripts the emulator
    ("reads": runs beside the neighbouring "reads" runs, they change nothing another one reads)."""
    runs = [
        ("deploy", ["deploy", "qwen3-coder", "--dry-run"], "reads"),
        ("deploy", ["deploy", "qwen3-coder", "--name", NAME, "--role", role, "--yes", *AUTOSCALE], "reads"),
        ("deploy", ["deploy", "qwen3-coder", "--name", FAILING, "--role", role, "--yes"], "fail"),
        ("deploy", ["deploy", "qwen3-coder", "--name", FAILING + "-as", "--role", role, "--yes", *AUTOSCALE],
         "policy-fails"),
        ("deploy", ["deploy", "qwen3-coder", "--name", NAME + "-zero", "--role", role, "--yes", *ZERO], "reads"),
        ("deploy", ["deploy", "qwen3-coder", "--name", FAILING + "-zero", "--role", role, "--yes", *ZERO],
         "idle-alarm-fails"),
        ("status", ["status"], "reads"),
        ("status", ["status", NAME], "reads"),
        ("invoke", ["invoke", NAME, "hello"], "reads"),
        ("invoke", ["invoke", NAME, "hello", "--no-stream"], "reads"),
        ("invoke", ["invoke", NAME, "hello", "--transport", "openai-route"], "reads"),
        ("openai", ["openai", NAME, "--json"], "reads"),
        ("bench", ["bench", NAME, "--concurrency", "1", "--num-prompts", "2", "--warmup", "1", "--out", out_dir],
         "reads"),
        ("bench", ["bench", NAME, "--concurrency", "1", "--num-prompts", "2", "--warmup", "1", "--out", out_dir,
                   "--transport", "both", "--no-chart"], "reads"),
        ("metrics", ["metrics", NAME, "--since", "15m"], "reads"),
        # the inference component of the scale-to-zero deploy: addressed by invoke, openai, bench and metrics
        ("invoke", ["invoke", NAME + "-zero", "hello"], "reads"),
        ("openai", ["openai", NAME + "-zero", "--json"], "reads"),
        ("bench", ["bench", NAME + "-zero", "--concurrency", "1", "--num-prompts", "2", "--warmup", "1",
                   "--logs-wait", "0", "--out", out_dir + "/zero"], "reads"),
        ("metrics", ["metrics", NAME + "-zero", "--since", "15m"], "reads"),
        ("invoke", ["invoke", NAME + "-zero", "hello", "--wait-timeout", "0s"], "at-zero"),  # exit 5: its state read
        ("logs", ["logs", NAME, "--since", "1h"], "reads"),
        ("update", ["update", NAME, "--k", "7", "--yes"], None),
        ("update", ["update", NAME, "--instance-type", "ml.g7e.2xlarge,ml.g7e.4xlarge", "--yes"], None),
        ("update", ["update", NAME, "--k", "5", "--yes"], "update-fails"),
        ("recover", ["recover", NAME], "interrupted"),
        ("sweep", ["sweep", "qwen3-coder", "--modes", "off,p-eagle", "--k", "3", "--concurrency", "1",
                   "--num-prompts", "2", "--warmup", "0", "--logs-wait", "0", "--budget", "40", "--role", role,
                   "--yes", "--out", out_dir + "/sweep"], None),
        ("sweep", ["sweep", "qwen3-coder", "--hosting", "component", "--modes", "off,p-eagle", "--k", "3",
                   "--concurrency", "1", "--num-prompts", "2", "--warmup", "0", "--logs-wait", "0", "--budget", "40",
                   "--role", role, "--yes", "--out", out_dir + "/sweep-components"], None),
        ("drafter", ["drafter", "stage", "qwen3-coder", "--method", "dflash", "--to", f"s3://{DRAFTER_BUCKET}/dflash",
                     "--yes"], "drafter"),
        ("cleanup", ["cleanup", "--expired", "--yes"], None),
        ("cleanup", ["cleanup", NAME, "--yes"], None),
        ("cleanup", ["cleanup", "--all", "--yes"], "unmanaged"),
    ]
    return [run for run in runs if run[0] in COMMANDS and (run[2] != "policy-fails" or AUTOSCALE)
            and ("-zero" not in " ".join(run[1]) or ZERO)]


def _batches(runs: list) -> list[list[tuple[int, tuple]]]:
    """Consecutive "reads" runs together (run at once), every other run alone, in order."""
    batches: list[list[tuple[int, tuple]]] = []
    for index, run in enumerate(runs):
        if run[2] == "reads" and batches and batches[-1][-1][1][2] == "reads":
            batches[-1].append((index, run))
        else:
            batches.append([(index, run)])
    return batches


@pytest.fixture(scope="module")
def recorded(emulator_server, tmp_path_factory):
    """command -> the IAM actions its runs needed, from every API call they made."""
    emu = emulator_server
    emu.reset()
    emu._seed()
    emu.script_endpoints()
    calls: dict[str, set[str]] = {}
    outcomes: dict[str, list[tuple[list[str], int, str]]] = {}

    from peagle_deploy.testing.hub_stand_in import HubStandIn, dflash_repo

    hub = HubStandIn({"z-lab/Qwen3-Coder-30B-A3B-DFlash": dflash_repo("Qwen/Qwen3-Coder-30B-A3B-Instruct")})
    # drafter stage asks the loopback hub stand-in, not the real hub (HF_HUB_OFFLINE lifted for that run only)
    hub_env = {"HF_ENDPOINT": "", "HF_HUB_OFFLINE": "0", "HF_HOME": str(tmp_path_factory.mktemp("hf")),
               "PEAGLE_STATE_DIR": str(tmp_path_factory.mktemp("state"))}

    def run(index: int, command: str, argv: list[str]) -> subprocess.CompletedProcess:
        extra = {**hub_env, "HF_ENDPOINT": hub.url} if command == "drafter" else {}
        return subprocess.run([forked_peagle(), *argv], env={**emu.env, **extra,
                                                             "AWS_SDK_UA_APP_ID": f"iam-{index}-{command}"},
                              capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL)

    runs = _scenarios(emu.role_arn, str(tmp_path_factory.mktemp("b")))
    with ThreadPoolExecutor(8) as pool, hub:
        for batch in _batches(runs):
            [(_, (_, _, setup))] = batch[:1]
            if setup == "fail":
                emu.script_endpoints(final="Failed", reason="scripted failure for the IAM test")
            if setup == "policy-fails":  # registered, then the policy refused: the rollback deregisters
                emu.fail("PutScalingPolicy", code="ValidationException", message="injected for the IAM test")
            if setup == "idle-alarm-fails":  # the wake-up alarm made, the idle alarm refused: the rollback reads
                emu.fail("PutMetricAlarm", code="ValidationException", message="injected for the IAM test", skip=1)
            if setup == "update-fails":  # SageMaker rolls back: the update removes what it created
                emu.script_update(fail=True, reason="scripted rollback for the IAM test")
            if setup == "unmanaged":
                emu.create_endpoint_stack("not-peagles")
            if setup == "interrupted":
                _interrupted_update(emu)
            if setup == "drafter":  # the user's own bucket, where the drafter goes
                emu.client("s3").create_bucket(Bucket=DRAFTER_BUCKET)
            if setup == "at-zero":  # what the idle rule leaves: no copy in service
                emu.client("sagemaker").update_inference_component_runtime_config(
                    InferenceComponentName=NAME + "-zero", DesiredRuntimeConfig={"CopyCount": 0})
            done = list(pool.map(lambda item: run(item[0], item[1][0], item[1][1]), batch))
            emu.script_endpoints()
            emu.script_update()
            for (index, (command, argv, _)), proc in zip(batch, done):
                if argv[:2] == ["deploy", "qwen3-coder"] and NAME in argv:
                    emu.put_log_lines(NAME, [SPEC_LINE])  # the container's stats line, for metrics and bench
                if argv[:2] == ["deploy", "qwen3-coder"] and NAME + "-zero" in argv:  # a component's own group
                    emu.put_log_lines(NAME + "-zero", [SPEC_LINE], component=NAME + "-zero")
                outcomes.setdefault(command, []).append((argv, proc.returncode, proc.stderr[-2000:]))
                calls.setdefault(command, set()).update(
                    iam_policy.iam_action(c) for c in emu.recorder.api_calls(f"iam-{index}-{command}"))
    emu.reset()
    return calls, outcomes


def _interrupted_update(emu) -> None:
    """What a SIGKILL at the end of `update NAME` leaves: its intent, stale labels, autoscaling not registered,
    and an unused peagle model and config of NAME (so `recover NAME` makes each of its writes)."""
    sm = emu.client("sagemaker")
    endpoint = sm.describe_endpoint(EndpointName=NAME)
    sm.add_tags(ResourceArn=endpoint["EndpointArn"], Tags=[
        {"Key": "peagle:update-from", "Value": NAME + "-old"}, {"Key": "peagle:update-to",
                                                               "Value": endpoint["EndpointConfigName"]},
        {"Key": "peagle:k", "Value": "9"}])
    tags = [{"Key": "peagle:managed", "Value": "true"}, {"Key": "peagle:endpoint", "Value": NAME}]
    sm.create_model(ModelName=NAME + "-old", ExecutionRoleArn=emu.role_arn, PrimaryContainer={"Image": "x"},
                    Tags=tags)
    sm.create_endpoint_config(EndpointConfigName=NAME + "-old", ProductionVariants=[{
        "VariantName": "AllTraffic", "ModelName": NAME + "-old", "InstanceType": "ml.g7e.2xlarge",
        "InitialInstanceCount": 1}], Tags=tags)
    if AUTOSCALE:
        emu.client("application-autoscaling").deregister_scalable_target(
            ServiceNamespace="sagemaker", ResourceId=f"endpoint/{NAME}/variant/AllTraffic",
            ScalableDimension="sagemaker:variant:DesiredInstanceCount")


def test_every_aws_command_has_an_iam_list_and_a_scenario():
    scenarios = {command for command, _, _ in _scenarios("arn:aws:iam::123456789012:role/r", "/tmp")}
    missing_list = sorted(COMMANDS - NO_AWS - set(iam_policy.COMMANDS))
    assert not missing_list, f"commands with no IAM list in peagle_deploy/iam_policy.py: {missing_list}"
    missing_run = sorted(set(iam_policy.COMMANDS) & COMMANDS - scenarios)
    assert not missing_run, f"commands with no scenario in this test: {missing_run}"


@pytest.mark.parametrize("command", [*iam_policy.COMMANDS, "update"])
def test_documented_actions_match_the_calls_made(command, recorded):
    if command not in COMMANDS:
        pytest.skip(f"`peagle {command}` is not on this branch yet; its scenario runs once it is registered")
    calls, outcomes = recorded
    # the failing deploys: 6 (Failed), 2 (policy refused); the rolled-back update: 6
    expected_exits = {"deploy": {0, 2, 6}, "update": {0, 6}}.get(command, {0})
    for argv, code, stderr in outcomes[command]:
        if "--wait-timeout" in argv:  # the component at zero, given no time to wake: its state said, exit 5
            assert code == 5 and "0/0 copies" in stderr and "bills" in stderr, \
                f"peagle {' '.join(argv)} exited {code}: {stderr}"
            continue
        assert code in expected_exits, f"peagle {' '.join(argv)} exited {code}: {stderr}"
    assert command in iam_policy.COMMANDS, (
        f"`peagle {command}` made {sorted(calls[command])}: list them in peagle_deploy/iam_policy.py, then run "
        "tools/gen_iam_docs.py")
    listed = {p.action for p in iam_policy.COMMANDS[command]}
    must_be_seen = {p.action for p in iam_policy.COMMANDS[command] if not p.unobserved}
    assert calls[command] - listed == set(), f"undocumented calls of `peagle {command}`"
    assert must_be_seen - calls[command] == set(), (
        f"documented for `peagle {command}` but never called (remove, or give the reason in `unobserved`)")


def test_failing_deploy_was_rolled_back(recorded):
    """The deploy scenario that must exercise the rollback calls really did fail and roll back."""
    _, outcomes = recorded
    [(_, code, stderr)] = [o for o in outcomes["deploy"] if FAILING in o[0]]
    assert code == 6 and "rolled back" in stderr and f"peagle logs {FAILING}" in stderr


def test_policy_document_is_attachable_json():
    doc = iam_policy.policy_document()
    assert doc["Version"] == "2012-10-17"
    actions = {a for s in doc["Statement"] for a in s["Action"]}
    assert actions == {p.action for ps in iam_policy.COMMANDS.values() for p in ps}
    [pass_role] = [s for s in doc["Statement"] if "iam:PassRole" in s["Action"]]
    assert pass_role["Action"] == ["iam:PassRole"]
    assert pass_role["Condition"] == {"StringEquals": {"iam:PassedToService": "sagemaker.amazonaws.com"}}
    logs_only = iam_policy.policy_document(["logs"])  # an inference component's copies write to its own group
    assert logs_only["Statement"] == [
        {"Sid": "Anywhere", "Effect": "Allow", "Action": ["sagemaker:ListInferenceComponents"], "Resource": "*"},
        {"Sid": "EndpointLogs", "Effect": "Allow", "Action": ["logs:FilterLogEvents"],
         "Resource": iam_policy.LOG_GROUPS},
        {"Sid": "ComponentLogs", "Effect": "Allow", "Action": ["logs:FilterLogEvents"],
         "Resource": iam_policy.COMPONENT_LOG_GROUPS}]


def test_cli_prints_the_policy(no_aws):
    from tests.cli_runner import run_cli

    result = run_cli("iam-policy", "logs", "metrics", "--json")
    assert result.code == 0, result.stderr
    assert json.loads(result.stdout) == iam_policy.policy_document(["logs", "metrics"])
    human = run_cli("iam-policy", "invoke")
    assert "sagemaker:InvokeEndpoint" in human.stdout
    bad = run_cli("iam-policy", "dance")
    assert bad.code == 2 and "no IAM list for dance" in bad.stderr


def test_docs_iam_md_is_generated_from_the_table():
    import sys
    from pathlib import Path

    tool = Path(__file__).resolve().parent.parent / "tools" / "gen_iam_docs.py"
    out = subprocess.run([sys.executable, str(tool), "--check"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
