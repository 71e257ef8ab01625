"""Issue 27's sweep cases: a finished configuration is never measured twice (whatever happens at its teardown),
one writer of the state, resume says only what it did, and `--resume --budget N` goes on after a budget stop.
Budgets and clocks are injected through the Python API; the commands run forked (tests/interrupt_helpers.py
`Forked`: a process of its own, whose shim forwards the SIGINT)."""

from __future__ import annotations

import json
import signal

import pytest

from peagle_deploy.output import Output
from peagle_deploy.sweep.config import SweepRequest, configurations
from peagle_deploy.sweep.estimate import plan_sweep
from peagle_deploy.sweep.runner import BudgetStop, Sweep
from peagle_deploy.sweep.state import ConfigState, StateFile, SweepState
from peagle_deploy.testing.sweep_standins import SweepStandIn

from .interrupt_helpers import Forked

peagle = Forked()
FAST = ["--concurrency", "1", "--num-prompts", "1", "--warmup", "0", "--logs-wait", "0", "--provision-estimate", "60"]


def _sweep(emu, tmp_path, budget, modes=("off", "p-eagle"), ks=(3, 7), clock=None):
    from peagle_deploy.aws import AwsSession

    request = SweepRequest(model="qwen3-coder", configurations=configurations(list(modes), list(ks)),
                           concurrency=[1], num_prompts=1, warmup=0, budget_usd=budget, role=emu.role_arn,
                           logs_wait_s=0, provision_s=60, teardown_s=60, sweep_id="swtest-0027",
                           agreement_prompts=0)  # one request per configuration: the clock below counts them
    plan, deployments = plan_sweep(request, offline=False)
    sf = StateFile(tmp_path / "sweep-state.json", SweepState(
        request=request, plan=plan, configs={c.label: ConfigState(label=c.label) for c in plan.configurations}))
    kwargs = {"clock": clock} if clock else {}
    return sf, Sweep(sf, Output(True), tmp_path, session=AwsSession("us-east-1"), deployments=deployments,
                     **kwargs)


def test_resume_with_a_higher_budget_goes_on_after_a_budget_stop_and_measures_nothing_twice(emu_server, tmp_path):
    standin = SweepStandIn(emu_server).install()
    now = [1_000_000.0]
    serve = standin.on_request

    def on_request(name, body):  # every request takes an hour of the sweep's clock
        now[0] += 3600
        serve(name, body)

    emu_server.runtime.on_request = on_request
    # about two configurations' hours at the emulated hosting price (the Pricing API's answer): the third is stopped
    hourly = emu_server.hosting_prices["ml.g7e.2xlarge"]
    sf, sweep = _sweep(emu_server, tmp_path, 2.02 * hourly, clock=lambda: now[0])
    with pytest.raises(BudgetStop) as stopped:
        sweep.run(1)
    assert f"go on with 'peagle sweep --resume {sf.path} --budget MORE'" in stopped.value.one_line()
    assert {label: c.status for label, c in sf.state.configs.items()} == {
        "off": "done", "p-eagle K=3": "done", "p-eagle K=7": "stopped"}
    emu_server.runtime.on_request = serve
    served = dict(standin.served)

    done = peagle.run(["sweep", "--resume", str(sf.path), "--budget", "40", "--json"], emu_server.env)
    assert done.code == 0, done.stderr
    assert "under --budget $40.00: 2 configuration(s) done" in done.stderr
    report = json.loads(done.stdout)["report"]
    assert [c["status"] for c in report["configurations"]] == ["done", "done", "done"]
    assert report["budget_usd"] == 40
    rerun = {name for name in standin.served if standin.served[name] != served.get(name)}
    assert [name.rsplit("-", 2)[-2:] for name in rerun] == [["eagle", "k7"]]  # only what the stop left
    state = json.loads(sf.path.read_text())
    assert state["request"]["budget_usd"] == 40 and all(c["measured"] for c in state["configs"].values())


def test_sigint_while_a_finished_configuration_is_torn_down_keeps_it_measured(emu_server, tmp_path):
    standin = SweepStandIn(emu_server).install()
    emu = emu_server
    gate = emu.gate("DeleteEndpoint", caller="sw")  # the first configuration's teardown, after its bench
    args = ["sweep", "qwen3-coder", "--modes", "off,p-eagle", "--k", "3", *FAST, "--budget", "40", "--role",
            emu.role_arn, "--yes", "--out", str(tmp_path)]
    run = peagle.start(args, {**emu.env, "AWS_SDK_UA_APP_ID": "sw"})
    gate.wait_entered()
    run.signal(signal.SIGINT)
    assert run.finish() == 130, run.stderr
    gate.release()
    state = json.loads((tmp_path / "sweep-state.json").read_text())
    off = state["configs"]["off"]
    assert off["measured"] is True and off["status"] == "done" and off["result_file"], off
    assert state["configs"]["p-eagle K=3"]["status"] == "pending"
    served = dict(standin.served)

    done = peagle.run(["sweep", "--resume", str(tmp_path / "sweep-state.json"), "--json"], emu.env)
    assert done.code == 0, done.stderr
    again = {name for name in standin.served if standin.served[name] != served.get(name)}
    assert [name.endswith("-p-eagle-k3") for name in again] == [True]  # 'off' was not deployed or benched again
    assert not [e for e in emu.resource_names()["endpoints"]]


def test_after_the_teardown_took_a_configuration_over_its_worker_writes_nothing(emu_server, tmp_path):
    """The bench thread that finishes after an interrupt's teardown must not overwrite the state."""
    sf, sweep = _sweep(emu_server, tmp_path, 40, modes=("off",), ks=())
    sf.update("off", status="deployed", endpoint="peagle-swtest-0027-off", created_at=1.0)
    assert sweep.teardown_all("interrupted") == []  # nothing existed: nothing is said to be removed
    assert sf.state.configs["off"].status == "stopped"
    sweep._update("off", status="benched", measured=True, result_file="late.json")
    saved = json.loads(sf.path.read_text())["configs"]["off"]
    assert (saved["status"], saved["measured"], saved["result_file"]) == ("stopped", False, None)
