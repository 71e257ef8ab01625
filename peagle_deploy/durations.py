"""The one duration grammar: `--ttl`, `--since` and every other span a user types.

A duration is one or more `<number><unit>` parts, largest unit first, each unit at most once:
`90s`, `15m`, `2h`, `1h30m`, `1d12h`, `1.5h`, `2w`. Units: w, d, h, m, s (long forms such as
`hours` and `min` are accepted too). A bare number is refused: `90` could mean seconds or minutes.
"""

from __future__ import annotations

import re
from datetime import timedelta

from .errors import UsageError

_UNIT_SECONDS = {"w": 604800, "d": 86400, "h": 3600, "m": 60, "s": 1}
_UNIT_NAMES = {
    "w": ("w", "wk", "week", "weeks"),
    "d": ("d", "day", "days"),
    "h": ("h", "hr", "hrs", "hour", "hours"),
    "m": ("m", "min", "mins", "minute", "minutes"),
    "s": ("s", "sec", "secs", "second", "seconds"),
}
_ALIASES = {name: unit for unit, names in _UNIT_NAMES.items() for name in names}
_PART = re.compile(r"(\d+(?:\.\d+)?)\s*([a-z]+)")
EXAMPLES = "90s, 15m, 2h, 1h30m or 2d"


def parse_duration(text: str, *, flag: str = "duration", minimum: timedelta | None = timedelta(seconds=1),
                   maximum: timedelta | None = None) -> timedelta:
    """`text` as a timedelta, or a one-line UsageError naming `flag` and the accepted forms."""
    raw = (text or "").strip().lower()
    if not raw:
        raise UsageError(f"{flag} is empty", f"pass a duration such as {EXAMPLES}")
    if re.fullmatch(r"\d+(?:\.\d+)?", raw):
        raise UsageError(f"{flag} {text!r} has no unit", f"add one: {raw}s, {raw}m or {raw}h")
    total, position, seen = 0.0, 0, []
    for match in _PART.finditer(raw):
        if raw[position:match.start()].strip():
            break
        unit = _ALIASES.get(match.group(2))
        if unit is None:
            raise UsageError(f"{flag} {text!r}: unknown unit {match.group(2)!r}", f"use w, d, h, m or s, e.g. {EXAMPLES}")
        if seen and list(_UNIT_SECONDS).index(unit) <= list(_UNIT_SECONDS).index(seen[-1]):
            raise UsageError(f"{flag} {text!r} repeats or misorders its units", "write the largest unit first, e.g. 1h30m")
        seen.append(unit)
        total += float(match.group(1)) * _UNIT_SECONDS[unit]
        position = match.end()
    if not seen or raw[position:].strip():
        raise UsageError(f"{flag} {text!r} is not a duration", f"pass e.g. {EXAMPLES}")
    span = timedelta(seconds=total)
    if minimum is not None and span < minimum:
        raise UsageError(f"{flag} {text!r} is shorter than {format_duration(minimum.total_seconds())}",
                         f"pass e.g. {EXAMPLES}")
    if maximum is not None and span > maximum:
        raise UsageError(f"{flag} {text!r} is longer than {format_duration(maximum.total_seconds())}",
                         f"pass at most {format_duration(maximum.total_seconds())}")
    return span


def format_duration(seconds: float) -> str:
    """A span for people: 45s, 12m05s, 3h07m, 2d04h (never negative: callers say 'expired' or 'ago')."""
    seconds = max(0, int(seconds))
    days, rest = divmod(seconds, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    if days:
        return f"{days}d{hours:02d}h" if hours else f"{days}d"
    if hours:
        return f"{hours}h{minutes:02d}m"
    if minutes:
        return f"{minutes}m{secs:02d}s"
    return f"{secs}s"
