"""P-EAGLE and EAGLE-3 against a real vLLM, through the installed `peagle` executable and the server's URL.

The drafter is mode-sensitive (tiny_models.write_mode_sensitive_drafter): under greedy decoding P-EAGLE
accepts position 1 only and EAGLE-3 every position, so vLLM's per-position counters, `peagle metrics` and
`peagle bench` must each show the mode's own pattern, exactly. The P-EAGLE server is started from the plan's
environment through peagle's entrypoint: if `parallel_drafting` were dropped anywhere between the plan and
vLLM, it would draft sequentially and accept every position, and the P-EAGLE assertions here would fail. The
output is the target's either way ("!" every token). K=3 here (one pooled server per mode); K=7 in
test_speculative_k7.py.

Per-request acceptance (issue 46): peagle's entrypoint turns on vLLM's --per-request-spec-decode-metrics (0.29+), so
each answer carries its own metrics.speculative_decoding: `invoke --json` shows it over /invocations and /v1, streamed
or not, and `bench` reports its distribution beside /metrics' aggregate. The two agree EXACTLY (tolerance 0 drafts, 0
accepted tokens; 1e-9 on the mean acceptance length): vLLM counts both in one scheduler loop, on the same steps
(Scheduler.update_from_output: make_spec_decoding_stats and RequestSpecDecodeMetrics.observe, vllm 0.32.0), bench
reads /metrics only at the edges of a measured window with nothing else in flight (settled), and with --num-prompts no
measured request is cut. Any difference would mean peagle dropped or double-counted an answer.
"""

import json
import re
import urllib.request

import pytest

from peagle_deploy.testing.tiny_models import mode_sensitive_acceptance

from .conftest import K, peagle

pytestmark = pytest.mark.real_vllm
USES_SERVER_POOL = True
MAX_TOKENS = 24


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


def chat(url: str, path: str, body: bytes) -> bytes:
    request = urllib.request.Request(url + path, data=body, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=120) as answer:
        return answer.read()


def one_request_drafts(server) -> float:
    """How many drafts vLLM makes for one greedy request of MAX_TOKENS tokens (counter delta)."""
    before = counters(server.metrics_text()).get("num_drafts", 0.0)
    body = (b'{"messages": [{"role": "user", "content": "count"}], "max_tokens": %d, "temperature": 0}'
            % MAX_TOKENS)
    chat(server.url, "/invocations", body)
    return counters(server.metrics_text())["num_drafts"] - before


def assert_designed_acceptance(acceptance: dict, mode: str, k: int = K) -> None:
    """P-EAGLE: [1, 0, ..., 0], mean acceptance length 2; EAGLE-3: [1, ..., 1], K + 1 (from peagle's figures)."""
    designed = mode_sensitive_acceptance(mode, k)
    assert acceptance["k"] == k
    assert acceptance["per_position"] == designed, (mode, acceptance)
    assert acceptance["acceptance_rate"] == pytest.approx(sum(designed) / k, abs=1e-9)
    assert acceptance["mean_acceptance_length"] == pytest.approx(1 + sum(designed), abs=1e-9)
    assert acceptance["draft_tokens"] == k * acceptance["drafts"] > 0
    assert acceptance["accepted_tokens"] == sum(designed) * acceptance["drafts"]


def assert_designed_request_acceptance(spec: dict, mode: str, k: int = K) -> None:
    """One answer's metrics.speculative_decoding: every step accepted the designed number of drafts."""
    accepted = sum(mode_sensitive_acceptance(mode, k))
    assert spec["num_spec_tokens"] == k and spec["num_spec_steps"] > 0, spec
    assert spec["acceptance_histogram"] == [spec["num_spec_steps"] if j == accepted else 0 for j in range(k + 1)]
    assert spec["mean_acceptance_length"] == 1 + accepted and spec["num_draft_tokens"] == k * spec["num_spec_steps"]


def assert_designed_counters(server, k: int = K) -> None:
    """vLLM's own /metrics counters over one greedy request: accepted per position = designed rate x drafts."""
    before = counters(server.metrics_text())
    one_request_drafts(server)
    after = counters(server.metrics_text())
    c = {key: after[key] - before.get(key, 0.0) for key in after}
    designed = mode_sensitive_acceptance(server.mode, k)
    assert c["num_drafts"] > 0 and c["num_draft_tokens"] == k * c["num_drafts"]
    assert [c.get(f"num_accepted_tokens_per_pos_pos{i}", 0.0) for i in range(k)] == \
        [rate * c["num_drafts"] for rate in designed], (server.mode, c)
    assert c["num_accepted_tokens"] == sum(designed) * c["num_drafts"]


@pytest.mark.parametrize("url_suffix,kind,stream", [("", "container", True), ("", "container", False),
                                                     ("/v1", "openai", True), ("/v1", "openai", False)])
def test_invoke_returns_the_shaped_text(spec_server, tiny, url_suffix, kind, stream):
    run = peagle("invoke", spec_server.url + url_suffix, "Write a haiku about drafts.", "--max-tokens",
                 str(MAX_TOKENS), "--temperature", "0", "--stream" if stream else "--no-stream", "--json")
    assert run.code == 0, run.stderr
    doc = run.json()
    assert doc["target_kind"] == kind
    assert doc["text"] == tiny.output_text * MAX_TOKENS
    assert doc["stats"]["output_tokens"] == MAX_TOKENS and doc["stats"]["finish_reason"] == "length"
    assert_designed_request_acceptance(doc["acceptance"], spec_server.mode)  # the answer's own, streamed or not


def test_invoke_human_output_is_one_line_per_fact_when_piped(spec_server):
    """Issue 9 item 5: not a terminal -> no wrapping at 80 columns (the stats line stays one line)."""
    run = peagle("invoke", spec_server.url, "hello", "--max-tokens", str(MAX_TOKENS), "--temperature", "0")
    assert run.code == 0, run.stderr
    stats = [line for line in (run.stdout + run.stderr).splitlines() if "TTFT" in line]
    assert len(stats) == 1 and "finish: length" in stats[0], run.stdout + run.stderr


def test_start_up_log_verifies_its_own_mode_and_fails_the_other(spec_server):
    """Issue 37: vLLM's engine line is the same in both modes; what this vLLM logs besides tells them apart: the
    non-default args carry parallel_drafting as given, and EAGLE-3 skips the drafter's mask_hidden (the K=3
    drafter carries one). peagle's start-up check verifies the server's own mode and fails the other."""
    from peagle_deploy.lifecycle.startup_log import parse_startup
    from peagle_deploy.lifecycle.verify import FAILED, VERIFIED, startup_check

    sent = json.loads(spec_server.env["SM_VLLM_SPECULATIVE_CONFIG"])
    log = spec_server.log()
    info = parse_startup(log.splitlines(), str(spec_server.log_path))
    p_eagle = spec_server.mode == "p-eagle"
    assert sent["parallel_drafting"] is p_eagle and info.parallel_drafting is p_eagle
    assert ("mask_hidden found in weights but model is not configured for parallel drafting. Skipping loading "
            "mask_hidden." in log) is not p_eagle
    assert startup_check(info, sent, how_to_check="-").state == VERIFIED
    other = {**sent, "parallel_drafting": not p_eagle}
    assert startup_check(info, other, how_to_check="-").state == FAILED
    engine_line = [line for line in log.splitlines() if "speculative_config=SpeculativeConfig(" in line]
    alone = startup_check(parse_startup(engine_line, "engine line"), sent, how_to_check="-")
    assert alone.state == ("not verified" if p_eagle else VERIFIED)


def test_vllm_counters_show_each_modes_designed_acceptance(spec_server):
    assert_designed_counters(spec_server)


def test_metrics_reports_exact_acceptance(spec_server):
    """Totals since the server started: this server has served greedy requests only so far (the sampled ones of
    test_output_agreement.py run after this module's P-EAGLE tests: see conftest's ORDER)."""
    one_request_drafts(spec_server)
    run = peagle("metrics", spec_server.url, "--window", "0s", "--json")  # totals since start
    assert run.code == 0, run.stderr
    acceptance = run.json()["acceptance"]
    assert_designed_acceptance(acceptance, spec_server.mode)
    truth = counters(spec_server.metrics_text())
    assert acceptance["drafts"] == truth["num_drafts"]  # nothing else ran in between


def _human_figures(mode: str) -> tuple[str, str, str]:
    designed = mode_sensitive_acceptance(mode, K)
    return (f"mean acceptance length {1 + sum(designed):.2f}", f"acceptance rate {sum(designed) / K:.1%}",
            ", ".join(f"{p:.3f}" for p in designed))


def test_metrics_human_output_says_the_modes_acceptance(spec_server):
    one_request_drafts(spec_server)
    run = peagle("metrics", spec_server.url, "--window", "0s")
    assert run.code == 0, run.stderr
    text = " ".join(run.stdout.split())  # wrapping is checked below
    length, rate, per_position = _human_figures(spec_server.mode)
    assert length in text and rate in text and per_position in text, text


def test_metrics_human_output_is_not_wrapped_when_piped(spec_server):
    one_request_drafts(spec_server)
    run = peagle("metrics", spec_server.url, "--window", "0s")
    assert run.code == 0, run.stderr
    length, _, _ = _human_figures(spec_server.mode)
    assert any(length in line for line in run.stdout.splitlines()), run.stdout


def test_bench_reports_exact_acceptance_at_two_concurrency_levels(spec_server, tmp_path):
    run = peagle("bench", "run", spec_server.url, "-c", "1,2", "-n", "4", "--max-tokens", str(MAX_TOKENS),
                 "--warmup", "1", "--mode", spec_server.mode, "--k", str(K), "--no-chart", "-o", str(tmp_path),
                 "--json")
    assert run.code == 0, run.stderr
    result = run.json()["result"]
    assert [level["concurrency"] for level in result["levels"]] == [1, 2]
    for level in result["levels"]:
        assert level["errors"] == 0 and level["completed"] == 4, level
        assert level["output_tokens_per_s"] > 0 and level["ttft_ms"]["count"] == 4
    assert result["target"]["mode"] == spec_server.mode and result["target"]["k"] == K
    assert_designed_acceptance(result["acceptance"], spec_server.mode)
    # per request, from each answer's metrics.speculative_decoding, and its agreement with /metrics (tolerance: above)
    per_request, aggregate = result["request_acceptance"], result["acceptance"]
    designed = 1 + round(sum(mode_sensitive_acceptance(spec_server.mode, K)))
    print(f"\n{spec_server.mode}: per request {json.dumps(per_request)}")
    assert per_request["requests"] == 8 and per_request["requests_without"] == 0
    assert per_request["steps"] == aggregate["drafts"] and per_request["accepted_tokens"] == aggregate["accepted_tokens"]
    assert per_request["draft_tokens"] == aggregate["draft_tokens"]
    assert per_request["mean_acceptance_length"] == pytest.approx(aggregate["mean_acceptance_length"], abs=1e-9)
    assert per_request["difference"] == pytest.approx(0, abs=1e-9)
    assert per_request["aggregate_source"] == f"prometheus:{spec_server.url}/metrics"
    distribution = per_request["distribution"]  # the shaped drafter accepts the same share in every request
    assert distribution["count"] == 8 and distribution["p10"] == distribution["p50"] == distribution["p90"] == designed
    assert per_request["histogram"][designed - 1] == per_request["steps"] == sum(per_request["histogram"])
    human = (tmp_path / next(p.name for p in tmp_path.glob("bench-*.md"))).read_text()
    assert f"per request: p10 {designed:.2f}, p50 {designed:.2f}, p90 {designed:.2f}" in human


def test_bench_acceptance_excludes_warmup_requests(spec_server, tmp_path):
    """Issue 9 item 5: acceptance counts the measured requests only (4 per level), not the warm-up ones."""
    per_request = one_request_drafts(spec_server)
    run = peagle("bench", "run", spec_server.url, "-c", "1,2", "-n", "4", "--max-tokens", str(MAX_TOKENS),
                 "--warmup", "2", "--mode", spec_server.mode, "--k", str(K), "--no-chart", "-o", str(tmp_path),
                 "--json")
    assert run.code == 0, run.stderr
    acceptance = run.json()["result"]["acceptance"]
    assert acceptance["drafts"] == 2 * 4 * per_request, (acceptance["drafts"], per_request)


def test_metrics_window_measures_traffic_between_two_scrapes(spec_server):
    """Issue 16 item 3: `--window W` reports the drafts made between two scrapes; traffic runs throughout."""
    import subprocess
    import threading

    from .conftest import PEAGLE

    done = threading.Event()

    def traffic():
        body = b'{"messages": [{"role": "user", "content": "go"}], "max_tokens": %d, "temperature": 0}' % MAX_TOKENS
        while not done.is_set():
            chat(spec_server.url, "/v1/chat/completions", body)

    worker = threading.Thread(target=traffic, daemon=True)
    worker.start()
    try:
        out = subprocess.run([str(PEAGLE), "metrics", spec_server.url, "--window", "5s", "--json"],
                             capture_output=True, text=True, timeout=300)
    finally:
        done.set()
        worker.join(timeout=120)
    assert out.returncode == 0, out.stderr
    acceptance = __import__("json").loads(out.stdout)["acceptance"]
    assert_designed_acceptance(acceptance, spec_server.mode)
    assert acceptance["drafts"] < counters(spec_server.metrics_text())["num_drafts"]  # a window, not totals
