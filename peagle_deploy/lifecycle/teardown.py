"""Deleting what peagle created, and nothing else.

A cleanup is planned before anything is deleted: the planner reads every endpoint's config and every
config's models first, then removes an endpoint config only if no endpoint outside the cleanup set
uses it, and a model only if no remaining endpoint config uses it (an unmanaged endpoint on a
peagle-tagged config keeps billing happily; deleting its config would break it). Every resource is also
checked for `peagle:managed=true` on itself (not only on its endpoint). Deletes are idempotent (already
gone counts as done) and run endpoint, endpoint config, model, in that order. Before a managed endpoint is
deleted, its Application Auto Scaling policies and scalable target are removed (`lifecycle.autoscaling`), and
before a component-based one its inference components (`lifecycle.components`: their scaling, alarms, then each
component, waited for until it is gone); an endpoint that still hosts a component peagle did not make is left.
An endpoint peagle does not manage is left alone, and so are its scaling targets and components. A model an
inference component names is in use as much as one an endpoint config names.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any

from pydantic import BaseModel, Field

from ..aws import is_not_found, translate_error
from ..describe import DESCRIBE, Kind, describe
from ..errors import PeagleError, UsageError
from ..tags import PeagleTags
from .leftovers import References, owned_by
from .outcome import Outcome
from .tags import list_tags_if_present, read_tags


class Skipped(BaseModel):
    name: str
    reason: str


class CleanupReport(BaseModel):
    outcomes: list[Outcome] = Field(default_factory=list)
    skipped: list[Skipped] = Field(default_factory=list, description="endpoints not examined further, and why")
    regions_named: list[str] = Field(default_factory=list, description="the regions the peagle:regions-tried tags "
                                     "of the endpoints removed name (region_search.py)")
    error: PeagleError | None = Field(default=None, exclude=True)

    model_config = {"arbitrary_types_allowed": True}

    @property
    def deleted(self) -> list[Outcome]:
        return [o for o in self.outcomes if o.result == "deleted"]

    @property
    def left(self) -> list[Outcome]:
        return [o for o in self.outcomes if o.result in ("left", "failed")]


_DELETE = {"endpoint": "delete_endpoint", "endpoint_config": "delete_endpoint_config", "model": "delete_model"}
_LABEL = {"endpoint": "endpoint", "endpoint_config": "endpoint config", "model": "model",
          "scalable_target": "scalable target", "scaling_policy": "scaling policy", "alarm": "alarm",
          "metric_filter": "metric filter", "inference_component": "inference component"}


def delete_one(sm: Any, kind: Kind, name: str, *, require_managed: bool = True,
               created_at: datetime | None = None, scaling: Any = None,
               extra: list[Outcome] | None = None, alarms: Any = None, logs: Any = None) -> Outcome:
    """Delete one resource if it is peagle's (and, with `created_at`, from that very deploy).

    An endpoint's autoscaling is removed first when `scaling` (an application-autoscaling client) is given, and a
    component-based endpoint's components (with their scaling and, given `alarms`, a cloudwatch client, their
    alarms); given `alarms`, its acceptance alarm too, with its metric filters (`logs`, acceptance_watch.py); those
    outcomes are appended to `extra`."""
    described = describe(sm, kind, name)
    if described is None:
        return Outcome(kind=kind, name=name, result="already gone")
    tags = PeagleTags()
    if require_managed or created_at is not None:
        raw = list_tags_if_present(sm, described[DESCRIBE[kind][2]])
        if raw is None:  # deleted between the describe and now
            return Outcome(kind=kind, name=name, result="already gone")
        tags = PeagleTags.from_aws(raw)
        if require_managed and not tags.managed:
            return Outcome(kind=kind, name=name, result="left", reason="not created by peagle (no peagle:managed tag)")
        if created_at is not None and tags.created_at != created_at:
            return Outcome(kind=kind, name=name, result="left",
                           reason="same name, but not from this deploy (another peagle:created-at)")
    if kind == "endpoint":
        from .components import hosting_of, remove_endpoint_components

        if hosting_of(described, tags).hosting == "component":
            removed, blocking = remove_endpoint_components(sm, scaling, alarms, name, created_at=created_at,
                                                           owned=tags.components)
            if extra is not None:
                extra.extend(removed)
            if blocking:
                return Outcome(kind=kind, name=name, result="left",
                               reason=f"still hosts inference component {', '.join(blocking)} (see above)")
    if kind == "endpoint" and scaling is not None:
        from .autoscaling import remove_autoscaling, variants_of
        from ..hosting import VARIANT_NAME

        removed = remove_autoscaling(scaling, name, variants_of(described, VARIANT_NAME),
                                     expected=tags.autoscale is not None)
        if extra is not None:
            extra.extend(removed)
    if kind == "endpoint" and alarms is not None:  # its acceptance alarm and filters, last before the endpoint
        from .acceptance_watch import remove as remove_watch

        watched = remove_watch(logs, alarms, name, created_at=created_at)
        if extra is not None:
            extra.extend(watched)
    try:
        getattr(sm, _DELETE[kind])(**{DESCRIBE[kind][1]: name})
    except Exception as exc:
        if is_not_found(exc):
            return Outcome(kind=kind, name=name, result="already gone")
        if _gone_after_all(sm, kind, name, exc):
            return Outcome(kind=kind, name=name, result="deleted")
        error = translate_error(exc)
        if error is None:
            raise
        return Outcome(kind=kind, name=name, result="failed", reason=error.one_line(), exit_code=int(error.exit_code))
    return Outcome(kind=kind, name=name, result="deleted")


def _gone_after_all(sm: Any, kind: Kind, name: str, exc: BaseException) -> bool:
    """A delete whose answer was lost (a 5xx, a dropped connection) may have happened: look once."""
    from ..aws import is_lost_answer

    if isinstance(exc, KeyboardInterrupt) or not is_lost_answer(exc):
        return False
    try:
        return describe(sm, kind, name) is None
    except Exception:  # noqa: BLE001 - cannot tell: the delete counts as failed
        return False


def teardown(sm: Any, *, endpoints: list[str] = (), configs: list[str] = (), models: list[str] = (),
             wait: bool = True, require_managed: bool = True, created_at: datetime | None = None,
             scaling: Any = None, refs: References | None = None, alarms: Any = None,
             logs: Any = None) -> list[Outcome]:
    """Delete `endpoints` with their configs and models, plus the given `configs` and `models`, except what
    anything outside this set still uses (or is updating to). Returns one Outcome per resource considered,
    kept ones with why. With `scaling` (an application-autoscaling client), each endpoint's autoscaling is
    removed before it; a component-based endpoint's components go first (`alarms`: a cloudwatch client for
    their alarms; and each endpoint's acceptance alarm, `logs` for its metric filters). `refs`: who uses what, when
    the caller has just read it."""
    refs = refs or References.read(sm)
    outcomes: list[Outcome] = []
    gone_endpoints: set[str] = set()
    want_configs: list[str] = list(configs)
    want_models: list[str] = list(models)
    for name in endpoints:
        outcome = delete_one(sm, "endpoint", name, require_managed=require_managed, created_at=created_at,
                             scaling=scaling, extra=outcomes, alarms=alarms, logs=logs)
        outcomes.append(outcome)
        if outcome.result in ("deleted", "already gone"):
            gone_endpoints.add(name)
            config = refs.endpoint_config.get(name)
            if config and config not in want_configs:
                want_configs.append(config)
            want_models.extend(ref.model for ref in refs.components.values()  # what its components named
                               if ref.endpoint == name and ref.model and ref.model not in want_models)
    users = {cfg: refs.users(cfg, besides=gone_endpoints) for cfg in refs.config_models}
    gone_configs: set[str] = set()
    for config in want_configs:
        want_models.extend(m for m in refs.config_models.get(config, []) if m not in want_models)
        if users.get(config):
            outcomes.append(Outcome(kind="endpoint_config", name=config, result="left",
                                    reason=f"still used by endpoint {', '.join(users[config])} (not being cleaned up)"))
            continue
        outcome = delete_one(sm, "endpoint_config", config, require_managed=require_managed, created_at=created_at)
        outcomes.append(outcome)
        if outcome.result in ("deleted", "already gone"):
            gone_configs.add(config)
    gone_components = {o.name for o in outcomes if o.kind == "inference_component"
                       and o.result in ("deleted", "already gone")}
    for model in want_models:
        holders = sorted(cfg for cfg, ms in refs.config_models.items() if model in ms and cfg not in gone_configs)
        if holders:
            outcomes.append(Outcome(kind="model", name=model, result="left",
                                    reason=f"still used by endpoint config {', '.join(holders)} (not being cleaned up)"))
            continue
        present, tags = _model_record(sm, model, refs)
        if not present:
            outcomes.append(Outcome(kind="model", name=model, result="already gone"))
            continue
        components = refs.model_users(model, besides=gone_components, tags=tags)
        if components:
            outcomes.append(Outcome(kind="model", name=model, result="left",
                                    reason=f"still used by inference component {', '.join(components)}"))
            continue
        outcomes.append(delete_one(sm, "model", model, require_managed=require_managed, created_at=created_at))
    if wait:
        for outcome in outcomes:
            if outcome.kind == "endpoint" and outcome.result == "deleted":
                sm.get_waiter("endpoint_deleted").wait(EndpointName=outcome.name,
                                                       WaiterConfig={"Delay": 5, "MaxAttempts": 180})
    return outcomes


def _model_record(sm: Any, model: str, refs: References) -> tuple[bool, PeagleTags | None]:
    """Whether a model still exists, and its peagle tags, read only where they may prove what the component listing
    could not (`References.free_of_components`); (True, None) where nothing needs reading."""
    if refs.components_lacking is None or refs.free_of_components(model):
        return True, None
    described = describe(sm, "model", model)
    raw = list_tags_if_present(sm, described["ModelArn"]) if described is not None else None
    return raw is not None, PeagleTags.from_aws(raw) if raw is not None else None


def delete_stack(sm: Any, name: str, *, wait: bool = True, require_managed: bool = True,
                 scaling: Any = None, before_delete: Callable[[str, str], None] | None = None,
                 alarms: Any = None, logs: Any = None) -> list[Outcome]:
    """Endpoint `name` (its autoscaling first), then its config, then the config's models (names read from
    SageMaker, not assumed), and every other config and model peagle made for `name` (found by their
    `peagle:endpoint` tag: an update's, or what an interrupted deploy, update or cleanup left), except what an
    endpoint still uses. `before_delete(name, arn)` runs just before DeleteEndpoint (cleanup records its intent)."""
    refs = References.read(sm)
    configs, models = owned_by(sm, refs, name)
    if name in refs.endpoint_config:
        if before_delete is not None:
            before_delete(name, refs.endpoint_arns.get(name, ""))
        return teardown(sm, endpoints=[name], configs=configs, models=models, wait=wait,
                        require_managed=require_managed, scaling=scaling, refs=refs, alarms=alarms, logs=logs)
    from .components import remove_stranded

    stranded = remove_stranded(sm, scaling, alarms, name)  # peagle's components whose endpoint is gone
    if alarms is not None:  # an acceptance alarm whose endpoint is gone (acceptance_watch.orphans)
        from .acceptance_watch import orphans

        stranded += orphans(sm, logs, alarms, name)
    if stranded:
        refs = References.read(sm)  # the models they named are free now
    if not configs and not models and not stranded:  # nothing tagged: a config and model of that name, if any
        configs, models = [name], [name]
    return stranded + teardown(sm, configs=configs, models=models, wait=wait, require_managed=require_managed,
                               refs=refs)


def mark_for_deletion(sm: Any, arn: str, lease: Any = None) -> bool:
    """`peagle:deleting` on a managed endpoint before it is deleted, so `peagle recover` can finish an interrupted
    deletion, with `lease` (a LeaseHolder: its lease goes on in the same AddTags and is held from then on);
    False (and the deletion goes ahead) when the tag cannot be written."""
    from .intent import write_deletion_request

    try:
        write_deletion_request(sm, arn, lease=lease.tags() if lease is not None else None)
        if lease is not None:
            lease.hold(arn)
    except Exception as exc:  # noqa: BLE001 - an AWS failure here must not keep an endpoint billing
        if translate_error(exc) is None:
            raise
        return False
    return True


def _managed(sm: Any, paginator: str, key: str, name_key: str, arn_key: str) -> list[tuple[str, PeagleTags]]:
    return [(name, tags) for name, _, tags in _managed_with_arns(sm, paginator, key, name_key, arn_key)]


def _managed_with_arns(sm: Any, paginator: str, key: str, name_key: str,
                       arn_key: str) -> list[tuple[str, str, PeagleTags]]:
    found = []
    for page in sm.get_paginator(paginator).paginate():
        for item in page.get(key, []):
            raw = list_tags_if_present(sm, item[arn_key])
            if raw is None:  # deleted between the listing and now
                continue
            tags = PeagleTags.from_aws(raw)
            if tags.managed:
                found.append((item[name_key], item[arn_key], tags))
    return found


def cleanup(session: Any, name: str | None = None, *, all_: bool = False, expired: bool = False,
            wait: bool = True, now: Callable[[], datetime] | None = None,
            on_marked: Callable[[str], None] | None = None) -> CleanupReport:
    """Cleanup by NAME, --all or --expired. By NAME, nothing to do is an error (exit 2): a name that does
    not exist, or resources peagle did not create; scripts must be able to tell.

    Before a managed endpoint is deleted its `peagle:deleting` tag records the request (`on_marked(name)` is
    called after), so `peagle recover` can finish a cleanup that a signal, SIGKILL or lost answer stopped, and the
    cleanup's lease (`lifecycle.lease`), so none does while this cleanup runs."""
    if sum((bool(name), all_, expired)) != 1:
        raise UsageError("cleanup needs exactly one of NAME, --all or --expired", "see peagle cleanup --help")
    from .lease import LeaseHolder

    sm = session.client("sagemaker")
    with LeaseHolder(sm, "cleanup") as lease:  # released where an endpoint is left (its peagle:deleting stays)
        report = _cleanup(session, sm, lease, name, all_=all_, expired=expired, wait=wait, now=now,
                          on_marked=on_marked)
        lease.drop_deleted(report.outcomes)
    return report


def _cleanup(session: Any, sm: Any, lease: Any, name: str | None, *, all_: bool, expired: bool, wait: bool,
             now: Callable[[], datetime], on_marked: Callable[[str], None] | None) -> CleanupReport:
    def mark(endpoint: str, arn: str) -> None:
        """Best effort: a deletion that cannot be recorded still goes ahead (stopping the billing comes first)."""
        tags = read_tags(sm, arn) if arn else None
        if tags is not None and tags.managed:
            report.regions_named += [r for r in tags.regions_tried if r not in report.regions_named]
            if on_marked is not None:
                on_marked(endpoint)
            mark_for_deletion(sm, arn, lease)

    scaling = session.client("application-autoscaling")
    alarms, logs = session.client("cloudwatch"), session.client("logs")
    report = CleanupReport()
    if name:
        from ..inputs import validate_name

        validate_name(name)
        report.outcomes.extend(delete_stack(sm, name, wait=wait, scaling=scaling, before_delete=mark, alarms=alarms,
                                            logs=logs))
        if all(o.result == "already gone" for o in report.outcomes):
            raise UsageError(f"no endpoint, endpoint config or model named {name!r} in {session.region}",
                             "check the name and --region (peagle status lists peagle's endpoints)")
        if not report.deleted and any("not created by peagle" in o.reason for o in report.outcomes):
            raise UsageError(f"{_LABEL[report.outcomes[0].kind]} {name!r} was not created by peagle",
                             "peagle only deletes what it created; nothing was deleted")
        _fail_if_failed(report)
        return report
    from .. import clock

    moment = (now or clock.now)()
    selected: list[str] = []
    arns: dict[str, str] = {}
    for endpoint_name, arn, tags in _managed_with_arns(sm, "list_endpoints", "Endpoints", "EndpointName",
                                                       "EndpointArn"):
        arns[endpoint_name] = arn
        if expired:
            is_expired = tags.expired(moment)
            if is_expired is None:
                report.skipped.append(Skipped(name=endpoint_name, reason="; ".join(tags.problems)
                                              + " - fix the tag or remove it with peagle cleanup NAME"))
                continue
            if not is_expired:
                continue
        selected.append(endpoint_name)
    extra_configs: list[str] = []
    extra_models: list[str] = []
    if all_:  # leftovers of an interrupted deploy or rollback: configs and models with no endpoint
        extra_configs = [c for c, _ in _managed(sm, "list_endpoint_configs", "EndpointConfigs", "EndpointConfigName",
                                                "EndpointConfigArn")]
        extra_models = [m for m, _ in _managed(sm, "list_models", "Models", "ModelName", "ModelArn")]
    for endpoint_name in selected:
        mark(endpoint_name, arns[endpoint_name])
    if all_:  # peagle's inference components whose endpoint was deleted under them: their models are freed
        from .components import remove_stranded

        report.outcomes.extend(remove_stranded(sm, scaling, alarms))
        from .acceptance_watch import orphans

        report.outcomes.extend(orphans(sm, logs, alarms))
    if selected or extra_configs or extra_models:
        report.outcomes.extend(teardown(sm, endpoints=selected, configs=extra_configs, models=extra_models,
                                        wait=wait, scaling=scaling, alarms=alarms, logs=logs))
    report.error = _first_failure(report)
    return report


def _first_failure(report: CleanupReport) -> PeagleError | None:
    failed = [o for o in report.outcomes if o.result == "failed"]
    if not failed:
        return None
    return PeagleError(f"could not delete {_LABEL[failed[0].kind]} {failed[0].name}: {failed[0].reason}",
                       exit_code=failed[0].exit_code)


def _fail_if_failed(report: CleanupReport) -> None:
    report.error = _first_failure(report)

