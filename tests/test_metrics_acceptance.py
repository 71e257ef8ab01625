"""Acceptance from vLLM: the CloudWatch log parser on real-format lines, and the Prometheus diff."""

from __future__ import annotations

import json
import time
from datetime import datetime, timedelta, timezone

import pytest

from peagle_deploy.bench.acceptance import aggregate_intervals, parse_log_line, parse_prometheus
from peagle_deploy.bench.cloudwatch import read_cloudwatch, wait_for_acceptance
from peagle_deploy.errors import UsageError
from peagle_deploy.runtime.target_ref import parse_target
from peagle_deploy.testing.fake_vllm import FakeVllm
from tests.cli_runner import run_cli

# The exact format string of vllm/v1/spec_decode/metrics.py (SpecDecodingLogging.log), rendered with
# %-formatting as vLLM's logger does, behind vLLM's default log prefix "%(levelname)s %(asctime)s
# [%(filename)s:%(lineno)d] " (newer vLLM also prefixes "(APIServer pid=N) ").
VLLM_FORMAT = (
    "SpecDecoding metrics: Mean acceptance length: %.2f, Accepted throughput: %.2f tokens/s, "
    "Drafted throughput: %.2f tokens/s, Accepted: %d tokens, Drafted: %d tokens, "
    "Per-position acceptance rate: %s, Avg Draft acceptance rate: %.1f%%"
)


def vllm_line(drafts: int, per_pos_accepted: list[int], elapsed: float = 10.0, prefix: str = "") -> str:
    k = len(per_pos_accepted)
    accepted, drafted = sum(per_pos_accepted), drafts * k
    rates = ", ".join(f"{a / drafts:.3f}" for a in per_pos_accepted)
    msg = VLLM_FORMAT % (
        1 + accepted / drafts,
        accepted / elapsed,
        drafted / elapsed,
        accepted,
        drafted,
        rates,
        accepted / drafted * 100,
    )
    return f"{prefix}INFO 11-22 10:15:03 [metrics.py:94] {msg}"


def test_parses_a_real_format_line():
    line = vllm_line(drafts=1000, per_pos_accepted=[850, 700, 560])
    iv = parse_log_line(line, 1234)
    assert iv is not None
    assert (iv.accepted, iv.drafted, iv.timestamp_ms) == (2110, 3000, 1234)
    assert iv.mean_acceptance_length == pytest.approx(3.11)
    assert iv.per_position == [0.85, 0.7, 0.56]
    assert iv.drafts() == 1000


def test_parses_literal_line_with_process_prefix_and_ignores_other_lines():
    line = (
        "(APIServer pid=71) INFO 11-22 10:15:03 [metrics.py:94] SpecDecoding metrics: Mean acceptance length: "
        "3.94, Accepted throughput: 512.40 tokens/s, Drafted throughput: 1216.00 tokens/s, Accepted: 5124 tokens, "
        "Drafted: 12160 tokens, Per-position acceptance rate: 0.872, 0.701, 0.552, 0.421, 0.298, 0.201, 0.125, "
        "Avg Draft acceptance rate: 42.1%"
    )
    iv = parse_log_line(line)
    assert iv is not None and iv.accepted == 5124 and len(iv.per_position) == 7
    assert iv.drafts() == pytest.approx(12160 / 7)
    assert (
        parse_log_line("INFO 11-22 10:15:03 [loggers.py:123] Engine 000: Avg prompt throughput: 1.0 tokens/s") is None
    )
    assert parse_log_line("SpecDecoding metrics: nothing here") is None


def test_older_vllm_line_without_positions():
    iv = parse_log_line(
        "INFO 05-01 10:00:00 [metrics.py:60] SpecDecoding metrics: Draft acceptance rate: 50.0%, "
        "Accepted: 100 tokens, Drafted: 200 tokens"
    )
    assert iv is not None and (iv.accepted, iv.drafted, iv.per_position) == (100, 200, [])
    acc = aggregate_intervals([iv], "test")
    assert acc.acceptance_rate == pytest.approx(0.5)
    assert acc.mean_acceptance_length is None and acc.note


def test_aggregation_weights_intervals_by_drafts():
    a = parse_log_line(vllm_line(1000, [900, 800, 700]))
    b = parse_log_line(vllm_line(3000, [1500, 900, 300]))
    acc = aggregate_intervals([a, b], "test")
    assert acc.drafts == 4000 and acc.draft_tokens == 12000 and acc.accepted_tokens == 5100
    assert acc.mean_acceptance_length == pytest.approx(1 + 5100 / 4000)
    assert acc.acceptance_rate == pytest.approx(5100 / 12000)
    assert acc.per_position == pytest.approx([2400 / 4000, 1700 / 4000, 1000 / 4000])
    assert acc.per_position_conditional == pytest.approx([0.6, 1700 / 2400, 1000 / 1700], abs=1e-5)
    assert acc.k == 3


def _moto_logs(group: str, lines: list[str], base_ms: int):
    import boto3

    logs = boto3.client("logs", region_name="us-east-1")
    logs.create_log_group(logGroupName=group)
    logs.create_log_stream(logGroupName=group, logStreamName="AllTraffic/i-0123456789")
    events = [{"timestamp": base_ms + i * 10_000, "message": line} for i, line in enumerate(lines)]
    logs.put_log_events(logGroupName=group, logStreamName="AllTraffic/i-0123456789", logEvents=events)
    return logs


@pytest.fixture
def aws_env(monkeypatch):
    for name, value in {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_REGION": "us-east-1",
    }.items():
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("AWS_PROFILE", raising=False)
    monkeypatch.delenv("AWS_ENDPOINT_URL", raising=False)
    from moto import mock_aws

    with mock_aws():
        yield


def test_cloudwatch_window_reads_only_spec_lines_inside_it(aws_env):
    now_ms = int(time.time() * 1000) - 120_000
    lines = [
        "INFO 11-22 10:15:03 [loggers.py:123] Engine 000: Avg prompt throughput: 1.0 tokens/s",
        vllm_line(1000, [900, 800, 700]),
        vllm_line(3000, [1500, 900, 300]),
        vllm_line(10, [10, 10, 10]),  # at +30 s: outside the window below
    ]
    logs = _moto_logs("/aws/sagemaker/Endpoints/ep-1", lines, now_ms)
    start = datetime.fromtimestamp(now_ms / 1000, timezone.utc)
    acc = read_cloudwatch(logs, "ep-1", start, start + timedelta(seconds=25))
    assert acc.intervals == 2 and acc.accepted_tokens == 5100
    assert acc.mean_acceptance_length == pytest.approx(2.275)
    assert acc.source == "cloudwatch:/aws/sagemaker/Endpoints/ep-1"


def test_cloudwatch_missing_group_is_a_usage_error(aws_env):
    import boto3

    logs = boto3.client("logs", region_name="us-east-1")
    now = datetime.now(timezone.utc)
    with pytest.raises(UsageError, match="log group /aws/sagemaker/Endpoints/nope not found"):
        read_cloudwatch(logs, "nope", now - timedelta(minutes=5), now)


def test_metrics_command_reads_cloudwatch_as_json(emu_in_process):
    """Through the emulator (in this process): `metrics` first asks which inference components the endpoint
    hosts (ListInferenceComponents, which plain moto lacks); ep-2 hosts none, so its own group is read."""
    now_ms = int(time.time() * 1000) - 60_000
    _moto_logs("/aws/sagemaker/Endpoints/ep-2", [vllm_line(500, [400, 300])], now_ms)
    res = run_cli("metrics", "ep-2", "--since", "10m", "--advise", "--json")
    assert res.code == 0, res.stderr
    doc = json.loads(res.stdout)
    assert doc["acceptance"]["accepted_tokens"] == 700
    assert doc["acceptance"]["per_position"] == [0.8, 0.6]
    assert doc["advice"]["recommended_k"] in (1, 2)


def test_metrics_command_bad_window_exits_2():
    res = run_cli("metrics", "ep", "--start", "yesterday")
    assert res.code == 2 and res.stderr.count("\n") == 1 and "ISO 8601" in res.stderr


PROM_BEFORE = """# HELP vllm:spec_decode_num_drafts_total Number of spec decoding drafts.
# TYPE vllm:spec_decode_num_drafts_total counter
vllm:spec_decode_num_drafts_total{engine="0",model_name="m"} 100.0
# HELP vllm:spec_decode_num_draft_tokens_total Number of draft tokens.
# TYPE vllm:spec_decode_num_draft_tokens_total counter
vllm:spec_decode_num_draft_tokens_total{engine="0",model_name="m"} 300.0
# HELP vllm:spec_decode_num_accepted_tokens_total Number of accepted tokens.
# TYPE vllm:spec_decode_num_accepted_tokens_total counter
vllm:spec_decode_num_accepted_tokens_total{engine="0",model_name="m"} 150.0
# HELP vllm:spec_decode_num_accepted_tokens_per_pos_total Accepted tokens per draft position.
# TYPE vllm:spec_decode_num_accepted_tokens_per_pos_total counter
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",model_name="m",position="0"} 80.0
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",model_name="m",position="1"} 50.0
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",model_name="m",position="2"} 20.0
# HELP vllm:generation_tokens_total Number of generation tokens processed.
# TYPE vllm:generation_tokens_total counter
vllm:generation_tokens_total{engine="0",model_name="m"} 1000.0
"""


def _bump(text: str, deltas: dict[str, float]) -> str:
    out = []
    for line in text.splitlines():
        for key, delta in deltas.items():
            if line.startswith(key):
                name, value = line.rsplit(" ", 1)
                line = f"{name} {float(value) + delta}"
        out.append(line)
    return "\n".join(out) + "\n"


def test_prometheus_diff_gives_the_run_only():
    after = _bump(
        PROM_BEFORE,
        {
            "vllm:spec_decode_num_drafts_total": 1000,
            "vllm:spec_decode_num_draft_tokens_total": 3000,
            "vllm:spec_decode_num_accepted_tokens_total": 2100,
            'vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",model_name="m",position="0"}': 900,
            'vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",model_name="m",position="1"}': 700,
            'vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",model_name="m",position="2"}': 500,
            "vllm:generation_tokens_total": 3100,
        },
    )
    run = parse_prometheus(after).minus(parse_prometheus(PROM_BEFORE))
    assert (run.drafts, run.draft_tokens, run.accepted_tokens, run.generation_tokens) == (1000, 3000, 2100, 3100)
    acc = run.acceptance("prometheus:test")
    assert acc.mean_acceptance_length == pytest.approx(3.1)
    assert acc.acceptance_rate == pytest.approx(0.7)
    assert acc.per_position == pytest.approx([0.9, 0.7, 0.5])


def test_prometheus_sums_engines_and_flags_absent_counters():
    two = PROM_BEFORE.replace(
        'vllm:spec_decode_num_drafts_total{engine="0",model_name="m"} 100.0',
        'vllm:spec_decode_num_drafts_total{engine="0",model_name="m"} 100.0\n'
        'vllm:spec_decode_num_drafts_total{engine="1",model_name="m"} 40.0',
    )
    assert parse_prometheus(two).drafts == 140
    off = parse_prometheus("# TYPE vllm:num_requests_running gauge\nvllm:num_requests_running 0.0\n")
    assert not off.present
    assert "speculative decoding is off" in (off.acceptance("x").note or "")


def test_metrics_url_from_target_urls():
    assert parse_target("http://127.0.0.1:8080").metrics_url == "http://127.0.0.1:8080/metrics"
    assert parse_target("http://h:8000/v1/").metrics_url == "http://h:8000/metrics"
    assert parse_target("http://h:8080/invocations").metrics_url == "http://h:8080/metrics"
    assert parse_target("http://h:8000/v1/chat/completions").metrics_url == "http://h:8000/metrics"


def test_metrics_command_on_a_url_without_spec_counters_says_so():
    from tests.test_bench_paced import start_server

    proc, url = start_server("--tokens-per-s", "0", "--tokens", "3")
    try:
        res = run_cli("metrics", url + "/v1", "--window", "0s", "--json")
    finally:
        proc.terminate()
        proc.wait(timeout=10)
    assert res.code == 0, res.stderr
    acc = json.loads(res.stdout)["acceptance"]
    assert acc["source"] == f"prometheus:{url}/metrics" and acc["mean_acceptance_length"] is None
    assert "no vllm:spec_decode_* counters" in acc["note"] and "since the server started" in acc["note"]


def test_metrics_on_a_url_measures_a_window_between_two_scrapes(monkeypatch):
    """Traffic before the window is not counted: the totals since start would blend it in. The window's
    wait is injected: its traffic is sent between the two scrapes, whatever the machine's speed."""
    import functools

    from peagle_deploy.cli import metrics as metrics_cli
    from peagle_deploy.runtime import PeagleClient, build_request

    waited = []
    with FakeVllm(["a"]) as server:
        for _ in range(5):  # earlier traffic: in the totals, not in the window
            PeagleClient(server.url).chat(build_request("x"))

        def window_passes(seconds):  # one request inside the window
            waited.append(seconds)
            PeagleClient(server.url).chat(build_request("y"))

        monkeypatch.setattr(metrics_cli, "_url_window", functools.partial(metrics_cli._url_window, sleep=window_passes))
        res = run_cli("metrics", server.url + "/v1/chat/completions", "--window", "1s", "--json")
    assert waited == [1.0]
    assert res.code == 0, res.stderr
    acc = json.loads(res.stdout)["acceptance"]
    assert acc["drafts"] == 4 and acc["accepted_tokens"] == 6  # one request's worth, not six
    assert acc["window_start"] and acc["window_end"] and "two scrapes" in res.stderr


def test_metrics_since_on_a_url_is_refused():
    res = run_cli("metrics", "http://127.0.0.1:9", "--since", "5m")
    assert res.code == 2 and "--window" in res.stderr


def test_metrics_command_on_an_unreachable_url_exits_6():
    res = run_cli("metrics", "http://127.0.0.1:9")
    assert res.code == 6 and "cannot reach http://127.0.0.1:9/metrics" in res.stderr


def test_cloudwatch_polling_waits_for_a_line_after_the_run_without_sleeping(aws_env):
    start_ms = int(time.time() * 1000) - 120_000
    logs = _moto_logs("/aws/sagemaker/Endpoints/ep-3", [vllm_line(100, [90, 80])], start_ms)
    start = datetime.fromtimestamp(start_ms / 1000, timezone.utc)
    now = [0.0]
    slept = []

    def sleep(s):
        slept.append(s)
        now[0] += s

    window = [(start - timedelta(seconds=1), start + timedelta(seconds=30))]
    acc = wait_for_acceptance(logs, "ep-3", window, start + timedelta(seconds=20), wait=60, clock=lambda: now[0],
                              sleep=sleep)
    assert acc.accepted_tokens == 170 and slept == [5.0] * 12  # no line after the run's end: waited it out
    acc = wait_for_acceptance(logs, "ep-3", window, start - timedelta(seconds=5), wait=60, clock=lambda: now[0],
                              sleep=sleep)
    assert acc.accepted_tokens == 170 and len(slept) == 12  # the line came after the run's end: no wait
