"""What moto lacks for `invoke`: real AWS event-stream frames and a sagemaker-runtime route that serves them.

`event_frame()` builds one binary event-stream message (prelude, headers, payload, CRC32s) as
SageMaker's InvokeEndpointWithResponseStream sends it; botocore's own parser reads them back.
`chat_sse()` renders a chat completion as vLLM's SSE chunks. `runtime_middleware` is a WSGI
middleware for the emulator server: POST /endpoints/<name>/invocations(-response-stream) answer with
the emulator's scripted reply, split into PayloadParts at the emulator's chosen byte offsets, once the endpoint
and (the `X-Amzn-SageMaker-Inference-Component` header) its inference component pass SageMaker's checks
(`emulator.components.invocation`).
"""

from __future__ import annotations

import binascii
import json
import re
import struct
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

_ROUTE = re.compile(r"^/endpoints/(?P<name>[^/]+)/(?P<op>invocations|invocations-response-stream)$")
_SCOPE = re.compile(r"Credential=[^/,]+/\d{8}/(?P<region>[a-z0-9-]+)/")


def scope_region(authorization: str | None, default: str) -> str:
    """The region a SigV4-signed request is for (its credential scope): with AWS_ENDPOINT_URL every region's
    calls reach the one emulator, and this says which region's resources a call means."""
    match = _SCOPE.search(authorization or "")
    return match["region"] if match else default


def _header(name: str, value: str) -> bytes:
    raw_name, raw_value = name.encode(), value.encode()
    return struct.pack("B", len(raw_name)) + raw_name + b"\x07" + struct.pack(">H", len(raw_value)) + raw_value


def event_frame(payload: bytes, event_type: str = "PayloadPart", message_type: str = "event",
                content_type: str = "application/octet-stream") -> bytes:
    type_header = ":exception-type" if message_type == "exception" else ":event-type"
    headers = _header(type_header, event_type) + _header(":content-type", content_type) + \
        _header(":message-type", message_type)
    total = 12 + len(headers) + len(payload) + 4
    prelude = struct.pack(">II", total, len(headers))
    prelude += struct.pack(">I", binascii.crc32(prelude) & 0xFFFFFFFF)
    message = prelude + headers + payload
    return message + struct.pack(">I", binascii.crc32(message) & 0xFFFFFFFF)


def exception_frame(code: str, message: str) -> bytes:
    """An error event as SageMaker sends it mid-stream (ModelStreamError, InternalStreamFailure)."""
    return event_frame(json.dumps({"Message": message, "ErrorCode": code}).encode(), code, "exception",
                       "application/json")


def split_at(data: bytes, offsets: Iterable[int]) -> list[bytes]:
    cuts = sorted({o for o in offsets if 0 < o < len(data)})
    return [data[a:b] for a, b in zip([0, *cuts], [*cuts, len(data)])]


def chat_sse(tokens: Sequence[str | dict], *, model: str = "peagle-emulated", usage: bool = True,
             finish_reason: str | None = "stop", done: bool = True,
             spec_decoding: dict[str, Any] | None = None) -> bytes:
    """vLLM's streaming format: role chunk, one chunk per token, finish chunk, usage chunk, [DONE].
    A token may be a whole delta (`{"reasoning": "..."}`, `{"tool_calls": [...]}`) instead of content text.
    `spec_decoding`: per-request acceptance, which vLLM 0.29+ puts in the usage chunk's `metrics` (with usage only)."""
    def chunk(delta: dict, finish: str | None = None, extra: dict | None = None) -> bytes:
        body = {"id": "chatcmpl-emulated", "object": "chat.completion.chunk", "created": 0, "model": model,
                "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}]}
        body.update(extra or {})
        return b"data: " + json.dumps(body, ensure_ascii=False).encode() + b"\n\n"

    out = [chunk({"role": "assistant", "content": ""})]
    out += [chunk(t if isinstance(t, dict) else {"content": t}) for t in tokens]
    if finish_reason:
        out.append(chunk({}, finish_reason))
    if usage:
        usage_body = {"id": "chatcmpl-emulated", "object": "chat.completion.chunk", "created": 0, "model": model,
                      "choices": [], "usage": {"prompt_tokens": 7, "completion_tokens": len(tokens),
                                               "total_tokens": 7 + len(tokens)}}
        if spec_decoding is not None:
            usage_body["metrics"] = {"speculative_decoding": spec_decoding}
        out.append(b"data: " + json.dumps(usage_body).encode() + b"\n\n")
    if done:
        out.append(b"data: [DONE]\n\n")
    return b"".join(out)


def chat_json(tokens: Sequence[str], *, model: str = "peagle-emulated", logprobs: bool = False,
              spec_decoding: dict[str, Any] | None = None) -> bytes:
    """A chat completion; `logprobs`: with vLLM's per-token logprobs (the tokens, logprob 0), as a request
    with `"logprobs": true` gets them; `spec_decoding`: vLLM 0.29+'s per-request acceptance, in `metrics`."""
    choice: dict[str, Any] = {"index": 0, "message": {"role": "assistant", "content": "".join(tokens)},
                              "finish_reason": "stop"}
    if logprobs:
        choice["logprobs"] = {"content": [{"token": t, "logprob": 0.0, "bytes": list(t.encode()),
                                           "top_logprobs": []} for t in tokens]}
    body: dict[str, Any] = {
        "id": "chatcmpl-emulated", "object": "chat.completion", "created": 0, "model": model,
        "choices": [choice],
        "usage": {"prompt_tokens": 7, "completion_tokens": len(tokens), "total_tokens": 7 + len(tokens)},
    }
    if spec_decoding is not None:  # vLLM's non-streamed answer: its timing fields null, as it sends them
        body["metrics"] = {"time_to_first_token_ms": None, "generation_time_ms": None, "queue_time_ms": None,
                           "mean_itl_ms": None, "tokens_per_second": None, "speculative_decoding": spec_decoding}
    return json.dumps(body, ensure_ascii=False).encode()


def spec_decoding_metrics(histogram: Sequence[int], drafted: int | None = None) -> dict[str, Any]:
    """vLLM's `metrics.speculative_decoding` for one answer from its histogram of accepted drafts per step
    (RequestSpecDecodeMetrics.to_dict, vllm/v1/metrics/stats.py, 0.32.0; `drafted`: K x steps by default)."""
    k = len(histogram) - 1
    steps = sum(histogram)
    accepted = sum(j * n for j, n in enumerate(histogram))
    drafted = k * steps if drafted is None else drafted
    return {"mean_acceptance_length": 1.0 + accepted / steps if steps else 1.0,
            "draft_acceptance_rate": accepted / drafted if drafted else 0.0, "acceptance_histogram": list(histogram),
            "num_spec_steps": steps, "num_accepted_draft_tokens": accepted, "num_draft_tokens": drafted,
            "num_spec_tokens": k}


@dataclass
class RuntimeScript:
    """How emulated endpoints answer invocations."""

    tokens: list[str] = field(default_factory=lambda: ["Hello", ",", " wörld", " ✓", "!"])
    part_size: int = 7  # PayloadPart size in bytes: small, so lines and characters split across parts; 0: one
    # PayloadPart per SSE event (what SageMaker passes on from vLLM, which flushes every token)
    token_gap_s: float = 0.0  # pause before each part (each SSE event on the OpenAI route): a decode pace
    model_error: tuple[int, str] | None = None  # (container status, container message)
    truncate: bool = False  # end the stream with no finish_reason and no [DONE]
    stall_s: float = 0.0  # sleep before the last part
    stream_error: tuple[str, str] | None = None  # (ModelStreamError or InternalStreamFailure, message) mid-stream
    # vLLM 0.29+ with --per-request-spec-decode-metrics: each answer's metrics.speculative_decoding (None: absent)
    spec_decoding: dict[str, Any] | None = None
    requests: list[dict[str, Any]] = field(default_factory=list)
    # (name, body), as it arrives: the inference component's name when the request names one, else the endpoint's
    on_request: Callable[[str, dict[str, Any]], None] | None = None


def _json_error(status: str, code: str, body: dict[str, Any]) -> tuple[str, list[tuple[str, str]], bytes]:
    return status, [("Content-Type", "application/json"), ("x-amzn-ErrorType", code)], json.dumps(body).encode()


def runtime_middleware(app: Any, emulator: Any) -> Any:
    """Serve sagemaker-runtime invocations for endpoints that exist in the emulator's SageMaker backend."""

    def middleware(environ: dict[str, Any], start_response: Any) -> Iterable[bytes]:
        match = _ROUTE.match(environ.get("PATH_INFO", ""))
        if not match or environ.get("REQUEST_METHOD") != "POST":
            return app(environ, start_response)
        script: RuntimeScript = emulator.runtime
        name = match["name"]
        length = int(environ.get("CONTENT_LENGTH") or 0)
        try:
            request = json.loads(environ["wsgi.input"].read(length) or b"{}")
        except ValueError:
            request = {}
        script.requests.append(request)  # this request's own body below: another may be appended meanwhile
        if script.on_request is not None:
            script.on_request(environ.get("HTTP_X_AMZN_SAGEMAKER_INFERENCE_COMPONENT") or name, request)
        caller = re.search(r"\bapp/(\S+)", environ.get("HTTP_USER_AGENT", ""))
        gate = emulator._take_gate("InvokeEndpoint" if match["op"] == "invocations"
                                   else "InvokeEndpointWithResponseStream", caller[1] if caller else None)
        if gate is not None:  # emulator.gate("InvokeEndpoint"): the answer is held until the test releases it
            gate.hold()
            gate.done.set()
        region = scope_region(environ.get("HTTP_AUTHORIZATION"), emulator.region)
        status = emulator.endpoint_status(name, region)
        if status is None:
            reply = _json_error("400 Bad Request", "ValidationError",
                                {"message": f"Endpoint {name} of account 123456789012 not found."})
        elif status != "InService":
            reply = _json_error("400 Bad Request", "ValidationError",
                                {"message": f"Endpoint {name} is not in service."})
        elif (refusal := emulator.components.invocation(
                name, environ.get("HTTP_X_AMZN_SAGEMAKER_INFERENCE_COMPONENT"), region)) is not None:
            reply = _json_error(f"{refusal[0]} Bad Request", refusal[1], {"message": refusal[2]})
        elif script.model_error:
            code, text = script.model_error
            reply = _json_error("424 Failed Dependency", "ModelError", {
                "message": f"Received server error ({code}) from primary with message \"{text}\".",
                "OriginalStatusCode": code, "OriginalMessage": text,
                "LogStreamArn": f"arn:aws:logs:{region}:123456789012:log-group:/aws/sagemaker/Endpoints/{name}"})
        else:
            reply = None
        if reply is not None:
            start_response(reply[0], reply[1])
            return [reply[2]]
        if match["op"] == "invocations":
            start_response("200 OK", [("Content-Type", "application/json")])
            return [chat_json(script.tokens, logprobs=bool(isinstance(request, dict) and request.get("logprobs")),
                              spec_decoding=script.spec_decoding)]
        sse = chat_sse(script.tokens, finish_reason=None if script.truncate else "stop",
                       done=not script.truncate, usage=not script.truncate, spec_decoding=script.spec_decoding)
        parts = (split_at(sse, range(script.part_size, len(sse), script.part_size)) if script.part_size else
                 [event + b"\n\n" for event in sse.split(b"\n\n") if event])
        start_response("200 OK", [("Content-Type", "application/vnd.amazon.eventstream"),
                                  ("X-Amzn-SageMaker-Content-Type", "text/event-stream")])

        def body() -> Iterable[bytes]:
            for i, part in paced(script, parts, emulator.closing):
                if script.stream_error and i == len(parts) // 2:
                    yield exception_frame(*script.stream_error)
                    return
                yield event_frame(part)

        return body()

    return middleware


class _FrameBody:
    """Just enough of urllib3's response for botocore's EventStream: `stream()` yields the wire bytes."""

    def __init__(self, chunks: Sequence[bytes]):
        self._chunks = chunks

    def stream(self, *_: Any, **__: Any) -> Iterable[bytes]:
        yield from self._chunks

    def close(self) -> None:
        pass


def streaming_hook(reply: Any) -> Any:
    """A botocore `before-send` handler for InvokeEndpointWithResponseStream under `mock_aws`.

    `reply(body: dict) -> bytes` returns the wire bytes (event-stream frames); they are handed to
    botocore in 5-byte reads, so frames arrive split as they would from a socket. Register it with
    `client.meta.events.register_first("before-send.sagemaker-runtime.InvokeEndpointWithResponseStream", hook)`.
    """
    def hook(request: Any, **_: Any) -> Any:
        from botocore.awsrequest import AWSResponse

        wire = reply(json.loads(request.body or b"{}"))
        reads = [wire[i:i + 5] for i in range(0, len(wire), 5)]
        headers = {"Content-Type": "application/vnd.amazon.eventstream", "x-amzn-requestid": "emulated",
                   "X-Amzn-SageMaker-Content-Type": "text/event-stream"}
        return AWSResponse(request.url, 200, headers, _FrameBody(reads))

    return hook


def send_reply(handler: Any, status: int, payload: bytes, content_type: str = "application/json") -> None:
    """One whole HTTP answer from a BaseHTTPRequestHandler (the stand-in servers use it as their `_send`)."""
    handler.send_response(status)
    handler.send_header("Content-Type", content_type)
    handler.send_header("Content-Length", str(len(payload)))
    handler.end_headers()
    handler.wfile.write(payload)


def paced(script: RuntimeScript, parts: list[bytes], closing: threading.Event | None = None
          ) -> Iterator[tuple[int, bytes]]:
    """(index, part) as the script paces a stream: `token_gap_s` before each part, `stall_s` more before the last.
    Shared by the InvokeEndpointWithResponseStream stand-in and the OpenAI route's. Once `closing` is set (the
    emulator stops) the stream ends where it is: a stalled answer does not hold the server's stop for its stall."""
    closing = closing or threading.Event()
    for i, part in enumerate(parts):
        if script.token_gap_s and closing.wait(script.token_gap_s):
            return
        if script.stall_s and i == len(parts) - 1 and closing.wait(script.stall_s):
            return
        yield i, part
