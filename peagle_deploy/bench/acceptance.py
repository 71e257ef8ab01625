"""Speculative-decoding acceptance arithmetic: vLLM's `SpecDecoding metrics:` log lines and its Prometheus
`/metrics` counters turned into one Acceptance. The two sources are `cloudwatch.py` (SageMaker endpoints)
and `prometheus.py` (container and OpenAI URLs).

Definitions follow vLLM (vllm/v1/spec_decode/metrics.py):
- a *draft* is one proposal of up to K tokens, verified in one target forward pass;
- acceptance rate = accepted draft tokens / drafted tokens;
- mean acceptance length = 1 + accepted / drafts (the "+1" is the bonus token the target always emits);
- per-position acceptance rate p_i = drafts whose token i was accepted / drafts. Token i can only be
  accepted if tokens 1..i-1 were, so p_i is CUMULATIVE (unconditional): p_i = P(accepted length >= i).
  The conditional rate a_i = p_i / p_{i-1} (p_0 = 1) is also reported.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from datetime import datetime

from pydantic import BaseModel, ConfigDict

from ..errors import UsageError

LOG_MARKER = "SpecDecoding metrics:"

# The message vLLM logs every logging interval (format string in vllm/v1/spec_decode/metrics.py):
#   SpecDecoding metrics: Mean acceptance length: %.2f, Accepted throughput: %.2f tokens/s,
#   Drafted throughput: %.2f tokens/s, Accepted: %d tokens, Drafted: %d tokens,
#   Per-position acceptance rate: %s, Avg Draft acceptance rate: %.1f%%
# Older vLLM (before per-position stats) logged only "Draft acceptance rate: %.1f%%, Accepted: %d tokens,
# Drafted: %d tokens". Fields are matched one by one so either form, any logger prefix
# ("INFO 11-22 10:00:00 [metrics.py:95] ", "(APIServer pid=7) ") and extra trailing fields parse.
_FLOAT = r"([0-9]+(?:\.[0-9]+)?|nan)"
_FIELDS = {
    "mean_acceptance_length": re.compile(r"Mean acceptance length: " + _FLOAT),
    "accepted": re.compile(r"Accepted: ([0-9]+) tokens"),
    "drafted": re.compile(r"Drafted: ([0-9]+) tokens"),
    "acceptance_rate_pct": re.compile(r"(?:Avg )?Draft acceptance rate: " + _FLOAT + "%"),
}
_PER_POSITION = re.compile(r"Per-position acceptance rate: ((?:[0-9.]+|nan)(?:, (?:[0-9.]+|nan))*)")


class LogInterval(BaseModel):
    """One parsed `SpecDecoding metrics` line: one logging interval of one engine."""

    model_config = ConfigDict(extra="forbid")

    timestamp_ms: int | None = None
    accepted: int
    drafted: int
    mean_acceptance_length: float | None = None
    per_position: list[float] = []

    def drafts(self) -> float | None:
        """Number of drafts in the interval. Each draft proposes K tokens, K = number of positions, so
        drafts = drafted / K; without positions, from the rounded mean length: accepted / (length - 1)."""
        if self.per_position:
            return self.drafted / len(self.per_position)
        if self.mean_acceptance_length is not None and self.mean_acceptance_length > 1:
            return self.accepted / (self.mean_acceptance_length - 1)
        return None


def parse_log_line(line: str, timestamp_ms: int | None = None) -> LogInterval | None:
    """Parse one log line; None when it is not a `SpecDecoding metrics` line with counts."""
    at = line.find(LOG_MARKER)
    if at < 0:
        return None
    text = line[at + len(LOG_MARKER) :]
    found = {name: rx.search(text) for name, rx in _FIELDS.items()}
    if not found["accepted"] or not found["drafted"]:
        return None
    mal = found["mean_acceptance_length"]
    positions: list[float] = []
    if (m := _PER_POSITION.search(text)) is not None:
        positions = [float(v) for v in m.group(1).split(", ")]
    return LogInterval(
        timestamp_ms=timestamp_ms,
        accepted=int(found["accepted"].group(1)),
        drafted=int(found["drafted"].group(1)),
        mean_acceptance_length=float(mal.group(1)) if mal else None,
        per_position=positions,
    )


class Acceptance(BaseModel):
    """Acceptance over a time window, from logs or Prometheus counters."""

    model_config = ConfigDict(extra="forbid")

    source: str
    window_start: datetime | None = None
    window_end: datetime | None = None
    intervals: int = 0
    drafts: float = 0
    draft_tokens: int = 0
    accepted_tokens: int = 0
    k: int | None = None
    mean_acceptance_length: float | None = None
    acceptance_rate: float | None = None
    per_position: list[float] = []
    per_position_conditional: list[float] = []
    note: str | None = None


def conditional_rates(cumulative: list[float]) -> list[float]:
    """a_i = p_i / p_{i-1} with p_0 = 1 (0 once a position is never reached)."""
    out, prev = [], 1.0
    for p in cumulative:
        out.append(round(p / prev, 6) if prev > 0 else 0.0)
        prev = p
    return out


def _finish(acc: Acceptance, per_pos_accepted: list[float]) -> Acceptance:
    if acc.draft_tokens > 0:
        acc.acceptance_rate = acc.accepted_tokens / acc.draft_tokens
    if acc.drafts > 0:
        acc.mean_acceptance_length = 1 + acc.accepted_tokens / acc.drafts
        if per_pos_accepted:
            acc.per_position = [round(a / acc.drafts, 6) for a in per_pos_accepted]
            acc.per_position_conditional = conditional_rates(acc.per_position)
            acc.k = len(per_pos_accepted)
    return acc


def aggregate_intervals(intervals: Iterable[LogInterval], source: str) -> Acceptance:
    """Combine logging intervals, weighting each by its number of drafts."""
    acc = Acceptance(source=source)
    per_pos: list[float] = []
    unknown_drafts = 0
    for iv in intervals:
        acc.intervals += 1
        acc.accepted_tokens += iv.accepted
        acc.draft_tokens += iv.drafted
        drafts = iv.drafts()
        if drafts is None:
            unknown_drafts += 1
            continue
        acc.drafts += drafts
        if len(iv.per_position) > len(per_pos):
            per_pos.extend([0.0] * (len(iv.per_position) - len(per_pos)))
        for i, p in enumerate(iv.per_position):
            per_pos[i] += p * drafts
    if unknown_drafts:
        acc.note = f"{unknown_drafts} interval(s) had no per-position or length data (older vLLM)"
        if acc.drafts == 0:
            per_pos = []
    return _finish(acc, per_pos)


# Prometheus ------------------------------------------------------------------------------------

PROM_DRAFTS = "vllm:spec_decode_num_drafts"
PROM_DRAFT_TOKENS = "vllm:spec_decode_num_draft_tokens"
PROM_ACCEPTED = "vllm:spec_decode_num_accepted_tokens"
PROM_ACCEPTED_PER_POS = "vllm:spec_decode_num_accepted_tokens_per_pos"
PROM_GENERATION_TOKENS = "vllm:generation_tokens"


class SpecCounters(BaseModel):
    """vLLM's spec-decode counters summed over engines and models (one scrape, or a difference)."""

    model_config = ConfigDict(extra="forbid")

    drafts: float = 0
    draft_tokens: float = 0
    accepted_tokens: float = 0
    accepted_per_position: dict[int, float] = {}
    generation_tokens: float | None = None
    present: bool = False
    vllm: bool = False  # the page has vLLM metrics at all (no spec-decode series then means speculation off)

    def minus(self, before: SpecCounters) -> SpecCounters:
        """after.minus(before): the counts of the run between two scrapes."""
        positions = set(self.accepted_per_position) | set(before.accepted_per_position)
        gen = None
        if self.generation_tokens is not None and before.generation_tokens is not None:
            gen = self.generation_tokens - before.generation_tokens
        return SpecCounters(
            drafts=self.drafts - before.drafts,
            draft_tokens=self.draft_tokens - before.draft_tokens,
            accepted_tokens=self.accepted_tokens - before.accepted_tokens,
            accepted_per_position={
                p: self.accepted_per_position.get(p, 0) - before.accepted_per_position.get(p, 0)
                for p in sorted(positions)
            },
            generation_tokens=gen,
            present=self.present,
            vllm=self.vllm,
        )

    def plus(self, other: SpecCounters) -> SpecCounters:
        """The counts of two windows together (a run's levels, each without its warm-up)."""
        positions = set(self.accepted_per_position) | set(other.accepted_per_position)
        gen = None
        if self.generation_tokens is not None or other.generation_tokens is not None:
            gen = (self.generation_tokens or 0) + (other.generation_tokens or 0)
        return SpecCounters(
            drafts=self.drafts + other.drafts,
            draft_tokens=self.draft_tokens + other.draft_tokens,
            accepted_tokens=self.accepted_tokens + other.accepted_tokens,
            accepted_per_position={p: self.accepted_per_position.get(p, 0) + other.accepted_per_position.get(p, 0)
                                   for p in sorted(positions)},
            generation_tokens=gen,
            present=self.present or other.present,
            vllm=self.vllm or other.vllm,
        )

    def acceptance(self, source: str) -> Acceptance:
        acc = Acceptance(
            source=source,
            drafts=self.drafts,
            draft_tokens=int(self.draft_tokens),
            accepted_tokens=int(self.accepted_tokens),
        )
        per_pos = [self.accepted_per_position[p] for p in sorted(self.accepted_per_position)]
        acc = _finish(acc, per_pos)
        if not self.present:
            acc.note = (
                "the server exposes no vllm:spec_decode_* counters: speculative decoding is off or this is not vLLM"
            )
        elif self.drafts == 0:
            acc.note = "no drafts between the two scrapes"
        return acc


def parse_prometheus(text: str) -> SpecCounters:
    """Sum vLLM's spec-decode counters from a Prometheus text exposition (prometheus_client's parser)."""
    from prometheus_client.parser import text_string_to_metric_families

    counters = SpecCounters()
    per_pos: dict[int, float] = {}
    try:
        families = list(text_string_to_metric_families(text))
    except ValueError as exc:
        raise UsageError(
            f"the /metrics response is not Prometheus text ({str(exc)[:60]})", "point at vLLM's /metrics"
        ) from None
    for family in families:
        for sample in family.samples:
            counters.vllm = counters.vllm or sample.name.startswith("vllm:")
            name = sample.name.removesuffix("_total")
            if sample.name.endswith("_created"):
                continue
            if name == PROM_DRAFTS:
                counters.drafts += sample.value
                counters.present = True
            elif name == PROM_DRAFT_TOKENS:
                counters.draft_tokens += sample.value
            elif name == PROM_ACCEPTED:
                counters.accepted_tokens += sample.value
            elif name == PROM_ACCEPTED_PER_POS:
                pos = int(sample.labels.get("position", "0"))
                per_pos[pos] = per_pos.get(pos, 0.0) + sample.value
            elif name == PROM_GENERATION_TOKENS:
                counters.generation_tokens = (counters.generation_tokens or 0.0) + sample.value
    counters.accepted_per_position = dict(sorted(per_pos.items()))
    return counters
