"""The sweep's money and failure rules through its Python API, with an injected clock: spend is
instance-hours actually used, the sweep stops before a step that would exceed --budget, and a failed
deploy half-way tears down what the sweep created (through the installed executable)."""

from __future__ import annotations

import json
import subprocess

import pytest

from peagle_deploy.output import Output
from peagle_deploy.sweep.config import SweepRequest, configurations
from peagle_deploy.sweep.estimate import plan_sweep
from peagle_deploy.sweep.runner import BudgetStop, Sweep
from peagle_deploy.sweep.state import ConfigState, StateFile, SweepState
from peagle_deploy.testing.sweep_standins import SweepStandIn
from tests.forked_peagle import forked_peagle
from tests.test_sweep import FAST, nothing_left


class HourPerRequest:
    """A clock that only moves when an endpoint serves a request: one hour each."""

    def __init__(self):
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


def test_spend_is_instance_hours_and_the_sweep_stops_before_exceeding_the_budget(emu_server, tmp_path):
    standin = SweepStandIn(emu_server).install()
    clock = HourPerRequest()
    serve = standin.on_request

    def on_request(name, body):
        clock.now += 3600
        serve(name, body)

    emu_server.runtime.on_request = on_request
    emu_server.hosting_prices["ml.g7e.2xlarge"] = 3.36  # what the emulated Pricing API answers
    request = SweepRequest(model="qwen3-coder", configurations=configurations(["off", "p-eagle"], [3, 7]),
                           concurrency=[1], num_prompts=1, warmup=0, budget_usd=6.8, role=emu_server.role_arn,
                           logs_wait_s=0, provision_s=60, teardown_s=60, sweep_id="swtest-0001",
                           agreement_prompts=0)  # every request costs an hour here: the bench's request only
    plan, deployments = plan_sweep(request, offline=False)
    assert plan.within_budget and plan.estimated_usd < 1  # the estimate fits; the hours actually used do not
    sf = StateFile(tmp_path / "state.json", SweepState(
        request=request, plan=plan, configs={c.label: ConfigState(label=c.label) for c in plan.configurations}))
    from peagle_deploy.aws import AwsSession

    sweep = Sweep(sf, Output(True), tmp_path, session=AwsSession("us-east-1"), clock=clock,
                  deployments=deployments)
    with pytest.raises(BudgetStop, match=r"deploying of p-eagle K=7 would bring the sweep to about \$6\.83"):
        sweep.run(1)
    statuses = {label: c.status for label, c in sf.state.configs.items()}
    assert statuses == {"off": "done", "p-eagle K=3": "done", "p-eagle K=7": "stopped"}
    # two endpoints, one hour each at $3.36/h (the Pricing API's answer): what was used, not what was estimated
    assert sf.state.configs["off"].spent_usd == pytest.approx(3.36)
    assert sweep.spent_usd() == pytest.approx(6.72) and sweep.spent_usd() <= request.budget_usd
    assert not any(n.endswith("-p-eagle-k7") for n in standin.served)
    saved = json.loads((tmp_path / "state.json").read_text())
    assert saved["status"] == "stopped" and "budget" in saved["stopped_reason"]
    assert nothing_left(emu_server)


def test_a_failed_deploy_half_way_tears_down_everything_it_created(emu_server, tmp_path):
    standin = SweepStandIn(emu_server).install()
    release = standin.hold_at("-eagle3-k3")
    proc = subprocess.Popen([forked_peagle(), "sweep", "qwen3-coder", *FAST, "--budget", "40", "--role",
                             emu_server.role_arn, "--yes", "--out", str(tmp_path)],
                            env={**emu_server.env, "COLUMNS": "200"}, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        assert standin.arrived["-eagle3-k3"].wait(300), "the sweep never reached eagle3 K=3"
        emu_server.script_endpoints(final="Failed", reason="CUDA out of memory (emulated)")
    finally:
        release.set()
    _, err = proc.communicate(timeout=300)
    assert proc.returncode == 6, err
    assert "CUDA out of memory (emulated)" in err and "Traceback" not in err
    failed = next(ln for ln in err.splitlines() if ln.startswith("removed ") and "-eagle3-k7" in ln)
    assert "sweep failed" in failed
    state = json.loads((tmp_path / "sweep-state.json").read_text())
    assert state["status"] == "failed" and state["configs"]["eagle3 K=7"]["status"] == "failed"
    assert [c["status"] for c in state["configs"].values()].count("done") == 2
    assert nothing_left(emu_server)


def test_quota_count_skips_an_endpoint_deleted_between_list_and_describe(emu_in_process):
    """A parallel sweep deletes one endpoint while the next deploy counts instances in use."""
    from peagle_deploy.lifecycle.quota import instances_in_use

    emu_in_process.create_endpoint_stack("kept")
    emu_in_process.create_endpoint_stack("going")
    sm = emu_in_process.client("sagemaker")

    class DeletedMeanwhile:
        def get_paginator(self, name):
            return sm.get_paginator(name)

        def describe_endpoint(self, EndpointName):
            if EndpointName == "going":
                sm.delete_endpoint(EndpointName="going")
            return sm.describe_endpoint(EndpointName=EndpointName)

        def describe_endpoint_config(self, EndpointConfigName):
            return sm.describe_endpoint_config(EndpointConfigName=EndpointConfigName)

    assert instances_in_use(DeletedMeanwhile(), "ml.g7e.2xlarge") == 1
