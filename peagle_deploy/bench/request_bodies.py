"""The senders' request bodies: each prompt's JSON body encoded once (runtime.payload.ChatRequest).

The load generator cycles through the dataset's prompt lists, so a body is kept by its list's id(): the dataset
holds every list for the whole run, so an id is never reused while its body is kept. A later turn of a
multi-turn record (conversation.FollowUp) is built for one request and its id() is reused later: it is encoded
each time, never kept.
"""

from __future__ import annotations

from typing import Any

from ..runtime.payload import ChatRequest
from .conversation import FollowUp
from .records import Messages


class RequestBodies:
    """`bodies(messages)`: the streaming chat request's body for `messages`, with `fields` (max_tokens,
    temperature, model); `limit`: the target's request limit (runtime.payload.MAX_BODY_BYTES for a SageMaker
    endpoint), a larger body refused before anything is sent."""

    __slots__ = ("fields", "limit", "_kept")

    def __init__(self, fields: dict[str, Any], *, limit: int | None = None):
        self.fields = fields
        self.limit = limit
        self._kept: dict[int, bytes] = {}

    def __call__(self, messages: Messages) -> bytes:
        if isinstance(messages, FollowUp):  # built for this request only: its id() is reused later
            return self._encode(messages)
        key = id(messages)
        body = self._kept.get(key)
        if body is None:
            body = self._kept[key] = self._encode(messages)
        return body

    def __len__(self) -> int:
        """The bodies kept."""
        return len(self._kept)

    def _encode(self, messages: Messages) -> bytes:
        return ChatRequest(messages=messages, **self.fields).body(stream=True, limit=self.limit)
