"""`peagle bench` against a local server that paces tokens (its own process): the command end to end.

How close the figures come to the server's own schedule (within 3% at concurrency 1, 8 and 128) is a
calibration that depends on the machine's load: `benchmarks/bench_accuracy.py` measures it.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.cli_runner import run_cli

pytestmark = pytest.mark.usefixtures("no_aws")  # no credentials: no Pricing API, so the price is unknown


def start_server(*args: str) -> tuple[subprocess.Popen, str]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "peagle_deploy.testing.paced_server", "--port", "0", *args],
        stdout=subprocess.PIPE,
        text=True,
    )
    line = proc.stdout.readline() if proc.stdout else ""
    if not line.startswith("PORT "):
        proc.kill()
        pytest.fail(f"paced server did not start: {line!r}")
    return proc, f"http://127.0.0.1:{int(line.split()[1])}"


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
    # no credentials for the Pricing API and no sourced hosting price shipped: unknown, said how to get one
    assert result["price"]["usd_per_hour"] is None and "pricing:GetProducts" in result["price"]["hint"]
    # the server has no vllm:spec_decode_* counters: acceptance says so instead of inventing numbers
    assert result["acceptance"]["mean_acceptance_length"] is None
    assert "speculative decoding is off" in result["acceptance"]["note"]
    # ... and so the --mode eagle3 --k 3 label loses to what the server shows: speculation off, said in one line
    assert (result["target"]["mode"], result["target"]["label_mode"], result["target"]["label_k"]) == ("off", "eagle3", 3)
    [warning] = [ln for ln in res.stderr.splitlines() if "labels it" in ln]
    assert "eagle3 K=3" in warning and "runs without speculative decoding (off)" in warning
    suffixes = sorted(f.rsplit(".", 1)[-1] for f in doc["files"])
    assert suffixes[:2] == ["json", "md"]
    md = next(f for f in doc["files"] if f.endswith(".md"))
    summary = open(md, encoding="utf-8").read()
    assert "# peagle bench: off" in summary and "label contradicted: --mode/--k labels it eagle3 K=3" in summary


def test_unreachable_url_exits_6_before_measuring(tmp_path):
    res = run_cli("bench", "http://127.0.0.1:9", "--concurrency", "1", "--num-prompts", "2", "--out", str(tmp_path))
    assert res.code == 6 and "cannot reach http://127.0.0.1:9" in res.stderr
    assert not list(tmp_path.iterdir())  # nothing measured, nothing written


def test_save_requests_streams_one_json_line_per_finished_request(tmp_path):
    proc, url = start_server("--ttft", "0", "--tokens-per-s", "0", "--tokens", "6")
    detail = tmp_path / "requests.jsonl"
    try:
        res = run_cli("bench", url, "--concurrency", "1,3", "--num-prompts", "5", "--warmup", "2", "--mode", "off",
                      "--no-chart", "--out", str(tmp_path), "--save-requests", str(detail), "--json")
    finally:
        proc.terminate()
        proc.wait(timeout=10)
    assert res.code == 0, res.stderr
    lines = [json.loads(line) for line in detail.read_text().splitlines()]
    assert [(d["concurrency"], d["warmup"]) for d in lines].count((3, False)) == 5
    assert sum(d["concurrency"] == 1 for d in lines) == 7 and sum(d["warmup"] for d in lines) == 4
    levels = json.loads(res.stdout)["result"]["levels"]
    measured = [d for d in lines if not d["warmup"] and d["concurrency"] == 3]
    assert all(d["chunks"] == 6 and d["usage_tokens"] == 6 and d["error"] is None for d in measured)
    assert levels[1]["completed"] == len(measured) and str(detail) in json.loads(res.stdout)["files"]
    assert detail.stat().st_mode & 0o777 == 0o600 and not list(tmp_path.glob(".requests.jsonl.*"))


def test_run_bench_benches_the_target_the_plan_carries(tmp_path):
    """The plan carries the parsed target and the runner uses it as parsed: a `/v1` URL read as a container
    (what `--target-kind container` decides elsewhere) is sent to `/invocations`, not guessed again as OpenAI."""
    import io

    from peagle_deploy.bench.datasets import load_dataset
    from peagle_deploy.bench.runner import BenchPlan, run_bench
    from peagle_deploy.output import Output
    from peagle_deploy.runtime.target_ref import parse_target

    proc, url = start_server("--ttft", "0", "--tokens-per-s", "0", "--tokens", "4")
    try:
        plan = BenchPlan(target=parse_target(url + "/v1", kind="container"), dataset=load_dataset("chat"),
                         concurrency=[1], num_prompts=2, warmup=0, chart=False)
        run = run_bench(plan, Output(True, stdout=io.StringIO(), stderr=io.StringIO()))
    finally:
        proc.terminate()
        proc.wait(timeout=10)
    assert run.failure is None and run.result.target.kind == "container"
    assert run.result.levels[0].completed == 2
