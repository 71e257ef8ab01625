"""Following the hint of an error line, as a user would: the argv it leads to, or the options it names.

An error line is `error: MESSAGE: HINT`. A hint is followed when it says exactly what to run or change:
- a quoted command (`'peagle sweep --resume X'`): run it;
- `add one: 5s, 5m or 5h`: each value for the flag the message names;
- `drop --k, --modes` (or `drop MODEL`): the command without them;
- `pass at most 30d`, `pass e.g. 90s, 15m ...` after a message naming `--flag 'value'`: that flag, the first value;
- `--flag VALUE` (`pass e.g. --budget 40`, `pass --k 1..32`, `--instance-count between 1 and 4`): that flag set to
  the (first) value; a flag that takes no value (`pass --yes`) is added.
Every hint, followed or not, may only name options its command has (tests/test_bad_inputs_table.py checks that).

Beyond the table's cases, every hint in the code and the docs is found mechanically (issue 49 item 4): `code_hints`
reads each error peagle raises from the source (the hint argument of UsageError, QuotaError, ...: its f-string with
what the code fills in marked, the module's string constants, both branches of a conditional), and `parses` holds
each `peagle ...` command a hint (or a doc) names to Click's own parser: the command exists, its options exist and
take the values given (NAME and the like given sample values). tests/test_cli_hints.py runs both.
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
        dropped = [f for f in re.split(r", | and ", match[1]) if f.startswith("--")]
        for flag in re.split(r", | and ", match[1]):
            if flag == "MODEL" and len(out) > 1 and not out[1].startswith("-"):
                out = [out[0], *out[2:]]
            elif flag in takes_value:
                out = drop_flag(out, flag, takes_value[flag])
        # `pass --mode off and drop --k`: the value the hint names before the drop is set too
        for flag, value in FLAG_VALUE.findall(_own(hint[:match.start()])):
            if takes_value.get(flag) and value and not PLACEHOLDER.match(value) and looks_like_a_value(value):
                out = set_flag(out, flag, first_value(value.rstrip(".")))
                dropped.append(flag)
        return [Followup(out, dropped, "drop")]
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


# every hint in the code and the docs, found mechanically (issue 49 item 4) ------------------------------------------

ERRORS = {"PeagleError", "UsageError", "CredentialsError", "QuotaError", "WaitTimeout", "EndpointFailed",
          "Interrupted", "MissingCredentials", "NoCapacity", "TeardownFailed", "BudgetStop"}
SLOT = "\x00"  # where a hint's f-string puts a value the code computes
# a command a hint names: `'peagle X ...'` quoted, or bare `peagle X ...` up to the end of the clause
NAMED_COMMAND = re.compile(r"'(peagle [^']+)'|(?<![\w'/-])(peagle [a-z][a-z-]*(?: [^,;:()']*)?)")


@dataclass(frozen=True)
class CodeHint:
    where: str  # peagle_deploy/cli/update.py:123
    module: str  # peagle_deploy/cli/update.py
    text: str  # the hint, SLOT where the code fills in a value

    def commands(self) -> list[str]:
        """The `peagle ...` commands it names (SLOT kept), each as written."""
        return [(quoted or bare).strip().rstrip(".") for quoted, bare in NAMED_COMMAND.findall(self.text)]

    def own_flags(self) -> list[str]:
        """The options it names for the running command (not those of a command it names)."""
        return named_options(NAMED_COMMAND.sub("", self.text))


def _texts(node, constants: dict[str, list[str]]) -> list[str]:
    """Every string `node` may evaluate to, SLOT for what is computed; [] when it is no string at all."""
    import ast

    if isinstance(node, ast.Constant):
        return [node.value] if isinstance(node.value, str) else []
    if isinstance(node, ast.JoinedStr):
        out = [""]
        for part in node.values:
            pieces = _texts(part, constants) if isinstance(part, ast.Constant) else \
                (_texts(part.value, constants) or [SLOT]) if isinstance(part, ast.FormattedValue) else [SLOT]
            out = [a + b for a in out for b in pieces][:64]
        return out
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left, right = _texts(node.left, constants), _texts(node.right, constants)
        return [a + b for a in left or [SLOT] for b in right or [SLOT]][:64] if left or right else []
    if isinstance(node, ast.IfExp):
        return _texts(node.body, constants) + _texts(node.orelse, constants)
    if isinstance(node, ast.BoolOp):
        return [text for value in node.values for text in _texts(value, constants)]
    if isinstance(node, ast.Name):
        return constants.get(node.id, [])
    return []


def code_hints(root) -> list[CodeHint]:
    """Every hint of an error peagle raises: the second argument (or `hint=`) of a call to one of ERRORS, with the
    module's own string constants (CAPACITY_HINT) and both branches of a conditional followed."""
    import ast
    from pathlib import Path

    found: list[CodeHint] = []
    for path in sorted(Path(root, "peagle_deploy").rglob("*.py")):
        if "testing" in path.parts:  # the emulator's own answers are AWS's texts, not peagle's hints
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        constants = {target.id: _texts(node.value, {}) for node in tree.body if isinstance(node, ast.Assign)
                     for target in node.targets if isinstance(target, ast.Name)}
        module = path.relative_to(root).as_posix()
        for node in ast.walk(tree):
            if not isinstance(node, ast.Call):
                continue
            name = node.func.id if isinstance(node.func, ast.Name) else getattr(node.func, "attr", "")
            if name not in ERRORS:
                continue
            hint = node.args[1] if len(node.args) > 1 else next((k.value for k in node.keywords if k.arg == "hint"),
                                                                 None)
            for text in _texts(hint, constants) if hint is not None else []:
                if "peagle " in text or "--" in text:
                    found.append(CodeHint(f"{module}:{node.lineno}", module, text))
    return found


SAMPLES = {"NAME": "my-endpoint", "NEW-NAME": "my-endpoint-2", "MODEL": "qwen3-coder", "STATE": "sweep-state.json",
           "TARGET": "my-endpoint", "N": "3", "MORE": "40", "TYPE": "ml.g7e.4xlarge", "ALIAS": "qwen3-coder",
           "URL": "http://127.0.0.1:8080", "FILE": "results.json", "DIR": "results", "OUT": "results",
           "PER_MINUTE": "600", "MIN:MAX": "1:4", "K": "3", "SECONDS": "60"}
_VALUE = re.compile(r"^(?:[A-Z][A-Z_:-]*|\S*[\d/.:=@]\S*|-?\d\S*)$")  # a placeholder or a value, not a prose word


def _takes_value(command, flag: str) -> bool | None:
    """Whether `flag` of `command` takes a value (None: it has no such option)."""
    for param in command.params:
        if flag in (*param.opts, *param.secondary_opts):
            return not (param.is_flag or getattr(param, "count", False))
    return None


def _example(flag: str) -> str:
    """A value of `flag` inside its bound (peagle_deploy.inputs.BOUNDS), for a numeric placeholder."""
    from peagle_deploy.inputs import BOUNDS

    return BOUNDS[flag].example if flag in BOUNDS else "3"


def _numeric(command, flag: str) -> bool:
    import typing

    for param in command.params:
        if flag in param.opts:
            todo = [getattr(param, "type_descriptor", None) and param.type_descriptor.annotation]
            while todo:
                kind = todo.pop()
                if kind in (int, float):
                    return True
                todo.extend(typing.get_args(kind))
    return False


def hint_argv(root_command, text: str, *, quoted: bool) -> tuple[list[str], list[str], object] | None:
    """(the command path, its arguments, the Click command) of a command a hint names, placeholders (NAME, what the
    code fills in) given sample values. A bare mention in prose (`peagle status lists peagle's endpoints`) is read up
    to its first word that is neither an option, its value nor a placeholder."""
    text = re.sub(r"<[^>]*>", "X", text.replace(SLOT, "X")).split(" | ")[0]  # <sweep id>; a pipe's first command
    text = text.replace("\\[", "").replace("[", "").replace("]", "")  # a synopsis's [--name N]
    try:
        words = [word.split("|")[0] for word in shlex.split(text)[1:]]  # --mode p-eagle|eagle3|off: the first
    except ValueError:
        return None
    command, path = root_command, []
    while words and getattr(command, "commands", None) and words[0] in command.commands:
        command = command.commands[words[0]]
        path.append(words.pop(0))
    if not path:  # `peagle --help`, `peagle --install-completion`: the root's own options
        return ([], words, command) if words and all(w.startswith("--") for w in words) else None
    if getattr(command, "commands", None):  # `peagle bench TARGET` is `peagle bench run TARGET`; else a group named
        if not words or not (_VALUE.match(words[0]) or words[0] in SAMPLES):
            return path, [], command
        command = command.commands["run"]
    argv: list[str] = []
    taking = None
    for word in words:
        if word in ("...", "[options]", "\\[options]"):
            continue
        if taking is not None:
            placeholder = word == "X" or re.fullmatch(r"[A-Z][A-Z_]*", word)
            argv.append(_example(taking) if placeholder and _numeric(command, taking) else SAMPLES.get(word, word))
            taking = None
        elif word.startswith("--"):
            argv.append(word)
            taking = word if "=" not in word and _takes_value(command, word) else None
        elif quoted or _VALUE.match(word) or word in SAMPLES:
            argv.append(SAMPLES.get(word, word))
        else:
            break  # prose
    return path, argv, command


def parses(root_command, text: str, *, quoted: bool) -> str | None:
    """None when the command a hint names parses as peagle's own CLI would parse it (the command exists, its options
    exist and take what is given); else why not. Nothing runs: the command's body is not called."""
    found = hint_argv(root_command, text, quoted=quoted)
    if found is None:  # quoted: it was meant as a command; bare: prose ('peagle only deletes what it created')
        return f"{text!r} names no peagle command" if quoted else None
    path, argv, command = found
    shown = " ".join(["peagle", *path, *argv])
    for word in argv:
        if word.startswith("--") and word != "--help" and _takes_value(command, word.split("=")[0]) is None:
            return f"'{shown}': 'peagle {' '.join(path)}' has no option {word.split('=')[0]}"
    if getattr(command, "commands", None) or "--help" in argv or not path:
        return None
    try:
        # the root's settings (-h beside --help), as under peagle's own root: Click keeps the help option a command
        # first made, and the suite shares one command tree per process (tests/command_tree.py)
        command.make_context(" ".join(["peagle", *path]), list(argv), resilient_parsing=False,
                             **getattr(root_command, "context_settings", {}))
    except Exception as exc:  # noqa: BLE001 - Click's usage errors: the hint's command would be refused
        message = exc.format_message() if hasattr(exc, "format_message") else str(exc)
        if any(gap in message for gap in ("Missing argument", "Missing option", "requires an argument")):
            return None  # the hint names the command (or an option of it), the reader fills in the rest
        return f"'{shown}' is refused: {message}"
    return None
