"""Running the component layout of a sweep (`--hosting component`, sweep/component_layout.py).

One worker, in order: the endpoint (its config, instances only, then the endpoint; InService); then batch by batch,
every component of the batch created at once (its model, then the component), each waited for and verified (the
model's speculative config and drafter channel, the endpoint's instance type, the component as SageMaker holds it:
the model it names, its GPUs and memory); then one configuration at a time: its bench addresses its component alone
(`InferenceComponentName`; no other component gets requests meanwhile), and the component and its model are removed
as soon as it is measured, freeing its GPUs for the next batch; the endpoint last.

Everything else is the sweep's (runner.Sweep): the state file (each component's name, and the endpoint's, written
before its create), the lease on everything created, the budget before each step, and the teardown after a failure,
a budget stop or a signal, which here removes the endpoint with whatever it still hosts, components first
(`teardown.delete_stack`: components, endpoint, config, models), marked `peagle:deleting` so `peagle recover` can finish
it. A killed sweep's endpoint carries `peagle:sweep-id` and an expired lease: `peagle recover --all` removes it the
same way, components before their endpoint.
"""

from __future__ import annotations

import time
from typing import Any

from .. import clock as peagle_clock
from ..aws import is_lost_answer
from .runner import Sweep, TeardownFailed
from .state import LIVE, ConfigState

HOST_LABEL = "endpoint"
RECONCILE_POLLS = 3  # a create whose answer was lost: looked for this many times (1 s apart), then torn down
_CREATE = {"model": ("create_model", "ModelArn"), "endpoint_config": ("create_endpoint_config", "EndpointConfigArn"),
           "endpoint": ("create_endpoint", "EndpointArn"),
           "inference_component": ("create_inference_component", "InferenceComponentArn")}


class ComponentSweep(Sweep):
    def __init__(self, state_file: Any, out: Any, out_dir: Any, *, layout: Any, **kwargs: Any):
        super().__init__(state_file, out, out_dir, **kwargs)
        self.layout = layout
        self._current: str | None = None  # the configuration a failure belongs to, if any

    # the books of the one endpoint --------------------------------------------------------------------------------
    def _host(self) -> ConfigState:
        with self.sf.lock:
            if self.sf.state.host is None:
                self.sf.state.host = ConfigState(label=HOST_LABEL)
            return self.sf.state.host

    def _set_host(self, **changes: object) -> None:
        with self.sf.lock:
            host = self._host()
            for key, value in changes.items():
                setattr(host, key, value)
            self.sf.save()

    def _close_host_books(self) -> None:
        with self.sf.lock:
            self._close(self._host())

    def _host_live(self) -> bool:
        host = self.sf.state.host
        return host is not None and host.status in LIVE and bool(host.endpoint)

    # the work ------------------------------------------------------------------------------------------------------
    def _threads(self, lanes: int) -> list[Any]:
        import threading

        return [threading.Thread(target=self._layout_worker, daemon=True, name="sweep-components")]

    def _layout_worker(self) -> None:
        try:
            self._run_layout()
        except BaseException as exc:  # noqa: BLE001 - reported by the main thread, which tears down
            self._failed(self._current, exc)

    def _run_layout(self) -> None:
        state = self.sf.state
        todo = [c for c in self.request.configurations
                if state.configs[c.label].status != "done" and not state.configs[c.label].measured]
        if not todo:
            return
        self._create_host()
        size = max(1, self.layout.at_once)
        for start in range(0, len(todo), size):
            batch = todo[start:start + size]
            if self.stop.is_set():
                return
            self._check_cost(f"loading {', '.join(c.label for c in batch)}", self.layout.load_s,
                             self.layout.price_per_hour_usd, self.layout.teardown_s)
            for config in batch:
                self._create_component(config)
            for config in batch:
                self._await_component(config)
            for config in batch:
                self._measure(config)
        self._current = None
        if not self.stop.is_set():
            self._teardown_host()

    def _create(self, sm: Any, kind: str, body: dict[str, Any], name: str) -> None:
        """One create, carrying the sweep's lease; a lost answer is looked for by name before it fails the sweep
        (whose teardown then finds it)."""
        from ..describe import describe
        from ..lifecycle.components import describe_component

        method, arn_key = _CREATE[kind]
        try:
            answer = getattr(sm, method)(**self.lease.with_tag(body))
        except Exception as exc:
            if is_lost_answer(exc):
                for _ in range(RECONCILE_POLLS):
                    found = (describe_component(sm, name) if kind == "inference_component"
                             else describe(sm, kind, name))  # type: ignore[arg-type]
                    if found is not None:
                        self.lease.hold(found.get(arn_key))
                        break
                    self.sleep(1.0)
            raise
        self.lease.hold(answer.get(arn_key))

    def _create_host(self) -> None:
        from ..lifecycle.wait import wait_in_service

        layout, name = self.layout, self.layout.endpoint
        self._check_cost(f"starting {name}", layout.provision_s, layout.price_per_hour_usd, layout.teardown_s)
        sm = self.session.client("sagemaker")
        with self.create_lock:
            if self.stop.is_set():
                return
            self._set_host(status="deploying", endpoint=name, created_at=self.clock(), deleted_at=None,
                           price_per_hour_usd=layout.price_per_hour_usd, error=None)
            expires = next(iter(self.deployments.values())).expires_at
            self.out.info(f"creating {name} ({layout.instance_type}, {layout.gpus} GPUs"
                          + (f", expires {expires:%H:%M} UTC" if expires else "")
                          + f"): one endpoint for {len(self.request.configurations)} configuration(s), "
                          f"{layout.gpus_per_configuration} GPU(s) each")
            self._create(sm, "endpoint_config", layout.create_endpoint_config, name)
            self._create(sm, "endpoint", layout.create_endpoint, name)
        wait_in_service(sm, name, timeout_s=self.request.timeout_s, sleep=self.sleep, clock=time.monotonic)
        self._set_host(status="deployed")
        self.out.info(f"{name} is InService")

    def _create_component(self, config: Any) -> None:
        plan = self.deployments[config.label]
        name = plan.inference_component_name
        sm = self.session.client("sagemaker")
        self._current = config.label
        with self.create_lock:
            if self.stop.is_set():
                return
            self._update(config.label, status="deploying", endpoint=name, error=None)
            self.out.info(f"{config.label}: creating inference component {name} on {self.layout.endpoint}")
            self._create(sm, "model", plan.create_model, plan.create_model["ModelName"])
            self._create(sm, "inference_component", plan.create_inference_component, name)

    def _await_component(self, config: Any) -> None:
        from ..lifecycle.component_apply import component_check
        from ..lifecycle.components import wait_component
        from ..lifecycle.verify import require, verify
        from ..lifecycle.wait import read_retrying

        if self.stop.is_set():
            return
        plan = self.deployments[config.label]
        self._current = config.label
        sm = self.session.client("sagemaker")
        described = wait_component(sm, plan.inference_component_name, timeout_s=self.request.timeout_s,
                                   sleep=self.sleep, clock=time.monotonic)
        checks = verify(sm, plan, read=lambda call: read_retrying(call, sleep=self.sleep))
        checks.append(component_check(plan, described))
        require(checks)
        self._update(config.label, status="deployed")
        self.out.info(f"{config.label}: {plan.inference_component_name} is InService, speculative config and "
                      "component verified")

    def _measure(self, config: Any) -> None:
        if self.stop.is_set():
            return
        plan = self.deployments[config.label]
        self._current = config.label
        self._check_budget(config.label, "benchmarking", self._row(config.label).bench_s)
        self._bench(config, self.layout.endpoint, component=plan.inference_component_name)
        if self.stop.is_set():
            return
        self._remove_component(config.label, plan)
        self._update(config.label, status="done")

    def _remove_component(self, label: str, plan: Any) -> None:
        """The component (waited for until it is gone), then its model: its GPUs are free for the next one."""
        from ..aws import translate_error
        from ..lifecycle.components import remove_component
        from ..lifecycle.intent import recover_command
        from ..lifecycle.teardown import teardown

        sm = self.session.client("sagemaker")
        name = plan.inference_component_name
        try:
            outcomes = remove_component(sm, None, None, name, owned=True, sleep=self.sleep,
                                        clock=peagle_clock.monotonic)
            if not [o for o in outcomes if o.result in ("left", "failed")]:
                outcomes += teardown(sm, models=[plan.create_model["ModelName"]], wait=False)
        except Exception as exc:  # noqa: BLE001 - an AWS failure of the delete is the sweep's failure, said
            error = translate_error(exc)
            if error is None:
                raise
            failure = TeardownFailed(error.message, exit_code=error.exit_code)
        else:
            self.lease.drop_deleted(outcomes)
            bad = [o for o in outcomes if o.result in ("left", "failed")]
            failure = None if not bad else TeardownFailed(
                f"could not delete {bad[0].kind.replace('_', ' ')} {bad[0].name}: {bad[0].reason}",
                exit_code=bad[0].exit_code)
        if failure is not None:
            failure.hint = (f"its endpoint keeps billing: 'peagle sweep --resume {self.sf.path}' tries again, or "
                            f"'{recover_command(self.layout.endpoint, self.request.region)}' removes it")
            self._update(label, error=failure.one_line())  # still live: the teardown of the endpoint removes it
            raise failure
        with self.sf.lock:
            if label in self._closed:
                return
            self.sf.state.removed.append(name)
            self.sf.save()
        self.out.info(f"{label}: removed {name} (inference component, model)")

    def _teardown_host(self) -> None:
        name = self.layout.endpoint
        deleted, _, failure = self._delete(name)
        if failure is not None:
            self._set_host(error=failure.one_line())
            raise failure
        with self.sf.lock:
            if self._closed:  # the main thread's teardown took over meanwhile and says what it did
                return
            self._close_host_books()
            self._host().status = "done"
            if deleted:
                self.sf.state.removed.append(name)
            self.sf.save()
        self.out.info(f"removed {name} (endpoint, endpoint config)")

    # after a failure, a budget stop or a signal -----------------------------------------------------------------
    def teardown_all(self, why: str) -> list[str]:
        """The endpoint with whatever it still hosts (components first), and the models of configurations whose
        component may exist; returns what was really deleted. A delete that fails keeps everything live in the
        state, with the error (`--resume` tries again)."""
        removed: list[str] = []
        self.teardown_failures = []
        with self.create_lock:
            with self.sf.lock:
                live = [c for c in self.sf.state.configs.values() if c.status in LIVE and c.endpoint]
                self._closed.update([*(c.label for c in live), HOST_LABEL])
            if self._host_live():
                name = self.sf.state.host.endpoint
                deleted, outcomes, failure = self._delete(name)
                if failure is not None:
                    self.teardown_failures.append(failure)
                    self._set_host(error=failure.one_line())
                    self.out.warn(f"could not remove {name}: {failure.one_line()}")
                    return removed
                components = [o.name for o in outcomes if o.kind == "inference_component" and o.result == "deleted"]
                self._close_host_books()
                self._set_host(status="stopped" if self.sf.state.host.status != "done" else "done")
                removed += [*components, *([name] if deleted else [])]
                if deleted:
                    self.out.info(f"removed {name} (" + (f"inference components {', '.join(components)}, "
                                                         if components else "") + f"endpoint, endpoint config, "
                                  f"models): {why}")
            elif live:  # no endpoint: at most models were made
                from ..lifecycle.teardown import teardown

                outcomes = teardown(self.session.client("sagemaker"), models=[c.endpoint for c in live], wait=False)
                bad = [o for o in outcomes if o.result == "failed"]
                if bad:
                    failure = TeardownFailed(f"could not delete model {bad[0].name}: {bad[0].reason}",
                                             exit_code=bad[0].exit_code)
                    self.teardown_failures.append(failure)
                    self.out.warn(f"could not remove {bad[0].name}: {failure.one_line()}")
                    return removed
            for c in live:
                error = None if c.measured else c.error or why
                self.sf.update(c.label, status=self._settled(c), error=error)
            with self.sf.lock:
                self.sf.state.removed.extend(removed)
                self.sf.save()
        return removed

    def _left_live(self) -> bool:
        return self._host_live() or bool(self.sf.state.live())


__all__ = ["HOST_LABEL", "ComponentSweep"]
