"""Incremental server-sent-events decoding for chat-completion streams.

Bytes arrive split anywhere (SageMaker PayloadParts, TCP reads): mid-line, mid-UTF-8 character.
Lines are cut on bytes and only complete lines are decoded, so a character split across chunks is
never decoded in halves. `data: [DONE]` ends the stream.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

DONE = object()  # yielded once for `data: [DONE]`


class SseDataError(ValueError):
    """A complete `data:` payload that is not JSON (a server bug, not a split: splits never reach here)."""


def _json(payload: bytes) -> Any:
    try:
        return json.loads(payload)
    except ValueError:
        raise SseDataError(f"malformed stream event: {payload[:80]!r}") from None


class SseDecoder:
    """feed(bytes) -> the complete `data:` payloads so far, as parsed JSON objects (or DONE)."""

    __slots__ = ("_buffer", "_data", "done")

    def __init__(self) -> None:
        self._buffer = b""
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
        buffer = self._buffer + chunk
        *lines, self._buffer = buffer.split(b"\n")
        for line in lines:
            yield from self._line(line.rstrip(b"\r"))

    def close(self) -> Iterator[Any]:
        """End of input. Complete `data:` lines still waiting for their blank line are dispatched; an
        unterminated last line is a truncated stream and is dropped (as the SSE spec says)."""
        self._buffer = b""
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
