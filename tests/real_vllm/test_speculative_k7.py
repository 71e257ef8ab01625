"""P-EAGLE and EAGLE-3 at K=7 on a real vLLM: each mode's per-position acceptance as designed, read from vLLM's
own counters and through the installed `peagle metrics` and `peagle bench`; and two facts of this vLLM that
these two servers carry: a P-EAGLE drafter that names its mask token with `pard_token` alone starts and
drafts in parallel, and an EAGLE-3 drafter without a `mask_hidden` tensor starts and drafts sequentially."""

import json

import pytest

from peagle_deploy.testing.tiny_models import mode_sensitive_acceptance

from .conftest import K_DEEP, SERVER_DRAFTER, peagle
from .test_speculative import assert_designed_acceptance, assert_designed_counters

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


def test_the_modes_differ_where_designed(deep_server):
    """What tells them apart: position 2 onwards (P-EAGLE's mask-token slots)."""
    designed = mode_sensitive_acceptance(deep_server.mode, K_DEEP)
    other = mode_sensitive_acceptance("eagle3" if deep_server.mode == "p-eagle" else "p-eagle", K_DEEP)
    assert designed[0] == other[0] == 1.0 and all(a != b for a, b in zip(designed[1:], other[1:]))


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
