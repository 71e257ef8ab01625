"""Container tier: the project's image under a real engine (Podman here), real vLLM inside, started as SageMaker
starts it: `IMAGE serve`, the tiny target at /opt/ml/model and the drafter at
/opt/ml/additional-model-data-sources/eagle (read-only), the SM_VLLM_* environment of peagle's qwen3-coder plan.

Run it with `bash .ci/container-tier.sh`, which builds the images and sets PEAGLE_TEST_IMAGE,
PEAGLE_TEST_IMAGE_NONROOT, PEAGLE_ENGINE and PEAGLE_ENGINE_OPTIONS. A missing image or engine is an error here,
never a skip: this tier must not pass without running.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from peagle_deploy.local import engine as engine_mod
from peagle_deploy.local.engine import Engine
from peagle_deploy.local.mounts import Mounts

BIN = Path(sys.executable).parent
PEAGLE = BIN / "peagle"
START_TIMEOUT_S = float(os.environ.get("PEAGLE_VLLM_START_TIMEOUT", "600"))
STOP_GRACE_S = 30  # SageMaker's and `docker stop`'s default: SIGTERM, then SIGKILL 30 s later
MODEL_ALIAS = "qwen3-coder"
K = 3
MAX_MODEL_LEN = "512"
# runtime settings for a CPU container (not part of the model's Environment)
RUNTIME_ENV = {"HF_HUB_OFFLINE": "1", "VLLM_NO_USAGE_STATS": "1", "VLLM_CPU_KVCACHE_SPACE": "1",
               "TOKENIZERS_PARALLELISM": "false", "DO_NOT_TRACK": "1", "VLLM_LOG_STATS_INTERVAL": "1"}
PLAN_ENV = {"SM_VLLM_MAX_MODEL_LEN": MAX_MODEL_LEN, "SM_VLLM_ENFORCE_EAGER": "true"}
LOG_TAIL_LINES = 60


def record(what: str, seconds: float) -> None:
    """A timing for the tier's summary (.ci/container-tier.sh prints $PEAGLE_TIER_TIMINGS at the end)."""
    path = os.environ.get("PEAGLE_TIER_TIMINGS")
    if path:
        with open(path, "a", encoding="utf-8") as handle:
            handle.write(f"{what}: {seconds:.1f} s\n")


def _required(variable: str) -> str:
    value = os.environ.get(variable)
    if not value:
        pytest.fail(f"${variable} is not set: run the tier with `bash .ci/container-tier.sh`", pytrace=False)
    return value


@pytest.fixture(scope="session")
def engine() -> Engine:
    try:
        found = engine_mod.find_engine()
    except Exception as exc:  # noqa: BLE001 - UsageError's one line is the reason
        pytest.fail(f"no container engine: {exc}", pytrace=False)
    if not os.access(PEAGLE, os.X_OK):
        pytest.fail(f"no peagle executable at {PEAGLE}", pytrace=False)
    return found


def _image(engine: Engine, variable: str) -> str:
    image = _required(variable)
    if subprocess.run(engine.command("image", "exists", image), timeout=60).returncode != 0:
        pytest.fail(f"image {image} (${variable}) does not exist in {engine.describe()}", pytrace=False)
    return image


@pytest.fixture(scope="session")
def image(engine) -> str:
    return _image(engine, "PEAGLE_TEST_IMAGE")


@pytest.fixture(scope="session")
def image_nonroot(engine) -> str:
    return _image(engine, "PEAGLE_TEST_IMAGE_NONROOT")


@pytest.fixture(scope="session")
def tiny(tmp_path_factory):
    """The tiny target and drafter, world-readable (the RUN_AS=peagle image reads them as uid 1000)."""
    from peagle_deploy.testing.tiny_models import build_tiny_models

    models = build_tiny_models(tmp_path_factory.mktemp("tiny"))
    for root in (models.target, models.drafter):
        for path in [root, *root.rglob("*")]:
            path.chmod(0o755 if path.is_dir() else 0o644)
    return models


def plan_environment(mode: str = "p-eagle", k: int | None = K) -> dict[str, str]:
    """The CreateModel Environment `peagle deploy qwen3-coder --mode MODE --k K` would send (offline specs)."""
    from peagle_deploy.plan import PlanRequest, build_plan

    request = PlanRequest(model=MODEL_ALIAS, mode=mode, k=k if mode != "off" else None, offline=True, env=PLAN_ENV)
    return dict(build_plan(request).create_model["PrimaryContainer"]["Environment"])


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def engine_run(engine: Engine, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(engine.command(*args), capture_output=True, text=True, timeout=timeout)


def containers(engine: Engine, prefix: str) -> list[str]:
    """Names of every container (running or not) whose name starts with prefix."""
    listed = engine_run(engine, "ps", "--all", "--format", "{{.Names}}")
    assert listed.returncode == 0, listed.stderr
    return [n for n in listed.stdout.split() if n.startswith(prefix)]


@dataclass
class ImageServer:
    """`ENGINE run --rm IMAGE serve` in the foreground (its output to a log file), as SageMaker starts it."""

    engine: Engine
    image: str
    environment: dict[str, str]
    mounts: Mounts
    log_path: Path
    name: str
    port: int = field(default_factory=free_port)
    proc: subprocess.Popen | None = None
    started_s: float | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> ImageServer:
        run = engine_mod.run_command(self.engine, self.image, self.environment, self.mounts, port=self.port,
                                     container=self.name, gpus=None, detach=False, extra_env=RUNTIME_ENV)
        self._log = open(self.log_path, "wb")
        self.proc = subprocess.Popen(run.argv, env=run.client_env(), stdout=self._log, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL, start_new_session=True)
        return self

    def wait_ready(self, timeout_s: float = START_TIMEOUT_S) -> ImageServer:
        from peagle_deploy.local.process import wait_ready

        began = time.monotonic()
        outcome = wait_ready(self.port, lambda: self.proc.poll() is not None, timeout_s=timeout_s)
        if outcome == "ready":
            self.started_s = time.monotonic() - began
            return self
        if outcome == "exited":
            pytest.fail(f"the container exited with {self.proc.returncode} while starting:\n{self.log_tail()}",
                        pytrace=False)
        self.stop()
        pytest.fail(f"no answer on /ping after {timeout_s:.0f} s:\n{self.log_tail()}", pytrace=False)

    def stop(self, grace_s: int = STOP_GRACE_S) -> tuple[int | None, float]:
        """`ENGINE stop -t grace_s` (SIGTERM, SIGKILL after the grace period): (exit code, seconds it took)."""
        began = time.monotonic()
        code = None
        if self.proc is not None and self.proc.poll() is None:
            engine_mod.stop(self.engine, self.name, grace_s=grace_s)
            try:
                code = self.proc.wait(timeout=grace_s + 60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                code = self.proc.wait(timeout=30)
        elif self.proc is not None:
            code = self.proc.returncode
        if engine_mod.exists(self.engine, self.name):
            engine_mod.remove(self.engine, self.name)
        if getattr(self, "_log", None) is not None:
            self._log.close()
        return code, time.monotonic() - began

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def log_tail(self, lines: int = LOG_TAIL_LINES) -> str:
        return "\n".join(self.log().splitlines()[-lines:])

    def metrics_text(self) -> str:
        with urllib.request.urlopen(self.url + "/metrics", timeout=30) as answer:
            return answer.read().decode()


def tiny_mounts(tiny, drafter: bool = True) -> Mounts:
    return Mounts(model=tiny.target, channels={"eagle": tiny.drafter} if drafter else {})


@dataclass
class Run:
    code: int
    stdout: str
    stderr: str

    def json(self):
        return json.loads(self.stdout)


def peagle(*args: str, env: dict[str, str] | None = None, timeout_s: float = 600) -> Run:
    """The installed `peagle` executable, as a user runs it (COLUMNS unset, not a terminal)."""
    full = {k: v for k, v in (env or os.environ).items() if k != "COLUMNS"}
    full.setdefault("NO_COLOR", "1")
    out = subprocess.run([str(PEAGLE), *args], capture_output=True, text=True, timeout=timeout_s, env=full,
                         stdin=subprocess.DEVNULL)
    return Run(out.returncode, out.stdout, out.stderr)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    report = yield
    if report.failed:
        for value in (getattr(item, "funcargs", None) or {}).values():
            if isinstance(value, ImageServer):
                report.sections.append((f"container log (last {LOG_TAIL_LINES} lines)", value.log_tail()))
    return report
