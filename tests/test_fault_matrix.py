"""The fault matrix of `peagle update`, `peagle cleanup` and `peagle sweep` (issue 27), like deploy's signal
matrix (tests/test_fault_signals.py): every AWS step of each command x SIGINT, SIGTERM, SIGKILL, a held call (the
answer held back while SIGTERM arrives), a refused call (ValidationException) and a lost answer (SageMaker acts,
the answer is an HTTP 500; AWS_MAX_ATTEMPTS=1, so peagle itself must find out what happened).

Every scenario ends the way a user would: `peagle status NAME` (it must name `peagle recover NAME` whenever
something is left to finish), then the recovery command (`peagle recover NAME`; for a sweep,
`peagle sweep --resume STATE`), and asserts the end state: the endpoint serving exactly the config SageMaker
settled on with its model, labels that match it, no intent tags, autoscaling as intended, no unused peagle config
or model, and the unmanaged stack `someone-elses-endpoint` (present throughout) untouched. Every failure line
names `peagle recover` before any raw `aws` command.

Moments are pinned with emulator gates and faults scoped to the scenario's caller (AWS_SDK_UA_APP_ID), so
independent scenarios share one emulator and run in parallel (PEAGLE_MATRIX_WORKERS, default 3), each in a process
forked from one that imported peagle once (tests/forked_peagle.py via tests/interrupt_helpers.py); polls use
PEAGLE_POLL_INTERVAL_S=0. By default a fixed sample runs (every step and every fault kind at least once);
PEAGLE_FAULT_MATRIX=full runs every combination (update 78, cleanup 42, sweep 48 scenarios).
"""

from __future__ import annotations

import json
import os
import signal
import tempfile
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from peagle_deploy.autoscale import AutoscalePolicy

from .interrupt_helpers import LATER, UNMANAGED, Forked, assert_recovered, settled_state, stack, unmanaged_snapshot

POLICY = AutoscalePolicy(min_capacity=1, max_capacity=4, metric="concurrency", target=8)
FAULTS = ("SIGINT", "SIGTERM", "SIGKILL", "held", "refused", "lost")
FULL = os.environ.get("PEAGLE_FAULT_MATRIX") == "full"

# (step label, API action, calls of it by this scenario let through first)
UPDATE_STEPS = [
    ("intent", "AddTags", 0), ("CreateModel", "CreateModel", 0), ("CreateEndpointConfig", "CreateEndpointConfig", 0),
    ("DeleteScalingPolicy", "DeleteScalingPolicy", 0), ("Deregister", "DeregisterScalableTarget", 0),
    ("UpdateEndpoint", "UpdateEndpoint", 0), ("wait", "DescribeEndpoint", 3), ("retag", "AddTags", 1),
    ("Register", "RegisterScalableTarget", 0), ("PutScalingPolicy", "PutScalingPolicy", 0),
    ("DeleteEndpointConfig", "DeleteEndpointConfig", 0), ("DeleteModel", "DeleteModel", 0),
    ("clear-intent", "DeleteTags", 0)]
CLEANUP_STEPS = [
    ("mark", "AddTags", 0), ("DeleteScalingPolicy", "DeleteScalingPolicy", 0),
    ("Deregister", "DeregisterScalableTarget", 0), ("DeleteEndpoint", "DeleteEndpoint", 0),
    ("DeleteEndpointConfig", "DeleteEndpointConfig", 0), ("DeleteModel", "DeleteModel", 0),
    ("wait-deleted", "DescribeEndpoint", 2)]
SWEEP_STEPS = [
    ("CreateModel", "CreateModel", 0), ("CreateEndpointConfig", "CreateEndpointConfig", 0),
    ("CreateEndpoint", "CreateEndpoint", 0), ("bench", "InvokeEndpointWithResponseStream", 0),
    ("mark", "AddTags", 0), ("DeleteEndpoint", "DeleteEndpoint", 0),
    ("DeleteEndpointConfig", "DeleteEndpointConfig", 0), ("DeleteModel", "DeleteModel", 0)]
# the default sample: each step with a rotating fault, plus SIGKILL and a lost answer where they matter most
_SAMPLE = {
    "update": {("intent", "SIGTERM"), ("CreateModel", "held"), ("CreateEndpointConfig", "lost"),
               ("DeleteScalingPolicy", "SIGINT"), ("Deregister", "refused"), ("UpdateEndpoint", "SIGTERM"),
               ("UpdateEndpoint", "held"), ("UpdateEndpoint", "lost"), ("UpdateEndpoint", "SIGKILL"),
               ("UpdateEndpoint", "refused"), ("wait", "SIGKILL"), ("wait", "refused"), ("retag", "SIGKILL"),
               ("Register", "lost"), ("PutScalingPolicy", "SIGTERM"), ("DeleteEndpointConfig", "refused"),
               ("DeleteModel", "SIGKILL"), ("clear-intent", "lost")},
    "cleanup": {("mark", "refused"), ("DeleteScalingPolicy", "SIGKILL"), ("Deregister", "lost"),
                ("DeleteEndpoint", "SIGTERM"), ("DeleteEndpoint", "lost"), ("DeleteEndpointConfig", "held"),
                ("DeleteModel", "SIGINT"), ("wait-deleted", "SIGKILL")},
    "sweep": {("CreateEndpoint", "SIGKILL"), ("bench", "SIGTERM"), ("DeleteEndpoint", "refused"),
              ("DeleteEndpoint", "SIGKILL"), ("DeleteModel", "lost")},
}
SIGNALS = {"SIGINT": signal.SIGINT, "SIGTERM": signal.SIGTERM, "SIGKILL": signal.SIGKILL}
FAST_SWEEP = ["--modes", "p-eagle", "--k", "3", "--concurrency", "1", "--num-prompts", "1", "--warmup", "0",
              "--logs-wait", "0", "--provision-estimate", "60", "--budget", "40"]


@dataclass
class Scenario:
    command: str
    step: str
    action: str
    skip: int
    fault: str

    @property
    def id(self) -> str:
        return f"{self.command}-{self.step}-{self.fault}"


def _scenarios() -> list[Scenario]:
    found = []
    for command, steps in (("update", UPDATE_STEPS), ("cleanup", CLEANUP_STEPS), ("sweep", SWEEP_STEPS)):
        for step, action, skip in steps:
            for fault in FAULTS:
                if FULL or (step, fault) in _SAMPLE[command]:
                    found.append(Scenario(command, step, action, skip, fault))
    return found


SCENARIOS = _scenarios()


@dataclass
class Outcome:
    scenario: Scenario
    name: str
    code: int | None = None
    stderr: str = ""
    last_error: str = ""
    status_code: int | None = None
    status_out: str = ""
    left_before: dict[str, Any] = field(default_factory=dict)
    recover_code: int | None = None
    recover_out: str = ""
    state: dict[str, Any] = field(default_factory=dict)
    extra: dict[str, Any] = field(default_factory=dict)


def _arm(emu: Any, sc: Scenario, caller: str, name: str | None) -> Any:
    """The scenario's fault on its caller's calls (a DescribeEndpoint: only those of its own endpoint, since
    reading who uses what describes every endpoint of the region)."""
    resource = name if sc.action == "DescribeEndpoint" else None
    if sc.fault == "refused":
        emu.fail(sc.action, "ValidationException", "refused (emulated)", skip=sc.skip, caller=caller,
                 resource=resource)
    elif sc.fault == "lost":
        emu.fail(sc.action, "InternalFailure", "answer lost (emulated)", status=500, skip=sc.skip, after=True,
                 caller=caller, resource=resource)
    else:
        return emu.gate(sc.action, skip=sc.skip, when="after" if sc.fault == "held" else "before", caller=caller,
                        resource=resource)
    return None


def _interrupt(child: Any, gate: Any, sc: Scenario) -> None:
    """Run the command to its end, landing the scenario's signal while its call is held."""
    if gate is None:
        child.finish()
        return
    either = threading.Event()  # the call reached the gate, or the command ended before that step

    def finish() -> None:
        child.finish()
        either.set()

    finishing = threading.Thread(target=finish, daemon=True)
    finishing.start()
    threading.Thread(target=lambda: gate.entered.wait(180) and either.set(), daemon=True).start()
    either.wait(180)
    if not gate.entered.is_set():
        gate.release()  # never used: must not hold a later call (the recovery's)
        finishing.join(180)
        return
    signum = signal.SIGTERM if sc.fault == "held" else SIGNALS[sc.fault]
    child.signal(signum)
    if signum == signal.SIGKILL:
        finishing.join(180)
        gate.release()
        gate.done.wait(30)
        return
    child.wait_for_stderr(f"received {signum.name}")
    gate.release()
    finishing.join(180)


def _run(emu: Any, runner: Forked, plans: dict, sc: Scenario, index: int, root: Path, served: dict) -> Outcome:
    name = f"m{index:03d}-{sc.command[:2]}"
    caller = f"matrix-{name}"
    env = {**emu.env, "AWS_SDK_UA_APP_ID": caller, "AWS_MAX_ATTEMPTS": "1"}
    out = Outcome(sc, name)
    if sc.command == "sweep":
        return _run_sweep(emu, runner, sc, out, env, caller, root / name, served)
    stack(emu, plans["autoscaled"], name)
    gate = _arm(emu, sc, caller, name)
    argv = (["update", name, "--instance-type", "ml.g7e.4xlarge", "--k", "5", "--bake", "0s", "--yes"]
            if sc.command == "update" else ["cleanup", name, "--yes"])
    child = runner.start(argv, env)
    _interrupt(child, gate, sc)
    out.code, out.stderr, out.last_error = child.code, child.stderr, child.last_error
    emu.clear_faults(caller)
    _finish(emu, runner, out, {**emu.env, "AWS_SDK_UA_APP_ID": caller + "-after"}, name)
    return out


def _finish(emu: Any, runner: Forked, out: Outcome, env: dict, name: str) -> None:
    if out.scenario.fault == "SIGKILL":  # what it held counts as abandoned once its lease expired: come back later
        env = {**env, **LATER}
    out.left_before = settled_state(emu, name)
    status = runner.run(["status", name], env)
    out.status_code, out.status_out = status.code, status.stdout + status.stderr
    done = runner.run(["recover", name], env)
    out.recover_code, out.recover_out = done.code, done.stdout + done.stderr
    out.state = settled_state(emu, name)


def _run_sweep(emu: Any, runner: Forked, sc: Scenario, out: Outcome, env: dict, caller: str,
               folder: Path, served: dict) -> Outcome:
    gate = _arm(emu, sc, caller, None)
    child = runner.start(["sweep", "qwen3-coder", *FAST_SWEEP, "--role", emu.role_arn, "--yes", "--out",
                          str(folder)], env)
    _interrupt(child, gate, sc)
    out.code, out.stderr, out.last_error = child.code, child.stderr, child.last_error
    emu.clear_faults(caller)
    state_file = folder / "sweep-state.json"
    state = json.loads(state_file.read_text())
    endpoint = state["plan"]["configurations"][0]["endpoint"]
    out.name = endpoint
    out.extra["measured_before"] = state["configs"]["p-eagle K=3"]["measured"]
    after = {**emu.env, "AWS_SDK_UA_APP_ID": caller + "-after"}
    out.left_before = settled_state(emu, endpoint)
    status = runner.run(["status", endpoint], after)
    out.status_code, out.status_out = status.code, status.stdout + status.stderr
    served_before = served.get(endpoint, 0)
    resumed = runner.run(["sweep", "--resume", str(state_file), "--json"], after)
    out.recover_code, out.recover_out = resumed.code, resumed.stdout + resumed.stderr
    out.extra["benched_again"] = served.get(endpoint, 0) > served_before
    out.extra["report"] = json.loads(resumed.stdout).get("report") if resumed.code == 0 else None
    out.state = settled_state(emu, endpoint)
    return out


@pytest.fixture(scope="module")
def plans():
    from peagle_deploy.plan import PlanRequest, build_plan

    role = "arn:aws:iam::123456789012:role/peagle-emulator"
    return {"autoscaled": build_plan(PlanRequest(model="qwen3-coder", role=role, name="x", offline=True,
                                                 autoscale=POLICY))}


@pytest.fixture(scope="module")
def outcomes(emulator_server, plans, request):
    """Every selected scenario, run once in parallel before the per-scenario assertions."""
    from peagle_deploy.testing.sweep_standins import SweepStandIn

    emu = emulator_server
    emu.reset()
    emu._seed()
    emu._faults.clear()
    emu._gates.clear()
    emu.script_endpoints(creating_polls=0)
    emu.script_update(updating_polls=2)
    standin = SweepStandIn(emu).install()
    emu.create_endpoint_stack(UNMANAGED)
    before = unmanaged_snapshot(emu)
    selected = {item.callspec.params["sc"].id for item in request.session.items
                if item.originalname == "test_fault" and item.module is request.module}
    runner = Forked()
    workers = int(os.environ.get("PEAGLE_MATRIX_WORKERS", "3"))
    with tempfile.TemporaryDirectory(prefix="peagle-matrix-") as root, ThreadPoolExecutor(workers) as pool:
        futures = {sc.id: pool.submit(_run, emu, runner, plans, sc, i, Path(root), standin.served)
                   for i, sc in enumerate(SCENARIOS) if sc.id in selected}
        try:
            results = {key: future.result() for key, future in futures.items()}
            results["_unmanaged"] = (before, unmanaged_snapshot(emu))
            yield results
        finally:
            runner.close()
            for gate in list(emu._gates):
                gate.release()


def _names_recover_first(text: str) -> bool:
    return "aws sagemaker" not in text or ("peagle recover" in text
                                           and text.index("peagle recover") < text.index("aws sagemaker"))


@pytest.mark.parametrize("sc", SCENARIOS, ids=[sc.id for sc in SCENARIOS])
def test_fault(sc, outcomes):
    got: Outcome = outcomes[sc.id]
    shown = (f"exit {got.code}\nstderr: {got.stderr[-3000:]}\nleft: {got.left_before}\nstatus "
             f"{got.status_code}: {got.status_out[-2000:]}\nrecover {got.recover_code}: {got.recover_out[-2000:]}\n"
             f"state: {got.state}")
    assert "Traceback" not in got.stderr + got.status_out + got.recover_out, shown
    assert got.code in (0, 1, 2, 3, 4, 5, 6, 130, -signal.SIGKILL), shown
    if sc.fault in ("SIGINT", "SIGTERM", "held") and got.code not in (0, -signal.SIGKILL):
        assert got.code == 130 or got.last_error, shown
    for line in got.stderr.splitlines():
        assert _names_recover_first(line), shown
    left_to_finish = _left_to_finish(got)
    if sc.command != "sweep":
        if left_to_finish:
            assert f"peagle recover {got.name}" in got.status_out, shown
        assert got.status_code in (0, 2), shown
    if sc.command == "update":
        assert got.recover_code == 0, shown
        assert_recovered(got.state, autoscaling=POLICY)
        moved = got.state["serves"] != got.name
        assert (got.state["k"], got.state["instance_type"]) == ((5, "ml.g7e.4xlarge") if moved else
                                                                (3, "ml.g7e.2xlarge")), shown
        if got.code == 0:
            assert moved, shown
    elif sc.command == "cleanup":
        assert got.recover_code == 0, shown
        if got.state["endpoint"]:  # the cleanup never started deleting: the endpoint is whole
            assert_recovered(got.state, autoscaling=POLICY)
            assert got.code != 0, shown
        else:
            assert got.state == {"configs": [], "models": [], "endpoint": False, "autoscaling": None}, shown
    else:
        assert got.recover_code == 0, shown
        report = got.extra["report"]
        assert [c["status"] for c in report["configurations"]] == ["done"], shown
        assert got.state == {"configs": [], "models": [], "endpoint": False, "autoscaling": None}, shown
        if got.extra["measured_before"]:
            assert not got.extra["benched_again"], shown  # a measured configuration is never measured twice


def _left_to_finish(got: Outcome) -> bool:
    """Something peagle must finish: an endpoint mid-update or marked for deletion, or leftovers of it."""
    state = got.left_before
    if not state.get("endpoint"):
        return bool(state.get("configs") or state.get("models"))
    tags = state.get("tags", {})
    return bool([k for k in tags if k.startswith(("peagle:update-", "peagle:deleting"))]
                or len(state["configs"]) > 1 or len(state["models"]) > 1
                or (state.get("autoscaling") is None and "peagle:autoscale" in tags))


def test_the_unmanaged_stack_was_never_touched(outcomes):
    before, after = outcomes["_unmanaged"]
    assert before == after


def test_matrix_size_and_outcomes(outcomes, capsys):
    """The numbers for the closing note: scenarios per command and how each ended."""
    rows: dict[str, dict[str, int]] = {}
    for key, got in outcomes.items():
        if key.startswith("_"):
            continue
        row = rows.setdefault(got.scenario.command, {})
        ending = ("completed" if got.code == 0 else "killed" if got.code == -signal.SIGKILL
                  else "interrupted" if got.code == 130 else "failed")
        row[ending] = row.get(ending, 0) + 1
    with capsys.disabled():
        if os.environ.get("PEAGLE_MATRIX_SHOW"):
            for key, got in sorted(outcomes.items()):
                if not key.startswith("_"):
                    print(f"\n{key}: exit {got.code}: {got.last_error or '-'}\n  recover: "
                          f"{' | '.join(got.recover_out.strip().splitlines()[:4])}")
        for command, row in sorted(rows.items()):
            print(f"\nfault matrix {command}: {sum(row.values())} scenarios, "
                  + ", ".join(f"{n} {ending}" for ending, n in sorted(row.items())))
    assert rows
