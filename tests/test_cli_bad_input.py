"""Every bad input to `peagle deploy`: one line naming the fix, exit 2, no traceback, no AWS call."""

import pytest

from .cli_runner import run_cli


@pytest.fixture(autouse=True)
def no_aws(monkeypatch):
    """Record any AWS client the command asks for: bad input must not reach AWS at all."""
    from peagle_deploy import aws

    calls = []
    monkeypatch.setattr(aws.AwsSession, "client", lambda self, service, **kw: calls.append(service))
    yield calls
    assert calls == [], f"bad input reached AWS: {calls}"


CASES = [
    (["qwen3-codr"], "unknown model 'qwen3-codr': did you mean 'qwen3-coder'?"),
    (["qwen3-coder", "--k", "0"], "--k must be at least 1"),
    (["qwen3-coder", "--k", "-2"], "--k must be at least 1"),
    (["qwen3-coder", "--k", "seven"], "--k 'seven' is not a whole number: pass e.g. --k 3"),
    (["qwen3-coder", "--k", "19"], "--k 19 is deeper than the qwen3-coder drafter was trained for (18): pass --k 1..18"),
    (["gpt-oss-20b", "--k", "11"], "trained for (10)"),
    (["qwen3-coder", "--mode", "turbo"], "--mode 'turbo' is not a mode: pass --mode p-eagle, eagle3, dflash or off"),
    (["qwen3-coder", "--mode", "off", "--k", "3"], "--k has no effect with --mode off"),
    (["qwen3-coder", "--instance-type", "ml.p5.48xlarge"], "is not an ml.g7e instance"),
    (["qwen3-coder", "--instance-count", "0"], "--instance-count must be at least 1"),
    (["qwen3-coder", "--instance-count", "two"], "--instance-count 'two' is not a whole number: pass e.g. --instance-count 1"),
    (["qwen3-coder", "--role", "my-role"], "--role 'my-role' is not an IAM role ARN"),
    (["qwen3-coder", "--role", "arn:aws:iam::12345:role/x"], "is not an IAM role ARN"),
    (["qwen3-coder", "--name", "a" * 64], "is 64 characters; SageMaker allows 63"),
    (["qwen3-coder", "--name", "bad_name"], "breaks SageMaker's naming rules"),
    (["qwen3-coder", "--name", "-lead"], "breaks SageMaker's naming rules"),
    (["gemma-4-31b"], "gated by a licence (EULA): read the model licence, then pass --accept-eula"),
    (["qwen3-coder", "--env", "NOEQUALS"], "--env 'NOEQUALS' is not KEY=VALUE"),
    (["qwen3-coder", "--env", "1BAD=x"], "is not a valid variable name"),
    (["qwen3-coder", "--env", "BIG=" + "x" * 1025], "1025 bytes; SageMaker allows 1024"),
    (["qwen3-coder", "--tag", "novalue"], "--tag 'novalue' is not KEY=VALUE"),
    (["qwen3-coder", "--tag", "peagle:managed=false"], "reserved prefix"),
    (["qwen3-coder", "--tag", "k=bad#char"], "characters AWS tags do not allow"),
    (["qwen3-coder", "--ttl", "soon"], "--ttl 'soon' is not a duration"),
    (["qwen3-coder", "--ttl", "0h"], "--ttl '0h' is shorter than 15m"),
    (["qwen3-coder", "--ttl", "45d"], "is longer than 30d"),
    (["qwen3-coder", "--frobnicate"], "No such option"),
]


@pytest.mark.parametrize("args,expected", CASES, ids=[" ".join(a)[:40] for a, _ in CASES])
def test_bad_input_is_one_line_exit_2(args, expected):
    result = run_cli("deploy", *args, "--dry-run", "--offline")
    assert result.code == 2, result
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("error: ")
    assert expected in lines[0]
    assert "Traceback" not in result.stderr and result.stdout == ""


def test_json_mode_bad_input_prints_one_error_document():
    import json

    result = run_cli("deploy", "nope", "--dry-run", "--json")
    assert result.code == 2
    assert json.loads(result.stdout) == {"error": {
        "message": "unknown model 'nope'", "exit_code": 2, "kind": "usage",
        "hint": "choose one of gemma-4-31b, gpt-oss-120b, gpt-oss-20b, qwen3-coder (see peagle models)"}}


def test_region_without_jumpstart_bucket_is_bad_input():
    result = run_cli("deploy", "qwen3-coder", "--region", "mars-north-1", "--dry-run", "--offline")
    assert result.code == 2 and result.stderr.count("\n") == 1
    assert "region 'mars-north-1' has no JumpStart bucket: pass a --region JumpStart serves" in result.stderr


def test_instance_type_outside_the_spec_list_is_bad_input():
    result = run_cli("deploy", "gpt-oss-20b", "--instance-type", "ml.g7e.48xlarge", "--dry-run", "--offline")
    assert result.code == 2 and result.stderr.count("\n") == 1
    assert "the gpt-oss-20b JumpStart spec does not support ml.g7e.48xlarge: choose one of" in result.stderr
