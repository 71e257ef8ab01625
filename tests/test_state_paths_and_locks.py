"""Issue 23: the sweep's one path model (relative to its state file, never to the working directory), the locks
of everything that writes state or creates names (a sweep's --out, an endpoint's update, a local server name),
and the options beside --resume. In-process (tests/cli_runner.run_cli) except where the subject is two processes.

Both must-show cases fail on the main of issue 23's filing: the copied-and-resumed sweep rewrote its report with
'-' in every cell, and the second sweep with the same --out ran over the first."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time

import pytest

from peagle_deploy.testing.fake_vllm import FakeVllm
from peagle_deploy.testing.sweep_standins import url_standins

from .cli_runner import run_cli
from .conftest import PEAGLE

FAST = ["--concurrency", "1", "--num-prompts", "2", "--warmup", "0", "--logs-wait", "0"]


def _sweep(urls: list[str], *args: str):
    return run_cli("sweep", "m", *[a for u in urls for a in ("--url", u)], *FAST, *args)


def _tok_s(report: dict) -> list:
    return [c["output_tokens_per_s"] for c in report["configurations"]]


def test_a_finished_sweep_copied_and_resumed_from_elsewhere_keeps_its_figures(tmp_path, monkeypatch):
    """The data-loss case: `--out sw1` (relative), copied, resumed from another directory by absolute path."""
    first, elsewhere = tmp_path / "first", tmp_path / "elsewhere"
    first.mkdir()
    elsewhere.mkdir()
    monkeypatch.chdir(first)
    with url_standins([("off", None), ("p-eagle", 3)]) as urls:
        done = _sweep(urls, "--out", "sw1", "--json")
    assert done.code == 0, done.stderr
    measured = json.loads(done.stdout)["report"]
    assert all(_tok_s(measured)) and measured["tables"]
    copy = tmp_path / "sw1copy"
    shutil.copytree(first / "sw1", copy)
    shutil.rmtree(first / "sw1")  # nothing may be read from the first run's place
    monkeypatch.chdir(elsewhere)
    resumed = run_cli("sweep", "--resume", str(copy / "sweep-state.json"), "--yes", "--json")
    assert resumed.code == 0, resumed.stderr
    report = json.loads(resumed.stdout)["report"]
    assert _tok_s(report) == _tok_s(measured) and report["tables"] == measured["tables"]
    assert json.loads((copy / "sweep.json").read_text())["tables"] == measured["tables"]
    markdown = (copy / "sweep.md").read_text()
    row = next(line for line in markdown.splitlines() if line.startswith("| 1 |"))  # c=1 of the tok/s table
    assert "-" not in row.split("|")[2:-1], row
    assert not list(elsewhere.iterdir())  # nothing written where the resume ran


def test_resume_refuses_a_missing_result_instead_of_blanking_the_report(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with url_standins([("off", None)]) as urls:
        assert _sweep(urls, "--out", "sw").code == 0
    before = (tmp_path / "sw" / "sweep.md").read_text()
    state = json.loads((tmp_path / "sw" / "sweep-state.json").read_text())
    (tmp_path / "sw" / state["configs"]["off"]["result_file"]).unlink()
    again = run_cli("sweep", "--resume", "sw/sweep-state.json", "--yes")
    assert again.code == 2 and "so resuming would lose its figures" in again.stderr
    assert (tmp_path / "sw" / "sweep.md").read_text() == before


def test_model_and_fixed_options_beside_resume_are_checked_not_ignored(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with url_standins([("off", None)]) as urls:
        assert _sweep(urls, "--out", "sw").code == 0
        state = "sw/sweep-state.json"
        other = run_cli("sweep", "qwen3-coder", "--resume", state, "--yes")
        assert other.code == 2 and "MODEL 'qwen3-coder' is not the model of sweep" in other.stderr
        assert len(other.stderr.strip().splitlines()) == 1
        fixed = run_cli("sweep", "--resume", state, "--concurrency", "4", "--yes")
        assert fixed.code == 2 and "--concurrency cannot change on --resume" in fixed.stderr
        same = run_cli("sweep", "m", "--resume", state, "--yes")  # the sweep's own MODEL is fine
        assert same.code == 0, same.stderr


def test_a_second_sweep_with_the_same_out_is_refused_naming_the_first(tmp_path):
    """The concurrent-sweep case: two processes, one --out. The first holds a stalled server; the second is refused
    in one line naming the first's pid and host, and writes nothing."""
    out = tmp_path / "shared"
    with FakeVllm(mode="stall", stall_s=300, accepted_per_request=()) as stalled, url_standins([("off", None)]) as fast:
        first = subprocess.Popen([PEAGLE, "sweep", "m", "--url", f"off={stalled.url}", *FAST, "--out", str(out)],
                                 stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, cwd=tmp_path,
                                 env={**os.environ, "NO_COLOR": "1"})
        try:
            deadline = time.monotonic() + 120
            while not stalled.requests and first.poll() is None and time.monotonic() < deadline:
                time.sleep(0.05)  # bounded: until the first sweep's bench reaches the server (it holds the lock)
            assert stalled.requests, first.stderr.read() if first.poll() is not None else "no request in 120 s"
            state_before = (out / "sweep-state.json").read_text()
            second = _sweep(fast, "--out", str(out))
            assert second.code == 2, second.stderr
            [line] = second.stderr.strip().splitlines()
            assert f"pid {first.pid} on {socket.gethostname()}" in line and "is already running a sweep" in line
            assert line.endswith("wait for it to finish, or pass another --out")
            assert (out / "sweep-state.json").read_text() == state_before
            assert not (out / "sweep.json").exists()
            # nor may the running sweep be continued a second time beside itself (main advised exactly that)
            again = run_cli("sweep", "--resume", str(out / "sweep-state.json"), "--yes")
            assert again.code == 2 and f"pid {first.pid}" in again.stderr and "it is running this sweep" in again.stderr
            assert (out / "sweep-state.json").read_text() == state_before
        finally:
            first.terminate()
            first.wait(60)


def test_a_second_update_of_one_endpoint_is_refused_while_the_first_holds_it(emu_recorded, tmp_path, monkeypatch):
    from peagle_deploy.locks import hold, lock_dir

    monkeypatch.setenv("PEAGLE_STATE_DIR", str(tmp_path / "state"))
    deployed = run_cli("deploy", "qwen3-coder", "--name", "prod", "--role", emu_recorded.role_arn, "--yes")
    assert deployed.code == 0, deployed.stderr
    calls = len(emu_recorded.calls)
    with hold(lock_dir() / f"update-{emu_recorded.region}-prod.lock", "updating prod", hint="-"):
        second = run_cli("update", "prod", "--k", "7", "--yes")
    assert second.code == 2 and f"pid {os.getpid()} on {socket.gethostname()}" in second.stderr
    assert "is already updating prod" in second.stderr
    # refused before its first write (the lock is taken once the plan is read and confirmed): reads only
    assert [c for c in emu_recorded.calls[calls:] if not c.startswith(("Describe", "List", "Get"))] == []
    assert run_cli("update", "prod", "--k", "7", "--yes").code == 0  # released: the next update runs


def test_local_start_and_stop_of_one_name_never_interleave(tmp_path, monkeypatch):
    from peagle_deploy.local import state

    monkeypatch.setenv("PEAGLE_STATE_DIR", str(tmp_path / "state"))
    (tmp_path / "m").mkdir()
    (tmp_path / "m" / "config.json").write_text("{}")
    with state.lock("default", "starting"):  # another `peagle local start` of this name, half-way
        refused = run_cli("local", "start", str(tmp_path / "m"), "--mode", "off")
    assert refused.code == 2 and "is already starting local server 'default'" in refused.stderr
    assert state.names() == []


def test_the_lock_dies_with_its_holder(tmp_path):
    """flock: a killed holder leaves no stale lock (the next sweep runs)."""
    from peagle_deploy.locks import hold

    lock = tmp_path / "x.lock"
    holder = subprocess.Popen([sys.executable, "-c", "import sys, time\nfrom pathlib import Path\n"
                               "from peagle_deploy.locks import hold\n"
                               f"with hold(Path({str(lock)!r}), 'holding', hint='-'):\n"
                               "    print('held', flush=True)\n    time.sleep(600)\n"],
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        with pytest.raises(Exception, match=f"pid {holder.pid}"), hold(lock, "holding", hint="-"):
            pass
    finally:
        holder.kill()
        holder.wait(30)
    with hold(lock, "holding", hint="-"):
        pass
