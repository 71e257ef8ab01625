"""PeagleClient: one chat request to any target, streamed or not, with the same statistics.

    client = PeagleClient("my-endpoint")                    # or "http://localhost:8080", ".../v1"
    result = client.chat(build_request("Write quicksort"))  # full response
    for piece in client.stream(request):                    # text as it arrives
        print(piece, end="")
    client.last.stats                                       # TTFT, latency, tokens, tokens/s

TTFT follows the chunk rule of runtime.sse (the first content, reasoning or tool-call chunk);
time to first content is reported beside it. `acceptance` is the answer's own speculative-decoding acceptance where
the server returns it (vLLM 0.29+ with --per-request-spec-decode-metrics: runtime.spec_metrics), streamed or not.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from typing import Any

from pydantic import BaseModel

from ..errors import EndpointFailed
from .payload import MAX_BODY_BYTES, ChatRequest
from .spec_metrics import RequestAcceptance, parse_spec_metrics, raw_spec_metrics
from .sse import DONE, SseDataError, SseDecoder, delta_kind, delta_text, stream_error
from .target_ref import TargetRef, parse_target
from .targets import Deadline, HttpTarget, SageMakerTarget, open_target
from .waking import ColdStart


class CallStats(BaseModel):
    ttft_s: float | None
    ttfc_s: float | None = None  # time to the first content token (after reasoning, for reasoning models)
    latency_s: float
    output_tokens: int | None
    output_tokens_source: str  # "usage" when the server reported it, else "chunks" (one per token chunk)
    tokens_per_s: float | None
    finish_reason: str | None


class ChatResult(BaseModel):
    target: str
    target_kind: str
    transport: str | None = None  # a SageMaker endpoint's: invoke-endpoint or openai-route
    inference_component: str | None = None  # the endpoint's inference component that answered
    text: str
    response: dict[str, Any]
    stats: CallStats
    acceptance: RequestAcceptance | None = None  # the answer's metrics.speculative_decoding (vLLM 0.29+, when on)
    cold_start: ColdStart | None = None  # an inference component's: what reaching a copy took (not in `stats`)


class PeagleClient:
    def __init__(self, target: str | TargetRef, *, kind: str | None = None, transport: str | None = None,
                 region: str | None = None, profile: str | None = None, idle_timeout: float = 60.0,
                 total_timeout: float = 900.0, clock: Callable[[], float] = time.perf_counter):
        """`target`: the user's text (parsed here), or a TargetRef already parsed (and addressed to an inference
        component, `lifecycle.component_target`)."""
        ref = target if isinstance(target, TargetRef) else parse_target(target, kind, transport)
        self.target: HttpTarget | SageMakerTarget = open_target(ref, region=region, profile=profile,
                                                                idle_timeout=idle_timeout)
        self.total_timeout = total_timeout
        self.clock = clock
        self.last: ChatResult | None = None

    @property
    def _limit(self) -> int | None:
        """SageMaker's 6 MB request limit, for an endpoint (InvokeEndpoint or its OpenAI route) only."""
        return MAX_BODY_BYTES if self.target.ref.kind == "sagemaker" else None

    def _failed(self, what: str) -> EndpointFailed:
        return EndpointFailed(f"{self.target.name} {what}", self.target.log_hint)

    def chat(self, request: ChatRequest) -> ChatResult:
        start = self.clock()
        raw = self.target.send(request.body(stream=False, limit=self._limit), Deadline(self.total_timeout))
        latency = self.clock() - start
        try:
            response = json.loads(raw)
        except ValueError:
            raise self._failed(f"answered with something that is not JSON: {raw[:120]!r}") from None
        if not isinstance(response, dict):
            raise self._failed(f"answered with something that is not a chat completion: {raw[:120]!r}")
        error = stream_error(response)
        if error is not None:
            raise self._failed(f"returned an error: {error}")
        choice = (response.get("choices") or [{}])[0]
        message = choice.get("message") or {}
        text = message.get("content") or choice.get("text") or ""
        tokens = (response.get("usage") or {}).get("completion_tokens")
        self.last = ChatResult(
            target=self.target.name, target_kind=self.target.kind, transport=self.target.ref.transport,
            inference_component=self.target.ref.inference_component, text=text, response=response,
            stats=CallStats(ttft_s=None, latency_s=latency, output_tokens=tokens,
                            output_tokens_source="usage" if tokens is not None else "unknown",
                            tokens_per_s=tokens / latency if tokens and latency > 0 else None,
                            finish_reason=choice.get("finish_reason")),
            acceptance=parse_spec_metrics(raw_spec_metrics(response)))
        return self.last

    def stream(self, request: ChatRequest) -> Iterator[str]:
        """Yield text as it arrives; `self.last` holds the assembled result when the stream ends."""
        start = self.clock()
        decoder = SseDecoder()
        pieces: list[str] = []
        first: float | None = None
        first_content: float | None = None
        finish: str | None = None
        usage: dict[str, Any] | None = None
        spec: dict[str, Any] | None = None  # the usage chunk's metrics.speculative_decoding
        chunks = 0
        last_chunk: dict[str, Any] = {}

        def events(raw: bytes) -> list[Any]:
            try:
                return list(decoder.feed(raw))
            except SseDataError as exc:
                raise self._failed(str(exc)) from None

        for raw in self.target.stream(request.body(stream=True, limit=self._limit), Deadline(self.total_timeout)):
            for event in events(raw):
                if event is DONE or not isinstance(event, dict):
                    continue
                error = stream_error(event)
                if error is not None:
                    raise self._failed(f"stream failed: {error}")
                last_chunk = event
                usage = event.get("usage") or usage
                spec = raw_spec_metrics(event) or spec
                for choice in event.get("choices") or []:
                    delta = choice.get("delta") or {}
                    kind = delta_kind(delta)
                    if kind is not None:
                        now = self.clock()
                        first = first if first is not None else now
                        if kind == "content" and first_content is None:
                            first_content = now
                        chunks += 1
                        text = delta_text(delta)
                        if text:
                            pieces.append(text)
                            yield text
                    finish = choice.get("finish_reason") or finish
        for event in decoder.close():
            if event is not DONE and isinstance(event, dict):
                error = stream_error(event)
                if error is not None:
                    raise self._failed(f"stream failed: {error}")
                usage = event.get("usage") or usage
                spec = raw_spec_metrics(event) or spec
        if not decoder.done and finish is None:
            raise self._failed("stream ended early (no [DONE], no finish_reason)")
        latency = self.clock() - start
        tokens = (usage or {}).get("completion_tokens")
        source = "usage" if tokens is not None else "chunks"
        tokens = tokens if tokens is not None else chunks
        text = "".join(pieces)
        self.last = ChatResult(
            target=self.target.name, target_kind=self.target.kind, transport=self.target.ref.transport,
            inference_component=self.target.ref.inference_component, text=text,
            response={"id": last_chunk.get("id"), "model": last_chunk.get("model"), "object": "chat.completion",
                      "choices": [{"index": 0, "message": {"role": "assistant", "content": text},
                                   "finish_reason": finish}], "usage": usage,
                      **({"metrics": {"speculative_decoding": spec}} if spec is not None else {})},
            stats=CallStats(ttft_s=(first - start) if first is not None else None,
                            ttfc_s=(first_content - start) if first_content is not None else None,
                            latency_s=latency, output_tokens=tokens, output_tokens_source=source,
                            tokens_per_s=tokens / latency if latency > 0 else None, finish_reason=finish),
            acceptance=parse_spec_metrics(spec))
