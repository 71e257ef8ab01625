"""Time windows for log queries: --since 15m, or --start/--end as ISO 8601."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

from ..errors import UsageError


def parse_span(text: str) -> timedelta:
    from ..inputs import parse_duration  # the one duration grammar (--ttl, --since, ...)

    return parse_duration(text, flag="--since")


def parse_moment(text: str, flag: str) -> datetime:
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise UsageError(
            f"{flag} {text!r} is not an ISO 8601 time", "use a form such as 2026-11-22T10:30:00Z"
        ) from None
    return moment if moment.tzinfo else moment.replace(tzinfo=timezone.utc)


def resolve_window(
    start: str | None, end: str | None, since: str | None, now: datetime | None = None
) -> tuple[datetime, datetime]:
    """[start, end] in UTC. --since counts back from --end (default now); default window: the last 15 minutes."""
    now = now or datetime.now(timezone.utc)
    if start and since:
        raise UsageError("--start and --since both given", "use one of them")
    stop = parse_moment(end, "--end") if end else now
    begin = parse_moment(start, "--start") if start else stop - parse_span(since or "15m")
    if begin >= stop:
        raise UsageError("the time window is empty (start is not before end)", "check --start/--end/--since")
    return begin, stop
