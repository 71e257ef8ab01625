"""The sweep report's output-agreement column: each configuration's greedy outputs against off's, and a loud
warning when one diverges beyond floating-point noise (URL sweeps against loopback stand-ins, in process)."""

from __future__ import annotations

import json

from peagle_deploy.testing.fake_vllm import FakeVllm
from tests.cli_runner import run_cli

TOKENS = [f" t{i}" for i in range(12)]
FAST = ["--concurrency", "1", "--num-prompts", "2", "--warmup", "0", "--logs-wait", "0", "--dataset", "code",
        "--agreement-prompts", "6"]


def sweep(tmp_path, off: FakeVllm, eagle3: FakeVllm, p_eagle: FakeVllm):
    return run_cli("sweep", "my-model", *FAST, "--out", str(tmp_path), "--url", f"off={off.url}",
                   "--url", f"eagle3:3={eagle3.url}", "--url", f"p-eagle:3={p_eagle.url}", "--json")


def test_every_configuration_is_compared_with_off(tmp_path):
    broken = TOKENS[:1] + [" x"] * 11  # what a drafter that changes the output gives

    with FakeVllm(TOKENS, accepted_per_request=()) as off, FakeVllm(TOKENS) as eagle3, \
            FakeVllm(answer=lambda body: broken) as p_eagle:  # off: no spec-decode series, as vLLM without it
        res = sweep(tmp_path, off, eagle3, p_eagle)
        agreement_requests = [r for r in p_eagle.requests if not r["body"].get("stream")]
    assert res.code == 0, res.stderr
    report = json.loads(res.stdout)["report"]
    rows = {c["label"]: c for c in report["configurations"]}
    assert rows["off"]["output_vs_off"] is None
    good, bad = rows["eagle3 K=3"]["output_vs_off"], rows["p-eagle K=3"]["output_vs_off"]
    assert (good["identical_share"], good["verdict"], good["unit"]) == (1.0, "identical", "tokens")
    assert (bad["identical"], bad["mean_common_prefix"], bad["verdict"]) == (0, 1.0, "beyond noise")
    assert len(agreement_requests) == 6 and {r["body"]["temperature"] for r in agreement_requests} == {0.0}
    assert len(report["warnings"]) == 1 and report["warnings"][0].startswith("OUTPUT CHANGED: p-eagle K=3 against off")
    assert "warning: OUTPUT CHANGED: p-eagle K=3 against off at temperature 0: 0% identical" in res.stderr
    md = (tmp_path / "sweep.md").read_text()
    assert "greedy output vs off" in md and "| 100% identical, prefix 12.0/12.0 tokens |" in md
    assert "0% identical, prefix 1.0/12.0 tokens BEYOND NOISE" in md and "**OUTPUT CHANGED" in md


def test_no_agreement_check_says_why(tmp_path):
    with FakeVllm(TOKENS) as off, FakeVllm(TOKENS) as eagle3, FakeVllm(TOKENS) as p_eagle:
        res = run_cli("sweep", "my-model", *FAST[:-2], "--agreement-prompts", "0", "--out", str(tmp_path),
                      "--url", f"eagle3:3={eagle3.url}", "--url", f"p-eagle:3={p_eagle.url}", "--json")
        assert not [r for r in p_eagle.requests if not r["body"].get("stream")]
        assert off.requests == []
    assert res.code == 0, res.stderr
    rows = json.loads(res.stdout)["report"]["configurations"]
    assert [r["output_note"] for r in rows] == ["off was not measured"] * 2
