"""K advisor: expected tokens per verification step for each K, and the K to deploy.

Expected tokens per step. With per-position acceptance a_i (CONDITIONAL: the chance draft token i is
accepted given tokens 1..i-1 were), the accepted length L satisfies P(L >= i) = prod_{j<=i} a_j and
E[L] = sum_i P(L >= i), so one verification step emits on average

    E(K) = 1 + sum_{i<=K} prod_{j<=i} a_j        (the 1 is the target's own bonus token).

With a constant a this is (1 - a^(K+1)) / (1 - a), eq. (1) of Leviathan, Kalman & Matias, "Fast
Inference from Transformers via Speculative Decoding", ICML 2023 (arXiv:2211.17192). vLLM's logged
"Per-position acceptance rate" is already CUMULATIVE, p_i = P(L >= i), so E(K) = 1 + sum_{i<=K} p_i,
which is vLLM's "mean acceptance length" at K.

Cost per step, in units of one plain decoding step of the target model:
    verification = 1 + verify_cost * K     (K+1 tokens in one forward pass; nearly free while decoding is
                                            memory-bound, dearer at high concurrency)
    drafting     = draft_cost              for P-EAGLE (all K tokens in ONE drafter pass)
                 = draft_cost * K          for EAGLE-3 (K sequential drafter passes)
Estimated speed-up over no speculation = E(K) / (verification + drafting). The K with the highest
estimate is recommended. This is a first-order model: measure the top candidates with `peagle bench`.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict

from ..errors import UsageError

Kind = Literal["cumulative", "conditional"]


class KEstimate(BaseModel):
    model_config = ConfigDict(extra="forbid")

    k: int
    expected_tokens_per_step: float
    step_cost: float
    speedup: float
    extrapolated: bool


class Advice(BaseModel):
    model_config = ConfigDict(extra="forbid")

    mode: str
    rates_kind: Kind
    conditional_rates: list[float]
    verify_cost: float
    draft_cost: float
    estimates: list[KEstimate]
    recommended_k: int
    explanation: list[str]


def to_conditional(rates: list[float], kind: Kind) -> list[float]:
    if not rates:
        raise UsageError(
            "no per-position acceptance rates to advise on",
            "run a benchmark with speculative decoding on, or pass --rates 0.8,0.6,...",
        )
    if any(not 0 <= r <= 1 for r in rates):
        raise UsageError("acceptance rates must be between 0 and 1", "give fractions such as 0.82, not percentages")
    if kind == "conditional":
        return list(rates)
    if any(b > a + 1e-9 for a, b in zip(rates, rates[1:], strict=False)):
        raise UsageError(
            "cumulative per-position rates cannot increase with position",
            "pass --conditional if these are conditional rates",
        )
    out, prev = [], 1.0
    for p in rates:
        out.append(p / prev if prev > 0 else 0.0)
        prev = p
    return out


def advise(
    rates: list[float],
    *,
    kind: Kind = "cumulative",
    mode: str = "p-eagle",
    max_k: int | None = None,
    verify_cost: float = 0.02,
    draft_cost: float = 0.06,
) -> Advice:
    """Estimate E(K), the cost of a step and the speed-up for K = 1..max_k; recommend the best K.

    `max_k` defaults to the number of measured positions. Positions beyond them are extrapolated with
    the last measured conditional rate (flagged `extrapolated`): a K larger than the one measured is
    a guess, and the explanation says so.
    """
    if mode not in ("p-eagle", "eagle3"):
        raise UsageError(f"unknown mode {mode!r} for the advisor", "use p-eagle or eagle3")
    cond = to_conditional(rates, kind)
    measured = len(cond)
    max_k = measured if max_k is None else max_k
    estimates: list[KEstimate] = []
    survive, expected = 1.0, 1.0
    for k in range(1, max(max_k, 1) + 1):
        a = cond[k - 1] if k <= measured else cond[-1]
        survive *= a
        expected += survive
        drafting = draft_cost if mode == "p-eagle" else draft_cost * k
        cost = 1 + verify_cost * k + drafting
        estimates.append(
            KEstimate(
                k=k,
                expected_tokens_per_step=round(expected, 4),
                step_cost=round(cost, 4),
                speedup=round(expected / cost, 4),
                extrapolated=k > measured,
            )
        )
    best = max(estimates, key=lambda e: (e.speedup, -e.k))
    drafter = "one drafter pass for any K" if mode == "p-eagle" else "K sequential drafter passes"
    explanation = [
        f"Conditional acceptance by position: {', '.join(f'{a:.2f}' for a in cond)}"
        f" ({'given' if kind == 'conditional' else 'derived from the cumulative rates vLLM logs'}).",
        "Expected tokens per verification step E(K) = 1 + sum over i<=K of the chance that the first i"
        " draft tokens are all accepted (Leviathan et al. 2023, eq. 1, with position-dependent rates).",
        f"Step cost = 1 + {verify_cost}*K for verification + {draft_cost}"
        f"{'' if mode == 'p-eagle' else '*K'} for drafting ({drafter}), in units of one plain decoding step.",
        f"Recommended K={best.k}: about {best.expected_tokens_per_step:.2f} tokens per step for a step cost of"
        f" {best.step_cost:.2f}, an estimated {best.speedup:.2f}x over no speculation.",
    ]
    if best.extrapolated:
        explanation.append(
            f"K={best.k} is beyond the {measured} measured positions: its estimate extrapolates the last"
            " rate. Deploy it with a larger K and measure again before trusting it."
        )
    elif best.k == measured:
        explanation.append(
            "The best K is the largest one measured: a larger K may do better (try --max-k to extrapolate,"
            " then deploy and measure it)."
        )
    return Advice(
        mode=mode,
        rates_kind=kind,
        conditional_rates=[round(a, 6) for a in cond],
        verify_cost=verify_cost,
        draft_cost=draft_cost,
        estimates=estimates,
        recommended_k=best.k,
        explanation=explanation,
    )
