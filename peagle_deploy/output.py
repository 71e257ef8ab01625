"""The one output sink: human output with Rich, or exactly one JSON document on stdout.

Results go to stdout; progress, notes and errors go to stderr. Everything passes through
`redact` so credentials never reach a terminal or a CI log.
"""

from __future__ import annotations

import json
import os
import re
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import IO, TYPE_CHECKING, Any

if TYPE_CHECKING:  # Rich is imported lazily: --json paths and tests need little of it
    from rich.console import Console

_SECRET_PATTERNS = [
    # access key ids (long-term AKIA, temporary ASIA, and the other documented prefixes)
    re.compile(r"\b(?:AKIA|ASIA|AROA|AIDA|ANPA|ANVA|AIPA|AGPA)[A-Z0-9]{12,}\b"),
    # secret keys and session tokens named as such, in env, ini, JSON or header form
    re.compile(
        r"(?i)((?:aws_)?(?:secret_access_key|secret_key|session_token|security_token|"
        r"secretaccesskey|sessiontoken)[\"']?\s*[:=]\s*[\"']?)[^\s\"',}]+"
    ),
    re.compile(r"(?i)(x-amz-security-token[\"']?\s*[:=]\s*[\"']?)[^\s\"',}]+"),
    re.compile(r"(Signature=)[0-9a-f]{16,}"),
    re.compile(r"(Credential=)[A-Z0-9]{16,}"),
]


_SECRET_VALUES: set[str] = set()  # values of this session: credentials in use, secret-looking --env values
_SECRET_KEYS: set[str] = set()  # names whose value is masked wherever `NAME=value` / "NAME": "value" appears
_SECRET_NAME_PARTS = {"TOKEN", "SECRET", "SECRETS", "PASSWORD", "PASSWD", "PWD", "PASS", "PASSPHRASE", "KEY",
                      "APIKEY", "CREDENTIAL", "CREDENTIALS", "AUTH", "AUTHORIZATION", "PRIVATE", "SIGNATURE",
                      "COOKIE", "SESSION", "DSN"}
_MIN_VALUE = 4  # shorter values are masked by name only: replacing 'abc' everywhere would garble output
MASK = "***"


def looks_secret(name: str) -> bool:
    """HF_TOKEN, *_KEY, *_SECRET, *_PASSWORD, API_KEY, ...: any `_`/`-` separated word that names a secret.
    (MAX_TOKENS is not: the word is TOKENS, a count.)"""
    words = {w for w in re.split(r"[_\-.]+", name.upper()) if w}
    return bool(words & _SECRET_NAME_PARTS) or name.upper().endswith(("TOKEN", "APIKEY", "PASSWORD", "SECRET"))


def register_secret(value: str | None, name: str | None = None) -> None:
    """From now on no output of this process shows `value` (nor the value of `name=...`)."""
    if name:
        _SECRET_KEYS.add(name)
    if value and len(value) >= _MIN_VALUE:
        _SECRET_VALUES.add(value)


def register_secret_env(env: dict[str, str]) -> list[str]:
    """Register the secret-looking entries of a container environment; returns their names."""
    names = [key for key in env if looks_secret(key)]
    for key in names:
        register_secret(env[key], key)
    return names


def mask_plan_env(plan: Any) -> Any:
    """A copy of a DeploymentPlan for output, its secret-looking container environment values as ***."""
    container = dict(plan.create_model.get("PrimaryContainer", {}))
    env = container.get("Environment") or {}
    if not any(looks_secret(key) for key in env):
        return plan
    container["Environment"] = {k: (MASK if looks_secret(k) else v) for k, v in env.items()}
    return plan.model_copy(update={"create_model": {**plan.create_model, "PrimaryContainer": container}})


def _known_secret_values() -> list[str]:
    values = set(_SECRET_VALUES)
    for name in ("AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_SECURITY_TOKEN", "AWS_ACCESS_KEY_ID"):
        value = os.environ.get(name, "")
        if len(value) >= 8:
            values.add(value)
    return sorted(values, key=len, reverse=True)  # longest first: a value containing another is masked whole


def _key_patterns() -> list[re.Pattern[str]]:
    return [re.compile(r"(\b" + re.escape(name) + r"[\"']?\s*[:=]\s*[\"']?)[^\s\"',}]+") for name in _SECRET_KEYS]


def redact(text: str) -> str:
    """Remove anything that looks like an AWS credential, every credential and secret this session
    registered, and the values of the credential env vars."""
    for value in _known_secret_values():
        text = text.replace(value, MASK)
    for pattern in [*_key_patterns(), *_SECRET_PATTERNS]:
        if pattern.groups:
            text = pattern.sub(lambda m: m.group(1) + MASK, text)
        else:
            text = pattern.sub(MASK, text)
    return text


def to_jsonable(data: Any) -> Any:
    """pydantic models and other objects to plain JSON data."""
    if hasattr(data, "model_dump"):
        return data.model_dump(mode="json", by_alias=True)
    if isinstance(data, dict):
        return {str(k): to_jsonable(v) for k, v in data.items()}
    if isinstance(data, (list, tuple)):
        return [to_jsonable(v) for v in data]
    return data


class Output:
    """Human (Rich) or machine (--json) output. Nothing else in peagle prints."""

    def __init__(self, json_mode: bool = False, *, stdout: IO[str] | None = None, stderr: IO[str] | None = None):
        self.json_mode = json_mode
        self._stdout = stdout
        self._stderr = stderr
        self._console: Console | None = None
        self._err_console: Console | None = None
        self._emitted = False

    @property
    def stdout(self) -> IO[str]:
        return self._stdout or sys.stdout

    @property
    def stderr(self) -> IO[str]:
        return self._stderr or sys.stderr

    @property
    def console(self) -> Console:
        """Rich console on stdout, for human results."""
        if self._console is None:
            from rich.console import Console

            self._console = Console(file=_RedactingWriter(self.stdout), highlight=False, soft_wrap=False)
        return self._console

    @property
    def err_console(self) -> Console:
        """Rich console on stderr, for progress, notes and errors."""
        if self._err_console is None:
            from rich.console import Console

            self._err_console = Console(file=_RedactingWriter(self.stderr), highlight=False, stderr=True)
        return self._err_console

    # results -------------------------------------------------------------------------------
    def result(self, data: Any, human: Callable[[Console], None] | None = None) -> None:
        """The command's result: one JSON document with --json, else `human(console)`."""
        if self.json_mode:
            if self._emitted:
                raise RuntimeError("a command emitted two JSON documents")
            self._emitted = True
            text = json.dumps(to_jsonable(data), indent=2, sort_keys=False, default=str)
            self.stdout.write(redact(text) + "\n")
            self.stdout.flush()
        elif human is not None:
            human(self.console)
        else:
            self.console.print_json(json.dumps(to_jsonable(data), default=str))

    def write_live(self, text: str) -> None:
        """Streamed text (tokens as they arrive), human mode only; unbuffered."""
        if self.json_mode:
            return
        self.stdout.write(redact(text))
        self.stdout.flush()

    # notes ---------------------------------------------------------------------------------
    def info(self, message: str) -> None:
        self.err_console.print(message, markup=False)

    def note(self, message: str) -> None:
        self.err_console.print(f"note: {message}", style="cyan", markup=False)

    def warn(self, message: str) -> None:
        self.err_console.print(f"warning: {message}", style="yellow", markup=False)

    def error(self, message: str) -> None:
        # plain write: an error line must never be wrapped or styled into two lines
        self.stderr.write(redact(f"error: {message}") + "\n")
        self.stderr.flush()

    @contextmanager
    def status(self, message: str) -> Iterator[Callable[[str], None]]:
        """A spinner on stderr; yields a function that updates its text."""
        with self.err_console.status(message) as live:
            yield lambda text: live.update(text)

    def confirm(self, question: str, *, yes: bool) -> None:
        """Ask before something that costs money or deletes. No terminal and no --yes: refuse."""
        from .errors import UsageError

        if yes:
            return
        stdin = sys.stdin
        if stdin is None or not stdin.isatty():
            raise UsageError(f"{question} needs confirmation", "pass --yes to confirm without a terminal")
        from rich.prompt import Confirm

        if not Confirm.ask(question, console=self.err_console, default=False):
            from .errors import Interrupted

            raise Interrupted("cancelled at the prompt", "nothing was changed")


class _RedactingWriter:
    """A file-like wrapper that redacts whatever Rich writes through it."""

    def __init__(self, target: IO[str]):
        self._target = target

    def write(self, text: str) -> int:
        return self._target.write(redact(text))

    def flush(self) -> None:
        self._target.flush()

    def isatty(self) -> bool:
        return bool(getattr(self._target, "isatty", lambda: False)())

    def fileno(self) -> int:
        return self._target.fileno()

    @property
    def encoding(self) -> str:
        return getattr(self._target, "encoding", "utf-8") or "utf-8"
