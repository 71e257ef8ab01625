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
_EXAMPLES = ("90s", "15m", "2h", "1h30m", "2d")
EXAMPLES = "90s, 15m, 2h, 1h30m or 2d"
# Every duration flag's bounds, the same in every command (as numbers.BOUNDS for plain numbers). Anything longer
# than LONGEST is refused for any flag: a span beyond it overflows timedelta or reaches before 1970.
BOUNDS: dict[str, tuple[timedelta, timedelta]] = {
    "--ttl": (timedelta(seconds=1), timedelta(days=30)),
    "--bake": (timedelta(0), timedelta(hours=1)),  # SageMaker's WaitIntervalInSeconds: 0..3600
    "--since": (timedelta(seconds=1), timedelta(days=365)),
    "--window": (timedelta(0), timedelta(days=30)),
    "--idle": (timedelta(minutes=15), timedelta(minutes=15)),  # AWS's scale-in period only (scale_to_zero.parse_idle)
    "--wait-timeout": (timedelta(0), timedelta(hours=2)),  # 0s: one request, no waiting for a copy
}
LONGEST = timedelta(days=3650)
_FLAG_DEFAULT = object()


def _join_or(items: list[str]) -> str:
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + f" or {items[-1]}"


def parse_duration(text: str, *, flag: str = "duration", minimum: timedelta | None | object = _FLAG_DEFAULT,
                   maximum: timedelta | None | object = _FLAG_DEFAULT) -> timedelta:
    """`text` as a timedelta, or a one-line UsageError naming `flag` and the accepted forms. The bounds are the
    flag's (`BOUNDS`) unless given; every hint offers only values within them (tests follow the hints)."""
    low, high = BOUNDS.get(flag, (timedelta(seconds=1), None))
    minimum = low if minimum is _FLAG_DEFAULT else minimum
    maximum = high if maximum is _FLAG_DEFAULT else maximum
    ceiling = min(maximum, LONGEST) if maximum is not None else LONGEST

    def fits(seconds: float) -> bool:
        return (minimum is None or seconds >= minimum.total_seconds()) and seconds <= ceiling.total_seconds()

    examples = [e for e in _EXAMPLES if fits(_seconds(e))] or [format_duration(ceiling.total_seconds())]
    raw = (text or "").strip().lower()
    if not raw:
        raise UsageError(f"{flag} is empty", f"pass a duration such as {_join_or(examples)}")
    if re.fullmatch(r"\d+(?:\.\d+)?", raw):
        with_units = [f"{raw}{unit}" for unit in "smh" if fits(float(raw) * _UNIT_SECONDS[unit])]
        hint = (f"add one: {_join_or(with_units)}" if with_units
                else f"pass a duration from {_bound_text(minimum)} to {format_duration(ceiling.total_seconds())}, "
                     f"e.g. {_join_or(examples)}")
        raise UsageError(f"{flag} {text!r} has no unit", hint)
    total, position, seen = 0.0, 0, []
    for match in _PART.finditer(raw):
        if raw[position:match.start()].strip():
            break
        unit = _ALIASES.get(match.group(2))
        if unit is None:
            raise UsageError(f"{flag} {text!r}: unknown unit {match.group(2)!r}",
                             f"use w, d, h, m or s, e.g. {_join_or(examples)}")
        if seen and list(_UNIT_SECONDS).index(unit) <= list(_UNIT_SECONDS).index(seen[-1]):
            raise UsageError(f"{flag} {text!r} repeats or misorders its units", "write the largest unit first, e.g. 1h30m")
        seen.append(unit)
        total += float(match.group(1)) * _UNIT_SECONDS[unit]
        position = match.end()
    if not seen or raw[position:].strip():
        raise UsageError(f"{flag} {text!r} is not a duration", f"pass e.g. {_join_or(examples)}")
    if minimum is not None and total < minimum.total_seconds():
        raise UsageError(f"{flag} {text!r} is shorter than {_bound_text(minimum)}", f"pass e.g. {_join_or(examples)}")
    if total > ceiling.total_seconds():  # compared as seconds: timedelta(seconds=1e20) would overflow
        raise UsageError(f"{flag} {text!r} is longer than {format_duration(ceiling.total_seconds())}",
                         f"pass at most {format_duration(ceiling.total_seconds())}")
    return timedelta(seconds=total)


def _seconds(text: str) -> float:
    return sum(float(n) * _UNIT_SECONDS[_ALIASES[u]] for n, u in _PART.findall(text))


def _bound_text(minimum: timedelta | None) -> str:
    return "0s" if not minimum else format_duration(minimum.total_seconds())


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
