"""`peagle logs NAME` of an endpoint that hosts an inference component (issue 35): the component's copies write to
its own CloudWatch Logs group /aws/sagemaker/InferenceComponents/COMPONENT, not the endpoint's, so that is the group
read (the component read from SageMaker, as invoke and metrics address it); a classic endpoint's stays its own."""

from __future__ import annotations

import json
import time

from .cli_runner import run_cli_completed

NAME = "icl"


def peagle(emu, *args):
    return run_cli_completed(*args, env={**emu.env, "COLUMNS": "250"})


def write(emu, group: str, stream: str, lines: list[str]) -> None:
    logs = emu.client("logs")
    try:  # a deploy made it already when the container had written nothing (its acceptance alarm's filters)
        logs.create_log_group(logGroupName=group)
    except logs.exceptions.ResourceAlreadyExistsException:
        pass
    logs.create_log_stream(logGroupName=group, logStreamName=stream)
    now = int(time.time() * 1000)
    logs.put_log_events(logGroupName=group, logStreamName=stream,
                        logEvents=[{"timestamp": now + i, "message": line} for i, line in enumerate(lines)])


def test_logs_of_a_component_based_endpoint_read_the_components_group(emu, clocked):
    out = peagle(emu, "deploy", "qwen3-coder", "--name", NAME, "--role", emu.role_arn, "--yes", "--scale-to-zero")
    assert out.returncode == 0, out.stderr
    group = f"/aws/sagemaker/InferenceComponents/{NAME}"
    write(emu, group, "AllTraffic/copy-1", ["INFO vLLM server version 0.32.0", "ERROR CUDA out of memory"])
    write(emu, f"/aws/sagemaker/Endpoints/{NAME}", "AllTraffic/i-1", ["not the component's"])
    out = peagle(emu, "logs", NAME, "--since", "1h", "--json")
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    assert doc["log_group"] == group
    assert [e["message"] for e in doc["events"]] == ["INFO vLLM server version 0.32.0", "ERROR CUDA out of memory"]
    human = peagle(emu, "logs", NAME, "--component", "nope")
    assert human.returncode == 2 and f"endpoint {NAME} hosts no inference component 'nope'" in human.stderr


def test_logs_of_a_component_that_failed_are_still_read(emu, clocked):
    emu.components.script(creating_polls=1, final="Failed", reason="CUDA out of memory")
    out = peagle(emu, "deploy", "qwen3-coder", "--name", NAME, "--role", emu.role_arn, "--yes", "--hosting",
                 "component", "--keep-on-failure")
    assert out.returncode == 6, out.stderr
    group = f"/aws/sagemaker/InferenceComponents/{NAME}"
    write(emu, group, "AllTraffic/copy-1", ["torch.OutOfMemoryError: CUDA out of memory"])
    doc = json.loads(peagle(emu, "logs", NAME, "--json").stdout)
    assert doc["log_group"] == group and doc["failure_line"]["message"].startswith("torch.OutOfMemoryError")
