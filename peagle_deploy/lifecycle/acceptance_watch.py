"""The acceptance alarm and its metric filters (`acceptance_alarm.py` plans them) in AWS: created with the endpoint,
moved by an update, read by `status`, removed by cleanup, a deploy's rollback and recover.

- `create`: the plan's PutMetricFilter bodies (a log group that does not exist yet is created first: SageMaker writes
  into it all the same), then PutMetricAlarm.
- `remove`: peagle's filters in the owner's log groups (every filter named `peagle-acceptance-*` there: metric
  filters carry no tags, their name is how peagle knows its own), then the alarm, only if it carries
  `peagle:managed=true` (and, for a deploy's rollback, that deploy's `peagle:created-at`). Filters first: an alarm
  left by an interruption is still found (`orphans`), a filter without its alarm is found by its owner's name.
- `orphans`: peagle's alarms whose endpoint (or component) is gone, with their filters: what a killed deploy,
  cleanup or update left.
- `Moving` (an update): the alarm and filters as they were, the new K's put before UpdateEndpoint, put back as they
  were when the update does not happen, the old K's filters removed once it did.
- `read_status`: the last hour's acceptance from GetMetricData beside the alarm's floor and state.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

from pydantic import BaseModel, Field

from ..acceptance_alarm import (
    EVALUATION_PERIODS,
    PERIOD_S,
    PREFIX,
    AcceptanceAlarm,
    alarm_name,
    k_of_filter,
    mean_length,
    metric_name,
    NAMESPACE,
)
from ..aws import error_code, is_not_found
from ..log_groups import component_log_group, endpoint_log_group
from ..tags import PeagleTags
from .autoscaling import _failed
from .outcome import Outcome

_ALARM_KEYS = ("AlarmName", "AlarmDescription", "ActionsEnabled", "OKActions", "AlarmActions",
               "InsufficientDataActions", "Metrics", "EvaluationPeriods", "DatapointsToAlarm", "Threshold",
               "ComparisonOperator", "TreatMissingData", "EvaluateLowSampleCountPercentile", "MetricName", "Namespace",
               "Statistic", "ExtendedStatistic", "Dimensions", "Period", "Unit", "ThresholdMetricId")
_ACTIONS = ("OKActions", "AlarmActions", "InsufficientDataActions")


def owner_groups(owner: str) -> tuple[str, str]:
    """Where the owner's filters can be: its endpoint's log group and its inference component's (peagle names a
    component as its endpoint)."""
    return endpoint_log_group(owner), component_log_group(owner)


# create -----------------------------------------------------------------------------------------------------------
def put_filter(logs: Any, body: dict[str, Any]) -> None:
    """PutMetricFilter; a log group that does not exist yet (no line written so far) is created first."""
    try:
        logs.put_metric_filter(**body)
        return
    except Exception as exc:
        if error_code(exc) != "ResourceNotFoundException":
            raise
    try:
        logs.create_log_group(logGroupName=body["logGroupName"])
    except Exception as exc:
        if error_code(exc) != "ResourceAlreadyExistsException":
            raise
    logs.put_metric_filter(**body)


def create(logs: Any, cloudwatch: Any, alarm: AcceptanceAlarm) -> None:
    """The filters, then the alarm on the metrics they publish."""
    for body in alarm.put_metric_filters:
        put_filter(logs, body)
    cloudwatch.put_metric_alarm(**alarm.put_metric_alarm)


# read -------------------------------------------------------------------------------------------------------------
def describe_alarm(cloudwatch: Any, owner: str) -> dict[str, Any] | None:
    found = cloudwatch.describe_alarms(AlarmNames=[alarm_name(owner)], AlarmTypes=["MetricAlarm"])
    alarms = found.get("MetricAlarms", [])
    return alarms[0] if alarms else None


def alarm_tags(cloudwatch: Any, alarm: dict[str, Any]) -> PeagleTags:
    return PeagleTags.from_aws(cloudwatch.list_tags_for_resource(ResourceARN=alarm["AlarmArn"]).get("Tags", []))


def peagle_filters(logs: Any, group: str) -> list[str]:
    """The names of peagle's filters in `group` ([] when the group does not exist)."""
    try:
        pages = logs.get_paginator("describe_metric_filters").paginate(logGroupName=group, filterNamePrefix=PREFIX)
        return [f["filterName"] for page in pages for f in page.get("metricFilters", [])]
    except Exception as exc:
        if is_not_found(exc):
            return []
        raise


def alarm_k(alarm: dict[str, Any] | None) -> int | None:
    """The K an acceptance alarm's expression computes with (1 + K * accepted / drafted)."""
    for query in (alarm or {}).get("Metrics") or []:
        expression = query.get("Expression") or ""
        head, _, rest = expression.partition("+")
        if head.strip() == "1" and "*" in rest and rest.split("*")[0].strip().isdigit():
            return int(rest.split("*")[0].strip())
    return None


# remove -----------------------------------------------------------------------------------------------------------
def remove(logs: Any, cloudwatch: Any, owner: str, *, created_at: datetime | None = None) -> list[Outcome]:
    """peagle's filters of `owner`, then its alarm (only peagle's; with `created_at`, only that deploy's: filters
    too are left when the alarm is another deploy's). One Outcome per filter and for the alarm; none for what is not
    there."""
    try:
        alarm = describe_alarm(cloudwatch, owner) if cloudwatch is not None else None
        tags = alarm_tags(cloudwatch, alarm) if alarm is not None else None
    except Exception as exc:  # noqa: BLE001 - an AWS failure becomes an outcome
        return [_failed("alarm", alarm_name(owner), exc)]
    if alarm is not None and tags is not None and (not tags.managed or (created_at is not None
                                                                          and tags.created_at != created_at)):
        why = ("not created by peagle (no peagle:managed tag)" if not tags.managed
               else "same name, but not from this deploy (another peagle:created-at)")
        return [Outcome(kind="alarm", name=alarm["AlarmName"], result="left", reason=why)]
    outcomes = remove_filters(logs, owner) if logs is not None else []
    if alarm is not None:
        try:
            cloudwatch.delete_alarms(AlarmNames=[alarm["AlarmName"]])
            outcomes.append(Outcome(kind="alarm", name=alarm["AlarmName"], result="deleted"))
        except Exception as exc:  # noqa: BLE001
            outcomes.append(_failed("alarm", alarm["AlarmName"], exc))
    return outcomes


def remove_filters(logs: Any, owner: str, *, keep_k: int | None = None, groups: tuple[str, ...] | None = None
                   ) -> list[Outcome]:
    """peagle's filters in the owner's log groups (`keep_k`: but those of that K)."""
    outcomes = []
    for group in groups or owner_groups(owner):
        try:
            names = peagle_filters(logs, group)
        except Exception as exc:  # noqa: BLE001
            outcomes.append(_failed("metric_filter", f"{group}:{PREFIX}*", exc))
            continue
        for name in names:
            if keep_k is not None and k_of_filter(name) == keep_k:
                continue
            try:
                logs.delete_metric_filter(logGroupName=group, filterName=name)
                outcomes.append(Outcome(kind="metric_filter", name=f"{group}:{name}", result="deleted"))
            except Exception as exc:  # noqa: BLE001
                outcomes.append(Outcome(kind="metric_filter", name=f"{group}:{name}", result="already gone")
                                if is_not_found(exc) else _failed("metric_filter", f"{group}:{name}", exc))
    return outcomes


def orphans(sm: Any, logs: Any, cloudwatch: Any, name: str | None = None) -> list[Outcome]:
    """peagle's acceptance alarms (NAME's, or every one) whose endpoint and inference component are gone, with their
    filters; for NAME also filters whose alarm never came (an interruption between the two). An alarm of that name
    without peagle's tag is someone else's: left, and not mentioned."""
    from ..describe import describe

    if name is not None:
        alarm = describe_alarm(cloudwatch, name)
        found = [alarm] if alarm is not None else []
    else:
        found = [a for page in cloudwatch.get_paginator("describe_alarms").paginate(
            AlarmNamePrefix=PREFIX, AlarmTypes=["MetricAlarm"]) for a in page.get("MetricAlarms", [])]
    outcomes: list[Outcome] = []
    owners = [a["AlarmName"].removeprefix(PREFIX) for a in found]
    for owner in owners + ([name] if name is not None and not owners else []):
        if describe(sm, "endpoint", owner) is not None or _component_exists(sm, owner):
            continue
        outcomes += [o for o in remove(logs, cloudwatch, owner) if o.result != "left"]  # not peagle's: not said
    return outcomes


def _component_exists(sm: Any, name: str) -> bool:
    """Whether inference component `name` exists; a mock that lacks the call (a plain moto server) holds none."""
    from ..aws import MockLacksOperation
    from .components import describe_component

    try:
        return describe_component(sm, name) is not None
    except MockLacksOperation:
        return False


# an update ---------------------------------------------------------------------------------------------------------
class Moving(BaseModel):
    """An update's acceptance alarm: what was there before (`read`), the new K's put (`put`), put back as it was
    (`put_back`) or the old K's filters removed (`settle`)."""

    alarm: AcceptanceAlarm
    before: dict[str, Any] | None = Field(None, description="the alarm as PutMetricAlarm would make it again")
    filters_before: list[str] = Field(default_factory=list)
    put_sent: bool = False
    not_ours: str | None = Field(None, description="an alarm of that name that is not peagle's: left alone")
    was_alarm: bool = Field(False, description="the alarm was in ALARM (the fleet that serves now fell)")

    @classmethod
    def read(cls, logs: Any, cloudwatch: Any, alarm: AcceptanceAlarm) -> Moving:
        live = describe_alarm(cloudwatch, alarm.owner)
        moving = cls(alarm=alarm, filters_before=peagle_filters(logs, alarm.log_group))
        if live is None:
            return moving
        tags = alarm_tags(cloudwatch, live)
        if not tags.managed:
            moving.not_ours = f"CloudWatch alarm {alarm.alarm_name} exists and is not peagle's: left alone"
            return moving
        moving.before = {key: live[key] for key in _ALARM_KEYS if live.get(key) not in (None, [])}
        moving.was_alarm = live.get("StateValue") == "ALARM"
        return moving

    def body(self) -> dict[str, Any]:
        """The new alarm, with the actions you gave the old one (an SNS topic, say) kept."""
        body = dict(self.alarm.put_metric_alarm)
        for key in _ACTIONS:
            if self.before and self.before.get(key):
                body[key] = self.before[key]
        return body

    def put(self, logs: Any, cloudwatch: Any) -> None:
        """The new K's filters and the alarm on them. An alarm in ALARM keeps that state through PutMetricAlarm, which
        would roll back at once an update meant to end the fall: it is set to INSUFFICIENT_DATA, to judge the new K's
        lines only (CloudWatch evaluates it again at its next period)."""
        self.put_sent = True
        for body in self.alarm.put_metric_filters:
            put_filter(logs, body)
        cloudwatch.put_metric_alarm(**self.body())
        if self.was_alarm:
            cloudwatch.set_alarm_state(AlarmName=self.alarm.alarm_name, StateValue="INSUFFICIENT_DATA",
                                       StateReason=f"peagle: now watching K={self.alarm.k}; the fall it was in "
                                                   "concerned the fleet being replaced")

    def put_back(self, logs: Any, cloudwatch: Any) -> list[str]:
        """The update did not happen: the alarm and filters as they were. Returns what was done, for the hint."""
        if not self.put_sent:
            return []
        done = []
        for body in self.alarm.put_metric_filters:
            if body["filterName"] not in self.filters_before:
                remove_filter(logs, body["logGroupName"], body["filterName"])
                done.append(f"filter {body['filterName']} removed")
        if self.before is not None:
            cloudwatch.put_metric_alarm(**self.before)
            done.append(f"alarm {self.alarm.alarm_name} put back as it was")
        else:
            cloudwatch.delete_alarms(AlarmNames=[self.alarm.alarm_name])
            done.append(f"alarm {self.alarm.alarm_name} removed")
        return done

    def settle(self, logs: Any) -> list[Outcome]:
        """The update happened: the filters of other K's match nothing any more."""
        return remove_filters(logs, self.alarm.owner, keep_k=self.alarm.k, groups=(self.alarm.log_group,))


def remove_filter(logs: Any, group: str, name: str) -> None:
    try:
        logs.delete_metric_filter(logGroupName=group, filterName=name)
    except Exception as exc:
        if not is_not_found(exc):
            raise


def align(logs: Any, cloudwatch: Any, owner: str, group: str, *, k: int | None, mode: str | None,
          tags_for: Callable[[], dict[str, str]]) -> list[str]:
    """After an update that peagle recover finishes: peagle's alarm of `owner` watches the served K (its filters put
    where missing, the alarm moved to them with the default floor for that K), the other K's filters removed. Nothing
    when there is no alarm of peagle's or speculation is off. Returns the actions, one line each."""
    from ..acceptance_alarm import AcceptanceRequest, plan_alarm

    live = describe_alarm(cloudwatch, owner)
    if live is None or not alarm_tags(cloudwatch, live).managed or not k or mode in (None, "off"):
        return []
    actions = []
    if alarm_k(live) != k:
        wanted, _ = plan_alarm(AcceptanceRequest(), owner=owner, log_group=group, k=k, mode=mode, tags=tags_for())
        assert wanted is not None
        moving = Moving(alarm=wanted, before={key: live[key] for key in _ALARM_KEYS if live.get(key) not in (None, [])},
                        was_alarm=live.get("StateValue") == "ALARM")
        moving.put(logs, cloudwatch)
        actions.append(f"acceptance alarm {wanted.alarm_name} moved to K={k} (floor {wanted.floor.value:.2f}, "
                       "peagle's default)")
    gone = [o.name for o in remove_filters(logs, owner, keep_k=k, groups=(group,)) if o.result == "deleted"]
    if gone:
        actions.append(f"metric filters of other K removed: {', '.join(gone)}")
    return actions


# status -----------------------------------------------------------------------------------------------------------
class AcceptanceStatus(BaseModel):
    """`status NAME`: the last hour's acceptance from the metric, beside the alarm's floor and state."""

    alarm: str | None = Field(None, description="the alarm's name, when it exists")
    alarm_state: str | None = None
    alarm_reason: str | None = None
    floor: float | None = Field(None, description="the alarm's threshold: mean acceptance length")
    k: int | None = Field(None, description="the K the endpoint serves (its model's SM_VLLM_SPECULATIVE_CONFIG)")
    alarm_k: int | None = Field(None, description="the K the alarm computes with")
    window_s: int = 3600
    accepted_tokens: float | None = None
    drafted_tokens: float | None = None
    mean_acceptance_length: float | None = None
    recent_s: int = Field(EVALUATION_PERIODS * PERIOD_S, description="the alarm's own window")
    recent_mean_acceptance_length: float | None = Field(None, description="over the alarm's window (the last "
                                                        "minutes), None without SpecDecoding lines then")
    fallen: bool = Field(False, description="the mean acceptance length over the alarm's window is below the floor")
    source: str = Field(description="the metrics read (GetMetricData)")
    note: str | None = None

    def line(self) -> str:
        if self.source == "none":
            return f"acceptance: {self.note}"
        if self.mean_acceptance_length is not None:
            recent = "no lines" if self.recent_mean_acceptance_length is None else \
                f"{self.recent_mean_acceptance_length:.2f}"
            figure = (f"mean acceptance length {self.mean_acceptance_length:.2f} at K={self.k} over the last hour, "
                      f"{recent} over the last {self.recent_s // 60} min ({self.accepted_tokens:.0f} of "
                      f"{self.drafted_tokens:.0f} drafted tokens accepted in the hour; {self.source})")
        else:
            figure = f"no acceptance in the last hour ({self.note or 'no SpecDecoding lines'}; {self.source})"
        if self.alarm is None:
            return f"acceptance: {figure}; no acceptance alarm"
        floor = f"floor {self.floor:.2f}" if self.floor is not None else "floor unknown"
        fell = f"; FALLEN below the {floor} over the last {self.recent_s // 60} min" if self.fallen else f"; {floor}"
        state = f"alarm {self.alarm} {self.alarm_state or 'state unknown'}"
        if self.alarm_state == "ALARM" and self.alarm_reason:
            state += f" ({self.alarm_reason})"
        if self.alarm_k is not None and self.k is not None and self.alarm_k != self.k:
            state += f"; the alarm watches K={self.alarm_k}, not the served K={self.k}: 'peagle recover' moves it"
        return f"acceptance: {figure}{fell}; {state}"


def read_status(cloudwatch: Any, owner: str, *, k: int | None, now: datetime) -> AcceptanceStatus | None:
    """None when there is neither an alarm nor a served K; without the alarm the metric is not read (no filter of
    peagle's publishes it: deployed with --no-acceptance-alarm, or by an older peagle)."""
    alarm = describe_alarm(cloudwatch, owner)
    if alarm is None and not k:
        return None
    if alarm is None:
        return AcceptanceStatus(k=k, source="none", note=f"not watched: no acceptance alarm {alarm_name(owner)} "
                                                         f"(peagle metrics {owner} reads vLLM's lines)")
    read_k = k or alarm_k(alarm)
    source = f"CloudWatch {NAMESPACE} {metric_name(owner, read_k, 'accepted')}" if read_k else "no K to read"
    status = AcceptanceStatus(k=k, alarm_k=alarm_k(alarm), source=source)
    if alarm is not None:
        status.alarm, status.alarm_state = alarm["AlarmName"], alarm.get("StateValue")
        status.alarm_reason, status.floor = alarm.get("StateReason"), alarm.get("Threshold")
    if not read_k:
        return status
    queries = [{"Id": value, "MetricStat": {"Metric": {"Namespace": NAMESPACE,
                                                      "MetricName": metric_name(owner, read_k, value)},
                                           "Period": 60, "Stat": "Sum"}, "ReturnData": True}
               for value in ("accepted", "drafted")]
    sums = {"accepted": 0.0, "drafted": 0.0}
    recent = {"accepted": 0.0, "drafted": 0.0}
    since = now - timedelta(seconds=status.recent_s)
    pages = cloudwatch.get_paginator("get_metric_data").paginate(
        MetricDataQueries=queries, StartTime=now - timedelta(seconds=status.window_s), EndTime=now)
    for page in pages:
        for result in page.get("MetricDataResults", []):
            values, stamps = result.get("Values") or [], result.get("Timestamps") or []
            sums[result["Id"]] += sum(values)
            recent[result["Id"]] += sum(v for v, t in zip(values, stamps) if _aware(t) >= since)
    status.accepted_tokens, status.drafted_tokens = sums["accepted"], sums["drafted"]
    status.mean_acceptance_length = mean_length(read_k, sums["accepted"], sums["drafted"])
    status.recent_mean_acceptance_length = mean_length(read_k, recent["accepted"], recent["drafted"])
    if status.mean_acceptance_length is None:
        status.note = "no SpecDecoding lines: no traffic, or speculation off"
    if status.floor is not None and status.recent_mean_acceptance_length is not None:
        status.fallen = status.recent_mean_acceptance_length < status.floor
    return status


def _aware(stamp: datetime) -> datetime:
    from datetime import UTC

    return stamp if stamp.tzinfo else stamp.replace(tzinfo=UTC)
