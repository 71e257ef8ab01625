"""Output as a script or a CI log sees it: a `peagle` process (forked, tests/forked_peagle.py: the caller's own
file descriptors), stdout piped to a file. A closed stdout without the SDK imported and shell completion (which
keys on the console script's name) go through the installed executable itself.

Nothing wraps off a terminal (names, URIs, JSON strings stay on one line), a closed stdout is a quiet
exit 0, a bare `peagle` prints its help and exits 2, -h works everywhere, progress is plain lines.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from .conftest import PEAGLE
from .forked_peagle import forked_peagle
LONG_NAME = "peagle-a-deliberately-long-endpoint-name-that-tables-used-to-fold"[:63]


def _env(extra: dict[str, str] | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "PEAGLE_", "COLUMNS"))}
    env.update({"AWS_CONFIG_FILE": os.devnull, "AWS_SHARED_CREDENTIALS_FILE": os.devnull,
                "AWS_EC2_METADATA_DISABLED": "true", **(extra or {})})
    return env


def _run(*args: str, env: dict[str, str] | None = None, tmp: Path, timeout: float = 120) -> tuple[int, str, str]:
    out_path, err_path = tmp / "stdout.txt", tmp / "stderr.txt"
    with open(out_path, "w") as out, open(err_path, "w") as err:
        code = subprocess.run([forked_peagle(), *args], stdout=out, stderr=err, stdin=subprocess.DEVNULL,
                              env=env or _env(), timeout=timeout, cwd=tmp).returncode
    return code, out_path.read_text(), err_path.read_text()


def test_dry_run_to_a_file_wraps_nothing(tmp_path):
    code, text, err = _run("deploy", "qwen3-coder", "--dry-run", "--offline", "--name", LONG_NAME, tmp=tmp_path)
    assert code == 0, err
    _, json_text, _ = _run("deploy", "qwen3-coder", "--dry-run", "--offline", "--name", LONG_NAME, "--json",
                           tmp=tmp_path)
    plan = json.loads(json_text)["plan"]
    lines = text.splitlines()
    image = plan["create_model"]["PrimaryContainer"]["Image"]
    s3_uri = plan["drafter_channel"]["S3DataSource"]["S3Uri"]
    for whole in (LONG_NAME, image, s3_uri, plan["speculative_config"]):
        assert any(whole in line for line in lines), whole
    # every request body printed in the human plan is valid JSON equal to the plan's own
    decoder = json.JSONDecoder()

    for title, body in (("CreateModel", plan["create_model"]), ("CreateEndpointConfig", plan["create_endpoint_config"]),
                        ("CreateEndpoint", plan["create_endpoint"])):
        start = text.index("{", text.index(f"\n{title}\n"))
        parsed, _ = decoder.raw_decode(text[start:])
        # the tags, shared by the three, are printed once above them (tests/test_cli_dry_run.py)
        assert parsed == {**body, "Tags": f"the {len(body['Tags'])} tags above"}, title
    assert max(len(line) for line in lines) > 100  # not folded at 80 columns


def test_columns_variable_does_not_wrap_a_pipe(tmp_path):
    code, text, _ = _run("models", env=_env({"COLUMNS": "40"}), tmp=tmp_path)
    assert code == 0
    assert "amazon/Qwen3-Coder-30B-A3B-Instruct-P-EAGLE" in text
    assert "huggingface-llm-qwen3-coder-30b-a3b-instruct" in text


@pytest.fixture
def emulator(emulator_server):
    from peagle_deploy.testing import seed_jumpstart_bucket

    emulator_server.reset()
    seed_jumpstart_bucket(emulator_server.client("s3"), emulator_server.region)
    emulator_server.script_endpoints()
    yield emulator_server
    emulator_server.reset()


def _peagle_endpoint(emulator, name: str, expires_at: datetime | None) -> None:
    tags = [{"Key": "peagle:managed", "Value": "true"}, {"Key": "peagle:model", "Value": "qwen3-coder"},
            {"Key": "peagle:mode", "Value": "p-eagle"}, {"Key": "peagle:k", "Value": "3"},
            {"Key": "peagle:instance-type", "Value": "ml.g7e.2xlarge"}, {"Key": "peagle:instance-count", "Value": "1"},
            {"Key": "peagle:created-at", "Value": (datetime.now(UTC) - timedelta(hours=2)).isoformat()}]
    if expires_at is not None:
        tags.append({"Key": "peagle:expires-at", "Value": expires_at.isoformat()})
    emulator.create_endpoint_stack(name, tags=tags)


def test_status_to_a_file_keeps_names_whole_and_says_expired(emulator, tmp_path):
    _peagle_endpoint(emulator, LONG_NAME, datetime.now(UTC) - timedelta(minutes=6, seconds=16))
    code, text, err = _run("status", env=_env(emulator.env), tmp=tmp_path)
    assert code == 0, err
    row = next(line for line in text.splitlines() if LONG_NAME in line)
    assert "InService" in row and "ml.g7e.2xlarge" in row
    assert "expired 6m" in row and " ago" in row and "-6m" not in text
    assert "None" not in text + err


def test_status_watch_prints_plain_lines_and_ctrl_c_exits_0(emulator, tmp_path):
    _peagle_endpoint(emulator, LONG_NAME, None)
    # the second refresh waits at its ListEndpoints until the endpoint is deleted: no refresh reads it half-deleted
    refresh = emulator.gate("ListEndpoints", skip=1)
    proc = subprocess.Popen([forked_peagle(), "status", "--watch", "--interval", "0.2"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, env=_env(emulator.env), text=True,
                            cwd=tmp_path)
    try:
        first = proc.stdout.readline()  # blocks until the first snapshot is printed (bounded by the kill below)
        assert LONG_NAME in first and "InService" in first and "expires never" in first, first
        refresh.wait_entered()
        emulator.client("sagemaker").delete_endpoint(EndpointName=LONG_NAME)
        refresh.release()
        gone = proc.stdout.readline()
        assert gone.rstrip().endswith(f"{LONG_NAME} gone"), gone
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
    finally:
        refresh.release()
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 0, err
    assert "Traceback" not in err and err.strip() == ""


def test_deploy_progress_off_a_terminal_is_plain_lines(emulator, tmp_path):
    emulator.script_endpoints(creating_polls=1)
    code, out, err = _run("deploy", "qwen3-coder", "--role", emulator.role_arn, "--yes", "--name", "peagle-progress-test",
                          env=_env(emulator.env), tmp=tmp_path)
    assert code == 0, err
    assert "peagle-progress-test: Creating" in err  # a progress line while it waited
    assert not any(ch in err for ch in "⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏\r")  # no spinner frames or carriage returns
    assert "is InService after" in out


@pytest.mark.parametrize("args,executable", [(["models"], True), (["deploy", "qwen3-coder", "--dry-run", "--offline"], False),
                                             (["--help"], True),
                                             (["deploy", "qwen3-coder", "--dry-run", "--offline", "--json"], False)])
def test_closed_stdout_exits_0_quietly(args, executable, tmp_path):
    read_end, write_end = os.pipe()
    os.close(read_end)  # the reader is gone before peagle writes: every write is EPIPE
    try:
        proc = subprocess.run([PEAGLE if executable else forked_peagle(), *args], stdout=write_end, stderr=subprocess.PIPE,
                              stdin=subprocess.DEVNULL, env=_env(), timeout=120, text=True, cwd=tmp_path)
    finally:
        os.close(write_end)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == ""


def test_bare_peagle_prints_help_and_exits_2(tmp_path):
    code, out, err = _run(tmp=tmp_path)
    assert code == 2
    assert "Usage: peagle" in out and "deploy" in out
    assert err == ""


def test_dash_h_on_every_command():
    import typer.main

    from peagle_deploy.cli.app import app

    from .cli_runner import run_cli

    def walk(command, prefix):
        yield prefix
        for name, sub in getattr(command, "commands", {}).items():
            yield from walk(sub, [*prefix, name])

    paths = list(walk(typer.main.get_command(app), []))
    assert len(paths) > 10
    for path in paths:
        short, long = run_cli(*path, "-h"), run_cli(*path, "--help")
        assert short.code == 0 and "Usage:" in short.stdout, path
        assert short.stdout == long.stdout, path


def test_shell_completion_completes_commands(tmp_path):
    env = _env({"_PEAGLE_COMPLETE": "complete_bash", "COMP_WORDS": "peagle de", "COMP_CWORD": "1"})
    proc = subprocess.run([str(PEAGLE)], env=env, capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert proc.returncode == 0 and proc.stdout.split() == ["deploy"], proc
    # Typer finds the shell among the process's ancestors unless told not to (then --show-completion takes the
    # shell's name): a suite started by no shell (a detached job, an orphaned process) has none to find
    proc = subprocess.run([str(PEAGLE), "--show-completion", "bash"], capture_output=True, text=True, timeout=60,
                          env=_env({"_TYPER_COMPLETE_TEST_DISABLE_SHELL_DETECTION": "1"}), cwd=tmp_path)
    assert proc.returncode == 0 and "_PEAGLE_COMPLETE=complete_bash" in proc.stdout, proc.stdout[:500]


def test_container_args_example_from_the_readme_runs(tmp_path):
    code, out, err = _run("container", "args", "--env", "HF_MODEL_ID=Qwen/Qwen3-Coder-30B-A3B-Instruct",
                          env=_env({"SM_VLLM_MAX_MODEL_LEN": "8192"}), tmp=tmp_path)
    assert code == 0, err
    assert out.startswith("vllm serve Qwen/Qwen3-Coder-30B-A3B-Instruct --port 8080")


def test_watch_loop_with_an_injected_sleep():
    """The watch loop itself, with an injected sleep: snapshot, change, disappearance, Ctrl-C."""
    import io
    from types import SimpleNamespace

    from peagle_deploy.cli.status_view import watch
    from peagle_deploy.output import Output

    def row(name, status):
        return SimpleNamespace(name=name, status=status, failure_reason=None, model="qwen3-coder", mode="p-eagle",
                               k=3, instance_count=1, instance_type="ml.g7e.2xlarge", age_s=61, expires_in_s=None,
                               cost_so_far_usd=0.06)

    snapshots = iter([[row("a", "Creating"), row("b", "InService")], [row("a", "InService"), row("b", "InService")],
                      [row("a", "InService")]])
    sleeps = []

    def sleep(seconds):
        sleeps.append(seconds)
        if len(sleeps) == 3:
            raise KeyboardInterrupt

    stdout = io.StringIO()
    out = Output(stdout=stdout, stderr=io.StringIO())
    watch(out, lambda: next(snapshots), interval=5, sleep=sleep, now=lambda: datetime(2026, 11, 22, 12, 0, tzinfo=UTC))
    lines = stdout.getvalue().splitlines()
    assert lines == [
        "2026-11-22T12:00:00Z a Creating (qwen3-coder p-eagle K=3, 1 x ml.g7e.2xlarge, age 1m01s, expires never, $0.06 (est.))",
        "2026-11-22T12:00:00Z b InService (qwen3-coder p-eagle K=3, 1 x ml.g7e.2xlarge, age 1m01s, expires never, $0.06 (est.))",
        "2026-11-22T12:00:00Z a InService (qwen3-coder p-eagle K=3, 1 x ml.g7e.2xlarge, age 1m01s, expires never, $0.06 (est.))",
        "2026-11-22T12:00:00Z b gone",
    ]
    assert sleeps == [5, 5, 5]


def test_plain_progress_prints_phases_and_a_heartbeat():
    from peagle_deploy.output import PlainProgress

    now = [0.0]
    printed = []
    progress = PlainProgress(printed.append, every_s=30, clock=lambda: now[0])
    for t, text in [(0, "x: Creating (0s)"), (2, "x: Creating (2s)"), (31, "x: Creating (31s)"),
                    (33, "x: Creating (33s) - downloading"), (40, "x: InService (40s)")]:
        now[0] = t
        progress(text)
    assert printed == ["x: Creating (0s)", "x: Creating (31s)", "x: Creating (33s) - downloading", "x: InService (40s)"]


def test_human_durations():
    from peagle_deploy.output import human_duration, human_expiry

    assert [human_duration(s) for s in (None, 0, 45, 376, 3900, 2 * 86400 + 3 * 3600)] == \
        ["-", "0s", "45s", "6m16s", "1h05m", "2d03h"]
    assert human_expiry(-376) == "expired 6m16s ago"
    assert human_expiry(3900) == "in 1h05m" and human_expiry(None) == "never"


def test_a_narrow_terminal_gets_blocks_not_folded_names():
    import io

    from rich.console import Console

    from peagle_deploy.output import print_table

    buffer = io.StringIO()
    console = Console(file=buffer, width=40, force_terminal=True, color_system=None)
    print_table(console, ["endpoint", "status"], [[LONG_NAME, "InService"]], title="t")
    assert buffer.getvalue().splitlines() == ["t", LONG_NAME, "  status: InService"]
    buffer.truncate(0), buffer.seek(0)
    print_table(Console(file=buffer, width=200, force_terminal=True, color_system=None), ["endpoint", "status"],
                [[LONG_NAME, "InService"]])
    assert any(LONG_NAME in line and "InService" in line for line in buffer.getvalue().splitlines())


def test_json_error_document_for_an_unexpected_error():
    from peagle_deploy.errors import PeagleError
    from peagle_deploy.output import error_document

    assert error_document(PeagleError("boom", None)) == {
        "error": {"message": "boom", "hint": None, "exit_code": 1, "kind": "unexpected"}}


def test_bench_progress_off_a_terminal_is_plain_lines(tmp_path):
    from peagle_deploy.testing.fake_vllm import FakeVllm

    with FakeVllm() as server:
        code, out, err = _run("bench", server.url, "--concurrency", "1,2", "--num-prompts", "2", "--warmup", "1",
                              "--no-chart", "--out", str(tmp_path / "results"), tmp=tmp_path)
    assert code == 0, err
    lines = err.splitlines()
    assert any(line.startswith("concurrency 1: ") for line in lines), err
    assert any(line.startswith("concurrency 2: done, ") for line in lines), err
    assert not any(ch in err for ch in "\r━"), err  # no redrawn bars


def test_watch_on_a_terminal_redraws_a_table():
    import io
    from types import SimpleNamespace

    from peagle_deploy.cli.status_view import watch
    from peagle_deploy.errors import UsageError
    from peagle_deploy.output import Output

    class Terminal(io.StringIO):
        def isatty(self):
            return True

    def row(status):
        return SimpleNamespace(name=LONG_NAME, status=status, failure_reason=None, model="qwen3-coder", mode="off",
                               k=None, instance_count=1, instance_type="ml.g7e.2xlarge", age_s=5, expires_in_s=60,
                               cost_so_far_usd=None)

    answers = iter([[row("Creating")], [row("InService")], UsageError("no endpoint named x")])

    def fetch():
        answer = next(answers)
        if isinstance(answer, Exception):
            raise answer
        return answer

    screen = Terminal()
    watch(Output(stdout=screen, stderr=io.StringIO()), fetch, interval=1, sleep=lambda s: None, max_refreshes=2,
          now=lambda: datetime(2026, 11, 22, 12, 0, tzinfo=UTC))
    text = screen.getvalue()
    assert "Creating" in text and "InService" in text and "in 1m00s" in text
    assert "no peagle endpoints in this region" in text  # the watched endpoint went away
