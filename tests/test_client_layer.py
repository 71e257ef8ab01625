"""invoke, bench and metrics give one and the same answer for the same target and the same stream
(issue 12's table), through `peagle` processes (forked, tests/forked_peagle.py), against a stand-in server on
loopback."""

from __future__ import annotations

import json
import subprocess

import pytest

from peagle_deploy.runtime.target_ref import parse_target
from peagle_deploy.testing.fake_vllm import FakeVllm

from .forked_peagle import forked_peagle

pytestmark = pytest.mark.usefixtures("no_aws")


def peagle(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([forked_peagle(), *args], capture_output=True, text=True, timeout=timeout,
                          env={"PATH": "/usr/bin:/bin", "COLUMNS": "200", "AWS_EC2_METADATA_DISABLED": "true"})


# every URL spelling -> (kind, request path); metrics and ping are always at the server root
URL_FORMS = [
    ("", "container", "/invocations"),
    ("/invocations", "container", "/invocations"),
    ("/v1", "openai", "/v1/chat/completions"),
    ("/v1/chat/completions", "openai", "/v1/chat/completions"),
]


@pytest.mark.parametrize("suffix,kind,path", URL_FORMS)
def test_one_url_rule(suffix, kind, path):
    ref = parse_target("http://h:8000" + suffix + "/")
    assert (ref.kind, ref.request_url) == (kind, "http://h:8000" + path)
    assert ref.metrics_url == "http://h:8000/metrics" and ref.log_group is None
    assert ref.ping_url == "http://h:8000" + ("/ping" if kind == "container" else "/health")
    assert parse_target("my-endpoint").log_group == "/aws/sagemaker/Endpoints/my-endpoint"


@pytest.mark.parametrize("suffix,kind,path", URL_FORMS)
def test_invoke_bench_and_metrics_agree_on_every_url_form(suffix, kind, path, tmp_path):
    with FakeVllm(["a", "b"]) as server:
        url = server.url + suffix
        invoke = peagle("invoke", url, "hi", "--json")
        bench = peagle("bench", url, "-c", "1", "-n", "1", "--warmup", "0", "--out", str(tmp_path), "--no-chart",
                       "--json")
        metrics = peagle("metrics", url, "--window", "0s", "--json")
        paths = [r["path"] for r in server.requests]
        gets = list(server.gets)
    assert invoke.returncode == 0, invoke.stderr
    assert bench.returncode == 0, bench.stderr
    assert metrics.returncode == 0, metrics.stderr
    assert paths == [path, path]  # invoke's request, then bench's
    assert json.loads(invoke.stdout)["target_kind"] == kind
    assert json.loads(bench.stdout)["result"]["target"]["kind"] == kind
    assert gets[-1] == "/metrics" and json.loads(metrics.stdout)["acceptance"]["mean_acceptance_length"] == 2.5


REASONING_STREAM = [{"reasoning": "let me think"},
                    {"tool_calls": [{"index": 0, "id": "c1", "type": "function",
                                     "function": {"name": "f", "arguments": "{}"}}]},
                    "the answer"]


def test_reasoning_tool_call_and_content_chunks_count_alike_in_invoke_and_bench(tmp_path):
    """The chunk rule (docs/bench.md): reasoning and tool-call deltas are output tokens; TTFT is the
    first of them, time to first content is reported beside it."""
    with FakeVllm(REASONING_STREAM, gap_s=0.3, usage=False) as server:
        invoke = peagle("invoke", server.url, "hi", "--json")
        bench = peagle("bench", server.url + "/v1", "-c", "1", "-n", "2", "--warmup", "0", "--out", str(tmp_path),
                       "--no-chart", "--json")
    assert invoke.returncode == 0, invoke.stderr
    stats = json.loads(invoke.stdout)["stats"]
    assert stats["output_tokens"] == 3 and stats["output_tokens_source"] == "chunks"
    # causal bounds only (no margin a loaded machine could eat): the server sleeps 0.3 s before each chunk, so
    # the first (reasoning) chunk cannot be read before 0.3 s nor the content chunk before 0.9 s; which chunk
    # each figure is taken at is pinned with counted timestamps below
    assert 0.3 <= stats["ttft_s"] <= stats["ttfc_s"] and stats["ttfc_s"] >= 0.9
    assert bench.returncode == 0, bench.stderr
    level = json.loads(bench.stdout)["result"]["levels"][0]
    assert level["output_tokens"] == 6 and level["completed"] == 2  # 3 chunks per request, as invoke
    assert 300 <= level["ttft_ms"]["mean"] <= level["ttfc_ms"]["mean"] and level["ttfc_ms"]["mean"] >= 900


def test_ttft_is_taken_at_the_first_token_chunk_and_first_content_at_the_first_content_chunk():
    """invoke's client and bench's tally, with timestamps that count instead of telling time: TTFT is the
    reasoning chunk's, time to first content the content chunk's, whatever the machine's load."""
    from peagle_deploy.bench.records import RequestRecord
    from peagle_deploy.runtime import PeagleClient, build_request
    from peagle_deploy.runtime.sse import ChunkTally

    ticks = iter(range(100))
    with FakeVllm(REASONING_STREAM, usage=False) as server:
        client = PeagleClient(server.url, clock=lambda: float(next(ticks)))
        assert "".join(client.stream(build_request("hi"))) == "let me think" + "the answer"
    stats = client.last.stats  # clock: 0 at the start, then 1, 2, 3 at the three token chunks
    assert (stats.ttft_s, stats.ttfc_s, stats.output_tokens) == (1.0, 3.0, 3)

    def event(delta: dict) -> bytes:
        return b"data: " + json.dumps({"choices": [{"index": 0, "delta": delta}]}).encode() + b"\n\n"

    rec = RequestRecord(index=0, warmup=False)
    tally = ChunkTally(rec)
    reads = [event({"role": "assistant", "content": ""}) + event(REASONING_STREAM[0]), event(REASONING_STREAM[1]),
             event({"content": REASONING_STREAM[2]}) + b"data: [DONE]\n\n"]
    for at, read in enumerate(reads, start=1):
        tally.feed(read, float(at))
    tally.finish(4.0)
    assert (rec.first, rec.first_content, rec.chunks) == (1.0, 3.0, 3)


def test_in_band_error_event_fails_invoke_and_bench_with_the_servers_text(tmp_path):
    with FakeVllm(["a", "b", "c"], mode="inband_error") as server:
        invoke = peagle("invoke", server.url, "hi")
        bench = peagle("bench", server.url, "-c", "2", "-n", "4", "--warmup", "0", "--out", str(tmp_path),
                       "--no-chart", "--json")
    assert invoke.returncode == 6 and "The model ran out of KV cache" in invoke.stderr
    assert bench.returncode == 6 and "The model ran out of KV cache" in bench.stderr
    level = json.loads(bench.stdout)["result"]["levels"][0]
    assert level["completed"] == 0 and level["errors"] == 4
    assert level["output_tokens"] == 0  # a failed request's chunks are not output throughput


@pytest.mark.parametrize("command", [["invoke", "http://127.0.0.1:99999", "hi"],
                                     ["bench", "http://127.0.0.1:99999"],
                                     ["metrics", "http://127.0.0.1:99999"]])
def test_out_of_range_port_is_bad_input_everywhere(command):
    res = peagle(*command)
    assert res.returncode == 2 and "not a number from 1 to 65535" in res.stderr and res.stderr.count("\n") == 1


def test_invoke_timeout_is_a_total_deadline():
    # a chunk every 0.3 s: never idle for --timeout 1, but not done within it either
    with FakeVllm([f"t{i}" for i in range(20)], gap_s=0.3) as server:
        streamed = peagle("invoke", server.url, "hi", "--timeout", "1")
    assert streamed.returncode == 5 and "--timeout 1s" in streamed.stderr
    with FakeVllm(["x"] * 20, mode="stall", stall_s=6.0) as server:
        whole = peagle("invoke", server.url, "hi", "--no-stream", "--timeout", "1")
    assert whole.returncode == 5, whole.stderr


def test_binary_payload_is_bad_input(tmp_path):
    blob = tmp_path / "blob.bin"
    blob.write_bytes(bytes(range(256)) * 4)
    res = peagle("invoke", "http://127.0.0.1:9", "--payload", str(blob))
    assert res.returncode == 2 and "not UTF-8" in res.stderr


def test_bench_checks_out_and_target_before_measuring(tmp_path):
    a_file = tmp_path / "taken"
    a_file.write_text("x")
    with FakeVllm(["a"]) as server:
        res = peagle("bench", server.url, "-n", "1", "--out", str(a_file))
        sent = len(server.requests)
    assert res.returncode == 2 and "is a file, not a folder: pass a folder for --out" in res.stderr and sent == 0
    dead = peagle("bench", "http://127.0.0.1:9", "-n", "1", "--out", str(tmp_path / "out"))
    assert dead.returncode == 6 and "cannot reach http://127.0.0.1:9" in dead.stderr


def test_dataset_with_extra_keys_is_accepted_and_the_prompt_key_named(tmp_path):
    data = tmp_path / "humaneval.jsonl"
    data.write_text(json.dumps({"task_id": "HumanEval/0", "prompt": "def f():", "entry_point": "f",
                                "canonical_solution": "pass", "test": "assert True"}) + "\n")
    with FakeVllm(["a"]) as server:
        res = peagle("bench", server.url, "-c", "1", "-n", "1", "--warmup", "0", "-d", str(data),
                     "--out", str(tmp_path / "o"), "--no-chart")
        sent = server.requests[-1]["body"]["messages"]
    assert res.returncode == 0, res.stderr
    assert sent == [{"role": "user", "content": "def f():"}]
    assert "key 'prompt'" in res.stderr and "ignored: canonical_solution, entry_point, task_id, test" in res.stderr


def test_first_ctrl_c_stops_bench_and_keeps_what_was_measured(tmp_path):
    import signal
    import time

    with FakeVllm([f"t{i}" for i in range(10)], gap_s=0.1) as server:  # 1 s per request
        proc = subprocess.Popen([forked_peagle(), "bench", server.url, "-c", "1,2", "--duration", "3", "--warmup", "0",
                                 "--out", str(tmp_path), "--no-chart", "--json"], stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True,
                                env={"PATH": "/usr/bin:/bin", "AWS_EC2_METADATA_DISABLED": "true"})
        for _ in range(600):  # the first level sends at most 4 requests: 6 means the second one runs
            if len(server.requests) >= 6 or proc.poll() is not None:
                break
            time.sleep(0.1)
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    saved = json.loads(next(tmp_path.glob("*.json")).read_text())
    assert saved["complete"] is False and "interrupted" in saved["stopped"]
    assert [lv["concurrency"] for lv in saved["levels"]] == [1]  # the finished level is kept
    assert json.loads(out)["result"]["complete"] is False
