"""Chat-completion requests (OpenAI format, what vLLM's /invocations and /v1/chat/completions accept)."""

from __future__ import annotations

import json
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ..errors import UsageError

MAX_BODY_BYTES = 6 * 1024 * 1024  # SageMaker's InvokeEndpoint payload limit: endpoints only, not a server's URL


class Message(BaseModel):
    model_config = ConfigDict(extra="allow")

    role: Literal["system", "user", "assistant", "tool", "developer"]
    content: Any


class ChatRequest(BaseModel):
    """Validated request; unknown fields (tools, seed, ...) pass through to the server untouched."""

    model_config = ConfigDict(extra="allow")

    messages: list[Message] = Field(min_length=1)
    max_tokens: int | None = Field(default=None, gt=0)
    temperature: float | None = Field(default=None, ge=0, le=2)
    top_p: float | None = Field(default=None, gt=0, le=1)
    stream: bool = False

    def body(self, *, stream: bool, limit: int | None = None) -> bytes:
        """The JSON body; `limit`: the target's request limit (MAX_BODY_BYTES for a SageMaker endpoint), refused
        above it before anything is sent."""
        data = self.model_dump(exclude_none=True)
        data["stream"] = stream
        if stream:
            data.setdefault("stream_options", {"include_usage": True})
        else:
            data.pop("stream_options", None)
        encoded = json.dumps(data, ensure_ascii=False).encode("utf-8")
        if limit is not None and len(encoded) > limit:
            raise UsageError(f"the request body is {len(encoded):,} bytes; a SageMaker endpoint accepts at most "
                             f"{limit:,} (6 MB)", "shorten the prompt or the payload")
        return encoded


def _first_error(exc: ValidationError) -> str:
    err = exc.errors()[0]
    where = ".".join(str(p) for p in err["loc"]) or "payload"
    return f"{where}: {err['msg']}"


def build_request(prompt: str | None, *, system: str | None = None, max_tokens: int | None = 512,
                  temperature: float | None = None, top_p: float | None = None) -> ChatRequest:
    if prompt is None or not prompt.strip():
        raise UsageError("the prompt is empty", "pass a PROMPT argument or --payload FILE")
    if max_tokens is not None and max_tokens <= 0:
        raise UsageError(f"--max-tokens must be at least 1, got {max_tokens}", "pass --max-tokens 256")
    if temperature is not None and not 0 <= temperature <= 2:
        raise UsageError(f"--temperature must be between 0 and 2, got {temperature}", "pass e.g. --temperature 0.7")
    if top_p is not None and not 0 < top_p <= 1:
        raise UsageError(f"--top-p must be in (0, 1], got {top_p}", "pass e.g. --top-p 0.9")
    messages = ([{"role": "system", "content": system}] if system else []) + [{"role": "user", "content": prompt}]
    return ChatRequest(messages=messages, max_tokens=max_tokens, temperature=temperature, top_p=top_p)


def parse_payload(text: str, source: str = "--payload") -> ChatRequest:
    """A user's JSON body, validated but otherwise sent as is (its size is the target's to limit: ChatRequest.body)."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise UsageError(f"{source} is not valid JSON (line {exc.lineno}, column {exc.colno}: {exc.msg})",
                         "fix the JSON; it must be an OpenAI chat-completion request") from None
    if not isinstance(data, dict):
        raise UsageError(f"{source} must be a JSON object", "send {\"messages\": [...], \"max_tokens\": N}")
    try:
        return ChatRequest.model_validate(data)
    except ValidationError as exc:
        raise UsageError(f"{source} is not a valid chat-completion request ({_first_error(exc)})",
                         "it needs messages: [{role, content}], and max_tokens > 0, 0 <= temperature <= 2") from None
