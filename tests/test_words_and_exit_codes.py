"""Exit codes and words that mislead (issue 49 item 8): exit 6 only where something failed, what a region search
says of a NAME, the cleanup question naming everything a component endpoint loses, the verification headline naming
what is not verified, progress without "InService - InService", one default name for a multi-region dry run, one
line without credentials, autoscaled prices, published rows labelled published, an empty RESULT."""

from __future__ import annotations

import json
import re

import pytest

from .cli_runner import run_cli


def one_error(stderr: str) -> str:
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), stderr
    return lines[0]


def deploy(emu, tmp_path, name, *options):
    made = run_cli("deploy", "qwen3-coder", "--name", name, "--role", emu.role_arn, "--yes", *options,
                   env={**emu.env, "COLUMNS": "250"}, cwd=tmp_path)
    assert made.code == 0, made.stderr
    return made


def test_bench_agree_against_a_component_at_zero_is_not_a_failed_endpoint(emu, clocked, tmp_path):
    """Exit 6 says an endpoint or container failed; a component scaled to zero has no capacity now (exit 4), and the
    line says how to wake it."""
    deploy(emu, tmp_path, "off", "--mode", "off")
    deploy(emu, tmp_path, "zero", "--scale-to-zero")
    clocked.advance(300 + 15 * 60 + 120 + 600)  # idle: scaled to zero copies, its instance released
    done = run_cli("bench", "agree", "off", "zero", "--num-prompts", "1", env=emu.env, cwd=tmp_path)
    assert done.code == 4, done.stderr
    line = done.stderr.strip().splitlines()[-1]
    assert "has no copy in service" in line and "peagle invoke zero" in line, line


def test_a_creating_endpoint_is_not_a_failed_one(emu, tmp_path):
    """`openai` on a Creating endpoint exited 6 where `update` exits 2 for the same state: not InService yet is exit
    2 (wait for it); Failed stays 6."""
    emu.script_endpoints(creating_polls=100)
    made = run_cli("deploy", "qwen3-coder", "--name", "slow", "--role", emu.role_arn, "--yes", "--no-wait",
                   env=emu.env, cwd=tmp_path)
    assert made.code == 0, made.stderr
    done = run_cli("openai", "slow", env=emu.env, cwd=tmp_path)
    assert done.code == 2, done.stderr
    assert one_error(done.stderr).startswith("error: endpoint slow is Creating, not InService: wait for it")


def test_a_region_search_for_a_name_says_the_name(emu, tmp_path):
    """`status NAME --region A,B` said `checked us-east-1: nothing of peagle's` while us-east-1 held peagle's
    endpoints (of other names)."""
    deploy(emu, tmp_path, "other")
    emu.seed_region("us-west-2")
    deploy(emu, tmp_path, "wanted", "--region", "us-west-2")
    done = run_cli("status", "wanted", "--region", "us-east-1,us-west-2", env=emu.env, cwd=tmp_path)
    assert done.code == 0, done.stderr
    assert "checked us-east-1: no endpoint named wanted" in done.stdout, done.stdout
    assert "nothing of peagle's" not in done.stdout


def test_the_cleanup_question_names_the_component_and_its_scaling(emu, tmp_path):
    deploy(emu, tmp_path, "zero", "--scale-to-zero")
    done = run_cli("cleanup", "zero", env=emu.env, cwd=tmp_path, stdin="n\n", terminal=True)
    assert done.code == 130, done.stderr
    question = " ".join(done.stderr.split())
    assert re.search(r"Delete zero \(endpoint, endpoint config, model, inference component zero with its scalable "
                     r"target, 2 scaling policies and \d+ alarms\)\?", question), question
    assert emu.endpoint_status("zero") == "InService"  # nothing deleted at a "no"


def test_the_verification_headline_names_what_is_not_verified(emu, tmp_path):
    made = deploy(emu, tmp_path, "c1", "--hosting", "component")
    text = made.stdout
    assert re.search(r"verification: not verified \(vLLM start-up; the other \d+ checks verified\)", text), text
    assert "InService (0s) - InService" not in made.stdout + made.stderr
    assert re.search(r"c1: InService \(0s\)$", made.stderr, re.MULTILINE), made.stderr


def test_a_multi_region_dry_run_shows_one_default_name(no_aws, tmp_path):
    done = run_cli("deploy", "qwen3-coder", "--dry-run", "--json", "--region", "us-east-1,us-west-2", cwd=tmp_path)
    assert done.code == 0, done.stderr
    plans = json.loads(done.stdout)["regions"] if "regions" in json.loads(done.stdout) else None
    names = {p["plan"]["endpoint_name"] for p in plans} if plans else set(re.findall(r'"endpoint_name": "([^"]+)"',
                                                                                         done.stdout))
    assert len(names) == 1, names


@pytest.mark.parametrize("argv", [["invoke", "my-endpoint", "hi"], ["logs", "my-endpoint"]], ids=lambda a: a[0])
def test_without_credentials_it_is_said_once(no_aws, tmp_path, argv):
    done = run_cli(*argv, cwd=tmp_path)
    assert done.code == 3, done.stderr
    assert "no usable AWS credentials" in one_error(done.stderr)


def test_autoscaled_prices_say_unknown_in_words(no_aws, tmp_path):
    done = run_cli("deploy", "qwen3-coder", "--dry-run", "--autoscale", "1:4", "--target-concurrency", "8",
                   env=None, cwd=tmp_path)
    assert done.code == 0, done.stderr
    assert "up to unknown" not in done.stdout
    assert "up to an unknown price" in " ".join(done.stdout.split()), done.stdout


def test_published_rows_are_labelled_published(no_aws, tmp_path):
    done = run_cli("bench", "compare", "--published", "aws-blog", "--json", cwd=tmp_path)
    assert done.code == 0, done.stderr
    tables = json.loads(done.stdout)["published"] if "published" in json.loads(done.stdout) else []
    kinds = {row.get("kind") for table in tables for row in table.get("rows", [])} | {
        table.get("kind") for table in tables}
    assert "measured" not in kinds and "published" in kinds, kinds
    text = run_cli("bench", "compare", "--published", "aws-blog", cwd=tmp_path, env={"COLUMNS": "250"}).stdout
    assert "measured" not in text.lower().replace("measured yourself", ""), text


def test_an_empty_result_argument_is_said_to_be_empty(no_aws, tmp_path):
    done = run_cli("bench", "advise", "", cwd=tmp_path)
    assert done.code == 2, done.stderr
    assert one_error(done.stderr) == ("error: RESULT is empty: pass a path: a results JSON with acceptance data (or use "
                                      "--rates)"), done.stderr


def _options(path: list[str]) -> list[str]:
    import typer.main

    from peagle_deploy.cli.app import app

    command = typer.main.get_command(app)
    for name in path:
        command = command.commands[name]
    return [opt for param in command.params for opt in (*param.opts, *param.secondary_opts) if opt.startswith("--")]


@pytest.mark.parametrize("path", [["deploy"], ["sweep"], ["update"], ["bench", "run"], ["local", "start"]],
                         ids=" ".join)
def test_help_at_80_columns_shows_every_option_name_whole(tmp_path, path):
    """`--help` at 80 columns cut option names (`--capacity-reservation-p…`)."""
    done = run_cli(*path, "--help", env={"COLUMNS": "80", "NO_COLOR": "1", "PATH": "/usr/bin:/bin"}, cwd=tmp_path)
    assert done.code == 0, done.stderr
    assert "…" not in done.stdout.replace("[options]", ""), done.stdout
    shown = set(re.findall(r"--[a-z][a-z0-9-]*", done.stdout))
    assert set(_options(path)) <= shown, set(_options(path)) - shown
    assert max(len(line) for line in done.stdout.splitlines()) <= 80


def test_the_cli_reference_cuts_no_option_name():
    from pathlib import Path

    text = (Path(__file__).resolve().parent.parent / "docs" / "cli.md").read_text(encoding="utf-8")
    assert not re.search(r"--[a-z][a-z0-9-]*…", text)
