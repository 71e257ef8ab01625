"""CloudWatch alarms for the emulator: moto (5.2) stores alarms and metric data, but never evaluates an alarm,
never changes its state and never runs its actions. Scale to zero needs all three: an invocation that finds no
copy counts in `NoCapacityInvocationFailures`, the alarm on that metric goes to ALARM, and its action (a step
scaling policy's ARN) brings a copy back.

Evaluated here, on the emulator's clock (`emulator.clock`), for alarms in the `AWS/SageMaker` namespace on one
metric (not metric math), whose data is in moto's CloudWatch backend (the emulator publishes SageMaker's own metrics
there; `PutMetricData` adds yours):
- datapoints per period, aligned to the period (`Sum`, `Average`, `Minimum`, `Maximum`, `SampleCount`; an
  `ExtendedStatistic` is never breaching);
- at the end of each period (plus `lag_s`, the emulator's `alarm_lag_s`) the last `EvaluationPeriods` datapoints
  decide: ALARM when at least `DatapointsToAlarm` (default: all of them) breach, OK when enough do not,
  `TreatMissingData` deciding what a period without data counts as (`missing`, the default: nothing, and
  INSUFFICIENT_DATA when no period has data; `ignore`: the state stays; `breaching`; `notBreaching`);
- a new alarm is INSUFFICIENT_DATA until its first evaluation (moto starts every alarm at OK); state changes go
  through moto's own path (DescribeAlarms and the alarm history show them);
- while an alarm is in ALARM, each evaluation with data runs its actions that are Application Auto Scaling policy
  ARNs (`run_action`), as CloudWatch re-invokes a scaling policy while the alarm stays in ALARM.
Alarms that Application Auto Scaling creates for target tracking (`TargetTracking-...`) are left alone: the
emulator models target tracking directly (`autoscaling_emulation`).

Evaluations happen only at period ends whose window holds data, or the first one after data left the window, so
advancing the clock by a day costs a handful of evaluations, not thousands.
"""

from __future__ import annotations

import json
import math
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


def epoch(stamp: datetime) -> float:
    return (stamp if stamp.tzinfo else stamp.replace(tzinfo=timezone.utc)).timestamp()


def publish(cloudwatch: Any, metric: str, dimensions: dict[str, str], at: float, value: float = 1.0) -> None:
    """One datapoint of an AWS/SageMaker metric into moto's CloudWatch, at the emulator's time `at`."""
    cloudwatch.put_metric_data(NAMESPACE, [{
        "MetricName": metric, "Value": value, "Unit": "Count",
        "Timestamp": datetime.fromtimestamp(at, tz=timezone.utc).replace(tzinfo=None),  # naive UTC, as moto keeps them
        "Dimensions": [{"Name": k, "Value": v} for k, v in dimensions.items()]}])


def watched(cloudwatch: Any) -> list[Any]:
    """The alarms this module evaluates (see the module docstring)."""
    return [a for a in list(cloudwatch.alarms.values())
            if a.namespace == NAMESPACE and a.metric_name and not a.metric_data_queries
            and not a.name.startswith("TargetTracking-")]


def _samples(cloudwatch: Any, alarm: Any) -> list[tuple[float, float]]:
    wanted = {(d.name, d.value) for d in alarm.dimensions}
    found = []
    for datum in list(cloudwatch.metric_data):
        if datum.namespace != alarm.namespace or datum.name != alarm.metric_name:
            continue
        if {(d.name, d.value) for d in datum.dimensions} != wanted:
            continue
        value = getattr(datum, "value", None)
        if value is None:  # an aggregated datum (StatisticValues): its sum stands for it
            value = getattr(datum, "sum_stat", 0.0)
        found.append((epoch(datum.timestamp), float(value)))
    return sorted(found)


def _statistic(alarm: Any, values: list[float]) -> float | None:
    if not values:
        return None
    return {"Sum": sum(values), "Average": sum(values) / len(values), "Minimum": min(values),
            "Maximum": max(values), "SampleCount": float(len(values))}.get(alarm.statistic)


def evaluate(alarm: Any, end: float, samples: list[tuple[float, float]]) -> tuple[str | None, float | None]:
    """(the state the last EvaluationPeriods periods ending at `end` give, or None to keep the state;
    the newest breaching datapoint)."""
    period, periods = int(alarm.period), int(alarm.evaluation_periods)
    needed = int(alarm.datapoints_to_alarm or periods)
    breaches = fine = 0
    newest: float | None = None
    missing = alarm.treat_missing_data or "missing"
    compare = OPERATORS.get(alarm.comparison_operator)
    for k in range(periods):
        start = end - (k + 1) * period
        value = _statistic(alarm, [v for t, v in samples if start <= t < start + period])
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


def _next_end(alarm: Any, after: float, samples: list[tuple[float, float]]) -> float | None:
    """The first period end after `after` whose window holds a sample, or that a sample has just left."""
    period, periods = int(alarm.period), int(alarm.evaluation_periods)
    ends = {math.floor(t / period) * period + period * (1 + k) for t, _ in samples for k in range(periods + 1)}
    later = [end for end in ends if end > after]
    return min(later) if later else None


def evaluations(cloudwatch: Any, now: float, lag_s: float,
                run_action: Callable[[str, Any, float, float], None]) -> Iterator[tuple[float, Callable[[float], None]]]:
    """(when, act) for the next evaluation of each watched alarm; `act(when)` evaluates it, changes its state and
    runs its scaling actions through `run_action(arn, alarm, value, when)`."""
    for alarm in watched(cloudwatch):
        samples = _samples(cloudwatch, alarm)
        cursor = getattr(alarm, _CURSOR, None)
        if cursor is None:  # first seen: it looks back one window, as a new CloudWatch alarm does
            cursor = math.floor(now / int(alarm.period)) * int(alarm.period) - int(alarm.period) * int(
                alarm.evaluation_periods)
            setattr(alarm, _CURSOR, cursor)
            if alarm.state_reason.startswith("Unchecked"):  # a new alarm has no data yet (moto starts it at OK)
                alarm.state_value = "INSUFFICIENT_DATA"
        end = _next_end(alarm, cursor, samples)
        if end is None:
            continue
        yield end + lag_s, _evaluator(alarm, end, samples, run_action)


def _evaluator(alarm: Any, end: float, samples: list[tuple[float, float]],
               run_action: Callable[[str, Any, float, float], None]) -> Callable[[float], None]:
    def act(when: float) -> None:
        setattr(alarm, _CURSOR, end)
        state, value = evaluate(alarm, end, samples)
        if state is not None and state != alarm.state_value:
            reason = (f"Threshold Crossed: datapoint [{value}] was {alarm.comparison_operator} the threshold "
                      f"({alarm.threshold}) (emulated)" if state == "ALARM" else f"{state} (emulated)")
            alarm.update_state(reason, json.dumps({"version": "1.0", "evaluatedAt": end}), state)
        if state == "ALARM" and value is not None and alarm.actions_enabled:
            for arn in alarm.alarm_actions or []:
                run_action(arn, alarm, value, when)
    return act
