"""A paced SSE server with a known truth, to measure the load generator itself (tests, benchmarks).

It speaks the container contract (GET /ping, POST /invocations, and POST /v1/chat/completions) with
vLLM-shaped streaming chunks: after `ttft` seconds, token i of a response is due at
ttft + i / tokens_per_s. It writes every due token as its own SSE event; when it falls behind (a
loaded machine) it catches up by writing the due events together, so the schedule, not the
server's speed, is the truth. `max_batch` caps the events per write (1: one event per write, as a
GPU server emits one token per step). GET /metrics exposes `vllm:generation_tokens_total`, the
tokens it has written, so a benchmark can read what was really sent over its window.

Raw asyncio with a large listen backlog (Python's default of 5... here 4096), so 128 connections
opening at once are accepted, not dropped and retried.

    python -m peagle_deploy.testing.paced_server --ttft 0 --tokens-per-s 4000 --tokens 2000 --port 0

prints `PORT <n>` on its first line. The invoke tests' stand-in for vLLM is testing/fake_vllm.py; this
one only exists to calibrate `peagle bench`.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import time

_HEAD_SSE = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"


def _event(obj: dict) -> bytes:
    return b"data: " + json.dumps(obj, separators=(",", ":")).encode() + b"\n\n"


class PacedServer:
    def __init__(
        self,
        *,
        ttft: float = 0.0,
        tokens_per_s: float = 50.0,
        tokens: int = 64,
        min_tokens: int | None = None,
        max_batch: int = 0,
        seed: int = 1,
    ):
        self.ttft = ttft
        self.rate = tokens_per_s
        self.tokens = tokens
        self.min_tokens = tokens if min_tokens is None else min_tokens
        self.max_batch = max_batch
        self.sent = 0
        self.requests = 0
        self._random = random.Random(seed)
        base = {"id": "chatcmpl-paced", "object": "chat.completion.chunk", "created": 0, "model": "paced"}
        self._role = _event(
            {
                **base,
                "choices": [
                    {"index": 0, "delta": {"role": "assistant", "content": ""}, "logprobs": None, "finish_reason": None}
                ],
            }
        )
        self._token = _event(
            {**base, "choices": [{"index": 0, "delta": {"content": " tok"}, "logprobs": None, "finish_reason": None}]}
        )
        self._finish = _event(
            {**base, "choices": [{"index": 0, "delta": {"content": ""}, "logprobs": None, "finish_reason": "length"}]}
        )
        self._base = base
        self.server: asyncio.AbstractServer | None = None

    def _usage(self, n: int) -> bytes:
        return _event(
            {**self._base, "choices": [], "usage": {"prompt_tokens": 8, "completion_tokens": n, "total_tokens": n + 8}}
        )

    async def start(self, host: str = "127.0.0.1", port: int = 0) -> int:
        self.server = await asyncio.start_server(self._handle, host, port, backlog=4096)
        return self.server.sockets[0].getsockname()[1]

    async def close(self) -> None:
        if self.server is not None:
            self.server.close()
            await self.server.wait_closed()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                first, *lines = head.split(b"\r\n")
                parts = first.split(b" ")
                path = parts[1] if len(parts) > 1 else b"/"
                length = 0
                for line in lines:
                    if line[:15].lower() == b"content-length:":
                        length = int(line[15:])
                body = await reader.readexactly(length) if length else b""
                if path == b"/metrics":
                    text = (
                        b"# TYPE vllm:generation_tokens_total counter\n"
                        b'vllm:generation_tokens_total{model_name="paced"} %d\n' % self.sent
                    )
                    writer.write(
                        b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: %d\r\n\r\n%s"
                        % (len(text), text)
                    )
                elif path == b"/ping":
                    writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}")
                elif path in (b"/invocations", b"/v1/chat/completions"):
                    await self._stream(json.loads(body or b"{}"), writer)
                else:
                    writer.write(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n")
        except (asyncio.IncompleteReadError, ConnectionError, ValueError):
            pass
        finally:
            writer.close()

    async def _stream(self, request: dict, writer: asyncio.StreamWriter) -> None:
        t0 = time.perf_counter()
        n = self._random.randint(self.min_tokens, self.tokens)
        if request.get("max_tokens"):
            n = min(n, int(request["max_tokens"]))
        self.requests += 1
        writer.write(_HEAD_SSE + b"%x\r\n%s\r\n" % (len(self._role), self._role))
        clock, sleep, rate, token = time.perf_counter, asyncio.sleep, self.rate, self._token
        cap = self.max_batch or n
        i = 0
        while i < n:
            elapsed = clock() - t0 - self.ttft
            due = n if rate <= 0 else min(n, int(elapsed * rate) + 1) if elapsed >= 0 else 0
            if due > i:
                k = min(due - i, cap)
                data = token * k
                writer.write(b"%x\r\n%s\r\n" % (len(data), data))
                self.sent += k
                i += k
                await writer.drain()
                if k == cap and due > i:
                    await sleep(0)
                    continue
            if i < n:
                await sleep(max(0.0, t0 + self.ttft + (i / rate if rate > 0 else 0) - clock()))
        tail = self._finish + self._usage(n) + b"data: [DONE]\n\n"
        writer.write(b"%x\r\n%s\r\n0\r\n\r\n" % (len(tail), tail))
        await writer.drain()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Paced SSE server with a known truth, for calibrating peagle bench.")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--ttft", type=float, default=0.0, help="seconds before the first token")
    parser.add_argument("--tokens-per-s", type=float, default=50.0, help="per stream; 0: as fast as possible")
    parser.add_argument("--tokens", type=int, default=64, help="output tokens per response (the maximum)")
    parser.add_argument("--min-tokens", type=int, default=None, help="draw each response's length from [min, max]")
    parser.add_argument("--max-batch", type=int, default=0, help="events per write (0: all that are due)")
    args = parser.parse_args(argv)

    async def serve() -> None:
        server = PacedServer(
            ttft=args.ttft,
            tokens_per_s=args.tokens_per_s,
            tokens=args.tokens,
            min_tokens=args.min_tokens,
            max_batch=args.max_batch,
        )
        port = await server.start(args.host, args.port)
        print(f"PORT {port}", flush=True)
        assert server.server is not None
        async with server.server:
            await server.server.serve_forever()

    try:
        asyncio.run(serve())
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
