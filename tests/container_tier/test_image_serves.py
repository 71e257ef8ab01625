"""The project's image served by real vLLM: started as SageMaker starts it, answering /ping and /invocations
(streamed and not), acceptance from /metrics equal to vLLM's own counters through `peagle bench` and `metrics`,
and `stop` (SIGTERM) ending it cleanly inside the grace period. One vLLM start, shared by the module."""

from __future__ import annotations

import json
import re
import urllib.request

import pytest

from .conftest import K, STOP_GRACE_S, ImageServer, engine_run, peagle, plan_environment, record, tiny_mounts

pytestmark = pytest.mark.container
MAX_TOKENS = 12
EAGLE_MOUNT = "/opt/ml/additional-model-data-sources/eagle"


@pytest.fixture(scope="module")
def served(engine, image, tiny, tmp_path_factory):
    server = ImageServer(engine=engine, image=image, environment=plan_environment(), mounts=tiny_mounts(tiny),
                         log_path=tmp_path_factory.mktemp("image") / "container.log", name="peagle-tier-serve")
    try:
        server.start().wait_ready()
        record(f"cold start of {image} (podman run to /ping answering)", server.started_s)
        yield server
    finally:
        server.stop()


def post(url: str, body: dict) -> bytes:
    request = urllib.request.Request(url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=120) as answer:
        assert answer.status == 200
        return answer.read()


def chat(stream: bool) -> dict:
    return {"messages": [{"role": "user", "content": "Write a Python quicksort"}], "max_tokens": MAX_TOKENS,
            "temperature": 0, "stream": stream}


def counters(text: str) -> dict[str, float]:
    """vLLM's spec-decode counters from /metrics text, per-position ones keyed by 'pos<N>'."""
    found: dict[str, float] = {}
    for line in text.splitlines():
        match = re.match(r'vllm:spec_decode_(\w+)_total\{([^}]*)\} ([0-9.e+]+)$', line)
        if match:
            position = re.search(r'position="(\d+)"', match.group(2))
            key = match.group(1) + (f"_pos{position.group(1)}" if position else "")
            found[key] = found.get(key, 0.0) + float(match.group(3))
    return found


def test_started_as_sagemaker_starts_it(served, engine):
    """`IMAGE serve`, both directories read-only at SageMaker's paths, the plan's environment unchanged, and the
    entrypoint exec'd `vllm serve /opt/ml/model --port 8080 ...` (8080 inside; host networking moves the port)."""
    inspected = engine_run(engine, "container", "inspect", served.name)
    assert inspected.returncode == 0, inspected.stderr
    [info] = json.loads(inspected.stdout)
    assert info["Config"]["Cmd"] == ["serve"]
    mounts = {m["Destination"]: m for m in info["Mounts"]}
    assert mounts["/opt/ml/model"]["RW"] is False and mounts[EAGLE_MOUNT]["RW"] is False
    exec_line = next(line for line in served.log().splitlines() if line.startswith("peagle-container: exec "))
    assert exec_line.startswith("peagle-container: exec vllm serve /opt/ml/model --port ")
    assert f'--speculative-config \'{{"model": "{EAGLE_MOUNT}", "method": "eagle3", "num_speculative_tokens": {K}, ' \
           '"parallel_drafting": true}\'' in exec_line
    with urllib.request.urlopen(served.url + "/ping", timeout=30) as answer:
        assert answer.status == 200


def test_invocations_not_streamed(served, tiny):
    answer = json.loads(post(served.url + "/invocations", chat(stream=False)))
    assert answer["choices"][0]["message"]["content"] == tiny.output_text * MAX_TOKENS
    assert answer["usage"]["completion_tokens"] == MAX_TOKENS


def test_invocations_streamed(served, tiny):
    events = [line[len("data: "):] for line in post(served.url + "/invocations", chat(stream=True)).decode().splitlines()
              if line.startswith("data: ")]
    assert events[-1] == "[DONE]" and len(events) > 2
    text = "".join(json.loads(e)["choices"][0]["delta"].get("content") or "" for e in events[:-1]
                   if json.loads(e)["choices"])
    assert text == tiny.output_text * MAX_TOKENS


@pytest.mark.parametrize("stream", ["--stream", "--no-stream"])
def test_peagle_invoke(served, tiny, stream):
    run = peagle("invoke", served.url, "Write a Python quicksort", "--max-tokens", str(MAX_TOKENS), "--temperature",
                 "0", stream, "--json")
    assert run.code == 0, run.stderr
    assert run.json()["text"] == tiny.output_text * MAX_TOKENS


def test_bench_and_metrics_acceptance_equal_vllms_counters(served, tmp_path):
    bench = peagle("bench", "run", served.url, "-c", "1,2", "-n", "4", "--max-tokens", "32", "--mode", "p-eagle",
                   "--k", str(K), "--out", str(tmp_path / "bench"), "--no-chart", "--json")
    assert bench.code == 0, bench.stderr
    from_bench = bench.json()["result"]["acceptance"]
    assert from_bench["per_position"] == [1.0] * K and from_bench["mean_acceptance_length"] == K + 1

    metrics = peagle("metrics", served.url, "--window", "0s", "--json")  # totals since start
    assert metrics.code == 0, metrics.stderr
    acceptance = metrics.json()["acceptance"]
    truth = counters(served.metrics_text())  # nothing else ran in between
    assert truth["num_drafts"] > 0
    assert acceptance["drafts"] == truth["num_drafts"]
    assert acceptance["draft_tokens"] == truth["num_draft_tokens"]
    assert acceptance["accepted_tokens"] == truth["num_accepted_tokens"]
    assert acceptance["acceptance_rate"] == truth["num_accepted_tokens"] / truth["num_draft_tokens"]
    assert acceptance["per_position"] == [truth[f"num_accepted_tokens_per_pos_pos{i}"] / truth["num_drafts"]
                                          for i in range(K)]
    assert acceptance["mean_acceptance_length"] == pytest.approx(
        1 + truth["num_accepted_tokens"] / truth["num_drafts"], abs=1e-9)
    assert acceptance["per_position"] == [1.0] * K  # the tiny models: every greedy draft is accepted


def test_stop_sends_sigterm_and_vllm_exits_cleanly_within_the_grace_period(served):
    """Last in the module: SageMaker (and `docker stop`) send SIGTERM, then SIGKILL after 30 s. vLLM is the
    container's process 1 (the entrypoint exec'd it), so it gets SIGTERM itself and exits 0 before the SIGKILL."""
    code, took = served.stop(grace_s=STOP_GRACE_S)
    record("podman stop (SIGTERM) to vLLM's exit", took)
    assert code == 0, served.log_tail()
    assert took < STOP_GRACE_S, f"took {took:.1f} s: SIGKILL'd after the grace period?"
    assert "Shutting down" in served.log() or "shutdown" in served.log().lower()
