"""The SageMaker target in-process: moto (mock_aws) for the control plane, a botocore before-send hook
answering InvokeEndpointWithResponseStream with real AWS event-stream frames."""

import pytest

from peagle_deploy.errors import ExitCode, PeagleError
from peagle_deploy.runtime import PeagleClient, build_request
from peagle_deploy.testing import SageMakerEmulator
from peagle_deploy.testing.streaming import chat_sse, event_frame, exception_frame, split_at, streaming_hook

EVENT = "before-send.sagemaker-runtime.InvokeEndpointWithResponseStream"


@pytest.fixture
def emu():
    with SageMakerEmulator.in_process(seed_jumpstart=False) as emulator:
        emulator.create_endpoint_stack("ep")
        yield emulator


def client_answering(reply) -> PeagleClient:
    client = PeagleClient("ep")
    client.target._client.meta.events.register_first(EVENT, streaming_hook(reply))
    return client


def test_stream_parts_split_mid_character(emu):
    tokens = ["Grüße", " 世界", " 🚀"]
    seen = []

    def reply(body):
        seen.append(body)
        return b"".join(event_frame(p) for p in split_at(chat_sse(tokens), range(2, 2000, 11)))

    client = client_answering(reply)
    assert list(client.stream(build_request("hi", max_tokens=9))) == tokens
    assert seen[0]["stream"] is True and seen[0]["max_tokens"] == 9
    stats = client.last.stats
    assert stats.output_tokens == 3 and stats.output_tokens_source == "usage" and stats.finish_reason == "stop"
    assert client.last.response["choices"][0]["message"]["content"] == "Grüße 世界 🚀"


@pytest.mark.parametrize("code", ["ModelStreamError", "InternalStreamFailure"])
def test_error_event_mid_stream(emu, code):
    sse = chat_sse(["a", "b"])
    client = client_answering(lambda body: event_frame(sse[:40]) + exception_frame(code, "the model crashed"))
    with pytest.raises(PeagleError) as err:
        list(client.stream(build_request("hi")))
    assert err.value.exit_code == ExitCode.FAILED
    assert f"({code}): the model crashed" in str(err.value) and "/aws/sagemaker/Endpoints/ep" in str(err.value)


def test_stream_cut_inside_a_frame_is_an_error(emu):
    wire = b"".join(event_frame(p) for p in split_at(chat_sse(["a", "b"]), [30, 60]))
    client = client_answering(lambda body: wire[:-7])  # the last frame (with [DONE]) never completes
    with pytest.raises(PeagleError, match="ended early") as err:
        list(client.stream(build_request("hi")))
    assert err.value.exit_code == ExitCode.FAILED


def test_corrupt_frame_is_an_error(emu):
    frame = bytearray(event_frame(chat_sse(["a"])))
    frame[-6] ^= 0xFF
    client = client_answering(lambda body: bytes(frame))
    with pytest.raises(PeagleError, match="corrupt event stream"):
        list(client.stream(build_request("hi")))
