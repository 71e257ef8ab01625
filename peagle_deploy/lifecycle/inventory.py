"""`status`: what peagle created that still exists, with age, expiry and cost so far.

Mode, K and instances come from the config the endpoint serves (its model's SM_VLLM_SPECULATIVE_CONFIG,
`served_config`), not from the peagle:* labels; a label that disagrees is said. An unfinished update (the
endpoint's intent tags, or SageMaker's PendingDeploymentSummary), the intended autoscaling against what is
registered, and peagle-made configs and models that nothing uses (`leftovers`) are shown with the command that
finishes them. Work another peagle is doing (a fresh lease, `lifecycle.lease`) is shown as in progress, whose and
until when, with no command: nothing is left to finish while its owner is alive. Reads retry; a read that still
fails is shown as unknown, never as an endpoint failure.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from pydantic import BaseModel, Field

from ..describe import describe
from ..errors import UsageError
from ..inputs import validate_name
from ..pools import serving_pools, serving_words, tagged_types
from ..tag_keys import SWEEP_ID
from ..tags import DELETING, PeagleTags
from .autoscaling import SERVICE as AUTOSCALING_SERVICE
from .autoscaling import AutoscalingStatus, read_autoscaling
from .lease import Lease, read_lease
from ..pricing import Price
from .startup_log import StartupInfo
from .tags import described_with_tags, list_tags_if_present
from .verify import Check
from .wait import read_retrying


class UpdateInProgress(BaseModel):
    from_config: str | None
    to_config: str
    state: str = Field(description="'updating' (SageMaker is on it), 'in progress' (a peagle whose lease is fresh "
                                   "is on it) or 'unfinished' (peagle was stopped; peagle recover finishes it)")


class EndpointStatus(BaseModel):
    name: str
    status: str
    region: str = Field(default="", description="the region it is in")
    regions_tried: list[str] = Field(default_factory=list, description="a --region A,B deploy: the regions it tried "
                                     "up to this one (peagle:regions-tried); status looks in each")
    failure_reason: str | None = None
    model: str | None
    model_id: str | None
    mode: str | None
    k: int | None
    instance_type: str | None
    instance_count: int | None
    created_at: datetime | None
    age_s: float | None
    expires_at: datetime | None
    expires_in_s: float | None
    expired: bool | None = Field(description="None when there is no readable expiry tag")
    price_per_hour_usd: float | None
    cost_so_far_usd: float | None
    price: Price | None = Field(None, description="the SageMaker hosting price and its source (pricing.py)")
    tag_problems: list[str] = Field(default_factory=list, description="peagle tags present but unreadable")
    vllm: StartupInfo | None = None  # one endpoint only: what vLLM logged at start (CloudWatch)
    startup_check: Check | None = Field(None, description="one endpoint only: vLLM's logged speculative config "
                                                          "against the served config (verified / failed / not verified)")
    autoscaling: AutoscalingStatus | None = Field(
        default=None, description="Application Auto Scaling now; state 'unknown' when it could not be read")
    endpoint_config: str | None = Field(default=None, description="the config the endpoint serves")
    spec_source: str = Field(default="tags", description="where mode, K and instances were read: 'served config' "
                                                         "(its model's SM_VLLM_SPECULATIVE_CONFIG) or 'tags'")
    spec_problem: str | None = Field(default=None, description="why the served config could not be read")
    label_mismatch: str | None = Field(default=None, description="peagle:* labels that disagree with the served "
                                                                 "config")
    update: UpdateInProgress | None = None
    lease: Lease | None = Field(default=None, description="the work a peagle is doing (or abandoned) on it: "
                                                          "whose, since when, fresh until when")
    autoscaling_intended: str | None = Field(default=None, description="the autoscaling peagle means the endpoint "
                                                                       "to have (peagle:autoscale, or an unfinished "
                                                                       "update's)")
    recover_command: str | None = Field(default=None, description="set when something is left to finish")
    instance_pools: list[str] = Field(default_factory=list, description="the config's InstancePools by priority; "
                                      "instance_type/instance_count are then the pool that serves")
    serving_pools: str | None = Field(default=None, description="which pool serves, from DescribeEndpoint's "
                                      "InstancePools CurrentInstanceCount")
    hosting: str = Field(default="endpoint", description="'component': the model runs as an inference component")
    component: Any = Field(default=None, description="hosting component: components.ComponentStatus")
    cost_how: str | None = Field(default=None, description="how cost_so_far_usd was estimated, where not from the "
                                                            "endpoint's age")
    acceptance: Any = Field(default=None, description="one endpoint only: the last hour's acceptance from the "
                                                      "CloudWatch metric and the acceptance alarm "
                                                      "(acceptance_watch.AcceptanceStatus)")


def _row(described: dict[str, Any], tags: PeagleTags, now: datetime, served: Any = None,
         raw_tags: dict[str, str] | None = None, region: str = "", profile: str | None = None,
         session: Any = None) -> EndpointStatus:
    from ..pricing import instance_price

    created = tags.created_at or described.get("CreationTime")
    if isinstance(created, datetime) and created.tzinfo is None:
        created = created.replace(tzinfo=UTC)
    expires = tags.expires_at
    mode, k, instance_type, instance_count = tags.mode, tags.k, tags.instance_type, tags.instance_count
    source, mismatch = "tags", None
    if served is not None and served.problem is None and served.mode is not None:
        source = "served config"
        mismatch = _mismatch(tags, served)
        mode, k = served.mode, served.k
        instance_type = served.instance_type or instance_type
        instance_count = served.instance_count or instance_count
    pools = served.instance_pools if served is not None else []
    serving = serving_pools((described.get("ProductionVariants") or [{}])[0]) if pools else []
    if pools:  # the pool that serves is the instance type billed (none yet: unknown, never the tag's list)
        instance_type, instance_count = serving[0] if serving else (None, None)
    priced = instance_price(instance_type, region, count=instance_count or 1, profile=profile, session=session) \
        if instance_type else None
    price = priced.usd_per_hour if priced is not None else None
    for other, count in serving[1:]:  # instances in several pools at once: each priced
        more = instance_price(other, region, count=count, profile=profile, session=session).usd_per_hour
        price = None if price is None or more is None else price + more
    age = (now - created).total_seconds() if created else None
    row = EndpointStatus(
        name=described["EndpointName"], status=described["EndpointStatus"], region=region,
        regions_tried=tags.regions_tried,
        failure_reason=described.get("FailureReason"), model=tags.model, model_id=tags.model_id, mode=mode,
        k=k, instance_type=instance_type, instance_count=instance_count, created_at=created,
        age_s=age, expires_at=expires, expires_in_s=(expires - now).total_seconds() if expires else None,
        expired=tags.expired(now) if expires or tags.problems else None, price_per_hour_usd=price,
        cost_so_far_usd=round(price * age / 3600, 2) if price is not None and age is not None else None,
        tag_problems=tags.problems, price=priced, endpoint_config=described.get("EndpointConfigName"), spec_source=source,
        spec_problem=served.problem if served is not None else None, label_mismatch=mismatch,
        autoscaling_intended=tags.autoscale.describe() if tags.autoscale else None,
        instance_pools=pools, serving_pools=serving_words(serving, pools) if pools else None,
    )
    row.lease = read_lease(raw_tags, now)
    _add_update(row, described, raw_tags or {}, region)
    return row


def _mismatch(tags: PeagleTags, served: Any) -> str | None:
    said = []
    if tags.mode is not None and tags.mode != served.mode:
        said.append(f"peagle:mode={tags.mode}")
    if served.mode not in (None, "off") and tags.k is not None and tags.k != served.k:
        said.append(f"peagle:k={tags.k}")
    if tags.instance_type and served.instance_pools and tagged_types(tags.instance_type) != served.instance_pools:
        said.append(f"peagle:instance-type={tags.instance_type}")
    elif tags.instance_type and served.instance_type and tags.instance_type != served.instance_type:
        said.append(f"peagle:instance-type={tags.instance_type}")
    if tags.instance_count and served.instance_count and tags.instance_count != served.instance_count:
        said.append(f"peagle:instance-count={tags.instance_count}")
    if not said:
        return None
    return (f"the tags say {', '.join(said)}, the served config {served.endpoint_config} says {served.label()}, "
            f"{served.instance_count} x {served.instance_type}")


def _add_update(row: EndpointStatus, described: dict[str, Any], raw_tags: dict[str, str], region: str) -> None:
    from .intent import read_update_intent
    from .intent import recover_command

    intent = read_update_intent(raw_tags)
    pending = (described.get("PendingDeploymentSummary") or {}).get("EndpointConfigName")
    updating = described.get("EndpointStatus") in ("Updating", "SystemUpdating")
    working = row.lease is not None and row.lease.fresh  # its owner is on it: nothing to finish now
    if pending or intent is not None:
        row.update = UpdateInProgress(from_config=intent.from_config if intent else row.endpoint_config,
                                      to_config=pending or intent.to_config,
                                      state="updating" if updating else "in progress" if working else "unfinished")
    if intent is not None and intent.autoscale_known and intent.autoscale is not None:
        row.autoscaling_intended = f"{intent.autoscale.describe()} (after the update)"
    abandoned_sweep = raw_tags.get(SWEEP_ID) and row.lease is not None  # it never outlives its sweep
    if not working and (intent is not None or raw_tags.get(DELETING) or abandoned_sweep):
        row.recover_command = recover_command(row.name, region)


class _DescribedOnce:
    """A SageMaker client whose DescribeEndpoint and DescribeEndpointConfig answers are kept for one `status`
    report: its rows describe each peagle endpoint and its config, then the unused-config scan would describe
    them again (10 of 40 round trips for 5 endpoints). A failed describe is not kept: the next one asks again."""

    _KEPT = frozenset({"describe_endpoint", "describe_endpoint_config"})

    def __init__(self, sm: Any):
        self._sm = sm
        self._answers: dict[tuple[str, tuple[tuple[str, Any], ...]], Any] = {}

    def __getattr__(self, name: str) -> Any:
        call = getattr(self._sm, name)
        if name not in self._KEPT:
            return call

        def once(**kwargs: Any) -> Any:
            key = (name, tuple(sorted(kwargs.items())))
            if key not in self._answers:
                self._answers[key] = call(**kwargs)
            return self._answers[key]

        return once


def report(session: Any, name: str | None = None, *, sleep: Any = None) -> tuple[list[EndpointStatus], list[Any]]:
    """`status`'s rows (NAME missing: none) and the peagle-made configs and models nothing uses, with every
    endpoint and config described once."""
    sm = _DescribedOnce(session.client("sagemaker"))
    rows = status(session, name, sleep=sleep, allow_missing=True, sm=sm)
    return rows, leftovers(session, name, sleep=sleep, sm=sm)


def status(session: Any, name: str | None = None, *, now: datetime | None = None,
           sleep: Any = None, allow_missing: bool = False, sm: Any = None) -> list[EndpointStatus]:
    """One row per peagle endpoint (or NAME's; with `allow_missing`, [] when NAME does not exist)."""
    from .. import clock

    sm = sm or session.client("sagemaker")
    now = now or clock.now()
    read = lambda call: read_retrying(call, sleep=sleep or clock.sleep)  # noqa: E731
    if name:
        validate_name(name)
        found = described_with_tags(sm, name, read)
        if found is None:
            if allow_missing:
                return []
            raise UsageError(f"no endpoint named {name!r} in {session.region}", "see peagle status")
        described, raw = found
        tags = PeagleTags.from_aws(raw)
        if not tags.managed:
            raise UsageError(f"endpoint {name!r} was not created by peagle", "peagle only reports what it created")
        served = _served(sm, described, read, tags)
        row = _row(described, tags, now, served, raw, session.region, session.profile, session)
        if described["EndpointStatus"] == "InService":
            from .component_status import startup_group

            component = startup_group(sm, described, tags)
            row.vllm, row.startup_check = _startup(session, sm, name, described, served, component=component)
            row.acceptance = _acceptance(session, component or name, row.k, now)
        _add_autoscaling(session, [row], {name: described}, {name: tags})
        _add_components(session, sm, [row], {name: described}, {name: tags}, now=now, read=read)
        return [row]
    rows = []
    described_by_name: dict[str, dict[str, Any]] = {}
    tags_by_name: dict[str, PeagleTags] = {}
    for page in read(lambda: list(sm.get_paginator("list_endpoints").paginate())):
        for summary in page.get("Endpoints", []):
            raw = read(lambda s=summary: list_tags_if_present(sm, s["EndpointArn"]))
            if raw is None:  # deleted between the list and the tags
                continue
            tags = PeagleTags.from_aws(raw)
            if not tags.managed:
                continue
            described = read(lambda s=summary: describe(sm, "endpoint", s["EndpointName"]))
            if described is None:  # deleted between the list and the describe
                continue
            rows.append(_row({**summary, **described}, tags, now, _served(sm, described, read, tags), raw,
                             session.region, session.profile, session))
            described_by_name[summary["EndpointName"]] = described
            tags_by_name[summary["EndpointName"]] = tags
    _add_autoscaling(session, rows, described_by_name, tags_by_name)
    _add_components(session, sm, rows, described_by_name, tags_by_name, now=now, read=read)
    return rows


def _add_components(session: Any, sm: Any, rows: list[EndpointStatus], described: dict[str, dict[str, Any]],
                    tags: dict[str, PeagleTags], *, now: datetime, read: Any) -> None:
    from .component_status import add_components

    add_components(session, sm, rows, described, tags, now=now, read=read)


def _acceptance(session: Any, owner: str, k: int | None, now: datetime) -> Any:
    """The last hour's acceptance and the alarm (acceptance_watch.read_status); a read failure is said, never an
    endpoint failure."""
    from ..aws import translate_error
    from .acceptance_watch import AcceptanceStatus, read_status

    try:
        return read_status(session.client("cloudwatch"), owner, k=k, now=now)
    except Exception as exc:  # noqa: BLE001 - AWS's failures only
        error = translate_error(exc)
        if error is None:
            raise
        return AcceptanceStatus(k=k, source="CloudWatch", note=f"could not read CloudWatch ({error.one_line()})")


def _startup(session: Any, sm: Any, name: str, described: dict[str, Any],
             served: Any = None, component: str | None = None) -> tuple[StartupInfo, Check]:
    """What vLLM logged at start, checked against the speculative config the endpoint is served with (as
    `served` already read it; read again only when that read could not give it)."""
    from ..served_config import read_served_config
    from ..speculative import ENV_VAR
    from .startup_log import read_cloudwatch
    from .verify import by_hand, startup_check

    spec = served.speculation if served is not None and served.speculation is not None else \
        read_served_config(sm, name, described=described).speculation
    expected = None
    if spec.mode not in (None, "off"):  # the served env value itself, as sent
        expected = {"method": spec.method, "num_speculative_tokens": spec.k}
        if spec.parallel_drafting is not None:
            expected["parallel_drafting"] = spec.parallel_drafting
    from ..log_groups import component_log_group
    from .components import by_hand_component

    group = component_log_group(component) if component else None  # a component writes to its own log group
    info = read_cloudwatch(session.client("logs"), name, expected=expected, attempts=1, group=group)
    hint = by_hand_component(component, session.region) if component else by_hand(name, session.region)
    if spec.mode is None:  # nothing to check the log against
        from .verify import NOT_VERIFIED

        check = Check(name="vLLM start-up", state=NOT_VERIFIED, detail=f"{ENV_VAR} unreadable: {spec.note}",
                      how_to_check=hint, actual=info.model_dump(exclude={"warnings"}))
        return info, check
    return info, startup_check(info, expected, how_to_check=hint)


def _served(sm: Any, described: dict[str, Any], read: Any, tags: PeagleTags | None = None) -> Any:
    from ..served_config import read_served
    from .component_status import model_of

    config = described.get("EndpointConfigName")
    if not config:
        return None
    model = model_of(sm, described, tags, read) if tags is not None else None  # a component names its model
    return read_served(sm, config, read=read, model=model)


def leftovers(session: Any, name: str | None = None, *, sleep: Any = None, sm: Any = None) -> list[Any]:
    """peagle-made configs and models no endpoint uses (of endpoint `name`, or all), each with its command."""
    from .. import clock
    from .leftovers import References, find_leftovers

    sm = sm or session.client("sagemaker")
    read = lambda call: read_retrying(call, sleep=sleep or clock.sleep)  # noqa: E731
    refs = read(lambda: References.read(sm))
    return read(lambda: find_leftovers(sm, refs, endpoint=name, region=session.region))


def _add_autoscaling(session: Any, rows: list[EndpointStatus], described: dict[str, dict[str, Any]],
                     tags: dict[str, PeagleTags]) -> None:
    """Each managed endpoint's autoscaling (two reads for all of them; a failed read is 'unknown'), against the
    intended one: intended but not registered (or registered otherwise) names `peagle recover`."""
    from .intent import recover_command

    if not rows:
        return
    states = read_autoscaling(session.client(AUTOSCALING_SERVICE), described)
    for row in rows:
        state = states.get(row.name)
        intended = tags[row.name].autoscale if row.name in tags else None
        if state is not None and row.name in tags:
            state.tagged = intended is not None
        row.autoscaling = state
        if (intended is not None and state is not None and row.update is None and row.status == "InService"
                and not (row.lease is not None and row.lease.fresh)  # a deploy registers it last
                and (state.state == "off" or (state.state == "on" and (state.min_capacity, state.max_capacity)
                                              != (intended.min_capacity, intended.max_capacity)))):
            row.recover_command = row.recover_command or recover_command(row.name, session.region)
