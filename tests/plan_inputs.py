"""ResolvedSpec inputs for plan tests, on the shape of the real gpt-oss-20b lmi-optimized config."""

from __future__ import annotations

import json

from peagle_deploy.spec import ResolvedSpec, S3DataSource

SPEC_DEFAULT_SPECULATIVE = json.dumps({
    "model": "/opt/ml/additional-model-data-sources/eagle", "method": "eagle3",
    "num_speculative_tokens": 3, "parallel_drafting": True,
})


def resolved_spec(model_id: str = "huggingface-llm-qwen3-coder-30b-a3b-instruct", *, region: str = "us-east-1",
                  instance_type: str | None = None, gated: bool = False, drafter: bool = True,
                  supported: tuple[str, ...] = ("ml.g7e.2xlarge", "ml.g7e.12xlarge", "ml.p5.48xlarge"),
                  **_: object) -> ResolvedSpec:
    return ResolvedSpec(
        model_id=model_id,
        version="1.0.0",
        region=region,
        instance_type=instance_type or "ml.g7e.2xlarge",
        inference_config="lmi-optimized",
        image_uri=f"763104351884.dkr.ecr.{region}.amazonaws.com/vllm:0.18.0-gpu-py312-cu129-ubuntu22.04-sagemaker",
        model_data=S3DataSource(S3Uri=f"s3://jumpstart-cache-prod-{region}/{model_id}/artifacts/inference/v1.0.0/"),
        drafter=S3DataSource(S3Uri=f"s3://jumpstart-cache-prod-{region}/lmi-eagle-heads/models/{model_id}-p-eagle/")
        if drafter else None,
        environment={
            "HF_MODEL_ID": "/opt/ml/model",
            "SM_VLLM_MAX_MODEL_LEN": "8192",
            "SM_VLLM_SPECULATIVE_CONFIG": SPEC_DEFAULT_SPECULATIVE,
            "SM_VLLM_TENSOR_PARALLEL_SIZE": "1",
        },
        supported_instance_types=list(supported),
        default_instance_type="ml.g7e.2xlarge",
        gated=gated,
        source="shipped",
        source_detail="test input",
    )


def resolver_for(**overrides):
    """A resolver returning resolved_spec(...) and recording its calls."""
    calls = []

    def resolve(model_id, **kwargs):
        calls.append((model_id, kwargs))
        merged = {**kwargs, **overrides}
        return resolved_spec(model_id, **merged)

    resolve.calls = calls
    return resolve
