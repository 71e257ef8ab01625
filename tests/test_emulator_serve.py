"""The emulator from a shell (issue 49 item 5): `python -m peagle_deploy.testing serve` prints the export lines, takes
scripts and clock moves through its control route (and the `script`, `advance` and `state` commands), and stops
cleanly on SIGINT or SIGTERM; `peagle invoke` waking a component follows PEAGLE_POLL_INTERVAL_S (docs/ci.md), so a
400-emulated-second wake-up takes no real back-off.

The subject is the process (its export lines, its signals), so it is started for real: once for the module, and once
per signal."""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import sys
import time
import urllib.request
from itertools import islice
from pathlib import Path

import pytest

from .cli_runner import run_cli

SERVE = [sys.executable, "-m", "peagle_deploy.testing", "serve"]
START_GUARD_S = 300.0  # a loaded machine may take a minute to import moto: a bound on a hang, not a speed


def start(tmp_path: Path, *options: str) -> tuple[subprocess.Popen, dict[str, str]]:
    """`serve` with --env-file, once the file is there: the process and the environment its export lines give."""
    env_file = tmp_path / "emulator.env"
    proc = subprocess.Popen([*SERVE, "--env-file", str(env_file), *options], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL)
    deadline = time.monotonic() + START_GUARD_S
    while not env_file.exists():
        if proc.poll() is not None:
            pytest.fail(f"serve exited {proc.returncode}: {proc.stderr.read()}")
        if time.monotonic() > deadline:
            proc.kill()
            pytest.fail("serve never wrote its export lines")
        time.sleep(0.1)
    env = {key: value for key, value in os.environ.items() if not key.startswith("AWS_")}
    for line in env_file.read_text().splitlines():
        name, _, value = line.removeprefix("export ").partition("=")
        env[name] = shlex.split(value)[0]
    return proc, env


def control(env: dict[str, str], route: str, body: dict | None = None) -> dict:
    request = urllib.request.Request(f"{env['AWS_ENDPOINT_URL']}/peagle-emulator/{route}", method="POST" if body
                                     is not None else "GET", data=json.dumps(body).encode() if body is not None
                                     else None, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=30) as answer:
        return json.loads(answer.read())


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    proc, env = start(tmp_path_factory.mktemp("serve"), "--clock", "manual", "--per-call-s", "10",
                      "--instance-start-s", "100", "--copy-start-s", "300")
    yield env
    proc.send_signal(signal.SIGTERM)
    proc.communicate(timeout=120)


def test_the_export_lines_are_all_a_shell_needs(served, tmp_path):
    assert served["AWS_ENDPOINT_URL"].startswith("http://127.0.0.1:")
    assert served["PEAGLE_POLL_INTERVAL_S"] == "0" and served["AWS_REGION"] == "us-east-1"
    assert served["PEAGLE_EMULATOR_ROLE"] == "arn:aws:iam::123456789012:role/peagle-emulator"
    done = run_cli("deploy", "qwen3-coder", "--name", "from-a-shell", "--role", served["PEAGLE_EMULATOR_ROLE"],
                   "--yes", env=served, cwd=tmp_path)
    assert done.code == 0, done.stderr
    assert "from-a-shell" in control(served, "state")["resources"]["endpoints"]
    assert run_cli("cleanup", "from-a-shell", "--yes", env=served, cwd=tmp_path).code == 0


def test_a_scripted_failure_is_what_deploy_then_meets(served, tmp_path):
    control(served, "script", {"endpoints": {"creating_polls": 1, "final": "Failed", "reason": "no GPU (scripted)"}})
    try:
        done = run_cli("deploy", "qwen3-coder", "--name", "scripted", "--role", served["PEAGLE_EMULATOR_ROLE"],
                       "--yes", env=served, cwd=tmp_path)
    finally:
        control(served, "script", {"endpoints": {"creating_polls": 0}})
    assert done.code == 6 and "no GPU (scripted)" in done.stderr, done.stderr


def test_a_wake_up_from_zero_follows_the_poll_setting(served, tmp_path, monkeypatch):
    """Scaled to zero by moving the clock, then woken by `peagle invoke`: with PEAGLE_POLL_INTERVAL_S=0 (what the
    export lines set) it asks again without pausing, so the 400 emulated seconds pass in the emulator's per-call
    clock only (before: 5 s to 30 s of real back-off between requests, 10 min 36 s for this wake-up)."""
    from peagle_deploy import clock

    made = run_cli("deploy", "qwen3-coder", "--name", "sleepy", "--scale-to-zero", "--idle", "15m", "--role",
                   served["PEAGLE_EMULATOR_ROLE"], "--yes", env=served, cwd=tmp_path)
    assert made.code == 0, made.stderr
    control(served, "advance", {"seconds": 300 + 15 * 60 + 120 + 600})  # loaded, idle, the alarm, the release
    waits: list[float] = []
    monkeypatch.setattr(clock, "sleep", waits.append)  # peagle's waits, as asked (the emulator's clock moves per call)
    woke = run_cli("invoke", "sleepy", "hi", env=served, cwd=tmp_path, fake_clock=False)
    assert woke.code == 0, woke.stderr
    assert "waking sleepy" in woke.stderr and "is serving: a copy answered" in woke.stderr
    assert waits and set(waits) == {0.0}, waits
    assert run_cli("cleanup", "sleepy", "--yes", env=served, cwd=tmp_path).code == 0


def test_the_wake_up_back_off_is_the_poll_setting(monkeypatch):
    from peagle_deploy.runtime.waking import backoff

    monkeypatch.delenv("PEAGLE_POLL_INTERVAL_S", raising=False)
    assert list(islice(backoff(), 6)) == [5.0, 7.5, 11.25, 16.875, 25.3125, 30.0]  # a refusal every 30 s at most
    monkeypatch.setenv("PEAGLE_POLL_INTERVAL_S", "0")
    assert list(islice(backoff(), 3)) == [0.0, 0.0, 0.0]


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_a_signal_stops_it_cleanly(tmp_path, signum):
    proc, env = start(tmp_path)
    proc.send_signal(signum)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    assert f"emulator stopped ({signal.Signals(signum).name})" in err and "Traceback" not in err
    assert not (tmp_path / "emulator.env").exists()  # its export lines go with it
    assert out.splitlines()[0] == f"export AWS_ENDPOINT_URL={env['AWS_ENDPOINT_URL']}"
    with pytest.raises(OSError):
        urllib.request.urlopen(f"{env['AWS_ENDPOINT_URL']}/peagle-emulator/state", timeout=5)
