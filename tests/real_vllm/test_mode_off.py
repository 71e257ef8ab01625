"""Mode off against a real vLLM: answers, exposes no speculative counters, and peagle says so plainly."""

import pytest

from .conftest import peagle
from .test_speculative import MAX_TOKENS, counters

pytestmark = pytest.mark.real_vllm
USES_SERVER_POOL = True


def test_off_server_runs_without_a_speculative_config(off_server):
    assert "SM_VLLM_SPECULATIVE_CONFIG" not in off_server.env
    assert "--speculative-config" not in off_server.log().splitlines()[0]


def test_invoke_works_with_speculation_off(off_server, tiny):
    run = peagle("invoke", off_server.url, "hello", "--max-tokens", str(MAX_TOKENS), "--temperature", "0",
                 "--json")
    assert run.code == 0, run.stderr
    assert run.json()["text"] == tiny.output_text * MAX_TOKENS


def test_no_spec_decode_counters(off_server):
    assert counters(off_server.metrics_text()) == {}


def test_metrics_says_plainly_that_speculation_is_off(off_server):
    run = peagle("metrics", off_server.url, "--window", "0s")
    text = (run.stdout + run.stderr).lower()
    assert run.code in (0, 6), run.stderr
    assert "speculative decoding" in text and ("off" in text or "not enabled" in text or "no spec" in text), text
    assert "acceptance length" not in text


def test_bench_reports_no_acceptance_with_speculation_off(off_server, tmp_path):
    run = peagle("bench", "run", off_server.url, "-c", "1", "-n", "3", "--max-tokens", str(MAX_TOKENS),
                 "--warmup", "1", "--mode", "off", "--no-chart", "-o", str(tmp_path), "--json")
    assert run.code == 0, run.stderr
    result = run.json()["result"]
    assert result["levels"][0]["completed"] == 3 and result["levels"][0]["errors"] == 0
    acceptance = result.get("acceptance")
    assert acceptance is None or not acceptance.get("drafts"), acceptance
