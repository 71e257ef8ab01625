"""Fixtures shared by several test files (keep this small: one fixture per shared need).

How a test runs `peagle` (tests/README.md says when to use which, and lists the executable set):
- in-process: `tests/cli_runner.py` `run_cli(*args, env=..., cwd=..., stdin=...)`, isolated (environment,
  cwd, stdio, signal handlers, peagle's module state, a fake clock for the waits between AWS polls);
- forked: `tests/forked_peagle.py` `forked_peagle()`, a `peagle` executable path for subprocess.run, bash
  and PATH whose runs are children of one fork server that imported peagle, boto3 and the SDK once;
- the installed executable: `PEAGLE` below, only where the subject is the process itself.
botocore's data files are parsed once per process (tests/botocore_data.py).
"""

from __future__ import annotations

import os
import signal
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

import pytest

from .aws_shapes import check_every_request
from .botocore_data import preload, share_botocore_data
from .command_tree import share_command_tree

# the contract tier's hooks (`--max-cost`, the `aws` marker's gate, its cost estimate): an option must be registered
# by a conftest pytest loads at start-up, and tests/contract/conftest.py is not one (docs/ci.md, "The contract tier")
pytest_plugins = ["tests.contract.plugin"]

PEAGLE = str(Path(sys.executable).parent / "peagle")  # the installed executable of this environment
# Tests send SIGINT to the processes they start, which inherit an ignored SIGINT (a shell's background job, a
# pytest-xdist worker) and keep it ignored, as peagle rightly does with one it inherits: the suite's own process
# takes Python's default back, so its children start with SIGINT deliverable wherever the suite was started.
if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)
# The same for SIGHUP under `nohup`: a suite started that way would otherwise see every SIGHUP test's child keep
# the hangup ignored (and exit without "received SIGHUP").
if signal.getsignal(signal.SIGHUP) == signal.SIG_IGN:
    signal.signal(signal.SIGHUP, signal.SIG_DFL)
# The published prompt sets (--dataset humaneval / mt-bench, the default) come from the user cache, which the
# README's set-up command fills (`peagle datasets fetch`); tests never fetch them from the network, and tests
# that give a command its own HOME still read that cache.
os.environ.setdefault("PEAGLE_DATASETS_OFFLINE", "1")
# the model hub likewise: `peagle drafter stage` asks no real hub from a test (HF_HUB_OFFLINE); the tests that stage
# a drafter point HF_ENDPOINT at their loopback stand-in (tests/hub_stand_in.py) and lift it for that run only
os.environ.setdefault("HF_HUB_OFFLINE", "1")
# peagle's own state (locks of `peagle update`, local servers) lives in a folder of this test session, never in
# the user's ~/.local/state: two suites at once (or a developer's real runs) never share a lock or a server name
if "PEAGLE_STATE_DIR" not in os.environ:
    import tempfile

    os.environ["PEAGLE_STATE_DIR"] = tempfile.mkdtemp(prefix="peagle-test-state-")
if "PEAGLE_CACHE_DIR" not in os.environ:
    from peagle_deploy.bench.benchmark_sets import cache_dir

    os.environ["PEAGLE_CACHE_DIR"] = str(cache_dir().parent)


def _compile_the_sources() -> None:
    """peagle's modules and the suite's helpers compiled to bytecode once, as an install compiles a package: with
    PYTHONDONTWRITEBYTECODE set (this machine's shell sets it) and an editable install, every new Python the suite
    starts (the executable, the fork servers, the xdist workers, the start-up probes: about a hundred) compiled
    peagle's sources again, about 0.2 s of CPU each; compiling both folders takes 0.65 s once, then 10 ms to check."""
    if not sys.flags.dont_write_bytecode:
        return  # Python writes the bytecode of what it imports itself
    import compileall

    import peagle_deploy

    for folder in (Path(peagle_deploy.__file__).parent, Path(__file__).parent):
        if os.access(folder, os.W_OK):
            compileall.compile_dir(folder, quiet=2)


_compile_the_sources()
share_botocore_data()
check_every_request()  # every request body any test makes is checked against the service model strictly
try:  # peagle's shared botocore loader, warm: every in-process run starts from it (cli_runner restores it so)
    preload()
except Exception:  # noqa: BLE001 - e.g. a developer's AWS_PROFILE that does not exist: each run loads its own
    pass
share_command_tree()  # Typer's Click tree of peagle built once here, not at every in-process run


def pytest_configure(config):
    from . import cpu_budget

    config.pluginmanager.register(cpu_budget, "peagle-cpu-budget")  # each test's CPU budget (issue 48)


def pytest_sessionfinish(session, exitstatus):
    from .forked_peagle import stop

    stop()  # the fork server, if a test started it


@pytest.fixture(autouse=True)
def _own_price_cache(monkeypatch, tmp_path_factory):
    """Each test starts with no remembered SageMaker price: the in-process emulator (moto's mock_aws) looks like real
    AWS to pricing.py, whose cache would otherwise carry one test's emulated price into the next test (and into the
    user's ~/.cache). Its own XDG_CACHE_HOME (subprocesses inherit it), an empty in-memory memo and no Pricing
    client kept from another test's emulator."""
    from peagle_deploy import pricing

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path_factory.mktemp("xdg-cache")))
    monkeypatch.setattr(pricing, "_memo", {})
    monkeypatch.setattr(pricing, "_clients", {})


@pytest.fixture(autouse=True)
def _signal_state_kept():
    """A test leaves this process's signal handlers and mask as it found them: the processes later tests start
    inherit an ignored or blocked signal (a SIGINT test would then wait for a child that never sees it)."""
    watched = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR1, signal.SIGUSR2)

    def state():
        return [signal.getsignal(s) for s in watched], signal.pthread_sigmask(signal.SIG_BLOCK, [])

    before = state()
    yield
    assert state() == before, f"this test changed the suite's signal state: {before} -> {state()}"


@pytest.fixture(autouse=True)
def _no_peagle_left_running():
    """A `peagle` child (tests/peagle_process.py) still running when its test ends (the test failed before it
    finished) is killed: left alone it would go on and reach the next test's emulator gates."""
    yield
    import sys

    module = sys.modules.get(f"{__package__}.peagle_process")
    for child in list(module.RUNNING) if module else []:
        child.kill()


@pytest.fixture
def emu_server():
    """A SageMaker emulator in server mode (for subprocesses: `emu.env`), with no endpoints."""
    from peagle_deploy.testing import SageMakerEmulator

    with SageMakerEmulator.server() as emulator:
        yield emulator


@pytest.fixture
def emu_recorded():
    """A fresh SageMaker emulator server (this process's environment points at it) with `recorder`: a
    WriteRecorder of the calls each process made, by its AWS_SDK_UA_APP_ID."""
    from peagle_deploy.testing import SageMakerEmulator
    from peagle_deploy.testing.write_recorder import WriteRecorder

    recorder = WriteRecorder()
    with SageMakerEmulator.server(middlewares=[recorder.middleware]) as emulator:
        emulator.recorder = recorder
        yield emulator


@pytest.fixture
def emu_in_process():
    """A SageMaker emulator inside this process (moto's mock_aws)."""
    from peagle_deploy.testing import SageMakerEmulator

    with SageMakerEmulator.in_process() as emulator:
        yield emulator


@pytest.fixture
def no_aws(monkeypatch, tmp_path):
    """No credentials and no instance metadata: nothing may leave this machine, even where a developer
    has AWS credentials configured."""
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE", "AWS_ENDPOINT_URL",
                 "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI", "AWS_CONTAINER_CREDENTIALS_FULL_URI"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "no-credentials"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-config"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")


@pytest.fixture(scope="module")
def plain_plan():
    """qwen3-coder's deploy plan, offline (the shipped spec, the emulator's JumpStart bucket's): a stack to copy."""
    from peagle_deploy.plan import PlanRequest, build_plan

    return build_plan(PlanRequest(model="qwen3-coder", role="arn:aws:iam::123456789012:role/peagle-emulator", name="x",
                                  offline=True))


@pytest.fixture(scope="module")
def emulator_server():
    """One SageMakerEmulator server for a whole test module (starting one costs about a second), with
    `emulator_server.recorder`: a WriteRecorder of the writes each process made, by its AWS_SDK_UA_APP_ID.
    It does not set this process's environment: pass `emulator_server.env` to subprocesses (for an
    in-process client use `emu_server`). Module scope, not session: an emulator patches moto
    process-wide, and its scripted-status patches must not outlive its module."""
    from peagle_deploy.testing import SageMakerEmulator
    from peagle_deploy.testing.write_recorder import WriteRecorder

    recorder = WriteRecorder()
    with SageMakerEmulator.server(middlewares=[recorder.middleware], set_env=False) as emulator:
        emulator.recorder = recorder
        yield emulator


def emptied(emu):
    """`emu` (an emulator server) emptied: no resources, faults, throttling, delays, gates, recorded calls or
    runtime script; JumpStart seeded; new endpoints InService at once."""
    from peagle_deploy.testing.pricing_emulation import EMULATED_HOSTING_USD
    from peagle_deploy.testing.streaming import RuntimeScript

    emu.reset()
    emu._seed()
    emu._faults.clear()
    emu._gates.clear()
    emu._delays.clear()
    emu._throttle_every = 0
    emu.calls.clear()
    emu.runtime = RuntimeScript()
    emu.script_endpoints(creating_polls=0)
    emu.components.reset()
    emu.clock = time.time
    emu.hosting_prices = dict(EMULATED_HOSTING_USD)
    emu.reset_capacity()  # unlimited capacity, no quota, reservation or regional price; emulated time per describe
    return emu


@pytest.fixture
def emu(emulator_server):
    """The module's emulator server, emptied (`emptied`)."""
    emu = emptied(emulator_server)
    yield emu
    emu.release_gates()


@pytest.fixture
def clocked(emu, monkeypatch):
    """The emulator on a manual clock (hours of scale to zero in no time), and peagle's clocks on it: its wall
    clock (status's ages and costs, cleanup --expired) and, for a command run with `fake_clock=False`, its waits
    (`clock.sleep` advances the emulator's time, `clock.monotonic` reads it: peagle waking a component)."""
    from peagle_deploy import clock as peagle_clock
    from peagle_deploy.testing.component_emulation import ManualClock

    emu.clock = clock = ManualClock()
    monkeypatch.setattr(peagle_clock, "now", lambda: datetime.fromtimestamp(clock(), UTC))
    monkeypatch.setattr(peagle_clock, "sleep", clock.advance)
    monkeypatch.setattr(peagle_clock, "monotonic", clock)
    return clock
