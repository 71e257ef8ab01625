"""Multi-turn records (MT-Bench): the next user turn is sent after the answer to the one before, with
that answer in the conversation, as MT-Bench's own answer generation does.

The load generator keeps one `Conversation` per worker; the sender copies the raw stream of a request
whose answer is needed into a bytearray, and `answer_text` reads the answer's text from it once the
request is over (the fast chunk counter never decodes text).
"""

from __future__ import annotations

from collections.abc import Sequence

from ..runtime.sse import DONE, SseDecoder

Messages = list[dict[str, str]]


class FollowUp(list):
    """The messages of a later turn: built for one request, so a sender must not cache its body by id()."""


def answer_text(raw: bytes) -> str:
    """The assistant's text in a chat-completion SSE stream (content deltas, in order)."""
    decoder = SseDecoder()
    parts: list[str] = []
    for event in [*decoder.feed(bytes(raw)), *decoder.close()]:
        if event is DONE or not isinstance(event, dict):
            continue
        for choice in event.get("choices") or ():
            delta = choice.get("delta") or {}
            if delta.get("content"):
                parts.append(delta["content"])
    return "".join(parts)


class Conversation:
    """One record in progress: the messages sent so far, the user turns still to send, and whether the next
    turn is ready (its predecessor was answered)."""

    __slots__ = ("messages", "later", "ready")

    def __init__(self, first: Messages, later: Sequence[str]):
        self.messages: Messages = list(first)
        self.later = list(later)
        self.ready = False

    @property
    def wants_answer(self) -> bool:
        """The turn being sent has another after it: its answer must be read."""
        return bool(self.later)

    def answered(self, text: str) -> FollowUp:
        """The next turn's messages: everything so far, the answer, the next user question."""
        self.messages = FollowUp([*self.messages, {"role": "assistant", "content": text},
                                  {"role": "user", "content": self.later.pop(0)}])
        self.ready = True
        return self.messages

    def take(self) -> Messages:
        self.ready = False
        return self.messages
