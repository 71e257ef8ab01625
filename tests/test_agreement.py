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
OFF = {"accepted_per_request": ()}  # a baseline's /metrics: vLLM's, without spec-decode series (speculation off)


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
    with FakeVllm(TOKENS, **OFF) as off, FakeVllm(TOKENS) as spec:
        res = agree(off, spec, prompts)
    assert res.code == 0, res.stderr
    greedy = json.loads(res.stdout)["greedy"]
    assert greedy["unit"] == "tokens"  # read from the answers' logprobs
    assert (greedy["identical_share"], greedy["mean_common_prefix"], greedy["verdict"]) == (1.0, 20.0, "identical")
    assert all(r["body"]["logprobs"] is True and r["body"]["temperature"] == 0 for r in off.requests)


def test_divergence_at_the_first_tokens_is_far_below_noise(prompts):
    def broken(body):  # every answer changes at token 2: what a bad drafter or verifier does
        return TOKENS[:2] + [" wrong"] * 18

    with FakeVllm(TOKENS, **OFF) as off, FakeVllm(answer=broken) as spec:
        res = agree(off, spec, prompts)
    assert res.code == 6, res.stderr
    doc = json.loads(res.stdout)
    greedy = doc["greedy"]
    assert (greedy["identical"], greedy["mean_common_prefix"], greedy["verdict"]) == (0, 2.0, "beyond noise")
    assert [d["position"] for d in greedy["divergences"]] == [2] * 8
    warning = next(line for line in res.stderr.splitlines() if "OUTPUT CHANGED" in line)
    assert "0% identical (0/8)" in warning and "beyond noise, divergence rate 0.333 per token" in warning
    assert res.stderr.strip().splitlines()[-1].startswith("error: ")


def test_a_rare_late_divergence_is_within_noise(prompts):
    def one_late(body):  # one prompt of eight parts ways at token 18: a near-tie flipped by batch numerics
        return TOKENS[:18] + [" other", " x"] if _prompt(body) == 5 else TOKENS

    with FakeVllm(TOKENS, **OFF) as off, FakeVllm(answer=one_late) as spec:
        res = agree(off, spec, prompts)
        strict = agree(off, spec, prompts, "--noise-per-token", "0")
    assert res.code == 0, res.stderr
    greedy = json.loads(res.stdout)["greedy"]
    assert greedy["verdict"] == "within noise" and greedy["identical"] == 7
    assert greedy["divergences"] == [{"prompt": 5, "position": 18, "baseline": " t18", "candidate": " other"}]
    assert strict.code == 6 and json.loads(strict.stdout)["greedy"]["verdict"] == "beyond noise"


def _sampler(share_of_bang: float, seed: int):
    rng, lock = random.Random(seed), threading.Lock()

    def answer(body):
        with lock:
            return ["!" if rng.random() < share_of_bang else rng.choice([" a", " b", " c"]) for _ in range(16)]

    return answer


def test_sampled_outputs_from_one_distribution_agree(prompts):
    with FakeVllm(answer=_sampler(0.5, 1), **OFF) as off, FakeVllm(answer=_sampler(0.5, 2)) as spec:
        res = agree(off, spec, prompts, "--temperature", "1", "--samples", "8", "-c", "1")
    assert res.code == 0, res.stderr
    [sampled] = json.loads(res.stdout)["sampled"]
    assert not sampled["differs"] and sampled["p_value"] > 0.01 and sampled["alpha"] == 0.01
    assert len(off.requests) == len(spec.requests) == 8 * 8
    assert {r["body"]["temperature"] for r in spec.requests} == {1.0}


def test_the_cpu_sampling_defect_is_flagged_with_its_numbers(prompts):
    """The shape vLLM CPU 0.32 showed: the target alone says '!' every time, with P-EAGLE 1.1% of the time."""
    with FakeVllm(answer=lambda body: ["!"] * 16, **OFF) as off, FakeVllm(answer=_sampler(0.011, 3)) as spec:
        res = agree(off, spec, prompts, "--temperature", "0,1", "--samples", "8", "-c", "1")
    assert res.code == 6
    doc = json.loads(res.stdout)
    [sampled] = doc["sampled"]
    assert sampled["differs"] and sampled["p_value"] == pytest.approx(1 / 1000)  # the smallest p of 999 shuffles
    assert sampled["baseline_top"] == "!" and sampled["baseline_top_share"] == 1.0
    assert sampled["candidate_top_share"] < 0.05
    assert any("DIFFERENT distributions at temperature 1" in w for w in doc["warnings"])


def test_the_warning_and_the_summary_give_one_verdict(prompts):
    """Issue 37 item 8: the warning said "far above noise" and the summary "far below noise" for one result."""
    with FakeVllm(TOKENS, **OFF) as off, FakeVllm(answer=lambda body: TOKENS[:2] + [" wrong"] * 18) as spec:
        res = run_cli("bench", "agree", off.url, spec.url, "--dataset", prompts, "-n", "8")
    assert res.code == 6
    [warning] = [line for line in res.stderr.splitlines() if "OUTPUT CHANGED" in line]
    [summary] = [line for line in res.stdout.splitlines() if "temperature 0:" in line]
    assert summary.endswith(": beyond noise") and ": beyond noise, divergence rate" in warning
    assert "far" not in warning + summary and "below" not in warning + summary


# the two targets, checked before any request (issue 37 item 3) ------------------------------------------------

def test_a_speculative_baseline_is_refused_before_any_request(prompts):
    with FakeVllm(TOKENS) as k3, FakeVllm(TOKENS, **OFF) as off:
        refused = run_cli("bench", "agree", k3.url, off.url, "--dataset", prompts, "-n", "8")
        assert k3.requests == [] and off.requests == []  # nothing was sent to either
        both = agree(k3, off, prompts, "--allow-speculative-baseline")
    assert refused.code == 2 and refused.stderr.count("\n") == 1, refused.stderr
    assert refused.stderr.startswith(f"error: the baseline {k3.url} runs speculative decoding (speculative K=3, read "
                                     f"from {k3.url}/metrics (3 per-position series))")
    assert "--allow-speculative-baseline" in refused.stderr
    assert both.code == 0, both.stderr  # on purpose: two servers compared with each other, and said so
    doc = json.loads(both.stdout)
    assert doc["baseline_check"]["baseline"] == "speculative" and doc["baseline_server"]["k"] == 3
    assert "not that either matches the target alone" in both.stderr


def test_a_baseline_equal_to_the_candidate_is_refused_in_any_spelling(prompts):
    with FakeVllm(TOKENS, **OFF) as off:
        port = off.url.rsplit(":", 1)[1]
        for other in (off.url, off.url + "/v1", f"http://localhost:{port}/invocations"):
            res = run_cli("bench", "agree", off.url, other, "--dataset", prompts, "-n", "8")
            assert res.code == 2 and res.stderr.count("\n") == 1, (other, res.stderr)
            assert "BASELINE and CANDIDATE are the same target" in res.stderr and "--allow-same-target" in res.stderr
        assert off.requests == []
        floor = run_cli("bench", "agree", off.url, off.url, "--dataset", prompts, "-n", "8", "--allow-same-target")
    assert floor.code == 0, floor.stderr  # a noise floor, on purpose: said to be one
    assert floor.stdout.strip().splitlines()[-1] == ("agreement: ok (one server against itself: its noise floor, "
                                                     "not speculation)")


def test_the_baseline_read_as_off_is_said_and_recorded(prompts):
    with FakeVllm(TOKENS, **OFF) as off, FakeVllm(TOKENS) as spec:
        res = run_cli("bench", "agree", off.url, spec.url, "--dataset", prompts, "-n", "8")
        doc = json.loads(agree(off, spec, prompts).stdout)
    assert res.code == 0, res.stderr
    assert f"note: baseline {off.url}: off, read from {off.url}/metrics (vLLM metrics, no spec-decode series)" \
        in res.stderr
    assert res.stdout.strip().splitlines()[-1] == "agreement: ok"
    assert doc["baseline_check"]["baseline"] == "off" and doc["baseline_server"]["speculative"] is False
    assert doc["candidate_server"]["speculative"] is True and doc["candidate_server"]["k"] == 3


def test_a_baseline_whose_facts_cannot_be_read_is_used_and_said_to_be_unverified(prompts):
    with FakeVllm(TOKENS) as plain, FakeVllm(TOKENS) as spec:
        plain.metrics_text = lambda: "process_cpu_seconds_total 1.0\n"  # a server that is not vLLM
        res = run_cli("bench", "agree", plain.url, spec.url, "--dataset", prompts, "-n", "8")
    assert res.code == 0, res.stderr
    [line] = [ln for ln in res.stderr.splitlines() if "not verified" in ln]
    assert line.startswith(f"note: the baseline {plain.url} was not verified to run without speculation (") \
        and "shows no vLLM metrics" in line
    assert res.stdout.strip().splitlines()[-1] == ("agreement: ok (the baseline was not verified to run without "
                                                   "speculation)")


def test_endpoints_are_checked_by_their_served_config(emu, monkeypatch, prompts):
    from tests.test_bench_sagemaker import served

    for key, value in emu.env.items():
        if key.startswith("AWS_"):
            monkeypatch.setenv(key, value)
    emu.create_endpoint_stack("spec-ep", environment=served(3))
    emu.create_endpoint_stack("off-ep")
    emu.calls.clear()
    speculative = run_cli("bench", "agree", "spec-ep", "off-ep", "--dataset", prompts, "-n", "2")
    same = run_cli("bench", "agree", "off-ep", "off-ep", "--dataset", prompts, "-n", "2")
    missing = run_cli("bench", "agree", "gone-ep", "spec-ep", "--dataset", prompts, "-n", "2")
    assert not [c for c in emu.calls if c.startswith("Invoke")]  # no request reached either endpoint
    assert speculative.code == 2 and speculative.stderr.count("\n") == 1, speculative.stderr
    assert speculative.stderr.startswith("error: the baseline spec-ep runs speculative decoding (p-eagle K=3, read "
                                         "from served config of spec-ep (spec-ep: SM_VLLM_SPECULATIVE_CONFIG))")
    assert same.code == 2 and "same target (off-ep)" in same.stderr
    assert missing.code == 2 and "endpoint 'gone-ep' not found" in missing.stderr
    ok = run_cli("bench", "agree", "off-ep", "spec-ep", "--dataset", prompts, "-n", "2", "--json")
    assert ok.code == 0, ok.stderr
    assert json.loads(ok.stdout)["baseline_check"]["baseline"] == "off"
    assert "note: baseline off-ep: off, read from served config of off-ep" in ok.stderr


def test_progress_counts_the_requests(prompts):
    """Issue 37 item 7: `bench agree` said nothing while its requests ran (544 with --temperature 0,1)."""
    with FakeVllm(TOKENS, **OFF) as off, FakeVllm(TOKENS) as spec:
        res = run_cli("bench", "agree", off.url, spec.url, "--dataset", prompts, "-n", "8")
    assert res.code == 0, res.stderr
    # off a terminal: Output.status's plain lines (a spinner with the same text on one)
    assert "agreement: 1/16 requests answered" in res.stderr.splitlines()


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


# structured output (issue 46): the checks again with a JSON schema as response_format -----------------------------
SCHEMA = {"type": "object", "properties": {"n": {"type": "integer"}, "ok": {"type": "boolean"}},
          "required": ["n", "ok"]}


def _structured(broken: bool = False):
    """Answers that follow the request: a JSON document when it asks for a schema (wrong from token 1 if `broken`),
    plain tokens otherwise."""
    def answer(body):
        if body.get("response_format"):
            return ["{", '"n"', ":", "7" if not broken else "8", ",", '"ok"', ":", "true", "}"]
        return TOKENS
    return answer


def test_a_json_schema_runs_every_check_again_with_it_as_response_format(prompts, tmp_path):
    schema = tmp_path / "answer-schema.json"
    schema.write_text(json.dumps(SCHEMA))
    with FakeVllm(answer=_structured(), **OFF) as off, FakeVllm(answer=_structured()) as spec:
        res = agree(off, spec, prompts, "--json-schema", str(schema))
        sent = [r["body"].get("response_format") for r in spec.requests]
    assert res.code == 0, res.stderr
    doc = json.loads(res.stdout)
    assert doc["greedy"]["verdict"] == "identical" and doc["greedy"]["mean_common_prefix"] == 20.0
    structured = doc["structured"]
    assert structured["schema_name"] == "answer-schema" and structured["greedy"]["verdict"] == "identical"
    assert (structured["answers"], structured["baseline_json"], structured["candidate_json"]) == (8, 8, 8)
    assert sent == [None] * 8 + [{"type": "json_schema", "json_schema": {"name": "answer-schema", "schema": SCHEMA}}] * 8
    assert "agreement: 8 prompts" in res.stderr and "each also with --json-schema" in res.stderr


def test_outputs_that_change_only_under_the_schema_fail_the_check(prompts, tmp_path):
    schema = tmp_path / "s.json"
    schema.write_text(json.dumps(SCHEMA))
    with FakeVllm(answer=_structured(), **OFF) as off, FakeVllm(answer=_structured(broken=True)) as spec:
        res = run_cli("bench", "agree", off.url, spec.url, "--dataset", prompts, "-n", "8", "--json-schema",
                      str(schema))
    assert res.code == 6, res.stderr
    assert "temperature 0: 100% identical (8/8)" in res.stdout  # without the schema: the same
    assert "with the schema, temperature 0: 0% identical (0/8)" in res.stdout and "agreement: FAILED" in res.stdout
    [warning] = [line for line in res.stderr.splitlines() if "OUTPUT CHANGED" in line]
    assert "with JSON-schema output (s) at temperature 0" in warning


@pytest.mark.parametrize("content,message", [(None, "--json-schema {path} not found"),
                                             ("{", "is not a JSON file"), ("[1]", "is not a JSON Schema object"),
                                             ("{}", "is not a JSON Schema object")])
def test_a_bad_schema_file_is_one_line_before_any_request(prompts, tmp_path, content, message):
    path = tmp_path / "schema.json"
    if content is not None:
        path.write_text(content)
    with FakeVllm(TOKENS, **OFF) as off, FakeVllm(TOKENS) as spec:
        res = run_cli("bench", "agree", off.url, spec.url, "--dataset", prompts, "--json-schema", str(path))
        assert off.requests == [] and spec.requests == []
    assert res.code == 2 and res.stderr.count("\n") == 1, res.stderr
    assert message.format(path=path) in res.stderr


# issue 49 item 3: a false "OUTPUT CHANGED" for equal texts streamed in different chunkings ---------------------

HELLO = ["Hello", ",", " wörld", " ✓", "!"]  # what the emulator's endpoints answer, one token per chunk


def _sample(answers: list[list[str]], unit: str = "tokens") -> OutputSample:
    return OutputSample(target="t", temperature=0.0, max_tokens=32, unit=unit,
                        answers=[[Answer(tokens=tokens, text="".join(tokens))] for tokens in answers])


def test_equal_texts_in_any_chunking_are_identical():
    """A speculative server streams several tokens per chunk: equal texts, however they are cut, are equal."""
    one_char = list("".join(HELLO))
    greedy = greedy_agreement(_sample([HELLO, HELLO]), _sample([one_char, HELLO[:2] + [" wörld ✓!"]]))
    assert (greedy.identical, greedy.identical_share, greedy.verdict, greedy.divergences) == (2, 1.0, "identical", [])
    assert greedy.mean_common_prefix == greedy.mean_baseline_length


def test_a_real_divergence_in_another_chunking_is_still_found_where_it_is():
    changed = greedy_agreement(_sample([HELLO]), _sample([list("Hello, world!")]))
    assert changed.identical == 0 and changed.unit == "characters"
    assert [(d.position, d.baseline, d.candidate) for d in changed.divergences] == [(8, "ö", "o")]


def test_answers_in_any_order_some_without_logprobs_agree(prompts):
    """The baseline answers whole tokens but some of its answers come without logprobs (the emulator's answer when
    two requests crossed), the candidate answers one character per token, in reverse order: every text is the
    baseline's, so the outputs are identical (a sample with answers of both kinds is compared by characters)."""
    import time

    def some_without_logprobs(body: dict) -> list[str]:
        if _prompt(body) % 3 == 0:
            body.pop("logprobs", None)  # this answer comes without logprobs
        return list(HELLO)

    def reversed_chunks(body: dict) -> list[str]:
        time.sleep(0.02 * (8 - _prompt(body)))  # later prompts answer first
        return list("".join(HELLO))

    with FakeVllm(answer=some_without_logprobs, **OFF) as off, FakeVllm(answer=reversed_chunks) as spec:
        res = agree(off, spec, prompts)
    assert res.code == 0, res.stderr
    greedy = json.loads(res.stdout)["greedy"]
    assert (greedy["identical_share"], greedy["verdict"], greedy["divergences"]) == (1.0, "identical", []), greedy
    assert "OUTPUT CHANGED" not in res.stderr


def test_the_emulator_answers_each_request_with_its_own_logprobs(emu):
    """The emulated endpoint read the LAST request's body for `logprobs`: two requests at once (a sweep's agreement
    check beside a bench) got each other's answer shape."""
    from concurrent.futures import ThreadPoolExecutor

    run_cli("deploy", "qwen3-coder", "--name", "ep", "--role", emu.role_arn, "--yes", env=emu.env)
    runtime = emu.client("sagemaker-runtime")

    def invoke(logprobs: bool) -> dict:
        body = {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 8, "logprobs": logprobs}
        answer = runtime.invoke_endpoint(EndpointName="ep", Body=json.dumps(body), ContentType="application/json")
        return json.loads(answer["Body"].read())

    gate = emu.gate("InvokeEndpoint")  # the first request is held after the emulator read it
    with ThreadPoolExecutor(1) as pool:
        held = pool.submit(invoke, True)
        gate.wait_entered()
        assert "logprobs" not in invoke(False)["choices"][0]  # the second, without logprobs, meanwhile
        gate.release()
        assert [t["token"] for t in held.result()["choices"][0]["logprobs"]["content"]] == HELLO
