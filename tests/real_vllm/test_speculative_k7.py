"""P-EAGLE and EAGLE-3 at K=7 on a real vLLM: each mode's per-position acceptance as designed, read from vLLM's
own counters and through the installed `peagle metrics` and `peagle bench`; and two facts of this vLLM that
these two servers carry: a P-EAGLE drafter that names its mask token with `pard_token` alone starts and
drafts in parallel, and an EAGLE-3 drafter without a `mask_hidden` tensor starts and drafts sequentially."""

import json

import pytest

from peagle_deploy.testing.tiny_models import mode_sensitive_acceptance

from .conftest import K_DEEP, SERVER_DRAFTER, peagle
from .test_speculative import assert_designed_acceptance, assert_designed_counters, counters, one_request_drafts

pytestmark = pytest.mark.real_vllm
USES_SERVER_POOL = True


@pytest.fixture(scope="module", params=["p-eagle", "eagle3"])
def deep_server(request, server_pool):
    return server_pool.get(request.param, K_DEEP)


def test_acceptance_per_position_as_designed_at_k7(deep_server, tmp_path):
    assert_designed_counters(deep_server, K_DEEP)
    metrics = peagle("metrics", deep_server.url, "--window", "0s", "--json")
    assert metrics.code == 0, metrics.stderr
    assert_designed_acceptance(metrics.json()["acceptance"], deep_server.mode, K_DEEP)
    bench = peagle("bench", "run", deep_server.url, "-c", "2", "-n", "4", "--max-tokens", "32", "--mode",
                   deep_server.mode, "--k", str(K_DEEP), "--no-chart", "-o", str(tmp_path), "--json")
    assert bench.code == 0, bench.stderr
    assert_designed_acceptance(bench.json()["result"]["acceptance"], deep_server.mode, K_DEEP)


def measured_rates(server, k: int) -> list[float]:
    """vLLM's own per-position acceptance over one greedy request: its /metrics counters' deltas, accepted at
    each position / drafts."""
    before = counters(server.metrics_text())
    one_request_drafts(server)
    after = counters(server.metrics_text())
    drafts = after["num_drafts"] - before.get("num_drafts", 0.0)
    assert drafts > 0, server.mode
    return [(after.get(f"num_accepted_tokens_per_pos_pos{i}", 0.0)
             - before.get(f"num_accepted_tokens_per_pos_pos{i}", 0.0)) / drafts for i in range(k)]


def test_the_two_servers_differ_where_the_modes_do(server_pool):
    """What tells the modes apart, as vLLM counts it: both servers accept position 1 of every draft, and from
    position 2 on the P-EAGLE server (its mask-token slots, drafted in one pass) accepts none where the EAGLE-3
    server accepts all. A vLLM that drafted P-EAGLE sequentially (parallel_drafting lost) would accept
    every position on both servers and fail here."""
    p_eagle = measured_rates(server_pool.get("p-eagle", K_DEEP), K_DEEP)
    eagle3 = measured_rates(server_pool.get("eagle3", K_DEEP), K_DEEP)
    assert p_eagle[0] == eagle3[0] == 1.0
    assert all(p != e for p, e in zip(p_eagle[1:], eagle3[1:])), (p_eagle, eagle3)
    assert (p_eagle, eagle3) == (mode_sensitive_acceptance("p-eagle", K_DEEP),
                                 mode_sensitive_acceptance("eagle3", K_DEEP))


def test_this_vllm_accepts_the_drafters_these_servers_run(deep_server):
    """P-EAGLE: `pard_token` alone names the mask token; EAGLE-3: no `mask_hidden` needed. Both servers are
    real starts through the entrypoint (the acceptance test above proves they draft in their own mode)."""
    config = json.loads((deep_server.drafter / "config.json").read_text())
    weights = (deep_server.drafter / "model.safetensors").read_bytes()
    if deep_server.mode == "p-eagle":
        assert SERVER_DRAFTER[("p-eagle", K_DEEP)] == "pard_token"
        assert "pard_token" in config and not {"mask_token_id", "ptd_token_id"} & set(config)
        assert b"mask_hidden" in weights
    else:
        assert SERVER_DRAFTER[("eagle3", K_DEEP)] == "no-mask-hidden"
        assert b"mask_hidden" not in weights
    spec = json.loads(deep_server.env["SM_VLLM_SPECULATIVE_CONFIG"])
    assert spec["num_speculative_tokens"] == K_DEEP and spec["model"] == str(deep_server.drafter)
    assert spec.get("parallel_drafting", False) is (deep_server.mode == "p-eagle")
