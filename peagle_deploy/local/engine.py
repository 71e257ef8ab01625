"""The container engine behind `peagle local --docker` and the emulator's image backend: Docker or Podman.

Only the engines' command lines are used (no SDK). The engine is `--engine docker|podman` or $PEAGLE_ENGINE,
else the first of docker, podman on PATH whose `info` answers. The settings a machine needs come through ONE
string, `--engine-options` or $PEAGLE_ENGINE_OPTIONS, written as around `run` on the engine's own command line:
options before the word `run` go to every engine command (podman's global `--runtime runc --cgroup-manager
cgroupfs`), options after it to `run` only (`--ulimit ...`, `--network host`), e.g.

    PEAGLE_ENGINE_OPTIONS='--runtime runc --cgroup-manager cgroupfs run --network host --ulimit nofile=1024:1024'

With host networking nothing is published: the container's vLLM binds the chosen port on 127.0.0.1 itself.
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
from collections.abc import Mapping
from typing import NamedTuple

from pydantic import BaseModel, ConfigDict

from ..container.args import PORT, PORT_ENV
from ..errors import UsageError
from .mounts import HOST_ENV, Mounts, docker_volumes

ENGINES = ("docker", "podman")
ENGINE_ENV = "PEAGLE_ENGINE"
OPTIONS_ENV = "PEAGLE_ENGINE_OPTIONS"
# vLLM's multiprocess engine needs more shared memory than the engines' 64 MB /dev/shm (it refuses to start:
# "Insufficient space in /dev/shm"); a tmpfs size is a cap, not an allocation. `run --shm-size`/`--ipc` in the
# engine options replace it.
SHM_SIZE = "8g"
_VERSION_FORMAT = {"docker": "{{.ServerVersion}}", "podman": "{{.Version.Version}}"}
_HOST_NETWORK = {("--network", "host"), ("--net", "host"), ("--network=host",), ("--net=host",)}


class Engine(BaseModel):
    """One engine and its settings; `command(...)` is the argv of one engine command."""

    model_config = ConfigDict(frozen=True)

    name: str
    global_options: list[str] = []
    run_options: list[str] = []

    def command(self, *args: str) -> list[str]:
        return [self.name, *self.global_options, *args]

    @property
    def host_network(self) -> bool:
        options = self.run_options
        pairs = {tuple(options[i:i + 2]) for i in range(len(options))} | {(o,) for o in options}
        return bool(pairs & _HOST_NETWORK)

    def describe(self) -> str:
        return shlex.join(self.command())


def parse_options(text: str | None) -> tuple[list[str], list[str]]:
    """'GLOBAL... [run RUN...]' -> (global options, run options)."""
    try:
        words = shlex.split(text or "")
    except ValueError as exc:
        raise UsageError(f"--engine-options / ${OPTIONS_ENV} is not valid shell quoting ({exc})",
                         "quote it as on a command line, e.g. '--runtime runc run --network host'") from None
    if "run" in words:
        at = words.index("run")
        return words[:at], words[at + 1:]
    return words, []


def _ask(engine: Engine, runner) -> str | None:
    """None when the engine answers `info`; else the first line of why not."""
    try:
        answer = runner(engine.command("info", "--format", _VERSION_FORMAT[engine.name]), capture_output=True,
                        text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"'{engine.name} info' failed ({type(exc).__name__})"
    if answer.returncode != 0:
        lines = (answer.stderr or answer.stdout or "no output").strip().splitlines() or ["no output"]
        return lines[-1].strip()
    return None


def find_engine(requested: str | None = None, options: str | None = None, *, environ: Mapping[str, str] | None = None,
                runner=subprocess.run, which=shutil.which) -> Engine:
    """The engine to use (it answered `info`), or UsageError (exit 2) naming the fix. Without a request, the
    first of docker, podman on PATH that answers."""
    environ = os.environ if environ is None else environ
    chosen = named_engine(requested, options, environ=environ, which=which)
    requested = requested or environ.get(ENGINE_ENV) or None
    candidates = [requested] if requested else [name for name in ENGINES if which(name)]
    if not candidates or not which(candidates[0]):
        missing = requested or " or ".join(ENGINES)
        raise UsageError(f"--docker needs the {missing} command, which is not on PATH",
                         "install Docker or Podman, or run without --docker (vLLM from this Python environment)")
    reasons = []
    for name in candidates:
        engine = chosen.model_copy(update={"name": name})
        reason = _ask(engine, runner)
        if reason is None:
            return engine
        reasons.append(f"{engine.describe()}: {reason}")
    raise UsageError(f"--docker: no container engine answers ({'; '.join(reasons)})",
                     f"start the engine, pick one with --engine, or give its settings in ${OPTIONS_ENV} "
                     "(docs/local.md)")


def named_engine(requested: str | None = None, options: str | None = None, *,
                 environ: Mapping[str, str] | None = None, which=shutil.which) -> Engine:
    """The engine a start would use, without asking it anything (for --dry-run): the requested one, else the
    first on PATH, else docker."""
    environ = os.environ if environ is None else environ
    requested = requested or environ.get(ENGINE_ENV) or None
    if requested is not None and requested not in ENGINES:
        raise UsageError(f"--engine {requested!r} is not one of {', '.join(ENGINES)}",
                         f"pass --engine docker or --engine podman (or set ${ENGINE_ENV})")
    global_options, run_options = parse_options(options if options is not None else environ.get(OPTIONS_ENV))
    name = requested or next((n for n in ENGINES if which(n)), ENGINES[0])
    return Engine(name=name, global_options=global_options, run_options=run_options)


def container_name(name: str) -> str:
    return f"peagle-local-{name}"


def container_environment(environment: Mapping[str, str], engine: Engine, port: int) -> dict[str, str]:
    """The environment as SageMaker sets it; with host networking vLLM also binds `port` on loopback."""
    env = dict(environment)
    if engine.host_network:
        env[PORT_ENV] = str(port)
        env.setdefault(HOST_ENV, "127.0.0.1")
    return env


def gpu_options(engine: Engine, gpus: str | None) -> list[str]:
    """Docker's `--gpus VALUE`; Podman has no --gpus and reaches NVIDIA GPUs through CDI devices
    (`--device nvidia.com/gpu=all`, after `nvidia-ctk cdi generate`)."""
    if not gpus:
        return []
    if engine.name != "podman":
        return ["--gpus", gpus]
    value = gpus.strip().strip('"')
    if value == "all":
        return ["--device", "nvidia.com/gpu=all"]
    if value.startswith("device="):
        return [arg for gpu in value[len("device="):].split(",") if gpu for arg in ("--device", f"nvidia.com/gpu={gpu}")]
    raise UsageError(f"--gpus {gpus!r} has no Podman equivalent (Podman selects GPUs as CDI devices)",
                     "pass --gpus all, --gpus device=0,1 or --gpus none")


class RunCommand(NamedTuple):
    """`argv` names each variable (`--env KEY`); the values travel in the engine client's own environment
    (`client_env`), as `docker run --env KEY` reads them, so no value shows on a command line (`ps`)."""

    argv: list[str]
    env: dict[str, str]

    def client_env(self, base: Mapping[str, str] | None = None) -> dict[str, str]:
        return {**(os.environ if base is None else base), **self.env}


def run_command(engine: Engine, image: str, environment: Mapping[str, str], mounts: Mounts, *, port: int,
                container: str, gpus: str | None = "all", detach: bool = True,
                extra_env: Mapping[str, str] | None = None) -> RunCommand:
    """`ENGINE run ... IMAGE serve` (SageMaker's command): the host port to 8080 (or host networking), both
    directories read-only where SageMaker mounts them, every variable. `extra_env` (runtime settings that are
    not the model's Environment) goes after it."""
    argv = engine.command("run", *(["--detach"] if detach else ["--rm"]), "--name", container, *engine.run_options)
    if not engine.host_network:
        argv += ["--publish", f"127.0.0.1:{port}:{PORT}"]
    if not any(option.startswith(("--shm-size", "--ipc")) for option in engine.run_options):
        argv += ["--shm-size", SHM_SIZE]
    argv += gpu_options(engine, gpus)
    for volume in docker_volumes(mounts):
        argv += ["--volume", volume]
    env = {**container_environment(environment, engine, port), **(extra_env or {})}
    for key in sorted(env):
        argv += ["--env", key]
    return RunCommand([*argv, image, "serve"], env)


def running(engine: Engine, container_id: str, runner=subprocess.run) -> bool:
    answer = runner(engine.command("container", "inspect", "--format", "{{.State.Running}}", container_id),
                    capture_output=True, text=True, timeout=60)
    return answer.returncode == 0 and answer.stdout.strip() == "true"


def exists(engine: Engine, container_id: str, runner=subprocess.run) -> bool:
    answer = runner(engine.command("container", "inspect", "--format", "{{.Id}}", container_id),
                    capture_output=True, text=True, timeout=60)
    return answer.returncode == 0


def logs(engine: Engine, container_id: str, runner=subprocess.run) -> list[str]:
    answer = runner(engine.command("logs", "--tail", "2000", container_id), capture_output=True, text=True,
                    timeout=60)
    return (answer.stdout + answer.stderr).splitlines()


def stop(engine: Engine, container_id: str, grace_s: int = 30, runner=subprocess.run) -> None:
    """SIGTERM, SIGKILL after `grace_s` (the engine's `stop -t`)."""
    runner(engine.command("stop", "-t", str(grace_s), container_id), capture_output=True, text=True,
           timeout=grace_s + 60)


def remove(engine: Engine, container_id: str, runner=subprocess.run) -> None:
    stop(engine, container_id, runner=runner)
    runner(engine.command("rm", "--force", container_id), capture_output=True, text=True, timeout=60)
