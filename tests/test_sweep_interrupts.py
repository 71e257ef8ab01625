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


def test_a_damaged_or_missing_result_is_measured_again_with_resume_redo(emu_server, tmp_path):
    """Issue 38 item 4: a finished configuration's runs/bench-*.json damaged (or deleted) from outside. --resume stops
    before anything is run or written, naming the file and the option that re-measures just that configuration;
    --resume --redo CONFIG deploys and benches that one again (no other) and writes the whole report."""
    standin = SweepStandIn(emu_server).install()
    emu = emu_server
    args = ["sweep", "qwen3-coder", "--modes", "off,p-eagle", "--k", "3", *FAST, "--budget", "40", "--role",
            emu.role_arn, "--yes", "--out", str(tmp_path)]
    assert peagle.run(args, emu.env).code == 0
    state_file = tmp_path / "sweep-state.json"
    state = json.loads(state_file.read_text())
    damaged = tmp_path / state["configs"]["off"]["result_file"]
    damaged.write_text('{"schema_version": ')  # cut short
    served = dict(standin.served)

    refused = peagle.run(["sweep", "--resume", str(state_file)], emu.env)
    assert refused.code == 2, refused.stderr
    assert refused.last_error == (f"error: the result of off ({damaged}) cannot be read ({damaged} is not a JSON "
                                  f"results file (JSONDecodeError)): re-measure it with 'peagle sweep --resume "
                                  f"{state_file} --redo off', or restore the file"), refused.stderr
    assert standin.served == served and json.loads(state_file.read_text()) == state  # nothing run or written

    done = peagle.run(["sweep", "--resume", str(state_file), "--redo", "off", "--json"], emu.env)
    assert done.code == 0, done.stderr
    again = {name for name in standin.served if standin.served[name] != served.get(name)}
    assert [name.rsplit("-", 1)[-1] for name in again] == ["off"]  # only off was measured again
    report = json.loads(done.stdout)["report"]
    assert [c["status"] for c in report["configurations"]] == ["done", "done"]
    assert all(c["output_tokens_per_s"] for c in report["configurations"])
    after = json.loads(state_file.read_text())["configs"]
    assert after["off"]["result_file"] != state["configs"]["off"]["result_file"] and after["off"]["measured"]
    assert after["p-eagle K=3"] == state["configs"]["p-eagle K=3"]

    (tmp_path / after["p-eagle K=3"]["result_file"]).unlink()
    missing = peagle.run(["sweep", "--resume", str(state_file)], emu.env)
    assert missing.code == 2 and "the result of p-eagle K=3 (" in missing.last_error, missing.stderr
    assert f"re-measure it with 'peagle sweep --resume {state_file} --redo p-eagle-k3'" in missing.last_error
    assert peagle.run(["sweep", "--resume", str(state_file), "--redo", "p-eagle K=3"], emu.env).code == 0


@pytest.mark.parametrize("argv,error", [
    (["--redo", "off"], "--redo goes with --resume STATE"),
    (["--resume", "STATE", "--redo", "eagle3 K=5"], "--redo 'eagle3 K=5' is not a configuration of sweep swtest-0027 "
                                                    "(off, p-eagle K=3; or their short names off, p-eagle-k3)"),
])
def test_redo_is_refused_in_one_line_without_resume_or_for_an_unknown_configuration(emu_server, tmp_path, argv,
                                                                                    error):
    sf, _ = _sweep(emu_server, tmp_path, 40, modes=("off", "p-eagle"), ks=(3,))
    sf.save()
    argv = [str(sf.path) if a == "STATE" else a for a in argv]
    done = peagle.run(["sweep", *([] if "--resume" in argv else ["qwen3-coder"]), *argv], emu_server.env)
    assert done.code == 2, done.stderr
    assert done.last_error.startswith(f"error: {error}"), done.stderr
    assert emu_server.calls == [] or "CreateEndpoint" not in emu_server.calls


def test_a_refused_redo_or_resume_leaves_the_finished_report_as_it_was(emu_server, tmp_path):
    """Issue 49 item 2: `--resume --redo off --budget 0.01` stops (exit 4) before any AWS call; it rewrote sweep.md,
    .json and .png without off's figures and dropped off's result from the state. A configuration's result leaves
    the report only once its new result is measured; a run that measured nothing leaves the report as it was (so
    does a resume of a finished sweep under a budget below its spend)."""
    SweepStandIn(emu_server).install()
    emu = emu_server
    args = ["sweep", "qwen3-coder", "--modes", "off,p-eagle", "--k", "3", *FAST, "--budget", "40", "--role",
            emu.role_arn, "--yes", "--out", str(tmp_path)]
    assert peagle.run(args, emu.env).code == 0
    state_file = tmp_path / "sweep-state.json"
    report_files = {name: (tmp_path / name).read_bytes() for name in ("sweep.md", "sweep.json", "sweep.png")}
    off_result = json.loads(state_file.read_text())["configs"]["off"]["result_file"]
    emu.calls.clear()

    refused = peagle.run(["sweep", "--resume", str(state_file), "--redo", "off", "--budget", "0.01", "--yes"], emu.env)
    assert refused.code == 4, refused.stderr
    assert not [c for c in emu.calls if c.startswith(("Create", "Delete", "Update"))]
    assert {name: (tmp_path / name).read_bytes() for name in report_files} == report_files
    assert f"the report in {tmp_path} is left as it was: nothing was measured" in refused.stderr
    assert json.loads(state_file.read_text())["configs"]["off"]["result_file"] == off_result  # still in the state

    below = peagle.run(["sweep", "--resume", str(state_file), "--budget", "0.01"], emu.env)
    assert {name: (tmp_path / name).read_bytes() for name in report_files} == report_files, below.stderr
