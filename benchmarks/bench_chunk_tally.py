"""`peagle bench`'s SSE tally (runtime.sse.ChunkTally) alone: CPU per token for the reads it is given.

    .venv/bin/python benchmarks/bench_chunk_tally.py [--tree OTHER_CHECKOUT] [--tokens 2000] [--repeat 5]

One request's stream in vLLM's shape (role chunk, N content chunks with vLLM-length ids and model names, the
finish chunk, usage, [DONE]) is cut into reads two ways: on event boundaries (whole events, as a server that
flushes events whole and an aiohttp read that joins them give), and every S bytes (a read ends inside an event:
TCP segments, SageMaker PayloadParts). Each layout is fed to a fresh ChunkTally, best of --repeat runs, and
reported as ns per token. With --tree, the same reads go through that checkout's ChunkTally too (loaded from
its file, in this process), pair by pair, so before and after are measured in one run. Every run's count is
checked against the exact decoder's.

Results are in docs/performance.md ("The tally's cost at the ceiling").
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import sys
import timeit
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from peagle_deploy.runtime import sse  # noqa: E402 - after the path set-up

BASE = {"id": "chatcmpl-8f3a9c2e4b1d4f6a9e0b7c5d3a1f2e4b", "object": "chat.completion.chunk",
        "created": 1764123456, "model": "Qwen/Qwen3-Coder-30B-A3B-Instruct"}


def event(choice_delta: dict, finish: str | None = None, **extra: object) -> bytes:
    body = {**BASE, "choices": [{"index": 0, "delta": choice_delta, "logprobs": None, "finish_reason": finish}],
            **extra}
    return b"data: " + json.dumps(body, separators=(",", ":")).encode() + b"\n\n"


def stream(tokens: int) -> tuple[bytes, list[int]]:
    """The stream and the offsets where its events end."""
    events = [event({"role": "assistant", "content": ""})]
    events += [event({"content": f" tok{i}"}) for i in range(tokens)]
    events += [event({"content": ""}, "stop"),
               b"data: " + json.dumps({**BASE, "choices": [], "usage": {
                   "prompt_tokens": 3, "completion_tokens": tokens, "total_tokens": tokens + 3}}).encode() + b"\n\n",
               b"data: [DONE]\n\n"]
    ends, at = [], 0
    for e in events:
        at += len(e)
        ends.append(at)
    return b"".join(events), ends


def whole_reads(data: bytes, ends: list[int], n: int) -> list[bytes]:
    """n reads of whole events (the last event of each read ends the read)."""
    step = len(data) / n
    cuts = sorted({0, len(data), *(min(e for e in ends if e >= i * step) for i in range(1, n))})
    return [data[a:b] for a, b in zip(cuts, cuts[1:]) if b > a]


def split_reads(data: bytes, size: int) -> list[bytes]:
    return [data[i:i + size] for i in range(0, len(data), size)]


class Sink:
    usage_tokens = None

    def __init__(self) -> None:
        self.chunks = 0

    def add(self, n: int, now: float, content: bool) -> None:
        self.chunks += n


def load_tally(tree: Path):
    spec = importlib.util.spec_from_file_location("other_sse", tree / "peagle_deploy" / "runtime" / "sse.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.ChunkTally


def ns_per_token(tally_class, reads: list[bytes], tokens: int, repeat: int) -> float:
    def run() -> Sink:
        sink = Sink()
        tally = tally_class(sink)
        for i, read in enumerate(reads):
            tally.feed(read, float(i))
        tally.finish(float(len(reads)))
        return sink

    counted = run()
    if counted.chunks != tokens or counted.usage_tokens != tokens:  # the role and finish chunks carry no token
        raise SystemExit(f"{tally_class.__module__}: counted {counted.chunks} chunks, usage {counted.usage_tokens}")
    number = max(1, 20_000 // tokens)
    return min(timeit.repeat(run, number=number, repeat=repeat)) / number / tokens * 1e9


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokens", type=int, default=2000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--tree", type=Path, help="another checkout whose ChunkTally runs beside this one")
    args = parser.parse_args()
    data, ends = stream(args.tokens)
    layouts = {f"{n} reads of whole events": whole_reads(data, ends, n) for n in (1, 4, 40, 400, args.tokens + 4)}
    layouts.update({f"reads of {size:,} bytes (split inside events)": split_reads(data, size)
                    for size in (933, 4096, 16384, 65536)})
    tallies = {"this tree": sse.ChunkTally}
    if args.tree:
        tallies = {str(args.tree): load_tally(args.tree), **tallies}
    print(f"{args.tokens} tokens, {len(data):,} bytes ({len(data) // args.tokens} per event); ns per token, best of "
          f"{args.repeat}")
    for name, reads in layouts.items():
        figures = {who: ns_per_token(cls, reads, args.tokens, args.repeat) for who, cls in tallies.items()}
        line = ", ".join(f"{who} {ns:6.1f}" for who, ns in figures.items())
        if len(figures) == 2:
            before, after = figures.values()
            line += f" ({after / before:.2f}x)"
        print(f"  {name:45s} {line}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
