"""Talking to a deployed model: payloads, targets, SSE decoding, and a client with per-call statistics.

- `payload`: ChatRequest (OpenAI chat completion), build_request, parse_payload (validated, 6 MB limit)
- `sse`: SseDecoder, incremental and safe for chunks split anywhere
- `targets`: SageMaker endpoint / container URL / OpenAI URL, classify() and open_target()
- `client`: PeagleClient(target).chat(request) and .stream(request); `.last.stats` after each call
"""

from .client import CallStats, ChatResult, PeagleClient
from .payload import ChatRequest, build_request, parse_payload

__all__ = ["CallStats", "ChatRequest", "ChatResult", "PeagleClient", "build_request", "parse_payload"]
