"""Following the hint of an error line, as a user would: the argv it leads to, or the options it names.

An error line is `error: MESSAGE: HINT`. A hint is followed when it says exactly what to run or change:
- a quoted command (`'peagle sweep --resume X'`): run it;
- `add one: 5s, 5m or 5h`: each value for the flag the message names;
- `drop --k, --modes` (or `drop MODEL`): the command without them;
- `pass at most 30d`, `pass e.g. 90s, 15m ...` after a message naming `--flag 'value'`: that flag, the first value;
- `--flag VALUE` (`pass e.g. --budget 40`, `pass --k 1..32`, `--instance-count between 1 and 4`): that flag set to
  the (first) value; a flag that takes no value (`pass --yes`) is added.
Every hint, followed or not, may only name options its command has (tests/test_bad_inputs_table.py checks that).
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field

QUOTED_COMMAND = re.compile(r"'peagle ([^']+)'")
ADD_ONE = re.compile(r"add one: ([^:;]+)$")
DROP = re.compile(r"\bdrop ((?:--[\w-]+|MODEL)(?:(?:, | and )(?:--[\w-]+|MODEL))*)")
MESSAGE_FLAG = re.compile(r"(--[a-z][\w-]*) '")
AT_MOST = re.compile(r"pass at most (\S+)$")
EXAMPLES = re.compile(r"(?:pass e\.g\.|such as) ((?:\d[\w.:+-]*)(?:, \d[\w.:+-]*)*(?: or \d[\w.:+-]*)?)")
FLAG_VALUE = re.compile(r"(--[a-z][\w-]*)(?:[ =](?!--)(?:between )?([^\s,;)]+))?")
PLACEHOLDER = re.compile(r"^(?:[A-Z][A-Z_:]*|[(\[].*|.*<.*|.*\.\.\.|e\.g\.|to|or|and|with|for|of|is|the|a|an|it|them)$")


@dataclass
class Followup:
    argv: list[str]
    edited: list[str] = field(default_factory=list)  # flags the hint set or dropped: a new error must be another
    rule: str = ""


def split_line(line: str) -> tuple[str, str]:
    """(message, hint) of `error: MESSAGE: HINT` (the hint is what follows the last ': ' outside quotes)."""
    text = line.removeprefix("error: ")
    depth, cut = 0, -1
    for i, ch in enumerate(text):
        if ch == "'":
            depth ^= 1
        elif ch == ":" and text[i + 1:i + 2] == " " and not depth:
            cut = i
    return (text, "") if cut < 0 else (text[:cut], text[cut + 2:])


def set_flag(argv: list[str], flag: str, value: str | None) -> list[str]:
    out = list(argv)
    for i, arg in enumerate(out):
        if arg == flag:
            if value is None:
                return out
            out[i + 1] = value
            return out
        if arg.startswith(flag + "="):
            out[i] = flag if value is None else f"{flag}={value}"
            return out
    return out + ([flag] if value is None else [flag, value])


def drop_flag(argv: list[str], flag: str, takes_value: bool) -> list[str]:
    out, skip = [], False
    for arg in argv:
        if skip:
            skip = False
            continue
        if arg == flag:
            skip = takes_value
            continue
        if arg.startswith(flag + "="):
            continue
        out.append(arg)
    return out


def looks_like_a_value(text: str) -> bool:
    """'40', 'ml.g7e.2xlarge', 'p-eagle', 'aws-blog', 'off': a value; 'range', 'target': words of a sentence."""
    return any(ch.isdigit() or ch in "/:=.@-" for ch in text) or text in ("off", "eagle3", "humaneval", "code", "chat")


def first_value(raw: str) -> str:
    return raw.split("..")[0] if re.fullmatch(r"-?\d+\.\.\d+", raw) else raw


def follow(argv: list[str], line: str, takes_value: dict[str, bool], *, folder: str) -> list[Followup]:
    """The commands following this error line's hint leads to ([] when the hint is prose). `takes_value`: the
    command's options (True: takes a value). `folder`: the case's folder, written `{tmp}` again in new argv."""
    message, hint = split_line(line)
    hint = hint.replace(folder, "{tmp}")
    quoted = QUOTED_COMMAND.search(hint)
    if quoted:
        return [Followup(shlex.split(quoted[1]), rule="quoted command")]
    named = MESSAGE_FLAG.search(message)
    if (match := ADD_ONE.search(hint)) and named:
        values = [v.strip() for v in re.split(r", | or ", match[1]) if v.strip()]
        return [Followup(set_flag(argv, named[1], v), [named[1]], "add one") for v in values]
    if match := DROP.search(hint):
        out = list(argv)
        for flag in re.split(r", | and ", match[1]):
            if flag == "MODEL" and len(out) > 1 and not out[1].startswith("-"):
                out = [out[0], *out[2:]]
            elif flag in takes_value:
                out = drop_flag(out, flag, takes_value[flag])
        return [Followup(out, [f for f in re.split(r", | and ", match[1]) if f.startswith("--")], "drop")]
    if (match := AT_MOST.search(hint)) and named:
        return [Followup(set_flag(argv, named[1], match[1]), [named[1]], "at most")]
    for flag, value in FLAG_VALUE.findall(_own(hint)):
        if flag not in takes_value:
            continue
        if not takes_value[flag]:
            return [Followup(set_flag(argv, flag, None), [flag], "add flag")]
        if value and not PLACEHOLDER.match(value) and looks_like_a_value(value):
            return [Followup(set_flag(argv, flag, first_value(value.rstrip("."))), [flag], "flag value")]
    if (match := EXAMPLES.search(hint)) and named and takes_value.get(named[1]):
        first = re.split(r", | or ", match[1])[0]
        return [Followup(set_flag(argv, named[1], first), [named[1]], "example")]
    return []


def _own(hint: str) -> str:
    """The hint without the commands it quotes or names (`peagle logs NAME --since 10m ...` is an example of
    another run, not an edit of this one)."""
    unquoted = re.sub(r"'[^']*'", "", QUOTED_COMMAND.sub("", hint))  # another program's command line, quoted
    return re.sub(r"\bpeagle [a-z-]+(?: [a-z-]+)?(?: [^\s,;)]+)*", "", unquoted)


def named_options(hint: str) -> list[str]:
    """The options a hint names for its own command (not those inside a quoted or named other command)."""
    return re.findall(r"(?<![\w-])(--[a-z][\w-]*)", _own(hint))
