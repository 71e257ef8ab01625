"""The load generator's transport for container and OpenAI URLs: aiohttp, one session, the shared SSE tally.

Bodies come from bench.request_bodies (runtime.payload.ChatRequest, encoded once per prompt), chunks are counted by
runtime.sse.ChunkTally (the chunk rule of `peagle invoke`), non-200 answers carry the server's own
error text (runtime.failures). docs/performance.md ("Load generator ceiling") has what it sustains.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from ..runtime.failures import TargetHttpError, error_text
from ..runtime.sse import ChunkTally
from .records import Messages, RequestRecord
from .request_bodies import RequestBodies


class HttpChatSender:
    """POST a streaming chat request to `url` (the container's /invocations or an OpenAI
    /v1/chat/completions) and report token chunks to the RequestRecord."""

    def __init__(self, url: str, *, model: str | None = None, max_tokens: int = 256, temperature: float = 0.0,
                 timeout: float = 600.0, headers: dict[str, str] | None = None,
                 auth: Callable[[], dict[str, str]] | None = None):
        self.url = url
        self.body = RequestBodies({"max_tokens": max_tokens, "temperature": temperature,
                                   **({"model": model} if model else {})})
        self.timeout = timeout
        self.headers = {"Content-Type": "application/json", "Accept": "text/event-stream", **(headers or {})}
        self._auth = auth  # per-request headers: a bearer token renewed before it expires (SageMaker's OpenAI route)
        self._session: Any = None

    async def __aenter__(self) -> HttpChatSender:
        import aiohttp

        connector = aiohttp.TCPConnector(limit=0, force_close=False)
        timeout = aiohttp.ClientTimeout(total=self.timeout, sock_connect=30)
        self._session = aiohttp.ClientSession(connector=connector, timeout=timeout)
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._session is not None:
            await self._session.close()

    async def __call__(self, messages: Messages, rec: RequestRecord, answer: bytearray | None = None) -> None:
        """`answer`: when given, the raw stream is copied into it (a multi-turn record's next turn needs the text)."""
        clock = time.perf_counter
        tally = ChunkTally(rec)
        feed = tally.feed
        headers = self.headers if self._auth is None else {**self.headers, **self._auth()}
        async with self._session.post(self.url, data=self.body(messages), headers=headers) as resp:
            if resp.status != 200:
                raise TargetHttpError(resp.status, error_text(await resp.read()))
            async for data in resp.content.iter_any():
                feed(data, clock())
                if answer is not None:
                    answer += data
        tally.finish(clock())
