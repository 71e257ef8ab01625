"""Every bad input, through the installed `peagle` executable, against an emulated AWS.

Each file `tests/bad_input_cases/<area>.py` defines `CASES`, a list of dicts:

    dict(id="unique-in-file", argv=["deploy", "qwen3-coder", "--k", "0"], exit=2,
         stderr=r"regex searched in the one stderr line",
         env={"VAR": "value", "OTHER": None},   # optional; None removes the variable
         stdin="text",                          # optional; default: no input (not a terminal)
         files={"rel/path": "content"},         # optional; written into the case's folder first
                                                # ("<dir>": a folder, "<fifo>": a named pipe there)
         aws_write=False)                       # optional; True: the case may write to AWS

Each case runs in its own empty folder (its working directory) with the emulator's environment
(fake credentials, AWS_ENDPOINT_URL). In argv, env values and file contents, `{tmp}` is that folder,
`{endpoint_url}` the emulator's URL and `{role}` a role ARN it accepts. The emulator already holds
`someone-elses-endpoint`: an endpoint, config and model without peagle's tags, and `peagle-autoscaled`: a
peagle endpoint (qwen3-coder, P-EAGLE K=3, 1 x ml.g7e.2xlarge, autoscaled 1:4 on concurrency 8) that
`peagle update` cases change nothing of.

Asserted for every case: the exit code; exactly one non-empty stderr line, matching the regex and
starting with `error: `; no traceback; no AWS write (the emulator's write recorder, keyed by a
per-case AWS_SDK_UA_APP_ID); and with `--json`, stdout is exactly one JSON document, which for a
failure is `{"error": {"message", "hint", "exit_code", "kind"}}` with the same exit code.
How each case runs: the first case of each file runs the installed executable itself (`THROUGH_EXECUTABLE`); a
case whose folder holds a named pipe runs forked
(`forked_peagle()`, tests/forked_peagle.py: a command that opened the pipe would wait for a writer, and only a
process can be stopped after TIMEOUT_S); every other case runs in this process (tests/cli_runner.py: its own
environment, folder, stdin, captured stdout and stderr, exit code; an exception that escapes is printed as the
interpreter would, so "no traceback" still holds), since what is asserted is the command's answer, not its
process. The processes run in parallel (PEAGLE_TABLE_WORKERS, default 4) while the in-process cases run in this
thread. PEAGLE_TABLE_EXECUTABLE=1 runs every case through the executable, PEAGLE_TABLE_FORKED=1 every case not
run by the executable forked (as before issue 48). Each hint, followed (test_every_hint_works_when_followed), runs
in this process too (the few whose folder holds a named pipe run forked, under TIMEOUT_S).
"""

from __future__ import annotations

import functools
import importlib.util
import json
import os
import re
import subprocess
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest

from .conftest import PEAGLE
from .forked_peagle import forked_peagle

CASE_DIR = Path(__file__).resolve().parent / "bad_input_cases"
KEYS = {"id", "argv", "exit", "stderr", "env", "stdin", "files", "aws_write"}
README_EXIT_CODES = {0, 1, 2, 3, 4, 5, 6, 130}
TIMEOUT_S = 120


def load_cases() -> list[tuple[str, dict]]:
    cases = []
    for path in sorted(CASE_DIR.glob("*.py")):
        if path.name.startswith("_"):
            continue
        spec = importlib.util.spec_from_file_location(f"bad_input_cases_{path.stem}", path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        cases.extend((f"{path.stem}:{case.get('id')}", case) for case in module.CASES)
    return cases


CASES = load_cases()
THROUGH_EXECUTABLE = {next(case_id for case_id, _ in CASES if case_id.startswith(area + ":"))
                      for area in {case_id.split(":", 1)[0] for case_id, _ in CASES}}


@dataclass
class Outcome:
    code: int | None
    stdout: str
    stderr: str
    writes: list[str]
    seconds: float
    folder: str = ""


def _fill(value: str, tmp: Path, emulator) -> str:
    return (value.replace("{tmp}", str(tmp)).replace("{endpoint_url}", emulator.endpoint_url)
            .replace("{role}", emulator.role_arn))


def _prepare(case_id: str, case: dict, emulator, root: Path) -> tuple[Path, str, dict, list[str]]:
    """The case's own folder (with its files), its caller id, environment and argv."""
    tmp = root / re.sub(r"[^\w.-]", "_", case_id)
    tmp.mkdir()
    for rel, content in (case.get("files") or {}).items():
        target = tmp / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        if content in ("<dir>", "<fifo>"):
            target.mkdir() if content == "<dir>" else os.mkfifo(target)
        elif isinstance(content, bytes):
            target.write_bytes(content)
        else:
            target.write_text(_fill(content, tmp, emulator), encoding="utf-8")
    caller = "case-" + re.sub(r"[^A-Za-z0-9-]", "-", case_id)[:40] + f"-{abs(hash(case_id)) % 10**6}"
    env = {**emulator.env, "AWS_SDK_UA_APP_ID": caller, "NO_COLOR": "1", "HOME": str(tmp)}
    env.pop("PEAGLE_DEBUG", None)
    for key, value in (case.get("env") or {}).items():
        if value is None:
            env.pop(key, None)
        else:
            env[key] = _fill(value, tmp, emulator)
    return tmp, caller, env, [_fill(a, tmp, emulator) for a in case["argv"]]


def _how(case_id: str, case: dict) -> str:
    """"executable", "forked" or "in-process" (see the module docstring)."""
    if case_id in THROUGH_EXECUTABLE or os.environ.get("PEAGLE_TABLE_EXECUTABLE") == "1":
        return "executable"
    if "<fifo>" in (case.get("files") or {}).values() or os.environ.get("PEAGLE_TABLE_FORKED") == "1":
        return "forked"
    return "in-process"


def _run_case(case_id: str, case: dict, emulator, root: Path) -> Outcome:
    """The case as a process: the installed executable or forked (`_how`)."""
    tmp, caller, env, argv = _prepare(case_id, case, emulator, root)
    start = time.monotonic()
    code, out, err = _run(PEAGLE if _how(case_id, case) == "executable" else forked_peagle(), argv, tmp, env,
                          case.get("stdin"))
    return Outcome(code, out, err, emulator.recorder.writes(caller), time.monotonic() - start, str(tmp))


def _run_case_in_process(case_id: str, case: dict, emulator, root: Path) -> Outcome:
    """The case in this process (tests/cli_runner.py: its own environment, folder, stdin and module state); an
    exception that escapes `main` ends it as the interpreter would: its traceback on stderr, exit 1."""
    import traceback

    from .cli_runner import run_cli

    tmp, caller, env, argv = _prepare(case_id, case, emulator, root)
    start = time.monotonic()
    try:
        got = run_cli(*argv, env=env, cwd=tmp, stdin=case.get("stdin") or "")
        code, out, err = got.code, got.stdout, got.stderr
    except Exception:  # noqa: BLE001 - what the interpreter prints for it is what the table asserts on
        code, out, err = 1, "", traceback.format_exc()  # run_cli put this process back before it left
    return Outcome(code, out, err, emulator.recorder.writes(caller), time.monotonic() - start, str(tmp))


def _run(program: str, argv: list[str], cwd: Path, env: dict, stdin: str | None) -> tuple[int | None, str, str]:
    try:
        proc = subprocess.run([program, *argv], cwd=cwd, env=env, capture_output=True, text=True, timeout=TIMEOUT_S,
                              input=stdin, stdin=None if stdin is not None else subprocess.DEVNULL)
        return proc.returncode, proc.stdout, proc.stderr
    except subprocess.TimeoutExpired as exc:
        return None, str(exc.stdout or ""), f"timed out after {TIMEOUT_S}s"


@pytest.fixture(scope="module")
def outcomes(emulator_server, request):
    """Run every selected case once (`-k` selects), in parallel, before the per-case assertions."""
    from peagle_deploy.testing import seed_jumpstart_bucket

    if not Path(PEAGLE).exists():
        pytest.fail(f"the installed peagle executable is missing: {PEAGLE} (pip install -e .)")
    emulator_server.reset()
    seed_jumpstart_bucket(emulator_server.client("s3"), emulator_server.region)
    emulator_server.create_endpoint_stack("someone-elses-endpoint")
    from .cli_runner import run_cli

    seeded = run_cli("deploy", "qwen3-coder", "--name", "peagle-autoscaled", "--autoscale", "1:4", "--target-concurrency",
                     "8", "--role", emulator_server.role_arn, "--yes",
                     env={**emulator_server.env, "AWS_SDK_UA_APP_ID": "table-seed"})  # set-up: in this process
    assert seeded.code == 0, seeded.stderr
    selected = {item.callspec.params["case_id"] for item in request.session.items
                if item.originalname == "test_bad_input" and item.module is request.module}
    workers = int(os.environ.get("PEAGLE_TABLE_WORKERS", "4"))
    with tempfile.TemporaryDirectory(prefix="peagle-bad-inputs-") as root, ThreadPoolExecutor(workers) as pool:
        futures = {case_id: pool.submit(_run_case, case_id, case, emulator_server, Path(root))
                   for case_id, case in CASES if case_id in selected and _how(case_id, case) != "in-process"}
        done = {case_id: _run_case_in_process(case_id, case, emulator_server, Path(root))
                for case_id, case in CASES if case_id in selected and _how(case_id, case) == "in-process"}
        done.update((case_id, future.result()) for case_id, future in futures.items())
        yield done


@functools.cache
def _root_command():
    """peagle's click command tree, built once (Typer builds it anew on each call: 40 ms)."""
    import typer.main

    from peagle_deploy.cli.app import app

    return typer.main.get_command(app)


def _options(argv: list[str]) -> dict[str, bool]:
    """The options of the command `argv` runs: flag -> whether it takes a value."""
    command = _root_command()
    for arg in argv:
        sub = getattr(command, "commands", {}).get(arg)
        if sub is None:
            break
        command = sub
    return {opt: not (param.is_flag or getattr(param, "count", False)) for param in command.params
            for opt in [*getattr(param, "opts", []), *getattr(param, "secondary_opts", [])] if opt.startswith("--")}


@pytest.fixture(scope="module")
def hints(outcomes, emulator_server):
    """Every case's hint followed (hint_follow.follow), each follow-up run in this process."""
    from .hint_follow import follow

    plans = {}
    for case_id, case in CASES:
        got = outcomes.get(case_id)
        lines = [ln for ln in (got.stderr.splitlines() if got else []) if ln.startswith("error: ")]
        if not lines:
            continue
        for n, followup in enumerate(follow(case["argv"], lines[0], _options(case["argv"]), folder=got.folder)):
            argv = followup.argv
            if {"--watch", "-w"} & set(argv):  # a fixed `status --watch` runs until Ctrl-C: test_output_piped.py watches it
                continue
            # what a followed hint then does for real is not the question: --dry-run where the command has one (a
            # sweep would deploy seven endpoints), but for the checks only a real run makes (the price guard)
            if ("--dry-run" in _options(argv) and "--dry-run" not in argv and "--resume" not in argv
                    and not {"--max-price-per-hour", "--yes"} & set(followup.edited)):
                argv = [*argv, "--dry-run"]
            plans[f"{case_id}~hint{n}"] = (case_id, lines[0], followup, {**case, "argv": argv})
    # In this process, one after another: what a hint is checked for is the command's answer (exit code, error
    # line), not a process of its own (the cases themselves ran as processes). Cases with a named pipe run forked:
    # a command that opened one would wait for a writer, and only a process can be stopped after TIMEOUT_S.
    results = {}
    with tempfile.TemporaryDirectory(prefix="peagle-hints-") as root:
        # cleanup follow-ups delete what the others may use (peagle-autoscaled): they run last
        for last in (False, True):
            for key, (_, _, _, derived) in plans.items():
                if (derived["argv"][:1] == ["cleanup"]) != last:
                    continue
                fifo = "<fifo>" in (derived.get("files") or {}).values()
                run = _run_case if fifo else _run_case_in_process
                results[key] = (*plans[key][:3], run(key, derived, emulator_server, Path(root)))
        yield results


def test_every_hint_works_when_followed(hints):
    """Every hint that says what to run or change (tests/hint_follow.py), followed as written, is accepted, or at
    least gets past that error: a new error is about something else (`--ttl 0` once hinted `0s`, refused next)."""
    from .hint_follow import split_line

    broken = []
    for key, (case_id, line, followup, got) in sorted(hints.items()):
        new = next((ln for ln in got.stderr.splitlines() if ln.startswith("error: ")), "")
        same = new == line or any(re.search(re.escape(flag) + r"\b", split_line(new)[0]) for flag in followup.edited)
        if got.code != 0 and (same or not new):
            broken.append(f"{case_id}: {line!r} -> peagle {' '.join(followup.argv)} -> exit {got.code}: "
                          f"{(new or got.stderr)[:300]!r}")
    assert not broken, "hints that do not work when followed:\n" + "\n".join(broken)
    assert len(hints) >= 100, len(hints)  # the table's hints are mostly concrete (a value, a command)


def test_hints_name_only_options_their_command_has(outcomes):
    """A hint never advises an option its command lacks (`update ''` and `logs ''` advised `--name`)."""
    from .hint_follow import named_options, split_line

    wrong = []
    for case_id, case in CASES:
        got = outcomes.get(case_id)
        line = next((ln for ln in (got.stderr.splitlines() if got else []) if ln.startswith("error: ")), None)
        if line is None:
            continue
        options = _options(case["argv"])
        if not options:  # an unknown command: its hint names the root's help
            continue
        missing = [opt for opt in named_options(split_line(line)[1]) if opt not in options]
        if missing:
            wrong.append(f"{case_id}: {line!r} names {missing}, which {' '.join(case['argv'][:2])} does not have")
    assert not wrong, "\n".join(wrong)


def test_cases_are_well_formed():
    ids = [case_id for case_id, _ in CASES]
    assert len(ids) == len(set(ids)), sorted({i for i in ids if ids.count(i) > 1})
    assert len(CASES) >= 80, len(CASES)
    for case_id, case in CASES:
        assert set(case) <= KEYS and {"id", "argv", "exit", "stderr"} <= set(case), (case_id, sorted(case))
        assert case["exit"] in README_EXIT_CODES - {0}, case_id
        assert isinstance(case["argv"], list) and all(isinstance(a, str) for a in case["argv"]), case_id
        re.compile(case["stderr"])


@pytest.mark.parametrize("case_id,case", CASES, ids=[case_id for case_id, _ in CASES])
def test_bad_input(case_id, case, outcomes):
    got = outcomes[case_id]
    shown = f"exit {got.code}\nstdout: {got.stdout[:2000]}\nstderr: {got.stderr[:4000]}"
    assert "Traceback" not in got.stderr + got.stdout, shown
    assert got.code == case["exit"], shown
    lines = [line for line in got.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, shown
    assert lines[0].startswith("error: "), shown
    assert re.search(case["stderr"], lines[0]), f"{case['stderr']!r} not in {lines[0]!r}"
    assert " None" not in lines[0] and "None " not in lines[0], lines[0]
    if not case.get("aws_write", False):
        assert got.writes == [], f"bad input wrote to AWS: {got.writes}"
    if "--json" in case["argv"]:
        document = json.loads(got.stdout)  # exactly one document: json.loads refuses trailing data
        if "error" in document:
            assert document["error"]["exit_code"] == got.code, document
            assert set(document["error"]) == {"message", "hint", "exit_code", "kind"}, document
