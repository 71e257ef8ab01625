"""`peagle bench` against a local server that paces tokens at a known rate (its own process).

The load generator must report what really happened: output tokens/s equal to what the server says
it wrote over the same window, TTFT equal to the server's delay, ITL equal to its token interval,
each within 3%, at concurrency 1, 8 and 128. Pacing is modest (50 tokens/s per stream, so 6,400
tokens/s at 128) so a loaded 2-core machine keeps to it; response lengths vary (40-80 tokens) so
128 requests do not stay in lock-step and queue behind each other at the same instant.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys

import pytest

from peagle_deploy.bench.acceptance import scrape_async
from peagle_deploy.bench.http_sender import HttpChatSender
from peagle_deploy.bench.loadgen import run_level
from tests.cli_runner import run_cli

TTFT_S, TOKENS_PER_S = 0.5, 50.0


@pytest.fixture(autouse=True)
def no_aws(monkeypatch, tmp_path):
    """No credentials and no instance metadata: the price must come from the shipped table, and no
    request may leave this machine even where a developer has AWS credentials configured."""
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE", "AWS_ENDPOINT_URL"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "no-credentials"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-config"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    monkeypatch.delenv("AWS_CONTAINER_CREDENTIALS_RELATIVE_URI", raising=False)
    monkeypatch.delenv("AWS_CONTAINER_CREDENTIALS_FULL_URI", raising=False)


def start_server(*args: str) -> tuple[subprocess.Popen, str]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "peagle_deploy.bench.paced_server", "--port", "0", *args],
        stdout=subprocess.PIPE,
        text=True,
    )
    line = proc.stdout.readline() if proc.stdout else ""
    if not line.startswith("PORT "):
        proc.kill()
        pytest.fail(f"paced server did not start: {line!r}")
    return proc, f"http://127.0.0.1:{int(line.split()[1])}"


@pytest.fixture(scope="module")
def paced_url():
    proc, url = start_server(
        "--ttft", str(TTFT_S), "--tokens-per-s", str(TOKENS_PER_S), "--tokens", "80", "--min-tokens", "40"
    )
    yield url
    proc.terminate()
    proc.wait(timeout=10)


async def _level(url: str, concurrency: int):
    edges: dict[str, asyncio.Task] = {}

    def on_window(edge: str) -> None:
        edges[edge] = asyncio.get_running_loop().create_task(scrape_async(url + "/metrics"))

    async with HttpChatSender(url + "/invocations", max_tokens=1000) as sender:
        m = await run_level(
            sender,
            [[{"role": "user", "content": "hi"}]],
            concurrency,
            warmup=concurrency,
            duration=3.0,
            on_window=on_window,
        )
    sent = (await edges["close"]).generation_tokens - (await edges["open"]).generation_tokens
    return m, sent


@pytest.mark.parametrize("concurrency", [1, 8, 128])
def test_measured_otps_ttft_itl_match_the_server_within_3_percent(paced_url, concurrency):
    m, sent = asyncio.run(_level(paced_url, concurrency))
    assert m.errors == 0 and m.completed >= concurrency
    assert m.output_tokens_per_s == pytest.approx(sent / m.window_s, rel=0.03)
    assert m.ttft_ms.mean == pytest.approx(TTFT_S * 1000, rel=0.03)
    assert m.itl_ms.mean == pytest.approx(1000 / TOKENS_PER_S, rel=0.03)
    assert m.tpot_ms.mean == pytest.approx(1000 / TOKENS_PER_S, rel=0.03)
    assert m.concurrency_held >= 0.98


def test_bench_command_against_an_openai_url_writes_all_files(tmp_path):
    proc, url = start_server("--ttft", "0", "--tokens-per-s", "500", "--tokens", "20")
    try:
        res = run_cli(
            "bench",
            url + "/v1",
            "--concurrency",
            "1,2",
            "--num-prompts",
            "4",
            "--dataset",
            "chat",
            "--mode",
            "eagle3",
            "--k",
            "3",
            "--instance-type",
            "ml.g7e.12xlarge",
            "--out",
            str(tmp_path),
            "--json",
        )
    finally:
        proc.terminate()
        proc.wait(timeout=10)
    assert res.code == 0, res.stderr
    doc = json.loads(res.stdout)
    result = doc["result"]
    assert result["schema_version"] == 1 and result["target"]["kind"] == "openai"
    assert [lv["concurrency"] for lv in result["levels"]] == [1, 2]
    assert all(lv["completed"] == 4 and lv["errors"] == 0 for lv in result["levels"])
    assert result["price"]["usd_per_hour"] == pytest.approx(8.29)
    # the server has no vllm:spec_decode_* counters: acceptance says so instead of inventing numbers
    assert result["acceptance"]["mean_acceptance_length"] is None
    assert "speculative decoding is off" in result["acceptance"]["note"]
    suffixes = sorted(f.rsplit(".", 1)[-1] for f in doc["files"])
    assert suffixes[:2] == ["json", "md"]
    md = next(f for f in doc["files"] if f.endswith(".md"))
    assert "eagle3 K=3" in open(md, encoding="utf-8").read()


def test_unreachable_url_counts_connection_errors_and_exits_6(tmp_path):
    res = run_cli(
        "bench",
        "http://127.0.0.1:9",
        "--concurrency",
        "1",
        "--num-prompts",
        "2",
        "--warmup",
        "0",
        "--out",
        str(tmp_path),
        "--no-chart",
        "--json",
    )
    assert res.code == 6 and "every measured request at concurrency 1 failed (connection: 2)" in res.stderr
    level = json.loads(res.stdout)["result"]["levels"][0]
    assert level["errors"] == 2 and level["error_kinds"] == {"connection": 2} and level["completed"] == 0
