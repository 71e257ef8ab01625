"""Server-sent events of chat-completion streams: one decoder, one chunk rule, one fast tally.

Bytes arrive split anywhere (SageMaker PayloadParts, TCP reads): mid-line, mid-UTF-8 character.
Lines are cut on bytes and only complete lines are decoded, so a character split across chunks is
never decoded in halves. `data: [DONE]` ends the stream. The buffer grows by appending and only new
bytes are searched for a line end, so one huge line costs linear time.

The chunk rule (docs/bench.md, "What a token chunk is"): a chunk carries output tokens when its
delta has non-empty `content`, `reasoning_content`/`reasoning` (reasoning models such as gpt-oss:
the user waits for those tokens too) or `tool_calls`. TTFT is the first such chunk; "time to first
content" is the first chunk with `content`. `peagle invoke`, `peagle bench` and the tests all apply
`delta_kind` below.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any, Protocol

from .spec_metrics import raw_spec_metrics

DONE = object()  # yielded once for `data: [DONE]`


class SseDataError(ValueError):
    """A complete `data:` payload that is not JSON (a server bug, not a split: splits never reach here)."""


class StreamError(Exception):
    """The server reported an error inside the stream (vLLM: a data event with an error object)."""

    def __init__(self, message: str, code: Any = None):
        super().__init__(message)
        self.message = message
        self.kind = f"stream_error_{code}" if code else "stream_error"


class StreamIncomplete(Exception):
    kind = "incomplete_stream"


def delta_kind(delta: dict[str, Any]) -> str | None:
    """'content', 'reasoning' or 'tool' when a delta carries output tokens, else None (role, finish)."""
    if delta.get("content"):
        return "content"
    if delta.get("reasoning_content") or delta.get("reasoning"):
        return "reasoning"
    if delta.get("tool_calls"):
        return "tool"
    return None


def delta_text(delta: dict[str, Any]) -> str:
    """The text a delta shows a reader: content or reasoning (tool-call arguments are not text)."""
    return delta.get("content") or delta.get("reasoning_content") or delta.get("reasoning") or ""


def stream_error(event: Any) -> str | None:
    """The error text of an in-band error event (`{"error": ...}` or `{"object": "error", ...}`), else None."""
    if not isinstance(event, dict) or event.get("choices"):
        return None
    if "error" in event:
        err = event["error"]
        return str(err.get("message") or err) if isinstance(err, dict) else str(err)
    if event.get("object") == "error":
        return str(event.get("message") or event)
    return None


def _json(payload: bytes) -> Any:
    try:
        return json.loads(payload)
    except ValueError:
        raise SseDataError(f"malformed stream event: {payload[:80]!r}") from None


class SseDecoder:
    """feed(bytes) -> the complete `data:` payloads so far, as parsed JSON objects (or DONE)."""

    __slots__ = ("_buffer", "_data", "done")

    def __init__(self) -> None:
        self._buffer = bytearray()
        self._data: list[bytes] = []
        self.done = False

    def feed(self, chunk: bytes) -> Iterator[Any]:
        if not self._buffer and not self._data and chunk.startswith(b"data: ") and chunk.endswith(b"\n\n") \
                and chunk.count(b"\n") == 2:  # fast path: one whole event (vLLM flushes one per token)
            payload = chunk[6:-2].rstrip(b"\r")
            if payload == b"[DONE]":
                self.done = True
                yield DONE
            else:
                yield _json(payload)
            return
        self._buffer += chunk
        if b"\n" not in chunk:  # only the new bytes can hold the line end: linear in a huge line
            return
        *lines, rest = bytes(self._buffer).split(b"\n")
        self._buffer = bytearray(rest)
        for line in lines:
            yield from self._line(line.rstrip(b"\r"))

    def close(self) -> Iterator[Any]:
        """End of input. Complete `data:` lines still waiting for their blank line are dispatched; an
        unterminated last line is a truncated stream and is dropped (as the SSE spec says)."""
        self._buffer = bytearray()
        yield from self._line(b"")

    def _line(self, line: bytes) -> Iterator[Any]:
        if not line:  # a blank line dispatches the event
            if self._data:
                payload = b"\n".join(self._data)
                self._data = []
                if payload.strip() == b"[DONE]":
                    self.done = True
                    yield DONE
                else:
                    yield _json(payload)
            return
        if line.startswith(b"data:"):
            value = line[5:]
            self._data.append(value[1:] if value.startswith(b" ") else value)
        # comments (':'), event:, id: and retry: lines carry nothing a chat stream needs


class ChunkSink(Protocol):
    usage_tokens: int | None
    spec_decoding: dict[str, Any] | None  # the usage chunk's metrics.speculative_decoding (vLLM 0.29+, when asked)

    def add(self, n: int, now: float, content: bool) -> None: ...


class ChunkTally:
    """The load generator's reader: bytes in (split anywhere), token chunks out to `sink.add`.

    One timestamp and one `sink.add` per network read. Fast path: when every complete event in the read
    is a plain content chunk (`"delta":{"content":"<non-empty>"` in vLLM's compact JSON or json.dumps
    spacing) they are counted with `bytes.count` (`_plain_chunks`), without decoding JSON and without
    copying the read: the counts take the read's bounds. A read that ends inside an event leaves only that
    partial event behind; the next read completes it (a copy of one event) and is counted in place from
    there. Inside a content string quotes are escaped, so the pattern cannot match there. Anything else
    (role, finish, usage, [DONE], errors, reasoning or tool-call deltas, comments, multi-line events) goes
    through SseDecoder and the chunk rule, event by event: the same decoder and rule `peagle invoke` uses. The
    usage event's `metrics.speculative_decoding` (vLLM's per-request acceptance) goes to `sink.spec_decoding`.
    """

    __slots__ = ("sink", "buf", "decoder", "_n", "_content", "_crlf", "_started")

    def __init__(self, sink: ChunkSink):
        self.sink = sink
        self.buf = bytearray()  # the partial event the last read ended in (it holds no blank line)
        self.decoder = SseDecoder()
        self._n = 0
        self._content = False
        self._crlf = False
        self._started = False  # a read was fed: the role chunk is behind

    def feed(self, data: bytes, now: float) -> None:
        if not self.buf and data[-2:] == b"\n\n":  # the usual read: whole LF-framed events, counted in place
            if self._started:
                n = _whole_plain_read(data)
                if n:  # the commonest read of all (one call, two C scans): nothing to peel or decode
                    self.sink.add(n, now, True)
                    return
            else:  # a stream's first read starts with its role chunk: peeled, not scanned first in vain
                self._started = True
            if b"\r" not in data:
                self._peel(data, 0, len(data) - 2, now)
                self._flush(now)
                return
        if self._crlf or b"\r" in data:  # CRLF framing (vLLM uses LF): normalised in a buffer from here on
            self._crlf = True
            self._feed_crlf(data, now)
            return
        start = 0
        if self.buf:  # complete the partial event left by the last read with this read's first bytes
            buf = self.buf
            if buf[-1] == 10 and data[:1] == b"\n":  # the blank line is split across the two reads
                start = 1
            else:
                at = data.find(b"\n\n")
                if at < 0:
                    buf += data
                    return
                start = at + 2
            head = bytes(buf) + data[:start]
            self.buf = bytearray()
            self._events(head, 0, len(head) - 2, now)
        cut = data.rfind(b"\n\n", start)
        if cut < 0:
            self.buf = bytearray(data[start:])
        else:
            self.buf = bytearray(data[cut + 2:])
            self._events(data, start, cut, now)
        self._started = True
        self._flush(now)

    def _feed_crlf(self, data: bytes, now: float) -> None:
        buf = self.buf
        buf += data
        if b"\n" not in data:
            return
        buf = bytearray(buf.replace(b"\r\n", b"\n"))  # a CR split from its LF waits in the remainder
        cut = buf.rfind(b"\n\n")
        if cut < 0:
            self.buf = buf
            return
        complete = bytes(buf[:cut])
        self.buf = buf[cut + 2:]
        self._events(complete, 0, cut, now)
        self._flush(now)

    def _events(self, complete: bytes, lo: int, hi: int, now: float) -> None:
        """Count the whole events in `complete[lo:hi]` (the blank line after the last one excluded) into
        `_n`: in place when they are plain content chunks, decoded otherwise."""
        n = _whole_plain_read(complete, lo, hi + 2) if self._started and complete.startswith(b"\n\n", hi) else 0
        if n:
            self._n += n
            self._content = True
        else:
            self._peel(complete, lo, hi, now)

    def _peel(self, complete: bytes, lo: int, hi: int, now: float) -> None:
        # Other events (role, finish, usage, [DONE]) sit at the start and the end of a stream: peel them
        # off both ends (small events, cheap) and decode them one by one; then count the middle in place.
        tail: list[bytes] = []
        while lo < hi:
            at = complete.rfind(b"\n\n", lo, hi)
            start = at + 2 if at >= 0 else lo
            if _plain_chunks(complete, start, hi) == 1:
                break
            tail.append(complete[start:hi])
            hi = at if at >= 0 else lo
        while lo < hi:
            at = complete.find(b"\n\n", lo, hi)
            end = at if at >= 0 else hi
            if _plain_chunks(complete, lo, end) == 1:
                break
            self._exact(complete[lo:end], now)
            lo = at + 2 if at >= 0 else hi
        if lo < hi:
            n = _plain_chunks(complete, lo, hi, edges_peeled=True)
            if n:
                self._n += n
                self._content = True
            else:
                self._exact(complete[lo:hi], now)
        for event in reversed(tail):
            self._exact(event, now)

    def _flush(self, now: float) -> None:
        if self._n:
            self.sink.add(self._n, now, self._content)
            self._n, self._content = 0, False

    def _exact(self, events: bytes, now: float) -> None:
        for event in self.decoder.feed(events + b"\n\n"):
            if event is DONE or not isinstance(event, dict):
                continue
            error = stream_error(event)
            if error is not None:
                err = event.get("error")
                raise StreamError(error[:300], err.get("code") if isinstance(err, dict) else event.get("code"))
            for choice in event.get("choices") or ():
                kind = delta_kind(choice.get("delta") or {})
                if kind is not None:
                    self._n += 1
                    self._content = self._content or kind == "content"
            usage = event.get("usage")
            if usage and usage.get("completion_tokens") is not None:
                self.sink.usage_tokens = int(usage["completion_tokens"])
            spec = raw_spec_metrics(event)
            if spec is not None:
                self.sink.spec_decoding = spec

    @property
    def done(self) -> bool:
        return self.decoder.done

    def finish(self, now: float) -> None:
        if bytes(self.buf).strip():
            self._exact(bytes(self.buf).replace(b"\r\n", b"\n").rstrip(b"\n"), now)
            self.buf = bytearray()
            self._flush(now)
        if not self.decoder.done:
            raise StreamIncomplete("the stream ended without data: [DONE]")


_DELTA = b'"delta":{"content":"'
_AFTER_DELTA = len(_DELTA)
_QUOTE = ord('"')


def _whole_plain_read(data: bytes, lo: int = 0, hi: int | None = None) -> int:
    """n if `data[lo:hi]` (whole LF-framed events, ending in the blank line) is exactly n plain content
    chunks in vLLM's compact JSON, else 0 (the general path decides). The rule of `_plain_chunks`, with the
    edges checked in place: the last content delta, found by a search from the end, must be non-empty. In
    vLLM's stream the finish chunk's is empty and comes before usage and [DONE], so a read that ends a stream
    is turned away by that short search before the two scans of the whole read, which `_peel` would otherwise
    repeat on its middle. The role chunk has no content delta, so a read starting with it fails the counts
    (ChunkTally peels a stream's first read without trying). Anything else (errors, reasoning, comments,
    multi-line events) makes the counts of deltas and newlines differ. Without bounds the searches take none
    (cheaper calls: this is the commonest read)."""
    if hi is None:
        last = data.rfind(_DELTA)
        if last < 0 or data[last + _AFTER_DELTA] == _QUOTE:
            return 0
        n = data.count(_DELTA)
        return n if data.count(b"\n") == 2 * n and data[:5] == b"data:" else 0
    last = data.rfind(_DELTA, lo, hi)
    if last < 0 or data[last + _AFTER_DELTA] == _QUOTE:
        return 0
    n = data.count(_DELTA, lo, hi)
    return n if data.count(b"\n", lo, hi) == 2 * n and data.startswith(b"data:", lo) else 0


def _plain_chunks(events: bytes, lo: int = 0, hi: int | None = None, edges_peeled: bool = False) -> int:
    """n if `events[lo:hi]` (whole events, LF-framed, without the final blank line) are exactly n plain
    content chunks, else 0; counted in place (no slice is copied). A content delta (`"delta":{"content":"`,
    raw quotes: it cannot occur inside a JSON string) occurs at most once per event (bench asks for one
    choice), so the n events need at least 2n - 2 newlines, exactly 2n - 2 only when every event is a
    single line with a content delta: an error, role, finish, usage-only, reasoning or tool-call event, a
    comment or an `event:` line makes the counts differ (newlines cannot occur inside JSON strings
    either). Counting one byte is about twice as fast as counting `data:` lines. A content chunk that also
    carries `usage` (`"usage": null` on every chunk, as OpenAI's API sends) still counts as one chunk; the
    final usage event has no content delta and is decoded exactly, so the request's usage is read from it.
    `edges_peeled`: the role and finish chunks (the empty-content ones) were peeled off the ends, so the
    scan for an empty content delta is skipped: vLLM sends none mid-stream. (A server that did would have
    such a chunk counted as a token chunk when it arrives between content chunks in one read; the tokens
    stay exact where the server reports usage, which bench always asks for. Looking for it costs another
    scan of the read, as much as counting the deltas: measured in docs/performance.md.)"""
    hi = len(events) if hi is None else hi
    count = events.count
    n = count(b'"delta":{"content":"', lo, hi)
    if n:
        empty = b'"delta":{"content":""'
    else:
        n, empty = count(b'"delta": {"content": "', lo, hi), b'"delta": {"content": ""'
    if n and events.startswith(b"data:", lo) and count(b"\n", lo, hi) == 2 * n - 2 \
            and (edges_peeled or events.find(empty, lo, hi) < 0):
        return n
    return 0
