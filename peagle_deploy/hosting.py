"""The names both hosting shapes of a plan share (plan.py's classic endpoint, plan_component.py's inference
component): a module of its own so that plan_component need not import plan, which lists its functions."""

from __future__ import annotations

from enum import StrEnum

VARIANT_NAME = "AllTraffic"  # the one production variant peagle deploys
TP_ENV = "SM_VLLM_TENSOR_PARALLEL_SIZE"  # the GPUs vLLM shards the model over (tensor parallel degree)


class Hosting(StrEnum):
    """How SageMaker hosts the model. `endpoint`: an endpoint config whose one production variant runs the model
    on whole instances. `component`: the endpoint's variant holds instances only, and the model runs on them as an
    inference component (copies), which can scale to zero (plan_component.py, docs/hosting.md)."""

    ENDPOINT = "endpoint"
    COMPONENT = "component"
