"""Running a sweep: per configuration deploy (with a TTL), verify, bench, tear down; within the budget.

Up to `lanes` configurations run at once (worker threads; the main thread only waits, so Ctrl-C and
SIGTERM land there). Every create happens under `create_lock` after the endpoint is written to the
state file, so the teardown that follows an interrupt, a failure or a budget stop (which takes the
same lock) sees every endpoint that can exist. The lifecycle (deploy, wait, verify, delete_stack) and
the bench runner do the work; this module only orders it and keeps the books.

One writer per configuration: once the main thread's teardown has taken a configuration over (an interrupt,
a failure, a budget stop), a worker still finishing it (a bench that ends after the endpoint is gone) writes
nothing more to the state. A delete that fails is a failure: said, the sweep's exit code, and kept in the state
(live status and error) for `--resume` to try again; each teardown first records `peagle:deleting` on the
endpoint, so `peagle recover NAME` can finish it too.

Every model, config and endpoint the sweep creates carries the sweep's lease (`lifecycle.lease`, with
`peagle:sweep-id`), refreshed while the sweep runs and expired when it ends: what a killed sweep left is then
found and removed from any machine, without the state file (`peagle recover --all`, once the lease has expired).
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


class TeardownFailed(PeagleError):
    """A delete of the sweep's endpoint, config or model failed: it keeps billing (exit code: the AWS error's)."""


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
        self.lease: Any = None  # the sweep's lease on what it creates, while `run` runs
        self._queue: list[Configuration] = []
        self._queue_lock = threading.Lock()
        self._closed: set[str] = set()  # configurations the main thread's teardown took over
        self.teardown_failures: list[PeagleError] = []

    def _update(self, label: str, **changes: object) -> None:
        """A worker's write to the state: nothing once the teardown took the configuration over."""
        with self.sf.lock:
            if label not in self._closed:
                self.sf.update(label, **changes)

    @property
    def request(self):
        return self.sf.state.request

    def _row(self, label: str) -> ConfigPlan:
        return next(r for r in self.sf.state.plan.configurations if r.label == label)

    # money ------------------------------------------------------------------------------------
    def spent_usd(self) -> float:
        """Instance-hours actually used so far (live endpoints up to now, the component layout's one endpoint
        included) x their price."""
        now = self.clock()
        total = 0.0
        with self.sf.lock:
            host = self.sf.state.host
            for c in [*self.sf.state.configs.values(), *([host] if host is not None else [])]:
                total += c.spent_usd
                if c.created_at is not None and c.deleted_at is None and c.price_per_hour_usd:
                    total += c.price_per_hour_usd * max(0.0, now - c.created_at) / 3600
        return total

    def _check_budget(self, label: str, step: str, seconds: float) -> None:
        row = self._row(label)
        self._check_cost(f"{step} of {label}", seconds, row.price_per_hour_usd, row.teardown_s)

    def _check_cost(self, what: str, seconds: float, price_per_hour: float | None, teardown_s: float) -> None:
        """`what` (a step of `seconds`), plus tearing its endpoint down afterwards, must fit the budget."""
        budget = self.request.budget_usd
        if budget is None or not price_per_hour:
            return
        step_usd = price_per_hour * (seconds + teardown_s) / 3600
        spent = self.spent_usd()
        if spent + step_usd > budget:
            raise BudgetStop(f"budget: {what} would bring the sweep to about ${spent + step_usd:,.2f}, "
                             f"over --budget ${budget:,.2f} (spent ${spent:,.2f})",
                             f"finished configurations are in the report; go on with 'peagle sweep --resume "
                             f"{self.sf.path} --budget MORE'")

    def _close_books(self, label: str, *, worker: bool = False) -> None:
        with self.sf.lock:
            if worker and label in self._closed:
                return
            self._close(self.sf.state.configs[label])

    def _close(self, record: Any) -> None:
        """`record`'s endpoint is gone: its instance-hours join its spend (call under the state's lock)."""
        if record.created_at is not None and record.deleted_at is None:
            record.deleted_at = self.clock()
            record.spent_usd += (record.price_per_hour_usd or 0) * max(0.0, record.deleted_at - record.created_at) / 3600
            record.created_at = None
        self.sf.state.spent_usd = round(self.spent_usd(), 6)
        self.sf.save()

    # one configuration ------------------------------------------------------------------------
    def _run_config(self, config: Configuration) -> None:
        label = config.label
        if config.url:
            self._check_budget(label, "benchmarking", self._row(label).bench_s)
            self._bench(config, config.url)
            self._update(label, status="done")
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
            self._update(label, status="deploying", endpoint=plan.endpoint_name, created_at=self.clock(),
                         deleted_at=None, price_per_hour_usd=row.price_per_hour_usd, error=None)
            self.out.info(f"{label}: creating {plan.endpoint_name} ({plan.instance_type}, expires "
                          f"{plan.expires_at:%H:%M} UTC)" if plan.expires_at else f"{label}: creating")
            deploy(plan, self.session, wait=False, on_note=lambda _m: None, handle_signals=False, lease=self.lease)
        sm = self.session.client("sagemaker")
        wait_in_service(sm, plan.endpoint_name, timeout_s=self.request.timeout_s, sleep=self.sleep,
                        clock=time.monotonic)
        require(verify(sm, plan, read=lambda call: read_retrying(call, sleep=self.sleep)))
        self._update(label, status="deployed")
        self.out.info(f"{label}: {plan.endpoint_name} is InService, speculative config verified")
        if self.stop.is_set():
            return
        self._check_budget(label, "benchmarking", row.bench_s)
        self._bench(config, plan.endpoint_name)
        if self.stop.is_set():
            return
        self._teardown_one(label, plan.endpoint_name)
        self._update(label, status="done")

    def _bench(self, config: Configuration, target: str, component: str | None = None) -> None:
        """`component`: the inference component of endpoint `target` that the requests address."""
        from ..bench.datasets import load_dataset
        from ..bench.runner import BenchPlan, run_bench
        from ..runtime.target_ref import parse_target

        label = config.label
        if config.url:
            from ..redaction import redact_url

            self._update(label, status="deployed", endpoint=redact_url(target), created_at=self.clock(),
                         deleted_at=None, price_per_hour_usd=self._row(label).price_per_hour_usd)
        r = self.request
        ref = parse_target(target)
        if component:
            ref = ref.model_copy(update={"inference_component": component})
        plan = BenchPlan(target=ref, dataset=load_dataset(r.dataset), concurrency=r.concurrency,
                         max_tokens=r.max_tokens, warmup=r.warmup, duration=r.duration_s if r.num_prompts is None
                         else None, num_prompts=r.num_prompts, out_dir=self.out_dir / "runs", mode=config.mode,
                         k=config.k, label_source="url-label" if config.url else "flags",
                         label_name=f"--url {config.mode}{'' if config.k is None else f':{config.k}'}" if config.url
                         else f"configuration {label}", region=r.region, profile=r.profile,
                         instance_type=r.instance_type if config.url else None, logs_wait=r.logs_wait_s,
                         chart=False)
        quiet = Output(True, stdout=io.StringIO(), stderr=io.StringIO())
        run = run_bench(plan, quiet)
        json_file = next((f for f in run.files if f.endswith(".json")), None)
        if run.failure is None:
            self._keep_outputs(config, ref, plan.dataset.prompts)
        if config.url:
            self._close_books(label, worker=True)
        self._update(label, status="benched", result_file=self.sf.relative(json_file) if json_file else None,
                     measured=run.failure is None)
        if run.failure is not None:
            raise run.failure
        levels = ", ".join(f"c={lv.concurrency} {lv.output_tokens_per_s:,.0f} tok/s" for lv in run.result.levels)
        self.out.info(f"{label}: {levels}")

    def _keep_outputs(self, config: Configuration, target: Any, prompts: list) -> None:
        """Greedy answers to the first prompts, for the report's agreement check against off (a failure here
        is a note in the report, not a failed configuration)."""
        from ..bench.agreement import AGREEMENT_MAX_TOKENS, collect

        r = self.request
        if not r.agreement_prompts:
            return
        try:
            sample = collect(target, prompts[:r.agreement_prompts], max_tokens=min(r.max_tokens, AGREEMENT_MAX_TOKENS),
                             temperature=0.0, concurrency=4, region=r.region, profile=r.profile)
        except PeagleError as exc:
            self.sf.update(config.label, outputs_note=f"no outputs kept: {exc.one_line()}")
            return
        from ..safe_write import write_text

        path = self.out_dir / "runs" / f"outputs-{config.slug}.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        write_text(path, sample.model_dump_json() + "\n")
        self.sf.update(config.label, outputs_file=self.sf.relative(path), outputs_note=None)

    def _delete(self, name: str) -> tuple[bool, list[Any], PeagleError | None]:
        """(deleted anything, outcomes, the failure) for the sweep's endpoint `name`, its config and model."""
        from ..lifecycle.teardown import delete_stack, mark_for_deletion
        from ..lifecycle.intent import recover_command

        sm = self.session.client("sagemaker")
        try:
            outcomes = delete_stack(sm, name, wait=True,
                                    before_delete=lambda _n, arn: arn and mark_for_deletion(sm, arn))
        except Exception as exc:  # noqa: BLE001 - an AWS failure of the delete is the sweep's failure, said
            from ..aws import translate_error

            error = translate_error(exc)
            if error is None:
                raise
            outcomes = []
            failure: PeagleError | None = TeardownFailed(error.message, exit_code=error.exit_code)
        else:
            if self.lease is not None:
                self.lease.drop_deleted(outcomes)
            bad = [o for o in outcomes if o.result in ("left", "failed")]
            failure = None
            if bad:
                failure = TeardownFailed(f"could not delete {bad[0].kind.replace('_', ' ')} {bad[0].name}: "
                                      f"{bad[0].reason}", exit_code=bad[0].exit_code)
        if failure is not None:
            failure.hint = (f"it keeps billing: 'peagle sweep --resume {self.sf.path}' tries again, or "
                            f"'{recover_command(name, self.request.region)}' finishes the deletion")
        return any(o.result == "deleted" for o in outcomes), outcomes, failure

    def _teardown_one(self, label: str, name: str) -> None:
        deleted, _, failure = self._delete(name)
        if failure is not None:
            self._update(label, error=failure.one_line())  # still live: resume and teardown_all try again
            raise failure
        with self.sf.lock:
            if label in self._closed:  # the main thread's teardown took it over meanwhile and says what it did
                return
            self._close_books(label, worker=True)
            if deleted:
                self.sf.state.removed.append(name)
            self.sf.save()
        self.out.info(f"{label}: removed {name} (endpoint, endpoint config, model)")

    # everything -------------------------------------------------------------------------------
    def _settled(self, c: Any) -> str:
        """The status of a configuration whose endpoint is gone: measured stays measured."""
        return "done" if c.measured else "failed" if c.error else "stopped"

    def teardown_all(self, why: str) -> list[str]:
        """Delete every endpoint the sweep may have created and not yet removed; returns the names of those it
        really deleted (an endpoint already gone is not reported as removed). A delete that fails keeps the
        configuration live in the state, with the error, and is in `self.teardown_failures`."""
        removed: list[str] = []
        self.teardown_failures: list[PeagleError] = []
        with self.create_lock:
            with self.sf.lock:
                self._closed.update(c.label for c in self.sf.state.live())
            for c in list(self.sf.state.live()):
                if c.endpoint and c.endpoint.startswith(("http://", "https://")):
                    self._close_books(c.label)
                    self.sf.update(c.label, status=self._settled(c))
                    continue
                deleted, _, failure = self._delete(c.endpoint)
                if failure is not None:
                    self.teardown_failures.append(failure)
                    self.sf.update(c.label, error=failure.one_line())
                    self.out.warn(f"could not remove {c.endpoint}: {failure.one_line()}")
                    continue
                self._close_books(c.label)
                error = None if c.measured else c.error or why
                self.sf.update(c.label, status=self._settled(c), error=error)
                if deleted:
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
                self._failed(config.label, exc)
                return

    def _failed(self, label: str | None, exc: BaseException) -> None:
        """A worker's failure: kept for the main thread (which tears down), said on its configuration, if any."""
        if not self.stop.is_set():
            self.errors.append(exc)
            message = exc.one_line() if isinstance(exc, PeagleError) else f"{type(exc).__name__}: {exc}"
            if label is not None:
                # the status stays as it was (an endpoint may exist): teardown_all settles it
                self._update(label, error=message)
                if self.sf.state.configs[label].status == "pending":
                    self._update(label, status="stopped" if isinstance(exc, BudgetStop) else "failed")
        self.stop.set()

    def _threads(self, lanes: int) -> list[threading.Thread]:
        """The workers: `lanes` of them, each taking the next configuration."""
        return [threading.Thread(target=self._worker, daemon=True, name=f"sweep-{i}")
                for i in range(max(1, min(lanes, len(self._queue))))]

    def run(self, lanes: int) -> None:
        """Run every configuration not done yet; on any failure, budget stop or signal tear everything down. What
        it creates carries the sweep's lease until then (expired at the end, whatever is left)."""
        from contextlib import nullcontext

        from ..lifecycle.lease import LeaseHolder

        if self.session is not None:
            self.lease = LeaseHolder(self.session.client("sagemaker"), "sweep", expire_on_release=True)
        with self.lease or nullcontext():
            self._run(lanes)

    def _run(self, lanes: int) -> None:
        state = self.sf.state
        self._queue = [c for c in self.request.configurations
                       if state.configs[c.label].status != "done" and not state.configs[c.label].measured]
        state.status = "running"
        self.sf.save()
        threads = self._threads(lanes)
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
            left = self.teardown_failures
            raise Interrupted("sweep interrupted", (f"{left[0].one_line()}; " if left else "")
                              + f"finished configurations are kept; continue with 'peagle sweep --resume "
                              f"{self.sf.path}'") from None
        if self.errors:
            error = self.errors[0]
            with _signals_ignored():
                budget = isinstance(error, BudgetStop)
                state.status = "stopped" if budget else "failed"
                state.stopped_reason = error.one_line() if isinstance(error, PeagleError) else repr(error)
                self.teardown_all("budget" if budget else "sweep failed")
            failures = self.teardown_failures
            if failures and not isinstance(error, TeardownFailed):
                if budget or not isinstance(error, PeagleError):
                    raise failures[0]  # an endpoint still bills: that outranks a budget stop
                error.hint = f"{error.hint + '; ' if error.hint else ''}{failures[0].one_line()}"
            raise error
        state.status = "done"
        state.spent_usd = round(self.spent_usd(), 6)
        self.sf.save()

    def resume_leftovers(self) -> list[str]:
        """A killed or failed sweep may have left endpoints: remove them (returns those really deleted). The
        configurations not measured run again; a measured one is done once its endpoint is gone. A delete that
        still fails stops the resume (nothing new is deployed while an old endpoint bills)."""
        self.teardown_failures = []
        removed = self.teardown_all("left by an earlier run of this sweep") if self._left_live() else []
        if self.teardown_failures:
            raise self.teardown_failures[0]
        self._closed.clear()
        for c in self.sf.state.configs.values():
            if c.status != "done" and not c.measured:
                c.status, c.endpoint, c.created_at, c.deleted_at, c.error = "pending", None, None, None, None
        if self.sf.state.host is not None:  # the component layout's one endpoint: made again (its spend stays)
            self.sf.state.host.status, self.sf.state.host.error = "pending", None
        self.sf.save()
        return removed

    def _left_live(self) -> bool:
        """Whether an earlier run may have left something that bills."""
        return bool(self.sf.state.live())


def check_url_labels(configs: list[Configuration], out: Output, *, trust_labels: bool) -> None:
    """Before anything is measured: each --url server's own mode and K against its label. A contradiction
    is refused (exit 2, one line naming both values) unless --trust-labels; a server that shows nothing
    is measured under its label, said in a note."""
    import asyncio

    from ..bench.server_facts import read_url_facts, reconcile, suggested_label
    from ..errors import UsageError
    from ..runtime.target_ref import parse_target

    for config in configs:
        if not config.url:
            continue
        facts = asyncio.run(read_url_facts(parse_target(config.url)))
        name = f"--url {config.mode}{'' if config.k is None else f':{config.k}'}"
        found = reconcile(config.mode, config.k, facts, label_source="url-label", label_name=name).disagreement
        if found is None:
            if not facts.known:
                out.note(f"{name}: the server shows no mode or K ({'; '.join(facts.notes) or 'nothing read'}); "
                         "measured under its label")
            continue
        if not trust_labels:
            better = suggested_label(config.mode, facts)
            fix = f"label it --url {better}={config.url}" if better else "fix its --url label"
            raise UsageError(found, f"{fix}, or pass --trust-labels to measure it anyway (the results record the "
                                    "server's values)")
        out.warn(f"{found}; measured anyway (--trust-labels)")


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


__all__ = ["LIVE", "BudgetStop", "Sweep", "TeardownFailed", "check_lanes", "check_url_labels", "plan_sweep"]
