"""SageMaker's container paths mapped to directories on this machine.

SageMaker mounts the model data at /opt/ml/model and each extra data channel at
/opt/ml/additional-model-data-sources/<channel>. Docker can mount them there; a process on the host
cannot, so the environment's references to those paths are rewritten to the local directories (and
the entrypoint is told where the model is with PEAGLE_MODEL_DIR and which port to use with PEAGLE_PORT).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from ..container.args import MODEL_DIR, MODEL_DIR_ENV, PORT, PORT_ENV

CHANNEL_ROOT = "/opt/ml/additional-model-data-sources"
HOST_ENV = "SM_VLLM_HOST"


def channel_path(channel: str) -> str:
    return f"{CHANNEL_ROOT}/{channel}"


class Mounts(BaseModel):
    """Local directories standing in for SageMaker's model data and data channels."""

    model_config = ConfigDict(frozen=True)

    model: Path
    channels: dict[str, Path] = {}

    def pairs(self) -> list[tuple[str, Path]]:
        """(container path, local directory), longest container path first so prefixes never shadow."""
        pairs = [(MODEL_DIR, self.model), *((channel_path(c), p) for c, p in self.channels.items())]
        return sorted(pairs, key=lambda pair: len(pair[0]), reverse=True)


def _pattern(container_path: str) -> re.Pattern[str]:
    # the path as a whole path component: not /opt/ml/model2, not /x/opt/ml/model
    return re.compile(r"(?<![\w./-])" + re.escape(container_path) + r"(?=$|[/\"'\s,;:}\]])")


def map_value(value: str, mounts: Mounts) -> str:
    for container_path, local in mounts.pairs():
        value = _pattern(container_path).sub(lambda _m, p=str(local): p, value)
    return value


def host_environment(env: Mapping[str, str], mounts: Mounts, port: int | None = None,
                     host: str | None = "127.0.0.1") -> dict[str, str]:
    """The container's environment for a process on this machine: paths rewritten, model dir and port set,
    and vLLM bound to loopback (`--host`; SageMaker's network is private, a developer's machine is not)."""
    mapped = {key: map_value(value, mounts) for key, value in env.items()}
    mapped[MODEL_DIR_ENV] = str(mounts.model)
    mapped[PORT_ENV] = str(port if port is not None else PORT)
    if host and HOST_ENV not in mapped:
        mapped[HOST_ENV] = host
    return mapped


def docker_volumes(mounts: Mounts) -> list[str]:
    """`-v` values: each local directory read-only at the path SageMaker would mount it."""
    return [f"{local.resolve()}:{container_path}:ro" for container_path, local in reversed(mounts.pairs())]
