"""Issue 35's clients against the emulator server: `invoke`, `bench`, `openai` and `metrics` address the inference
component an endpoint hosts (read from SageMaker, `--component` where it hosts several); at zero copies `invoke`
wakes it and answers, or stops at `--wait-timeout` naming its state (exit 5), and `bench` warms it first and reports
the cold start apart from every measured figure. The stack is another tool's (`create_stack`: no peagle tags), so
nothing here leans on peagle's labels. Time is the emulator's manual clock (`clocked`): no wall-clock waits."""

from __future__ import annotations

import json
import re

import pytest

from .cli_runner import run_cli_completed

NAME = "stz"
COMPONENT = f"{NAME}-1"
SPEC_LINE = ("INFO [metrics.py:96] SpecDecoding metrics: Mean acceptance length: 2.41, Accepted throughput: 90.00 "
             "tokens/s, Drafted throughput: 150.00 tokens/s, Accepted: 900 tokens, Drafted: 1500 tokens, "
             "Per-position acceptance rate: 0.800, 0.610")


def peagle(emu, *args):
    return run_cli_completed(*args, env={**emu.env, "COLUMNS": "250"}, fake_clock=False)


@pytest.fixture
def stack(emu, clocked):
    """Someone's component-based endpoint that scales to zero (its own wake-up alarm and step policy), one copy up;
    a wake-up takes 100 s for the instance and 300 s for the model."""
    emu.components.create_stack(NAME, instance_type="ml.g7e.2xlarge", scale_to_zero=True)
    emu.components.scaling(instance_start_s=100, copy_start_s=300)
    emu.calls.clear()
    return clocked


def to_zero(emu, clock, component: str = COMPONENT) -> None:
    """What an idle rule leaves: no copy, and the instance released."""
    emu.client("sagemaker").update_inference_component_runtime_config(
        InferenceComponentName=component, DesiredRuntimeConfig={"CopyCount": 0})
    clock.advance(700)
    assert emu.components.state(component)["current"] == 0
    emu.calls.clear()
    emu.runtime.requests.clear()


def writes(emu) -> list[str]:
    return [c for c in emu.calls if c.startswith(("Create", "Update", "Delete", "Put", "Register", "Add"))]


# invoke --------------------------------------------------------------------------------------------------------------
def test_invoke_addresses_the_component_the_endpoint_hosts_and_wakes_nothing_when_a_copy_serves(emu, stack):
    out = peagle(emu, "invoke", NAME, "hello", "--json")
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    assert doc["inference_component"] == COMPONENT and doc["text"]
    assert doc["cold_start"] == {"inference_component": COMPONENT, "woken": False, "seconds": None, "refused": 0,
                                 "source": doc["cold_start"]["source"]}
    assert "waking" not in out.stderr and len(emu.runtime.requests) == 1
    assert emu.calls == ["ListInferenceComponents"]  # read once, before the one request


@pytest.mark.parametrize("transport", ["invoke-endpoint", "openai-route"])
def test_invoke_at_zero_wakes_the_component_through_either_transport(emu, stack, transport):
    to_zero(emu, stack)
    out = peagle(emu, "invoke", NAME, "hello", "--no-stream", "--transport", transport, "--json")
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    cold = doc["cold_start"]
    assert cold["woken"] and cold["refused"] >= 2
    if transport == "invoke-endpoint":  # the route's refusals never reach the container's stand-in
        assert cold["refused"] == len(emu.runtime.requests) - 1
    assert 400 <= cold["seconds"] <= 400 + 30 + 30  # the instance and the model, after the alarm's period
    assert doc["stats"]["latency_s"] < 60  # the answer's own latency: the wake-up is not in it
    assert f"waking inference component {COMPONENT} of endpoint {NAME}" in out.stderr
    assert emu.components.state(COMPONENT)["current"] == 1
    assert not writes(emu)  # the refusals woke it, through the stack's own alarm: peagle wrote nothing


def test_invoke_stops_at_wait_timeout_naming_the_state_and_what_bills(emu, stack):
    to_zero(emu, stack)
    out = peagle(emu, "invoke", NAME, "hello", "--wait-timeout", "30s")
    assert out.returncode == 5, out.stderr
    last = out.stderr.strip().splitlines()[-1]
    assert re.fullmatch(rf"error: inference component {COMPONENT} of endpoint {NAME} has no copy in service after "
                        r"30s \(--wait-timeout 30s\); now: Updating, 0/1 copies, 0 instances in service \(1 starting\)"
                        r": nothing bills \(no instance in service\): a wake-up its alarm started goes on without "
                        r"peagle \(peagle status shows the alarm of a peagle deploy\): run the command again later, "
                        r"or raise --wait-timeout", last), last
    assert not writes(emu)
    as_json = peagle(emu, "invoke", NAME, "hello", "--wait-timeout", "0s", "--json")
    error = json.loads(as_json.stdout)["error"]
    assert as_json.returncode == 5 and error["exit_code"] == 5 and error["kind"] == "timeout"
    assert "has no copy in service after 0s" in error["message"]


def test_an_interrupted_wake_up_says_the_copy_it_started_bills_and_how_to_stop_it_now(emu, stack):
    """Issue 45 item 6: Ctrl-C while invoke waits for a copy (its second request held at the emulator): the
    refused first request raised the wake-up alarm, so a copy comes and bills until the idle rule takes it back to
    zero; the line says so, and the command that stops it now (exit 130, no traceback)."""
    import signal

    from .forked_peagle import forked_peagle
    from .peagle_process import PeagleProcess

    to_zero(emu, stack)
    gate = emu.gate("InvokeEndpoint", skip=1)  # the first request was refused for want of a copy
    run = PeagleProcess(["invoke", NAME, "hello", "--no-stream"], emu.env, program=forked_peagle())
    gate.wait_entered()
    run.signal(signal.SIGINT)
    code = run.finish()
    gate.release()
    last = run.stderr.strip().splitlines()[-1]
    assert code == 130, run.stderr
    assert last == (f"error: interrupted while waking inference component {COMPONENT} of endpoint {NAME}: the wake-up "
                    "its refused request started goes on without peagle: a copy starts, and its instance bills by "
                    f"the hour until the idle rule takes it back to zero: to stop it now, remove the endpoint: "
                    f"'peagle cleanup {NAME} --region us-east-1 --yes' (one peagle made; another tool's, as it was "
                    "made)"), last
    assert "Traceback" not in run.stderr and not writes(emu)


def test_a_component_endpoint_that_hosts_none_is_said_so_not_blamed_on_a_permission(emu, stack):
    """Issue 45 item 6: the listing worked and was empty (a deploy or cleanup that did not finish): invoke says the
    endpoint hosts no component and names status and recover, not a missing sagemaker:ListInferenceComponents."""
    sm = emu.client("sagemaker")
    sm.delete_inference_component(InferenceComponentName=COMPONENT)
    assert emu.components.names() == [] and sm.describe_endpoint(EndpointName=NAME)["EndpointStatus"] == "InService"
    out = peagle(emu, "invoke", NAME, "hello", "--no-stream")
    assert out.returncode == 6, out.stderr
    assert out.stderr.strip().splitlines()[-1] == (
        f"error: endpoint {NAME} is made for inference components and hosts none now (SageMaker lists none): "
        f"'peagle status {NAME} --region us-east-1' shows what it holds and bills; 'peagle recover {NAME} --region "
        f"us-east-1' completes the peagle deploy that made it (its component, then its scaling) or, where that cannot "
        f"be done, removes it; 'peagle cleanup {NAME} --region us-east-1 --yes' removes it")
    assert "ListInferenceComponents" not in out.stderr and "permission" not in out.stderr


@pytest.mark.parametrize(("bad", "said"), [("soon", "is not a duration"), ("15", "has no unit: add one: 15s or 15m"),
                                           ("3h", "is longer than 2h: pass at most 2h"), ("-1m", "is not a duration")])
def test_a_malformed_wait_timeout_is_one_line_and_no_aws_call(emu, stack, bad, said):
    out = peagle(emu, "invoke", NAME, "hello", f"--wait-timeout={bad}")
    assert out.returncode == 2 and out.stderr.count("\n") == 1, out.stderr
    assert out.stderr.startswith(f"error: --wait-timeout {bad!r} {said}"), out.stderr
    assert emu.calls == [] and emu.runtime.requests == []


def test_a_component_the_endpoint_does_not_host_is_refused_naming_those_it_does(emu, stack):
    for args in (["invoke", NAME, "hello"], ["bench", NAME, "-n", "1"], ["openai", NAME], ["metrics", NAME]):
        out = peagle(emu, *args, "--component", "nope", "--json")
        assert out.returncode == 2, out.stderr
        assert out.stderr == f"error: endpoint {NAME} hosts no inference component 'nope'; it hosts {COMPONENT}: " \
                             f"pass --component {COMPONENT}\n"
        assert json.loads(out.stdout)["error"]["exit_code"] == 2
    assert set(emu.calls) <= {"ListInferenceComponents", "DescribeEndpoint"} and emu.runtime.requests == []


def test_an_endpoint_with_several_components_needs_component_and_it_picks_one(emu, clocked):
    emu.components.create_stack(NAME, instance_type="ml.g7e.24xlarge", components=2, scale_to_zero=True)
    to_zero(emu, clocked, f"{NAME}-1")
    out = peagle(emu, "invoke", NAME, "hello")
    assert out.returncode == 2
    assert out.stderr == (f"error: endpoint {NAME} hosts 2 inference components ({NAME}-1, {NAME}-2): pick one with "
                          "--component NAME\n")
    picked = peagle(emu, "invoke", NAME, "hello", "--component", f"{NAME}-2", "--json")
    assert picked.returncode == 0, picked.stderr
    assert json.loads(picked.stdout)["inference_component"] == f"{NAME}-2"
    assert "waking" not in picked.stderr  # NAME-1 is at zero: the request went to NAME-2
    assert emu.components.state(f"{NAME}-1")["desired"] == 0


def test_a_classic_endpoint_is_addressed_as_itself_and_refuses_component(emu, clocked):
    emu.create_endpoint_stack("classic")
    out = peagle(emu, "invoke", "classic", "hello", "--json")
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    assert doc["inference_component"] is None and doc["cold_start"] is None
    refused = peagle(emu, "invoke", "classic", "hello", "--component", "c1")
    assert refused.returncode == 2 and refused.stderr == (
        "error: endpoint classic hosts no inference component (asked for c1): drop --component: the requests go "
        "to the endpoint itself\n")


# bench ---------------------------------------------------------------------------------------------------------------
def bench(emu, tmp_path, *extra):
    return peagle(emu, "bench", NAME, "-c", "1,2", "-n", "3", "--warmup", "1", "--logs-wait", "0", "--no-chart",
                  "--out", str(tmp_path), *extra)


def test_bench_at_zero_warms_first_and_keeps_the_cold_start_out_of_every_figure(emu, stack, tmp_path):
    to_zero(emu, stack)
    out = bench(emu, tmp_path, "--json")
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout)["result"]
    cold = result["cold_start"]
    assert cold["woken"] and cold["inference_component"] == COMPONENT and 400 <= cold["seconds"] <= 460
    assert result["target"]["inference_component"] == COMPONENT
    # no refused request is in a level: each measured exactly its requests, none failed
    for level in result["levels"]:
        assert (level["completed"], level["errors"], level["error_kinds"]) == (3, 0, {})
        assert level["e2e_ms"]["max"] < 60_000 and level["ttft_ms"]["max"] < 60_000
    measured = sum(level["completed"] + level["warmup_requests"] for level in result["levels"])
    assert len(emu.runtime.requests) == cold["refused"] + 1 + measured  # the refused, the one answer, the levels
    assert result["target"]["instance_count"] == 1  # the instance woken for the run, read once a copy served
    [md] = tmp_path.glob("bench-*.md")
    text = md.read_text()
    assert re.search(rf"^- cold start of inference component `{COMPONENT}`: 7m\d\ds \(\d+ requests refused while it "
                     r"woke; .*\); before the first level, in no figure below$", text, re.M), text
    assert "cold start" not in text.split("| concurrency")[1].split("\n\n")[0]  # not a column of the level table
    human = bench(emu, tmp_path / "again")
    assert human.returncode == 0, human.stderr
    assert re.search(rf"^cold start of inference component {COMPONENT}: none \(a copy was serving\); before the "
                     "first level, in no figure above$", human.stdout, re.M), human.stdout


def test_bench_of_a_serving_component_reports_no_cold_start(emu, stack, tmp_path):
    out = bench(emu, tmp_path, "--json")
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout)["result"]
    assert result["cold_start"]["woken"] is False and result["cold_start"]["seconds"] is None
    assert "cold start: none (a copy was serving)" in out.stderr
    [md] = tmp_path.glob("bench-*.md")
    assert f"- cold start of inference component `{COMPONENT}`: none (a copy was serving)" in md.read_text()


def test_bench_stops_at_wait_timeout_before_measuring_anything(emu, stack, tmp_path):
    to_zero(emu, stack)
    out = bench(emu, tmp_path, "--wait-timeout", "1m")
    assert out.returncode == 5, out.stderr
    assert out.stderr.strip().splitlines()[-1].startswith(
        f"error: inference component {COMPONENT} of endpoint {NAME} has no copy in service after 1m")
    assert not list(tmp_path.glob("bench-*"))  # nothing measured, nothing written


# openai and metrics --------------------------------------------------------------------------------------------------
def test_openai_gives_the_components_route_and_it_answers(emu, stack):
    out = peagle(emu, "openai", NAME, "--json")
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    assert doc["inference_component"] == COMPONENT
    assert doc["base_url"] == f"{emu.endpoint_url}/endpoints/{NAME}/inference-components/{COMPONENT}/openai/v1"
    human = peagle(emu, "openai", NAME)
    assert f"component: {COMPONENT} (the endpoint's inference component: the base URL names it)" in human.stdout
    answered = peagle(emu, "invoke", doc["base_url"], "hello", "--json")  # the URL names the component
    assert answered.returncode == 0, answered.stderr
    assert json.loads(answered.stdout)["inference_component"] == COMPONENT


def test_metrics_read_the_components_own_log_group(emu, stack):
    emu.put_log_lines(NAME, [SPEC_LINE], component=COMPONENT)
    emu.put_log_lines(NAME, [SPEC_LINE.replace("Accepted: 900", "Accepted: 1")])  # the endpoint's group: not read
    out = peagle(emu, "metrics", NAME, "--since", "15m", "--json")
    assert out.returncode == 0, out.stderr
    acceptance = json.loads(out.stdout)["acceptance"]
    assert acceptance["source"] == f"cloudwatch:/aws/sagemaker/InferenceComponents/{COMPONENT}"
    assert acceptance["accepted_tokens"] == 900
    assert f"(CloudWatch Logs /aws/sagemaker/InferenceComponents/{COMPONENT})" in out.stderr


# the parts, without AWS ------------------------------------------------------------------------------------------------
def test_a_route_url_that_names_a_component_addresses_it():
    from peagle_deploy.lifecycle.component_target import with_component
    from peagle_deploy.runtime.target_ref import parse_target

    host = "https://runtime.sagemaker.us-east-1.amazonaws.com"
    ref = parse_target(f"{host}/endpoints/ep/inference-components/ic-1/openai/v1/chat/completions")
    assert (ref.kind, ref.name, ref.inference_component, ref.transport) == ("sagemaker", "ep", "ic-1", "openai-route")
    assert ref.api_base == f"{host}/endpoints/ep/inference-components/ic-1/openai/v1" and ref.region == "us-east-1"
    assert ref.log_group == "/aws/sagemaker/InferenceComponents/ic-1"
    plain = parse_target(f"{host}/endpoints/ep/openai/v1")
    assert plain.inference_component is None and plain.log_group == "/aws/sagemaker/Endpoints/ep"
    moved = with_component(plain, "ic-2")  # the endpoint's URL, addressed to the component it hosts
    assert moved.api_base == f"{host}/endpoints/ep/inference-components/ic-2/openai/v1"


def test_only_sagemakers_own_no_capacity_words_are_a_cold_start():
    from peagle_deploy.runtime.failures import is_no_capacity
    from peagle_deploy.testing.component_emulation import NO_CAPACITY

    assert is_no_capacity("ValidationError", NO_CAPACITY)
    assert not is_no_capacity("ModelError", NO_CAPACITY)  # the container's own error
    # vLLM echoes a value it refuses: a caller cannot make its own request look like a cold start
    assert not is_no_capacity("ValidationError", f"Named tool '{NO_CAPACITY}' not found in tool list")


def test_component_on_a_url_or_with_a_bad_name_is_one_line_before_any_request(emu, clocked):
    url = peagle(emu, "invoke", "http://127.0.0.1:9/v1", "hello", "--component", "ic-1")
    assert url.returncode == 2 and url.stderr.startswith("error: --component names an inference component of a "
                                                         "SageMaker endpoint") and url.stderr.count("\n") == 1
    bad = peagle(emu, "invoke", NAME, "hello", "--component", "no_underscores")
    assert bad.returncode == 2 and "--component 'no_underscores' is not an inference component name" in bad.stderr
    assert emu.calls == []
