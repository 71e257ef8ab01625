"""Hints that send users somewhere: a failure's hint names only options and arguments the running command has,
and says what the command accepts (issue 37 item 5)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import typer.main
from peagle_deploy.cli.app import app
from peagle_deploy.cli.common import WITHOUT_AWS

from .cli_runner import run_cli

ROLE = "arn:aws:iam::123456789012:role/peagle"
FLAG = re.compile(r"(?<![\w-])--[a-z][a-z0-9-]*")


def command(path: str):
    """The Click command of 'peagle PATH' ('bench agree')."""
    found = typer.main.get_command(app)
    for name in path.split():
        found = found.commands[name]
    return found


def flags_of(path: str) -> set[str]:
    return {opt for param in command(path).params for opt in (*param.opts, *param.secondary_opts)} | {"--help"}


def error_line(stderr: str) -> str:
    [line] = [line for line in stderr.splitlines() if line.startswith("error: ")]
    return line


# every command that reaches AWS with no credentials, as a user would type it (built-in prompt sets: no network)
NO_CREDENTIALS = [
    ("deploy", ["deploy", "qwen3-coder", "--role", ROLE, "--yes"]),
    ("update", ["update", "prod", "--k", "5", "--yes"]),
    ("update", ["update", "prod", "--k", "5", "--dry-run"]),
    ("status", ["status"]),
    ("status", ["status", "prod"]),
    ("cleanup", ["cleanup", "prod", "--yes"]),
    ("cleanup", ["cleanup", "--all", "--yes"]),
    ("recover", ["recover", "prod"]),
    ("invoke", ["invoke", "prod", "hi"]),
    ("openai", ["openai", "prod"]),
    ("metrics", ["metrics", "prod"]),
    ("logs", ["logs", "prod"]),
    ("bench run", ["bench", "prod", "--dataset", "code", "-n", "1"]),
    ("bench agree", ["bench", "agree", "base", "cand", "--dataset", "code", "--num-prompts", "1"]),
]


@pytest.mark.parametrize(("path", "argv"), NO_CREDENTIALS, ids=[" ".join(argv) for _, argv in NO_CREDENTIALS])
def test_no_credentials_hint_names_only_the_commands_own_options(no_aws, tmp_path, path, argv):
    done = run_cli(*argv, cwd=tmp_path)
    assert done.code == 3, done.stderr
    line = error_line(done.stderr)
    assert "configure them (aws configure, AWS_PROFILE, or environment variables)" in line
    named = set(FLAG.findall(line))
    assert named <= flags_of(path), f"{line!r} names {named - flags_of(path)}, which 'peagle {path}' does not have"
    way = WITHOUT_AWS.get(path)
    assert (way in line) if way else (" or " not in line.partition("environment variables)")[2]), line
    assert list(tmp_path.iterdir()) == []  # no empty --out (peagle-bench) left behind


def test_each_way_without_aws_names_a_real_command_and_its_own_flags():
    for path, way in WITHOUT_AWS.items():
        assert set(FLAG.findall(way)) <= flags_of(path), (path, way)


@pytest.mark.parametrize(("name", "says"), [
    ("", "NAME is empty: pass the endpoint's name"),
    ("bad_name!", "name 'bad_name!' breaks SageMaker's naming rules: use letters, digits and"),
    ("http://127.0.0.1:8000", "'http://127.0.0.1:8000' is a URL; peagle openai takes a SageMaker endpoint's name"),
    ("https://runtime.sagemaker.us-east-1.amazonaws.com/endpoints/prod/openai/v1", "run 'peagle openai prod'"),
])
def test_openai_says_it_takes_an_endpoint_name_never_a_url(no_aws, tmp_path, name, says):
    done = run_cli("openai", name, cwd=tmp_path)
    assert done.code == 2
    line = error_line(done.stderr)
    assert says in line and "http(s)://host:port" not in line, line


@pytest.mark.parametrize("argv", [
    ["deploy", "qwen3-coder", "--dry-run"],
    ["update", "prod", "--dry-run"],
    ["sweep", "qwen3-coder", "--dry-run"],
    ["bench", "http://127.0.0.1:9", "-n", "1"],
], ids=lambda argv: argv[0])
@pytest.mark.parametrize(("typed", "says"), [
    ("ml.g7e.2xlarge ", "--instance-type 'ml.g7e.2xlarge ' has spaces around the instance type"),
    ("\tml.g7e.2xlarge", "--instance-type '\\tml.g7e.2xlarge' has spaces around the instance type"),
    ("ml.g7e.2xlarge\u200b", "--instance-type 'ml.g7e.2xlarge\\u200b' holds characters that cannot be seen (shown escaped)"),
    ("ML.G7E.2xlarge", "--instance-type 'ML.G7E.2xlarge': SageMaker's instance types are lower case"),
], ids=["trailing-space", "leading-tab", "zero-width", "upper-case"])
def test_an_instance_type_unlike_what_is_used_is_refused_shown_quoted_with_the_fix(no_aws, tmp_path, argv, typed,
                                                                                  says):
    done = run_cli(*argv, "--instance-type", typed, cwd=tmp_path)
    assert done.code == 2, done.stderr
    assert error_line(done.stderr) == f"error: {says}: pass --instance-type ml.g7e.2xlarge"
    assert list(tmp_path.iterdir()) == []  # refused before anything was made


@pytest.mark.parametrize(("typed", "says"), [
    ("ml.g7e.2xlarge;rm -rf /", "holds characters an instance type cannot hold: ';', ' ', '/'"),
    ("ml.g7\u0435.2xlarge", "holds characters an instance type cannot hold: '\\u0435'"),  # a Cyrillic e
    ("ml.g7e.2xlarge\x1b[31m", "holds characters an instance type cannot hold: '\\x1b', '['"),
], ids=["shell", "look-alike", "escape-sequence"])
def test_an_instance_type_with_characters_no_type_holds_names_each_quoted(no_aws, tmp_path, typed, says):
    """Issue 45 item 6: what is wrong is not that they cannot be seen; each is named, escaped where it would not
    print as itself, and nothing reaches a terminal raw."""
    done = run_cli("deploy", "qwen3-coder", "--dry-run", "--instance-type", typed, cwd=tmp_path)
    assert done.code == 2, done.stderr
    line = error_line(done.stderr)
    assert line == f"error: --instance-type {ascii(typed)} {says}: pass a type such as ml.g7e.2xlarge (letters, " \
                   "digits, dots and hyphens)", line
    assert "cannot be seen" not in line and "\x1b" not in line and line.isascii()


# issue 49 item 4: hints that led into a second error ------------------------------------------------------------

def test_bench_agree_names_its_own_component_options_and_the_hint_works(emu, tmp_path):
    """`bench agree` against an endpoint hosting two components told the user to pass `--component`, which it does
    not have; the hint names --baseline-component / --candidate-component, and following it gets past that error."""
    emu.components.create_stack("two", components=2)
    emu.components.create_stack("one")
    done = run_cli("bench", "agree", "one", "two", "--num-prompts", "1", env=emu.env, cwd=tmp_path)
    assert done.code == 2, done.stderr
    line = error_line(done.stderr)
    assert "pick one with --candidate-component NAME" in line and "--component " not in line.replace(
        "--candidate-component", ""), line
    named = set(FLAG.findall(line))
    assert named <= flags_of("bench agree"), line
    followed = run_cli("bench", "agree", "one", "two", "--candidate-component", "two-1", "--num-prompts", "1",
                       env=emu.env, cwd=tmp_path)
    assert "--candidate-component" not in followed.stderr and "inference components (" not in followed.stderr, \
        followed.stderr


def test_update_k_beyond_the_drafter_hints_the_drafters_own_depth(emu, tmp_path):
    """`update NAME --k 40` hinted `1..32` where qwen3-coder's drafter takes at most 18 and gpt-oss-20b's 10: the
    bound is the endpoint's drafter's, read from the endpoint, and the hint's K is accepted."""
    for model, name in (("qwen3-coder", "q"), ("gpt-oss-20b", "g")):
        made = run_cli("deploy", model, "--name", name, "--role", emu.role_arn, "--yes", env=emu.env, cwd=tmp_path)
        assert made.code == 0, made.stderr
    for name, depth in (("q", 18), ("g", 10)):
        done = run_cli("update", name, "--k", "40", "--dry-run", env=emu.env, cwd=tmp_path)
        assert done.code == 2, done.stderr
        line = error_line(done.stderr)
        assert line.endswith(f"pass --k 1..{depth}"), line
        assert run_cli("update", name, "--k", str(depth), "--dry-run", env=emu.env, cwd=tmp_path).code == 0


def test_a_component_deploy_without_capacity_hints_only_what_components_take(emu, tmp_path):
    """A `--scale-to-zero` deploy that met no capacity suggested instance pools or a capacity reservation, both
    refused for inference components; its hint names what a component deploy takes, and following it is not refused
    as input."""
    emu.set_capacity("ml.g7e.2xlarge", 0)
    done = run_cli("deploy", "qwen3-coder", "--name", "z", "--scale-to-zero", "--role", emu.role_arn, "--yes",
                   env=emu.env, cwd=tmp_path)
    assert done.code == 4, done.stderr
    line = error_line(done.stderr)
    assert "list more --instance-type values" not in line and "use a capacity reservation" not in line, line
    assert "--instance-type ml.g7e.4xlarge" in line, line
    followed = run_cli("deploy", "qwen3-coder", "--name", "z", "--scale-to-zero", "--role", emu.role_arn, "--yes",
                       "--instance-type", "ml.g7e.4xlarge", env=emu.env, cwd=tmp_path)
    assert followed.code == 0, followed.stderr


# every hint, found mechanically: the commands a hint names parse, and its options are the command's -------------

def _root():
    import typer.main

    return typer.main.get_command(app)


def _module_options() -> dict[str, set[str]]:
    """peagle_deploy/cli/<module>.py -> every option of the commands it registers (app.COMMANDS)."""
    from peagle_deploy.cli.app import COMMANDS

    root, options = _root(), {}
    for name, (module, _) in COMMANDS.items():
        stack = [root.commands[name]]
        while stack:
            command = stack.pop()
            stack.extend(getattr(command, "commands", {}).values())
            options.setdefault(f"peagle_deploy/cli/{module}.py", set()).update(
                opt for param in command.params for opt in (*param.opts, *param.secondary_opts))
    return options


def test_every_hint_in_the_code_names_only_commands_and_options_that_exist():
    """Each hint of an error peagle raises (found in the source: the hint of every UsageError, QuotaError, ...,
    with the module's constants and both branches of a conditional), as a user would follow it: every `peagle ...`
    command it names parses as the CLI parses it (the command, its options, their values: Click's own parser, with
    NAME and what the code fills in given sample values), and every option it names for the running command is one
    of that command's (in cli/<module>.py, of the module's commands; elsewhere, of some command)."""
    from .hint_follow import NAMED_COMMAND, code_hints, parses

    root, by_module = _root(), _module_options()
    every = set().union(*by_module.values()) | {"--help"}
    hints = code_hints(Path(__file__).resolve().parent.parent)
    assert len(hints) >= 200 and sum(len(h.commands()) for h in hints) >= 60, len(hints)  # the scan found them
    broken = []
    for hint in hints:
        for quoted, bare in NAMED_COMMAND.findall(hint.text):
            why = parses(root, (quoted or bare).strip().rstrip("."), quoted=bool(quoted))
            if why:
                broken.append(f"{hint.where}: {why}")
        own = {flag for flag in hint.own_flags() if not flag.endswith("-")}  # `--target-{metric}`: filled in
        missing = own - (by_module.get(hint.module, every) | {"--help"})
        if missing:
            broken.append(f"{hint.where}: names {sorted(missing)}, which its command does not have: {hint.text!r}")
    assert not broken, "\n".join(broken)


def test_every_command_the_docs_name_parses():
    """Each `peagle ...` the docs name in prose (inline code) or in an error line they show parses as the CLI
    parses it; an error line of a `console` transcript names only options of the command it followed."""
    import re

    from .documented_commands import ROOT, documents
    from .hint_follow import hint_argv, named_options, parses, split_line

    root = _root()
    inline, broken, checked = re.compile(r"`(peagle [^`]+)`"), [], 0
    for path in documents():
        if path.name == "cli.md":  # generated from --help
            continue
        last_command = None
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            where = f"{path.relative_to(ROOT)}:{number}"
            for command in inline.findall(line):
                checked += 1
                if why := parses(root, command, quoted=False):
                    broken.append(f"{where}: {why}")
            if line.startswith("$ peagle "):
                last_command = line[2:]
            elif line.startswith("error: ") and last_command:
                checked += 1
                _, _, command = hint_argv(root, last_command, quoted=True)
                has = {opt for param in command.params for opt in (*param.opts, *param.secondary_opts)}
                missing = set(named_options(split_line(line)[1])) - has - {"--help"}
                if missing:
                    broken.append(f"{where}: the hint names {sorted(missing)}, which {last_command!r} lacks")
    assert checked >= 250, checked
    assert not broken, "\n".join(broken)
