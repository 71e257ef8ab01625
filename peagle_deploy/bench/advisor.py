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

The model assumes P-EAGLE's one drafter pass is as cheap as EAGLE-3's first, so for equal acceptance it
always favours P-EAGLE. Measurements say otherwise on some vLLM versions (0.25.1 runs parallel drafting on
its older V1 model runner and EAGLE-3 on V2 beat it at every concurrency on an H100). So the mode is taken
from a MEASURED comparison when one is given (`measured`, from `peagle bench compare` runs of both modes),
and the advice always says which mode the estimate assumed and whether it was measured.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Literal

from pydantic import BaseModel, ConfigDict

from ..errors import UsageError
from .compare import ModeComparison

if TYPE_CHECKING:
    from .results import BenchResult

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
    recommended_mode: str | None = None  # the measured winner; None when the modes were not both measured
    measured: ModeComparison | None = None
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
    measured: ModeComparison | None = None,
) -> Advice:
    """Estimate E(K), the cost of a step and the speed-up for K = 1..max_k; recommend the best K.

    `max_k` defaults to the number of measured positions. Positions beyond them are extrapolated with
    the last measured conditional rate (flagged `extrapolated`): a K larger than the one measured is
    a guess, and the explanation says so.
    """
    if mode not in ("p-eagle", "eagle3", "dflash"):
        raise UsageError(f"unknown mode {mode!r} for the advisor", "use p-eagle, eagle3 or dflash")
    one_pass = mode != "eagle3"  # P-EAGLE and DFlash draft every position in one drafter pass
    cond = to_conditional(rates, kind)
    positions = len(cond)
    max_k = positions if max_k is None else max_k
    estimates: list[KEstimate] = []
    survive, expected = 1.0, 1.0
    for k in range(1, max(max_k, 1) + 1):
        a = cond[k - 1] if k <= positions else cond[-1]
        survive *= a
        expected += survive
        drafting = draft_cost if one_pass else draft_cost * k
        cost = 1 + verify_cost * k + drafting
        estimates.append(
            KEstimate(
                k=k,
                expected_tokens_per_step=round(expected, 4),
                step_cost=round(cost, 4),
                speedup=round(expected / cost, 4),
                extrapolated=k > positions,
            )
        )
    best = max(estimates, key=lambda e: (e.speedup, -e.k))
    drafter = "one drafter pass for any K" if one_pass else "K sequential drafter passes"
    explanation = [
        f"Conditional acceptance by position: {', '.join(f'{a:.2f}' for a in cond)}"
        f" ({'given' if kind == 'conditional' else 'derived from the cumulative rates vLLM logs'}).",
        "Expected tokens per verification step E(K) = 1 + sum over i<=K of the chance that the first i"
        " draft tokens are all accepted (Leviathan et al. 2023, eq. 1, with position-dependent rates).",
        f"Step cost = 1 + {verify_cost}*K for verification + {draft_cost}"
        f"{'' if one_pass else '*K'} for drafting ({drafter}), in units of one plain decoding step.",
        f"Recommended K={best.k}: about {best.expected_tokens_per_step:.2f} tokens per step for a step cost of"
        f" {best.step_cost:.2f}, an estimated {best.speedup:.2f}x over no speculation.",
    ]
    if best.extrapolated:
        explanation.append(
            f"K={best.k} is beyond the {positions} measured positions: its estimate extrapolates the last"
            " rate. Deploy it with a larger K and measure again before trusting it."
        )
    elif best.k == positions:
        explanation.append(
            "The best K is the largest one measured: a larger K may do better (try --max-k to extrapolate,"
            " then deploy and measure it)."
        )
    recommended_mode = measured.winner if measured is not None and measured.levels else None
    explanation.extend(_mode_explanation(mode, measured, recommended_mode))
    return Advice(
        mode=mode,
        rates_kind=kind,
        conditional_rates=[round(a, 6) for a in cond],
        verify_cost=verify_cost,
        draft_cost=draft_cost,
        estimates=estimates,
        recommended_k=best.k,
        recommended_mode=recommended_mode,
        measured=measured,
        explanation=explanation,
    )


def _mode_explanation(mode: str, measured: ModeComparison | None, winner: str | None) -> list[str]:
    from .compare import NAMES as name

    if measured is None or not measured.levels:
        return [f"The estimate is for {name[mode]} and does not say which mode is faster: on some vLLM versions "
                "EAGLE-3 beats P-EAGLE (parallel drafting can fall back to an older model runner), and DFlash runs "
                "on whichever runner its vLLM gives the model. Benchmark the modes at the K you choose and pass the "
                "results with --measured before deciding."]
    lines = [measured.summary() + f" ({measured.table})."]
    if measured.runtimes:
        lines.append("Each ran on: " + "; ".join(f"{name.get(m, m)} {where}" for m, where in measured.runtimes.items())
                     + " (the server's start-up log).")
    if winner is None:
        lines.append("No mode won at more levels than the others: choose by the concurrency you expect.")
        return lines
    ks = measured.best_k.get(winner, {})
    wins = measured.wins.get(winner, [])
    best_k = {ks[c] for c in wins if ks.get(c) is not None}
    k_text = f" --k {best_k.pop()}" if len(best_k) == 1 else ""
    lines.append(f"Recommended mode, as measured: {name[winner]} (deploy --mode {winner}{k_text}).")
    if winner != mode:
        lines.append(f"The K estimate above assumes {name[mode]}; the measurements favour {name[winner]}, so "
                     f"re-run the advisor with --mode {winner} for its K.")
    return lines


class MeasuredRuns(BaseModel):
    """The `--measured` runs: their acceptance (advice needs no other input) and, when both modes were measured,
    the P-EAGLE vs EAGLE-3 comparison."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    results: list  # BenchResult
    comparison: ModeComparison | None = None

    def acceptance_for(self, mode: str) -> list[float] | None:
        """Per-position acceptance of the run of `mode` measured deepest (another mode's only if `mode` has none)."""
        with_rates = [r for r in self.results if r.acceptance is not None and r.acceptance.per_position]
        for pool in ([r for r in with_rates if r.target.mode == mode], with_rates):
            if pool:
                return list(max(pool, key=lambda r: len(r.acceptance.per_position)).acceptance.per_position)
        return None


def read_measured(paths: list, *, skipped: Callable[[str], None]) -> MeasuredRuns:
    """Read every --measured file (peagle's other files skipped with a line to `skipped`, results.read_results);
    compare the modes when runs of both are among them."""
    from .results import read_results

    results = read_results(paths, skipped=skipped)
    modes = {r.target.mode for r in results}
    comparison = comparison_from_results(results) if len(modes & {"p-eagle", "eagle3", "dflash"}) >= 2 else None
    return MeasuredRuns(results=results, comparison=comparison)


def comparison_from_results(results: list[BenchResult]) -> ModeComparison:
    """The measured P-EAGLE vs EAGLE-3 comparison of runs of one model, instance setup and data set."""
    from .compare import compare_results, mode_comparison

    tables = [t for t in compare_results(results) if mode_comparison(t) is not None]
    if not tables:
        raise UsageError("the --measured runs do not include runs of two speculative modes (P-EAGLE, EAGLE-3, "
                         "DFlash) of one model, instance and data set", "benchmark the modes (peagle bench --mode "
                         "p-eagle / eagle3 / dflash)")
    if len(tables) > 1:
        raise UsageError(f"the --measured runs cover {len(tables)} model/instance/data-set groups",
                         "pass runs of one model, instance type and data set")
    comparison = mode_comparison(tables[0])
    assert comparison is not None
    return comparison
