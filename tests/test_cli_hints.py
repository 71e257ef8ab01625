"""Hints that send users somewhere: a failure's hint names only options and arguments the running command has,
and says what the command accepts (issue 37 item 5)."""

from __future__ import annotations

import re

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
