"""An endpoint's container output: CloudWatch Logs group /aws/sagemaker/Endpoints/NAME, every stream
(one per instance) merged in time order, and the line that says why the container failed. An endpoint that hosts
an inference component writes nothing there: the component's copies write to the component's own group
/aws/sagemaker/InferenceComponents/COMPONENT (one stream per copy; `components.log_group`, where deploy reads vLLM's
start-up lines too), passed as `group`.

FilterLogEvents already searches every stream of a group and interleaves their events by timestamp
(CloudWatch has done so since 2019; the emulator does the same), so one paginated query gives the merged
view. `--grep` becomes a quoted filter pattern: CloudWatch's exact, case-sensitive phrase match, done by
AWS so only matching events cross the network. `follow` asks again from the newest timestamp seen and
drops the events already printed (same eventId), sleeping `poll_s` between asks; each ask retries
transient failures (`wait.read_retrying`), and a missing group is said once, as bad input.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from typing import Any

from pydantic import BaseModel

from ..errors import UsageError
from ..vllm_failure import failure_index
from ..log_groups import endpoint_log_group
from .wait import read_retrying

POLL_S = 2.0  # --follow asks this often: CloudWatch itself lags a few seconds behind the container
WINDOW_LINES = 2000  # --follow judges the failure line over the last this many lines


class LogEvent(BaseModel):
    timestamp: int  # milliseconds since the epoch, as CloudWatch stores it
    stream: str
    message: str
    event_id: str | None = None
    failure: bool = False  # the container's failure line (vllm_failure.failure_index)

    @property
    def time(self) -> datetime:
        return datetime.fromtimestamp(self.timestamp / 1000, UTC)

    def as_json(self) -> dict[str, Any]:
        return {"time": self.time.isoformat(timespec="milliseconds").replace("+00:00", "Z"),
                "timestamp": self.timestamp, "stream": self.stream, "message": self.message,
                "failure": self.failure}


def grep_pattern(text: str | None) -> str | None:
    """--grep TEXT as CloudWatch's quoted-term filter pattern (exact, case-sensitive phrase)."""
    if text is None:
        return None
    if not text.strip():
        raise UsageError("--grep is empty", "pass the text to look for, e.g. --grep ERROR")
    if "\n" in text or "\r" in text:
        raise UsageError(f"--grep {text!r} has a line break, and a log line has none",
                         "pass text from one line, e.g. --grep 'Engine core'")
    if '"' in text:
        raise UsageError(f"--grep {text!r} contains a double quote, which CloudWatch filter patterns cannot match "
                         "inside a phrase", "leave the quote out, e.g. --grep 'Engine core'")
    return f'"{text}"'


def _missing_group(name: str, group: str | None = None) -> UsageError:
    return UsageError(f"no CloudWatch log group {group or endpoint_log_group(name)}",
                      f"the endpoint's container may not have started yet (SageMaker creates the group then), "
                      f"or the name or --region is wrong: check 'peagle status {name}'")


def read_events(logs: Any, name: str, *, start_ms: int, end_ms: int | None = None, pattern: str | None = None,
                sleep: Callable[[float], None] = time.sleep, group: str | None = None) -> list[LogEvent]:
    """Every event of the group (the endpoint's, or `group`) in [start_ms, end_ms], all streams, in time order."""
    from ..aws import error_code, translate_error

    kwargs: dict[str, Any] = {"logGroupName": group or endpoint_log_group(name), "startTime": start_ms}
    if end_ms is not None:
        kwargs["endTime"] = end_ms
    if pattern is not None:
        kwargs["filterPattern"] = pattern

    def ask() -> list[dict[str, Any]]:
        paginator = logs.get_paginator("filter_log_events")
        return [event for page in paginator.paginate(**kwargs) for event in page.get("events", [])]

    try:
        raw = read_retrying(ask, sleep=sleep)
    except Exception as exc:
        if error_code(exc) == "ResourceNotFoundException":
            raise _missing_group(name, group) from None
        raise (translate_error(exc) or exc) from None
    events = [LogEvent(timestamp=int(e.get("timestamp") or 0), stream=e.get("logStreamName", ""),
                       message=str(e.get("message", "")).rstrip("\r\n"), event_id=e.get("eventId")) for e in raw]
    events.sort(key=lambda e: e.timestamp)  # stable: AWS's order within one millisecond is kept
    return events


def mark_failure(events: list[LogEvent]) -> LogEvent | None:
    """Flag the container's failure line among `events` (None if none of them reads as one)."""
    index = failure_index([e.message for e in events])
    if index is None:
        return None
    events[index].failure = True
    return events[index]


def read_logs(logs: Any, name: str, *, start_ms: int, pattern: str | None = None,
              sleep: Callable[[float], None] = time.sleep, group: str | None = None) -> list[LogEvent]:
    events = read_events(logs, name, start_ms=start_ms, pattern=pattern, sleep=sleep, group=group)
    mark_failure(events)
    return events


def follow_logs(logs: Any, name: str, *, start_ms: int, pattern: str | None = None, poll_s: float = POLL_S,
                sleep: Callable[[float], None] = time.sleep, group: str | None = None) -> Iterator[list[LogEvent]]:
    """Batches of new events, oldest first, forever (the caller stops on Ctrl-C). The first batch is
    everything since `start_ms`; a failure line is flagged when it arrives in a batch."""
    seen: set[str] = set()
    window: deque[LogEvent] = deque(maxlen=WINDOW_LINES)
    since = start_ms
    first = True
    while True:
        if not first:
            sleep(poll_s)
        first = False
        batch = [e for e in read_events(logs, name, start_ms=since, pattern=pattern, sleep=sleep, group=group)
                 if (e.event_id or f"{e.stream}/{e.timestamp}/{e.message}") not in seen]
        if not batch:
            continue
        for event in batch:
            seen.add(event.event_id or f"{event.stream}/{event.timestamp}/{event.message}")
        window.extend(batch)
        events = list(window)
        index = failure_index([e.message for e in events])
        if index is not None and any(events[index] is e for e in batch):
            events[index].failure = True
        # ask again from the newest millisecond: later events of that same millisecond may still arrive
        newest = batch[-1].timestamp
        seen = {(e.event_id or f"{e.stream}/{e.timestamp}/{e.message}") for e in window if e.timestamp >= newest}
        since = newest
        yield batch
