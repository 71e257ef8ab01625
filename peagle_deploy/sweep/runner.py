"""Running a sweep: per configuration deploy (with a TTL), verify, bench, tear down; within the budget.

Up to `lanes` configurations run at once (worker threads; the main thread only waits, so Ctrl-C and
SIGTERM land there). Every create happens under `create_lock` after the endpoint is written to the
state file, so the teardown that follows an interrupt, a failure or a budget stop (which takes the
same lock) sees every endpoint that can exist. The lifecycle (deploy, wait, verify, delete_stack) and
the bench runner do the work; this module only orders it and keeps the books.
"""

from __future__ import annotations

import io
import signal
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from ..errors import ExitCode, Interrupted, PeagleError, QuotaError
from ..lifecycle.signals import SIGNALS, SignalGuard
from ..output import Output
from .config import Configuration
from .estimate import ConfigPlan, plan_sweep
from .state import LIVE, StateFile

JOIN_POLL_S = 0.2


class BudgetStop(PeagleError):
    """The next step would take the sweep over its --budget: stopped and torn down (exit 4, like a quota)."""

    exit_code = ExitCode.QUOTA


class Sweep:
    def __init__(self, state_file: StateFile, out: Output, out_dir: Path, *, session: Any = None,
                 clock: Callable[[], float] = time.time, sleep: Callable[[float], None] = time.sleep,
                 deployments: dict[str, Any] | None = None):
        self.sf = state_file
        self.out = out
        self.out_dir = Path(out_dir).absolute()  # results are stored relative to the state file (StateFile.relative)
        self.session = session
        self.clock = clock
        self.sleep = sleep
        self.deployments = deployments or {}
        self.create_lock = threading.Lock()
        self.stop = threading.Event()
        self.errors: list[BaseException] = []
        self._queue: list[Configuration] = []
        self._queue_lock = threading.Lock()

    @property
    def request(self):
        return self.sf.state.request

    def _row(self, label: str) -> ConfigPlan:
        return next(r for r in self.sf.state.plan.configurations if r.label == label)

    # money ------------------------------------------------------------------------------------
    def spent_usd(self) -> float:
        """Instance-hours actually used so far (live endpoints up to now) x their price."""
        now = self.clock()
        total = 0.0
        with self.sf.lock:
            for c in self.sf.state.configs.values():
                total += c.spent_usd
                if c.created_at is not None and c.deleted_at is None and c.price_per_hour_usd:
                    total += c.price_per_hour_usd * max(0.0, now - c.created_at) / 3600
        return total

    def _check_budget(self, label: str, step: str, seconds: float) -> None:
        budget = self.request.budget_usd
        row = self._row(label)
        if budget is None or not row.price_per_hour_usd:
            return
        # this step plus tearing this endpoint down afterwards must fit
        step_usd = row.price_per_hour_usd * (seconds + row.teardown_s) / 3600
        spent = self.spent_usd()
        if spent + step_usd > budget:
            raise BudgetStop(f"budget: {step} of {label} would bring the sweep to about ${spent + step_usd:,.2f}, "
                             f"over --budget ${budget:,.2f} (spent ${spent:,.2f})",
                             "finished configurations are in the report; raise --budget and --resume to go on")

    def _close_books(self, label: str) -> None:
        with self.sf.lock:
            c = self.sf.state.configs[label]
            if c.created_at is not None and c.deleted_at is None:
                c.deleted_at = self.clock()
                c.spent_usd += (c.price_per_hour_usd or 0) * max(0.0, c.deleted_at - c.created_at) / 3600
                c.created_at = None
            self.sf.state.spent_usd = round(self.spent_usd(), 6)
            self.sf.save()

    # one configuration ------------------------------------------------------------------------
    def _run_config(self, config: Configuration) -> None:
        label = config.label
        if config.url:
            self._check_budget(label, "benchmarking", self._row(label).bench_s)
            self._bench(config, config.url)
            self.sf.update(label, status="done")
            return
        from ..lifecycle import deploy
        from ..lifecycle.verify import require, verify
        from ..lifecycle.wait import read_retrying, wait_in_service

        plan = self.deployments[label]
        row = self._row(label)
        self._check_budget(label, "deploying", row.provision_s)
        with self.create_lock:
            if self.stop.is_set():
                return
            self.sf.update(label, status="deploying", endpoint=plan.endpoint_name, created_at=self.clock(),
                           deleted_at=None, price_per_hour_usd=row.price_per_hour_usd, error=None)
            self.out.info(f"{label}: creating {plan.endpoint_name} ({plan.instance_type}, expires "
                          f"{plan.expires_at:%H:%M} UTC)" if plan.expires_at else f"{label}: creating")
            deploy(plan, self.session, wait=False, on_note=lambda _m: None, handle_signals=False)
        sm = self.session.client("sagemaker")
        wait_in_service(sm, plan.endpoint_name, timeout_s=self.request.timeout_s, sleep=self.sleep,
                        clock=time.monotonic)
        require(verify(sm, plan, read=lambda call: read_retrying(call, sleep=self.sleep)))
        self.sf.update(label, status="deployed")
        self.out.info(f"{label}: {plan.endpoint_name} is InService, speculative config verified")
        if self.stop.is_set():
            return
        self._check_budget(label, "benchmarking", row.bench_s)
        self._bench(config, plan.endpoint_name)
        if self.stop.is_set():
            return
        self._teardown_one(label, plan.endpoint_name)
        self.sf.update(label, status="done")

    def _bench(self, config: Configuration, target: str) -> None:
        from ..bench.datasets import load_dataset
        from ..bench.runner import BenchPlan, run_bench

        label = config.label
        if config.url:
            from ..redaction import redact_url

            self.sf.update(label, status="deployed", endpoint=redact_url(target), created_at=self.clock(), deleted_at=None,
                           price_per_hour_usd=self._row(label).price_per_hour_usd)
        r = self.request
        plan = BenchPlan(target=target, dataset=load_dataset(r.dataset), concurrency=r.concurrency,
                         max_tokens=r.max_tokens, warmup=r.warmup, duration=r.duration_s if r.num_prompts is None
                         else None, num_prompts=r.num_prompts, out_dir=self.out_dir / "runs", mode=config.mode,
                         k=config.k, region=r.region, profile=r.profile,
                         instance_type=r.instance_type if config.url else None, logs_wait=r.logs_wait_s,
                         chart=False)
        quiet = Output(True, stdout=io.StringIO(), stderr=io.StringIO())
        run = run_bench(plan, quiet)
        json_file = next((f for f in run.files if f.endswith(".json")), None)
        if config.url:
            self._close_books(label)
        self.sf.update(label, status="benched", result_file=self.sf.relative(json_file) if json_file else None)
        if run.failure is not None:
            raise run.failure
        levels = ", ".join(f"c={lv.concurrency} {lv.output_tokens_per_s:,.0f} tok/s" for lv in run.result.levels)
        self.out.info(f"{label}: {levels}")

    def _teardown_one(self, label: str, name: str) -> None:
        from ..lifecycle.teardown import delete_stack

        outcomes = delete_stack(self.session.client("sagemaker"), name, wait=True)
        self._close_books(label)
        left = [o for o in outcomes if o.result == "left"]
        if left:
            raise PeagleError(f"could not delete {name}: {left[0].reason}", f"peagle cleanup {name} --yes")
        with self.sf.lock:
            self.sf.state.removed.append(name)
            self.sf.save()
        self.out.info(f"{label}: removed {name} (endpoint, endpoint config, model)")

    # everything -------------------------------------------------------------------------------
    def teardown_all(self, why: str) -> list[str]:
        """Delete every endpoint the sweep may have created and not yet removed; returns their names."""
        from ..lifecycle.teardown import delete_stack

        removed: list[str] = []
        with self.create_lock:
            for c in list(self.sf.state.live()):
                if c.endpoint and c.endpoint.startswith(("http://", "https://")):
                    self._close_books(c.label)
                    self.sf.update(c.label, status="failed" if c.error else "stopped")
                    continue
                outcomes = delete_stack(self.session.client("sagemaker"), c.endpoint, wait=True)
                self._close_books(c.label)
                gone = [o for o in outcomes if o.result in ("deleted", "already gone")]
                left = [o for o in outcomes if o.result == "left"]
                self.sf.update(c.label, status="failed" if c.error else "stopped", error=c.error or why)
                if left:
                    self.out.warn(f"could not remove {c.endpoint}: {left[0].reason}; run 'peagle cleanup "
                                  f"{c.endpoint} --yes'")
                elif gone:
                    removed.append(c.endpoint)
                    self.out.info(f"removed {c.endpoint} (endpoint, endpoint config, model): {why}")
            with self.sf.lock:
                self.sf.state.removed.extend(removed)
                self.sf.save()
        return removed

    def _worker(self) -> None:
        while not self.stop.is_set():
            with self._queue_lock:
                if not self._queue:
                    return
                config = self._queue.pop(0)
            try:
                self._run_config(config)
            except BaseException as exc:  # noqa: BLE001 - reported by the main thread, which tears down
                if not self.stop.is_set():
                    self.errors.append(exc)
                    message = exc.one_line() if isinstance(exc, PeagleError) else f"{type(exc).__name__}: {exc}"
                    # the status stays as it was (an endpoint may exist): teardown_all marks it failed
                    self.sf.update(config.label, error=message)
                    if self.sf.state.configs[config.label].status == "pending":
                        self.sf.update(config.label, status="stopped" if isinstance(exc, BudgetStop) else "failed")
                self.stop.set()
                return

    def run(self, lanes: int) -> None:
        """Run every configuration not done yet; on any failure, budget stop or signal tear everything down."""
        state = self.sf.state
        self._queue = [c for c in self.request.configurations if state.configs[c.label].status != "done"]
        state.status = "running"
        self.sf.save()
        threads = [threading.Thread(target=self._worker, daemon=True, name=f"sweep-{i}")
                   for i in range(max(1, min(lanes, len(self._queue))))]
        try:
            # SIGINT, SIGTERM and SIGHUP land in this (main) thread, which only waits
            with SignalGuard("tearing down everything this sweep created"):
                for t in threads:
                    t.start()
                while any(t.is_alive() for t in threads):
                    for t in threads:
                        t.join(JOIN_POLL_S)
        except KeyboardInterrupt:
            self.stop.set()
            with _signals_ignored():  # a second Ctrl-C must not leave half of the teardown undone
                state.status, state.stopped_reason = "interrupted", "interrupted"
                self.teardown_all("interrupted")
            raise Interrupted("sweep interrupted", f"finished configurations are kept; continue with "
                              f"'peagle sweep --resume {self.sf.path}'") from None
        if self.errors:
            error = self.errors[0]
            with _signals_ignored():
                budget = isinstance(error, BudgetStop)
                state.status = "stopped" if budget else "failed"
                state.stopped_reason = error.one_line() if isinstance(error, PeagleError) else repr(error)
                self.teardown_all("budget" if budget else "sweep failed")
            raise error
        state.status = "done"
        state.spent_usd = round(self.spent_usd(), 6)
        self.sf.save()

    def resume_leftovers(self) -> list[str]:
        """A killed sweep may have left endpoints: remove them (the configurations run again)."""
        leftovers = self.sf.state.live()
        removed = self.teardown_all("left by an earlier run of this sweep") if leftovers else []
        for c in self.sf.state.configs.values():
            if c.status != "done":
                c.status, c.endpoint, c.created_at, c.deleted_at = "pending", None, None, None
        self.sf.save()
        return removed


def check_lanes(session: Any, instance_type: str, instance_count: int, parallel: int) -> tuple[int, str]:
    """How many endpoints may run at once: --parallel, never beyond what the account's quota leaves."""
    from ..lifecycle.quota import instances_in_use, quota_name, read_quota

    limit = read_quota(session, instance_type)
    if limit is None:
        return parallel, (f"could not read the Service Quotas value '{quota_name(instance_type)}'; running "
                          f"{parallel} at once")
    used = instances_in_use(session.client("sagemaker"), instance_type, session.client("application-autoscaling"))
    free = int(limit - used) // max(1, instance_count)
    if free < 1:
        raise QuotaError(f"quota '{quota_name(instance_type)}' is {limit:g} with {used} in use: no room for one "
                         f"endpoint of {instance_count} x {instance_type}",
                         "request an increase in the Service Quotas console (SageMaker) or remove endpoints")
    lanes = min(parallel, free)
    note = f"quota '{quota_name(instance_type)}': {limit:g}, {used} in use: {lanes} endpoint(s) at once"
    if lanes < parallel:
        note += f" (--parallel {parallel} lowered to fit the quota)"
    return lanes, note


@contextmanager
def _signals_ignored() -> Iterator[None]:
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {signum: signal.signal(signum, signal.SIG_IGN) for signum in SIGNALS}
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


__all__ = ["LIVE", "BudgetStop", "Sweep", "check_lanes", "plan_sweep"]
