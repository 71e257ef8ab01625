"""The `peagle` command lines of README.md and docs/*.md, found as a reader finds them, and the table that says how
the suite runs each (tests/documented_commands.toml; tests/test_documented_commands.py runs them).

A command line is one a reader would type: in a shell fence (```bash, ```sh, ```shell, ```console or a plain
```), a line whose command, or a command after `|`, `&&`, `||`, `;` or inside `$(...)`, is `peagle` or a path to
it (`.venv/bin/peagle`) or `python -m peagle_deploy.testing` (the emulator's shell entry point), after any
`NAME=value` assignments; lines joined at a trailing `\\`; a trailing `# comment` removed; in a ```console
transcript only the `$ ` lines (the prompt removed), with the `(exit N)` the transcript shows after it; in a
```yaml workflow the `run:` steps. An alternative in a comment (`# or: peagle recover --all`) is a command line
too. docs/cli.md is generated help: it is read like the others and holds none. Whitespace outside quotes is
collapsed, so the table's keys do not depend on how a line is aligned.

`python -m tests.documented_commands` prints every line with its file:line and how it is run;
`--markdown` prints the section docs/documented-commands.md holds (`--write` rewrites it there).
"""

from __future__ import annotations

import re
import sys
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TABLE = Path(__file__).resolve().parent / "documented_commands.toml"
DOCS_PAGE = ROOT / "docs" / "documented-commands.md"
SHELL_FENCES = {"", "bash", "sh", "shell", "zsh", "console"}
_FENCE = re.compile(r"^\s*(```+|~~~+)\s*([\w+-]*)")
_PEAGLE = re.compile(r"(?:^|[|;&(]\s*|\$\(\s*)(?:[A-Za-z_]\w*=\S*\s+)*(?:\S*/)?peagle(?=\s|\)|$)")
# the emulator's shell entry point (docs/ci.md) is part of what a reader types too: `python -m peagle_deploy.testing`
EMULATOR = re.compile(r"(?:^|[|;&(]\s*)(?:\S*/)?python3? -m peagle_deploy\.testing(?=\s|$)")
_EXIT = re.compile(r"^\(exit (\d+)\)$")
_ALTERNATIVE = re.compile(r"^\(?or:\s*(.+?)\)?$")


@dataclass(frozen=True)
class DocumentedLine:
    doc: str  # relative to the repository: README.md, docs/update.md
    line: int  # where the command starts (1-based)
    command: str  # as typed: prompt, continuations and comment removed, whitespace outside quotes collapsed
    shown_exit: int | None = None  # a transcript's "(exit N)" after the command

    @property
    def where(self) -> str:
        return f"{self.doc}:{self.line}"


def documents() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def split_comment(text: str) -> tuple[str, str | None]:
    """(the command with whitespace outside quotes collapsed, the text of a trailing `# comment` or None)."""
    out: list[str] = []
    quote = None
    i = 0
    while i < len(text):
        char = text[i]
        if quote:
            out.append(char)
            if char == "\\" and quote == '"' and i + 1 < len(text):
                out.append(text[i + 1])
                i += 1
            elif char == quote:
                quote = None
        elif char in "'\"":
            quote = char
            out.append(char)
        elif char == "\\" and i + 1 < len(text):
            out.append(text[i:i + 2])
            i += 1
        elif char == "#" and (not out or out[-1] == " "):
            return "".join(out).strip(), text[i + 1:].strip()
        elif char.isspace():
            if out and out[-1] != " ":
                out.append(" ")
        else:
            out.append(char)
        i += 1
    return "".join(out).strip(), None


def is_peagle(command: str) -> bool:
    return bool(_PEAGLE.search(command) or EMULATOR.search(command))


def _logical_lines(lines: list[str], start: int) -> list[tuple[int, str]]:
    """(line number, text) with backslash continuations joined."""
    joined: list[tuple[int, str]] = []
    i = 0
    while i < len(lines):
        number, text = start + i, lines[i].rstrip()
        while text.endswith("\\") and i + 1 < len(lines):
            i += 1
            text = text[:-1].rstrip() + " " + lines[i].strip()
        joined.append((number, text))
        i += 1
    return joined


def _commands(doc: str, language: str, body: list[str], first_line: int) -> list[DocumentedLine]:
    found: list[DocumentedLine] = []
    logical = _logical_lines(body, first_line)
    for index, (number, text) in enumerate(logical):
        stripped = text.strip()
        if language == "yaml":
            stripped = stripped.removeprefix("- ").strip()
            if not stripped.startswith("run:"):
                continue
            stripped = stripped.removeprefix("run:").strip()
        elif language == "console":
            if not stripped.startswith("$ "):
                continue
            stripped = stripped[2:]
        command, comment = split_comment(stripped)
        shown_exit = None
        if language == "console":  # the transcript's "(exit N)" before the next prompt
            for _, after in logical[index + 1:]:
                if after.strip().startswith("$ "):
                    break
                if match := _EXIT.match(after.strip()):
                    shown_exit = int(match.group(1))
                    break
        if command and is_peagle(command):
            found.append(DocumentedLine(doc, number, command, shown_exit))
        alternative = _ALTERNATIVE.match(comment or "")
        if alternative:
            other, _ = split_comment(alternative.group(1))
            if is_peagle(other):
                found.append(DocumentedLine(doc, number, other))
    return found


def extract(path: Path, doc: str | None = None) -> list[DocumentedLine]:
    """Every command line of one Markdown file, in order (`doc`: its name, default relative to the repository)."""
    doc = doc or path.relative_to(ROOT).as_posix()
    lines = path.read_text(encoding="utf-8").split("\n")
    found: list[DocumentedLine] = []
    i = 0
    while i < len(lines):
        opening = _FENCE.match(lines[i])
        if not opening:
            i += 1
            continue
        marker, language = opening.group(1), opening.group(2).lower()
        end = i + 1
        while end < len(lines) and not lines[end].strip().startswith(marker):
            end += 1
        if language in SHELL_FENCES or language == "yaml":
            found += _commands(doc, language, lines[i + 1:end], i + 2)
        i = end + 1
    return found


def documented_lines() -> list[DocumentedLine]:
    return [line for path in documents() for line in extract(path)]


# the table ------------------------------------------------------------------------------------------------------

@dataclass
class Group:
    """Documented lines that run in order against one fresh emulator state, in one working folder."""

    name: str
    doc: str
    run: list[str]
    endpoints: dict[str, str] = field(default_factory=dict)  # name -> `peagle deploy` options that make it
    stand_ins: dict[str, str] = field(default_factory=dict)  # URL in the docs -> "vllm" or "vllm-off"
    replace: dict[str, str] = field(default_factory=dict)  # text in the docs -> what runs here
    files: list[str] = field(default_factory=list)  # input files the reader has (from [files])
    local: bool = False  # the stand-in `vllm` on PATH, {target}, {drafter}, {port}; `peagle local stop` at the end
    append: dict[str, str] = field(default_factory=dict)  # [append] rules of this group only
    state: str | None = None  # groups naming the same state share one emulator state (lines that change nothing)


@dataclass
class Table:
    groups: list[Group]
    expect: dict[str, dict]  # command -> {exit, why} or {xfail}
    not_run: dict[tuple[str, str], str]  # (doc, command) -> reason
    files: dict[str, str]
    append: dict[str, str]
    without_credentials: list[str] = field(default_factory=list)  # patterns of lines that need no AWS account

    def group_of(self, doc: str, command: str) -> Group | None:
        return next((g for g in self.groups if g.doc == doc and command in g.run), None)


def load_table(path: Path = TABLE) -> Table:
    data = tomllib.loads(path.read_text(encoding="utf-8"))
    groups = [Group(name=name, **spec) for name, spec in data["group"].items()]
    not_run = {(entry["doc"], entry["command"]): entry["reason"] for entry in data["not_run"]}
    return Table(groups, data.get("expect", {}), not_run, data.get("files", {}), data.get("append", {}),
                 data.get("without_credentials", {}).get("runs", []))


def how_run(table: Table, line: DocumentedLine) -> str:
    group = table.group_of(line.doc, line.command)
    if group is not None:
        expect = table.expect.get(line.command, {})
        if "xfail" in expect:
            return f"expected to fail ({group.name}): {expect['xfail']}"
        return f"runs ({group.name}), exit {expect.get('exit', 0)}"
    reason = table.not_run.get((line.doc, line.command))
    return f"not run: {reason}" if reason is not None else "NOT CLASSIFIED"


def markdown(lines: list[DocumentedLine], table: Table) -> str:
    """The generated part of docs/documented-commands.md: the counts and the lines that do not run, with why."""
    ran = [line for line in lines if table.group_of(line.doc, line.command) is not None]
    xfail = [line for line in ran if "xfail" in table.expect.get(line.command, {})]
    skipped = [line for line in lines if table.group_of(line.doc, line.command) is None]
    docs = len({line.doc for line in lines})
    out = [f"README.md and docs/ hold **{len(lines)}** `peagle` command lines (in {docs} files); "
           f"**{len(ran)}** run in the suite against the emulator and stand-in servers"
           + (f" ({len(xfail)} of them expected to fail, each naming its bug)" if xfail else "")
           + f", **{len(skipped)}** cannot run there:", ""]
    out += ["| file | command | why it does not run |", "|---|---|---|"]
    for line in skipped:
        reason = table.not_run.get((line.doc, line.command), "NOT CLASSIFIED")
        out.append(f"| {line.doc} | `{line.command.replace('|', chr(92) + '|')}` | {reason} |")
    if xfail:
        out += ["", "Expected to fail until the named bug is fixed (the test fails once one passes, so the entry "
                "is removed):", "", "| file | command | bug |", "|---|---|---|"]
        for line in xfail:
            out.append(f"| {line.doc} | `{line.command}` | {table.expect[line.command]['xfail']} |")
    return "\n".join(out) + "\n"


BEGIN, END = "<!-- documented-commands: begin (generated) -->", "<!-- documented-commands: end -->"


def page_with(text: str, generated: str) -> str:
    head, rest = text.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    return f"{head}{BEGIN}\n{generated}{END}{tail}"


def main(argv: list[str]) -> int:
    lines, table = documented_lines(), load_table()
    if "--markdown" in argv or "--write" in argv:
        generated = markdown(lines, table)
        if "--write" in argv:
            DOCS_PAGE.write_text(page_with(DOCS_PAGE.read_text(encoding="utf-8"), generated), encoding="utf-8")
        else:
            sys.stdout.write(generated)
        return 0
    for line in lines:
        shown = f" (exit {line.shown_exit} shown)" if line.shown_exit is not None else ""
        print(f"{line.where}: {line.command}{shown}\n    {how_run(table, line)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
