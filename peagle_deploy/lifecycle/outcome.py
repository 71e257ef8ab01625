"""What one delete did (endpoint, config, model, scalable target, scaling policy, inference component, alarm, metric filter):
teardown's and autoscaling's
common answer, in a module of its own so neither has to import the other for it."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

OutcomeKind = Literal["endpoint", "endpoint_config", "model", "scalable_target", "scaling_policy",
                      "inference_component", "alarm", "metric_filter"]


class Outcome(BaseModel):
    kind: OutcomeKind
    name: str
    result: Literal["deleted", "already gone", "left", "failed"]
    reason: str = ""
    exit_code: int | None = Field(default=None, exclude=True)
