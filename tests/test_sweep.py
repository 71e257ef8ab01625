"""`peagle sweep` as a process against the emulator, with stand-in endpoints whose speed and acceptance
depend on mode and K (peagle_deploy.testing.sweep_standins). Nothing here depends on timing: interrupts are
synchronised on events the stand-in sets, waits are bounded. Runs are forked (tests/forked_peagle.py), but
the SIGKILL tests kill the installed executable itself."""

from __future__ import annotations

import json
import os
import signal
import subprocess
from pathlib import Path

import pytest

from peagle_deploy.testing.sweep_standins import SweepStandIn, parse_endpoint, url_standins
from tests.conftest import PEAGLE
from tests.forked_peagle import forked_peagle

FAST = ["--concurrency", "1,2", "--num-prompts", "2", "--warmup", "0", "--logs-wait", "0",
        "--provision-estimate", "60"]
LABELS = ["off", "eagle3 K=3", "eagle3 K=7", "eagle3 K=11", "p-eagle K=3", "p-eagle K=7", "p-eagle K=11"]


def peagle(emu, *args, **kw):
    env = {**(emu.env if emu is not None else os.environ), "COLUMNS": "200"}
    return subprocess.run([forked_peagle(), *args], env=env, capture_output=True, text=True, timeout=600, **kw)


def leftovers(emu) -> dict[str, list]:
    sm = emu.client("sagemaker")
    return {"endpoints": sm.list_endpoints()["Endpoints"], "configs": sm.list_endpoint_configs()["EndpointConfigs"],
            "models": sm.list_models()["Models"]}


def nothing_left(emu) -> bool:
    return not any(leftovers(emu).values())


@pytest.fixture
def standin(emu_server):
    return SweepStandIn(emu_server).install()


def test_dry_run_without_credentials_plans_seven_endpoints_at_an_unknown_price(no_aws):
    res = subprocess.run([forked_peagle(), "sweep", "qwen3-coder", "--dry-run", "--json"], capture_output=True, text=True,
                         timeout=120)
    assert res.returncode == 0, res.stderr
    plan = json.loads(res.stdout)["plan"]
    assert [c["label"] for c in plan["configurations"]] == LABELS
    assert all(c["price_per_hour_usd"] is None for c in plan["configurations"])
    [note] = [n for n in plan["notes"] if n.startswith("ml.g7e.2xlarge: price unknown")]
    assert "pricing:GetProducts" in note and "its dollars, and the total, are unknown" in note
    assert plan["estimated_usd"] is None  # a sum of unknown prices is unknown, never $0.00
    # a dry run needs no account: with --budget the plan is printed, the budget said to be unchecked and why (exit 0);
    # a sweep that would deploy refuses it (tests/test_sweep_plan_without_account.py)
    budget = subprocess.run([forked_peagle(), "sweep", "qwen3-coder", "--dry-run", "--budget", "40"], capture_output=True,
                            text=True, timeout=120)
    assert budget.returncode == 0 and "price of ml.g7e.2xlarge is unknown" in budget.stdout, budget.stderr
    assert "--budget $40.00 not checked" in budget.stdout and "total unknown" in budget.stdout


def test_dry_run_plans_seven_endpoints_against_the_budget(emu_server):
    res = peagle(emu_server, "sweep", "qwen3-coder", "--dry-run", "--budget", "40", "--json")
    assert res.returncode == 0, res.stderr
    plan = json.loads(res.stdout)["plan"]
    assert [c["label"] for c in plan["configurations"]] == LABELS
    off = plan["configurations"][0]
    assert off["k"] is None and off["mode"] == "off"
    for c in plan["configurations"]:
        assert c["instance_type"] == "ml.g7e.2xlarge" and c["price_per_hour_usd"] > 0
        assert c["estimated_s"] == pytest.approx(c["provision_s"] + c["bench_s"] + c["teardown_s"])
        assert c["estimated_usd"] == pytest.approx(c["price_per_hour_usd"] * c["estimated_s"] / 3600, abs=1e-3)
        assert c["endpoint"].startswith(f"peagle-{plan['sweep_id']}-")
    assert plan["estimated_usd"] == pytest.approx(sum(c["estimated_usd"] for c in plan["configurations"]), abs=1e-3)
    assert plan["within_budget"] is True and plan["budget_usd"] == 40


def test_budget_too_small_refuses_before_creating_anything(emu_server, tmp_path):
    res = peagle(emu_server, "sweep", "qwen3-coder", *FAST, "--budget", "0.5", "--role", emu_server.role_arn,
                 "--yes", "--out", str(tmp_path / "sw"))
    assert res.returncode == 2, res.stderr
    lines = [ln for ln in res.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and "over --budget $0.50" in lines[0] and "Traceback" not in res.stderr
    assert not [c for c in emu_server.calls if c.startswith("Create")]
    assert nothing_left(emu_server)


def test_seven_configuration_sweep_produces_the_table_under_budget_and_leaves_nothing(standin, tmp_path):
    emu = standin.emulator
    emu.set_quota("ml.g7e.2xlarge", 2)
    res = peagle(emu, "sweep", "qwen3-coder", *FAST, "--budget", "40", "--parallel", "3", "--role", emu.role_arn,
                 "--yes", "--out", str(tmp_path), "--json")
    assert res.returncode == 0, res.stderr
    report = json.loads(res.stdout)["report"]
    assert "--parallel 3 lowered to fit the quota" in res.stderr
    assert report["status"] == "done" and [c["label"] for c in report["configurations"]] == LABELS
    assert 0 < report["spent_usd"] <= report["budget_usd"] == 40
    for c in report["configurations"]:
        assert c["status"] == "done" and set(c["output_tokens_per_s"]) == {"1", "2"}
        assert all(v > 0 for v in c["usd_per_million_output_tokens"].values())
        if c["mode"] != "off":  # acceptance per K from the endpoint's CloudWatch lines
            assert len(c["per_position_acceptance"]) == c["k"]
            assert c["per_position_acceptance"][0] == pytest.approx(0.8)
            assert c["mean_acceptance_length"] == pytest.approx(1 + sum(0.8 ** i for i in range(1, c["k"] + 1)),
                                                                abs=0.02)
    for r in report["ratios"]:
        assert r["best_peagle"].startswith("p-eagle") and r["best_eagle3"].startswith("eagle3")
        assert r["best_peagle_vs_best_eagle3"] > 0 and r["best_peagle_vs_baseline"] > 0
    rec = report["recommendation"]
    assert rec["k"] in range(1, 12) and rec["advice"] is not None and rec["reasoning"]
    assert report["published"] and report["published"][0]["kind"] == "published"
    assert {Path(f).name for f in report["files"]} == {"sweep.json", "sweep.md", "sweep.png"}
    md = (tmp_path / "sweep.md").read_text()
    assert "best P-EAGLE / best EAGLE-3" in md and "## Beside the published figures" in md and "published:" in md
    # every endpoint carried the peagle tags, the sweep id and a TTL; all seven were torn down
    assert len(standin.tags) == 7
    for tags in standin.tags.values():
        assert tags["peagle:managed"] == "true" and tags["peagle:sweep-id"] == report["sweep_id"]
        assert "peagle:expires-at" in tags
    assert sorted(report["removed"]) == sorted(standin.tags)
    assert nothing_left(emu)


def _start_and_hold(standin, tmp_path, suffix="-p-eagle-k3", program=None):
    """Start a sweep and wait (bounded) until it is serving `suffix`: four configurations are done by then."""
    emu = standin.emulator
    release = standin.hold_at(suffix)
    proc = subprocess.Popen([program or forked_peagle(), "sweep", "qwen3-coder", *FAST, "--budget", "40", "--role", emu.role_arn,
                             "--yes", "--out", str(tmp_path)], env={**emu.env, "COLUMNS": "200"},
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if not standin.arrived[suffix].wait(300):
        proc.kill()
        pytest.fail("the sweep never reached " + suffix)
    return proc, release


def test_sigint_half_way_tears_down_everything_and_says_what(standin, tmp_path):
    proc, release = _start_and_hold(standin, tmp_path)
    try:
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=300)
    finally:
        release.set()
    assert proc.returncode == 130, err
    held = next(n for n in standin.served if n.endswith("-p-eagle-k3"))
    assert f"removed {held}" in err and "Traceback" not in err
    assert nothing_left(standin.emulator)
    state = json.loads((tmp_path / "sweep-state.json").read_text())
    assert state["status"] == "interrupted"
    assert [c["status"] for c in state["configs"].values()].count("done") == 4
    assert (tmp_path / "sweep.md").exists()  # the partial report of what was measured


def test_sigkill_then_resume_removes_the_leftover_and_runs_only_what_is_left(standin, tmp_path):
    proc, release = _start_and_hold(standin, tmp_path, program=PEAGLE)
    proc.kill()
    proc.wait(60)
    release.set()
    left = leftovers(standin.emulator)["endpoints"]
    assert [e["EndpointName"] for e in left] == [n for n in standin.served if n.endswith("-p-eagle-k3")]
    before = dict(standin.served)
    res = peagle(standin.emulator, "sweep", "--resume", str(tmp_path / "sweep-state.json"), "--json")
    assert res.returncode == 0, res.stderr
    assert f"removed {left[0]['EndpointName']}" in res.stderr
    report = json.loads(res.stdout)["report"]
    assert report["status"] == "done" and all(c["status"] == "done" for c in report["configurations"])
    rerun = {n for n in standin.served if standin.served[n] != before.get(n)}
    assert sorted(parse_endpoint(n) for n in rerun) == [("p-eagle", 3), ("p-eagle", 7), ("p-eagle", 11)]
    assert nothing_left(standin.emulator)


def test_sigkill_then_cleanup_all_finds_what_the_sweep_left(standin, tmp_path):
    proc, release = _start_and_hold(standin, tmp_path, program=PEAGLE)
    proc.kill()
    proc.wait(60)
    release.set()
    assert leftovers(standin.emulator)["endpoints"]
    res = peagle(standin.emulator, "cleanup", "--all", "--yes")
    assert res.returncode == 0, res.stderr
    assert nothing_left(standin.emulator)


def test_url_sweep_needs_no_aws(no_aws, tmp_path):
    specs = [("off", None), ("eagle3", 3), ("p-eagle", 3)]
    with url_standins(specs) as urls:
        args = [forked_peagle(), "sweep", "my-model", *FAST, "--out", str(tmp_path), "--json"]
        for u in urls:
            args += ["--url", u]
        res = subprocess.run(args, capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr
    report = json.loads(res.stdout)["report"]
    assert [c["label"] for c in report["configurations"]] == ["off", "eagle3 K=3", "p-eagle K=3"]
    assert all(c["status"] == "done" and c["output_tokens_per_s"] for c in report["configurations"])
    assert report["configurations"][2]["per_position_acceptance"] == pytest.approx([0.75, 0.75, 0.5])
    assert report["ratios"][0]["best_peagle_vs_baseline"] > 0
