"""SageMaker response streams -> PayloadPart bytes.

`botocore_payload_parts` is the live `peagle invoke` path: botocore parses the event stream into
`{"PayloadPart": {"Bytes": ...}}` events and raises ModelStreamError / InternalStreamFailure as
`EventStreamError`. A single stream never comes near its rate limit.

`payload_parts` + `EventStreamReader` is the load generator's path (`peagle bench`, many streams in
one process). botocore's EventStreamBuffer decodes every header of every message into Python objects; measured
on this project's machine it parses about 90,000 frames/s, below the 100,000 PayloadPart events/s
the invoke and bench paths must sustain (docs/performance.md). This reader checks the same two
CRC32s (zlib, in C), reads the headers only for their `:event-type`/`:message-type`, and hands out
payloads. The tests check it against botocore's parser on frames split at every byte offset.
"""

from __future__ import annotations

import struct
from binascii import crc32
from collections.abc import Iterator

_PRELUDE = struct.Struct(">III")
_MAX_MESSAGE = 16 * 1024 * 1024 + 128 * 1024


class EventStreamError(ValueError):
    """The bytes are not a valid AWS event stream (bad length or checksum)."""


def _headers(data: bytes) -> dict[str, str]:
    headers, pos, end = {}, 0, len(data)
    while pos < end:
        name_len = data[pos]
        name = data[pos + 1:pos + 1 + name_len].decode("utf-8")
        pos += 1 + name_len
        kind = data[pos]
        pos += 1
        if kind == 7 or kind == 6:  # string or bytes: 2-byte length
            (length,) = struct.unpack_from(">H", data, pos)
            value = data[pos + 2:pos + 2 + length]
            pos += 2 + length
            headers[name] = value.decode("utf-8") if kind == 7 else value  # type: ignore[assignment]
        else:  # booleans (0, 1) carry no value; fixed-size numbers, timestamps and uuids are skipped
            pos += {0: 0, 1: 0, 2: 1, 3: 2, 4: 4, 5: 8, 8: 8, 9: 16}[kind]
    return headers


class EventStreamReader:
    """feed(bytes) -> (event_type, message_type, payload) for each complete message."""

    __slots__ = ("_buffer",)

    def __init__(self) -> None:
        self._buffer = b""

    def feed(self, data: bytes) -> Iterator[tuple[str, str, bytes]]:
        buffer = self._buffer + data if self._buffer else data
        pos, size = 0, len(buffer)
        unpack, prelude = _PRELUDE.unpack_from, _PRELUDE.size
        while size - pos >= prelude:
            total, headers_len, prelude_crc = unpack(buffer, pos)
            if crc32(buffer[pos:pos + 8]) != prelude_crc or not 16 <= total <= _MAX_MESSAGE:
                raise EventStreamError("corrupt event-stream prelude")
            if size - pos < total:
                break
            end = pos + total
            (message_crc,) = struct.unpack_from(">I", buffer, end - 4)
            if crc32(buffer[pos:end - 4]) != message_crc:
                raise EventStreamError("event-stream message checksum mismatch")
            start = pos + prelude
            headers = _headers(buffer[start:start + headers_len])
            kind = headers.get(":event-type") or headers.get(":exception-type") or headers.get(":error-code") or ""
            yield kind, headers.get(":message-type", "event"), buffer[start + headers_len:end - 4]
            pos = end
        self._buffer = buffer[pos:]

    @property
    def pending(self) -> int:
        return len(self._buffer)


class StreamFailure(Exception):
    """The endpoint sent an error event (ModelStreamError, InternalStreamFailure) instead of a PayloadPart."""

    def __init__(self, kind: str, message: str):
        super().__init__(f"{kind}: {message}")
        self.kind = kind
        self.message = message


def _failure(kind: str, detail: str) -> StreamFailure:
    import json

    try:
        message = json.loads(detail).get("Message") or detail
    except (ValueError, AttributeError):
        message = detail
    return StreamFailure(kind or "unknown event", str(message))


def botocore_payload_parts(event_stream: object) -> Iterator[bytes]:
    """PayloadPart bytes of an InvokeEndpointWithResponseStream body, parsed by botocore.

    Error events (ModelStreamError, InternalStreamFailure) become StreamFailure; so do frames that
    botocore parses but that are not PayloadParts."""
    from ..aws import botocore_exceptions

    bx = botocore_exceptions()
    try:
        for event in event_stream:  # type: ignore[attr-defined]
            part = event.get("PayloadPart")
            if part is not None:
                yield part.get("Bytes", b"")
            else:
                kind = next(iter(event), "unknown event")
                detail = event.get(kind) or {}
                raise StreamFailure(kind, str(detail.get("Message") or detail) if isinstance(detail, dict)
                                    else str(detail))
    except bx.EventStreamError as exc:
        error = getattr(exc, "response", {}).get("Error", {})
        raise StreamFailure(error.get("Code") or "EventStreamError", error.get("Message") or str(exc)) from None


def payload_parts(event_stream: object) -> Iterator[bytes]:
    """PayloadPart bytes of an InvokeEndpointWithResponseStream body (botocore's EventStream).

    The raw HTTP body goes through EventStreamReader (about twice botocore's frame rate); when the
    raw stream is not reachable, botocore's own event iteration is used."""
    raw = getattr(event_stream, "_raw_stream", None)
    if raw is None or not hasattr(raw, "stream"):
        for event in event_stream:  # type: ignore[attr-defined]
            if "PayloadPart" in event:
                yield event["PayloadPart"]["Bytes"]
            else:
                import json

                kind = next(iter(event), "")
                raise _failure(kind, json.dumps(event.get(kind, {}), default=str))
        return
    reader = EventStreamReader()
    for chunk in raw.stream():  # as botocore calls it (urllib3 reads up to 64 KiB)
        for kind, message_type, payload in reader.feed(chunk):
            if kind == "PayloadPart" and message_type == "event":
                yield payload
            else:
                raise _failure(kind, payload.decode("utf-8", "replace"))
    if reader.pending:
        raise StreamFailure("truncated", "the stream ended inside an event-stream message")
