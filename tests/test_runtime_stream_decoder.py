"""The stream decoder on real AWS event-stream frames split at every byte offset."""

import json

import pytest
from botocore.eventstream import EventStreamBuffer

from peagle_deploy.runtime.sse import DONE, SseDecoder
from peagle_deploy.testing.streaming import chat_sse, event_frame, split_at

TOKENS = ["Hé", "llo", " 世界", " 🚀", "\n", "data: not an event", "!"]
SSE = chat_sse(TOKENS)


def reference(sse: bytes) -> list:
    """Whole-buffer decode: split events on blank lines, parse every data payload."""
    events = []
    for block in sse.decode("utf-8").split("\n\n"):
        if block.startswith("data: "):
            payload = block[len("data: "):]
            events.append(DONE if payload == "[DONE]" else json.loads(payload))
    return events


def decode_chunks(chunks) -> list:
    decoder = SseDecoder()
    events = [e for chunk in chunks for e in decoder.feed(chunk)]
    return events + list(decoder.close())


def payload_parts_through_botocore(frames: bytes, split: int) -> list[bytes]:
    """Feed the wire bytes to botocore's event-stream parser in two reads; return PayloadPart bytes."""
    buffer = EventStreamBuffer()
    parts = []
    for piece in (frames[:split], frames[split:]):
        buffer.add_data(piece)
        for message in buffer:
            assert message.headers[":event-type"] == "PayloadPart"
            parts.append(message.payload)
    return parts


def test_reference_has_multibyte_and_done():
    events = reference(SSE)
    assert events[-1] is DONE and "".join(
        c["choices"][0]["delta"].get("content", "") for c in events[:-1] if c.get("choices")) == "".join(TOKENS)
    assert any(len(t.encode()) > len(t) for t in TOKENS)


def test_payload_part_boundary_at_every_byte():
    """SSE split into two PayloadParts at every offset (mid-line, mid-character), framed, parsed, decoded:
    one test over all offsets (each failure names its offset)."""
    expected = reference(SSE)
    for offset in range(1, len(SSE)):
        frames = b"".join(event_frame(part) for part in split_at(SSE, [offset]))
        parts = payload_parts_through_botocore(frames, offset % len(frames) or 1)
        assert b"".join(parts) == SSE, f"offset {offset}"
        assert decode_chunks(parts) == expected, f"offset {offset}"
    assert len(SSE) > 1000  # the offsets cover every line and every multi-byte character of a real stream


def test_one_byte_parts():
    """Every byte its own PayloadPart: every line and every character split."""
    parts = split_at(SSE, range(1, len(SSE)))
    frames = b"".join(event_frame(part) for part in parts)
    for split in (1, len(frames) // 3, len(frames) - 1):
        assert decode_chunks(payload_parts_through_botocore(frames, split)) == reference(SSE)


def test_crlf_comments_and_multiline_data():
    text = b": keep-alive\r\ndata: {\"a\":\r\ndata: 1}\r\n\r\nevent: x\ndata: [DONE]\n\n"
    assert decode_chunks([text[:5], text[5:23], text[23:]]) == [{"a": 1}, DONE]


def test_final_line_without_blank_line_is_kept_but_a_cut_line_is_dropped():
    assert decode_chunks([b'data: {"x": 2}\n']) == [{"x": 2}]
    assert decode_chunks([b'data: {"x": 2}\n\ndata: {"y": ']) == [{"x": 2}]


def test_malformed_json_is_a_clear_error():
    from peagle_deploy.runtime.sse import SseDataError

    with pytest.raises(SseDataError, match="malformed stream event"):
        decode_chunks([b"data: {nope}\n\n"])


def test_peagle_frame_reader_matches_botocore_at_every_split():
    from peagle_deploy.runtime.eventstream import EventStreamReader

    short = chat_sse(["é", " 🚀"])
    parts = split_at(short, range(13, len(short), 13))
    wire = b"".join(event_frame(p) for p in parts)
    for split in range(1, len(wire)):
        reader = EventStreamReader()
        got = [payload for piece in (wire[:split], wire[split:]) for kind, mtype, payload in reader.feed(piece)
               if (kind, mtype) == ("PayloadPart", "event")]
        assert got == parts
        assert reader.pending == 0


def test_frame_reader_rejects_corruption_and_reports_exceptions():
    from peagle_deploy.runtime.eventstream import EventStreamError, EventStreamReader

    frame = bytearray(event_frame(b"data: {}\n\n"))
    frame[-6] ^= 0xFF
    with pytest.raises(EventStreamError):
        list(EventStreamReader().feed(bytes(frame)))
    error = event_frame(b'{"Message": "boom"}', event_type="ModelStreamError", message_type="event")
    assert list(EventStreamReader().feed(error)) == [("ModelStreamError", "event", b'{"Message": "boom"}')]


def test_one_huge_line_split_in_many_reads_decodes_once():
    """An 8 MB event arriving in 64 KiB reads (the speed, linear in the size, is in
    benchmarks/bench_stream_decoder.py --huge-line)."""
    import json as _json

    text = "x" * (8 * 1024 * 1024)
    wire = b"data: " + _json.dumps({"choices": [{"delta": {"content": text}}]}).encode() + b"\n\ndata: [DONE]\n\n"
    decoder = SseDecoder()
    events = []
    for i in range(0, len(wire), 65536):
        events.extend(decoder.feed(wire[i:i + 65536]))
    assert len(events) == 2 and events[1] is DONE and events[0]["choices"][0]["delta"]["content"] == text
