"""docs/iam.md is true: every AWS call each command really makes is allowed by the policy `peagle iam-policy COMMAND
--json` prints for it (action, resource ARN and the conditions on tags, as IAM decides: the emulator holds each
scenario's process to that policy, `peagle_deploy.testing.iam_enforcement`, and answers AccessDenied to anything
else), and every action listed for it in peagle_deploy/iam_policy.py is really used (or says why the emulator cannot
see it).

`peagle` runs each command against the emulator server, forked (tests/forked_peagle.py; the commands that
only read run at once); a WSGI recorder notes every request (reads and writes, S3 and the runtime included)
by the process's AWS_SDK_UA_APP_ID. Scenarios cover the
paths that call more than the happy path (a deploy that fails and rolls back, cleanup --all/--expired), and the
lease heartbeat beats on the forked runs' fake clock (FORKED_PEAGLE_LEASE_BEATS): the component deploy waits long
enough (emulated Creating polls) to refresh its lease on its inference component, as a real one does every 60 s.

New commands and options slot in: a registered command without a scenario or without an IAM list fails
here until both exist (`update`, when it lands, has a scenario already); deploy's `--autoscale` is exercised
as soon as deploy has it, so Application Auto Scaling's calls must then be listed for deploy, status and cleanup.
"""

from __future__ import annotations

import json
import re
import subprocess
from concurrent.futures import ThreadPoolExecutor

import pytest

from peagle_deploy import iam_policy
from tests.forked_peagle import LEASE_BEATS, forked_peagle

NAME = "iam-probe"
DRAFTER_BUCKET = "iam-probe-drafters"
FAILING = "iam-probe-fails"
SPEC_LINE = ("INFO [metrics.py:96] SpecDecoding metrics: Mean acceptance length: 2.41, Accepted throughput: 90.00 "
             "tokens/s, Drafted throughput: 120.00 tokens/s, Accepted: 900 tokens, Drafted: 1200 tokens, "
             "Per-position acceptance rate: 0.850, 0.700, 0.560, Avg Draft acceptance rate: 70.3%")
# commands that call no AWS API
NO_AWS = {"models", "container", "local", "iam-policy", "datasets"}
# Creating polls of the component deploy whose lease must be refreshed: its waits for the endpoint and for the
# component each pass 60 s of fake time (peagle polls at 2 s, x1.5, up to 30 s: 94 s in 8 polls)
SLOW_POLLS = 8


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
        ("deploy", ["deploy", "qwen3-coder", "--name", NAME + "-zero", "--role", role, "--yes", *ZERO], "slow"),
        ("deploy", ["deploy", "qwen3-coder", "--name", NAME + "-pools", "--instance-type",
                    "ml.g7e.2xlarge,ml.g7e.4xlarge", "--role", role, "--yes"], "reads"),
        ("deploy", ["deploy", "qwen3-coder", "--name", FAILING + "-acc", "--role", role, "--yes"],
         "acceptance-alarm-fails"),  # the rollback reads and removes the acceptance alarm's filters
        ("deploy", ["deploy", "qwen3-coder", "--name", FAILING + "-zero", "--role", role, "--yes", *ZERO],
         "wake-alarm-fails"),
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
        ("update", ["update", NAME + "-zero", "--k", "5", "--yes"], None),  # a component endpoint's update
        ("recover", ["recover", NAME], "interrupted"),
        ("recover", ["recover", NAME + "-zero"], "component-gone"),  # completes the component and its scaling
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


def _printed_policies() -> dict[str, dict]:
    """command -> the policy `peagle iam-policy COMMAND --json` prints (the CLI itself, in-process)."""
    from tests.cli_runner import run_cli

    policies = {}
    for command in iam_policy.COMMANDS:
        printed = run_cli("iam-policy", command, "--json")
        assert printed.code == 0, printed.stderr
        policies[command] = json.loads(printed.stdout)
    return policies


@pytest.fixture(scope="module")
def policed_server():
    """This module's emulator server: each scenario's process (AWS_SDK_UA_APP_ID iam-N-COMMAND) held to the policy
    `peagle iam-policy COMMAND --json` prints (`emu.enforcer`), every call recorded (`emu.recorder`)."""
    from peagle_deploy.testing import SageMakerEmulator
    from peagle_deploy.testing.iam_enforcement import PolicyEnforcer
    from peagle_deploy.testing.write_recorder import WriteRecorder

    policies = _printed_policies()
    enforcer = PolicyEnforcer(lambda caller: policies.get(caller.split("-", 2)[2]) if caller and caller.startswith(
        "iam-") else None)
    recorder = WriteRecorder()  # outermost: it records a call the enforcer refuses too
    with SageMakerEmulator.server(middlewares=[enforcer.middleware, recorder.middleware], set_env=False) as emu:
        emu.recorder, emu.enforcer = recorder, enforcer
        yield emu


@pytest.fixture(scope="module")
def recorded(policed_server, tmp_path_factory):
    """command -> the IAM actions its runs needed, from every API call they made; and how each run ended."""
    emu = policed_server
    emu.reset()
    emu._seed()
    emu.script_endpoints()
    calls: dict[str, set[str]] = {}
    outcomes: dict[str, list[tuple[list[str], int, str]]] = {}
    callers: dict[tuple[str, ...], str] = {}  # argv -> its process's AWS_SDK_UA_APP_ID

    from peagle_deploy.testing.hub_stand_in import HubStandIn, dflash_repo

    hub = HubStandIn({"z-lab/Qwen3-Coder-30B-A3B-DFlash": dflash_repo("Qwen/Qwen3-Coder-30B-A3B-Instruct")})
    # drafter stage asks the loopback hub stand-in, not the real hub (HF_HUB_OFFLINE lifted for that run only)
    hub_env = {"HF_ENDPOINT": "", "HF_HUB_OFFLINE": "0", "HF_HOME": str(tmp_path_factory.mktemp("hf")),
               "PEAGLE_STATE_DIR": str(tmp_path_factory.mktemp("state"))}

    def run(index: int, command: str, argv: list[str]) -> subprocess.CompletedProcess:
        extra = {**hub_env, "HF_ENDPOINT": hub.url} if command == "drafter" else {}
        env = {**emu.env, **extra, "AWS_SDK_UA_APP_ID": f"iam-{index}-{command}", LEASE_BEATS: "1"}
        return subprocess.run([forked_peagle(), *argv], env=env, capture_output=True, text=True, timeout=300,
                              stdin=subprocess.DEVNULL)

    runs = _scenarios(emu.role_arn, str(tmp_path_factory.mktemp("b")))
    with ThreadPoolExecutor(8) as pool, hub:
        for batch in _batches(runs):
            [(_, (_, _, setup))] = batch[:1]
            if setup == "fail":
                emu.script_endpoints(final="Failed", reason="scripted failure for the IAM test")
            if setup == "slow":  # long enough waits for a lease refresh (SLOW_POLLS)
                emu.script_endpoints(creating_polls=SLOW_POLLS)
                emu.components.script(creating_polls=SLOW_POLLS)
            if setup == "policy-fails":  # registered, then the policy refused: the rollback deregisters
                emu.fail("PutScalingPolicy", code="ValidationException", message="injected for the IAM test")
            if setup == "wake-alarm-fails":  # the wake-up alarm made, its answer an error: the rollback reads it,
                # its tags and deletes it (peagle's one alarm: `after`, so that there is one to remove)
                emu.fail("PutMetricAlarm", code="ValidationException", message="injected for the IAM test", after=True)
            if setup == "acceptance-alarm-fails":  # its filters made, its alarm refused: the rollback removes them
                emu.fail("PutMetricAlarm", code="ValidationException", message="injected for the IAM test")
            if setup == "update-fails":  # SageMaker rolls back: the update removes what it created
                emu.script_update(fail=True, reason="scripted rollback for the IAM test")
            if setup == "unmanaged":
                emu.create_endpoint_stack("not-peagles")
            if setup == "interrupted":
                _interrupted_update(emu)
            if setup == "drafter":  # the user's own bucket, where the drafter goes, and an interrupted stage's upload
                emu.client("s3").create_bucket(Bucket=DRAFTER_BUCKET)
                emu.client("s3").create_multipart_upload(Bucket=DRAFTER_BUCKET, Key="dflash/model.safetensors")
            if setup == "component-gone":
                _component_gone(emu, NAME + "-zero")
            if setup == "at-zero":  # what the scale-in leaves: no copy in service
                emu.client("sagemaker").update_inference_component_runtime_config(
                    InferenceComponentName=NAME + "-zero", DesiredRuntimeConfig={"CopyCount": 0})
            done = list(pool.map(lambda item: run(item[0], item[1][0], item[1][1]), batch))
            emu.script_endpoints()
            emu.components.script()
            emu.script_update()
            for (index, (command, argv, _)), proc in zip(batch, done):
                if argv[:2] == ["deploy", "qwen3-coder"] and NAME in argv:
                    emu.put_log_lines(NAME, [SPEC_LINE])  # the container's stats line, for metrics and bench
                if argv[:2] == ["deploy", "qwen3-coder"] and NAME + "-zero" in argv:  # a component's own group
                    emu.put_log_lines(NAME + "-zero", [SPEC_LINE], component=NAME + "-zero")
                outcomes.setdefault(command, []).append((argv, proc.returncode, proc.stderr[-2000:]))
                callers[tuple(argv)] = f"iam-{index}-{command}"
                calls.setdefault(command, set()).update(
                    iam_policy.iam_action(c) for c in emu.recorder.api_calls(f"iam-{index}-{command}"))
    emu.reset()
    return calls, outcomes, callers


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


def _component_gone(emu, name: str) -> None:
    """What a scale-to-zero deploy SIGKILLed right after its CreateEndpoint leaves, on an endpoint that holds no
    component (its model, an update's): no component, no scaling, no wake-up alarm (so `recover NAME` makes each
    of its writes)."""
    target = {"ServiceNamespace": "sagemaker", "ResourceId": f"inference-component/{name}",
              "ScalableDimension": "sagemaker:inference-component:DesiredCopyCount"}
    emu.client("application-autoscaling").deregister_scalable_target(**target)
    emu.client("cloudwatch").delete_alarms(AlarmNames=[f"peagle-wake-up-{name}"])
    sm = emu.client("sagemaker")
    sm.delete_inference_component(InferenceComponentName=name)
    for _ in range(100):  # the emulator's scripted Deleting describes, bounded
        if not sm.list_inference_components(EndpointNameEquals=name)["InferenceComponents"]:
            break
        try:
            sm.describe_inference_component(InferenceComponentName=name)
        except sm.exceptions.ClientError:
            break


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
    calls, outcomes, _ = recorded
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


@pytest.mark.parametrize("command", list(iam_policy.COMMANDS))
def test_every_call_is_allowed_by_the_policy_printed_for_its_command(command, policed_server, recorded):
    """Action, resource ARN and conditions: each call of each run of `command` against `peagle iam-policy COMMAND
    --json`, as IAM decides it (a denied call was answered AccessDenied, as AWS would)."""
    if command not in COMMANDS:
        pytest.skip(f"`peagle {command}` is not on this branch")
    _, outcomes, callers = recorded
    enforcer = policed_server.enforcer
    runs = [(argv, callers[tuple(argv)]) for argv, _, _ in outcomes[command]]
    decided = [d for _, caller in runs for d in enforcer.decisions if d.caller == caller]
    assert decided, f"no call of `peagle {command}` was checked against its policy"
    denied = [f"peagle {' '.join(argv)}: {d}" for argv, caller in runs for d in enforcer.denials(caller)]
    assert not denied, (f"`peagle iam-policy {command} --json` denies what `peagle {command}` does:\n"
                        + "\n".join(dict.fromkeys(denied)))


def test_the_component_deploy_refreshed_its_lease_on_its_inference_component(policed_server, recorded):
    """The scenario really exercises the heartbeat (peagle:lease every 60 s) on the inference component, through
    the policy check: an AddTags of its own, not the tags of a create."""
    _, outcomes, callers = recorded
    [argv] = [argv for argv, _, _ in outcomes["deploy"] if NAME + "-zero" in argv]
    component = f":inference-component/{NAME}-zero"
    refreshes = [d for d in policed_server.enforcer.decisions if d.caller == callers[tuple(argv)]
                 and d.call == "sagemaker:AddTags" and d.resource.endswith(component)]
    assert refreshes, "the component deploy's lease was never refreshed on its inference component"


def test_the_commands_held_to_their_policy_are_every_aws_command_and_docs_iam_md_says_which():
    """Every registered command that calls AWS runs in a scenario held to its printed policy; docs/iam.md lists
    them (printed here too: pytest -rP)."""
    from pathlib import Path

    covered = sorted({command for command, _, _ in _scenarios("arn:aws:iam::123456789012:role/r", "/tmp")})
    print("commands held to `peagle iam-policy COMMAND --json` against the emulator:", ", ".join(covered))
    assert covered == sorted(COMMANDS - NO_AWS), f"registered commands with no enforced scenario: " \
                                                 f"{sorted(COMMANDS - NO_AWS - set(covered))}"
    doc = (Path(__file__).resolve().parent.parent / "docs" / "iam.md").read_text(encoding="utf-8")
    paragraph = doc.split("Commands held to their printed policy in the suite:", 1)[1].split("\n\n", 1)[0]
    assert sorted(re.findall(r"`peagle (\w+)`", paragraph)) == covered


def test_failing_deploy_was_rolled_back(recorded):
    """The deploy scenario that must exercise the rollback calls really did fail and roll back."""
    _, outcomes, _ = recorded
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
