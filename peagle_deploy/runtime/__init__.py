"""The client layer shared by invoke, bench and metrics: what a target is, a request, a chunk and a failure.

- `target_ref`: parse_target() -> TargetRef (kind, request/metrics/ping URL, log group): the one target rule
- `payload`: ChatRequest (OpenAI chat completion), build_request, parse_payload (validated; the client applies
  a SageMaker endpoint's 6 MB request limit)
- `sse`: SseDecoder (exact, linear in a huge line), the chunk rule (delta_kind) and ChunkTally (bench's fast path)
- `eventstream`: SageMaker response streams -> PayloadPart bytes (botocore's parser, or peagle's for bench)
- `failures`: a target's non-200 answer -> the server's own text and one exit code
- `targets`: the HTTP and SageMaker transports of one request, with idle and total deadlines
- `client`: PeagleClient(target).chat(request) and .stream(request); `.last.stats` after each call
"""

from .client import CallStats, ChatResult, PeagleClient
from .payload import ChatRequest, build_request, parse_payload

__all__ = ["CallStats", "ChatResult", "ChatRequest", "PeagleClient", "build_request", "parse_payload"]
