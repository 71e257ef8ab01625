"""PeagleClient: one chat request to any target, streamed or not, with the same statistics.

    client = PeagleClient("my-endpoint")                    # or "http://localhost:8080", ".../v1"
    result = client.chat(build_request("Write quicksort"))  # full response
    for piece in client.stream(request):                    # text as it arrives
        print(piece, end="")
    client.last.stats                                       # TTFT, latency, tokens, tokens/s
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from typing import Any

from pydantic import BaseModel

from ..errors import EndpointFailed, WaitTimeout
from .payload import ChatRequest
from .sse import DONE, SseDataError, SseDecoder
from .targets import HttpTarget, SageMakerTarget, open_target


class CallStats(BaseModel):
    ttft_s: float | None
    latency_s: float
    output_tokens: int | None
    output_tokens_source: str  # "usage" when the server reported it, else "chunks" (one per content chunk)
    tokens_per_s: float | None
    finish_reason: str | None


class ChatResult(BaseModel):
    target: str
    target_kind: str
    text: str
    response: dict[str, Any]
    stats: CallStats


class PeagleClient:
    def __init__(self, target: str, *, kind: str | None = None, region: str | None = None,
                 profile: str | None = None, idle_timeout: float = 60.0, total_timeout: float = 900.0,
                 clock: Callable[[], float] = time.perf_counter):
        self.target: HttpTarget | SageMakerTarget = open_target(target, kind=kind, region=region, profile=profile,
                                                                idle_timeout=idle_timeout)
        self.total_timeout = total_timeout
        self.clock = clock
        self.last: ChatResult | None = None

    def chat(self, request: ChatRequest) -> ChatResult:
        start = self.clock()
        raw = self.target.send(request.body(stream=False))
        latency = self.clock() - start
        try:
            response = json.loads(raw)
        except ValueError:
            raise EndpointFailed(f"{self.target.name} answered with something that is not JSON: {raw[:120]!r}",
                                 self.target.log_hint) from None
        if isinstance(response, dict) and "error" in response and "choices" not in response:
            raise EndpointFailed(f"{self.target.name} returned an error: {response['error']}", self.target.log_hint)
        choice = (response.get("choices") or [{}])[0]
        text = (choice.get("message") or {}).get("content") or choice.get("text") or ""
        tokens = (response.get("usage") or {}).get("completion_tokens")
        self.last = ChatResult(
            target=self.target.name, target_kind=self.target.kind, text=text, response=response,
            stats=CallStats(ttft_s=None, latency_s=latency, output_tokens=tokens,
                            output_tokens_source="usage" if tokens is not None else "unknown",
                            tokens_per_s=tokens / latency if tokens and latency > 0 else None,
                            finish_reason=choice.get("finish_reason")))
        return self.last

    def stream(self, request: ChatRequest) -> Iterator[str]:
        """Yield text as it arrives; `self.last` holds the assembled result when the stream ends."""
        start = self.clock()
        decoder = SseDecoder()
        pieces: list[str] = []
        first: float | None = None
        finish: str | None = None
        usage: dict[str, Any] | None = None
        chunks = 0
        last_chunk: dict[str, Any] = {}
        for raw in self.target.stream(request.body(stream=True)):
            try:
                events = list(decoder.feed(raw))
            except SseDataError as exc:
                raise EndpointFailed(f"{self.target.name}: {exc}", self.target.log_hint) from None
            for event in events:
                if event is DONE or not isinstance(event, dict):
                    continue
                if "error" in event and not event.get("choices"):
                    raise EndpointFailed(f"{self.target.name} stream failed: {event['error']}",
                                         self.target.log_hint)
                last_chunk = event
                usage = event.get("usage") or usage
                for choice in event.get("choices") or []:
                    delta = choice.get("delta") or {}
                    text = delta.get("content") or delta.get("reasoning_content") or ""
                    if text:
                        if first is None:
                            first = self.clock()
                        chunks += 1
                        pieces.append(text)
                        yield text
                    finish = choice.get("finish_reason") or finish
            if self.clock() - start > self.total_timeout:
                raise WaitTimeout(f"{self.target.name} still streaming after {self.total_timeout:g}s",
                                  "raise --timeout or lower --max-tokens")
        for event in decoder.close():
            if event is not DONE and isinstance(event, dict):
                usage = event.get("usage") or usage
        if not decoder.done and finish is None:
            raise EndpointFailed(f"the stream from {self.target.name} ended early (no [DONE], no finish_reason)",
                                 self.target.log_hint)
        latency = self.clock() - start
        tokens = (usage or {}).get("completion_tokens")
        source = "usage" if tokens is not None else "chunks"
        tokens = tokens if tokens is not None else chunks
        text = "".join(pieces)
        self.last = ChatResult(
            target=self.target.name, target_kind=self.target.kind, text=text,
            response={"id": last_chunk.get("id"), "model": last_chunk.get("model"), "object": "chat.completion",
                      "choices": [{"index": 0, "message": {"role": "assistant", "content": text},
                                   "finish_reason": finish}], "usage": usage},
            stats=CallStats(ttft_s=(first - start) if first is not None else None, latency_s=latency,
                            output_tokens=tokens, output_tokens_source=source,
                            tokens_per_s=tokens / latency if latency > 0 else None,
                            finish_reason=finish))
