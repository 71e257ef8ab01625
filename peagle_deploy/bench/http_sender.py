"""The load generator's HTTP hot path for container and OpenAI URL targets (aiohttp, one session).

Per received network read it takes one timestamp, splits complete SSE events, and for each
`data:` event records a content chunk or the final usage. See docs/performance.md ("Load generator
ceiling") for why this path is written here and what it sustains.
"""

from __future__ import annotations

import json
import time
from itertools import repeat
from typing import Any

from .loadgen import Messages, RequestRecord


class HttpStatusError(Exception):
    def __init__(self, status: int, body: str):
        super().__init__(f"HTTP {status}: {body[:200]}")
        self.status = status


class StreamError(Exception):
    """The server reported an error inside the stream (vLLM: a data event with an error object)."""

    def __init__(self, obj: dict):
        err = obj.get("error", obj)
        code = err.get("code") if isinstance(err, dict) else None
        super().__init__(str(err)[:200])
        self.kind = f"stream_error_{code}" if code else "stream_error"


class StreamIncomplete(Exception):
    kind = "incomplete_stream"


class HttpChatSender:
    """POST a streaming chat request to `url` (the container's /invocations or an OpenAI
    /v1/chat/completions) and record chunk arrival times and usage into a RequestRecord."""

    def __init__(
        self,
        url: str,
        *,
        model: str | None = None,
        max_tokens: int = 256,
        temperature: float = 0.0,
        timeout: float = 600.0,
        headers: dict[str, str] | None = None,
        extra: dict[str, Any] | None = None,
    ):
        self.url = url
        self.model = model
        self.max_tokens = max_tokens
        self.temperature = temperature
        self.timeout = timeout
        self.headers = {"Content-Type": "application/json", "Accept": "text/event-stream", **(headers or {})}
        self.extra = extra or {}
        self._session: Any = None

    def body(self, messages: Messages) -> bytes:
        payload: dict[str, Any] = {
            "messages": messages,
            "max_tokens": self.max_tokens,
            "temperature": self.temperature,
            "stream": True,
            "stream_options": {"include_usage": True},
            **self.extra,
        }
        if self.model:
            payload["model"] = self.model
        return json.dumps(payload).encode()

    async def __aenter__(self) -> HttpChatSender:
        import aiohttp

        connector = aiohttp.TCPConnector(limit=0, force_close=False)
        timeout = aiohttp.ClientTimeout(total=self.timeout, sock_connect=30)
        self._session = aiohttp.ClientSession(connector=connector, timeout=timeout)
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._session is not None:
            await self._session.close()

    async def __call__(self, messages: Messages, rec: RequestRecord) -> None:
        clock = time.perf_counter
        counter = SseTokenCounter(rec)
        feed = counter.feed
        async with self._session.post(self.url, data=self.body(messages), headers=self.headers) as resp:
            if resp.status != 200:
                raise HttpStatusError(resp.status, await resp.text())
            async for data in resp.content.iter_any():
                feed(data, clock())
        counter.finish()


class SseTokenCounter:
    """Incremental SSE reader for the load generator: bytes in (split anywhere), chunk times out.

    Per network read it takes one timestamp. Fast path: when every complete event in the read is a
    plain content chunk (the bulk of a stream: `"delta":{"content":"..."}` with non-empty content, as
    vLLM's compact JSON or Python's json.dumps spacing writes it) they are counted with bytes.count,
    without decoding JSON. Inside a content string quotes are escaped, so the pattern cannot match
    there. Other events (role, finish, usage, [DONE]) make the counts differ: they are peeled off
    both ends of the read and decoded one by one, and if the middle still does not add up (errors,
    reasoning or tool-call deltas, "data:" inside the text) every event of it is decoded exactly.
    """

    __slots__ = ("rec", "buf", "state")

    def __init__(self, rec: RequestRecord):
        self.rec = rec
        self.buf = b""
        self.state = {"done": False}

    def feed(self, data: bytes, now: float) -> None:
        buf = self.buf + data
        if b"\r" in buf:  # CRLF framing (vLLM uses LF); a CR split from its LF waits in the remainder
            buf = buf.replace(b"\r\n", b"\n")
        if b"\n\n" not in buf:
            self.buf = buf
            return
        complete, _, self.buf = buf.rpartition(b"\n\n")
        if _count_plain(complete, now, self.rec):
            return
        # Other events (role, finish, usage, [DONE]) sit at the start and the end of a stream: peel
        # them off both ends and decode them one by one, then count the plain middle.
        lo, hi = 0, len(complete)
        tail: list[bytes] = []
        while lo < hi:
            cut = complete.rfind(b"\n\n", lo, hi)
            event = complete[cut + 2 if cut >= 0 else lo : hi]
            if _is_plain(event):
                break
            tail.append(event)
            hi = cut if cut >= 0 else lo
        while lo < hi:
            cut = complete.find(b"\n\n", lo, hi)
            event = complete[lo : cut if cut >= 0 else hi]
            if _is_plain(event):
                break
            _decode_events(event, now, self.rec, self.state)
            lo = cut + 2 if cut >= 0 else hi
        if lo < hi and not _count_plain(complete[lo:hi], now, self.rec):
            _decode_events(complete[lo:hi], now, self.rec, self.state)
        for event in reversed(tail):
            _decode_events(event, now, self.rec, self.state)

    def finish(self) -> None:
        if self.buf.strip():
            _decode_events(self.buf, time.perf_counter(), self.rec, self.state)
            self.buf = b""
        if not self.state["done"]:
            raise StreamIncomplete("the stream ended without data: [DONE]")


def _count_plain(events: bytes, now: float, rec: RequestRecord) -> bool:
    """If `events` (whole events) are all plain content chunks, record them without JSON: the number of
    non-empty content deltas equals the number of data lines, and no usage or error is present."""
    n = _content_chunks(events)
    # an error event has no content delta, so it already makes the counts differ
    if n and n == events.count(b"data:") and b'"usage"' not in events:
        rec.chunk_times.extend(repeat(now, n))
        return True
    return False


def _is_plain(event: bytes) -> bool:
    return _content_chunks(event) == 1 and event.count(b"data:") == 1 and b'"usage"' not in event


def _content_chunks(data: bytes) -> int:
    """How many `"delta":{"content":"<non-empty>"` appear in `data`, in vLLM's compact JSON or else in
    json.dumps spacing (a buffer mixing both undercounts, which only sends it down the exact path)."""
    count = data.count
    n = count(b'"delta":{"content":"')
    if n:
        return n - count(b'"delta":{"content":""')
    return count(b'"delta": {"content": "') - count(b'"delta": {"content": ""')


def _decode_events(complete: bytes, now: float, rec: RequestRecord, state: dict) -> None:
    """The exact path, event by event ("\n\n"-separated); plain content events still skip JSON."""
    times = rec.chunk_times
    for event in complete.split(b"\n\n"):
        if _is_plain(event):
            times.append(now)
            continue
        for line in event.split(b"\n"):
            if not line.startswith(b"data:"):
                continue
            payload = line[5:].strip()
            if payload == b"[DONE]":
                state["done"] = True
                continue
            if not payload:
                continue
            obj = json.loads(payload)
            choices = obj.get("choices")
            if choices:
                delta = choices[0].get("delta") or {}
                if (
                    delta.get("content")
                    or delta.get("reasoning_content")
                    or delta.get("reasoning")
                    or delta.get("tool_calls")
                ):
                    times.append(now)
            usage = obj.get("usage")
            if usage and usage.get("completion_tokens") is not None:
                rec.usage_tokens = int(usage["completion_tokens"])
            if not choices and ("error" in obj or obj.get("object") == "error"):
                raise StreamError(obj)
