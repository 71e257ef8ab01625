"""What the installed botocore's own data says, read without an AWS call: service models (a member, an enum, a
pattern) and partitions. One botocore session per process answers them all: a new session per question parsed its
data files again each time (a region's partition alone was half of a plan's CPU)."""

from __future__ import annotations

import functools
from typing import Any


@functools.cache
def data_session() -> Any:
    """The process's botocore session for data questions (never for a request: it holds no peagle settings)."""
    import botocore.session

    return botocore.session.get_session()


@functools.cache
def service_model(service: str) -> Any:
    """botocore's model of `service` (sagemaker, application-autoscaling, ...), built once: the session keeps the
    parsed file, but each model built from it costs again."""
    return data_session().get_service_model(service)
