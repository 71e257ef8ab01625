"""How fast peagle decodes SageMaker response streams, on one core.

    python benchmarks/bench_stream_decoder.py [--tokens 200000] [--part-size 0] [--parser botocore-events]

Builds a vLLM-format SSE stream of N tokens, one PayloadPart per SSE event (what SageMaker sends as
vLLM flushes each token) or parts of --part-size bytes, wraps each in a real AWS event-stream frame,
and times the whole client path with the network taken out: frame parsing, peagle's SseDecoder, and
JSON token extraction as PeagleClient.stream does it. Frame parsing, by --parser:
- botocore-events (default, what `peagle invoke` runs): botocore's EventStream over the
  sagemaker-runtime output shape, `{"PayloadPart": {"Bytes": ...}}` events, via
  `runtime.eventstream.botocore_payload_parts`;
- botocore-buffer: botocore's EventStreamBuffer alone (frames, no shape parsing);
- peagle: peagle's EventStreamReader (what `peagle bench`'s load generator runs).
Prints PayloadPart events/s and tokens/s.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Iterator

from botocore.eventstream import EventStreamBuffer

from peagle_deploy.runtime.eventstream import EventStreamReader, botocore_payload_parts
from peagle_deploy.runtime.sse import DONE, SseDecoder
from peagle_deploy.testing.streaming import chat_sse, event_frame, split_at

READ_SIZE = 65536  # what urllib3 hands botocore per read


def build(tokens: int, part_size: int) -> tuple[bytes, int]:
    sse = chat_sse([f" tok{i % 1000}" for i in range(tokens)])
    if part_size:
        parts = split_at(sse, range(part_size, len(sse), part_size))
    else:
        parts = [event + b"\n\n" for event in sse.split(b"\n\n") if event]
    return b"".join(event_frame(p) for p in parts), len(parts)


def reads(wire: bytes) -> list[bytes]:
    return [wire[i:i + READ_SIZE] for i in range(0, len(wire), READ_SIZE)]


class _Raw:
    def __init__(self, chunks: list[bytes]):
        self._chunks = chunks

    def stream(self, *_: object, **__: object) -> Iterator[bytes]:
        yield from self._chunks

    def close(self) -> None:
        pass


def payloads_botocore_events(chunks: list[bytes]) -> Iterator[bytes]:
    from botocore.eventstream import EventStream
    from botocore.parsers import EventStreamJSONParser
    from botocore.session import get_session

    model = get_session().get_service_model("sagemaker-runtime")
    shape = model.operation_model("InvokeEndpointWithResponseStream").output_shape.members["Body"]
    stream = EventStream(_Raw(chunks), shape, EventStreamJSONParser(), "InvokeEndpointWithResponseStream")
    return botocore_payload_parts(stream)


def payloads_botocore_buffer(chunks: list[bytes]) -> Iterator[bytes]:
    buffer = EventStreamBuffer()
    for chunk in chunks:
        buffer.add_data(chunk)
        for message in buffer:
            yield message.payload


def payloads_peagle(chunks: list[bytes]) -> Iterator[bytes]:
    reader = EventStreamReader()
    for chunk in chunks:
        for _event_type, _message_type, payload in reader.feed(chunk):
            yield payload


PARSERS = {"botocore-events": payloads_botocore_events, "botocore-buffer": payloads_botocore_buffer,
           "peagle": payloads_peagle}


def decode(chunks: list[bytes], parser=payloads_botocore_events) -> int:
    decoder, count = SseDecoder(), 0
    for payload in parser(chunks):
        for event in decoder.feed(payload):
            if event is DONE:
                continue
            for choice in event.get("choices") or ():
                if (choice.get("delta") or {}).get("content"):
                    count += 1
    return count


def huge_line(megabytes: int) -> None:
    import json

    wire = b"data: " + json.dumps({"choices": [{"delta": {"content": "x" * (megabytes << 20)}}]}).encode() + b"\n\n"
    start = time.perf_counter()
    decoder, events = SseDecoder(), 0
    for i in range(0, len(wire), READ_SIZE):
        events += len(list(decoder.feed(wire[i:i + READ_SIZE])))
    seconds = time.perf_counter() - start
    assert events == 1
    print(f"huge_line_mb={megabytes} seconds={seconds:.3f} mb_per_s={megabytes / seconds:,.1f}")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--tokens", type=int, default=200_000)
    parser.add_argument("--part-size", type=int, default=0, help="0: one PayloadPart per SSE event")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--parser", choices=sorted(PARSERS), default="botocore-events")
    parser.add_argument("--huge-line", type=int, default=0, metavar="MB",
                        help="instead: one SSE event of MB megabytes in 64 KiB reads (must be linear in MB)")
    args = parser.parse_args()
    if args.huge_line:
        huge_line(args.huge_line)
        return
    wire, parts = build(args.tokens, args.part_size)
    chunks = reads(wire)
    best = float("inf")
    for _ in range(args.repeat):
        start = time.perf_counter()
        tokens = decode(chunks, PARSERS[args.parser])
        best = min(best, time.perf_counter() - start)
    assert tokens == args.tokens, (tokens, args.tokens)
    print(f"parser={args.parser} payload_parts={parts} tokens={tokens} bytes={len(wire)} "
          f"best_of={args.repeat} seconds={best:.3f}")
    print(f"payload_parts_per_s={parts / best:,.0f} tokens_per_s={tokens / best:,.0f}")


if __name__ == "__main__":
    main()
