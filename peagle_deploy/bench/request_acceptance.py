"""Acceptance per request: the distribution of vLLM's per-answer `metrics.speculative_decoding` over a run.

Where the server returns it (vLLM 0.29+ with --per-request-spec-decode-metrics: runtime/spec_metrics.py), each
measured answer that completed is folded in as it ends, in constant memory: sums, the summed histogram of accepted
drafts per verification step, and each request's mean acceptance length (bench.stats.LatencySamples: exact, then an
HDR histogram) for its p10/p50/p90. Two figures come out, each named by its source:
- the run's mean acceptance length WEIGHTED BY DRAFTS, 1 + sum(accepted) / sum(steps): the same quantity vLLM's
  counters give (`vllm:spec_decode_num_drafts` counts the same steps in the same scheduler loop), so it is set beside
  the aggregate acceptance (/metrics or CloudWatch Logs) with their difference;
- the distribution over requests (each request once, whatever its length): a fleet whose mean hides a tail of
  requests that accept nothing shows it here.
An answer that carried the metrics with no verification step (vLLM reports 1.0 for it) is counted apart, not in the
distribution. Warm-up, failed and cut requests are left out, as from every other figure.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from ..runtime.spec_metrics import parse_spec_metrics
from .stats import LatencySamples

SOURCE = "each answer's metrics.speculative_decoding (vLLM --per-request-spec-decode-metrics)"
PERCENTS = (10, 50, 90)


class LengthDistribution(BaseModel):
    """Per-request mean acceptance lengths: one value per request."""

    model_config = ConfigDict(extra="forbid")

    count: int
    mean: float
    p10: float
    p50: float
    p90: float
    min: float
    max: float


class RequestAcceptanceSummary(BaseModel):
    model_config = ConfigDict(extra="forbid")

    source: str = SOURCE
    requests: int = Field(description="measured answers that carried it")
    requests_without: int = Field(0, description="measured answers that completed without it (n > 1, a vLLM before "
                                                 "0.29, the flag off)")
    requests_without_steps: int = Field(0, description="answers with no verification step: not in `distribution`")
    k: int | None = None
    steps: int = Field(0, description="verification steps (vLLM's drafts), summed")
    accepted_tokens: int = 0
    draft_tokens: int = 0
    mean_acceptance_length: float | None = Field(None, description="weighted by drafts: 1 + accepted / steps")
    acceptance_rate: float | None = Field(None, description="accepted / drafted draft tokens")
    distribution: LengthDistribution | None = Field(None, description="of each request's mean acceptance length")
    histogram: list[int] = Field(default_factory=list, description="steps that accepted exactly j drafts, j = 0..K")
    histogram_share: list[float] = Field(default_factory=list)
    aggregate_mean_acceptance_length: float | None = Field(None, description="the run's aggregate, for comparison")
    aggregate_source: str | None = None
    difference: float | None = Field(None, description="weighted per-request minus aggregate")

    def beside(self, aggregate: Any) -> RequestAcceptanceSummary:
        """With the aggregate Acceptance (bench.acceptance) of the same run set beside it."""
        if aggregate is None or aggregate.mean_acceptance_length is None:
            return self
        diff = (None if self.mean_acceptance_length is None
                else round(self.mean_acceptance_length - aggregate.mean_acceptance_length, 6))
        return self.model_copy(update={"aggregate_mean_acceptance_length": aggregate.mean_acceptance_length,
                                       "aggregate_source": aggregate.source, "difference": diff})

    def lines(self) -> list[str]:
        """The human summary: the weighted figure with its source, the distribution, the histogram."""
        if self.mean_acceptance_length is None:
            return [f"per-request acceptance: {self.requests} answers carried it, none with a verification step"]
        shares = ", ".join(f"{j}: {share:.1%}" for j, share in enumerate(self.histogram_share))
        out = [f"per-request acceptance ({self.requests} answers, read from {self.source}): mean acceptance length "
               f"{self.mean_acceptance_length:.3f} weighted by drafts ({self.steps:,} steps), acceptance rate "
               f"{self.acceptance_rate:.1%}"]
        if self.distribution is not None:
            d = self.distribution
            out.append(f"  per request: p10 {d.p10:.2f}, p50 {d.p50:.2f}, p90 {d.p90:.2f} (min {d.min:.2f}, "
                       f"max {d.max:.2f}, mean {d.mean:.2f})")
        out.append(f"  steps by drafts accepted: {shares}")
        if self.aggregate_mean_acceptance_length is not None:
            out.append(f"  aggregate {self.aggregate_mean_acceptance_length:.3f} ({self.aggregate_source}); "
                       f"difference {self.difference:+.3f}")
        if self.requests_without or self.requests_without_steps:
            out.append(f"  {self.requests_without} answers without it, {self.requests_without_steps} without a "
                       "verification step (not in the distribution)")
        return out


class RequestAcceptanceTally:
    """A run's per-request acceptance, folded in request by request (`add`); `summary` at the end."""

    __slots__ = ("requests", "without", "without_steps", "steps", "accepted", "drafted", "histogram", "k",
                 "lengths")

    def __init__(self) -> None:
        self.requests = self.without = self.without_steps = 0
        self.steps = self.accepted = self.drafted = 0
        self.histogram: list[int] = []
        self.k: int | None = None
        self.lengths = LatencySamples()

    def add(self, raw: dict[str, Any] | None) -> None:
        """One measured answer that completed; `raw` its metrics.speculative_decoding (None: it had none)."""
        metrics = parse_spec_metrics(raw)
        if metrics is None:
            self.without += 1
            return
        self.requests += 1
        self.k = metrics.num_spec_tokens if self.k is None else max(self.k, metrics.num_spec_tokens)
        if len(metrics.acceptance_histogram) > len(self.histogram):
            self.histogram.extend([0] * (len(metrics.acceptance_histogram) - len(self.histogram)))
        for j, n in enumerate(metrics.acceptance_histogram):
            self.histogram[j] += n
        self.steps += metrics.num_spec_steps
        self.accepted += metrics.num_accepted_draft_tokens
        self.drafted += metrics.num_draft_tokens
        if metrics.num_spec_steps:
            self.lengths.add(metrics.mean_acceptance_length)
        else:
            self.without_steps += 1

    def summary(self) -> RequestAcceptanceSummary | None:
        """None when no answer carried it (the server does not return per-request acceptance)."""
        if not self.requests:
            return None
        distribution = None
        if len(self.lengths):
            s = self.lengths.summary()
            pct = self.lengths.percentiles(PERCENTS)
            distribution = LengthDistribution(count=s.count, mean=s.mean, p10=pct[10], p50=pct[50], p90=pct[90],
                                              min=s.min, max=s.max)
        total = sum(self.histogram)
        return RequestAcceptanceSummary(
            requests=self.requests, requests_without=self.without, requests_without_steps=self.without_steps,
            k=self.k, steps=self.steps, accepted_tokens=self.accepted, draft_tokens=self.drafted,
            mean_acceptance_length=1 + self.accepted / self.steps if self.steps else None,
            acceptance_rate=self.accepted / self.drafted if self.drafted else None, distribution=distribution,
            histogram=list(self.histogram), histogram_share=[round(n / total, 6) for n in self.histogram] if total
            else [])
