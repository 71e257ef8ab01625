"""CloudWatch Logs metric filters, the acceptance alarm's metric math, and SageMaker's deployment guardrails for the
emulator. moto (5.2) stores a metric filter (PutMetricFilter appends a second one of the same name) but never
applies it: no log event ever becomes metric data. Each behaviour modelled here names its source (docs/ci.md
lists them):

- PutMetricFilter creates or updates the filter of that name on the group (PutMetricFilter, CloudWatch Logs API
  Reference: "Creates or updates a metric filter"); a group that does not exist is refused with
  ResourceNotFoundException "The specified log group does not exist." (moto's own wording of that error);
- a filter applies to the events ingested after it was made ("Creating metrics from log events using filters",
  CloudWatch Logs user guide: filters do not retroactively filter data): each event it matches publishes one
  datapoint at the event's time, its value `metricValue` (a number, or `$field` of the match; an event whose field is
  not a number publishes nothing: *assumed*), in the transformation's namespace, name, unit and dimensions (`$field`
  values; "Filter pattern syntax for metric filters", same guide). `defaultValue` is not modelled (peagle sets none);
- the space-delimited patterns peagle writes (`[..., name="Text", name, ...]`): fields split on spaces, a field
  in [] or "" one field; one `...` for any number of fields, the rest matched from each end; `name="text"` (or
  `name=text`) an exact match, `*` a wildcard in it; `name>=N` and the other comparisons on numbers ("Filter pattern
  syntax for metric filters, subscription filters, filter log events, and Live Tail": "Matching terms in
  space-delimited log events"). Other pattern forms publish nothing in the emulator (*assumed*: not modelled);
- metric math `1 + K * a / d` over two `Sum` MetricStats (the acceptance alarm, acceptance_alarm.py), evaluated per
  period by `alarm_emulation` like its own alarms; a period where either series has no datapoint has no value
  ("Using metric math", CloudWatch user guide: arithmetic on time series with missing values);
- PutMetricAlarm on an alarm that exists keeps its state ("When you update an existing alarm, its state is left
  unchanged, but the update completely overwrites the previous configuration of the alarm": PutMetricAlarm,
  CloudWatch API Reference); moto makes a new alarm in state OK;
- UpdateEndpoint with `AutoRollbackConfiguration`: while the update runs, an alarm it names in ALARM rolls it back:
  the endpoint stays InService on the old config with a FailureReason naming the alarm (botocore's model of
  AutoRollbackConfig: "If any alarms are tripped during a deployment, SageMaker rolls back the deployment"; the
  FailureReason's wording is *assumed*);
- `script_update(new_fleet_logs=[...])`: while the update runs, the new fleet's container logs the next of those
  lines every 10 s of the emulator's clock (vLLM's stats interval, VLLM_LOG_STATS_INTERVAL's default) on a stream of
  its own: all traffic is on the new fleet at once (ALL_AT_ONCE), so the old fleet drafts nothing and logs no
  SpecDecoding line (vLLM logs none for an interval without drafts: `SpecDecodingLogging.log`).
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Callable
from datetime import datetime, timezone
from typing import Any

_COMPARE = re.compile(r"^(?P<name>\w+)\s*(?P<op>!=|>=|<=|=|>|<)\s*(?P<value>.*)$")
_EXPRESSION = re.compile(r"^\s*1\s*\+\s*(?P<k>\d+)\s*\*\s*(?P<a>\w+)\s*/\s*(?P<d>\w+)\s*$")
NEW_FLEET_STREAM = "AllTraffic/i-0emulatednewfleet"
LOG_INTERVAL_S = 10.0


# space-delimited patterns ----------------------------------------------------------------------------------------
def _split_pattern(pattern: str) -> list[str] | None:
    text = pattern.strip()
    if not (text.startswith("[") and text.endswith("]")):
        return None
    fields, current, quoted = [], "", False
    for ch in text[1:-1]:
        if ch == '"':
            quoted = not quoted
        if ch == "," and not quoted:
            fields.append(current.strip())
            current = ""
            continue
        current += ch
    fields.append(current.strip())
    return fields


def tokens(message: str) -> list[str]:
    """A log event's fields: split on spaces, a [...] or "..." group one field."""
    found, i = [], 0
    while i < len(message):
        if message[i] == " ":
            i += 1
            continue
        closing = {"[": "]", '"': '"'}.get(message[i])
        end = message.find(closing, i + 1) if closing else -1
        if closing and end >= 0:
            found.append(message[i:end + 1])
            i = end + 1
            continue
        end = message.find(" ", i)
        end = len(message) if end < 0 else end
        found.append(message[i:end])
        i = end
    return found


def _field_matches(field: str, value: str) -> tuple[str | None, bool]:
    """(the field's name, whether `value` satisfies it)."""
    match = _COMPARE.match(field)
    if match is None:
        return field, True
    name, op, wanted = match["name"], match["op"], match["value"].strip()
    if wanted.startswith('"') and wanted.endswith('"'):
        wanted = wanted[1:-1]
    if op in ("=", "!=") and not _number(wanted):
        same = fnmatch.fnmatchcase(value, wanted)
        return name, same if op == "=" else not same
    left, right = _number(value), _number(wanted)
    if left is None or right is None:
        return name, False
    return name, {"=": left == right, "!=": left != right, ">=": left >= right, "<=": left <= right,
                  ">": left > right, "<": left < right}[op]


def _number(text: str) -> float | None:
    try:
        return float(text)
    except ValueError:
        return None


def match(pattern: str, message: str) -> dict[str, str] | None:
    """The fields a space-delimited pattern extracts from `message` (name -> text), None when it does not match or the
    pattern is not one the emulator models."""
    fields = _split_pattern(pattern)
    if fields is None or fields.count("...") > 1:
        return None
    words = tokens(message)
    if "..." in fields:
        at = fields.index("...")
        head, tail = fields[:at], fields[at + 1:]
        if len(words) < len(head) + len(tail):
            return None
        pairs = list(zip(head, words[:len(head)])) + list(zip(tail, words[len(words) - len(tail):]))
    else:
        if len(words) != len(fields):
            return None
        pairs = list(zip(fields, words))
    extracted = {}
    for field, word in pairs:
        name, ok = _field_matches(field, word)
        if not ok:
            return None
        if name:
            extracted[name] = word
    return extracted


def _value(expression: str, fields: dict[str, str]) -> float | None:
    text = expression.strip()
    if text.startswith("$"):
        return _number(fields.get(text[1:], ""))
    return _number(text)


# moto patches --------------------------------------------------------------------------------------------------------
def logs_patches() -> list[Any]:
    """PutMetricFilter as CloudWatch Logs does it, every ingested event through the group's filters, and
    PutMetricAlarm keeping an existing alarm's state."""
    from unittest import mock

    from moto.logs.exceptions import ResourceNotFoundException
    from moto.logs.models import LogsBackend

    original_put_filter = LogsBackend.put_metric_filter
    original_put_events = LogsBackend.put_log_events

    def put_metric_filter(backend: Any, filter_name: str, filter_pattern: str, log_group_name: str,
                          metric_transformations: Any) -> None:
        if log_group_name not in backend.groups:
            raise ResourceNotFoundException()
        backend.filters.metric_filters = [f for f in backend.filters.metric_filters if not (
            f["filterName"] == filter_name and f["logGroupName"] == log_group_name)]
        original_put_filter(backend, filter_name, filter_pattern, log_group_name, metric_transformations)

    def put_log_events(backend: Any, log_group_name: str, log_stream_name: str, log_events: list[dict[str, Any]]):
        import time

        answer = original_put_events(backend, log_group_name, log_stream_name, log_events)
        now_ms = time.time() * 1000  # moto ingests events from 14 days ago to 2 hours ahead of the real clock
        publish_matches(backend, log_group_name, [e for e in log_events
                                                 if now_ms - 14 * 86_400_000 <= e["timestamp"] <= now_ms + 7_200_000])
        return answer

    from moto.cloudwatch.models import CloudWatchBackend

    original_put_alarm = CloudWatchBackend.put_metric_alarm

    def put_metric_alarm(backend: Any, name: str, *args: Any, **kwargs: Any) -> Any:
        before = backend.alarms.get(name)
        alarm = original_put_alarm(backend, name, *args, **kwargs)
        if before is not None:  # an update: the state stays
            alarm.state_value, alarm.state_reason = before.state_value, before.state_reason
            alarm.state_reason_data = getattr(before, "state_reason_data", None)
            alarm.state_updated_timestamp = before.state_updated_timestamp
        return alarm

    return [mock.patch.object(LogsBackend, "put_metric_filter", put_metric_filter),
            mock.patch.object(LogsBackend, "put_log_events", put_log_events),
            mock.patch.object(CloudWatchBackend, "put_metric_alarm", put_metric_alarm)]


def publish_matches(logs_backend: Any, group: str, events: list[dict[str, Any]]) -> None:
    """Each event every filter of `group` matches, as one datapoint in moto's CloudWatch."""
    from moto.cloudwatch.models import cloudwatch_backends

    filters = [f for f in logs_backend.filters.metric_filters if f["logGroupName"] == group]
    if not filters or not events:
        return
    cloudwatch = cloudwatch_backends[logs_backend.account_id][logs_backend.region_name]
    for event in events:
        for metric_filter in filters:
            fields = match(metric_filter["filterPattern"], event.get("message", ""))
            if fields is None:
                continue
            for transformation in metric_filter["metricTransformations"]:
                value = _value(transformation["metricValue"], fields)
                if value is None:
                    continue
                dimensions = [{"Name": key, "Value": fields.get(str(ref).lstrip("$"), "")}
                              for key, ref in (transformation.get("dimensions") or {}).items()]
                when = datetime.fromtimestamp(event["timestamp"] / 1000, tz=timezone.utc).replace(tzinfo=None)
                cloudwatch.put_metric_data(transformation["metricNamespace"], [{
                    "MetricName": transformation["metricName"], "Value": value,
                    "Unit": transformation.get("unit") or "None", "Timestamp": when, "Dimensions": dimensions}])


# the acceptance alarm's metric math, for alarm_emulation ------------------------------------------------------------
class AcceptanceShape:
    """An alarm whose returned expression is `1 + K * a / d` over two Sum MetricStats."""

    def __init__(self, k: int, accepted: Any, drafted: Any):
        self.k, self.accepted, self.drafted = k, accepted, drafted
        self.period = int(accepted.metric_stat.period)

    def series(self, cloudwatch: Any) -> tuple[Callable[[float, float], float | None], list[float]]:
        def read(query: Any) -> list[tuple[float, float]]:
            metric = query.metric_stat.metric
            wanted = {(d.name, d.value) for d in metric.dimensions or []}
            return sorted((_epoch(d.timestamp), float(d.value)) for d in list(cloudwatch.metric_data)
                          if d.namespace == metric.namespace and d.name == metric.metric_name
                          and {(x.name, x.value) for x in d.dimensions} == wanted
                          and getattr(d, "value", None) is not None)

        accepted, drafted = read(self.accepted), read(self.drafted)

        def value(start: float, end: float) -> float | None:
            a = [v for t, v in accepted if start <= t < end]
            d = [v for t, v in drafted if start <= t < end]
            if not a or not d or sum(d) == 0:
                return None
            return 1 + self.k * sum(a) / sum(d)

        return value, [t for t, _ in accepted + drafted]


def _epoch(stamp: datetime) -> float:
    return (stamp if stamp.tzinfo else stamp.replace(tzinfo=timezone.utc)).timestamp()


def acceptance_shape(alarm: Any) -> AcceptanceShape | None:
    queries = {q.id: q for q in alarm.metric_data_queries or []}
    returned = [q for q in queries.values() if str(q.return_data).lower() in ("true", "none") and q.expression]
    if len(returned) != 1 or (found := _EXPRESSION.match(returned[0].expression)) is None:
        return None
    accepted, drafted = queries.get(found["a"]), queries.get(found["d"])
    if any(q is None or q.metric_stat is None or q.metric_stat.stat != "Sum" for q in (accepted, drafted)):
        return None
    return AcceptanceShape(int(found["k"]), accepted, drafted)


# SageMaker's deployment guardrails ------------------------------------------------------------------------------------
def rollback_alarms(body: dict[str, Any]) -> list[str]:
    """The alarms an UpdateEndpoint names in its AutoRollbackConfiguration."""
    config = ((body.get("DeploymentConfig") or {}).get("AutoRollbackConfiguration") or {})
    return [a.get("AlarmName", "") for a in config.get("Alarms") or []]


def tripped(account: str, region: str, names: list[str]) -> str | None:
    """The first of `names` in ALARM in moto's CloudWatch, with its state reason."""
    from moto.cloudwatch.models import cloudwatch_backends

    alarms = cloudwatch_backends[account][region].alarms
    for name in names:
        alarm = alarms.get(name)
        if alarm is not None and alarm.state_value == "ALARM":
            return f"{name} ({alarm.state_reason})"
    return None


def rollback_reason(alarm: str) -> str:
    return (f"Rolled back: CloudWatch alarm {alarm} went into ALARM state during the deployment (emulated "
            "AutoRollbackConfiguration)")


class NewFleetLog:
    """The new fleet's container output during an update: `lines` in turn, one every LOG_INTERVAL_S of the
    emulator's clock from `started` on."""

    def __init__(self, lines: list[str], started: float):
        self.lines, self.started, self.written = list(lines), started, 0

    def catch_up(self, logs_backend: Any, group: str, now: float) -> None:
        due = int((now - self.started) // LOG_INTERVAL_S)
        if not self.lines or due <= self.written:
            return
        if group not in logs_backend.groups:
            logs_backend.create_log_group(group, {})
        if NEW_FLEET_STREAM not in logs_backend.groups[group].streams:
            logs_backend.create_log_stream(group, NEW_FLEET_STREAM)
        events = [{"timestamp": int((self.started + (i + 1) * LOG_INTERVAL_S) * 1000),
                   "message": self.lines[i % len(self.lines)]} for i in range(self.written, due)]
        self.written = due
        logs_backend.put_log_events(group, NEW_FLEET_STREAM, events)
