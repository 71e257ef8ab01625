"""Acceptance source for SageMaker endpoints: vLLM's `SpecDecoding metrics` lines in CloudWatch Logs.

vLLM logs them every ~10 s while busy and CloudWatch lags behind, so after a run `wait_for_acceptance`
polls until a line written after the run's end arrives or its wait is over. Clock and sleep are
injected, so tests never wait.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from datetime import datetime, timezone

from ..errors import UsageError
from ..log_groups import endpoint_log_group
from .acceptance import Acceptance, LogInterval, aggregate_intervals, parse_log_line

Window = tuple[datetime, datetime]


def read_intervals(logs_client, endpoint_name: str, windows: Sequence[Window], *,
                   group: str | None = None) -> list[LogInterval]:
    """Every `SpecDecoding metrics` line of the endpoint's log group (`group`: another one, an inference
    component's own) inside any of `windows`."""
    from ..aws import translate_error

    group = group or endpoint_log_group(endpoint_name)
    paginator = logs_client.get_paginator("filter_log_events")
    intervals: list[LogInterval] = []
    try:
        for start, end in windows:
            for page in paginator.paginate(logGroupName=group, startTime=_ms(start), endTime=_ms(end),
                                           filterPattern='"SpecDecoding metrics"'):
                for event in page.get("events", []):
                    parsed = parse_log_line(event.get("message", ""), event.get("timestamp"))
                    if parsed is not None:
                        intervals.append(parsed)
    except Exception as exc:  # botocore's errors, through the one AWS classifier
        from ..aws import error_code

        if error_code(exc) == "ResourceNotFoundException":
            raise UsageError(f"log group {group} not found",
                             "check the endpoint name and region; the endpoint writes it once its container "
                             "starts") from None
        translated = translate_error(exc)
        if translated is None:
            raise
        raise translated from None
    intervals.sort(key=lambda iv: iv.timestamp_ms or 0)
    return intervals


def read_cloudwatch(logs_client, endpoint_name: str, start: datetime, end: datetime, *,
                    group: str | None = None) -> Acceptance:
    """Every `SpecDecoding metrics` line of the endpoint's log group (or `group`) in [start, end], aggregated."""
    return acceptance_of(read_intervals(logs_client, endpoint_name, [(start, end)], group=group), endpoint_name,
                         start, end, group=group)


def acceptance_of(intervals: list[LogInterval], endpoint_name: str, start: datetime, end: datetime, *,
                  group: str | None = None) -> Acceptance:
    acc = aggregate_intervals(intervals, source=f"cloudwatch:{group or endpoint_log_group(endpoint_name)}")
    acc.window_start, acc.window_end = start, end
    if not intervals:
        acc.note = (
            "no 'SpecDecoding metrics' lines in the window: speculative decoding may be off, the "
            "server may log stats only while busy (every ~10 s), or logs may lag a minute behind"
        )
    return acc


def wait_for_acceptance(logs_client, endpoint_name: str, windows: Sequence[Window], run_end: datetime, *,
                        wait: float, poll: float = 5.0, clock: Callable[[], float] = time.monotonic,
                        sleep: Callable[[float], None] = time.sleep, group: str | None = None) -> Acceptance:
    """Acceptance over the measured `windows` (warm-up excluded), polling until a stats line written after
    `run_end` has arrived (so the run's last interval is in) or `wait` seconds have passed."""
    last_end = max(end for _start, end in windows)
    deadline = clock() + wait
    while True:
        intervals = read_intervals(logs_client, endpoint_name, windows, group=group)
        latest = (intervals[-1].timestamp_ms or 0) if intervals else 0
        if latest >= _ms(run_end) or clock() >= deadline:
            return acceptance_of(intervals, endpoint_name, windows[0][0], last_end, group=group)
        sleep(poll)


def _ms(moment: datetime) -> int:
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=timezone.utc)
    return int(moment.timestamp() * 1000)
