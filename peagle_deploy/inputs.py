"""The one reading of what a user types: numbers, durations, choices, lists and names, and the deploy values.

The rule (docs/configuration.md "How peagle reads what you type"): every value is taken in the one spelling that
peagle's help and docs show, and anything else is refused in one line that names that spelling (exit 2, before any
AWS call). peagle folds no case, strips no space and guesses no unit:

- numbers: ASCII digits 0-9 with a leading `-` where negative makes sense and a `.` where the option takes a
  fraction; no spaces, `+`, `_` or other scripts' digits; each option within one bound (`BOUNDS`), the same in
  every command. Typer's own int/float options are read through `strict_number` (cli/app.py puts it on every
  numeric option), so ` 3`, `+3`, `1_0` and `\u0663` never reach a command.
- durations: whole numbers with a lower-case unit w, d, h, m or s, largest first, no spaces (`90s`, `15m`, `1h30m`,
  `2d`); each flag within its bounds (`DURATION_BOUNDS`).
- choices (a mode, a hosting, a transport): exactly one of the listed values (`choose`; a table, so a new mode is
  one entry of `speculative.Mode`).
- lists: values separated by commas, with no spaces and no empty entries (`read_list`), each by the rule of its kind.
- names: SageMaker's own rule; an empty one is refused everywhere (`status ''` is not "every endpoint").

A refusal names the value as it would be accepted when there is one (`pass --ttl 4h` for `4H`), never a value the
next check refuses. The deploy values below (tags, environment, images, roles, networking) follow SageMaker's own
limits: names 63 chars matching ^[a-zA-Z0-9](-*[a-zA-Z0-9])*$, container environment values 1024 bytes and at most
100 variables, tags 128/256 chars and at most 50 per resource (peagle's own tags counted), container images from
Amazon ECR in the model's region, a role in the region's partition. SageMaker documents no upper bound for
InitialInstanceCount (the account quota decides), so peagle's own guard is MAX_INSTANCE_COUNT, and a plan above the
hourly price guard needs an explicit confirmation (docs/configuration.md).
"""

from __future__ import annotations

import math
import re
import unicodedata
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, TypeVar

from .errors import UsageError

T = TypeVar("T")


# numbers -------------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Bound:
    low: float
    high: float
    example: str  # a value inside the bound, offered in the hint (tests follow it)
    low_open: bool = False  # True: the value must be above `low`, not equal to it
    unit: str = ""
    why: str = ""  # said after the hint: why the bound is where it is

    def describe(self) -> str:
        low = f"more than {_g(self.low)}" if self.low_open else f"at least {_g(self.low)}"
        return f"{low} and at most {_g(self.high)}{(' ' + self.unit) if self.unit else ''}"

    def holds(self, value: float) -> bool:
        if not math.isfinite(value):
            return False
        above = value > self.low if self.low_open else value >= self.low
        return above and value <= self.high


def _g(value: float) -> str:
    return f"{value:,.0f}".replace(",", "") if float(value).is_integer() else f"{value:g}"


MAX_K = 32  # a drafter deeper than this exists nowhere; the model's own drafter depth narrows it further
MAX_CONCURRENCY = 4096
MAX_INSTANCES = 100  # MAX_INSTANCE_COUNT and autoscale.MAX_CAPACITY

# Every numeric option, once: `cli.common.run` checks each numeric option of the command being run against it before
# the command's body starts (tests/test_numbers.py: a numeric option without a bound fails), and the parsers of
# numbers inside other text (`--k 3,7`, `--concurrency 1,4`, `--autoscale 1:4`) check theirs with `check_number`.
BOUNDS: dict[str, Bound] = {
    # waiting and measuring
    "--timeout": Bound(1, 86400, "3600", unit="seconds"),
    "--interval": Bound(0, 86400, "10", low_open=True, unit="seconds"),
    "--duration": Bound(0.1, 86400, "60", unit="seconds"),
    "--logs-wait": Bound(0, 3600, "60", unit="seconds"),
    "--provision-estimate": Bound(0, 86400, "600", unit="seconds"),
    "--num-prompts": Bound(1, 1_000_000, "100"),
    "--warmup": Bound(0, 100_000, "4"),
    "--lines": Bound(1, 100_000, "50"),
    # requests
    "--max-tokens": Bound(1, 1_000_000, "256"),
    "--temperature": Bound(0, 2, "0"),
    "--top-p": Bound(0, 1, "0.95", low_open=True),
    "--port": Bound(1, 65535, "8080"),
    # speculation
    "--k": Bound(1, MAX_K, "3"),
    "--max-k": Bound(1, MAX_K, "8"),
    "--verify-cost": Bound(0, 10, "0.02", unit="target decoding steps"),
    "--draft-cost": Bound(0, 10, "0.06", unit="target decoding steps"),
    "--concurrency": Bound(1, MAX_CONCURRENCY, "8"),
    # output agreement (bench agree, sweep)
    "--samples": Bound(2, 10_000, "16", why="answers per prompt and target; the test needs at least two"),
    "--alpha": Bound(0.001, 0.5, "0.01"),
    "--noise-per-token": Bound(0, 1, "0.01"),
    "--agreement-prompts": Bound(0, 10_000, "16"),
    # fleets and money
    "--instance-count": Bound(1, MAX_INSTANCES, "1", why="peagle's limit; more needs a SageMaker quota increase and "
                                                        "several endpoints"),
    "--parallel": Bound(1, 32, "2"),
    "--target-concurrency": Bound(0, MAX_CONCURRENCY, "8", low_open=True, unit="concurrent requests per instance"),
    "--target-invocations": Bound(0, 1_000_000, "600", low_open=True, unit="invocations per instance per minute"),
    "--budget": Bound(0, 1_000_000, "40", low_open=True, unit="USD"),
    "--max-price-per-hour": Bound(0, 100_000, "50", low_open=True, unit="USD"),
    "--provision-timeout": Bound(300, 3600, "900", unit="seconds",
                                 why="SageMaker's VariantInstanceProvisionTimeoutInSeconds"),
}

_WHOLE = re.compile(r"-?[0-9]+\Z")
_DECIMAL = re.compile(r"-?(?:[0-9]+(?:\.[0-9]+)?|\.[0-9]+)(?:[eE][-+]?[0-9]+)?\Z")
_NOT_FINITE = re.compile(r"-?(?:inf|infinity|nan)\Z", re.IGNORECASE)  # read, then refused by the bound's check


def _ascii_digits(text: str) -> str:
    """`text` with every decimal digit of any script as its ASCII digit ('\u0663' -> '3')."""
    return "".join(str(unicodedata.decimal(ch)) if unicodedata.decimal(ch, None) is not None else ch for ch in text)


def _number_form(text: str, whole: bool) -> bool:
    return bool((_WHOLE if whole else _DECIMAL).match(text)) or (not whole and bool(_NOT_FINITE.match(text)))


def read_number(text: str, flag: str, *, whole: bool = True) -> int | float:
    """`text` as peagle writes numbers (see the module's rule), or one UsageError that names the number to pass. The
    flag's bound is checked by the caller (`check_number`), after the form."""
    if _number_form(text, whole):
        return int(text) if whole else float(text)
    example = BOUNDS[flag].example if flag in BOUNDS else ("3" if whole else "0.5")
    cleaned = _ascii_digits(text.strip()).replace("_", "").removeprefix("+")
    meant = _number_form(cleaned, whole) and (flag not in BOUNDS or BOUNDS[flag].holds(float(cleaned)))
    fix = f"pass {flag} {int(cleaned) if whole else cleaned}" if meant else f"pass e.g. {flag} {example}"
    if text != text.strip() and _number_form(text.strip(), whole):
        raise UsageError(f"{flag} {text!r} has spaces around the number", fix)
    if any(unicodedata.decimal(ch, None) is not None and not "0" <= ch <= "9" for ch in text):
        raise UsageError(f"{flag} {text!r} is written with digits other than 0-9", fix)
    if _number_form(cleaned, whole):
        raise UsageError(f"{flag} {text!r} is not written as peagle writes numbers", fix)
    if whole and _number_form(text, False) and float(text).is_integer() and \
            (flag not in BOUNDS or BOUNDS[flag].holds(float(text))):
        raise UsageError(f"{flag} {text!r} is not a whole number", f"pass {flag} {int(float(text))}")
    raise UsageError(f"{flag} {text!r} is not {'a whole number' if whole else 'a number'}",
                     f"pass e.g. {flag} {example}")


def check_number(flag: str, value: float | int, *, bound: Bound | None = None) -> float | int:
    """`value` if it is finite and within the flag's bound, else one UsageError naming the bound and a value in it."""
    rule = bound or BOUNDS[flag]
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise UsageError(f"{flag} must be a number, got {value!r}", f"pass e.g. {flag} {rule.example}")
    if not rule.holds(float(value)):
        raise UsageError(f"{flag} must be {rule.describe()}, got {_shown(value)}",
                         f"pass e.g. {flag} {rule.example}" + (f" ({rule.why})" if rule.why else ""))
    return value


def _shown(value: float | int) -> str:
    if isinstance(value, int):
        return str(value)
    return f"{value:g}"


def check_params(params: dict[str, object], options: dict[str, str]) -> None:
    """Check every numeric value in `params` (a command's parsed options by name); `options` maps a parameter
    name to its flag (`max_price_per_hour` -> `--max-price-per-hour`). Lists (repeatable options) item by item."""
    for name, value in params.items():
        flag = options.get(name)
        if flag is None:
            continue
        for item in value if isinstance(value, (list, tuple)) else [value]:
            if not isinstance(item, (int, float)) or isinstance(item, bool):
                continue
            if flag in BOUNDS:
                check_number(flag, item)
            elif not math.isfinite(item):  # an option without a bound yet (tests/test_numbers.py forbids that)
                raise UsageError(f"{flag} must be a finite number, got {item:g}", f"see the {flag} help")


def strict_number(value: Any, flag: str, whole: bool) -> Any:
    """What a Typer int/float option is given, read by the rule before Typer converts it (cli/app.py): a string
    in peagle's form is passed on, anything else refused."""
    if isinstance(value, str):
        read_number(value, flag, whole=whole)
    elif isinstance(value, (list, tuple)):
        for item in value:
            strict_number(item, flag, whole)
    return value


# durations -----------------------------------------------------------------------------------------------------

_UNIT_SECONDS = {"w": 604800, "d": 86400, "h": 3600, "m": 60, "s": 1}
_DURATION = re.compile(r"(?:[0-9]+[wdhms])+\Z")
_PART = re.compile(r"([0-9]+)([wdhms])")
# what people write instead, understood only to name the spelling to pass: 1.5h, 4 H, 90 minutes, 1hour
_LOOSE_PART = re.compile(r"(\d+(?:\.\d+)?)\s*([^\W\d_]+)")
_UNIT_WORDS = {
    "w": ("w", "wk", "wks", "week", "weeks"),
    "d": ("d", "day", "days"),
    "h": ("h", "hr", "hrs", "hour", "hours"),
    "m": ("m", "min", "mins", "minute", "minutes"),
    "s": ("s", "sec", "secs", "second", "seconds"),
}
_UNIT_ALIASES = {word: unit for unit, words in _UNIT_WORDS.items() for word in words}
_EXAMPLES = ("90s", "15m", "2h", "1h30m", "2d")
EXAMPLES = "90s, 15m, 2h, 1h30m or 2d"
TTL_MIN = timedelta(minutes=15)  # an endpoint takes about 10 minutes to come InService: a shorter TTL expires first
TTL_MAX = timedelta(days=30)
# Every duration flag's bounds, the same in every command (as BOUNDS for plain numbers). Anything longer than
# LONGEST is refused for any flag: a span beyond it overflows timedelta or reaches before 1970.
DURATION_BOUNDS: dict[str, tuple[timedelta, timedelta]] = {
    "--ttl": (TTL_MIN, TTL_MAX),
    "--bake": (timedelta(0), timedelta(hours=1)),  # SageMaker's WaitIntervalInSeconds: 0..3600
    "--since": (timedelta(seconds=1), timedelta(days=365)),
    "--window": (timedelta(0), timedelta(days=30)),
    "--idle": (timedelta(minutes=15), timedelta(minutes=15)),  # AWS's scale-in period only (scale_to_zero.parse_idle)
    "--wait-timeout": (timedelta(0), timedelta(hours=2)),  # 0s: one request, no waiting for a copy
}
_WHY_MINIMUM = {"--ttl": "an endpoint takes about 10 minutes to come InService"}
LONGEST = timedelta(days=3650)
_FLAG_DEFAULT = object()


def _join_or(items: list[str]) -> str:
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + f" or {items[-1]}"


def canonical_duration(seconds: float) -> str:
    """A whole number of seconds in peagle's spelling, largest unit first: 5400 -> 1h30m, 90 -> 1m30s, 0 -> 0s."""
    rest, parts = int(seconds), []
    for unit in "dhms":
        count, rest = divmod(rest, _UNIT_SECONDS[unit])
        if count:
            parts.append(f"{count}{unit}")
    return "".join(parts) or "0s"


def _loose_seconds(text: str) -> float | None:
    """What a loosely written duration means (`1.5h`, `4 H`, `90 minutes`, `\u0664h`), to name its spelling; None
    when it is not one."""
    raw, total, position, seen = _ascii_digits(text).strip().lower(), 0.0, 0, []
    for match in _LOOSE_PART.finditer(raw):
        unit = _UNIT_ALIASES.get(match.group(2))
        if raw[position:match.start()].strip() or unit is None or unit in seen:
            return None
        seen.append(unit)
        total += float(match.group(1)) * _UNIT_SECONDS[unit]
        position = match.end()
    return total if seen and not raw[position:].strip() else None


def parse_duration(text: str, *, flag: str = "duration", minimum: timedelta | None | object = _FLAG_DEFAULT,
                   maximum: timedelta | None | object = _FLAG_DEFAULT) -> timedelta:
    """`text` as a timedelta, or a one-line UsageError naming `flag` and the spelling to pass. The bounds are the
    flag's (`DURATION_BOUNDS`) unless given; every hint offers only values within them (tests follow the hints)."""
    low, high = DURATION_BOUNDS.get(flag, (timedelta(seconds=1), None))
    minimum = low if minimum is _FLAG_DEFAULT else minimum
    maximum = high if maximum is _FLAG_DEFAULT else maximum
    ceiling = min(maximum, LONGEST) if maximum is not None else LONGEST

    def fits(seconds: float) -> bool:
        return (minimum is None or seconds >= minimum.total_seconds()) and seconds <= ceiling.total_seconds()

    examples = [e for e in _EXAMPLES if fits(_seconds(e))] or [canonical_duration(ceiling.total_seconds())]
    text = text or ""
    if not text.strip():
        raise UsageError(f"{flag} is empty", f"pass a duration such as {_join_or(examples)}")
    if not _DURATION.match(text):
        _refuse_loose(text, flag, fits, minimum, ceiling, examples)
    total, seen = 0.0, []
    for number, unit in _PART.findall(text):
        if seen and list(_UNIT_SECONDS).index(unit) <= list(_UNIT_SECONDS).index(seen[-1]):
            raise UsageError(f"{flag} {text!r} repeats or misorders its units",
                             "write the largest unit first, e.g. 1h30m")
        seen.append(unit)
        total += int(number) * _UNIT_SECONDS[unit]
    if minimum is not None and total < minimum.total_seconds():
        why = f" ({_WHY_MINIMUM[flag]})" if flag in _WHY_MINIMUM else ""
        raise UsageError(f"{flag} {text!r} is shorter than {_bound_text(minimum)}{why}",
                         f"pass e.g. {_join_or(examples)}")
    if total > ceiling.total_seconds():  # compared as seconds: timedelta(seconds=1e20) would overflow
        raise UsageError(f"{flag} {text!r} is longer than {canonical_duration(ceiling.total_seconds())}",
                         f"pass at most {canonical_duration(ceiling.total_seconds())}")
    return timedelta(seconds=total)


def _refuse_loose(text: str, flag: str, fits: Any, minimum: timedelta | None, ceiling: timedelta,
                  examples: list[str]) -> None:
    """A duration not in peagle's spelling: the refusal names the spelling when the text means one within the
    flag's bounds, else what a duration looks like."""
    plain = _ascii_digits(text.strip())
    if re.fullmatch(r"\d+(?:\.\d+)?", plain):
        with_units = [f"{plain}{unit}" for unit in "smh" if fits(float(plain) * _UNIT_SECONDS[unit])
                      and float(plain).is_integer()]
        hint = (f"add one: {_join_or(with_units)}" if with_units and plain == text
                else f"pass a duration from {_bound_text(minimum)} to {canonical_duration(ceiling.total_seconds())}, "
                     f"e.g. {_join_or(examples)}")
        raise UsageError(f"{flag} {text!r} has no unit", hint)
    seconds = _loose_seconds(text)
    if seconds is None:
        word = next((m.group(2) for m in _LOOSE_PART.finditer(text.strip().lower())
                     if m.group(2) not in _UNIT_ALIASES), None)
        if word is not None and re.fullmatch(r"(?:\d+[a-z]+)+", text):
            raise UsageError(f"{flag} {text!r}: unknown unit {word!r}", f"use w, d, h, m or s, e.g. {_join_or(examples)}")
        raise UsageError(f"{flag} {text!r} is not a duration", f"pass e.g. {_join_or(examples)}")
    whole = float(seconds).is_integer() and fits(seconds)
    fix = f"pass {flag} {canonical_duration(seconds)}" if whole else f"pass e.g. {_join_or(examples)}"
    if any(ch.isspace() for ch in text):
        raise UsageError(f"{flag} {text!r} has spaces", fix)
    if any(unicodedata.decimal(ch, None) is not None and not "0" <= ch <= "9" for ch in text):
        raise UsageError(f"{flag} {text!r} is written with digits other than 0-9", fix)
    if "." in text:
        raise UsageError(f"{flag} {text!r} is not in whole units", fix)
    if text != text.lower():
        raise UsageError(f"{flag} {text!r} has upper-case units", fix)
    raise UsageError(f"{flag} {text!r} spells out its units", fix)


def _seconds(text: str) -> float:
    return sum(float(n) * _UNIT_SECONDS[u] for n, u in _PART.findall(text))


def _bound_text(minimum: timedelta | None) -> str:
    return "0s" if not minimum else canonical_duration(minimum.total_seconds())


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


# choices and lists ---------------------------------------------------------------------------------------------

def exact(value: str, flag: str) -> str:
    """`value` when nothing surrounds it; spaces (or tabs, newlines) around a name, an ARN or an id are refused,
    naming the value without them, never stripped silently."""
    if value != value.strip() and value.strip():
        raise UsageError(f"{flag} {value!r} has spaces around it", f"pass {flag} {value.strip()}")
    return value


def _folded(text: str) -> str:
    return "".join(ch for ch in text.lower() if ch not in " _-")


def _meant(value: str, choices: Mapping[str, Any], spellings: Mapping[str, str]) -> str | None:
    """The listed value `value` was meant to be: the same but for case, spaces and hyphens, or another word for it."""
    folded = _folded(value or "")
    return next((key for key in choices if _folded(key) == folded), None) or spellings.get(folded)


def choose(value: str, flag: str, choices: Mapping[str, T], *, what: str, spellings: Mapping[str, str] = {}) -> T:
    """`choices[value]` for a value typed exactly as listed; else one UsageError naming the value meant (`_meant`)
    or the list. `what`: 'a mode'. `choices` is a table (a new mode is one entry); `spellings`: folded other words
    for a listed value ('peagle' -> 'p-eagle'), used only to name it in the refusal."""
    if value in choices:
        return choices[value]
    listed = _join_or(list(choices))
    if not (value or "").strip():
        raise UsageError(f"{flag} is empty", f"pass {flag} {listed}")
    meant = _meant(value, choices, spellings)
    raise UsageError(f"{flag} {value!r} is not {what}", f"pass {flag} {meant if meant is not None else listed}")


def choose_many(text: str, flag: str, choices: Mapping[str, T], *, what: str, spellings: Mapping[str, str] = {},
                example: str) -> list[T]:
    """A list of choices (`--modes off,eagle3`), each exactly as listed; one line for the first that is not, naming
    the whole list as it would be accepted when every entry means a listed value."""
    items = read_list(text, flag, example)
    bad = next((item for item in items if item not in choices), None)
    if bad is None:
        return [choices[item] for item in items]
    meant = [item if item in choices else _meant(item, choices, spellings) for item in items]
    fix = (f"pass {flag} {','.join(meant)}" if None not in meant  # type: ignore[arg-type]
           else f"pass e.g. {flag} {example}")
    raise UsageError(f"{flag} {text!r}: {bad!r} is not {what}", fix)


def read_list(text: str, flag: str, example: str) -> list[str]:
    """`a,b,c`: entries separated by commas, none empty, no spaces around them."""
    if not (text or "").strip():
        raise UsageError(f"{flag} is empty", f"pass e.g. {flag} {example}")
    items = text.split(",")
    stripped = [item.strip() for item in items]
    if any(item != bare for item, bare in zip(items, stripped)):
        fixed = ",".join(item for item in stripped if item)
        raise UsageError(f"{flag} {text!r} has spaces around its " + ("commas" if len(items) > 1 else "value"),
                         f"pass {flag} {fixed}" if fixed else f"pass e.g. {flag} {example}")
    if any(not item for item in items):
        fixed = ",".join(item for item in items if item)
        raise UsageError(f"{flag} {text!r} has an empty entry", f"pass {flag} {fixed}" if fixed else
                         f"pass e.g. {flag} {example}")
    return items


def read_numbers(text: str, flag: str, example: str, *, whole: bool = True) -> list:
    """A list of numbers (`--concurrency 1,4,8`), each by the rule and within the flag's bound (`BOUNDS`)."""
    items = read_list(text, flag, example)
    if not all(_number_form(item, whole) for item in items):
        cleaned = [_ascii_digits(item.strip()).replace("_", "").removeprefix("+") for item in items]
        bad = next(item for item in items if not _number_form(item, whole))
        if all(_number_form(c, whole) for c in cleaned):
            raise UsageError(f"{flag} {text!r}: {bad!r} is not written as peagle writes numbers",
                             f"pass {flag} {','.join(str(int(c)) if whole else c for c in cleaned)}")
        raise UsageError(f"{flag} {text!r}: {bad!r} is not {'a whole number' if whole else 'a number'}",
                         f"pass e.g. {flag} {example}")
    values = [int(item) if whole else float(item) for item in items]
    rule = BOUNDS.get(flag)
    outside = next((v for v in values if rule is not None and not rule.holds(float(v))), None)
    if outside is not None:
        raise UsageError(f"{flag} {text!r}: each must be {rule.describe()}, got {_shown(outside)}",  # type: ignore[union-attr]
                         f"pass e.g. {flag} {example}")
    return values


# names and deploy values ---------------------------------------------------------------------------------------

MAX_POOLS = 5  # SageMaker's InstancePoolList: 1..5 (pools.py plans them)
POOL_SEPARATOR = ","

NAME_RE = re.compile(r"^[a-zA-Z0-9](-*[a-zA-Z0-9])*\Z")
NAME_MAX = 63
ROLE_ARN_RE = re.compile(r"^arn:aws[a-z-]*:iam::\d{12}:role/[\w+=,.@/-]{1,512}\Z")
ENV_KEY_RE = re.compile(r"^[a-zA-Z_][a-zA-Z0-9_]{0,1023}\Z")
ENV_VALUE_MAX_BYTES = 1024
ENV_MAX_VARS = 100
TAG_KEY_MAX, TAG_VALUE_MAX, TAGS_MAX = 128, 256, 50
TAG_PUNCTUATION = "_.:/=+-@"  # with letters, digits and separators: AWS's ^([\p{L}\p{Z}\p{N}_.:/=+\-@]*)$
RESERVED_TAG_PREFIXES = ("aws:", "peagle:", "sagemaker-sdk:")  # AWS's, peagle's, JumpStart attribution
# <account>.dkr.ecr[-fips].<region>.<AWS domain>/<repository>[:tag | @sha256:digest]: CreateModel takes
# images from Amazon ECR only (peagle sends no ImageConfig for other registries), in the model's region.
ECR_IMAGE_RE = re.compile(
    r"^(?P<account>\d{12})\.dkr\.ecr(?:-fips)?\.(?P<region>[a-z]{2}(?:-[a-z]+)+-\d)\."
    r"(?:amazonaws\.com(?:\.cn)?|[a-z0-9.-]+)/(?P<repo>[a-z0-9][a-z0-9._/-]*)"
    r"(?::(?P<tag>[\w][\w.-]{0,127})|@sha256:[0-9a-f]{64})?\Z")
IMAGE_MAX = 255
MAX_INSTANCE_COUNT = MAX_INSTANCES  # peagle's guard: SageMaker's API has no maximum; the account quota decides
PRICE_GUARD_USD_PER_HOUR = 100.0  # a real deploy above this needs --max-price-per-hour (or a prompt)


def validate_name(name: str, *, flag: str = "NAME", empty_hint: str | None = None) -> str:
    """An endpoint name: `flag` is deploy's optional `--name`, or the NAME argument of the commands that act on an
    existing endpoint (their hints must not advise an option they lack); `empty_hint`: what to do instead of an
    empty one, where the command says more than "pass the name"."""
    option = flag.startswith("--")
    if not name.strip():
        raise UsageError(f"{flag} is empty", empty_hint or ("pass a name, or leave --name out for a generated one"
                         if option else "pass the endpoint's name (peagle status lists peagle's endpoints)"))
    if len(name) > NAME_MAX:
        raise UsageError(f"name {name!r} is {len(name)} characters; SageMaker allows {NAME_MAX}",
                         "choose a shorter --name" if option else f"pass the endpoint's name (at most {NAME_MAX} "
                         "characters; peagle status lists peagle's endpoints)")
    if not NAME_RE.match(name):
        raise UsageError(f"name {name!r} breaks SageMaker's naming rules",
                         "use letters, digits and single or repeated hyphens, starting and ending with a letter or digit")
    return name


# SageMaker's instance types, e.g. ml.g7e.2xlarge, ml.trn1n.32xlarge (its API's InstanceType enum is all of this shape)
INSTANCE_TYPE_RE = re.compile(r"^ml\.[a-z0-9]+(?:-[a-z0-9]+)*\.[a-z0-9]+\Z")


def check_instance_type(value: str | None, flag: str = "--instance-type") -> str | None:
    """An instance type is used exactly as typed, so one that differs from a well-formed type by what cannot be
    seen (a space, a tab, a zero-width character) or by case is refused, shown quoted, with the type to pass.
    Anything else goes on to the checks that list the supported types (plan.py)."""
    if value is None or INSTANCE_TYPE_RE.match(value):
        return value
    visible = "".join(ch for ch in value if ch.isprintable() and not ch.isspace())
    fix = f"pass {flag} {visible.lower()}" if INSTANCE_TYPE_RE.match(visible.lower()) else \
        "pass a type such as ml.g7e.2xlarge"
    if value != value.strip():
        raise UsageError(f"{flag} {value!r} has spaces around the instance type", fix)
    foreign = [ch for ch in dict.fromkeys(value) if not (ch.isascii() and (ch.isalnum() or ch in ".-"))]
    if any(ch.isprintable() and not ch.isspace() for ch in foreign):  # ';', '/', a letter of another script...
        raise UsageError(f"{flag} {ascii(value)} holds characters an instance type cannot hold: "
                         f"{', '.join(ascii(ch) for ch in foreign)}", "pass a type such as ml.g7e.2xlarge "
                         "(letters, digits, dots and hyphens)")  # each quoted, escaped where not plain ASCII
    if visible != value:
        raise UsageError(f"{flag} {value!r} holds characters that cannot be seen (shown escaped)", fix)
    if INSTANCE_TYPE_RE.match(value.lower()):
        raise UsageError(f"{flag} {value!r}: SageMaker's instance types are lower case", fix)
    return value


def parse_instance_types(value: str | None, flag: str = "--instance-type") -> list[str]:
    """`--instance-type` as a priority list: one type, or types separated by commas (at most 5, none twice)."""
    if value is None:
        return []
    if POOL_SEPARATOR not in value:
        return [check_instance_type(value, flag)]
    types = read_list(value, flag, "ml.g7e.2xlarge,ml.g7e.4xlarge")
    if len(types) > MAX_POOLS:
        raise UsageError(f"{flag} lists {len(types)} instance types; SageMaker takes at most {MAX_POOLS} pools",
                         f"pass at most {MAX_POOLS} types")
    for t in types:
        check_instance_type(t, flag)
    twice = sorted({t for t in types if types.count(t) > 1})
    if twice:
        raise UsageError(f"{flag} lists {twice[0]} twice", "list each instance type once, in priority order")
    return types


def check_instance_types(value: str | None, flag: str = "--instance-type") -> str | None:
    """One instance type as `check_instance_type` checks it, or a comma-separated priority list of them (instance
    pools, `parse_instance_types`; a command that takes one type refuses a list itself)."""
    if value is None or "," not in value:
        return check_instance_type(value, flag)
    parse_instance_types(value, flag)
    return value


def check_endpoint_name(value: str, command: str) -> str:
    """The NAME argument of `command` (status, cleanup, recover, update, logs, openai) is never empty (`status ''`
    is not "every endpoint"); the rest of the naming rule is each command's (openai explains a URL first)."""
    if value.strip():
        return value
    hint = "pass the endpoint's name, or no NAME for every peagle endpoint" if command == "status" else None
    return validate_name(value, flag="NAME", empty_hint=hint)


# options whose value goes to AWS as typed: checked by cli.common.run before the command's body, in every command;
# ARGUMENT_CHECKS likewise for arguments, by parameter name
TEXT_CHECKS = {"instance_type": check_instance_types}
ARGUMENT_CHECKS = {"name": check_endpoint_name}


def partition_of(region: str) -> str | None:
    """The AWS partition of a region (aws, aws-cn, aws-us-gov, ...), from botocore's own endpoint data;
    None for a region botocore does not know (the region check names that problem)."""
    from .botocore_facts import data_session

    try:
        return data_session().get_partition_for_region(region)
    except Exception as exc:  # botocore's UnknownRegionError (its exceptions are imported by aws.py alone)
        if type(exc).__name__ == "UnknownRegionError":
            return None
        raise


def validate_role_arn(arn: str, region: str | None = None) -> str:
    arn = exact(arn, "--role")
    if not ROLE_ARN_RE.match(arn):
        raise UsageError(f"--role {arn!r} is not an IAM role ARN",
                         "pass arn:aws:iam::<12-digit account>:role/<name>")
    if region:
        partition, expected = arn.split(":")[1], partition_of(region)
        if expected is not None and partition != expected:
            raise UsageError(f"--role is in partition {partition} but region {region} is in {expected}",
                             f"pass a role ARN of the {expected} partition (arn:{expected}:iam::...) "
                             "or a --region of its partition")
    return arn


def validate_image(image: str, region: str) -> str:
    """An --image must be an Amazon ECR image URI in the deploy region (CreateModel's rule)."""
    text = exact(image, "--image")
    match = ECR_IMAGE_RE.match(text) if len(text) <= IMAGE_MAX else None
    if match is None:
        raise UsageError(f"--image {image!r} is not an Amazon ECR image URI",
                         "pass <account>.dkr.ecr.<region>.amazonaws.com/<repository>:<tag>")
    if match["region"] != region:
        raise UsageError(f"--image is in {match['region']} but the endpoint is in {region}",
                         f"push the image to ECR in {region} or pass --region {match['region']}")
    return text


def parse_instance_count(value: int) -> int:
    if value < 1:
        raise UsageError(f"--instance-count must be at least 1, got {value}", "pass --instance-count 1 or more")
    if value > MAX_INSTANCE_COUNT:
        raise UsageError(f"--instance-count {value} is above peagle's limit of {MAX_INSTANCE_COUNT}",
                         f"pass --instance-count 1..{MAX_INSTANCE_COUNT} (more needs a SageMaker quota increase "
                         "and several endpoints)")
    return value


def parse_max_price(value: float | None) -> float:
    """--max-price-per-hour: the hourly estimate a script accepts without a prompt (default the guard)."""
    if value is None:
        return PRICE_GUARD_USD_PER_HOUR
    if not value > 0:
        raise UsageError(f"--max-price-per-hour must be positive, got {value}", "pass e.g. --max-price-per-hour 50")
    return value


def check_price(price_per_hour: float | None, limit: float, *, interactive: bool, explicit: bool = False,
                unknown_why: str | None = None, unknown_fix: str | None = None) -> bool:
    """True when the plan needs an explicit price confirmation; refuse (exit 2) when none can be asked.
    An unknown price cannot be held to an explicit --max-price-per-hour: refused, before any AWS write.
    `unknown_why`/`unknown_fix`: the Price's detail and fix (network, credentials or permission)."""
    if price_per_hour is None and explicit:
        raise UsageError(f"--max-price-per-hour {limit:g} cannot be checked: the SageMaker hosting price is unknown"
                         + (f" ({unknown_why})" if unknown_why else ""),
                         f"{unknown_fix or 'give credentials that allow pricing:GetProducts'}, or drop "
                         "--max-price-per-hour to accept an unknown price (docs/configuration.md#prices)")
    if price_per_hour is None or price_per_hour <= limit:
        return False
    if not interactive:
        raise UsageError(f"this plan costs about ${price_per_hour:,.2f}/h, above the ${limit:,.2f}/h price guard",
                         f"check --instance-type/--instance-count, or pass --max-price-per-hour "
                         f"{math.ceil(price_per_hour)} to accept it")
    return True


def _split_pair(raw: str, flag: str, seen: dict[str, str]) -> tuple[str, str]:
    key, sep, value = raw.partition("=")
    if not sep or not key.strip():
        raise UsageError(f"{flag} {raw!r} is not KEY=VALUE", f"pass {flag} KEY=VALUE")
    key = key.strip()
    if key in seen:
        raise UsageError(f"{flag} {key} is given twice ({seen[key]!r} and {value!r})", f"pass each {flag} key once")
    return key, value


def parse_env(pairs: list[str]) -> dict[str, str]:
    env: dict[str, str] = {}
    for raw in pairs:
        key, value = _split_pair(raw, "--env", env)
        if not ENV_KEY_RE.match(key):
            raise UsageError(f"--env name {key!r} is not a valid variable name", "use letters, digits and _")
        if len(value.encode("utf-8")) > ENV_VALUE_MAX_BYTES:
            raise UsageError(f"--env {key} value is {len(value.encode('utf-8'))} bytes; SageMaker allows "
                             f"{ENV_VALUE_MAX_BYTES}", "shorten the value")
        env[key] = value
    return env


def check_env_count(env: dict[str, str]) -> None:
    if len(env) > ENV_MAX_VARS:
        raise UsageError(f"the container environment would have {len(env)} variables; SageMaker allows "
                         f"{ENV_MAX_VARS}", "drop some --env pairs")


def check_tag_count(tags: dict[str, str], user_tags: int, *, reserve: int = 0) -> None:
    """SageMaker allows 50 tags per resource, peagle's own included; `reserve` stay free for the tags an update
    or cleanup writes on the endpoint before it acts (its intent) and the lease of the command at work."""
    if len(tags) + reserve > TAGS_MAX:
        own = len(tags) - user_tags
        raise UsageError(f"the resources would carry {len(tags)} tags ({user_tags} --tag + {own} of peagle's, "
                         f"{reserve} more kept free for update, cleanup and leases); SageMaker allows {TAGS_MAX}",
                         f"pass at most {TAGS_MAX - own - reserve} --tag options")


def is_tag_text(text: str) -> bool:
    """AWS's tag pattern: letters (L), separators (Z: a space, not a tab or newline), digits (N) and _.:/=+-@."""
    import unicodedata

    return all(ch in TAG_PUNCTUATION or unicodedata.category(ch)[0] in "LZN" for ch in text)


def parse_tags(pairs: list[str]) -> dict[str, str]:
    tags: dict[str, str] = {}
    for raw in pairs:
        key, value = _split_pair(raw, "--tag", tags)
        if key.lower().startswith(RESERVED_TAG_PREFIXES):
            raise UsageError(f"--tag key {key!r} uses a reserved prefix",
                             "peagle:, sagemaker-sdk: and aws: tags are set by peagle, JumpStart or AWS")
        if len(key) > TAG_KEY_MAX or len(value) > TAG_VALUE_MAX:
            raise UsageError(f"--tag {key!r} is too long", f"keys up to {TAG_KEY_MAX}, values up to {TAG_VALUE_MAX} characters")
        if not is_tag_text(key) or not is_tag_text(value):
            raise UsageError(f"--tag {raw!r} has characters AWS tags do not allow",
                             "use letters, digits, spaces and _ . : / = + - @ (no tab or newline)")
        tags[key] = value
    return tags


# private networking and encryption ----------------------------------------------------------------------
SUBNET_RE = re.compile(r"^subnet-(?:[0-9a-f]{8}|[0-9a-f]{17})\Z")
SECURITY_GROUP_RE = re.compile(r"^sg-(?:[0-9a-f]{8}|[0-9a-f]{17})\Z")
SUBNETS_MAX, SECURITY_GROUPS_MAX = 16, 5  # SageMaker's VpcConfig limits
_KMS_KEY_ID = r"(?:[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}|mrk-[0-9a-f]{32})"
_KMS_ALIAS = r"alias/[a-zA-Z0-9/_-]{1,250}"
KMS_KEY_RE = re.compile(rf"^(?:{_KMS_KEY_ID}|{_KMS_ALIAS})\Z")
KMS_ARN_RE = re.compile(rf"^arn:(?P<partition>aws[a-z-]*):kms:(?P<region>[a-z0-9-]+):\d{{12}}:"
                        rf"(?:key/{_KMS_KEY_ID}|{_KMS_ALIAS})\Z")


def _unique_ids(values: list[str], flag: str, pattern: re.Pattern[str], shape: tuple[str, str], maximum: int) -> list[str]:
    ids: list[str] = []
    for raw in values:
        value = exact(raw, flag)
        if not pattern.match(value):
            raise UsageError(f"{flag} {raw!r} is not a {shape[0]} id", f"pass {flag} {shape[1]}")
        if value in ids:
            raise UsageError(f"{flag} {value} is given twice", f"pass each {flag} once")
        ids.append(value)
    if len(ids) > maximum:
        raise UsageError(f"{len(ids)} {flag} options; SageMaker allows {maximum}", f"pass at most {maximum}")
    return ids


def parse_vpc_config(subnets: list[str], security_groups: list[str]) -> dict[str, list[str]] | None:
    """--subnet/--security-group as CreateModel's VpcConfig (None when neither is given). SageMaker needs
    both: subnets without security groups, or the reverse, is refused before any AWS call."""
    if not subnets and not security_groups:
        return None
    subnet_ids = _unique_ids(subnets, "--subnet", SUBNET_RE, ("VPC subnet", "subnet-0123456789abcdef0"),
                             SUBNETS_MAX)
    group_ids = _unique_ids(security_groups, "--security-group", SECURITY_GROUP_RE,
                            ("VPC security group", "sg-0123456789abcdef0"), SECURITY_GROUPS_MAX)
    if not group_ids:
        raise UsageError("--subnet needs at least one --security-group (SageMaker's VpcConfig takes both)",
                         "add --security-group sg-... of the same VPC")
    if not subnet_ids:
        raise UsageError("--security-group needs at least one --subnet (SageMaker's VpcConfig takes both)",
                         "add --subnet subnet-... of the same VPC (two in different Availability Zones for "
                         "more than one instance)")
    return {"Subnets": subnet_ids, "SecurityGroupIds": group_ids}


def validate_kms_key(key: str, region: str) -> str:
    """--kms-key: a key id, key ARN, alias name or alias ARN (CreateEndpointConfig's KmsKeyId forms); an
    ARN must be in the deploy region (KMS keys are regional)."""
    text = exact(key, "--kms-key")
    match = KMS_ARN_RE.match(text)
    if match is None and not KMS_KEY_RE.match(text):
        raise UsageError(f"--kms-key {key!r} is not a KMS key id, key ARN, alias or alias ARN",
                         "pass e.g. --kms-key alias/my-key, a key id (1234abcd-12ab-34cd-56ef-1234567890ab) or "
                         "arn:aws:kms:<region>:<account>:key/<key id>")
    if match is not None and match["region"] != region:
        raise UsageError(f"--kms-key is in {match['region']} but the endpoint is in {region}",
                         f"pass a key of {region} (KMS keys are regional) or --region {match['region']}")
    if match is not None and partition_of(region) not in (None, match["partition"]):
        raise UsageError(f"--kms-key is in partition {match['partition']} but region {region} is in "
                         f"{partition_of(region)}", "pass a key ARN of the region's partition")
    return text


# an S3 bucket name's characters (lower-case letters, digits, '.' and '-', a letter or digit at both ends; S3 itself
# also wants 3 or more, which it says when asked: a short placeholder such as s3://b/p still plans a --dry-run) and
# a key prefix of printable characters
_S3_URI = re.compile(r"^s3://(?P<bucket>[a-z0-9](?:[a-z0-9.-]{0,61}[a-z0-9])?)(?:/(?P<prefix>[^\s]*))?$")


def parse_s3_prefix(value: str, *, flag: str) -> tuple[str, str]:
    """s3://BUCKET/PREFIX -> (bucket, prefix without slashes at either end); one line naming the fix otherwise."""
    match = _S3_URI.match((value or "").strip())
    if match is None or ".." in match["bucket"]:
        raise UsageError(f"{flag} {value!r} is not an S3 location", f"pass {flag} s3://BUCKET/PREFIX")
    prefix = (match["prefix"] or "").strip("/")
    if not prefix:
        raise UsageError(f"{flag} {value!r} names a bucket but no prefix",
                         f"pass {flag} s3://{match['bucket']}/PREFIX (a folder of its own)")
    return match["bucket"], prefix
