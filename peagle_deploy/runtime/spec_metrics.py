"""Per-request acceptance, as vLLM 0.29+ returns it: `metrics.speculative_decoding` in a response.

With `--per-request-spec-decode-metrics summary` (container/args.py turns it on) vLLM puts it in each answer's
top-level `metrics` (a chat completion's body, an InvokeEndpoint body, the same through SageMaker's OpenAI route),
and in a stream in the final usage chunk (`stream_options.include_usage`), for n == 1 only. Fields as vLLM 0.32.0's
`SpeculativeDecodingMetrics` (vllm/entrypoints/generate/base/protocol.py, filled by RequestSpecDecodeMetrics.to_dict
in vllm/v1/metrics/stats.py):
- `acceptance_histogram[j]`: verification steps that accepted exactly j draft tokens (length K + 1; the bonus token
  is not counted);
- `num_spec_steps`: steps (= sum of the histogram), `num_accepted_draft_tokens` (= sum of j x steps),
  `num_draft_tokens` (proposed, less those a grammar invalidated), `num_spec_tokens` (K);
- `mean_acceptance_length` = 1 + accepted / steps (1.0 for a request with no step), `draft_acceptance_rate` =
  accepted / drafted.
The steps are the per-request counterpart of vLLM's `vllm:spec_decode_num_drafts` counter, counted in the same
scheduler loop, so over the same requests the two agree.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError


class RequestAcceptance(BaseModel):
    """One answer's `metrics.speculative_decoding` (extra fields, such as `detailed`'s per-step arrays, kept)."""

    model_config = ConfigDict(extra="allow")

    mean_acceptance_length: float
    draft_acceptance_rate: float
    acceptance_histogram: list[int]
    num_spec_steps: int
    num_accepted_draft_tokens: int
    num_draft_tokens: int
    num_spec_tokens: int

    def describe(self) -> str:
        if not self.num_spec_steps:
            return f"no verification step (K={self.num_spec_tokens})"
        return (f"mean acceptance length {self.mean_acceptance_length:.2f} over {self.num_spec_steps} steps "
                f"(K={self.num_spec_tokens}, accepted {self.num_accepted_draft_tokens} of {self.num_draft_tokens} "
                f"drafted, steps by accepted drafts {self.acceptance_histogram})")


def raw_spec_metrics(body: Any) -> dict[str, Any] | None:
    """The `metrics.speculative_decoding` object of a response or usage chunk, as sent (None when absent)."""
    metrics = body.get("metrics") if isinstance(body, dict) else None
    found = metrics.get("speculative_decoding") if isinstance(metrics, dict) else None
    return found if isinstance(found, dict) else None


def parse_spec_metrics(raw: dict[str, Any] | None) -> RequestAcceptance | None:
    """The parsed object, or None when absent or not vLLM's shape (an unknown server's `metrics` is not ours)."""
    if raw is None:
        return None
    try:
        return RequestAcceptance.model_validate(raw)
    except ValidationError:
        return None
