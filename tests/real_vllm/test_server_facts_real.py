"""What a real vLLM shows of itself, and peagle reading it over a label (issue 20): its /metrics has one
`vllm:spec_decode_num_accepted_tokens_per_pos` series per draft position (K) with speculation on and no
spec-decode series with it off; a K=3 server labelled K=7 is refused by `sweep --url` and recorded as K=3 by
`bench`. Uses the tier's servers (no extra vLLM start)."""

import pytest

from peagle_deploy.bench.acceptance import parse_prometheus
from peagle_deploy.bench.server_facts import from_counters

from .conftest import K, peagle

pytestmark = pytest.mark.real_vllm
USES_SERVER_POOL = True  # without it the pool was stopped before this module and its three servers started anew


def test_metrics_page_shows_k_or_off(spec_server, off_server):
    on = from_counters(parse_prometheus(spec_server.metrics_text()), spec_server.url + "/metrics")
    assert (on.speculative, on.k) == (True, K) and f"{K} per-position series" in on.sources[0]
    off = from_counters(parse_prometheus(off_server.metrics_text()), off_server.url + "/metrics")
    assert (off.speculative, off.mode) == (False, "off")


def test_sweep_refuses_the_server_under_another_k(spec_server, tmp_path):
    label = f"{spec_server.mode}:7"
    run = peagle("sweep", "qwen3-coder", "--url", f"{label}={spec_server.url}", "-c", "1", "-n", "2",
                 "--out", str(tmp_path))
    assert run.code == 2, run.stderr
    assert f"--url {label} labels it {spec_server.mode} K=7, but the server runs speculative decoding with K={K}" \
        in run.stderr
    assert not (tmp_path / "runs").exists()


def test_bench_records_the_servers_k_over_the_label(spec_server, tmp_path):
    run = peagle("bench", "run", spec_server.url, "--mode", spec_server.mode, "--k", "7", "-c", "1", "-n", "2",
                 "--max-tokens", "16", "--warmup", "0", "--no-chart", "-o", str(tmp_path), "--json")
    assert run.code == 0, run.stderr
    target = run.json()["result"]["target"]
    assert (target["k"], target["k_source"], target["label_k"]) == (K, "server", 7)
    assert [line for line in run.stderr.splitlines() if "labels it" in line and f"K={K}" in line]


def test_sweep_refuses_a_speculative_label_on_the_off_server(off_server, tmp_path):
    run = peagle("sweep", "qwen3-coder", "--url", f"p-eagle:{K}={off_server.url}", "-c", "1", "-n", "2",
                 "--out", str(tmp_path))
    assert run.code == 2 and "the server runs without speculative decoding (off)" in run.stderr
