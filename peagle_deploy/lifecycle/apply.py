"""Executing a DeploymentPlan: checks first, then create, wait, verify; roll back on any failure or signal.

The rollback deletes exactly what this deploy created: creates that answered, plus creates whose answer
was lost (an interrupt or a dropped connection while the call was in flight), reconciled by name and by
this deploy's `peagle:created-at` tag, so a same-named resource of someone else is never touched. What
cannot be confirmed gone is named with the exact `peagle cleanup` command that removes it.

With `plan.autoscaling`, the variant is registered with Application Auto Scaling once the endpoint is InService
and verified; a failure there is a deploy failure like any other: the rollback deregisters what was registered
(teardown removes an endpoint's autoscaling before the endpoint) and deletes the endpoint, config and model.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from contextlib import nullcontext
from typing import Any

from pydantic import BaseModel, Field

from ..aws import is_lost_answer, translate_error
from ..describe import describe
from ..errors import Interrupted, PeagleError, UsageError
from ..plan import DeploymentPlan
from ..hosting import VARIANT_NAME
from .autoscaling import SERVICE as AUTOSCALING_SERVICE
from .autoscaling import Applied, apply_autoscaling
from .lease import LeaseHolder, removed_meanwhile
from .quota import check_quota
from .signals import Signalled, SignalGuard
from .teardown import Outcome, teardown
from .verify import Check, require, verify
from .wait import Progress, read_retrying, wait_in_service

_CREATES = (("model", "create_model", "CreateModel"),
            ("endpoint_config", "create_endpoint_config", "CreateEndpointConfig"),
            ("endpoint", "create_endpoint", "CreateEndpoint"))
_ARN = {"model": "ModelArn", "endpoint_config": "EndpointConfigArn", "endpoint": "EndpointArn",
        "inference_component": "InferenceComponentArn"}
_LABEL = {"model": "model", "endpoint_config": "endpoint config", "endpoint": "endpoint",
          "scalable_target": "scalable target", "scaling_policy": "scaling policy",
          "inference_component": "inference component", "alarm": "alarm", "scaling": "scaling and alarms",
          "acceptance": "acceptance alarm and metric filters", "metric_filter": "metric filter"}
RECONCILE_POLLS = 3  # a create whose answer was lost: look for it this many times (1 s apart) before giving up


class DeployResult(BaseModel):
    endpoint_name: str
    region: str
    status: str
    elapsed_s: float
    verification: list[Check] = Field(default_factory=list)
    notes: list[str] = Field(default_factory=list)
    autoscaling: Applied | None = None
    serving_pools: str | None = Field(None, description="instance pools: which one SageMaker provisioned "
                                                        "(DescribeEndpoint's InstancePools)")
    inference_component: str | None = Field(None, description="hosting component: the component that serves")
    component_policies: dict[str, str] = Field(default_factory=dict, description="hosting component: scaling "
                                                                                  "policy name -> ARN")
    acceptance_alarm: str | None = Field(None, description="the acceptance alarm created, in one line "
                                                           "(docs/monitoring.md)")


def cleanup_command(plan: DeploymentPlan) -> str:
    return f"peagle cleanup {plan.endpoint_name} --region {plan.region} --yes"


def _refuse_existing(sm: Any, plan: DeploymentPlan) -> None:
    for kind in ("model", "endpoint_config", "endpoint"):
        if describe(sm, kind, plan.endpoint_name) is not None:  # type: ignore[arg-type]
            raise UsageError(f"a SageMaker {_LABEL[kind]} named {plan.endpoint_name!r} already exists",
                             "choose another --name, or remove the old one with peagle cleanup (peagle's own only)")
    for body in plan.create_pool_models:
        if describe(sm, "model", body["ModelName"]) is not None:
            raise UsageError(f"a SageMaker model named {body['ModelName']!r} (an instance pool's) already exists",
                             "choose another --name, or remove the old one with peagle cleanup (peagle's own only)")


def _as_peagle_error(exc: BaseException) -> PeagleError:
    if isinstance(exc, PeagleError):
        return exc
    if isinstance(exc, Signalled):
        return Interrupted(f"interrupted by {exc.name}")
    if isinstance(exc, KeyboardInterrupt):
        return Interrupted("interrupted")
    translated = translate_error(exc)
    if translated is not None:
        return translated
    return PeagleError(f"{type(exc).__name__}: {exc}")


def _add_hint(error: PeagleError, text: str) -> None:
    error.hint = (error.hint + "; " if error.hint else "") + text


class _Rollback:
    """What this deploy sent to SageMaker, and undoing it."""

    creates = _CREATES  # (kind, plan field, API call): a hosting shape with more creates names them

    def __init__(self, sm: Any, plan: DeploymentPlan, sleep: Callable[[float], None], scaling: Any = None):
        self.sm, self.plan, self.sleep, self.scaling = sm, plan, sleep, scaling
        self.created: list[str] = []  # answered: it exists
        self.lost: list[str] = []  # sent, answer lost: it may exist, now or later
        self.pool_models: list[str] = []  # instance pools' own models sent (answered or not): deleted by name
        self.watch: tuple[Any, Any] | None = None  # (logs, cloudwatch) once the acceptance alarm may exist

    def touched(self, kind: str) -> bool:
        return kind in self.created or kind in self.lost

    def run(self, error: PeagleError, *, keep: bool, hurry: bool) -> PeagleError:
        if not self.created and not self.lost:
            if isinstance(error, Interrupted):
                _add_hint(error, "nothing was created")
            return error
        command = cleanup_command(self.plan)
        if keep:
            kinds = ", ".join([_LABEL[k] for k in self.created + self.lost]
                              + [f"model {m}" for m in self.pool_models])
            _add_hint(error, f"kept {kinds} {self.plan.endpoint_name!r} (--keep-on-failure): remove with '{command}'")
            return error
        try:
            outcomes = self._undo(hurry)
        except BaseException:  # noqa: BLE001 - the rollback itself failed or was interrupted: say what to run
            _add_hint(error, f"rollback incomplete: remove what is left with '{command}'")
            return error
        deleted = [_LABEL[o.kind] for o in outcomes if o.result == "deleted"]
        left = [o for o in outcomes if o.result in ("left", "failed")]
        unseen = [k for k in self.lost if not any(o.kind == k and o.result == "deleted" for o in outcomes)]
        if deleted:
            _add_hint(error, f"rolled back: {', '.join(deleted)} deleted")
        for outcome in left:
            _add_hint(error, f"{_LABEL[outcome.kind]} {outcome.name} left: {outcome.reason}")
        if any(not o.reason.startswith("still used") for o in left):
            _add_hint(error, f"rollback incomplete: remove what is left with '{command}'")
        elif unseen:
            calls = ", ".join(c for k, _, c in self.creates if k in unseen)
            _add_hint(error, f"{calls} was interrupted before SageMaker answered and nothing has appeared yet; "
                             f"if it appears, remove it with '{command}'")
        elif not deleted:
            _add_hint(error, "nothing was left to delete")
        return error

    def _undo(self, hurry: bool) -> list[Outcome]:
        # a lost create may land a moment later: look for it a few times before deciding it never happened
        for _ in range(RECONCILE_POLLS if self.lost else 0):
            if all(self._exists(kind) for kind in self.lost):
                break
            self.sleep(1.0)
        name = self.plan.endpoint_name
        first: list[Outcome] = []
        if self.watch is not None and self.plan.acceptance_alarm is not None:  # before its endpoint goes
            from .acceptance_watch import remove

            first = remove(*self.watch, self.plan.acceptance_alarm.owner, created_at=self.plan.created_at)
        return first + teardown(self.sm, endpoints=[name] if self.touched("endpoint") else [],
                        configs=[name] if self.touched("endpoint_config") else [],
                        models=([name] if self.touched("model") else []) + self.pool_models,
                        wait=not hurry, created_at=self.plan.created_at, scaling=self.scaling)

    def _exists(self, kind: str) -> bool:
        return describe(self.sm, kind, self.plan.endpoint_name) is not None  # type: ignore[arg-type]


def _create(sm: Any, guard: SignalGuard, rollback: _Rollback, kind: str, field: str, call: str,
            plan: DeploymentPlan, holder: LeaseHolder) -> None:
    """One create whose answer must not be lost: a first signal waits for it; a lost answer is reconciled. It
    carries `holder`'s lease, which then holds what it made."""
    try:
        with guard.critical(call):
            answer = getattr(sm, field)(**holder.with_tag(getattr(plan, field)))
            rollback.created.append(kind)
            holder.hold(answer.get(_ARN[kind]))
    except BaseException as exc:
        if kind not in rollback.created and is_lost_answer(exc):
            rollback.lost.append(kind)
        gone = removed_meanwhile(sm, exc, [(k, plan.endpoint_name) for k in rollback.created], call=call,
                                 operation="deploy")
        if gone is not None:
            raise gone from None
        raise


def deploy_endpoint(plan: DeploymentPlan, session: Any, *, wait: bool = True, timeout_s: float = 3600,
                    keep_on_failure: bool = False, on_progress: Progress | None = None,
                    on_note: Callable[[str], None] | None = None, sleep: Callable[[float], None] = time.sleep,
                    clock: Callable[[], float] = time.monotonic, handle_signals: bool = True,
                    lease: LeaseHolder | None = None) -> DeployResult:
    """Create the plan's model, endpoint config and endpoint; wait and verify when `wait`.

    SIGINT, SIGTERM and SIGHUP roll back like any failure (exit 130); see `signals.SignalGuard`. Each create
    carries the deploy's lease (`lifecycle.lease`): refreshed while it runs, released once it (or its rollback)
    is over. `lease`: a sweep's, which the sweep keeps after the deploy. `lifecycle.deploy` calls this for a
    classic endpoint, `component_apply.deploy_component` for an inference component."""
    if plan.hosting == "component":
        raise ValueError("a plan that hosts an inference component is deployed by lifecycle.deploy")
    if "ExecutionRoleArn" not in plan.create_model:
        raise UsageError("a real deploy needs an execution role", "pass --role arn:aws:iam::<account>:role/<name>")
    if plan.autoscaling is not None and not wait:
        raise UsageError("autoscaling is registered once the endpoint is InService, so the deploy must wait",
                         "deploy with wait=True (the CLI: drop --no-wait)")
    if plan.acceptance_alarm is not None and not wait:
        raise UsageError("the acceptance alarm is made once the endpoint is InService, so the deploy must wait",
                         "deploy with wait=True (the CLI: drop --no-wait), or plan without the alarm")
    if session.region != plan.region:
        raise UsageError(f"the plan is for {plan.region}, the session for {session.region}", "build the plan again")
    note = on_note or (lambda _msg: None)
    holder = lease or LeaseHolder(None, "deploy")  # its client below, once there is one
    with SignalGuard("rolling back what this deploy created", enabled=handle_signals) as guard, \
            nullcontext() if lease is not None else holder:
        try:
            session.check_credentials()
            if plan.pools:  # each pool's quota was read for the plan, and a short one left out (plan_pools.py)
                notes = [f"{p.instance_type}: quota {p.quota.describe() if p.quota else 'not read'}"
                         for p in plan.pools if p.kept]
            else:
                notes = [check_quota(session, plan.instance_type, plan.instance_count)]
            if plan.capacity_reservation is not None:  # read first where the API can: a missing one creates nothing
                from ..pools import read_reservation

                notes += [line for line in [read_reservation(session, plan.capacity_reservation)] if line]
            for line in notes:
                note(line)
            sm = session.client("sagemaker")
            holder.sm = holder.sm or sm
            _refuse_existing(sm, plan)
        except KeyboardInterrupt as exc:
            raise _Rollback(None, plan, sleep).run(_as_peagle_error(exc), keep=False, hurry=True) from None
        scaling = session.client(AUTOSCALING_SERVICE) if plan.autoscaling else None
        rollback = _Rollback(sm, plan, sleep, scaling)
        start = clock()
        created_ms = int(time.time() * 1000)  # start-up lines before this are an earlier endpoint's of that name
        try:
            for kind, create, call in _CREATES:
                _create(sm, guard, rollback, kind, create, call, plan, holder)
                note(f"created {_LABEL[kind]} {plan.endpoint_name}")
                if kind == "model":  # the instance pools' own models, before the config names them
                    for body in plan.create_pool_models:
                        with guard.critical("CreateModel"):
                            rollback.pool_models.append(body["ModelName"])
                            holder.hold(sm.create_model(**holder.with_tag(body)).get("ModelArn"))
                        note(f"created model {body['ModelName']} (instance pool)")
            if not wait:
                return DeployResult(endpoint_name=plan.endpoint_name, region=plan.region, status="Creating",
                                    elapsed_s=clock() - start, notes=notes)
            described = wait_in_service(sm, plan.endpoint_name, timeout_s=timeout_s, sleep=sleep, clock=clock,
                                        on_progress=on_progress)
            checks = verify(sm, plan, session.client("logs"), sleep=sleep,
                            read=lambda call: read_retrying(call, sleep=sleep), logs_since_ms=created_ms)
            require(checks)
            applied = None
            if plan.autoscaling is not None:
                with guard.critical("RegisterScalableTarget and PutScalingPolicy"):
                    applied = apply_autoscaling(scaling, plan.endpoint_name, VARIANT_NAME, plan.autoscaling)
                note(f"autoscaling on: {plan.autoscaling.describe()}")
            watching = watch_acceptance(session, plan, guard, rollback, note)
        except BaseException as exc:  # noqa: BLE001 - includes signals: nothing billable is left unknown
            error = _as_peagle_error(exc)
            raise rollback.run(error, keep=keep_on_failure and not guard.signalled,
                               hurry=guard.signalled or isinstance(exc, KeyboardInterrupt)) from None
    serving = None
    if plan.pools:
        from ..pools import serving_pools, serving_words

        serving = serving_words(serving_pools((described.get("ProductionVariants") or [{}])[0]), plan.pool_types)
    return DeployResult(endpoint_name=plan.endpoint_name, region=plan.region, status=described["EndpointStatus"],
                        elapsed_s=clock() - start, verification=checks, notes=notes, autoscaling=applied,
                        serving_pools=serving, acceptance_alarm=watching)


def watch_acceptance(session: Any, plan: DeploymentPlan, guard: SignalGuard, rollback: _Rollback,
                     note: Callable[[str], None]) -> str | None:
    """The plan's acceptance alarm and metric filters, the deploy's last writes (acceptance_watch.py); the rollback
    removes them first. Returns the alarm in one line (None: the plan has none)."""
    if plan.acceptance_alarm is None:
        return None
    from .acceptance_watch import create

    rollback.watch = (session.client("logs"), session.client("cloudwatch"))
    rollback.created.append("acceptance")
    with guard.critical("PutMetricFilter and PutMetricAlarm"):
        create(*rollback.watch, plan.acceptance_alarm)
    note(f"acceptance alarm {plan.acceptance_alarm.alarm_name} created")
    return plan.acceptance_alarm.describe()

