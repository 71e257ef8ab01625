"""Instance facts and list prices, from templates/instances.toml."""

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
    price_per_hour_usd: float = Field(gt=0)


class InstanceTable(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    price_source: str
    instances: dict[str, InstanceInfo]


@cache
def instance_table() -> InstanceTable:
    path = templates_dir() / "instances.toml"
    return InstanceTable.model_validate(tomllib.loads(path.read_text(encoding="utf-8")))


def instance_info(instance_type: str) -> InstanceInfo | None:
    """Facts for a known instance type, None for types peagle has no data on."""
    return instance_table().instances.get(instance_type)


def hourly_price(instance_type: str, count: int = 1) -> float | None:
    info = instance_info(instance_type)
    return None if info is None else round(info.price_per_hour_usd * count, 4)
