"""CloudWatch alarms for the emulator: moto (5.2) stores alarms and metric data, but never evaluates an alarm,
never changes its state and never runs its actions. Scale to zero needs all three: an invocation that finds no
copy counts in `NoCapacityInvocationFailures`, the alarm on that metric goes to ALARM, and its action (a step
scaling policy's ARN) brings a copy back.

Evaluated here, on the emulator's clock (`emulator.clock`), for alarms in the `AWS/SageMaker` namespace on one
metric, or on a metric math expression that adds up such metrics, each term `id` or `FILL(id, constant)` (the
form an older peagle's idle alarm takes: `FILL(served, 0) + FILL(refused, 0)`), whose data is in moto's CloudWatch
backend (the emulator publishes SageMaker's own metrics there; `PutMetricData` adds yours):
- datapoints per period, aligned to the period (`Sum`, `Average`, `Minimum`, `Maximum`, `SampleCount`; an
  `ExtendedStatistic` is never breaching);
- at the end of each period (plus `lag_s`, the emulator's `alarm_lag_s`) the last `EvaluationPeriods` datapoints
  decide: ALARM when at least `DatapointsToAlarm` (default: all of them) breach, OK when enough do not,
  `TreatMissingData` deciding what a period without data counts as (`missing`, the default: nothing, and
  INSUFFICIENT_DATA when no period has data; `ignore`: the state stays; `breaching`; `notBreaching`);
- a new alarm is INSUFFICIENT_DATA until its first evaluation (moto starts every alarm at OK); state changes go
  through moto's own path (DescribeAlarms and the alarm history show them);
- `WarmUpConfiguration` (moto keeps none of it; `record_warm_up` does): no evaluation before the warm-up's end;
  each alarm's creation time on the emulator's clock is kept too, and its first window looks back from then;
- while an alarm is in ALARM, each evaluation with data runs its actions that are Application Auto Scaling policy
  ARNs (`run_action`), as CloudWatch re-invokes a scaling policy while the alarm stays in ALARM.
Other alarm shapes are evaluated the same way when a module in `SHAPES` recognises them (`acceptance_emulation`:
peagle's acceptance alarm, `1 + K * accepted / drafted`). Alarms that Application Auto Scaling creates for target
tracking (`TargetTracking-...`) are not evaluated here: the emulator models target tracking directly
(`autoscaling_emulation`), which sets their state (`set_state`). Every state change carries the emulator's time as
its `StateUpdatedTimestamp` (moto stamps the real clock).

Evaluations happen only at period ends whose window holds data, or the first one after data left the window, and
(for an alarm that gives periods without data a value: `FILL`, or `TreatMissingData` breaching/notBreaching) the
next period end when it would change the alarm's state, so advancing the clock by a day costs a handful of
evaluations, not thousands.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Iterator
from datetime import datetime, timezone
from typing import Any

NAMESPACE = "AWS/SageMaker"
OPERATORS: dict[str, Callable[[float, float], bool]] = {
    "GreaterThanOrEqualToThreshold": lambda v, t: v >= t,
    "GreaterThanThreshold": lambda v, t: v > t,
    "LessThanThreshold": lambda v, t: v < t,
    "LessThanOrEqualToThreshold": lambda v, t: v <= t,
}
_CURSOR = "_peagle_evaluated_to"  # on moto's Alarm: the last period end evaluated
_CREATED, _WARM_UNTIL = "_peagle_created", "_peagle_warm_until"  # on moto's Alarm: the emulator's clock
_TERM = re.compile(r"^\s*(?:FILL\(\s*(\w+)\s*,\s*([-+0-9.eE]+)\s*\)|(\w+))\s*$")


def epoch(stamp: datetime) -> float:
    return (stamp if stamp.tzinfo else stamp.replace(tzinfo=timezone.utc)).timestamp()


def publish(cloudwatch: Any, metric: str, dimensions: dict[str, str], at: float, value: float = 1.0) -> None:
    """One datapoint of an AWS/SageMaker metric into moto's CloudWatch, at the emulator's time `at`."""
    cloudwatch.put_metric_data(NAMESPACE, [{
        "MetricName": metric, "Value": value, "Unit": "Count",
        "Timestamp": datetime.fromtimestamp(at, tz=timezone.utc).replace(tzinfo=None),  # naive UTC, as moto keeps them
        "Dimensions": [{"Name": k, "Value": v} for k, v in dimensions.items()]}])


def set_state(alarm: Any, state: str, reason: str, at: float, data: dict[str, Any] | None = None) -> None:
    """An alarm to `state` through moto's own path (DescribeAlarms and its history show it), stamped `at` (the
    emulator's clock) rather than the real time moto writes."""
    alarm.update_state(reason, json.dumps(data or {"version": "1.0", "evaluatedAt": at}), state)
    alarm.state_updated_timestamp = datetime.fromtimestamp(at, tz=timezone.utc).replace(tzinfo=None)


def record_warm_up(alarm: Any, body: dict[str, Any], now: float) -> None:
    """What moto drops from a PutMetricAlarm: its creation time and warm-up, on the emulator's clock."""
    setattr(alarm, _CREATED, now)
    warm = body.get("WarmUpConfiguration") or {}
    minutes = warm.get("WarmUpPeriodDurationInMinutes")
    setattr(alarm, _WARM_UNTIL, now + 60 * float(minutes) if minutes else None)
    if hasattr(alarm, _CURSOR):  # an update starts the evaluation over
        delattr(alarm, _CURSOR)


def _terms(alarm: Any) -> list[tuple[Any, float | None]] | None:
    """A metric math alarm's returned expression as (metric query, FILL constant or None) terms; None when it is
    not a sum this module evaluates (or not metric math)."""
    queries = {q.id: q for q in alarm.metric_data_queries or []}
    returned = [q for q in queries.values() if str(q.return_data).lower() in ("true", "none") and q.expression]
    if len(returned) != 1:
        return None
    terms = []
    for part in returned[0].expression.split("+"):
        match = _TERM.match(part)
        if match is None:
            return None
        query = queries.get(match[1] or match[3])
        if query is None or query.metric_stat is None or query.metric_stat.metric.namespace != NAMESPACE:
            return None
        terms.append((query, float(match[2]) if match[1] else None))
    return terms


def _shape(alarm: Any) -> Any:
    """Another module's alarm shape (`SHAPES`): an object with `period` and `series(cloudwatch)`, or None."""
    for recognise in SHAPES:
        found = recognise(alarm)
        if found is not None:
            return found
    return None


def _acceptance(alarm: Any) -> Any:
    from .acceptance_emulation import acceptance_shape

    return acceptance_shape(alarm)


SHAPES: list[Callable[[Any], Any]] = [_acceptance]


def _period(alarm: Any) -> int:
    if alarm.period:
        return int(alarm.period)
    if (shape := _shape(alarm)) is not None:
        return shape.period
    terms = _terms(alarm) or []
    return int(terms[0][0].metric_stat.period) if terms else 60


def watched(cloudwatch: Any) -> list[Any]:
    """The alarms this module evaluates (see the module docstring)."""
    return [a for a in list(cloudwatch.alarms.values())
            if not a.name.startswith("TargetTracking-")
            and ((a.namespace == NAMESPACE and a.metric_name and not a.metric_data_queries) or _terms(a)
                 or _shape(a) is not None)]


def _samples(cloudwatch: Any, alarm: Any, namespace: str | None = None, metric: str | None = None,
             dimensions: Any = None) -> list[tuple[float, float]]:
    wanted = {(d.name, d.value) for d in (alarm.dimensions if dimensions is None else dimensions)}
    namespace, metric = namespace or alarm.namespace, metric or alarm.metric_name
    found = []
    for datum in list(cloudwatch.metric_data):
        if datum.namespace != namespace or datum.name != metric:
            continue
        if {(d.name, d.value) for d in datum.dimensions} != wanted:
            continue
        value = getattr(datum, "value", None)
        if value is None:  # an aggregated datum (StatisticValues): its sum stands for it
            value = getattr(datum, "sum_stat", 0.0)
        found.append((epoch(datum.timestamp), float(value)))
    return sorted(found)


def _statistic(alarm: Any, values: list[float], statistic: str | None = None) -> float | None:
    if not values:
        return None
    return {"Sum": sum(values), "Average": sum(values) / len(values), "Minimum": min(values),
            "Maximum": max(values), "SampleCount": float(len(values))}.get(statistic or alarm.statistic)


Series = Callable[[float, float], "float | None"]  # the alarm's value over [start, start + period), None: no data


def series(cloudwatch: Any, alarm: Any) -> tuple[Series, list[float]]:
    """The alarm's value per period, and the times of the samples it reads."""
    if alarm.metric_data_queries and (shape := _shape(alarm)) is not None:
        return shape.series(cloudwatch)
    terms = _terms(alarm) if alarm.metric_data_queries else None
    if terms is None:
        samples = _samples(cloudwatch, alarm)
        return (lambda start, end: _statistic(alarm, [v for t, v in samples if start <= t < end])), [
            t for t, _ in samples]
    read = [(q.metric_stat.stat, fill, _samples(cloudwatch, alarm, NAMESPACE, q.metric_stat.metric.metric_name,
                                                 q.metric_stat.metric.dimensions)) for q, fill in terms]

    def value(start: float, end: float) -> float | None:
        parts = [_statistic(alarm, [v for t, v in samples if start <= t < end], stat) for stat, _, samples in read]
        parts = [fill if part is None else part for part, (_, fill, _) in zip(parts, read)]
        return None if all(part is None for part in parts) else sum(part or 0.0 for part in parts)

    return value, [t for _, _, samples in read for t, _ in samples]


def evaluate(alarm: Any, end: float, samples: list[tuple[float, float]] | Series) -> tuple[str | None, float | None]:
    """(the state the last EvaluationPeriods periods ending at `end` give, or None to keep the state;
    the newest breaching datapoint). `samples`: (time, value) of the alarm's one metric, or its `series`."""
    period, periods = _period(alarm), int(alarm.evaluation_periods)
    needed = int(alarm.datapoints_to_alarm or periods)
    breaches = fine = 0
    newest: float | None = None
    missing = alarm.treat_missing_data or "missing"
    compare = OPERATORS.get(alarm.comparison_operator)
    value_of = samples if callable(samples) else (
        lambda start, stop: _statistic(alarm, [v for t, v in samples if start <= t < stop]))
    for k in range(periods):
        start = end - (k + 1) * period
        value = value_of(start, start + period)
        if value is None:
            if missing == "breaching":
                breaches += 1
            elif missing == "notBreaching":
                fine += 1
            continue
        if compare is not None and compare(value, float(alarm.threshold)):
            breaches += 1
            newest = value if newest is None else newest
        else:
            fine += 1
    if breaches >= needed:
        return "ALARM", newest
    if breaches + fine == 0:
        return (None if missing == "ignore" else "INSUFFICIENT_DATA"), None
    return "OK", None


def _next_end(alarm: Any, after: float, times: list[float] | list[tuple[float, float]]) -> float | None:
    """The first period end after `after` whose window holds a sample, or that a sample has just left."""
    period, periods = _period(alarm), int(alarm.evaluation_periods)
    moments = [t[0] if isinstance(t, tuple) else t for t in times]
    ends = {math.floor(t / period) * period + period * (1 + k) for t in moments for k in range(periods + 1)}
    later = [end for end in ends if end > after]
    return min(later) if later else None


def _valued_when_missing(alarm: Any) -> bool:
    """Periods without data still decide: a FILL term, or TreatMissingData breaching/notBreaching."""
    terms = _terms(alarm) if alarm.metric_data_queries else None
    return bool(terms and any(fill is not None for _, fill in terms)) or (
        alarm.treat_missing_data in ("breaching", "notBreaching"))


def evaluations(cloudwatch: Any, now: float, lag_s: float,
                run_action: Callable[[str, Any, float, float], None]) -> Iterator[tuple[float, Callable[[float], None]]]:
    """(when, act) for the next evaluation of each watched alarm; `act(when)` evaluates it, changes its state and
    runs its scaling actions through `run_action(arn, alarm, value, when)`."""
    for alarm in watched(cloudwatch):
        value_of, times = series(cloudwatch, alarm)
        period = _period(alarm)
        cursor = getattr(alarm, _CURSOR, None)
        if cursor is None:  # first seen: it looks back one window from its creation, as a new CloudWatch alarm does
            since = getattr(alarm, _CREATED, None)
            cursor = math.floor((now if since is None else since) / period) * period - period * int(
                alarm.evaluation_periods)
            warm = getattr(alarm, _WARM_UNTIL, None)
            if warm is not None:  # no evaluation before the warm-up ends
                cursor = max(cursor, math.ceil(warm / period) * period - period)
            setattr(alarm, _CURSOR, cursor)
            if alarm.state_reason.startswith("Unchecked"):  # a new alarm has no data yet (moto starts it at OK)
                alarm.state_value = "INSUFFICIENT_DATA"
        end = _next_end(alarm, cursor, times)
        following = math.floor(cursor / period) * period + period
        if _valued_when_missing(alarm) and (end is None or following < end) \
                and evaluate(alarm, following, value_of)[0] not in (None, alarm.state_value):
            end = following  # nothing new in the window, yet it decides otherwise than the state says
        if end is None:
            continue
        yield end + lag_s, _evaluator(alarm, end, value_of, run_action)


def _evaluator(alarm: Any, end: float, samples: Series,
               run_action: Callable[[str, Any, float, float], None]) -> Callable[[float], None]:
    def act(when: float) -> None:
        setattr(alarm, _CURSOR, end)
        state, value = evaluate(alarm, end, samples)
        if state is not None and state != alarm.state_value:
            reason = (f"Threshold Crossed: datapoint [{value}] was {alarm.comparison_operator} the threshold "
                      f"({alarm.threshold}) (emulated)" if state == "ALARM" else f"{state} (emulated)")
            set_state(alarm, state, reason, end)
        if state == "ALARM" and value is not None and alarm.actions_enabled:
            for arn in alarm.alarm_actions or []:
                run_action(arn, alarm, value, when)
    return act
