"""The load generator's bookkeeping, driven by an in-process sender (no network, no timing asserts)."""

from __future__ import annotations

import asyncio
import time

import pytest

from peagle_deploy.bench.loadgen import run_level
from peagle_deploy.bench.records import RequestRecord
from peagle_deploy.runtime.sse import ChunkTally, StreamIncomplete

PROMPTS = [[{"role": "user", "content": f"p{i}"}] for i in range(3)]


def make_sender(tokens: int = 5, chunk_tokens: int = 1, usage: bool = True, fail_every: int = 0, gap: float = 0.001):
    seen: list[str] = []

    async def send(messages, rec: RequestRecord) -> None:
        seen.append(messages[0]["content"])
        if fail_every and (rec.index + 1) % fail_every == 0:
            raise ConnectionResetError("reset by peer")
        for _ in range(tokens // chunk_tokens):
            await asyncio.sleep(gap)
            rec.add(1, time.perf_counter())
        if usage:
            rec.usage_tokens = tokens

    return send, seen


def test_num_prompts_mode_counts_every_measured_token_and_cycles_prompts():
    send, seen = make_sender(tokens=6, chunk_tokens=2)
    m = asyncio.run(run_level(send, PROMPTS, 4, warmup=4, num_prompts=20))
    assert m.completed == 20 and m.warmup_requests == 4 and m.errors == 0
    assert len(seen) == 24 and seen[:4] == ["p0", "p1", "p2", "p0"]
    # 3 chunks of 2 tokens each: usage turns chunks into tokens; TPOT uses the usage count too
    assert m.tpot_ms.count == 20 and m.itl_ms.count == 20 * 2 and m.ttft_ms.count == 20
    # the window opens when the last warm-up request ends: at most the 4 requests in flight then straddle it
    assert (20 - 4) * 6 <= m.output_tokens <= 24 * 6


def test_without_usage_a_chunk_is_a_token():
    send, _ = make_sender(tokens=4, usage=False)
    m = asyncio.run(run_level(send, PROMPTS, 1, warmup=0, num_prompts=5))
    assert m.output_tokens == 20 and m.completed == 5 and 0 < m.concurrency_held <= 1.0  # no timing assert


def test_errors_are_counted_by_kind_and_left_out_of_latencies():
    send, _ = make_sender(fail_every=3)
    m = asyncio.run(run_level(send, PROMPTS, 2, warmup=0, num_prompts=9))
    assert m.error_kinds == {"connection": 3} and m.errors == 3 and m.completed == 6 and m.ttft_ms.count == 6


def test_duration_mode_cuts_running_requests_at_the_end():
    send, _ = make_sender(tokens=1000, gap=0.002)  # each request would take ~2 s
    m = asyncio.run(run_level(send, PROMPTS, 3, warmup=0, duration=0.3))
    assert m.completed == 0 and m.cut_at_end == 3 and m.output_tokens > 0
    assert 0 < m.mean_in_flight <= 3  # never more than the concurrency (exact figures: test_measure_*)


def _vllm_stream(texts: list[str], compact: bool = True) -> bytes:
    import json

    sep = (",", ":") if compact else (", ", ": ")

    def event(obj) -> bytes:
        return b"data: " + json.dumps(obj, separators=sep).encode() + b"\n\n"

    out = event(
        {
            "id": "c",
            "object": "chat.completion.chunk",
            "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}, "finish_reason": None}],
        }
    )
    for t in texts:
        out += event(
            {
                "id": "c",
                "object": "chat.completion.chunk",
                "choices": [{"index": 0, "delta": {"content": t}, "finish_reason": None}],
            }
        )
    out += event(
        {
            "id": "c",
            "object": "chat.completion.chunk",
            "choices": [{"index": 0, "delta": {"content": ""}, "finish_reason": "stop"}],
        }
    )
    out += event(
        {
            "id": "c",
            "object": "chat.completion.chunk",
            "choices": [],
            "usage": {"prompt_tokens": 3, "completion_tokens": len(texts) + 2, "total_tokens": len(texts) + 5},
        }
    )
    return out + b"data: [DONE]\n\n"


@pytest.mark.parametrize("compact, crlf", [(True, False), (False, False), (True, True)])
@pytest.mark.parametrize("piece", [1, 7, 64, 100_000])
def test_sse_counter_counts_content_chunks_at_any_split(compact, crlf, piece):
    texts = ["def", " f", '("data: x")', "\n", ' \\"q\\"', "data:", "ok", "[DONE]", '"usage"', "x" * 50] * 3
    stream = _vllm_stream(texts, compact)
    if crlf:  # JSON escapes newlines in the text, so this changes only the SSE framing
        stream = stream.replace(b"\n", b"\r\n")
    rec = RequestRecord(index=0, warmup=False)
    counter = ChunkTally(rec)
    for i in range(0, len(stream), piece):
        counter.feed(stream[i : i + piece], float(i))
    counter.finish(float(len(stream)))
    assert rec.chunks == len(texts)  # the role chunk (empty content) is not a token
    assert rec.usage_tokens == len(texts) + 2
    assert rec.first is not None and rec.first <= rec.last and all(g >= 0 for g in rec.gaps)


def test_sse_counter_reasoning_crlf_and_missing_done():
    rec = RequestRecord(index=0, warmup=False)
    counter = ChunkTally(rec)
    counter.feed(
        b'data: {"choices":[{"delta":{"reasoning_content":"hm"}}]}\r\n\r\n'
        b'data: {"choices":[{"delta":{"content":"a"}}]}\r\n\r\n',
        1.0,
    )
    with pytest.raises(StreamIncomplete):
        counter.finish(2.0)
    assert rec.chunks == 2 and rec.first == 1.0 and rec.first_content == 1.0


def test_failures_back_off_and_a_dead_target_stops_the_level():
    from peagle_deploy.bench.loadgen import LevelStopped

    slept: list[float] = []

    async def sleep(s):
        slept.append(s)

    async def refused(messages, rec):
        raise ConnectionRefusedError("connect call failed ('127.0.0.1', 9)")

    with pytest.raises(LevelStopped) as info:
        asyncio.run(run_level(refused, PROMPTS, 1, num_prompts=1000, dead_after=8, sleep=sleep))
    assert info.value.kind == "dead" and "connect call failed" in info.value.message
    assert slept == [0.05, 0.1, 0.2, 0.4, 0.8, 1.6, 2.0]  # doubling, capped; then the 8th failure stops it


def test_a_stalled_target_stops_the_level():
    from peagle_deploy.bench.loadgen import LevelStopped

    never = asyncio.Event()

    async def stalled(messages, rec):
        await never.wait()

    with pytest.raises(LevelStopped) as info:
        asyncio.run(run_level(stalled, PROMPTS, 2, warmup=2, duration=4, idle_limit=0.2, progress_interval=0.05))
    assert info.value.kind == "stalled" and "2 requests in flight" in info.value.message


def test_failed_requests_tokens_are_not_throughput():
    async def half_then_fail(messages, rec):
        rec.add(5, time.perf_counter())
        if rec.index % 2:
            raise RuntimeError("boom")
        rec.usage_tokens = 5

    m = asyncio.run(run_level(half_then_fail, PROMPTS, 1, num_prompts=10))
    assert m.completed == 5 and m.errors == 5 and m.output_tokens == 25
    assert m.error_examples == {"RuntimeError": "boom"}


def test_itl_is_per_chunk_tpot_per_token_and_tokens_per_chunk_reported():
    async def speculative(messages, rec):  # 4 chunks of 3 tokens each, 10 ms apart in the record's clock
        for i in range(4):
            rec.add(1, rec.start + 0.010 * (i + 1))
        rec.usage_tokens = 12

    m = asyncio.run(run_level(speculative, PROMPTS, 1, num_prompts=3))
    assert m.tokens_per_chunk == pytest.approx(3.0)
    assert m.itl_ms.count == 3 * 3 and m.itl_ms.mean == pytest.approx(10, rel=1e-3)
    assert m.ttft_ms.count == 3


def test_measured_requests_start_only_after_the_warm_up_is_over():
    """So a server's counters scraped at the window's edges (acceptance) see measured requests only."""
    events: list[str] = []

    async def send(messages, rec):
        events.append(f"start {'warm' if rec.warmup else 'measured'}")
        await asyncio.sleep(0.001 * (rec.index % 3))
        rec.add(1, time.perf_counter())
        events.append(f"end {'warm' if rec.warmup else 'measured'}")

    asyncio.run(run_level(send, PROMPTS, 4, warmup=4, num_prompts=8, on_window=events.append))
    opened = events.index("open")
    assert events[:opened].count("end warm") == 4 and "start measured" not in events[:opened]
    assert "start warm" not in events[opened:] and events.count("start measured") == 8


@pytest.mark.parametrize("warmup", [0, 3])
def test_measured_requests_wait_for_the_opening_reading_of_the_counters(warmup):
    """A real vLLM answered the opening /metrics scrape after measured requests had begun (eagle3 drafts
    went missing): when on_window("open") returns an awaitable, no measured request starts before it is done."""
    events: list[str] = []

    async def scenario():
        reading_may_end = asyncio.Event()

        async def reading():
            events.append("reading started")
            await reading_may_end.wait()
            events.append("reading done")

        def on_window(edge):
            events.append(edge)
            if edge == "open":
                asyncio.get_running_loop().call_soon(reading_may_end.set)  # ends only after the loop turns
                return asyncio.ensure_future(reading())
            return None

        async def send(messages, rec):
            events.append("start warm" if rec.warmup else "start measured")
            await asyncio.sleep(0)
            rec.add(1, time.perf_counter())

        await run_level(send, PROMPTS, 2, warmup=warmup, num_prompts=4, on_window=on_window)

    asyncio.run(scenario())
    done = events.index("reading done")
    assert "start measured" not in events[:done] and events.count("start measured") == 4
    assert events[-1] == "close"


def test_sse_counter_fast_path_refuses_comments_event_lines_and_errors_mid_read():
    from peagle_deploy.runtime.sse import StreamError

    chunk = b'data: {"choices":[{"index":0,"delta":{"content":"a"},"finish_reason":null}]}\n\n'
    rec = RequestRecord(index=0, warmup=False)
    ChunkTally(rec).feed(chunk * 3 + b": keep-alive\n\n" + chunk * 3, 1.0)  # a comment carries no token
    assert rec.chunks == 6
    error = b'event: error\ndata: {"error":{"message":"KV cache full","code":503}}\n\n'
    with pytest.raises(StreamError, match="KV cache full"):
        ChunkTally(RequestRecord(index=1, warmup=False)).feed(chunk * 3 + error + chunk * 3, 1.0)
