"""Instance facts (GPUs, memory), from templates/instances.toml: the one list of ml.g7e sizes. The emulator's
prices (testing/pricing_emulation.py) and the shipped JumpStart specs (tools/make_shipped_specs.py) follow it, and
tests/test_instances.py checks that they do. Prices: peagle_deploy/pricing.py."""

from __future__ import annotations

import tomllib
from functools import cache

from pydantic import BaseModel, ConfigDict, Field

from .resources import templates_dir

G7E_PREFIX = "ml.g7e."


class InstanceInfo(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    gpus: int = Field(gt=0)
    gpu_memory_gb: int = Field(gt=0)
    vcpus: int = Field(gt=0)
    memory_gib: int = Field(gt=0)


class InstanceTable(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    instances: dict[str, InstanceInfo]


@cache
def instance_table() -> InstanceTable:
    path = templates_dir() / "instances.toml"
    return InstanceTable.model_validate(tomllib.loads(path.read_text(encoding="utf-8")))


def instance_info(instance_type: str) -> InstanceInfo | None:
    """Facts for a known instance type, None for types peagle has no data on."""
    return instance_table().instances.get(instance_type)
