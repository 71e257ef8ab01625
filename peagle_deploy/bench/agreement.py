"""Output agreement: does speculation change what the target says?

Speculative decoding is meant to be lossless: the same output as the target alone (greedy), or the same
output DISTRIBUTION (sampling). Two checks, on the same prompts sent to a baseline (mode off) and a candidate:

- Greedy (temperature 0), token by token: the share of outputs that are identical, the mean common prefix,
  and where each pair first diverges. Tokens come from the answer's `logprobs` (vLLM returns them with
  speculation on); a server that returns none is compared by characters, and the report says so.
  Exact arithmetic gives 100% identical. On GPUs, batch-dependent numerics (a different batch shape, kernel or
  reduction order between two runs) can flip a near-tie between the two most likely tokens, after which the
  outputs part ways: that happens rarely and anywhere along the output, so it shows as a small rate of
  divergence PER TOKEN. A broken drafter or verifier changes the output at the first speculated tokens of
  most prompts. The check estimates the per-token divergence rate (diverged pairs / tokens compared up to the
  divergence) and calls the divergence BEYOND NOISE when even the lower 95% confidence bound of that rate is
  above `noise_per_token` (default 1 in 100 tokens, well above what floating-point noise gives; measure your
  own floor with the same check run off against off).
- Sampled (temperature > 0): `samples` answers per prompt from each target; the per-prompt token
  frequencies are compared with an exact two-sample permutation test (statistic: the sum over prompts of the
  total variation distance between the two targets' token frequencies; the answers' target labels are
  shuffled within each prompt `permutations` times). When both targets sample from the same distribution the
  test flags a difference with probability at most `alpha` (default 1%): that is its false-alarm rate. It
  looks at which tokens are produced, not their order.
- Structured output (`--json-schema FILE`): the same checks again with the schema as the requests'
  `response_format` (vLLM's guided decoding), where the grammar masks the target's tokens AND invalidates drafts
  (vLLM counts them apart), a path of its own through speculation; each answer is also parsed as JSON.
"""

from __future__ import annotations

import json
import math
import random
import re
import threading
from collections import Counter
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, Field

from .server_facts import ServerFacts

if TYPE_CHECKING:
    from ..runtime.target_ref import TargetRef

AGREEMENT_MAX_TOKENS = 128  # a sweep's greedy sample: enough to see where outputs part
NOISE_PER_TOKEN = 0.01
ALPHA = 0.01
PERMUTATIONS = 999
BEYOND_NOISE = "beyond noise"  # the greedy verdict that fails the check: the warning and the summary say the same
SEED = 20261124

Unit = Literal["tokens", "characters"]


class Answer(BaseModel):
    tokens: list[str]
    text: str
    finish_reason: str | None = None


class OutputSample(BaseModel):
    """The answers of one target to the same prompts: answers[prompt][sample]."""

    target: str
    temperature: float
    max_tokens: int
    unit: Unit
    answers: list[list[Answer]]


class Divergence(BaseModel):
    prompt: int
    position: int = Field(description="index of the first differing token (or character)")
    baseline: str | None
    candidate: str | None


class GreedyAgreement(BaseModel):
    unit: Unit
    prompts: int
    identical: int
    identical_share: float
    mean_common_prefix: float = Field(description="mean length of the common prefix, in `unit`")
    mean_baseline_length: float
    divergences: list[Divergence]
    compared: int = Field(description="tokens compared up to each first divergence (or to the end)")
    divergence_per_token: float
    divergence_per_token_low: float = Field(description="lower 95% confidence bound")
    noise_per_token: float
    verdict: Literal["identical", "within noise", "beyond noise"] = Field(
        description="of the divergence: none, a rate floating-point noise may explain, or more than that")

    def summary(self) -> str:
        text = (f"{self.identical_share:.0%} identical ({self.identical}/{self.prompts}), mean common prefix "
                f"{self.mean_common_prefix:.1f} of {self.mean_baseline_length:.1f} {self.unit}")
        if self.divergences:
            first = sorted(d.position for d in self.divergences)
            text += f", first divergence at {self.unit[:-1]} {first[0]} (median {first[len(first) // 2]})"
        return text


class SampledAgreement(BaseModel):
    unit: Unit
    temperature: float
    prompts: int
    samples_per_prompt: int
    test: str = "exact permutation test of per-prompt token frequencies (total variation distance)"
    statistic: float = Field(description="mean total variation distance per prompt, 0 (same) to 1 (disjoint)")
    p_value: float
    alpha: float
    permutations: int
    differs: bool
    baseline_top: str | None = Field(description="the baseline's most frequent token")
    baseline_top_share: float
    candidate_top_share: float = Field(description="share of the candidate's tokens that are baseline_top")

    def summary(self) -> str:
        verdict = "DIFFERENT distributions" if self.differs else "no difference found"
        return (f"{verdict} at temperature {self.temperature:g}: p = {self.p_value:.4f} (false-alarm rate "
                f"{self.alpha:.0%}), mean total variation distance {self.statistic:.3f}; "
                f"{self.baseline_top!r} is {self.baseline_top_share:.1%} of the baseline's {self.unit} and "
                f"{self.candidate_top_share:.1%} of the candidate's")


# collecting ---------------------------------------------------------------------------------------

def answer_of(response: dict[str, Any]) -> tuple[Answer, Unit]:
    """The answer's tokens from a chat completion: its logprobs' tokens, else its characters."""
    choice = (response.get("choices") or [{}])[0]
    message = choice.get("message") or {}
    text = message.get("content") or message.get("reasoning_content") or message.get("reasoning") or ""
    content = (choice.get("logprobs") or {}).get("content")
    if content:
        return Answer(tokens=[str(t.get("token", "")) for t in content], text=text,
                      finish_reason=choice.get("finish_reason")), "tokens"
    return Answer(tokens=list(text), text=text, finish_reason=choice.get("finish_reason")), "characters"


def collect(target: str | TargetRef, prompts: Sequence[list[dict[str, str]]], *, max_tokens: int, temperature: float,
            samples: int = 1, concurrency: int = 4, region: str | None = None, profile: str | None = None,
            model: str | None = None, timeout: float = 600.0,
            on_answer: Callable[[], None] | None = None, response_format: dict[str, Any] | None = None) -> OutputSample:
    """Send every prompt `samples` times (non-streaming, with logprobs; `response_format`: structured output) and
    keep the answers."""
    from ..runtime.client import PeagleClient
    from ..runtime.payload import ChatRequest

    extra: dict[str, Any] = {"logprobs": True}
    if model:
        extra["model"] = model
    if response_format is not None:
        extra["response_format"] = response_format
    local = threading.local()  # one client per worker thread (a client keeps per-call state)

    def one(index: int) -> tuple[int, Answer, Unit]:
        client = getattr(local, "client", None)
        if client is None:
            client = local.client = PeagleClient(target, region=region, profile=profile,
                                                 idle_timeout=min(timeout, 120.0), total_timeout=timeout)
        request = ChatRequest(messages=prompts[index // samples], max_tokens=max_tokens, temperature=temperature,
                              **extra)
        answer, unit = answer_of(client.chat(request).response)
        if on_answer is not None:
            on_answer()
        return index, answer, unit

    total = len(prompts) * samples
    answers: list[list[Answer]] = [[] for _ in prompts]
    units: set[str] = set()
    with ThreadPoolExecutor(max_workers=max(1, min(concurrency, total))) as pool:
        for index, answer, unit in sorted(pool.map(one, range(total)), key=lambda r: r[0]):
            answers[index // samples].append(answer)
            units.add(unit)
    unit: Unit = "tokens" if units == {"tokens"} else "characters"
    if unit == "characters":  # some answers without logprobs: every answer of the sample by its characters
        answers = [[a.model_copy(update={"tokens": list(a.text)}) for a in per] for per in answers]
    return OutputSample(target=target if isinstance(target, str) else target.name, temperature=temperature,
                        max_tokens=max_tokens, unit=unit, answers=answers)


def _as_unit(sample: OutputSample, unit: Unit) -> list[list[list[str]]]:
    """Each answer as tokens (both samples have them) or characters (its text: whatever its tokens were)."""
    if unit == "tokens":
        return [[a.tokens for a in per] for per in sample.answers]
    return [[list(a.text) for a in per] for per in sample.answers]


def _same_cut(b: list[str], c: list[str]) -> bool:
    """Whether two token sequences part where their texts do: false when they first differ at tokens one of which
    begins the other ('Hello' against 'H'), which is the same text cut into other chunks, not a divergence."""
    if "".join(b) == "".join(c):
        return True
    i = next((i for i, (x, y) in enumerate(zip(b, c)) if x != y), min(len(b), len(c)))
    return not (i < len(b) and i < len(c) and (b[i].startswith(c[i]) or c[i].startswith(b[i])))


def _common_unit(a: OutputSample, b: OutputSample) -> Unit:
    return "tokens" if a.unit == b.unit == "tokens" else "characters"


# greedy -------------------------------------------------------------------------------------------

def poisson_lower(events: int, exposure: float, confidence: float = 0.95) -> float:
    """Lower bound of a Poisson rate (events / exposure) at two-sided `confidence` (exact, by bisection)."""
    if events == 0 or exposure <= 0:
        return 0.0
    tail = (1 - confidence) / 2

    def upper_tail(mean: float) -> float:  # P(X >= events) for X ~ Poisson(mean)
        term, below = math.exp(-mean), 0.0
        for i in range(events):
            below += term
            term *= mean / (i + 1)
        return 1.0 - below

    lo, hi = 0.0, float(events)
    for _ in range(100):
        mid = (lo + hi) / 2
        if upper_tail(mid) < tail:
            lo = mid
        else:
            hi = mid
    return lo / exposure


def greedy_agreement(baseline: OutputSample, candidate: OutputSample, *,
                     noise_per_token: float = NOISE_PER_TOKEN) -> GreedyAgreement:
    """Token-by-token comparison of the first answer to each prompt. Equal texts are identical however they are cut
    into tokens; when two answers are cut differently where they part, the whole check compares characters (a token
    position would point at a difference of chunking, not of text)."""
    unit = _common_unit(baseline, candidate)
    if unit == "tokens" and not all(_same_cut(b[0], c[0]) for b, c in zip(_as_unit(baseline, unit),
                                                                           _as_unit(candidate, unit)) if b and c):
        unit = "characters"
    base, cand = _as_unit(baseline, unit), _as_unit(candidate, unit)
    pairs = [(b[0], c[0]) for b, c in zip(base, cand) if b and c]
    identical = 0
    prefixes: list[int] = []
    divergences: list[Divergence] = []
    compared = 0
    for index, (b, c) in enumerate(pairs):
        prefix = 0
        for x, y in zip(b, c):
            if x != y:
                break
            prefix += 1
        if "".join(b) == "".join(c):  # the same text in other chunks: identical, all of the baseline in common
            c, prefix = b, len(b)
        prefixes.append(prefix)
        if b == c:
            identical += 1
            compared += len(b)
        elif prefix == min(len(b), len(c)):  # one stopped earlier (EOS): a divergence at the shorter end
            compared += prefix + 1
            divergences.append(Divergence(prompt=index, position=prefix, baseline=b[prefix] if prefix < len(b)
                                          else None, candidate=c[prefix] if prefix < len(c) else None))
        else:
            compared += prefix + 1
            divergences.append(Divergence(prompt=index, position=prefix, baseline=b[prefix], candidate=c[prefix]))
    n = len(pairs)
    rate = len(divergences) / compared if compared else 0.0
    low = poisson_lower(len(divergences), compared)
    verdict = "identical" if not divergences else (BEYOND_NOISE if low > noise_per_token else "within noise")
    return GreedyAgreement(
        unit=unit, prompts=n, identical=identical, identical_share=identical / n if n else 0.0,
        mean_common_prefix=sum(prefixes) / n if n else 0.0,
        mean_baseline_length=sum(len(b) for b, _ in pairs) / n if n else 0.0,
        divergences=divergences, compared=compared, divergence_per_token=rate, divergence_per_token_low=low,
        noise_per_token=noise_per_token, verdict=verdict)


# sampled ------------------------------------------------------------------------------------------

def _tvd(a: Sequence[int], b: Sequence[int]) -> float:
    na, nb = sum(a), sum(b)
    if not na or not nb:
        return 0.0 if na == nb else 1.0
    return 0.5 * sum(abs(x / na - y / nb) for x, y in zip(a, b))


def sampled_agreement(baseline: OutputSample, candidate: OutputSample, *, alpha: float = ALPHA,
                      permutations: int = PERMUTATIONS, seed: int = SEED) -> SampledAgreement:
    """Exact permutation test: under 'same distribution' every relabelling of a prompt's answers is as likely."""
    unit = _common_unit(baseline, candidate)
    base, cand = _as_unit(baseline, unit), _as_unit(candidate, unit)
    strata: list[tuple[list[list[int]], int]] = []  # per prompt: count vectors of all answers, baseline count
    for b_answers, c_answers in zip(base, cand):
        if not b_answers or not c_answers:
            continue
        vocab: dict[str, int] = {}
        for answer in (*b_answers, *c_answers):
            for token in answer:
                vocab.setdefault(token, len(vocab))
        vectors = []
        for answer in (*b_answers, *c_answers):
            counts = [0] * len(vocab)
            for token in answer:
                counts[vocab[token]] += 1
            vectors.append(counts)
        strata.append((vectors, len(b_answers)))

    def statistic(labels: list[list[int]]) -> float:
        total = 0.0
        for (vectors, n_base), order in zip(strata, labels):
            size = len(vectors[0])
            a, b = [0] * size, [0] * size
            for position, which in enumerate(order):
                target = a if position < n_base else b
                for i, v in enumerate(vectors[which]):
                    if v:
                        target[i] += v
            total += _tvd(a, b)
        return total / len(strata) if strata else 0.0

    identity = [list(range(len(v))) for v, _ in strata]
    observed = statistic(identity)
    rng = random.Random(seed)
    at_least = 0
    for _ in range(permutations):
        shuffled = []
        for order in identity:
            order = order[:]
            rng.shuffle(order)
            shuffled.append(order)
        if statistic(shuffled) >= observed - 1e-12:
            at_least += 1
    p_value = (1 + at_least) / (1 + permutations)
    base_counts = Counter(t for per in base for answer in per for t in answer)
    cand_counts = Counter(t for per in cand for answer in per for t in answer)
    top, top_n = base_counts.most_common(1)[0] if base_counts else (None, 0)
    return SampledAgreement(
        unit=unit, temperature=candidate.temperature, prompts=len(strata),
        samples_per_prompt=min((len(x) for x in base), default=0), statistic=round(observed, 6),
        p_value=p_value, alpha=alpha, permutations=permutations, differs=p_value <= alpha, baseline_top=top,
        baseline_top_share=top_n / max(1, sum(base_counts.values())),
        candidate_top_share=(cand_counts.get(top, 0) / max(1, sum(cand_counts.values()))) if top else 0.0)


# structured output ------------------------------------------------------------------------------------

def json_schema_format(path: Any) -> dict[str, Any]:
    """The `response_format` of a JSON-schema file (OpenAI's json_schema form, which vLLM's guided decoding takes);
    a file that is not one JSON object is refused in one line."""
    from pathlib import Path

    from ..errors import UsageError
    from ..safe_write import regular_file

    path = Path(path)
    hint = "pass a file holding one JSON Schema object, e.g. {\"type\": \"object\", \"properties\": {...}}"
    regular_file(path, what="--json-schema", hint=hint)
    try:
        schema = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise UsageError(f"--json-schema {path} not found", hint) from None
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise UsageError(f"--json-schema {path} is not a JSON file ({type(exc).__name__})", hint) from None
    if not isinstance(schema, dict) or not schema:
        raise UsageError(f"--json-schema {path} is not a JSON Schema object", hint)
    name = re.sub(r"[^A-Za-z0-9_-]", "_", path.stem)[:64] or "schema"
    return {"type": "json_schema", "json_schema": {"name": name, "schema": schema}}


class StructuredAgreement(BaseModel):
    """The checks again with a JSON schema as `response_format` (vLLM's structured output under speculation)."""

    schema_name: str
    greedy: GreedyAgreement | None = None
    sampled: list[SampledAgreement] = Field(default_factory=list)
    answers: int = Field(0, description="greedy answers per target")
    baseline_json: int = Field(0, description="greedy answers of the baseline that parse as JSON")
    candidate_json: int = Field(0, description="of the candidate")

    def summary(self) -> str:
        return (f"JSON schema {self.schema_name!r}: {self.baseline_json}/{self.answers} baseline and "
                f"{self.candidate_json}/{self.answers} candidate answers parse as JSON")


def _parses(answer: Answer) -> bool:
    try:
        json.loads(answer.text)
    except ValueError:
        return False
    return True


# the two targets, before any request -----------------------------------------------------------------

class BaselineCheck(BaseModel):
    """What the baseline was checked to be, before any request: what "agreement: ok" then means."""

    baseline: Literal["off", "speculative", "not verified"]
    same_target: bool = False
    notes: list[str] = Field(default_factory=list, description="one line each, for the terminal")

    def qualifier(self) -> str:
        """What an agreement is evidence of, when it is not 'lossless against the target alone'."""
        if self.same_target:
            return " (one server against itself: its noise floor, not speculation)"
        if self.baseline == "speculative":
            return " (with each other: the baseline speculates too)"
        if self.baseline == "not verified":
            return " (the baseline was not verified to run without speculation)"
        return ""


def check_baseline(baseline: str, candidate: str, base: ServerFacts, cand: ServerFacts, *, same_target: bool,
                   allow_speculative_baseline: bool = False) -> BaselineCheck:
    """The baseline must run without speculation, as its own facts show (vLLM's /metrics, a served config): a
    speculative one is refused (UsageError) unless `allow_speculative_baseline`; one whose facts could not be
    read is used, and said to be not verified."""
    from ..errors import UsageError

    notes: list[str] = []
    if base.speculative:
        if not allow_speculative_baseline:
            raise UsageError(
                f"the baseline {baseline} runs speculative decoding ({base.describe()}, read from "
                f"{base.source_text()}), so agreement with it cannot show that speculation is lossless",
                "pass the target without speculation (mode off) as BASELINE, or --allow-speculative-baseline to "
                "compare two speculative servers with each other")
        notes.append(f"the baseline {baseline} speculates ({base.describe()}, read from {base.source_text()}): "
                     "agreement shows that the two servers match each other, not that either matches the target alone")
        state: Literal["off", "speculative", "not verified"] = "speculative"
    elif base.speculative is False:
        notes.append(f"baseline {baseline}: off, read from {base.source_text()}")
        state = "off"
    else:
        why = "; ".join(base.notes) or "nothing it shows says"
        notes.append(f"the baseline {baseline} was not verified to run without speculation ({why}): BASELINE "
                     "is taken to be the target alone")
        state = "not verified"
    if cand.speculative is False and not same_target:
        notes.append(f"the candidate {candidate} runs without speculation (read from {cand.source_text()}): the "
                     "check compares two servers without speculation")
    if same_target:
        notes.append(f"{candidate} is the baseline too (--allow-same-target): the check measures its noise floor "
                     "(run to run numerics), not whether speculation is lossless")
    return BaselineCheck(baseline=state, same_target=same_target, notes=notes)


# both checks, two targets ---------------------------------------------------------------------------

class AgreementReport(BaseModel):
    baseline: str
    candidate: str
    dataset: str
    prompts: int
    max_tokens: int
    greedy: GreedyAgreement | None = None
    sampled: list[SampledAgreement] = Field(default_factory=list)
    agrees: bool
    warnings: list[str] = Field(default_factory=list)
    baseline_server: ServerFacts | None = Field(None, description="what the baseline runs, and where it was read")
    candidate_server: ServerFacts | None = None
    baseline_check: BaselineCheck | None = None
    structured: StructuredAgreement | None = Field(None, description="the checks with --json-schema's response_format")


def loud_warnings(greedy: GreedyAgreement | None, sampled: Sequence[SampledAgreement], what: str) -> list[str]:
    """One line per check that failed, naming the numbers (the CLI and the sweep print them as warnings)."""
    lines = []
    if greedy is not None and greedy.verdict == BEYOND_NOISE:
        unit = greedy.unit[:-1]
        lines.append(f"OUTPUT CHANGED: {what} at temperature 0: {greedy.summary()}: {BEYOND_NOISE}, divergence "
                     f"rate {greedy.divergence_per_token:.3f} per {unit} (95% lower bound "
                     f"{greedy.divergence_per_token_low:.3f}) against at most {greedy.noise_per_token:g} per {unit} "
                     "that floating-point noise may explain: the drafter or its verification is changing the output")
    for s in sampled:
        if s.differs:
            lines.append(f"OUTPUT CHANGED: {what}: {s.summary()}: speculation changes what is sampled")
    return lines


def check_agreement(baseline: str, candidate: str, prompts: Sequence[list[dict[str, str]]], *, dataset: str,
                    max_tokens: int, temperatures: Sequence[float], samples: int, concurrency: int,
                    alpha: float = ALPHA, noise_per_token: float = NOISE_PER_TOKEN, region: str | None = None,
                    profile: str | None = None, model: str | None = None, timeout: float = 600.0,
                    on_answer: Callable[[], None] | None = None,
                    refs: tuple[TargetRef, TargetRef] | None = None,
                    response_format: dict[str, Any] | None = None) -> AgreementReport:
    """`refs`: the two targets as the command addressed them (an endpoint's inference component named), else parsed
    from `baseline` and `candidate`. `response_format` (a JSON schema's, `json_schema_format`): every check again
    with it."""
    base_target, cand_target = refs or (baseline, candidate)
    common = {"max_tokens": max_tokens, "concurrency": concurrency, "region": region, "profile": profile,
              "model": model, "timeout": timeout, "on_answer": on_answer}

    def checks(fmt: dict[str, Any] | None) -> tuple[GreedyAgreement | None, list[SampledAgreement], list[Answer],
                                                     list[Answer]]:
        greedy, sampled, firsts = None, [], ([], [])
        for temperature in temperatures:
            n = 1 if temperature == 0 else samples
            base = collect(base_target, prompts, temperature=temperature, samples=n, response_format=fmt, **common)
            cand = collect(cand_target, prompts, temperature=temperature, samples=n, response_format=fmt, **common)
            if temperature == 0:
                greedy = greedy_agreement(base, cand, noise_per_token=noise_per_token)
                firsts = ([a[0] for a in base.answers if a], [a[0] for a in cand.answers if a])
            else:
                sampled.append(sampled_agreement(base, cand, alpha=alpha))
        return greedy, sampled, *firsts

    greedy, sampled, _, _ = checks(None)
    warnings = loud_warnings(greedy, sampled, f"{candidate} against {baseline}")
    structured = None
    if response_format is not None:
        s_greedy, s_sampled, base_answers, cand_answers = checks(response_format)
        structured = StructuredAgreement(
            schema_name=response_format["json_schema"]["name"], greedy=s_greedy, sampled=s_sampled,
            answers=len(base_answers), baseline_json=sum(map(_parses, base_answers)),
            candidate_json=sum(map(_parses, cand_answers)))
        warnings += loud_warnings(s_greedy, s_sampled, f"{candidate} against {baseline} with JSON-schema output "
                                                       f"({structured.schema_name})")
    return AgreementReport(baseline=baseline, candidate=candidate, dataset=dataset, prompts=len(prompts),
                           max_tokens=max_tokens, greedy=greedy, sampled=sampled, agrees=not warnings,
                           warnings=warnings, structured=structured)
