"""Output agreement (`peagle bench agree`, bench/agreement.py): greedy outputs token by token, sampled outputs
by an exact permutation test, against loopback stand-ins whose answers are chosen per request."""

from __future__ import annotations

import json
import random
import threading

import pytest

from peagle_deploy.bench.agreement import (Answer, OutputSample, answer_of, greedy_agreement, poisson_lower,
                                           sampled_agreement)
from peagle_deploy.testing.fake_vllm import FakeVllm
from tests.cli_runner import run_cli

TOKENS = [f" t{i}" for i in range(20)]


def _prompt(body: dict) -> int:
    return int(body["messages"][0]["content"].removeprefix("prompt "))


@pytest.fixture
def prompts(tmp_path):
    path = tmp_path / "prompts.jsonl"
    path.write_text("".join(json.dumps({"prompt": f"prompt {i}"}) + "\n" for i in range(8)))
    return str(path)


def agree(baseline: FakeVllm, candidate: FakeVllm, prompts: str, *extra: str):
    return run_cli("bench", "agree", baseline.url, candidate.url, "--dataset", prompts, "-n", "8", "--json", *extra)


def test_identical_greedy_outputs_agree(prompts):
    with FakeVllm(TOKENS) as off, FakeVllm(TOKENS) as spec:
        res = agree(off, spec, prompts)
    assert res.code == 0, res.stderr
    greedy = json.loads(res.stdout)["greedy"]
    assert greedy["unit"] == "tokens"  # read from the answers' logprobs
    assert (greedy["identical_share"], greedy["mean_common_prefix"], greedy["verdict"]) == (1.0, 20.0, "identical")
    assert all(r["body"]["logprobs"] is True and r["body"]["temperature"] == 0 for r in off.requests)


def test_divergence_at_the_first_tokens_is_far_below_noise(prompts):
    def broken(body):  # every answer changes at token 2: what a bad drafter or verifier does
        return TOKENS[:2] + [" wrong"] * 18

    with FakeVllm(TOKENS) as off, FakeVllm(answer=broken) as spec:
        res = agree(off, spec, prompts)
    assert res.code == 6, res.stderr
    doc = json.loads(res.stdout)
    greedy = doc["greedy"]
    assert (greedy["identical"], greedy["mean_common_prefix"], greedy["verdict"]) == (0, 2.0, "far below noise")
    assert [d["position"] for d in greedy["divergences"]] == [2] * 8
    warning = next(line for line in res.stderr.splitlines() if "OUTPUT CHANGED" in line)
    assert "0% identical (0/8)" in warning and "far above floating-point noise" in warning
    assert res.stderr.strip().splitlines()[-1].startswith("error: ")


def test_a_rare_late_divergence_is_within_noise(prompts):
    def one_late(body):  # one prompt of eight parts ways at token 18: a near-tie flipped by batch numerics
        return TOKENS[:18] + [" other", " x"] if _prompt(body) == 5 else TOKENS

    with FakeVllm(TOKENS) as off, FakeVllm(answer=one_late) as spec:
        res = agree(off, spec, prompts)
        strict = agree(off, spec, prompts, "--noise-per-token", "0")
    assert res.code == 0, res.stderr
    greedy = json.loads(res.stdout)["greedy"]
    assert greedy["verdict"] == "within noise" and greedy["identical"] == 7
    assert greedy["divergences"] == [{"prompt": 5, "position": 18, "baseline": " t18", "candidate": " other"}]
    assert strict.code == 6 and json.loads(strict.stdout)["greedy"]["verdict"] == "far below noise"


def _sampler(share_of_bang: float, seed: int):
    rng, lock = random.Random(seed), threading.Lock()

    def answer(body):
        with lock:
            return ["!" if rng.random() < share_of_bang else rng.choice([" a", " b", " c"]) for _ in range(16)]

    return answer


def test_sampled_outputs_from_one_distribution_agree(prompts):
    with FakeVllm(answer=_sampler(0.5, 1)) as off, FakeVllm(answer=_sampler(0.5, 2)) as spec:
        res = agree(off, spec, prompts, "--temperature", "1", "--samples", "8", "-c", "1")
    assert res.code == 0, res.stderr
    [sampled] = json.loads(res.stdout)["sampled"]
    assert not sampled["differs"] and sampled["p_value"] > 0.01 and sampled["alpha"] == 0.01
    assert len(off.requests) == len(spec.requests) == 8 * 8
    assert {r["body"]["temperature"] for r in spec.requests} == {1.0}


def test_the_cpu_sampling_defect_is_flagged_with_its_numbers(prompts):
    """The shape vLLM CPU 0.32 showed: the target alone says '!' every time, with P-EAGLE 1.1% of the time."""
    with FakeVllm(answer=lambda body: ["!"] * 16) as off, FakeVllm(answer=_sampler(0.011, 3)) as spec:
        res = agree(off, spec, prompts, "--temperature", "0,1", "--samples", "8", "-c", "1")
    assert res.code == 6
    doc = json.loads(res.stdout)
    [sampled] = doc["sampled"]
    assert sampled["differs"] and sampled["p_value"] == pytest.approx(1 / 1000)  # the smallest p of 999 shuffles
    assert sampled["baseline_top"] == "!" and sampled["baseline_top_share"] == 1.0
    assert sampled["candidate_top_share"] < 0.05
    assert any("DIFFERENT distributions at temperature 1" in w for w in doc["warnings"])


def test_a_server_without_logprobs_is_compared_by_characters():
    answer, unit = answer_of({"choices": [{"message": {"content": "ab!"}, "finish_reason": "stop"}]})
    assert unit == "characters" and answer.tokens == ["a", "b", "!"]


def test_bad_temperature_is_one_line(prompts):
    res = run_cli("bench", "agree", "http://127.0.0.1:9", "http://127.0.0.1:9", "--dataset", prompts,
                  "--temperature", "hot")
    assert res.code == 2 and res.stderr.count("\n") == 1 and "--temperature 'hot'" in res.stderr


def _samples(rng: random.Random, weights: list[float], prompts: int = 4, per_prompt: int = 6) -> OutputSample:
    vocab = ["a", "b", "c", "d"]
    return OutputSample(target="x", temperature=1.0, max_tokens=8, unit="tokens", answers=[
        [Answer(tokens=rng.choices(vocab, weights, k=8), text="") for _ in range(per_prompt)]
        for _ in range(prompts)])


def test_false_alarm_rate_is_at_most_alpha():
    """Both targets sample one distribution: the permutation test flags about alpha of the trials (seeded)."""
    rng = random.Random(7)
    trials, alpha = 200, 0.05
    alarms = sum(sampled_agreement(_samples(rng, [4, 3, 2, 1]), _samples(rng, [4, 3, 2, 1]), alpha=alpha,
                                   permutations=99, seed=trial).differs for trial in range(trials))
    assert alarms / trials <= alpha + 0.03  # exact test: expected <= 5% (10 of 200); binomial spread allowed
    shifted = sum(sampled_agreement(_samples(rng, [4, 3, 2, 1]), _samples(rng, [1, 2, 3, 4]), alpha=alpha,
                                    permutations=99, seed=trial).differs for trial in range(20))
    assert shifted >= 18  # and it has the power to see a real change


def test_greedy_divergence_rate_and_its_bound():
    base = OutputSample(target="a", temperature=0, max_tokens=4, unit="tokens",
                        answers=[[Answer(tokens=list("abcd"), text="abcd")]] * 3)
    cand = OutputSample(target="b", temperature=0, max_tokens=4, unit="tokens", answers=[
        [Answer(tokens=list("abcd"), text="")], [Answer(tokens=list("abxd"), text="")],
        [Answer(tokens=list("ab"), text="")]])  # one stopped early: a divergence at its end
    result = greedy_agreement(base, cand)
    assert result.identical == 1 and [d.position for d in result.divergences] == [2, 2]
    assert result.compared == 4 + 3 + 3 and result.divergence_per_token == pytest.approx(2 / 10)
    assert poisson_lower(1, 1.0) == pytest.approx(0.0253, abs=1e-4)  # the exact Poisson bound
    assert poisson_lower(10, 1.0) == pytest.approx(4.795, abs=1e-3)
