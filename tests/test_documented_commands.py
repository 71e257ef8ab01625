"""Every `peagle` command line of README.md and docs/*.md runs in the suite, or is listed with why it cannot be
(issue 37: `peagle update NAME --autoscale ...` crashed on a documented path no test ran).

tests/documented_commands.py finds the lines as a reader finds them (file:line); tests/documented_commands.toml
says how each runs: the document's group (a fresh emulator state, the endpoints and files the reader has, the
stand-in servers for the reader's URLs), the exit code it must give, or why it cannot run here. A documented
line in neither, or an entry for a line the docs no longer have, fails here, so each new line gets classified.
A line runs in-process (tests/cli_runner.py) unless it needs a shell (a pipe, `$(...)`, a redirect, a glob),
then in bash with a forked `peagle` first on PATH. Each must exit as expected with no traceback and no
"unexpected" error; an `xfail` entry names a product bug and must keep failing until it is fixed.
"""

from __future__ import annotations

import os
import re
import shlex
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from .cli_runner import run_cli
from .conftest import emptied
from .documented_commands import (
    DOCS_PAGE, BEGIN, EMULATOR, END, DocumentedLine, Group, documented_lines, extract, load_table, markdown, page_with,
)
from .forked_peagle import forked_peagle

LINES = documented_lines()
TABLE = load_table()
SPEC_DECODING = ("SpecDecoding metrics: Mean acceptance length: 2.41, Accepted throughput: 90.00 tokens/s, Drafted "
                 "throughput: 120.00 tokens/s, Accepted: 900 tokens, Drafted: 1200 tokens, Per-position acceptance "
                 "rate: 0.850, 0.700, 0.560, Avg Draft acceptance rate: 70.3%")
UNEXPECTED = re.compile(r"unexpected \w+: |\"kind\": \"unexpected\"")  # how peagle says exit 1
_SHELL = re.compile(r"[|&;<>$`*?(){}\[\]]")


def _runnable(doc: str) -> list[DocumentedLine]:
    return [line for line in LINES if line.doc == doc and (doc, line.command) not in TABLE.not_run]


# the classification --------------------------------------------------------------------------------------------

def test_every_documented_line_is_classified():
    """Each documented line is run by its document's group, in the document's order, or listed as not run."""
    problems = []
    docs = {line.doc for line in LINES}
    for doc in sorted(docs | {group.doc for group in TABLE.groups}):
        groups = [group for group in TABLE.groups if group.doc == doc]
        documented = [line.command for line in _runnable(doc)]
        listed = groups[0].run if groups else []
        if len(groups) > 1:
            problems.append(f"{doc}: one group per document, not {[g.name for g in groups]}")
        for line in _runnable(doc):
            if line.command not in listed:
                problems.append(f"{line.where}: not classified (add it to a [group] run list or to [[not_run]]): "
                                f"{line.command}")
        for command in listed:
            if command not in documented:
                problems.append(f"{doc}: the table runs a line the document no longer has: {command}")
        if not problems and listed != documented:
            problems.append(f"{doc}: the group runs its lines in another order than the document:\n  "
                            + "\n  ".join(documented))
    commands = {line.command for line in LINES}
    for doc, command in TABLE.not_run:
        if (doc, command) not in {(line.doc, line.command) for line in LINES}:
            problems.append(f"[[not_run]] names a line {doc} no longer has: {command}")
    problems += [f"[expect] names a line no document has: {command}" for command in TABLE.expect
                 if command not in commands]
    problems += [f"[files] {name} is used by no group" for name in TABLE.files
                 if not any(name in group.files for group in TABLE.groups)]
    assert not problems, "\n".join(problems)


def test_a_transcripts_exit_code_is_the_one_expected():
    shown = [line for line in LINES if line.shown_exit is not None]
    assert shown, "docs/sweep.md's transcript shows exit codes"
    for line in shown:
        assert TABLE.expect.get(line.command, {}).get("exit", 0) == line.shown_exit, line.where


def test_the_docs_page_lists_what_does_not_run():
    """docs/documented-commands.md's counts and list are the table's (`python -m tests.documented_commands
    --write` rewrites them)."""
    text = DOCS_PAGE.read_text(encoding="utf-8")
    assert BEGIN in text and END in text
    assert text == page_with(text, markdown(LINES, TABLE)), "run: .venv/bin/python -m tests.documented_commands --write"


def test_the_extractor_finds_what_a_reader_would_type(tmp_path):
    page = tmp_path / "page.md"
    page.write_text("\n".join([
        "Text with `peagle inline` is not a command line.",
        "```bash",
        "# a comment: peagle models",
        "peagle   deploy qwen3-coder --dry-run   # the plan, K=3",
        "peagle bench my-endpoint \\",
        "    --concurrency 1,8 --out 'a # b/'",
        ".venv/bin/peagle status",
        "cat request.json | peagle invoke my-endpoint --payload -",
        'eval "$(peagle openai my-endpoint --export)"',
        "peagle recover NAME          # or: peagle recover --all",
        "docker run --rm peagle-vllm --print-args",
        "pip wheel peagle-deploy",
        "AWS_REGION=eu-west-1 peagle status",
        "```",
        "```console",
        "$ peagle sweep qwen3-coder --budget 1 --yes",
        "error: over --budget",
        "(exit 2)",
        "$ peagle status",
        "peagle-x  InService",
        "```",
        "```yaml",
        "      - run: peagle cleanup --expired --yes --json",
        "        run: pip install peagle-deploy",
        "```",
        "```python",
        'subprocess.run(["peagle", "status"])',
        "```",
        "```text",
        "peagle models",
        "```",
    ]) + "\n", encoding="utf-8")
    found = [(line.line, line.command, line.shown_exit) for line in extract(page, "page.md")]
    assert found == [
        (4, "peagle deploy qwen3-coder --dry-run", None),
        (5, "peagle bench my-endpoint --concurrency 1,8 --out 'a # b/'", None),
        (7, ".venv/bin/peagle status", None),
        (8, "cat request.json | peagle invoke my-endpoint --payload -", None),
        (9, 'eval "$(peagle openai my-endpoint --export)"', None),
        (10, "peagle recover NAME", None),
        (10, "peagle recover --all", None),
        (13, "AWS_REGION=eu-west-1 peagle status", None),
        (16, "peagle sweep qwen3-coder --budget 1 --yes", 2),
        (19, "peagle status", None),
        (23, "peagle cleanup --expired --yes --json", None),
    ]


# the runner ---------------------------------------------------------------------------------------------------

@dataclass
class Outcome:
    command: str  # what ran, after the replacements
    code: int
    stdout: str
    stderr: str


class Runs:
    """Runs a group's lines once (on first use), in order; the tests read their outcomes. Groups that name the
    same `state` share one emulator state, set up once with all their endpoints."""

    def __init__(self, emulator, vllm, vllm_off, tmp_path_factory):
        self.emulator, self.vllm, self.vllm_off, self.tmp = emulator, vllm, vllm_off, tmp_path_factory
        self.done: dict[str, list[Outcome] | BaseException] = {}
        self.state: str | None = None  # the emulator state set up last
        self.folders: dict[str, Path] = {}  # each group's working folder, as its lines left it

    def of(self, group: Group, *, credentials: bool = True) -> list[Outcome]:
        """The group's outcomes: with the emulator's credentials, or (`credentials` false) as a reader without an
        AWS account runs the same lines, after them, in a copy of their folder (what they wrote is there)."""
        key = group.name if credentials else f"{group.name} (no credentials)"
        if key not in self.done:
            try:
                if not credentials:
                    self.of(group)
                self.done[key] = self._run(group, credentials=credentials)
            except Exception as exc:  # noqa: BLE001 - every line of the group reports it, the set-up runs once
                self.done[key] = exc
        done = self.done[key]
        if isinstance(done, BaseException):
            raise done
        return done

    def _env(self, folder: Path, *, credentials: bool = True) -> dict[str, str]:
        """The emulator's environment (its endpoint and fake credentials); without credentials, a reader's with no
        AWS account: an empty HOME (no ~/.aws) and no AWS variable but the one that says this is no EC2 instance
        (botocore would otherwise ask the instance metadata service, a network call), and the prompt sets the
        README's set-up fetched."""
        if not credentials:
            home = folder / "home"
            home.mkdir(exist_ok=True)
            from peagle_deploy.bench.benchmark_sets import cache_dir

            return {"PATH": os.environ.get("PATH", os.defpath), "HOME": str(home), "NO_COLOR": "1", "COLUMNS": "200",
                    "PEAGLE_STATE_DIR": str(folder / "state"), "AWS_EC2_METADATA_DISABLED": "true",
                    "PEAGLE_CACHE_DIR": str(cache_dir())}  # the README's `peagle datasets fetch` was run
        env = {key: value for key, value in self.emulator.env.items()
               if key not in ("HF_MODEL_ID", "PEAGLE_DEBUG") and not key.startswith("SM_VLLM_")}
        env.update(NO_COLOR="1", COLUMNS="200", PEAGLE_STATE_DIR=str(folder / "state"))
        return env

    def _set_up_state(self, group: Group) -> None:
        """A fresh emulator with the endpoints the reader has, made as the reader's own deploy made them."""
        key = group.state or f"group:{group.name}"
        if self.state == key:
            return
        self.state = None
        emu = emptied(self.emulator)
        sharing = [g for g in TABLE.groups if g.state and g.state == group.state] or [group]
        endpoints = {name: options for g in sharing for name, options in g.endpoints.items()}
        folder = self.tmp.mktemp("endpoints")
        for name, options in endpoints.items():
            made = run_cli("deploy", "qwen3-coder", "--name", name, "--role", emu.role_arn, "--yes",
                           *shlex.split(options), env=self._env(folder), cwd=folder)
            assert made.code == 0, f"setting up {name} for {group.doc}: {made.stderr}"
            emu.put_log_lines(name, [SPEC_DECODING],
                              start_ms=int((datetime.now(UTC) - timedelta(minutes=2)).timestamp() * 1000))
        self.state = key

    def _run(self, group: Group, *, credentials: bool = True) -> list[Outcome]:
        emu = self.emulator
        if credentials:
            self._set_up_state(group)
            folder = self.tmp.mktemp(f"doc-{group.name}")
            self.folders[group.name] = folder
        else:  # what the lines with credentials left (a sweep's state, results/*.json), copied
            import shutil

            folder = self.tmp.mktemp(f"doc-{group.name}-no-credentials")
            def left_behind(where: str, names: list[str]) -> list[str]:
                """What a reader without an account would not have: a sweep's folder (the sweep needed an account),
                the endpoints' files; the stand-in vllm and models are made again below."""
                return [name for name in names if name in ("home", "bin", "models", "build") or name.endswith(".lock")
                        or (Path(where, name) / "sweep-state.json").exists()]

            shutil.copytree(self.folders[group.name], folder, dirs_exist_ok=True, symlinks=True, ignore=left_behind)
        env = self._env(folder, credentials=credentials)
        values = {"vllm": self.vllm.url, "vllm_off": self.vllm_off.url, "aws": emu.endpoint_url, "role": emu.role_arn,
                  "folder": str(folder)}
        if group.local:
            from peagle_deploy.testing.vllm_stand_in import install

            from .local_helpers import free_port, model_dirs

            install(folder / "bin")
            target, drafter = model_dirs(folder / "models")
            values.update(target=str(target), drafter=str(drafter), port=str(free_port()))
            env["PATH"] = f"{folder / 'bin'}{os.pathsep}{env.get('PATH', '')}"
        for name in group.files:
            (folder / name).write_text(TABLE.files[name], encoding="utf-8")
        self.serving: subprocess.Popen | None = None
        served_by: int | None = None  # the index of the line that started it
        outcomes: list[Outcome] = []
        try:
            for command in group.run:
                outcomes.append(self._one(command, group, values, env, folder))
                if self.serving is not None and served_by is None:
                    served_by = len(outcomes) - 1
        finally:
            if group.local:
                run_cli("local", "stop", env=env, cwd=folder)
            if self.serving is not None and served_by is not None:  # the reader's `kill %1`: it stops cleanly
                self.serving.send_signal(signal.SIGTERM)
                out, err = self.serving.communicate(timeout=120)
                outcomes[served_by] = Outcome(outcomes[served_by].command, self.serving.returncode, out, err)
                self.serving = None
            if not group.state and credentials:
                self.state = None  # its lines may have changed what the next group would find
        return outcomes

    def _serve(self, text: str, env: dict[str, str], folder: Path) -> Outcome:
        """docs/ci.md's `python -m peagle_deploy.testing serve ... &`: started in the background as the reader starts
        it; its export lines (its --env-file) then replace the AWS settings of the group's later lines."""
        argv = shlex.split(text.rstrip(" &"))
        argv[0] = sys.executable
        if "--env-file" not in argv:
            argv += ["--env-file", "emulator.env"]
        env_file = folder / argv[argv.index("--env-file") + 1]
        proc = subprocess.Popen(argv, cwd=folder, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)
        deadline = time.monotonic() + 300  # importing moto on a loaded machine: a bound on a hang, not a speed
        while not env_file.exists():
            if proc.poll() is not None or time.monotonic() > deadline:
                proc.kill()
                out, err = proc.communicate()
                return Outcome(text, proc.returncode if proc.returncode is not None else -1, out, err)
            time.sleep(0.1)
        for key in [key for key in env if key.startswith("AWS_")]:
            del env[key]
        for line in env_file.read_text(encoding="utf-8").splitlines():
            name, _, value = line.removeprefix("export ").partition("=")
            env[name] = shlex.split(value)[0]
        self.serving = proc
        return Outcome(text, 0, "", "")

    def _one(self, command: str, group: Group, values: dict[str, str], env: dict[str, str], folder: Path) -> Outcome:
        expect = TABLE.expect.get(command, {})
        text = command
        replace = {**group.replace, **expect.get("replace", {})}
        for key in sorted(replace, key=len, reverse=True):
            text = text.replace(key, replace[key].format(**values))
        extra = expect["append"] if "append" in expect else _append_rule(command, group)
        if extra:
            text = f"{text} {extra.format(**values)}"
        if EMULATOR.match(text):  # the emulator's shell entry point: this Python's, as the reader's venv has it
            text = re.sub(r"^\S*python3?(?= )", sys.executable, text)
            if shlex.split(text)[3:4] == ["serve"]:
                return self._serve(text, env, folder)
        if (_SHELL.search(re.sub(r"'[^']*'", "", text)) or re.match(r"[A-Za-z_]\w*=", text)  # or NAME=value peagle
                or EMULATOR.match(text)):
            then = f" && {expect['then']}" if "then" in expect else ""
            shell_env = {**env, "PATH": f"{Path(forked_peagle()).parent}{os.pathsep}{env.get('PATH', '')}"}
            done = subprocess.run(["bash", "-c", f"set -o pipefail; {text}{then}"], cwd=folder, env=shell_env,
                                  stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=300)
            return Outcome(text, done.returncode, done.stdout, done.stderr)
        argv = shlex.split(text)
        assert argv[0] == "peagle" or argv[0].endswith("/peagle"), text
        answer = expect.get("terminal")
        result = run_cli(*argv[1:], env=env, cwd=folder, stdin=f"{answer}\n" if answer else "",
                         terminal=answer is not None)
        return Outcome(text, result.code, result.stdout, result.stderr)


def _append_rule(command: str, group: Group) -> str:
    rules = {**TABLE.append, **group.append}
    keys = [key for key in rules if command == key or command.startswith(key + " ")]
    return rules[max(keys, key=len)] if keys else ""


@pytest.fixture(scope="module")
def runs(emulator_server, tmp_path_factory):
    from peagle_deploy.testing.fake_vllm import FakeVllm

    with FakeVllm() as vllm, FakeVllm(accepted_per_request=()) as vllm_off:
        yield Runs(emulator_server, vllm, vllm_off, tmp_path_factory)


def _cases():
    cases = []
    for group in TABLE.groups:
        lines = {line.command: line for line in _runnable(group.doc)}
        for index, command in enumerate(group.run):
            where = lines[command].where if command in lines else f"{group.doc}:?"
            bug = TABLE.expect.get(command, {}).get("xfail")
            marks = [pytest.mark.xfail(strict=True, reason=bug)] if bug else []
            cases.append(pytest.param(group, index, id=f"{where} {command[:70]}", marks=marks))
    return cases


@pytest.mark.parametrize("group,index", _cases())
def test_documented_line_runs(group, index, runs):
    outcome = runs.of(group)[index]
    command = group.run[index]
    expected = TABLE.expect.get(command, {}).get("exit", 0)
    shown = (f"{command}\nran: {outcome.command}\nexit {outcome.code}\nstdout: {outcome.stdout[-2000:]}\n"
             f"stderr: {outcome.stderr[-3000:]}")
    assert outcome.code == expected, shown
    output = outcome.stdout + outcome.stderr
    assert "Traceback" not in output and not UNEXPECTED.search(output), shown
    shows = TABLE.expect.get(command, {}).get("shows")
    assert shows is None or re.search(shows, " ".join(output.split())), f"the docs say it shows /{shows}/\n{shown}"


def _needs_no_account(command: str, group: Group, index: int) -> bool:
    """Whether the docs say this line runs without an AWS account (the table's [without_credentials] patterns), or
    it comes after docs/ci.md's `serve`, whose export lines give the shell the emulator's credentials."""
    served = any(EMULATOR.match(line) and " serve " in f"{line} " for line in group.run[:index])
    return served or any(re.search(pattern, command) for pattern in TABLE.without_credentials)


@pytest.mark.parametrize("group,index", _cases())
def test_documented_line_without_credentials(group, index, runs):
    """Every documented line again, as a reader without an AWS account runs it (HOME empty, no AWS variables, in a
    copy of what the lines with credentials left): a line the docs say needs no account runs as the docs say;
    every other stops at once with one error line naming the credentials it needs (exit 2 or 3)."""
    outcome = runs.of(group, credentials=False)[index]
    command = group.run[index]
    expect = {**TABLE.expect.get(command, {}), **TABLE.expect.get(command, {}).get("without_credentials", {})}
    shown = (f"{command}\nran without credentials: {outcome.command}\nexit {outcome.code}\n"
             f"stdout: {outcome.stdout[-1500:]}\nstderr: {outcome.stderr[-2000:]}")
    output = outcome.stdout + outcome.stderr
    assert "Traceback" not in output and not UNEXPECTED.search(output), shown
    if "exit" in TABLE.expect.get(command, {}).get("without_credentials", {}) or _needs_no_account(command, group,
                                                                                                     index):
        assert outcome.code == expect.get("exit", 0), shown  # runs, as the docs say
        return
    errors = [line for line in outcome.stderr.splitlines() if line.startswith("error: ")]
    assert outcome.code in (2, 3) and len(errors) == 1 and "credentials" in errors[0], shown
    assert sum("credentials" in line for line in outcome.stderr.splitlines()) == 1, shown  # said once
    assert not [line for line in outcome.stderr.splitlines() if line.startswith("warning: ")], shown
