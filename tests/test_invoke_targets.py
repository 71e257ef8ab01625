"""`peagle invoke` against the three kinds of target, and every documented error."""

import json
import re
import subprocess

import pytest

from peagle_deploy.errors import ExitCode, PeagleError
from peagle_deploy.runtime import PeagleClient, build_request
from peagle_deploy.runtime.target_ref import parse_target
from peagle_deploy.testing.fake_vllm import FakeVllm

from .cli_runner import run_cli

from .conftest import PEAGLE

TOKENS = ["def", " quick", "sort", "(xs", "):", " ✓"]


@pytest.fixture
def vllm():
    with FakeVllm(TOKENS) as server:
        yield server


@pytest.fixture
def emu(emu_server):
    emu_server.create_endpoint_stack("ep")
    return emu_server


def test_target_kinds():
    assert parse_target("my-endpoint").kind == "sagemaker"
    assert parse_target("http://localhost:8080").kind == "container"
    assert parse_target("https://api.example.com/v1").kind == "openai"
    assert parse_target("http://localhost:8000/v1/").kind == "openai"
    assert parse_target("http://localhost:8000/v1", "container").request_url == "http://localhost:8000/invocations"
    with pytest.raises(PeagleError, match="unsupported target URL"):
        parse_target("ftp://x")


@pytest.mark.parametrize("suffix,path", [("", "/invocations"), ("/v1", "/v1/chat/completions")])
def test_url_targets_same_output_and_stats(vllm, suffix, path):
    client = PeagleClient(vllm.url + suffix)
    assert "".join(client.stream(build_request("sort", max_tokens=64))) == "".join(TOKENS)
    streamed = client.last
    assert vllm.requests[-1]["path"] == path
    sent = vllm.requests[-1]["body"]
    assert sent["stream"] is True and sent["stream_options"] == {"include_usage": True} and sent["max_tokens"] == 64
    assert streamed.stats.output_tokens == 6 and streamed.stats.output_tokens_source == "usage"
    assert streamed.stats.finish_reason == "stop" and 0 < streamed.stats.ttft_s <= streamed.stats.latency_s
    whole = client.chat(build_request("sort"))
    assert whole.text == streamed.text and whole.stats.output_tokens == 6
    assert vllm.requests[-1]["body"]["stream"] is False


def test_sagemaker_target_streams_through_event_stream(emu):
    client = PeagleClient("ep")
    emu.runtime.tokens = ["Grüße", " 🚀", " done"]
    emu.runtime.part_size = 3  # PayloadParts split lines and multi-byte characters
    assert list(client.stream(build_request("hi"))) == ["Grüße", " 🚀", " done"]
    assert client.last.stats.output_tokens == 3 and client.last.target_kind == "sagemaker"
    assert emu.runtime.requests[-1]["messages"] == [{"role": "user", "content": "hi"}]
    assert client.chat(build_request("hi")).text == "Grüße 🚀 done"


def expect(exit_code, fragment, fn):
    with pytest.raises(PeagleError) as err:
        fn()
    assert err.value.exit_code == exit_code, err.value
    assert fragment in str(err.value)
    return err.value


def test_endpoint_not_found(emu):
    error = expect(ExitCode.USAGE, "no endpoint named 'missing'",
                   lambda: list(PeagleClient("missing").stream(build_request("x"))))
    assert "peagle status" in str(error)


def test_stalled_sagemaker_stream_times_out(emu):
    emu.runtime.stall_s = 3.0
    expect(ExitCode.TIMEOUT, "stalled stream",
           lambda: list(PeagleClient("ep", idle_timeout=0.5).stream(build_request("x"))))


def test_model_stream_error_event_over_the_wire(emu):
    emu.runtime.stream_error = ("ModelStreamError", "generation crashed")
    error = expect(ExitCode.FAILED, "(ModelStreamError): generation crashed",
                   lambda: list(PeagleClient("ep").stream(build_request("x"))))
    assert "/aws/sagemaker/Endpoints/ep" in str(error)


def test_target_kind_override(vllm):
    result = run_cli("invoke", vllm.url + "/v1", "hi", "--target-kind", "container")
    assert vllm.requests[-1]["path"] == "/invocations"  # the server root's, not /v1/chat/completions
    assert result.code == 0, result.stderr
    result = run_cli("invoke", vllm.url, "hi", "--target-kind", "grpc")
    assert result.code == 2 and "unknown target kind 'grpc'" in result.stderr


def test_endpoint_not_in_service(emu):
    emu.script_endpoints(creating_polls=100)
    emu.client("sagemaker").create_endpoint(EndpointName="young", EndpointConfigName="ep")
    expect(ExitCode.USAGE, "endpoint young is Creating, not InService",  # not failed: wait for it (issue 49)
           lambda: PeagleClient("young").chat(build_request("x")))


def test_model_error_shows_container_message_and_log_group(emu):
    emu.runtime.model_error = (500, "CUDA error: out of memory")
    error = expect(ExitCode.FAILED, "answered HTTP 500: CUDA error: out of memory",
                   lambda: list(PeagleClient("ep").stream(build_request("x"))))
    assert "/aws/sagemaker/Endpoints/ep" in str(error)


def test_truncated_sagemaker_stream_is_an_error(emu):
    emu.runtime.truncate = True
    expect(ExitCode.FAILED, "ended early", lambda: list(PeagleClient("ep").stream(build_request("x"))))


def test_stalled_url_stream_times_out(vllm):
    vllm.mode, vllm.stall_s = "stall", 3.0
    expect(ExitCode.TIMEOUT, "stalled stream",
           lambda: list(PeagleClient(vllm.url, idle_timeout=0.5).stream(build_request("x"))))


def test_truncated_url_stream_is_an_error(vllm):
    vllm.mode = "truncate"
    expect(ExitCode.FAILED, "ended early", lambda: list(PeagleClient(vllm.url).stream(build_request("x"))))


def test_container_http_error_is_shown(vllm):
    vllm.mode = "error"
    expect(ExitCode.FAILED, "HTTP 500: CUDA out of memory", lambda: PeagleClient(vllm.url).chat(build_request("x")))


def test_connection_refused():
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    expect(ExitCode.FAILED, "connection refused",
           lambda: PeagleClient(f"http://127.0.0.1:{port}").chat(build_request("x")))


@pytest.mark.parametrize("args,fragment", [
    (["--max-tokens", "0"], "--max-tokens must be at least 1"),
    (["--temperature", "3"], "--temperature must be at least 0 and at most 2, got 3"),
    (["--top-p", "0"], "--top-p must be more than 0 and at most 1, got 0"),
])
def test_bad_sampling_flags(args, fragment):
    result = run_cli("invoke", "http://127.0.0.1:9", "hello", *args)
    assert result.code == 2 and fragment in result.stderr and result.stderr.count("\n") == 1


def test_empty_prompt():
    result = run_cli("invoke", "http://127.0.0.1:9", "   ")
    assert result.code == 2 and "the prompt is empty" in result.stderr


def test_invalid_and_oversized_payloads(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text('{"messages": [}')
    result = run_cli("invoke", "http://127.0.0.1:9", "--payload", str(bad))
    assert result.code == 2 and "is not valid JSON (line 1" in result.stderr
    wrong = tmp_path / "wrong.json"
    wrong.write_text(json.dumps({"messages": [{"role": "user", "content": "x"}], "max_tokens": -1}))
    result = run_cli("invoke", "http://127.0.0.1:9", "--payload", str(wrong))
    assert result.code == 2 and "max_tokens" in result.stderr


def test_sagemakers_6_mb_request_limit_applies_to_endpoints_only(vllm, emu, tmp_path):
    big = tmp_path / "big.json"
    big.write_text(json.dumps({"messages": [{"role": "user", "content": "x" * (6 * 1024 * 1024)}], "max_tokens": 5}))
    to_endpoint = run_cli("invoke", "ep", "--payload", str(big))
    assert to_endpoint.code == 2
    assert re.fullmatch(r"error: the request body is 6,291,\d{3} bytes; a SageMaker endpoint accepts at most "
                        r"6,291,456 \(6 MB\): shorten the prompt or the payload\n", to_endpoint.stderr)
    assert not [c for c in emu.calls if c.startswith("InvokeEndpoint")]  # refused before it was sent
    to_server = run_cli("invoke", vllm.url, "--payload", str(big), "--no-stream")  # a server's URL: its own limit
    assert to_server.code == 0, to_server.stderr
    assert len(vllm.requests[-1]["body"]["messages"][0]["content"]) == 6 * 1024 * 1024


def test_payload_is_sent_as_is(vllm, tmp_path):
    body = {"messages": [{"role": "user", "content": "x"}], "max_tokens": 5, "seed": 42, "top_k": 3}
    path = tmp_path / "p.json"
    path.write_text(json.dumps(body))
    result = run_cli("invoke", vllm.url, "--payload", str(path), "--no-stream", "--json")
    assert result.code == 0, result.stderr
    sent = vllm.requests[-1]["body"]
    assert sent["seed"] == 42 and sent["top_k"] == 3 and sent["stream"] is False
    assert json.loads(result.stdout)["text"] == "".join(TOKENS)


def test_cli_streams_tokens_and_prints_stats(vllm):
    result = run_cli("invoke", vllm.url, "write quicksort")
    assert result.code == 0, result.stderr
    assert result.stdout == "".join(TOKENS) + "\n"
    assert "TTFT" in result.stderr and "6 tokens (usage)" in result.stderr


def test_e2e_streaming_invoke_through_installed_executable(emu):
    emu.runtime.tokens = ["P-EAGLE", " drafts", " in", " parallel", " ⚡"]
    out = subprocess.run([PEAGLE, "invoke", "ep", "Explain P-EAGLE", "--json"], env=emu.env,
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout)
    assert result["text"] == "P-EAGLE drafts in parallel ⚡"
    assert result["stats"]["output_tokens"] == 5 and result["stats"]["ttft_s"] is not None
    human = subprocess.run([PEAGLE, "invoke", "ep", "Explain P-EAGLE"], env=emu.env, capture_output=True,
                           text=True, timeout=120)
    assert human.returncode == 0 and human.stdout == "P-EAGLE drafts in parallel ⚡\n"
    missing = subprocess.run([PEAGLE, "invoke", "nope", "x"], env=emu.env, capture_output=True, text=True,
                             timeout=120)
    assert missing.returncode == 2 and "no endpoint named 'nope'" in missing.stderr


@pytest.mark.parametrize("action,call", [("InvokeEndpoint", lambda c, r: c.chat(r)),
                                         ("InvokeEndpointWithResponseStream", lambda c, r: list(c.stream(r)))],
                         ids=["chat", "stream"])
def test_sagemaker_call_stops_at_its_total_deadline_without_retrying(emu, action, call):
    """The endpoint holds its answer (an emulator gate); a 0.3 s budget ends the call with exit 5 after one
    attempt, although the idle timeout is a minute and botocore would retry a read timeout."""
    gate = emu.gate(action)
    client = PeagleClient("ep", idle_timeout=60, total_timeout=0.3)
    try:
        with pytest.raises(PeagleError, match=r"took longer than --timeout 0.3s") as err:
            call(client, build_request("hi"))
        assert err.value.exit_code == ExitCode.TIMEOUT
        assert gate.entered.is_set() and len(emu.runtime.requests) == 1
    finally:
        gate.release()
