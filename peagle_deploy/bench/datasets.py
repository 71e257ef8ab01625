"""Prompt sets: the published benchmarks' own (bench/benchmark_sets.py: humaneval, mt-bench, fetched on
first use), the small look-alikes shipped in templates/datasets/, and the user's own JSONL.

A JSONL line is either `{"prompt": "..."}` (sent as one user message) or
`{"messages": [{"role": "...", "content": "..."}, ...]}` (sent as is). Other keys (a HumanEval
record's task_id, test, ...) are ignored, and the Dataset says which key held the prompts and which
were ignored. A bad line is a one-line UsageError naming the file and line number (exit 2).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from ..errors import UsageError
from ..resources import templates_dir
from .benchmark_sets import SHIPPED

BUILTIN = SHIPPED  # the look-alikes peagle ships (templates/datasets/README.md)
DATASET_HELP = ("humaneval or mt-bench (the real sets, fetched on first use: peagle datasets), the look-alikes "
                "humaneval-like, code, chat, or a JSONL file of {\"prompt\"} / {\"messages\"} lines.")


class Message(BaseModel):
    model_config = ConfigDict(extra="forbid")

    role: Literal["system", "user", "assistant"]
    content: str = Field(min_length=1)


class PromptRecord(BaseModel):
    """One JSONL line: exactly one of `prompt` or `messages`; other keys are ignored."""

    model_config = ConfigDict(extra="ignore")

    prompt: str | None = Field(default=None, min_length=1)
    messages: list[Message] | None = Field(default=None, min_length=1)

    @model_validator(mode="after")
    def _one_of(self) -> PromptRecord:
        if (self.prompt is None) == (self.messages is None):
            raise ValueError('give exactly one of "prompt" or "messages"')
        return self

    def chat_messages(self) -> list[dict[str, str]]:
        if self.messages is not None:
            return [m.model_dump() for m in self.messages]
        return [{"role": "user", "content": self.prompt or ""}]


class Dataset(BaseModel):
    name: str
    source: str
    prompts: list[list[dict[str, str]]]
    # the later user turns of each record (MT-Bench's second question), sent after the answer to the one
    # before; empty for single-turn sets
    follow_ups: list[list[str]] = []
    prompt_keys: list[str] = []  # the keys that held the prompts: "prompt" and/or "messages"
    ignored_keys: list[str] = []

    @property
    def turns(self) -> int:
        """Requests one pass over the set sends."""
        return len(self.prompts) + sum(len(t) for t in self.follow_ups)

    def describe(self) -> str:
        if self.follow_ups:
            return f"{len(self)} conversations ({self.turns} turns) from {self.source}"
        text = f"{len(self)} prompts from {self.source}"
        if self.prompt_keys:
            text += f", key {' and '.join(repr(k) for k in self.prompt_keys)}"
        if self.ignored_keys:
            text += f" (ignored: {', '.join(self.ignored_keys)})"
        return text

    def __len__(self) -> int:
        return len(self.prompts)


def _first_error(exc: ValidationError) -> str:
    err = exc.errors()[0]
    where = ".".join(str(p) for p in err.get("loc", ()) if p != "__root__")
    msg = str(err.get("msg", "invalid")).removeprefix("Value error, ")
    return f"{where}: {msg}" if where else msg


def parse_jsonl(text: str, source: str, keys: dict[str, set[str]] | None = None) -> list[list[dict[str, str]]]:
    """Validate every line; the first bad one raises a one-line UsageError. `keys` collects the
    prompt keys ("used") and the other keys ("ignored") seen."""
    prompts: list[list[dict[str, str]]] = []
    keys = keys if keys is not None else {}
    used, ignored = keys.setdefault("used", set()), keys.setdefault("ignored", set())
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            data = json.loads(line)
        except json.JSONDecodeError as exc:
            raise UsageError(
                f"{source} line {number} is not valid JSON ({exc.msg})",
                'write one JSON object per line: {"prompt": "..."} or {"messages": [...]}',
            ) from None
        if not isinstance(data, dict):
            raise UsageError(
                f"{source} line {number} is not a JSON object",
                'write {"prompt": "..."} or {"messages": [...]} per line',
            )
        if "prompt" not in data and "messages" not in data:
            raise UsageError(
                f"{source} line {number} has no \"prompt\" or \"messages\" key (it has: {', '.join(data) or 'none'})",
                'put the prompt text under "prompt" (other keys are ignored) or the chat under "messages"',
            )
        try:
            record = PromptRecord.model_validate(data)
        except ValidationError as exc:
            raise UsageError(
                f"{source} line {number}: {_first_error(exc)}",
                'each line needs {"prompt": "..."} or {"messages": [{"role": "user", "content": "..."}]}',
            ) from None
        prompts.append(record.chat_messages())
        used.add("prompt" if record.prompt is not None else "messages")
        ignored.update(k for k in data if k not in ("prompt", "messages"))
    if not prompts:
        raise UsageError(f"{source} has no prompts", "add at least one JSONL line")
    return prompts


def load_dataset(name_or_path: str, progress: Callable[[str], None] | None = None) -> Dataset:
    """A published set (humaneval, mt-bench), a look-alike (humaneval-like, code, chat) or a JSONL file path.
    `progress` hears how a first use's download goes (`Output.status`)."""
    from . import benchmark_sets

    if name_or_path in benchmark_sets.SETS:
        spec = benchmark_sets.SETS[name_or_path]
        records = benchmark_sets.load(name_or_path, progress=progress)
        has_later = any(records.later)
        return Dataset(name=spec.name, source=f"{spec.package} {spec.version} ({spec.licence})",
                       prompts=[[{"role": "user", "content": text}] for text in records.first],
                       follow_ups=records.later if has_later else [])
    if name_or_path in BUILTIN:
        path = templates_dir() / "datasets" / f"{name_or_path}.jsonl"
        keys: dict[str, set[str]] = {}
        prompts = parse_jsonl(path.read_text(encoding="utf-8"), path.name, keys)
        return Dataset(name=name_or_path, source=f"built-in:{name_or_path}", prompts=prompts,
                       prompt_keys=sorted(keys["used"]), ignored_keys=sorted(keys["ignored"]))
    path = Path(name_or_path)
    if not path.is_file():
        raise UsageError(
            f"dataset {name_or_path!r} is neither a built-in set nor a file",
            f"use one of {', '.join((*benchmark_sets.SETS, *BUILTIN))} or a path to a .jsonl file",
        )
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"cannot read {path}: {type(exc).__name__}", "pass a readable UTF-8 JSONL file") from None
    keys: dict[str, set[str]] = {}
    prompts = parse_jsonl(text, path.name, keys)
    return Dataset(name=path.stem, source=str(path), prompts=prompts, prompt_keys=sorted(keys["used"]),
                   ignored_keys=sorted(keys["ignored"]))
