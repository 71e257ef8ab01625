"""The parts of `peagle bench` that need no server: statistics, datasets, cost, advisor, compare, files."""

from __future__ import annotations

import json
from datetime import datetime, timezone

import pytest

from peagle_deploy.bench.advisor import advise, to_conditional
from peagle_deploy.bench.compare import compare_results, read_published
from peagle_deploy.pricing import instance_price, usd_per_million_tokens
from peagle_deploy.bench.datasets import load_dataset, parse_jsonl
from peagle_deploy.bench.results import BenchResult, LevelResult, Settings, TargetInfo, read_result, write_result
from peagle_deploy.bench.stats import summarize, time_weighted_mean
from peagle_deploy.errors import UsageError
from tests.cli_runner import run_cli

# statistics --------------------------------------------------------------------------------------


def test_percentiles_follow_numpy_linear_convention():
    s = summarize([float(x) for x in range(1, 101)])
    # numpy.percentile(range(1, 101), q) = 1 + 0.99 * q
    assert (s.p50, s.p90, s.p95, s.p99) == pytest.approx((50.5, 90.1, 95.05, 99.01))
    assert s.mean == pytest.approx(50.5) and s.count == 100 and (s.min, s.max) == (1, 100)


def test_summary_of_one_and_none_and_scaling():
    assert summarize([]).count == 0 and summarize([]).mean is None
    one = summarize([0.25], scale=1000)
    assert one.p99 == one.mean == 250


def test_time_weighted_in_flight():
    changes = [(0.0, 1), (1.0, 2), (3.0, 1), (4.0, 0)]
    assert time_weighted_mean(changes, 0.0, 4.0) == pytest.approx((1 + 4 + 1) / 4)
    assert time_weighted_mean(changes, 2.0, 3.0) == pytest.approx(2)  # level before the window carries in
    assert time_weighted_mean(changes, 3.5, 6.0) == pytest.approx(0.5 / 2.5)


# datasets ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["humaneval", "code", "chat"])
def test_builtin_datasets_load(name):
    ds = load_dataset(name)
    assert len(ds) >= 20 and all(m[-1]["role"] == "user" and m[-1]["content"] for m in ds.prompts)


def test_jsonl_prompt_and_messages_forms(tmp_path):
    f = tmp_path / "mine.jsonl"
    f.write_text(
        '{"prompt": "hi"}\n\n{"messages": [{"role": "system", "content": "be brief"},'
        ' {"role": "user", "content": "yo"}]}\n'
    )
    ds = load_dataset(str(f))
    assert ds.name == "mine" and ds.prompts[0] == [{"role": "user", "content": "hi"}] and len(ds.prompts[1]) == 2


@pytest.mark.parametrize(
    "line, expected",
    [
        ('{"prompt": ""}', "line 2: prompt: String should have at least 1 character"),
        ('{"text": "x"}', 'line 2 has no "prompt" or "messages" key (it has: text)'),
        (
            '{"prompt": "a", "messages": [{"role": "user", "content": "b"}]}',
            'line 2: give exactly one of "prompt" or "messages"',
        ),
        ('{"messages": [{"role": "robot", "content": "b"}]}', "line 2: messages.0.role"),
        ("not json", "line 2 is not valid JSON"),
        ('["a"]', "line 2 is not a JSON object"),
    ],
)
def test_jsonl_errors_name_the_line(line, expected):
    with pytest.raises(UsageError) as info:
        parse_jsonl('{"prompt": "ok"}\n' + line + "\n", "p.jsonl")
    assert expected in str(info.value) and "\n" not in str(info.value)


def test_bench_with_bad_jsonl_exits_2_with_one_line(tmp_path):
    f = tmp_path / "bad.jsonl"
    f.write_text('{"prompt": "ok"}\n{"prompt": 3}\n')
    res = run_cli("bench", "http://127.0.0.1:9", "--dataset", str(f), "--duration", "1")
    assert res.code == 2
    assert res.stderr.startswith("error: bad.jsonl line 2: prompt:") and res.stderr.count("\n") == 1


def test_bench_with_missing_dataset_and_bad_concurrency_exit_2(tmp_path):
    assert run_cli("bench", "http://127.0.0.1:9", "--dataset", str(tmp_path / "none.jsonl")).code == 2
    res = run_cli("bench", "http://127.0.0.1:9", "--concurrency", "1,x")
    assert res.code == 2 and "pass e.g. --concurrency 1,4,8,32" in res.stderr
    res = run_cli("bench", "not a name!", "--duration", "1")
    assert res.code == 2 and "neither a URL nor a SageMaker endpoint name" in res.stderr


# cost --------------------------------------------------------------------------------------------


def _price_list(usd: str) -> str:
    return json.dumps(
        {
            "product": {"productFamily": "ML Instance", "attributes": {"instanceName": "ml.g7e.2xlarge"}},
            "terms": {
                "OnDemand": {
                    "SKU.TERM": {"priceDimensions": {"SKU.TERM.DIM": {"unit": "Hrs", "pricePerUnit": {"USD": usd}}}}
                }
            },
        }
    )


def test_price_from_pricing_api_with_stubber():
    import boto3
    from botocore.stub import ANY, Stubber

    client = boto3.client(
        "pricing", region_name="us-east-1", aws_access_key_id="testing", aws_secret_access_key="testing"
    )
    with Stubber(client) as stub:
        stub.add_response(
            "get_products",
            {"PriceList": [_price_list("4.2043")], "FormatVersion": "aws_v1"},
            {"ServiceCode": "AmazonSageMaker", "Filters": ANY, "FormatVersion": "aws_v1"},
        )
        price = instance_price("ml.g7e.2xlarge", "us-west-2", count=2, pricing_client=client)
    assert price.usd_per_hour == pytest.approx(8.4086) and not price.estimate
    assert price.source == "aws-pricing-api" and price.usd_per_day == pytest.approx(8.4086 * 24, abs=0.01)
    assert {f["Field"]: f["Value"] for f in price.query.Filters} == {
        "productFamily": "ML Instance", "platoinstancetype": "Hosting", "regionCode": "us-west-2",
        "instanceName": "ml.g7e.2xlarge"}


def test_price_is_unknown_with_a_hint_when_the_api_refuses():
    import boto3
    from botocore.stub import Stubber

    client = boto3.client(
        "pricing", region_name="us-east-1", aws_access_key_id="testing", aws_secret_access_key="testing"
    )
    with Stubber(client) as stub:
        stub.add_client_error("get_products", "AccessDeniedException")
        price = instance_price("ml.g7e.2xlarge", "us-east-1", pricing_client=client)
    # no SageMaker hosting figure for ml.g7e is shipped (none published with a source): unknown, never EC2's
    assert price.usd_per_hour is None and price.source == "unknown"
    assert "pricing:GetProducts" in price.hint and "ml.g7e.2xlarge" in price.hint


def test_dollars_per_million_tokens():
    assert usd_per_million_tokens(3.6, 1000.0) == pytest.approx(1.0)
    assert usd_per_million_tokens(None, 1000.0) is None and usd_per_million_tokens(3.6, 0) is None


# advisor -----------------------------------------------------------------------------------------


def test_advisor_expected_tokens_match_closed_form_for_constant_rate():
    a, k = 0.8, 5
    cumulative = [a**i for i in range(1, k + 1)]
    advice = advise(cumulative, kind="cumulative", verify_cost=0, draft_cost=0)
    assert advice.estimates[-1].expected_tokens_per_step == pytest.approx((1 - a ** (k + 1)) / (1 - a), abs=1e-4)
    assert advice.conditional_rates == pytest.approx([a] * k)


def test_advisor_p_eagle_prefers_deeper_k_than_eagle3():
    rates = [0.9, 0.78, 0.66, 0.55, 0.45, 0.36, 0.28, 0.21, 0.15, 0.1]
    p = advise(rates, mode="p-eagle", verify_cost=0.02, draft_cost=0.08)
    e = advise(rates, mode="eagle3", verify_cost=0.02, draft_cost=0.08)
    assert p.recommended_k > e.recommended_k
    assert any(f"K={p.recommended_k}" in line for line in p.explanation)


def test_advisor_rejects_bad_rates():
    with pytest.raises(UsageError):
        to_conditional([0.5, 0.7], "cumulative")  # cumulative rates cannot rise
    with pytest.raises(UsageError):
        advise([1.5])
    with pytest.raises(UsageError):
        advise([])


def test_advise_command_json():
    res = run_cli("bench", "advise", "--rates", "0.9,0.8,0.7", "--conditional", "--json")
    assert res.code == 0, res.stderr
    doc = json.loads(res.stdout)
    assert doc["rates_kind"] == "conditional" and len(doc["estimates"]) == 3


# results, compare, report ------------------------------------------------------------------------


def _result(
    mode: str, k: int | None, otps: dict[int, float], dataset: str = "humaneval", minute: int = 0
) -> BenchResult:
    from peagle_deploy.bench.stats import Summary

    levels = [
        LevelResult(
            concurrency=c,
            window_s=10,
            completed=10,
            output_tokens=int(v * 10),
            output_tokens_per_s=v,
            requests_per_s=1,
            mean_in_flight=c,
            concurrency_held=1.0,
            ttft_ms=Summary(),
            itl_ms=Summary(),
            tpot_ms=Summary(),
            e2e_ms=Summary(),
        )
        for c, v in otps.items()
    ]
    when = datetime(2026, 11, 22, 10, minute, tzinfo=timezone.utc)
    return BenchResult(
        tool_version="0",
        started_at=when,
        finished_at=when,
        target=TargetInfo(kind="container", name="http://x", mode=mode, k=k, mode_source="flags"),
        settings=Settings(
            dataset=dataset,
            dataset_source="built-in",
            num_prompts_in_dataset=24,
            max_tokens=256,
            temperature=0,
            warmup=None,
            duration_s=10,
            num_prompts=None,
        ),
        levels=levels,
    )


def test_compare_tables_speedups_and_peagle_vs_eagle3():
    runs = [
        _result("off", None, {1: 100, 8: 600}, minute=1),
        _result("p-eagle", 7, {1: 300, 8: 1500}, minute=2),
        _result("eagle3", 7, {1: 250, 8: 1250}, minute=3),
        _result("eagle3", 3, {1: 200, 8: 1300}, minute=4),
    ]
    (table,) = compare_results(runs)
    assert table.columns == ["p-eagle K=7", "eagle3 K=3", "eagle3 K=7", "off"]
    row1 = table.rows[0]
    assert row1.speedup_vs_off["p-eagle K=7"] == 3.0
    assert row1.peagle_vs_eagle3 == {"K=3": None, "K=7": 1.2, "best": 1.2}
    assert table.rows[1].peagle_vs_eagle3["best"] == pytest.approx(1500 / 1300, abs=1e-3)


def test_published_table_matches_the_quoted_ratios():
    tables = {t.dataset: t for t in read_published()}
    code = tables["speed-bench-code"]
    best = {r.concurrency: r.peagle_vs_eagle3["best"] for r in code.rows}
    assert best[1] == pytest.approx(1.41, abs=0.01) and best[128] == pytest.approx(1.02, abs=0.01)


def test_result_files_round_trip_and_schema_version_is_checked(tmp_path):
    path = write_result(_result("p-eagle", 3, {1: 10.0}), tmp_path)
    assert read_result(path).target.k == 3 and path.name.startswith("bench-p-eagle-K3-")
    data = json.loads(path.read_text())
    data["schema_version"] = 99
    path.write_text(json.dumps(data))
    with pytest.raises(UsageError, match="schema_version 99"):
        read_result(path)


def test_compare_command_writes_markdown_and_chart(tmp_path):
    a = write_result(_result("off", None, {1: 100, 8: 600}, minute=1), tmp_path)
    b = write_result(_result("p-eagle", 7, {1: 300, 8: 1500}, minute=2), tmp_path)
    res = run_cli(
        "bench", "compare", str(a), str(b), "--published", "aws-blog", "--out", str(tmp_path / "cmp"), "--json"
    )
    assert res.code == 0, res.stderr
    doc = json.loads(res.stdout)
    assert doc["tables"][0]["rows"][0]["speedup_vs_off"]["p-eagle K=7"] == 3.0
    assert {t["dataset"] for t in doc["published"]} == {"humaneval"}  # the runs' own data set only
    md = (tmp_path / "cmp" / "compare.md").read_text()
    assert "| 1 | 300 | 100 |" in md and "3.00x" in md
    pytest.importorskip("matplotlib")
    assert (tmp_path / "cmp" / "compare.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_compare_rejects_a_non_result_file(tmp_path):
    bad = tmp_path / "x.json"
    bad.write_text("{}")
    res = run_cli("bench", "compare", str(bad))
    assert res.code == 2 and "schema_version" in res.stderr


# who limited a level: the load generator (saturated) or the host (busy) ----------------------------------

def test_client_verdicts_from_the_event_loops_own_cpu_and_run_queue_times():
    from peagle_deploy.bench.runner import judge_client

    start = (100.0, 5.0, 2.0, 1000, 10)  # now, CPU s, run-queue s, sleeps, preemptions (the loop's thread)

    def after(cpu_s, wait_s, sleeps, preempted, window=10.0):
        return (start[0] + window, start[1] + cpu_s, start[2] + wait_s, start[3] + sleeps, start[4] + preempted)

    whole_core = judge_client(0.97, 3.0, start, after(9.7, 0.1, 5, 900))
    assert whole_core.saturated and whole_core.why == "it used 97% of a core"
    # a third of a core, waiting 60% of the window, preempted with work left in 3 of 4 turns: starved
    starved = judge_client(0.33, 9.4, start, after(3.3, 6.0, 50, 150))
    assert starved.saturated and not starved.host_busy and starved.loop_waiting == pytest.approx(0.6)
    assert starved.why.startswith("it was starved of CPU: other processes held its CPU 60% of the window")
    assert "taken off the CPU with work left in 75% of its turns" in starved.why
    # the same waiting with almost no work, finished in every turn: the host is busy, the client kept up
    idle = judge_client(0.002, 180.0, start, after(0.02, 7.0, 40, 2))
    assert not idle.saturated and idle.host_busy
    assert "it kept up (idle 30% of the window, 0.2% of a core)" in idle.why and "180 ms" in idle.why
    # what it could not send while it waited cost the server time too: never "the throughput is the server's"
    assert "throughput may be lower" in idle.why and "the throughput is the server's" not in idle.why
    # waiting nearly all the time yet doing nothing: slow to respond, never called "kept up" (no contradiction)
    waiting = judge_client(0.001, 300.0, start, after(0.01, 9.5, 15, 5))
    assert waiting.host_busy and not waiting.saturated and "kept up" not in waiting.why
    assert "slow to respond, not short of CPU" in waiting.why
    quiet = judge_client(0.2, 1.0, start, after(2.0, 0.1, 3000, 20))
    assert (quiet.saturated, quiet.host_busy, quiet.why) == (False, False, None)
    # no /proc/thread-self/schedstat: a late loop is reported, without blaming either side
    unknown = judge_client(0.05, 45.0, None, None)
    assert unknown.host_busy and not unknown.saturated and "cannot tell" in unknown.why


def test_no_client_verdict_on_a_window_too_short_to_give_one():
    """Issue 37 item 8: verdicts were given on 4-request windows (tens of ms: one lag sample or none, one
    scheduler delay a large share of the window). Under MIN_VERDICT_WINDOW_S there is none, and it says so."""
    from peagle_deploy.bench.runner import MIN_VERDICT_WINDOW_S, judge_client

    start = (100.0, 5.0, 2.0, 1000, 10)
    short = (100.03, 5.029, 2.001, 1001, 9 + 10)  # 30 ms: 97% of a core, preempted in 9 of 10 turns
    verdict = judge_client(0.97, 25.0, start, short)
    assert (verdict.judged, verdict.saturated, verdict.host_busy) == (False, False, False)
    assert verdict.why.startswith("no load-generator verdict: the window was 0.03 s, shorter than the 2 s")
    assert verdict.loop_busy is not None  # the readings are still kept
    assert not judge_client(0.97, 3.0, None, None, window_s=MIN_VERDICT_WINDOW_S - 0.01).judged
    enough = judge_client(0.97, 3.0, None, None, window_s=MIN_VERDICT_WINDOW_S)
    assert enough.judged and enough.saturated


def test_a_short_level_gets_no_client_verdict_and_one_line_saying_so(tmp_path):
    from peagle_deploy.testing.fake_vllm import FakeVllm

    with FakeVllm() as server:
        res = run_cli("bench", server.url, "-c", "1", "-n", "4", "--warmup", "0", "-d", "chat", "--no-chart",
                      "-o", str(tmp_path), "--json")
        human = run_cli("bench", server.url, "-c", "1", "-n", "4", "--warmup", "0", "-d", "chat", "--no-chart",
                        "-o", str(tmp_path / "human"))
    assert res.code == 0, res.stderr
    [level] = json.loads(res.stdout)["result"]["levels"]
    assert level["window_s"] < 2  # four requests to a loopback stand-in
    assert (level["client_judged"], level["client_saturated"], level["host_busy"]) == (False, False, False)
    [line] = [ln for ln in res.stderr.splitlines() if "verdict" in ln and ln.startswith("note:")]
    assert line.startswith("note: concurrency 1: no load-generator verdict: the window was ")
    assert "host busy" not in res.stderr and "could not keep up" not in res.stderr
    assert "no verdict" in human.stdout  # the client column
