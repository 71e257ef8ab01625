"""A refused sweep leaves nothing it created (issue 37 item 8): its lock is released and removed, an --out folder it
made and left empty is removed again; a folder that existed before, or holds anything, is never removed. And the
lock file removal never lets two hold one lock (locks.py). `bench` leaves no empty --out either."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from peagle_deploy import locks
from peagle_deploy.locks import Busy, hold

from .cli_runner import run_cli

FAST = ["--concurrency", "1", "--num-prompts", "2", "--warmup", "0", "--logs-wait", "0"]


def tree(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*"))


@pytest.fixture
def priced(emu_recorded):
    """The emulator (with its Pricing API answering) that this process's environment points at."""
    return emu_recorded


def test_a_sweep_refused_for_its_budget_leaves_no_lock_and_no_folder(priced, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    done = run_cli("sweep", "qwen3-coder", *FAST, "--budget", "0.5", "--role", priced.role_arn, "--yes")
    assert done.code == 2 and "over --budget $0.50" in done.stderr, done.stderr
    assert tree(tmp_path) == []  # no ./peagle-sweep, no .peagle-sweep.lock in it
    deeper = run_cli("sweep", "qwen3-coder", *FAST, "--budget", "0.5", "--role", priced.role_arn, "--yes",
                     "--out", "a/b/c", "--state", "s/state.json")
    assert deeper.code == 2, deeper.stderr
    assert tree(tmp_path) == []  # every folder it made, parents included


@pytest.mark.parametrize("refusal", ["over-budget", "no-role", "state-exists"])
def test_a_folder_that_existed_is_kept_as_it_was(priced, tmp_path, refusal):
    empty, full, kept = tmp_path / "empty", tmp_path / "full", tmp_path / "kept"
    for folder in (empty, full, kept):
        folder.mkdir()
    (full / "mine.txt").write_text("keep")
    (kept / "state.json").write_text("{}")
    args = {"over-budget": ["--budget", "0.5", "--role", priced.role_arn],
            "no-role": ["--budget", "40"],  # refused before the plan
            "state-exists": ["--url", "off=http://127.0.0.1:9", "--state", str(kept / "state.json")]}[refusal]
    for out in (empty, full):
        done = run_cli("sweep", "qwen3-coder", *FAST, *args, "--yes", "--out", str(out))
        assert done.code == 2, done.stderr
    assert tree(tmp_path) == ["empty", "full", "full/mine.txt", "kept", "kept/state.json"]
    assert (full / "mine.txt").read_text() == "keep"


def test_a_lock_is_removed_when_released_and_a_killed_holders_file_is_taken_over(tmp_path):
    lock = tmp_path / "x.lock"
    with hold(lock, "holding", hint="-"):
        assert lock.exists()
        with pytest.raises(Busy), hold(lock, "holding", hint="-"):
            pass
        assert lock.exists()  # a refused taker removes nothing
    assert not lock.exists()
    lock.write_text('{"pid": 1}')  # what a SIGKILLed holder leaves: a file nobody flocks
    with hold(lock, "holding", hint="-"):
        assert '"pid": %d' % os.getpid() in lock.read_text()
    assert not lock.exists()


def test_a_taker_whose_file_was_removed_before_its_flock_locks_the_new_one(tmp_path, monkeypatch):
    """The race removal opens: B opens the file, the holder removes it and lets go, C creates a new one and holds
    it; B's flock on the removed file succeeds, so B must see the name is no longer its file, open again, and be
    refused by C."""
    lock = tmp_path / "x.lock"
    real_flock = locks.fcntl.flock
    c_holds = []

    def flock(fd, op):
        if not c_holds:  # B is between its open and its flock: the holder goes, C comes
            lock.unlink()
            c_holds.append(hold(lock, "holding", hint="-"))
            c_holds[0].__enter__()
        return real_flock(fd, op)

    monkeypatch.setattr(locks.fcntl, "flock", flock)
    try:
        with pytest.raises(Busy, match=f"pid {os.getpid()}"), hold(lock, "holding", hint="-"):
            pass
    finally:
        c_holds[0].__exit__(None, None, None)
    assert not lock.exists()


def test_a_bench_that_cannot_reach_its_target_leaves_no_empty_out(tmp_path):
    done = run_cli("bench", "http://127.0.0.1:9", "-n", "1", "--dataset", "code", cwd=tmp_path)
    assert done.code == 6 and "cannot reach http://127.0.0.1:9" in done.stderr, done.stderr
    assert tree(tmp_path) == []  # no ./peagle-bench
