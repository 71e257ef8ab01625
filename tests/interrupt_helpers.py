"""Shared by the interruption tests (tests/test_interrupt_recovery.py, tests/test_fault_matrix.py).

- `stack(emu, plan, name)`: a peagle endpoint (model, config, endpoint, tags, autoscaling) made directly from a
  deploy plan's request bodies: what `peagle deploy` leaves, without its minute of waits and checks per scenario;
- `Executable`: the installed `peagle` run as a child whose stderr the test reads line by line (bounded waits,
  no polling), its pid known so a test can signal it;
- `Forked`: the same through the suite's fork server (tests/forked_peagle.py), for the many scenarios;
- `settled_state(emu, name)` / `unmanaged_snapshot(emu)`: what the end-state assertions compare;
- `sigkill_owner(emu, run, kind, name, gate)`: SIGKILL the very process a lease names while its call is held, then
  let the call land (its lease is then abandoned at once on this machine, `lease_pid`, `reaped`).
"""

from __future__ import annotations

import copy
import json
import os
import queue
import re
import subprocess
import threading
import time
from typing import Any

from peagle_deploy.testing.emulator import HANG_GUARD_S

from .conftest import PEAGLE

POLL_ENV = {"PEAGLE_POLL_INTERVAL_S": "0", "COLUMNS": "200", "NO_COLOR": "1"}
UNMANAGED = "someone-elses-endpoint"
# a forked command's wall clock moved past a lease's expiry (tests/peagle_forkserver.py): what a SIGKILLed command
# held counts as abandoned, as it would for a user who comes back later
LATER = {"FORKED_PEAGLE_CLOCK_OFFSET_S": "660"}
# a forked command run as if on another machine (tests/peagle_forkserver.py): it cannot see this machine's processes,
# so a lease this machine's peagle left counts by its expiry alone (lifecycle/lease_owner.py)
ELSEWHERE = {"FORKED_PEAGLE_HOST": "another-machine"}
# a sweep of one request per configuration, its waits skipped: what is measured is not the subject
FAST_SWEEP = ["--concurrency", "1", "--num-prompts", "1", "--warmup", "0", "--logs-wait", "0",
              "--provision-estimate", "60", "--agreement-prompts", "0", "--budget", "40"]


def lease_pid(emu: Any, kind: str, name: str) -> int:
    """The pid the `peagle:lease` tag on `name` (an endpoint or a model) names: the command itself, forked, not the
    shim in front of it."""
    sm = emu.client("sagemaker")
    arn = {"endpoint": lambda: sm.describe_endpoint(EndpointName=name)["EndpointArn"],
           "model": lambda: sm.describe_model(ModelName=name)["ModelArn"]}[kind]()
    tags = {t["Key"]: t["Value"] for t in sm.list_tags(ResourceArn=arn)["Tags"]}
    return int(re.search(r" pid=(\d+) ", tags["peagle:lease"])[1])


def sigkill_owner(emu: Any, run: Any, kind: str, name: str, gate: Any) -> int:
    """SIGKILL the process the lease on `name` names while `gate` holds its call, then let the held call land; once
    the process is reaped, its pid (on this machine, its lease is abandoned at once: lifecycle/lease_owner.py)."""
    import signal

    pid = lease_pid(emu, kind, name)
    assert pid != run.pid  # the command, not the shim that forwards to it
    os.kill(pid, signal.SIGKILL)
    assert run.finish() == -signal.SIGKILL, run.stderr
    gate.release()
    gate.done.wait(HANG_GUARD_S)
    reaped(pid)
    return pid


def reaped(pid: int) -> None:
    """The fork server reaps its child once it answered the shim; a bound only turns a hang into a failure."""
    deadline = time.monotonic() + HANG_GUARD_S
    while os.path.exists(f"/proc/{pid}") and time.monotonic() < deadline:
        time.sleep(0.02)


def stack(emu: Any, plan: Any, name: str) -> None:
    """Model, endpoint config and endpoint `name` from `plan`'s bodies (its tags, peagle:endpoint=name), and its
    autoscaling registered as deploy registers it; InService at once (the emulator's default script)."""
    from peagle_deploy.lifecycle.autoscaling import apply_autoscaling
    from peagle_deploy.hosting import VARIANT_NAME

    sm = emu.client("sagemaker")
    tags = [t for t in plan.create_model["Tags"] if t["Key"] != "peagle:endpoint"] + [
        {"Key": "peagle:endpoint", "Value": name}]
    model = copy.deepcopy(plan.create_model)
    model.update(ModelName=name, Tags=tags)
    config = copy.deepcopy(plan.create_endpoint_config)
    config.update(EndpointConfigName=name, Tags=tags)
    config["ProductionVariants"][0]["ModelName"] = name
    sm.create_model(**model)
    sm.create_endpoint_config(**config)
    sm.create_endpoint(EndpointName=name, EndpointConfigName=name, Tags=tags)
    if plan.autoscaling is not None:
        apply_autoscaling(emu.client("application-autoscaling"), name, VARIANT_NAME, plan.autoscaling)


def unmanaged_snapshot(emu: Any) -> dict[str, Any]:
    """The unmanaged stack as SageMaker holds it: it must never change."""
    sm = emu.client("sagemaker")
    endpoint = sm.describe_endpoint(EndpointName=UNMANAGED)
    return {"config": endpoint["EndpointConfigName"], "status": endpoint["EndpointStatus"],
            "tags": sm.list_tags(ResourceArn=endpoint["EndpointArn"])["Tags"],
            "configs": [c for c in emu.resource_names()["configs"] if c == UNMANAGED],
            "models": [m for m in emu.resource_names()["models"] if m == UNMANAGED]}


def mine(names: list[str], endpoint: str) -> list[str]:
    return sorted(n for n in names if n == endpoint or n.startswith(endpoint + "-u"))


def settled_state(emu: Any, name: str) -> dict[str, Any]:
    """What is left of endpoint `name`: its status and served config, its K read from the served model, its
    intent tags, its configs and models, its registered autoscaling."""
    sm = emu.client("sagemaker")
    names = emu.resource_names()
    state: dict[str, Any] = {"configs": mine(names["configs"], name), "models": mine(names["models"], name),
                             "endpoint": name in names["endpoints"]}
    target = emu.scalable_targets().get(f"endpoint/{name}/variant/AllTraffic")
    state["autoscaling"] = None if target is None else (target["min"], target["max"], tuple(target["policies"]))
    if not state["endpoint"]:
        return state
    endpoint = sm.describe_endpoint(EndpointName=name)
    config = sm.describe_endpoint_config(EndpointConfigName=endpoint["EndpointConfigName"])
    model_name = config["ProductionVariants"][0]["ModelName"]
    env = sm.describe_model(ModelName=model_name)["PrimaryContainer"].get("Environment", {})
    spec = env.get("SM_VLLM_SPECULATIVE_CONFIG")
    tags = {t["Key"]: t["Value"] for t in sm.list_tags(ResourceArn=endpoint["EndpointArn"])["Tags"]}
    state.update(status=endpoint["EndpointStatus"], serves=endpoint["EndpointConfigName"], serves_model=model_name,
                 k=json.loads(spec)["num_speculative_tokens"] if spec else None,
                 instance_type=config["ProductionVariants"][0]["InstanceType"], tags=tags)
    return state


def assert_recovered(state: dict[str, Any], *, k: int | None = None, autoscaling: Any = None) -> None:
    """Exactly one config serving (and its model), labels that match it, no intent left, autoscaling as intended."""
    assert state["endpoint"] and state["status"] == "InService", state
    assert state["configs"] == [state["serves"]], state
    assert state["models"] == [state["serves_model"]], state
    assert not [key for key in state["tags"] if key.startswith(("peagle:update-", "peagle:deleting"))], state
    assert state["tags"].get("peagle:k") == str(state["k"] or 0), state
    if k is not None:
        assert state["k"] == k, state
    if autoscaling is not None:
        assert state["autoscaling"] is not None and state["autoscaling"][:2] == (
            autoscaling.min_capacity, autoscaling.max_capacity), state
        assert state["tags"].get("peagle:autoscale") == autoscaling.to_tag(), state


class _Child:
    """A running `peagle`: its pid, its stderr line by line, its exit code."""

    def __init__(self, pid: int, err_lines: queue.Queue, finish: Any):
        self.pid = pid
        self.stderr_lines: list[str] = []
        self._lines = err_lines
        self._finish = finish
        self.code: int | None = None
        self.stdout = ""
        self._finishing = threading.Lock()

    def signal(self, signum: int) -> None:
        os.kill(self.pid, signum)

    def wait_for_stderr(self, text: str, timeout: float = HANG_GUARD_S) -> str:
        """Until a stderr line with `text` arrives; fails once the child ended without it. `finish()` (another thread
        may run it) drains the same lines into `stderr_lines`: both are looked at, so neither steals the line."""
        deadline = time.monotonic() + timeout
        checked = 0
        while True:
            for line in self.stderr_lines[checked:]:
                if text in line:
                    return line
            checked = len(self.stderr_lines)
            try:
                line = self._lines.get(timeout=0.2)
            except queue.Empty:
                if self.code is not None and checked == len(self.stderr_lines):
                    raise AssertionError(f"peagle exited before printing {text!r}: {self.stderr}") from None
                if time.monotonic() > deadline:
                    raise AssertionError(f"no stderr line with {text!r} in {timeout}s: {self.stderr}") from None
                continue
            if line is None:
                raise AssertionError(f"peagle exited before printing {text!r}: {self.stderr}")
            self.stderr_lines.append(line)

    def finish(self, timeout: float = 180.0) -> int:
        with self._finishing:
            if self.code is not None:
                return self.code
            self.code, self.stdout = self._finish(timeout)
            while True:  # the rest of stderr
                try:
                    line = self._lines.get(timeout=timeout)
                except queue.Empty:
                    break
                if line is None:
                    break
                self.stderr_lines.append(line)
            return self.code

    @property
    def stderr(self) -> str:
        return "".join(self.stderr_lines)

    @property
    def last_error(self) -> str:
        errors = [line for line in self.stderr_lines if line.startswith("error: ")]
        return errors[-1].strip() if errors else ""


def _pump(stream: Any, lines: queue.Queue) -> None:
    for line in stream:
        lines.put(line)
    lines.put(None)


class Executable:
    """The installed `peagle` itself: `start(argv, env)` -> a running child (see _Child)."""

    def program(self) -> str:
        return PEAGLE

    def start(self, argv: list[str], env: dict[str, str]) -> _Child:
        proc = subprocess.Popen([self.program(), *argv], env={**env, **POLL_ENV}, stdin=subprocess.DEVNULL,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        lines: queue.Queue = queue.Queue()
        threading.Thread(target=_pump, args=(proc.stderr, lines), daemon=True).start()

        def finish(timeout: float) -> tuple[int, str]:
            out = proc.stdout.read()
            return proc.wait(timeout), out

        return _Child(proc.pid, lines, finish)

    def run(self, argv: list[str], env: dict[str, str]) -> _Child:
        child = self.start(argv, env)
        child.finish()
        return child

    def close(self) -> None:
        pass


class Forked(Executable):
    """The same, forked from the suite's fork server (tests/forked_peagle.py): the shim's pid is signalled and
    forwards the signal to the command (SIGKILL kills both), and ends as the command ended."""

    def program(self) -> str:
        from .forked_peagle import forked_peagle

        return forked_peagle()

