"""Multi-turn records in the load generator (MT-Bench): the next turn goes out after the answer to the turn
before, from the same worker, with that answer in the conversation; every turn is one measured request."""

from __future__ import annotations

import asyncio
import json
import time

import pytest

from peagle_deploy.bench.conversation import Conversation, FollowUp, answer_text
from peagle_deploy.bench.http_sender import HttpChatSender
from peagle_deploy.bench.loadgen import run_level
from peagle_deploy.bench.records import RequestRecord
from peagle_deploy.testing.streaming import chat_sse

PROMPTS = [[{"role": "user", "content": f"q{i}"}] for i in range(5)]
LATER = [[f"q{i} again"] for i in range(5)]


def test_answer_text_reads_content_deltas_split_anywhere():
    stream = chat_sse(["Al", "oha", " ✓"])
    assert answer_text(stream) == "Aloha ✓"
    assert answer_text(stream[:-30]) == "Aloha ✓"  # a stream cut before its end keeps what came


def test_conversation_builds_the_next_turn_from_the_answer():
    talk = Conversation(PROMPTS[0], ["more?", "and more?"])
    assert talk.wants_answer and not talk.ready
    turn = talk.answered("yes")
    assert isinstance(turn, FollowUp) and talk.ready
    assert turn == [{"role": "user", "content": "q0"}, {"role": "assistant", "content": "yes"},
                    {"role": "user", "content": "more?"}]
    assert talk.take() is turn and not talk.ready and talk.wants_answer


def test_second_turns_follow_their_own_first_answer_at_concurrency_four():
    log: list[tuple[str, list[dict[str, str]], float, float]] = []  # (kind, messages, start, end)

    async def send(messages, rec: RequestRecord, answer: bytearray | None = None) -> None:
        start = time.perf_counter()
        await asyncio.sleep(0.001 * (1 + len(log) % 3))  # uneven: workers finish out of order
        reply = f"answer to {messages[-1]['content']}"
        if answer is not None:
            answer += chat_sse([reply])
        rec.add(1, time.perf_counter())
        rec.usage_tokens = 1
        log.append(("first" if len(messages) == 1 else "second", messages, start, time.perf_counter()))

    m = asyncio.run(run_level(send, PROMPTS, 4, follow_ups=LATER, warmup=0, num_prompts=40))
    assert m.completed == 40 and m.errors == 0
    ends = {json.dumps(msgs[0]): [] for _, msgs, _, _ in log}
    for kind, msgs, start, end in log:
        if kind == "first":
            ends[json.dumps(msgs[0])].append(end)
    seconds = [entry for entry in log if entry[0] == "second"]
    assert len(seconds) >= 16  # at most the 4 records in flight at the end lack their second turn
    for _, msgs, start, _ in seconds:
        first, answer, again = msgs
        assert answer == {"role": "assistant", "content": f"answer to {first['content']}"}
        assert again == {"role": "user", "content": f"{first['content']} again"}
        assert any(end <= start for end in ends[json.dumps(first)])  # sent after its first turn came back


def test_a_failed_first_turn_starts_a_new_record():
    calls: list[int] = []

    async def send(messages, rec: RequestRecord, answer: bytearray | None = None) -> None:
        calls.append(len(messages))
        if len(calls) == 1:
            raise ConnectionResetError("reset")
        if answer is not None:
            answer += chat_sse(["ok"])
        rec.add(1, time.perf_counter())

    asyncio.run(run_level(send, PROMPTS, 1, follow_ups=LATER, warmup=0, num_prompts=4, backoff_base=0.0))
    assert calls == [1, 1, 3, 1]  # the failed q0 is not followed up; q1 is, then q2 starts


def test_follow_up_bodies_are_never_cached_by_id():
    sender = HttpChatSender("http://127.0.0.1:9/invocations")
    first = FollowUp([{"role": "user", "content": "a"}])
    body = sender.body(first)
    second = FollowUp([{"role": "user", "content": "b"}])
    assert json.loads(sender.body(second))["messages"][0]["content"] == "b" and body != sender.body(second)
    assert len(sender.body) == 0  # nothing kept


def test_both_senders_keep_one_body_per_prompt_and_only_an_endpoint_has_a_limit():
    from peagle_deploy.bench.sagemaker_sender import SageMakerChatSender
    from peagle_deploy.errors import UsageError
    from peagle_deploy.runtime.target_ref import parse_target

    http = HttpChatSender("http://127.0.0.1:9/invocations", model="m", max_tokens=7)
    endpoint = SageMakerChatSender(None, parse_target("ep"), max_tokens=7)
    for sender in (http, endpoint):
        body = sender.body(PROMPTS[0])
        assert sender.body(PROMPTS[0]) is body and len(sender.body) == 1  # encoded once, kept by the prompt
        doc = json.loads(body)
        assert (doc["messages"], doc["max_tokens"], doc["stream"]) == (PROMPTS[0], 7, True)
    assert json.loads(http.body(PROMPTS[0]))["model"] == "m" and "model" not in json.loads(endpoint.body(PROMPTS[0]))
    huge = [{"role": "user", "content": "x" * 7_000_000}]
    assert len(http.body(huge)) > 7_000_000  # a server URL has no body limit of SageMaker's
    with pytest.raises(UsageError, match="6 MB"):
        endpoint.body(huge)
