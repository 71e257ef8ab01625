"""The OpenAI route story through the installed `peagle` executable against the emulator server (issue 22's
must-show): deploy, `peagle openai NAME --json`, the real `openai` SDK answering streamed and not, a forged token
refused as SageMaker refuses it, then `peagle invoke` and `peagle bench` over the route on the same endpoint; and
the route in front of the emulator's container backend (the bundled entrypoint, a stand-in `vllm`)."""

from __future__ import annotations

import base64
import json

import pytest

from peagle_deploy.testing import SageMakerEmulator

from .test_emulator_container_backend import backend_for, run  # the installed executable, emu.env

HI = [{"role": "user", "content": "hi"}]


def test_deploy_then_openai_sdk_then_invoke_and_bench_over_the_route(emu, tmp_path):
    import openai

    from peagle_deploy.testing.openai_route import REFUSALS

    deployed = run(emu, "deploy", "qwen3-coder", "--name", "oai-e2e", "--role", emu.role_arn, "--yes")
    assert deployed.returncode == 0, deployed.stderr
    assert f"OpenAI base URL: {emu.endpoint_url}/endpoints/oai-e2e/openai/v1 (api key: peagle openai oai-e2e " \
           "--region us-east-1)" in deployed.stdout

    made = run(emu, "openai", "oai-e2e", "--json")
    assert made.returncode == 0, made.stderr
    doc = json.loads(made.stdout)
    assert doc["api_key"] not in made.stderr
    sdk = openai.OpenAI(base_url=doc["base_url"], api_key=doc["api_key"], max_retries=0, timeout=30)
    whole = sdk.chat.completions.create(model="", messages=HI, max_tokens=16)
    assert whole.choices[0].message.content == "Hello, wörld ✓!" and whole.usage.completion_tokens == 5
    streamed = [c.choices[0].delta.content or "" for c in
                sdk.chat.completions.create(model="", messages=HI, stream=True) if c.choices]
    assert "".join(streamed) == "Hello, wörld ✓!"

    raw = base64.b64decode(doc["api_key"].removeprefix("sagemaker-api-key-")).decode()
    signature = raw.split("X-Amz-Signature=")[1][:64]
    forged = "sagemaker-api-key-" + base64.b64encode(raw.replace(signature, "0" * 64).encode()).decode()
    with pytest.raises(openai.PermissionDeniedError) as refused:
        openai.OpenAI(base_url=doc["base_url"], api_key=forged, max_retries=0).chat.completions.create(
            model="", messages=HI)
    assert refused.value.status_code == 403 and refused.value.body == {"message": REFUSALS["forged"][2]}

    invoked = run(emu, "invoke", doc["base_url"], "Write a Python quicksort")
    assert invoked.returncode == 0, invoked.stderr
    assert invoked.stdout == "Hello, wörld ✓!\n" and "[sagemaker via openai-route]" in invoked.stderr

    bench = run(emu, "bench", "oai-e2e", "--transport", "openai-route", "-c", "1,2", "-n", "4", "--warmup", "1",
                "--out", str(tmp_path / "bench"), "--no-chart", "--logs-wait", "0", "--json")
    assert bench.returncode == 0, bench.stderr
    levels = json.loads(bench.stdout)["result"]["levels"]
    assert [(lv["concurrency"], lv["completed"], lv["errors"]) for lv in levels] == [(1, 4, 0), (2, 4, 0)]

    both = run(emu, "bench", "oai-e2e", "--transport", "both", "-c", "2", "-n", "4", "--warmup", "1",
               "--out", str(tmp_path / "both"), "--no-chart")
    assert both.returncode == 0, both.stderr
    assert "openai-route / invoke-endpoint (same run)" in both.stdout


def test_route_forwards_to_the_container_backend_as_is(tmp_path):
    """The route in front of a running container (the bundled entrypoint execs a stand-in vllm): its answer,
    streamed and not, comes back untouched (no event-stream framing)."""
    import openai

    with SageMakerEmulator.server(backend=backend_for(tmp_path)) as emu:
        deployed = run(emu, "deploy", "qwen3-coder", "--name", "oai-be", "--role", emu.role_arn, "--yes")
        assert deployed.returncode == 0, deployed.stderr
        doc = json.loads(run(emu, "openai", "oai-be", "--json").stdout)
        sdk = openai.OpenAI(base_url=doc["base_url"], api_key=doc["api_key"], max_retries=0, timeout=60)
        assert sdk.chat.completions.create(model="", messages=HI, max_tokens=6).choices[0].message.content == "!" * 6
        chunks = [c for c in sdk.chat.completions.create(model="", messages=HI, max_tokens=4, stream=True)]
        assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == "!" * 4
        invoked = run(emu, "invoke", "oai-be", "hi", "--max-tokens", "3", "--transport", "openai-route")
        assert invoked.returncode == 0 and invoked.stdout.strip() == "!!!", invoked.stderr
        assert run(emu, "cleanup", "oai-be", "--yes").returncode == 0
