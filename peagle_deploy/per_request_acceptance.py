"""Per-request acceptance at plan time: turned on for an image whose vLLM answers with it, said where it cannot be.

vLLM 0.29 added `--per-request-spec-decode-metrics summary|detailed`: each answer then carries
`metrics.speculative_decoding` (mean acceptance length, draft acceptance rate, the histogram of accepted drafts per
verification step; n == 1 only; in the final usage chunk of a stream). A plan knows the image's vLLM from its tag only
(vllm_runner.image_vllm_version): from 0.29 on it sets SM_VLLM_PER_REQUEST_SPEC_DECODE_METRICS=summary with
speculation on (vLLM refuses the flag without speculation); before 0.29 (JumpStart's P-EAGLE images run 0.18, AWS's
vLLM images reach 0.28) vLLM would refuse the flag, so it stays off and the plan says so; an image whose tag names no
vLLM is left alone (peagle's bundled container turns it on itself where its vLLM has it: container/args.py).
The user's own --env value always wins.
"""

from __future__ import annotations

from .container.args import PER_REQUEST_ENV
from .container.vllm_version import PER_REQUEST_SPEC_METRICS_SINCE, has_per_request_spec_metrics
from .vllm_runner import image_vllm_version

SINCE = ".".join(map(str, PER_REQUEST_SPEC_METRICS_SINCE))


def per_request_env(image_uri: str, speculative: bool, user_env: dict[str, str]) -> dict[str, str]:
    """What the plan adds to the container environment (nothing unless the image's vLLM has the flag). A user's
    --env value vLLM would refuse at start-up (without speculation, or a vLLM before 0.29) is refused here."""
    version = image_vllm_version(image_uri)
    has_flag = has_per_request_spec_metrics(version)
    given = user_env.get(PER_REQUEST_ENV)
    if given is not None and given.strip().lower() not in ("none", "false"):
        from .errors import UsageError

        if not speculative:
            raise UsageError(f"--env {PER_REQUEST_ENV} needs speculative decoding (vLLM refuses to start with it "
                             "and no speculative config)", "drop it, or choose --mode p-eagle or eagle3")
        if has_flag is False:
            raise UsageError(f"--env {PER_REQUEST_ENV} needs vLLM {SINCE} or later, and the image runs vLLM {version} "
                             "(it would refuse the flag and not start)",
                             f"drop it, or pass --image with vLLM {SINCE} or later")
    if not speculative or given is not None:
        return {}
    return {PER_REQUEST_ENV: "summary"} if has_flag else {}


def per_request_note(image_uri: str, environment: dict[str, str]) -> str:
    """One plan line: whether answers will carry per-request acceptance, and why."""
    version = image_vllm_version(image_uri)
    value = environment.get(PER_REQUEST_ENV)
    if value is not None:
        state = "off" if value.strip().lower() in ("none", "false") else "on"
        return (f"per-request acceptance {state} ({PER_REQUEST_ENV}={value}): each answer carries vLLM's "
                "metrics.speculative_decoding, which peagle bench and invoke --json report beside the aggregate"
                if state == "on" else f"per-request acceptance off ({PER_REQUEST_ENV}={value})")
    if version is None:
        return ("per-request acceptance: not set by the plan, the image's tag names no vLLM version (peagle's "
                f"bundled container turns it on itself with a vLLM from {SINCE}); bench reports the aggregate "
                "acceptance, and the per-request one where answers carry it")
    return (f"per-request acceptance off: the image's vLLM {version} predates --per-request-spec-decode-metrics "
            f"(vLLM {SINCE}); bench reports the aggregate acceptance only (CloudWatch Logs)")
