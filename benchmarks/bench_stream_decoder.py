"""How fast peagle decodes SageMaker response streams, on one core.

    python benchmarks/bench_stream_decoder.py [--tokens 200000] [--part-size 0]

Builds a vLLM-format SSE stream of N tokens, one PayloadPart per SSE event (what SageMaker sends as
vLLM flushes each token) or parts of --part-size bytes, wraps each in a real AWS event-stream frame,
and times the whole client path: the frame parser (peagle's EventStreamReader, or botocore's
EventStreamBuffer with --botocore, for comparison), peagle's SseDecoder, and JSON token extraction as
PeagleClient.stream does it. Prints PayloadPart events/s and tokens/s.
"""

from __future__ import annotations

import argparse
import time

from botocore.eventstream import EventStreamBuffer

from peagle_deploy.runtime.eventstream import EventStreamReader
from peagle_deploy.runtime.sse import DONE, SseDecoder
from peagle_deploy.testing.streaming import chat_sse, event_frame, split_at


def build(tokens: int, part_size: int) -> tuple[bytes, int]:
    sse = chat_sse([f" tok{i % 1000}" for i in range(tokens)])
    if part_size:
        parts = split_at(sse, range(part_size, len(sse), part_size))
    else:
        parts = [event + b"\n\n" for event in sse.split(b"\n\n") if event]
    return b"".join(event_frame(p) for p in parts), len(parts)


def payloads_botocore(wire: bytes, read_size: int):
    buffer = EventStreamBuffer()
    for start in range(0, len(wire), read_size):
        buffer.add_data(wire[start:start + read_size])
        for message in buffer:
            yield message.payload


def payloads_peagle(wire: bytes, read_size: int):
    reader = EventStreamReader()
    for start in range(0, len(wire), read_size):
        for _event_type, _message_type, payload in reader.feed(wire[start:start + read_size]):
            yield payload


def decode(wire: bytes, read_size: int = 65536, parser=payloads_peagle) -> int:
    decoder, count = SseDecoder(), 0
    for payload in parser(wire, read_size):
        for event in decoder.feed(payload):
            if event is DONE:
                continue
            for choice in event.get("choices") or ():
                if (choice.get("delta") or {}).get("content"):
                    count += 1
    return count


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--tokens", type=int, default=200_000)
    parser.add_argument("--part-size", type=int, default=0, help="0: one PayloadPart per SSE event")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--botocore", action="store_true", help="parse frames with botocore's EventStreamBuffer")
    args = parser.parse_args()
    wire, parts = build(args.tokens, args.part_size)
    best = float("inf")
    for _ in range(args.repeat):
        start = time.perf_counter()
        tokens = decode(wire, parser=payloads_botocore if args.botocore else payloads_peagle)
        best = min(best, time.perf_counter() - start)
    assert tokens == args.tokens, (tokens, args.tokens)
    print(f"parser={'botocore' if args.botocore else 'peagle'} payload_parts={parts} tokens={tokens} bytes={len(wire)} best_of={args.repeat} seconds={best:.3f}")
    print(f"payload_parts_per_s={parts / best:,.0f} tokens_per_s={tokens / best:,.0f}")


if __name__ == "__main__":
    main()
