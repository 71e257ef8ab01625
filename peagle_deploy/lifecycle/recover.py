"""`peagle recover [NAME | --all]`: finish whatever an interrupted peagle command left, from what AWS says now.

Every interruption of deploy, update, cleanup and sweep names this command. It reads everything again (the
endpoint, its tags, the config it serves or moves to) and is idempotent: a second run finds nothing to do.
It never deletes anything peagle did not make, nor anything an endpoint serves or is updating to.

Work another peagle is still doing is left alone: an endpoint, config or model whose lease (`lifecycle.lease`)
is fresh is skipped with one line (whose work, since when, when it counts as abandoned); `--force` takes it over
anyway and says from whom. Abandoned work (its lease expired) is taken over and its lease cleared.

For each peagle endpoint (NAME, or all of them with --all):
1. Creating or Updating: wait until SageMaker settles (what it moves to is never touched meanwhile), only where
   something of peagle's is left to finish once it has (an abandoned deploy or update, the intended autoscaling, the
   component of an endpoint made for one); otherwise it is left to SageMaker, said in one line;
2. an unfinished cleanup (`peagle:deleting`): the endpoint is deleted with its autoscaling, as was asked; so is
   the endpoint of an abandoned sweep (`peagle:sweep-id`, its lease expired), as the sweep's teardown would;
3. an endpoint peagle made for its own inference component (`peagle:hosting=component`) whose deploy was cut short
   (`component_finish`): the component is created from the deploy's plan where it is missing, waited for where it
   is Creating; where the deploy cannot be completed (its model gone, the endpoint or the component Failed), the
   whole stack is removed in SageMaker's order, as the deploy's rollback would have;
4. an unfinished update (`peagle:update-*`, written before the update's first write): settled on the new config,
   the update is completed; on the old one, it is reverted; either way the labels (`peagle:k`, `peagle:mode`,
   instances) are rewritten from the served config and the intent is cleared;
5. the intended autoscaling (the update's, or `peagle:autoscale`) is registered where it is not; a component that
   scales to zero by an older peagle's idle rule is moved to AWS's recipe (`scaling_migration`), and what its
   deploy asked for (scale to zero, `--autoscale`) is registered where it is not or only in part;
6. the peagle-made configs and models of the endpoint (NAME) or of the region (--all) that nothing uses are
   deleted: the previous config of a completed update, the new one of a reverted update, what a SIGKILL left (never
   the model an endpoint made for a component still needs: `leftovers.References.awaiting_component`);
   so are peagle's acceptance alarms and metric filters whose endpoint is gone (`acceptance_watch.orphans`), and
   after an update the alarm is moved to the K that serves (`acceptance_watch.align`).

`--all` names what it left alone, one line each: another peagle's work in progress (a fresh lease), a peagle
endpoint SageMaker is still creating with nothing to finish, an endpoint peagle did not make that is not InService
(Creating, Failed: never waited on, never counted). A peagle endpoint that cannot be finished (Failed) is named too,
and is what makes the exit non-zero: the exit says whether anything of peagle's is left unfinished.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, Field

from .. import clock as peagle_clock
from ..describe import describe
from ..pools import tag_value
from ..errors import EndpointFailed, PeagleError, UsageError, WaitTimeout
from ..hosting import VARIANT_NAME
from ..served_config import Served, read_served
from ..tag_keys import LEASE
from ..tags import PeagleTags
from .intent import clear_update_intent, deletion_requested, read_update_intent, recover_command
from .lease import read_lease
from .leftovers import References
from .tags import described_with_tags
from .teardown import Outcome, teardown
from .wait import WAITING, Progress, read_retrying, wait_in_service

Read = Callable[[Callable[[], Any]], Any]


class EndpointRecovery(BaseModel):
    name: str
    status: str = Field(description="SageMaker's status after recovery ('deleted' when it was deleted)")
    serves: Served | None = None
    update: Literal["completed", "reverted", "superseded"] | None = Field(
        default=None, description="what became of an unfinished update")
    actions: list[str] = Field(default_factory=list, description="what recover did, in order")
    skipped: str | None = Field(default=None, description="left alone, and why: work whose lease is fresh (whose, "
                                "until when), or an endpoint SageMaker is still on with nothing of peagle's to finish")
    unfinished: str | None = Field(default=None, description="--all: why it could not be finished (the endpoint "
                                   "Failed, a wait that timed out): what keeps the exit non-zero")
    regions_tried: list[str] = Field(default_factory=list, description="a --region A,B deploy's endpoint: the "
                                     "regions it tried (peagle:regions-tried)")


class RecoverReport(BaseModel):
    endpoints: list[EndpointRecovery] = Field(default_factory=list)
    removed: list[Outcome] = Field(default_factory=list, description="unused peagle configs and models")
    skipped: list[str] = Field(default_factory=list, description="configs and models left alone: work in progress "
                                                                 "(a fresh lease), one line per piece of work")
    taken_over: list[str] = Field(default_factory=list, description="--force: leases of configs and models "
                                                                    "overridden")
    others: list[str] = Field(default_factory=list, description="--all: endpoints peagle did not make that are not "
                              "InService, left alone (one line each: name, status, why)")
    nothing_of: str | None = Field(default=None, description="NAME: nothing of it exists (any more)")
    regions_named: list[str] = Field(default_factory=list, description="the regions the peagle:regions-tried tags "
                                     "of what was found name (region_search.py)")
    error: PeagleError | None = Field(default=None, exclude=True)

    model_config = {"arbitrary_types_allowed": True}

    @property
    def did_something(self) -> bool:
        return any(e.actions for e in self.endpoints) or any(o.result == "deleted" for o in self.removed)

    @property
    def left_alone(self) -> bool:
        """Something of peagle's was left alone: work in progress, an endpoint SageMaker is on, one unfinished."""
        return bool(self.skipped) or any(e.skipped or e.unfinished for e in self.endpoints)


def recover(session: Any, name: str | None = None, *, all_: bool = False, timeout_s: float = 3600,
            sleep: Callable[[float], None] | None = None, clock: Callable[[], float] | None = None,
            on_progress: Progress | None = None, on_note: Callable[[str], None] | None = None,
            force: bool = False, now: Callable[[], datetime] | None = None) -> RecoverReport:
    """`force`: take over work whose lease is fresh too; `now`: the wall clock leases are judged by; `sleep` and
    `clock`: the waits between polls (default `peagle_deploy.clock`'s, looked up now)."""
    sleep = sleep or peagle_clock.sleep
    clock = clock or peagle_clock.monotonic
    if bool(name) == all_:
        raise UsageError("recover needs exactly one of NAME or --all", "see peagle recover --help")
    note = on_note or (lambda _msg: None)
    read: Read = lambda call: read_retrying(call, sleep=sleep)  # noqa: E731
    sm = session.client("sagemaker")
    report = RecoverReport()
    if name:
        from ..inputs import validate_name

        validate_name(name)
        described = read(lambda: describe(sm, "endpoint", name))
        names = [name] if described is not None else []
    else:
        names, report.others = _endpoints_of_the_region(sm, read)
    failures: list[PeagleError] = []
    for endpoint in names:
        try:
            report.endpoints.append(_recover_endpoint(session, sm, endpoint, read=read, timeout_s=timeout_s,
                                                      sleep=sleep, clock=clock, on_progress=on_progress,
                                                      note=note, require_managed=bool(name), force=force,
                                                      now=now or peagle_clock.now))
        except PeagleError as exc:
            if name:
                raise
            failures.append(exc)  # named on its own line; the others are finished all the same
            report.endpoints.append(EndpointRecovery(name=endpoint, status=_status_of(exc), unfinished=exc.one_line()))
    from .leftovers import find_leftovers

    refs = read(lambda: References.read(sm))
    said = {e.name for e in report.endpoints if e.skipped or any(a.startswith("--force") for a in e.actions)}
    found = find_leftovers(sm, refs, endpoint=name, region=session.region)
    from .region_search import tagged_regions

    report.regions_named = tagged_regions(report.endpoints, found)
    leftovers = _leave_work_in_progress(report, found, force=force, said=said)
    if name and not names and not leftovers and not report.skipped:  # finished already (or never there): idempotent, said
        report.nothing_of = f"no endpoint named {name} and nothing peagle made for it in {session.region}"
    if any(lo.kind == "inference_component" for lo in leftovers):  # their endpoint is gone: they go first
        from .components import remove_stranded

        report.removed += remove_stranded(sm, session.client("application-autoscaling"),
                                          session.client("cloudwatch"), name)
        refs = read(lambda: References.read(sm))  # the models they named are free now
        leftovers = find_leftovers(sm, refs, endpoint=name, region=session.region)
    if any(lo.kind != "inference_component" for lo in leftovers):
        report.removed += teardown(sm, configs=[lo.name for lo in leftovers if lo.kind == "endpoint_config"],
                                   models=[lo.name for lo in leftovers if lo.kind == "model"], wait=False, refs=refs)
    if not names or not name:  # peagle's acceptance alarms and filters whose endpoint (and component) is gone
        from .acceptance_watch import orphans

        orphaned = orphans(sm, session.client("logs"), session.client("cloudwatch"), name)
        report.removed += orphaned
        if orphaned:
            report.nothing_of = None
    failed = [o for o in report.removed if o.result == "failed"]
    if failed:
        failures.append(PeagleError(f"could not delete {failed[0].kind.replace('_', ' ')} {failed[0].name}: "
                                    f"{failed[0].reason}", "run peagle recover again",
                                    exit_code=failed[0].exit_code))
    report.error = failures[0] if failures else None
    return report


def _leave_work_in_progress(report: RecoverReport, leftovers: list[Any], *, force: bool, said: set[str]) -> list[Any]:
    """The leftovers to remove: all but those of work in progress (a fresh lease), which are skipped with one line
    per piece of work, unless `force` (said too); no line where their endpoint's (`said`) already said it."""
    held: dict[str, list[Any]] = {}
    for leftover in leftovers:
        if leftover.in_progress and leftover.endpoint not in said:
            held.setdefault(leftover.lease.run_id, []).append(leftover)
    for pieces in held.values():
        lease, what = pieces[0].lease, ", ".join(f"{lo.label} {lo.name}" for lo in pieces)
        if force:
            report.taken_over.append(f"{what}: {lease.overridden()}")
        else:
            report.skipped.append(lease.left_alone(what, pieces[0].command))
    return leftovers if force else [lo for lo in leftovers if not lo.in_progress]


def _endpoints_of_the_region(sm: Any, read: Read) -> tuple[list[str], list[str]]:
    """The peagle endpoints to recover, and one line for each endpoint peagle did not make that is not InService
    (left alone, never waited on: someone else's deploy in progress, someone else's failure)."""
    from .tags import list_tags_if_present

    found, others = [], []
    for page in read(lambda: list(sm.get_paginator("list_endpoints").paginate())):
        for summary in page.get("Endpoints", []):
            tags = read(lambda s=summary: list_tags_if_present(sm, s["EndpointArn"]))
            if tags is None:  # deleted since the list
                continue
            if PeagleTags.from_aws(tags).managed:
                found.append(summary["EndpointName"])
            elif summary.get("EndpointStatus", "InService") != "InService":
                others.append(f"left alone endpoint {summary['EndpointName']} ({summary['EndpointStatus']}): not made "
                              "by peagle, nothing of peagle's to finish")
    return found, others


def _status_of(error: PeagleError) -> str:
    return "Failed" if isinstance(error, EndpointFailed) else "unfinished"


def _finishing(tags: dict[str, str], peagle: PeagleTags, lease: Any, described: dict[str, Any]) -> str | None:
    """What of peagle's is left to finish on an endpoint once SageMaker settles it (what `recover` waits for), or
    None: nothing, SageMaker is on it alone (a `deploy --no-wait`'s endpoint Creating, someone's console update)."""
    intent = read_update_intent(tags)
    if intent is not None:
        return f"the update {intent.from_config} -> {intent.to_config}"
    if lease is not None:  # taken over: the abandoned work's outcome decides what is left
        return f"the abandoned {lease.operation}"
    if peagle.autoscale is not None and (peagle.hosting != "component" and not any(
            v.get("ManagedInstanceScaling") for v in described.get("ProductionVariants") or [])):
        return "its autoscaling, registered once it is InService"
    from .component_finish import own_component

    component = own_component(peagle)
    if component is not None and described["EndpointStatus"] == "Creating":  # no component before InService
        return f"its inference component {component} and its scaling, which its deploy makes once it is InService"
    return None


def _recover_endpoint(session: Any, sm: Any, name: str, *, read: Read, timeout_s: float,
                      sleep: Callable[[float], None], clock: Callable[[], float], on_progress: Progress | None,
                      note: Callable[[str], None], require_managed: bool, force: bool = False,
                      now: Callable[[], datetime] | None = None) -> EndpointRecovery:
    found = described_with_tags(sm, name, read)
    if found is None:
        return EndpointRecovery(name=name, status="deleted")
    described, tags = found
    peagle = PeagleTags.from_aws(tags)
    if not peagle.managed:
        if require_managed:
            raise UsageError(f"endpoint {name!r} was not created by peagle",
                             "peagle only recovers what it created; nothing was changed")
        return EndpointRecovery(name=name, status=described["EndpointStatus"])
    done = EndpointRecovery(name=name, status=described["EndpointStatus"], regions_tried=peagle.regions_tried)
    lease = read_lease(tags, (now or peagle_clock.now)())
    if lease is not None:
        if lease.fresh and not force:
            done.skipped = lease.left_alone(_work(tags, peagle), recover_command(name, session.region))
            return done
        done.actions.append(lease.overridden() if lease.fresh else f"took over from {lease.describe()}")
    if deletion_requested(tags):
        return _finish_deletion(session, sm, name, done)
    if peagle.sweep_id and lease is not None:  # a sweep's endpoint never outlives its sweep
        return _finish_deletion(session, sm, name, done, what="removed what the abandoned sweep left, as its "
                                                              "teardown would")
    if described["EndpointStatus"] in WAITING:
        finishing = _finishing(tags, peagle, lease, described)
        if finishing is None:
            done.skipped = (f"{described['EndpointStatus']}: nothing of peagle's to finish; SageMaker is on it "
                            f"('peagle status {name}' follows it)")
            return done
        moving = (described.get("PendingDeploymentSummary") or {}).get("EndpointConfigName")
        note(f"{name} is {described['EndpointStatus']}" + (f" (moving to {moving})" if moving else "")
             + f": waiting until SageMaker settles, then finishing {finishing}")
        try:
            described = wait_in_service(sm, name, timeout_s=timeout_s, sleep=sleep, clock=clock,
                                        on_progress=on_progress)
        except WaitTimeout as exc:
            raise WaitTimeout(exc.message, f"SageMaker is still on it; nothing was changed: run "
                                           f"'peagle recover {name}' again later") from None
        done.status = described["EndpointStatus"]
    elif described["EndpointStatus"] != "InService":
        reason = described.get("FailureReason") or "no reason given"
        if _component_missing(sm, peagle, read):  # a component deploy cut short: nothing of it can serve
            return _remove_unfinished(session, sm, name, done, f"endpoint {name} is {described['EndpointStatus']}: "
                                                               f"{reason}")
        raise EndpointFailed(f"endpoint {name} is {described['EndpointStatus']}: {reason}",
                             f"nothing peagle can finish: see 'peagle logs {name}', remove it with "
                             f"'peagle cleanup {name} --yes'")
    from .component_finish import Unfinishable

    try:
        own = _finish_component(session, sm, described, tags, peagle, lease, done, read=read, timeout_s=timeout_s,
                                sleep=sleep, clock=clock, on_progress=on_progress, note=note)
    except Unfinishable as exc:
        return _remove_unfinished(session, sm, name, done, exc.reason)
    from .component_status import model_of

    intent = read_update_intent(tags)
    component = _settled_component(sm, described, peagle, timeout_s=timeout_s, sleep=sleep, clock=clock,
                                   on_progress=on_progress, note=note) if intent is not None else None
    component_model = model_of(sm, described, peagle, read)  # a component names its model
    served = read_served(sm, described["EndpointConfigName"], read=read, model=component_model)
    done.serves = served
    intended = peagle.autoscale
    # a classic update moves the endpoint between configs; a component's update moves the component between
    # models (lifecycle/component_update.py), its intent names them
    moved = component_model if component is not None else served.endpoint_config
    if intent is not None:
        if moved == intent.to_config:
            done.update = "completed"
            intended = intent.autoscale if intent.autoscale_known else peagle.autoscale
        elif moved == intent.from_config:
            done.update = "reverted"
        else:
            done.update = "superseded"
        done.actions.append(f"the update {intent.from_config} -> {intent.to_config} {_said(done.update)}: serves "
                            f"{served.endpoint_config} ({served.label()})")
    labels = _labels(served, intended)
    if peagle.hosting == "component":  # its peagle:instance-count is the deploy's copies, not the variant's instances
        labels.pop("peagle:instance-count", None)
    changed = {k: v for k, v in labels.items() if tags.get(k) != v}
    if changed:
        sm.add_tags(ResourceArn=described["EndpointArn"], Tags=[{"Key": k, "Value": v} for k, v in changed.items()])
        done.actions.append("tags now say what serves: " + ", ".join(f"{k}={v}" for k, v in changed.items()))
    if intended is not None and component_model is None:  # a component's scaling is its own (not the variant's)
        registered = _ensure_autoscaling(session, name, described, intended)
        if registered:
            done.actions.append(f"autoscaling registered again: {intended.describe()}")
    if component_model is not None:  # an older peagle's idle rule -> AWS's recipe
        from .scaling_migration import move_endpoint

        done.actions += move_endpoint(session, sm, described, peagle)
    if own is not None:  # what its deploy asked for that is not registered (a deploy cut short)
        from .component_finish import register_missing

        done.actions += register_missing(session, own, tags, peagle, read=read)
    done.actions += _align_acceptance(session, name, component or peagle_component(sm, described, peagle), served,
                                      tags)
    if intent is not None:
        clear_update_intent(sm, described["EndpointArn"])  # with the lease
    elif lease is not None:
        sm.delete_tags(ResourceArn=described["EndpointArn"], TagKeys=[LEASE])
    return done


def peagle_component(sm: Any, described: dict[str, Any], peagle: PeagleTags) -> str | None:
    """The inference component a component-based endpoint hosts (None: a classic endpoint)."""
    from .component_status import component_of

    return component_of(sm, described, peagle)


def _align_acceptance(session: Any, name: str, component: str | None, served: Served,
                      tags: dict[str, str]) -> list[str]:
    """peagle's acceptance alarm follows what serves (acceptance_watch.align): an update's, interrupted or not."""
    from ..log_groups import component_log_group, endpoint_log_group
    from .acceptance_watch import align

    owner = component or name
    group = component_log_group(owner) if component else endpoint_log_group(owner)
    return align(session.client("logs"), session.client("cloudwatch"), owner, group, k=served.k, mode=served.mode,
                 tags_for=lambda: {k: v for k, v in tags.items() if not k.startswith("aws:")})
def _component_missing(sm: Any, peagle: PeagleTags, read: Read) -> bool:
    """An endpoint peagle made for its own inference component, which SageMaker does not hold."""
    from .component_finish import own_component
    from .components import describe_component

    component = own_component(peagle)
    return component is not None and read(lambda: describe_component(sm, component)) is None


def _finish_component(session: Any, sm: Any, described: dict[str, Any], tags: dict[str, str], peagle: PeagleTags,
                      lease: Any, done: EndpointRecovery, *, read: Read, timeout_s: float,
                      sleep: Callable[[float], None], clock: Callable[[], float], on_progress: Progress | None,
                      note: Callable[[str], None]) -> str | None:
    """An endpoint peagle made for its own inference component (`component_finish`): the component created from its
    deploy's plan where it is missing, waited for where it is Creating; the component to register the scaling of
    (None: none, or not one in service). Unfinishable: the deploy cannot be completed. An update's component is the
    update's to settle (`_settled_component`)."""
    from .component_finish import Unfinishable, create_missing, own_component, wait_for
    from .components import describe_component

    component = own_component(peagle)
    if component is None or read_update_intent(tags) is not None:
        return None
    found = read(lambda: describe_component(sm, component))
    if found is None:
        done.actions += create_missing(session, sm, component, described, tags, peagle, read=read,
                                       timeout_s=timeout_s, sleep=sleep, clock=clock, on_progress=on_progress,
                                       note=note)
        return component
    status = found.get("InferenceComponentStatus")
    if status in ("Creating", "Updating"):
        note(f"inference component {component} is {status}: waiting until SageMaker settles, then registering its "
             "scaling")
        found = wait_for(sm, component, timeout_s=timeout_s, sleep=sleep, clock=clock, on_progress=on_progress,
                         endpoint=described["EndpointName"])
        status = found.get("InferenceComponentStatus")
    if status == "Failed" and lease is not None and lease.operation == "deploy":  # its deploy would roll back
        raise Unfinishable(f"inference component {component} is Failed: {found.get('FailureReason') or 'no reason'}")
    return component if status == "InService" else None


def _remove_unfinished(session: Any, sm: Any, name: str, done: EndpointRecovery, why: str) -> EndpointRecovery:
    """A deploy that cannot be completed: what it made removed, as its rollback would have."""
    return _finish_deletion(session, sm, name, done, what=f"its deploy cannot be completed ({why}), so what it made "
                                                          "was removed")


def _settled_component(sm: Any, described: dict[str, Any], peagle: PeagleTags, *, timeout_s: float,
                       sleep: Callable[[float], None], clock: Callable[[], float], on_progress: Progress | None,
                       note: Callable[[str], None]) -> str | None:
    """A component-based endpoint's component, once SageMaker has settled its update (Updating: waited for, as an
    Updating endpoint is); None for a classic endpoint."""
    from .component_status import component_of
    from .components import describe_component, wait_component

    name = component_of(sm, described, peagle)
    if name is None:
        return None
    found = describe_component(sm, name)
    if found is not None and found.get("InferenceComponentStatus") in ("Creating", "Updating"):
        note(f"inference component {name} is {found['InferenceComponentStatus']}: waiting until SageMaker settles")
        try:
            wait_component(sm, name, timeout_s=timeout_s, sleep=sleep, clock=clock, on_progress=on_progress)
        except WaitTimeout as exc:
            raise WaitTimeout(exc.message, f"SageMaker is still on it; nothing was changed: run "
                                           f"'peagle recover {described['EndpointName']}' again later") from None
    return name


def _work(tags: dict[str, str], peagle: PeagleTags) -> str:
    """What a lease on an endpoint holds, for the line that skips it."""
    intent = read_update_intent(tags)
    if intent is not None:
        return f"the update {intent.from_config} -> {intent.to_config}"
    if deletion_requested(tags):
        return "its cleanup"
    return "the sweep's endpoint" if peagle.sweep_id else "the endpoint"


def _said(outcome: str | None) -> str:
    return {"completed": "was completed", "reverted": "was rolled back",
            "superseded": "was overtaken by another change"}.get(outcome or "", "")


def _labels(served: Served, intended: Any) -> dict[str, str]:
    """The label tags for what serves (only what could be read)."""
    if served.problem is not None or served.mode is None:
        values = PeagleTags()
    else:
        values = PeagleTags(mode=served.mode, k=served.k, instance_type=served.instance_type
                            or tag_value(served.instance_pools) or None,
                            instance_count=served.instance_count)
    values.autoscale = intended
    return values.to_aws()


def _ensure_autoscaling(session: Any, name: str, described: dict[str, Any], intended: Any) -> bool:
    """Register the intended autoscaling where it is not (or differs); True if something was registered."""
    from .autoscaling import SERVICE, apply_autoscaling, read_autoscaling

    aas = session.client(SERVICE)
    now = read_autoscaling(aas, {name: described})[name]
    if now.state == "unknown":
        raise PeagleError(f"could not read the autoscaling of {name} ({now.detail})", "run peagle recover again")
    if (now.state == "on" and now.min_capacity == intended.min_capacity and now.max_capacity == intended.max_capacity
            and now.metric == intended.predefined_metric and now.target == float(intended.target)):
        return False
    apply_autoscaling(aas, name, VARIANT_NAME, intended)
    return True


def _finish_deletion(session: Any, sm: Any, name: str, done: EndpointRecovery,
                     what: str = "the interrupted cleanup was finished") -> EndpointRecovery:
    """A cleanup was asked for and interrupted (or a sweep abandoned its endpoint): finish it (the endpoint, its
    autoscaling, what it used)."""
    from .autoscaling import SERVICE
    from .teardown import delete_stack

    outcomes = delete_stack(sm, name, wait=False, scaling=session.client(SERVICE), alarms=session.client("cloudwatch"),
                            logs=session.client("logs"))
    failed = [o for o in outcomes if o.result == "failed"]
    if failed:
        raise PeagleError(f"could not delete {failed[0].kind.replace('_', ' ')} {failed[0].name}: {failed[0].reason}",
                          "run peagle recover again", exit_code=failed[0].exit_code)
    done.status = "deleted"
    done.actions.append(f"{what}: " + ", ".join(
        f"{o.kind.replace('_', ' ')} {o.name} {o.result}" for o in outcomes))
    return done
