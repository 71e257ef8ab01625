"""Acceptance per request (issue 46): vLLM 0.29+'s `metrics.speculative_decoding` parsed from a JSON answer and from
the usage chunk of a stream (split anywhere), its distribution over a bench run (p10/p50/p90, the histogram of
accepted drafts per step) beside the aggregate, and `invoke --json` carrying it, over a container URL, an OpenAI URL
(FakeVllm) and InvokeEndpoint (the emulator). Real vLLM: tests/real_vllm/test_speculative.py."""

from __future__ import annotations

import json
import math
import statistics
from pathlib import Path

import pytest

from peagle_deploy.bench.records import RequestRecord
from peagle_deploy.bench.request_acceptance import RequestAcceptanceTally
from peagle_deploy.bench.stats import LatencySamples
from peagle_deploy.runtime import PeagleClient, build_request
from peagle_deploy.runtime.spec_metrics import parse_spec_metrics, raw_spec_metrics
from peagle_deploy.runtime.sse import ChunkTally
from peagle_deploy.testing.fake_vllm import FakeVllm
from peagle_deploy.testing.streaming import spec_decoding_metrics

from .cli_runner import run_cli

RECORDED = json.loads((Path(__file__).parent / "fixtures" / "vllm" / "per_request_metrics.json").read_text())
# accepted drafts per position out of FakeVllm's 4 drafts per request, one pattern per request in turn
CYCLE = [(4, 4, 4), (0, 0, 0), (2, 1, 0), (4, 2, 1), (3, 3, 3)]


def test_vllms_recorded_answer_parses_as_sent():
    """vLLM 0.32.0's own non-streamed answer: metrics.speculative_decoding beside null timing fields."""
    parsed = parse_spec_metrics(raw_spec_metrics(RECORDED["chat_completion"]))
    assert parsed.mean_acceptance_length == 2.0 and parsed.acceptance_histogram == [0, 12, 0, 0]
    assert (parsed.num_spec_steps, parsed.num_accepted_draft_tokens, parsed.num_draft_tokens, parsed.num_spec_tokens) \
        == (12, 12, 36, 3)
    assert parsed.draft_acceptance_rate == pytest.approx(1 / 3)
    assert parse_spec_metrics(raw_spec_metrics({"metrics": {"speculative_decoding": {"mean": 2}}})) is None
    assert raw_spec_metrics({"metrics": None}) is None and raw_spec_metrics([]) is None


@pytest.mark.parametrize("step", [1, 7, 64, 100_000])
def test_the_usage_chunk_of_vllms_stream_reaches_the_record_split_anywhere(step):
    stream = RECORDED["stream"].encode()
    rec = RequestRecord(index=0, warmup=False)
    tally = ChunkTally(rec)
    for at in range(0, len(stream), step):
        tally.feed(stream[at:at + step], float(at))
    tally.finish(1.0)
    assert rec.usage_tokens == 24 and rec.spec_decoding["acceptance_histogram"] == [0, 12, 0, 0]


def test_the_tally_weights_by_drafts_and_gives_each_request_one_value():
    tally = RequestAcceptanceTally()
    answers = [spec_decoding_metrics(h) for h in ([0, 0, 0, 10], [10, 0, 0, 0], [0, 4, 0, 0], [1, 1, 1, 1])]
    for answer in answers:
        tally.add(answer)
    tally.add(None)  # an answer without it
    tally.add(spec_decoding_metrics([0, 0, 0, 0]))  # no verification step: vLLM says 1.0, not a measurement
    tally.add({"mean_acceptance_length": "x"})  # not vLLM's shape: counted as without
    s = tally.summary()
    assert (s.requests, s.requests_without, s.requests_without_steps, s.k) == (5, 2, 1, 3)
    assert s.steps == 28 and s.accepted_tokens == 30 + 0 + 4 + 6
    assert s.mean_acceptance_length == pytest.approx(1 + 40 / 28)  # weighted by drafts, as vLLM's counters
    assert s.histogram == [11, 5, 1, 11] and s.histogram_share == [round(n / 28, 6) for n in (11, 5, 1, 11)]
    lengths = [4.0, 1.0, 2.0, 2.5]
    cuts = statistics.quantiles(lengths, n=100, method="inclusive")  # numpy's default (linear), vllm bench serve's
    d = s.distribution
    assert (d.count, d.p10, d.p50, d.p90, d.min, d.max) == (4, cuts[9], cuts[49], cuts[89], 1.0, 4.0)
    assert d.mean == pytest.approx(statistics.fmean(lengths))
    assert RequestAcceptanceTally().summary() is None


def test_percentiles_past_the_exact_bound_come_from_the_hdr_histogram_within_a_tenth_of_a_percent():
    """Exact (numpy's linear rule) up to the bound; past it HdrHistogram's value at the percentile's rank, within 0.1%
    of the sample there (3 significant digits), as every latency of bench (docs/bench.md)."""
    exact, bounded = LatencySamples(), LatencySamples(exact_limit=100)
    values = [1 + (i * 7919 % 1000) / 333 for i in range(5000)]
    for v in values:
        exact.add(v)
        bounded.add(v)
    want, got = exact.percentiles((10, 50, 90)), bounded.percentiles((10, 50, 90))
    assert want == {p: statistics.quantiles(values, n=100, method="inclusive")[p - 1] for p in (10, 50, 90)}
    ranked = sorted(values)
    for p in (10, 50, 90):
        at = math.ceil(p / 100 * len(ranked)) - 1  # the nearest rank HdrHistogram reports
        assert ranked[at - 1] * (1 - 1e-3) <= got[p] <= ranked[at + 1] * (1 + 1e-3), (p, got[p], ranked[at])
    one = LatencySamples()
    one.add(2.5)
    assert one.percentiles((10, 90)) == {10: 2.5, 90: 2.5} and LatencySamples().percentiles((50,)) == {}


def test_beside_sets_the_aggregate_and_the_difference():
    from peagle_deploy.bench.acceptance import Acceptance

    tally = RequestAcceptanceTally()
    tally.add(spec_decoding_metrics([0, 4, 0, 0]))
    s = tally.summary().beside(Acceptance(source="prometheus:http://h/metrics", mean_acceptance_length=2.25))
    assert (s.aggregate_mean_acceptance_length, s.aggregate_source, s.difference) == (2.25, "prometheus:http://h/metrics",
                                                                                      -0.25)
    assert s.lines()[-1] == "  aggregate 2.250 (prometheus:http://h/metrics); difference -0.250"


def bench(server, tmp_path, *extra):
    result = run_cli("bench", "run", server.url, "-c", "1,2", "-n", "5", "--warmup", "1", "--no-chart", "-o",
                     str(tmp_path), *extra)
    assert result.code == 0, result.stderr
    return result


def test_bench_reports_the_distribution_beside_the_aggregate_and_they_agree(tmp_path):
    """FakeVllm as vLLM 0.29+: every answer carries its own acceptance, /metrics counts the same drafts, so the
    per-request figure weighted by drafts equals the aggregate over the same (measured) requests."""
    with FakeVllm(per_request_metrics=True, acceptance_cycle=CYCLE) as server:
        doc = json.loads(bench(server, tmp_path, "--json").stdout)["result"]
    per_request, aggregate = doc["request_acceptance"], doc["acceptance"]
    assert per_request["requests"] == 10 and per_request["requests_without"] == 0  # 5 per level, warm-up left out
    assert per_request["steps"] == aggregate["drafts"] == 40
    assert per_request["accepted_tokens"] == aggregate["accepted_tokens"]
    assert per_request["mean_acceptance_length"] == pytest.approx(aggregate["mean_acceptance_length"], abs=1e-12)
    assert per_request["difference"] == 0 and per_request["aggregate_source"].startswith("prometheus:")
    assert per_request["source"].startswith("each answer's metrics.speculative_decoding")
    # requests 1-5 then 7-11 (0 and 6 warm up): patterns 1, 2, 3, 4, 0 and 2, 3, 4, 0, 1
    lengths = sorted(1 + sum(CYCLE[n % 5]) / 4 for n in [*range(1, 6), *range(7, 12)])
    cuts = statistics.quantiles(lengths, n=100, method="inclusive")
    assert [per_request["distribution"][p] for p in ("p10", "p50", "p90")] == [cuts[9], cuts[49], cuts[89]]
    assert per_request["histogram"] == [sum(server.spec_decoding(n)["acceptance_histogram"][j]
                                            for n in [*range(1, 6), *range(7, 12)]) for j in range(4)]
    markdown = next(tmp_path.glob("bench-*.md")).read_text()
    assert "per-request acceptance (5 answers" not in markdown and "per-request acceptance (10 answers" in markdown
    assert f"per request: p10 {cuts[9]:.2f}, p50 {cuts[49]:.2f}, p90 {cuts[89]:.2f}" in markdown


def test_bench_human_output_names_each_source_and_says_when_answers_carry_none(tmp_path):
    with FakeVllm(per_request_metrics=True, acceptance_cycle=CYCLE) as server:
        human = bench(server, tmp_path / "on", "--mode", "p-eagle", "--k", "3")
    lines = human.stdout.splitlines()
    first = next(i for i, line in enumerate(lines) if line.startswith("per-request acceptance"))
    assert "read from each answer's metrics.speculative_decoding" in lines[first]
    assert lines[first + 1].startswith("  per request: p10 ") and lines[first + 2].startswith(
        "  steps by drafts accepted: 0: ")
    assert lines[first + 3].startswith("  aggregate ") and "(prometheus:http://127.0.0.1:" in lines[first + 3]
    with FakeVllm() as server:  # a vLLM before 0.29, or started without the flag
        without = run_cli("bench", "run", server.url, "-c", "1", "-n", "3", "--warmup", "0", "--no-chart", "-o",
                          str(tmp_path / "off"), "--json")
    assert without.code == 0 and json.loads(without.stdout)["result"]["request_acceptance"] is None
    assert "note: per-request acceptance: no answer carried metrics.speculative_decoding" in without.stderr


@pytest.mark.parametrize("suffix", ["", "/v1"])
@pytest.mark.parametrize("stream", [True, False])
def test_invoke_json_carries_the_answers_acceptance(suffix, stream):
    with FakeVllm(per_request_metrics=True, acceptance_cycle=[(3, 2, 1)]) as server:
        result = run_cli("invoke", server.url + suffix, "hi", "--json", "--stream" if stream else "--no-stream")
        human = run_cli("invoke", server.url + suffix, "hi", "--stream" if stream else "--no-stream")
    assert result.code == 0, result.stderr
    doc = json.loads(result.stdout)
    assert doc["acceptance"] == {**spec_decoding_metrics([1, 1, 1, 1]), "mean_acceptance_length": 2.5}
    assert doc["response"]["metrics"]["speculative_decoding"]["acceptance_histogram"] == [1, 1, 1, 1]
    assert ("acceptance of this request (the server's metrics.speculative_decoding): mean acceptance length 2.50 "
            "over 4 steps (K=3, accepted 6 of 12 drafted, steps by accepted drafts [1, 1, 1, 1])") in human.stderr


def test_n_above_one_gets_none_as_vllm_sends_none():
    with FakeVllm(per_request_metrics=True) as server:
        request = build_request("hi").model_copy(update={"n": 2})
        assert PeagleClient(server.url).chat(request).acceptance is None


@pytest.fixture
def endpoint(emu):
    emu.create_endpoint_stack("ep")
    emu.runtime.spec_decoding = spec_decoding_metrics([2, 5, 0, 9])
    return emu


@pytest.mark.parametrize("stream", [True, False])
def test_invoke_endpoint_passes_it_through_as_the_container_sends_it(endpoint, stream):
    """InvokeEndpoint (a JSON body) and InvokeEndpointWithResponseStream (SSE in PayloadParts split every 7 bytes)."""
    result = run_cli("invoke", "ep", "hi", "--json", "--stream" if stream else "--no-stream", env=endpoint.env)
    assert result.code == 0, result.stderr
    acceptance = json.loads(result.stdout)["acceptance"]
    assert acceptance["acceptance_histogram"] == [2, 5, 0, 9] and acceptance["num_spec_steps"] == 16
    assert acceptance["mean_acceptance_length"] == pytest.approx(1 + 32 / 16)
