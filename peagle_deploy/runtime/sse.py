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

    def add(self, n: int, now: float, content: bool) -> None: ...


class ChunkTally:
    """The load generator's reader: bytes in (split anywhere), token chunks out to `sink.add`.

    One timestamp and one `sink.add` per network read. Three paths, fastest first, all exact:

    1. The junction path: one pass per read. vLLM's content chunks of one stream differ only in their
       text: every one is `<prefix>TEXT<suffix>` on one line, the prefix (`data: {"id":...,"delta":
       {"content":"`) and the suffix (`"},"logprobs":null,"finish_reason":null}]}`) the same throughout.
       Both are learned from the stream's first plain content chunk; then `bytes.replace` swaps every
       junction `<suffix>\n\n<prefix>` of the read for one NUL byte, in one pass, leaving only the texts
       (JSON strings hold neither raw newlines nor NULs). Between the first and the last junction there
       are then exactly (junctions - 1) events, each one line with a non-empty text, when no newline, no
       empty text, no second `"delta"` (a second choice) and no NUL but the markers is left there: a
       comment, an `event:` line, an error, a role, finish, usage, reasoning or tool-call event or any
       other suffix breaks a junction and leaves its newlines behind, which sends the read down path 2 or 3. The events before the
       first junction and after the last (the role chunk, the finish, usage and [DONE], a partial event)
       go through path 2.
    2. The count path, for a read of whole events: when every event is a plain content chunk, n content
       deltas and 2n - 2 newlines (`_plain_chunks`); the role/finish/usage/[DONE] events at either end
       are peeled off and decoded one by one.
    3. The exact path: SseDecoder and the chunk rule (`delta_kind`), event by event: the same decoder and
       rule `peagle invoke` uses.
    """

    __slots__ = ("sink", "buf", "decoder", "junction", "_n", "_content")

    def __init__(self, sink: ChunkSink):
        self.sink = sink
        self.buf = bytearray()
        self.decoder = SseDecoder()
        self.junction: bytes | None = None  # <suffix>\n\n<prefix>, once learned
        self._n = 0
        self._content = False

    def feed(self, data: bytes, now: float) -> None:
        junction = self.junction
        if junction is not None and len(data) >= 2 * len(junction):
            rest = data.replace(junction, b"\0")  # the one pass over the read; `rest` holds the texts
            k = (len(data) - len(rest)) // (len(junction) - 1)
            if k:
                first, last = rest.find(b"\0"), rest.rfind(b"\0")
                between = rest[first:last + 1]
                if b"\n" not in between and b"\0\0" not in between and b'"delta"' not in between \
                        and rest.count(b"\0") == k:
                    cut = junction.index(b"\n\n")
                    self._general(rest[:first] + junction[:cut + 2], now)  # up to the first junction
                    self._n += k - 1
                    self._content = True
                    self._general(junction[cut + 2:] + rest[last + 1:], now)  # from the last junction on
                    self._flush(now)
                    return
        self._general(data, now)
        self._flush(now)

    def _flush(self, now: float) -> None:
        if self._n:
            self.sink.add(self._n, now, self._content)
            self._n, self._content = 0, False

    def _general(self, data: bytes, now: float) -> None:
        if not self.buf and data[-2:] == b"\n\n":  # the usual read: whole LF-framed events
            complete = data[:-2]
        else:
            buf = self.buf
            buf += data
            if b"\n" not in data:
                return
            if b"\r" in buf:  # CRLF framing (vLLM uses LF); a CR split from its LF waits in the remainder
                buf = bytearray(buf.replace(b"\r\n", b"\n"))
            cut = buf.rfind(b"\n\n")
            if cut < 0:
                self.buf = buf
                return
            complete = bytes(buf[:cut])
            self.buf = buf[cut + 2:]
        # Other events (role, finish, usage, [DONE]) sit at the start and the end of a stream: peel them
        # off both ends (small events, cheap) and decode them one by one; then scan the middle once.
        lo, hi = 0, len(complete)
        tail: list[bytes] = []
        while lo < hi:
            at = complete.rfind(b"\n\n", lo, hi)
            event = complete[at + 2 if at >= 0 else lo:hi]
            if _plain_chunks(event) == 1:
                if self.junction is None:
                    self._learn(event)
                break
            tail.append(event)
            hi = at if at >= 0 else lo
        while lo < hi:
            at = complete.find(b"\n\n", lo, hi)
            event = complete[lo:at if at >= 0 else hi]
            if _plain_chunks(event) == 1:
                break
            self._exact(event, now)
            lo = at + 2 if at >= 0 else hi
        if lo < hi:
            middle = complete if (lo, hi) == (0, len(complete)) else complete[lo:hi]
            n = _plain_chunks(middle)
            if n:
                self._n += n
                self._content = True
            else:
                self._exact(middle, now)
        for event in reversed(tail):
            self._exact(event, now)

    def _learn(self, event: bytes) -> None:
        """The junction of this stream's content chunks, from one of them (a whole `data:` line)."""
        needle = _CONTENT if _CONTENT in event else _CONTENT_SPACED
        start = event.find(needle) + len(needle)
        end = start
        while True:  # the text ends at the first quote that no backslash escapes
            end = event.find(b'"', end)
            if end < 0:
                return
            escapes = len(event[start:end]) - len(event[start:end].rstrip(b"\\"))
            if escapes % 2 == 0:
                break
            end += 1
        junction = event[end:] + b"\n\n" + event[:start]
        if b"\0" not in junction and b"\r" not in junction and b"\n" not in event:
            self.junction = junction

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


_CONTENT = b'"delta":{"content":"'
_CONTENT_SPACED = b'"delta": {"content": "'


def _plain_chunks(events: bytes) -> int:
    """n if `events` (whole events, LF-framed, without the final blank line) are exactly n plain content
    chunks, else 0. A content delta (`"delta":{"content":"`, raw quotes: it cannot occur inside a JSON
    string) occurs at most once per event (bench asks for one choice), so the n events need at least
    2n - 2 newlines, exactly 2n - 2 only when every event is a single line with a content delta: an
    error, role, finish, usage-only, reasoning or tool-call event, a comment or an `event:` line makes the
    counts differ (newlines cannot occur inside JSON strings either). Counting one byte is about twice
    as fast as counting `data:` lines. A content chunk that also carries `usage` (`"usage": null` on
    every chunk, as OpenAI's API sends) still counts as one chunk; the final usage event has no content
    delta and is decoded exactly, so the request's usage is read from it. An empty content delta anywhere
    (vLLM sends one only in the role and finish chunks, at the ends) sends the events to the exact path."""
    count = events.count
    n = count(b'"delta":{"content":"')
    if n:
        empty = b'"delta":{"content":""'
    else:
        n, empty = count(b'"delta": {"content": "'), b'"delta": {"content": ""'
    if n and count(b"\n") == 2 * n - 2 and events[:5] == b"data:" and empty not in events:
        return n
    return 0
