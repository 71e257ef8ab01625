"""`peagle local --docker`: the same environment in a container, mounted where SageMaker mounts it.

Only the `docker` command line is used (no Docker SDK). Without a running engine peagle refuses in
one line before anything starts.
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Mapping

from ..container.args import PORT
from ..errors import UsageError
from .mounts import Mounts, docker_volumes


def container_name(name: str) -> str:
    return f"peagle-local-{name}"


def run_command(image: str, environment: Mapping[str, str], mounts: Mounts, *, port: int, name: str,
                gpus: str | None = "all") -> list[str]:
    """`docker run` argv: detached, the host port to 8080, both directories read-only, every variable."""
    argv = ["docker", "run", "--detach", "--name", container_name(name), "--publish", f"127.0.0.1:{port}:{PORT}"]
    if gpus:
        argv += ["--gpus", gpus]
    for volume in docker_volumes(mounts):
        argv += ["--volume", volume]
    for key in sorted(environment):
        argv += ["--env", f"{key}={environment[key]}"]
    return [*argv, image]


def require_engine(runner=subprocess.run) -> str:
    """The docker executable's path when an engine answers `docker info`; else UsageError (exit 2)."""
    docker = shutil.which("docker")
    if docker is None:
        raise UsageError("--docker needs the docker command, which is not on PATH",
                         "install Docker, or run without --docker (vLLM from this Python environment)")
    try:
        answer = runner([docker, "info", "--format", "{{.ServerVersion}}"], capture_output=True, text=True,
                        timeout=30)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise UsageError(f"--docker: 'docker info' failed ({type(exc).__name__})",
                         "start the Docker engine, or run without --docker") from None
    if answer.returncode != 0:
        first = (answer.stderr or answer.stdout or "no output").strip().splitlines()[0]
        raise UsageError(f"--docker: no Docker engine answers ({first})",
                         "start the Docker engine, or run without --docker")
    return docker


def running(container_id: str, runner=subprocess.run) -> bool:
    answer = runner(["docker", "inspect", "--format", "{{.State.Running}}", container_id],
                    capture_output=True, text=True, timeout=30)
    return answer.returncode == 0 and answer.stdout.strip() == "true"


def logs(container_id: str, runner=subprocess.run) -> list[str]:
    answer = runner(["docker", "logs", "--tail", "2000", container_id], capture_output=True, text=True, timeout=60)
    return (answer.stdout + answer.stderr).splitlines()


def remove(container_id: str, runner=subprocess.run) -> None:
    runner(["docker", "stop", "--time", "30", container_id], capture_output=True, text=True, timeout=90)
    runner(["docker", "rm", "--force", container_id], capture_output=True, text=True, timeout=60)
