"""A PROTOTYPE transport for the load generator, measured, not adopted: asyncio BufferedProtocol + httptools.

The socket is read into one preallocated buffer (no bytes object per read), httptools (llhttp, in C) parses
the HTTP/1.1 response and de-chunks it, and the body goes to the same runtime.sse.ChunkTally peagle uses,
once per read. It is what `bench_loadgen_ceiling.py --prototype` runs beside aiohttp.

Why it is not peagle's transport: it speaks plain HTTP/1.1 to one host only. No TLS, no proxies, no
redirects, no connection error classes of aiohttp's (ClientConnectorError, ServerDisconnectedError, ...),
no timeouts but the caller's; the project's rule is to adopt another transport only if it keeps all of
those (issue 26). Needs `pip install httptools` (not a peagle dependency).
"""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

import httptools

from peagle_deploy.runtime.failures import TargetHttpError
from peagle_deploy.runtime.sse import ChunkTally


class _Response(asyncio.BufferedProtocol):
    def __init__(self) -> None:
        self.buffer = bytearray(1 << 18)
        self.view = memoryview(self.buffer)
        self.parser = httptools.HttpResponseParser(self)
        self.transport: Any = None
        self.tally: ChunkTally | None = None
        self.done: asyncio.Future | None = None
        self.pieces: list[bytes] = []
        self.status = 0

    # asyncio
    def connection_made(self, transport: Any) -> None:
        self.transport = transport

    def get_buffer(self, sizehint: int) -> memoryview:
        return self.view

    def buffer_updated(self, nbytes: int) -> None:
        self.parser.feed_data(self.view[:nbytes])
        if self.pieces and self.tally is not None:
            data = self.pieces[0] if len(self.pieces) == 1 else b"".join(self.pieces)
            self.pieces.clear()
            if self.status == 200:
                try:
                    self.tally.feed(data, time.perf_counter())
                except Exception as exc:  # noqa: BLE001 - the request fails with it
                    self._finish(exc)
        if self._complete:
            self._complete = False
            self._finish(None)

    def connection_lost(self, exc: BaseException | None) -> None:
        self._finish(exc or ConnectionResetError("the server closed the connection"))

    # httptools
    _complete = False

    def on_status(self, status: bytes) -> None:
        self.status = self.parser.get_status_code()

    def on_body(self, body: bytes) -> None:
        self.pieces.append(body)

    def on_message_complete(self) -> None:
        self._complete = True

    def _finish(self, exc: BaseException | None) -> None:
        if self.done is not None and not self.done.done():
            if exc is None and self.status != 200:
                exc = TargetHttpError(self.status, "")
            if exc is None and self.tally is not None:
                try:
                    self.tally.finish(time.perf_counter())
                except Exception as finish_exc:  # noqa: BLE001
                    exc = finish_exc
            if exc is None:
                self.done.set_result(None)
            else:
                self.done.set_exception(exc)


class BufferedChatSender:
    """The load generator's Sender over the prototype transport: one keep-alive connection per request in
    flight, to http://host:port/invocations."""

    def __init__(self, host: str, port: int, *, max_tokens: int = 256):
        self.host, self.port = host, port
        body = json.dumps({"messages": [{"role": "user", "content": "Write a long story."}],
                           "max_tokens": max_tokens, "stream": True}).encode()
        self.request = (b"POST /invocations HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\n"
                        b"Accept: text/event-stream\r\nContent-Length: %d\r\n\r\n%s"
                        % (host.encode(), len(body), body))
        self._idle: list[_Response] = []

    async def __aenter__(self) -> BufferedChatSender:
        return self

    async def __aexit__(self, *exc: object) -> None:
        for conn in self._idle:
            conn.transport.close()

    async def __call__(self, messages: Any, rec: Any) -> None:
        conn = self._idle.pop() if self._idle else None
        if conn is None or conn.transport.is_closing():
            _, conn = await asyncio.get_running_loop().create_connection(_Response, self.host, self.port)
        conn.tally = ChunkTally(rec)
        conn.status = 0
        conn.parser = httptools.HttpResponseParser(conn)
        conn.done = asyncio.get_running_loop().create_future()
        conn.transport.write(self.request)
        try:
            await conn.done
        except BaseException:
            conn.transport.close()
            raise
        self._idle.append(conn)
