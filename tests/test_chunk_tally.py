"""ChunkTally (bench's one-pass reader) counts exactly what the exact decoder and the chunk rule count, for
streams split at every byte offset, with and without events that must leave the fast paths."""

from __future__ import annotations

import json

import pytest

from peagle_deploy.bench.records import RequestRecord
from peagle_deploy.runtime import sse
from peagle_deploy.runtime.sse import DONE, ChunkTally, SseDecoder, StreamError, delta_kind

BASE = {"id": "chatcmpl-4f1e", "object": "chat.completion.chunk", "created": 1764000000, "model": "qwen3-coder"}
TEXTS = ["def", " f", '("data: x")', "\n", ' \\"q\\"', "data:", "ok", "[DONE]", '"usage"', "x" * 50, "é中",
         "a\\", '"}', "\u0000"]


def event(obj, compact=True) -> bytes:
    sep = (",", ":") if compact else (", ", ": ")
    return b"data: " + json.dumps(obj, separators=sep, ensure_ascii=False).encode() + b"\n\n"


def chunk(delta, finish=None, compact=True, **extra) -> bytes:
    return event({**BASE, "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}],
                  **extra}, compact)


def stream(middle: list[bytes] | None = None, compact=True) -> bytes:
    """vLLM's shape: role, content chunks (with `middle` in the middle), finish, usage, [DONE]."""
    contents = [chunk({"content": t}, compact=compact) for t in TEXTS]
    half = len(contents) // 2
    body = contents[:half] + (middle or []) + contents[half:]
    return (chunk({"role": "assistant", "content": ""}, compact=compact) + b"".join(body)
            + chunk({"content": ""}, "stop", compact=compact)
            + event({**BASE, "choices": [], "usage": {"prompt_tokens": 3, "completion_tokens": 77,
                                                       "total_tokens": 80}}, compact)
            + b"data: [DONE]\n\n")


def oracle(data: bytes) -> tuple[int, int | None] | type[Exception]:
    """What `peagle invoke` sees: SseDecoder over the whole stream and the chunk rule."""
    decoder, n, usage = SseDecoder(), 0, None
    for ev in decoder.feed(data.replace(b"\r\n", b"\n")):
        if ev is DONE:
            continue
        if sse.stream_error(ev) is not None:
            return StreamError
        n += sum(delta_kind(c.get("delta") or {}) is not None for c in ev.get("choices") or ())
        usage = (ev.get("usage") or {}).get("completion_tokens", usage)
    return n, usage


def tally(pieces: list[bytes]) -> tuple[int, int | None]:
    rec = RequestRecord(index=0, warmup=False)
    t = ChunkTally(rec)
    for i, piece in enumerate(pieces):
        t.feed(piece, float(i))
    t.finish(float(len(pieces)))
    return rec.chunks, rec.usage_tokens


ODD_MIDDLES = {
    "plain": [],
    "comment": [b": keep-alive\n\n"],
    "event line": [b"event: delta\n" + chunk({"content": "e"})],
    "id line": [b"id: 7\n" + chunk({"content": "i"})],
    "reasoning": [chunk({"reasoning_content": "hmm"}), chunk({"reasoning": "so"})],
    "tool call": [chunk({"tool_calls": [{"index": 0, "function": {"arguments": "{}"}}]})],
    "role again": [chunk({"role": "assistant", "content": ""})],
    "usage on a chunk": [chunk({"content": "u"}, usage={"prompt_tokens": 3, "completion_tokens": 9})],
    "two choices": [event({**BASE, "choices": [
        {"index": 0, "delta": {"content": "a"}, "logprobs": None, "finish_reason": None},
        {"index": 1, "delta": {"content": "b"}, "logprobs": None, "finish_reason": None}]})],
    "multi-line data": [b'data: {"choices":[{"index":0,\ndata: "delta":{"content":"m"}}]}\n\n'],
    "error": [b'event: error\ndata: {"error":{"message":"KV cache full","code":503}}\n\n'],
}


@pytest.mark.parametrize("name", ODD_MIDDLES)
def test_every_split_in_two_counts_what_the_exact_decoder_counts(name):
    data = stream(ODD_MIDDLES[name])
    want = oracle(data)
    for cut in range(1, len(data)):
        pieces = [data[:cut], data[cut:]]
        if want is StreamError:
            with pytest.raises(StreamError):
                tally(pieces)
        else:
            assert tally(pieces) == want, cut


@pytest.mark.parametrize("compact, crlf", [(True, False), (False, False), (True, True)])
def test_splits_in_many_pieces_and_one_read(compact, crlf):
    data = stream([chunk({"reasoning_content": "r"}, compact=compact), b": ping\n\n"], compact)
    if crlf:
        data = data.replace(b"\n", b"\r\n")
    want = oracle(data)
    for size in (1, 2, 3, 7, 64, 200, 1000, len(data)):
        assert tally([data[i:i + size] for i in range(0, len(data), size)]) == want, size
    for step in (1, 2, 5, 13, 31):  # three pieces: pairs of cuts `step` apart
        for cut in range(1, len(data) - step, 37):
            assert tally([data[:cut], data[cut:cut + step], data[cut + step:]]) == want, (cut, step)


def test_a_read_of_many_chunks_is_counted_in_place_and_only_its_edges_are_decoded(monkeypatch):
    """The fast path counts the middle of a read without decoding it or copying it; the JSON decoder only
    sees the events at the read's edges (role, finish, usage, [DONE]); one sink.add per read."""
    data = stream()
    rec = RequestRecord(index=0, warmup=False)
    t = ChunkTally(rec)
    decoded: list[int] = []
    original = ChunkTally._exact
    monkeypatch.setattr(ChunkTally, "_exact", lambda self, events, now: decoded.append(len(events))
                        or original(self, events, now))
    half = len(data) // 2
    half = data.index(b"\n\n", half) + 2
    t.feed(data[:half], 0.0)
    t.feed(data[half:], 1.0)
    t.finish(2.0)
    assert (rec.chunks, rec.usage_tokens) == oracle(data)
    assert len(decoded) == 4 and max(decoded) < 300  # role, finish, usage, [DONE]: single events only
    assert rec.gaps is not None and len(rec.gaps) == 1  # two reads: one sink.add each


def test_an_empty_content_chunk_at_a_reads_edge_is_no_token_and_tokens_stay_exact_in_its_middle():
    """vLLM sends empty content only in the role and finish chunks, at a stream's ends. A mid-stream one is
    decoded exactly where it starts or ends a read; between content chunks of one read it is counted as a
    chunk (looking for it would cost another scan of every read), and the tokens still come from usage."""
    empty = chunk({"content": ""})
    data = stream([empty])
    at = data.index(empty)
    want_chunks, want_usage = oracle(data)
    assert tally([data[:at], data[at:]]) == (want_chunks, want_usage)  # starts a read: decoded
    assert tally([data[:at + len(empty)], data[at + len(empty):]]) == (want_chunks, want_usage)  # ends one
    assert tally([data]) == (want_chunks + 1, want_usage)  # inside one read: one chunk more, usage exact


@pytest.mark.parametrize("name", ["plain", "role again", "usage on a chunk", "two choices", "reasoning", "error"])
def test_reads_that_hold_whole_events_count_what_the_exact_decoder_counts(name):
    """The commonest read (whole events: vLLM flushes one per token) takes the one-call path when it holds only
    plain content chunks; a read that ends in the finish chunk, or holds anything else, must not."""
    data = stream(ODD_MIDDLES[name])
    events = [e + b"\n\n" for e in data[:-2].split(b"\n\n")]
    assert b"".join(events) == data
    want = oracle(data)
    for size in range(1, len(events) + 1):
        for offset in range(size):
            pieces = [b"".join(events[:offset])] if offset else []
            pieces += [b"".join(events[i:i + size]) for i in range(offset, len(events), size)]
            if want is StreamError:
                with pytest.raises(StreamError):
                    tally(pieces)
            else:
                assert tally(pieces) == want, (size, offset)


def test_a_read_of_plain_chunks_is_counted_by_one_sink_call_without_decoding(monkeypatch):
    rec = RequestRecord(index=0, warmup=False)
    t = ChunkTally(rec)
    monkeypatch.setattr(ChunkTally, "_exact", lambda *a: pytest.fail("a plain read was decoded"))
    t.feed(chunk({"content": "a"}), 0.0)
    t.feed(chunk({"content": "b"}) + chunk({"content": '"q"'}) + chunk({"content": "\\"}), 1.0)
    assert rec.chunks == 4 and rec.gaps is not None and list(rec.gaps) == [1.0]


def test_a_read_that_ends_inside_an_event_keeps_only_that_event_and_counts_the_rest_in_place(monkeypatch):
    """Reads split by the network mid-event: only the partial event waits for the next read (a copy of one
    event, not of the read), and plain chunks on either side of the split are never decoded."""
    events = [chunk({"content": f"t{i}"}) for i in range(40)]
    data = b"".join(events)
    cut = len(b"".join(events[:25])) + 17  # 17 bytes into the 26th event
    rec = RequestRecord(index=0, warmup=False)
    t = ChunkTally(rec)
    monkeypatch.setattr(ChunkTally, "_exact", lambda *a: pytest.fail("a plain chunk was decoded"))
    t.feed(data[:cut], 0.0)
    assert rec.chunks == 25 and bytes(t.buf) == events[25][:17]
    t.feed(data[cut:], 1.0)
    assert rec.chunks == 40 and not t.buf
    assert list(rec.gaps) == [1.0]  # one sink.add per read


def test_a_read_that_starts_or_ends_a_stream_is_counted_exactly_with_its_edges_decoded():
    """The role chunk first and the finish, usage and [DONE] events last turn a read away from the one-call
    path before it is scanned; what is counted is still what the exact decoder counts."""
    data = stream()
    for pieces in ([data], [data[:len(data) // 2], data[len(data) // 2:]]):
        assert tally(pieces) == oracle(data)
    assert sse._whole_plain_read(chunk({"role": "assistant", "content": ""}) + chunk({"content": "a"})) == 0
    assert sse._whole_plain_read(chunk({"content": "a"}) + chunk({"content": ""}, "stop")) == 0
    assert sse._whole_plain_read(chunk({"content": "a"}) + b"data: [DONE]\n\n") == 0
    assert sse._whole_plain_read(chunk({"content": "a"}) + chunk({"content": "b"})) == 2
