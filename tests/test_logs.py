"""`peagle logs`: CloudWatch Logs of an endpoint, streams merged in time order, the failure line highlighted,
--since/--grep/--follow, a missing group, Ctrl-C; in-process emulator, plus the installed executable once."""

from __future__ import annotations

import io
import json
import subprocess
import time

import pytest

from peagle_deploy.cli.logs import show_logs
from peagle_deploy.output import Output
from tests.cli_runner import run_cli
from tests.forked_peagle import forked_peagle

NAME = "peagle-logs-test"
FAILING_START = [
    "INFO 11-22 10:00:00 [api_server.py:1] vLLM API server version 0.32.0",
    "(EngineCore pid=7) ERROR 11-22 10:00:05 [core.py:12] torch.OutOfMemoryError: CUDA out of memory. "
    "Tried to allocate 2.00 GiB",
    "RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {}",
]


def _now_ms() -> int:
    return int(time.time() * 1000)


@pytest.fixture
def emu(emu_in_process):
    return emu_in_process


def test_streams_merge_in_time_order(emu):
    base = _now_ms() - 60_000
    emu.put_log_lines(NAME, ["a1", "a2", "a3"], stream="AllTraffic/i-aaa", start_ms=base, step_ms=20)
    emu.put_log_lines(NAME, ["b1", "b2"], stream="AllTraffic/i-bbb", start_ms=base + 10, step_ms=20)
    result = run_cli("logs", NAME, "--json")
    assert result.code == 0, result.stderr
    doc = json.loads(result.stdout)
    assert [e["message"] for e in doc["events"]] == ["a1", "b1", "a2", "b2", "a3"]
    assert [e["stream"] for e in doc["events"][:2]] == ["AllTraffic/i-aaa", "AllTraffic/i-bbb"]
    assert doc["log_group"] == f"/aws/sagemaker/Endpoints/{NAME}"
    assert doc["failure_line"] is None

    human = run_cli("logs", NAME)
    lines = human.stdout.splitlines()
    assert [line.rsplit(" ", 1)[-1] for line in lines] == ["a1", "b1", "a2", "b2", "a3"]
    assert "AllTraffic/i-bbb b1" in lines[1]


def test_failure_line_is_marked_and_named(emu):
    emu.put_log_lines(NAME, FAILING_START, start_ms=_now_ms() - 5_000)
    doc = json.loads(run_cli("logs", NAME, "--json").stdout)
    marked = [e["message"] for e in doc["events"] if e["failure"]]
    assert len(marked) == 1 and "torch.OutOfMemoryError" in marked[0]
    assert "torch.OutOfMemoryError" in doc["failure_line"]["message"]

    human = run_cli("logs", NAME)
    assert human.code == 0
    assert "note: the container's failure line" in human.stderr and "OutOfMemoryError" in human.stderr


def test_failure_line_styled_on_a_terminal(emu):
    emu.put_log_lines(NAME, FAILING_START, start_ms=_now_ms() - 5_000)

    class Tty(io.StringIO):
        def isatty(self):
            return True

    stdout = Tty()
    out = Output(stdout=stdout, stderr=io.StringIO())
    show_logs(out, NAME, follow=False, since="1h", grep=None, region=None, profile=None)
    text = stdout.getvalue()
    oom = next(line for line in text.splitlines() if "OutOfMemoryError" in line)
    assert "\x1b[1;31m" in oom  # bold red
    plain = next(line for line in text.splitlines() if "server version" in line)
    assert "\x1b[1;31m" not in plain


def test_since_window_and_grep(emu):
    now = _now_ms()
    emu.put_log_lines(NAME, ["old line"], start_ms=now - 3 * 3600_000)
    emu.put_log_lines(NAME, ["recent ERROR one", "recent info", "recent ERROR two"], start_ms=now - 60_000)
    default = json.loads(run_cli("logs", NAME, "--json").stdout)  # default --since 1h
    assert [e["message"] for e in default["events"]] == ["recent ERROR one", "recent info", "recent ERROR two"]
    wide = json.loads(run_cli("logs", NAME, "--since", "4h", "--json").stdout)
    assert wide["events"][0]["message"] == "old line"
    grepped = json.loads(run_cli("logs", NAME, "--grep", "ERROR", "--json").stdout)
    assert [e["message"] for e in grepped["events"]] == ["recent ERROR one", "recent ERROR two"]
    empty = run_cli("logs", NAME, "--since", "10s")
    assert empty.code == 0 and empty.stdout == "" and "no lines in" in empty.stderr


def test_missing_group_is_one_line_exit_2(emu):
    result = run_cli("logs", "never-started")
    assert result.code == 2
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1
    assert "no CloudWatch log group /aws/sagemaker/Endpoints/never-started" in lines[0]
    assert "peagle status never-started" in lines[0]
    doc = json.loads(run_cli("logs", "never-started", "--json").stdout)
    assert doc["error"]["exit_code"] == 2


def test_read_retries_a_transient_failure(emu, monkeypatch):
    monkeypatch.setenv("AWS_MAX_ATTEMPTS", "1")  # botocore gives up at once: peagle's own read retry must ask again
    emu.put_log_lines(NAME, ["still here"], start_ms=_now_ms() - 1000)
    emu.fail("FilterLogEvents", code="ServiceUnavailableException", status=503, times=3)
    out = Output(True, stdout=io.StringIO(), stderr=io.StringIO())
    show_logs(out, NAME, follow=False, since="1h", grep=None, region=None, profile=None, sleep=lambda s: None)
    assert [e["message"] for e in json.loads(out.stdout.getvalue())["events"]] == ["still here"]
    assert emu.calls.count("FilterLogEvents") == 4  # three refused


def test_follow_prints_new_lines_once_and_ctrl_c_exits_130(emu):
    base = _now_ms() - 10_000
    emu.put_log_lines(NAME, ["first", "second"], start_ms=base)
    polls: list[float] = []

    def sleep(seconds: float) -> None:  # each poll: the container writes more, then the user presses Ctrl-C
        polls.append(seconds)
        if len(polls) == 1:
            emu.put_log_lines(NAME, ["third"] + FAILING_START, start_ms=base + 5)
        elif len(polls) == 3:
            raise KeyboardInterrupt

    from peagle_deploy.cli.common import run

    stdout, stderr = io.StringIO(), io.StringIO()
    with pytest.raises(Exception) as exit_info:
        run(False, lambda out: show_logs(Output(stdout=stdout, stderr=stderr), NAME, follow=True, since="1h",
                                         grep=None, region=None, profile=None, sleep=sleep))
    assert getattr(exit_info.value, "exit_code", None) == 130
    printed = [line.split(" ", 3)[-1] for line in stdout.getvalue().splitlines()]
    assert printed == ["first", "second", "third", *FAILING_START]
    assert polls and all(0 < s <= 5 for s in polls)
    assert "following /aws/sagemaker/Endpoints/peagle-logs-test" in stderr.getvalue()
    assert stderr.getvalue().count("failure line") == 1


def test_follow_json_is_refused(emu):
    result = run_cli("logs", NAME, "--follow", "--json")
    assert result.code == 2 and "--follow prints lines as they arrive" in result.stderr


def test_a_peagle_process_against_the_server(emu_server):
    emu_server.put_log_lines(NAME, FAILING_START, start_ms=_now_ms() - 5_000)
    proc = subprocess.run([forked_peagle(), "logs", NAME], env=emu_server.env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert len(proc.stdout.splitlines()) == 3
    assert "\x1b[" not in proc.stdout  # piped: no styling, no wrapping
    assert "OutOfMemoryError" in proc.stderr
