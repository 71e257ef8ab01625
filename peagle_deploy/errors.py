"""One exception family for every expected failure; each carries its exit code and a hint.

The CLI turns a PeagleError into one line on stderr and its exit code, never a traceback.
"""

from __future__ import annotations

from enum import IntEnum


class ExitCode(IntEnum):
    OK = 0
    UNEXPECTED = 1
    USAGE = 2
    AUTH = 3
    QUOTA = 4
    TIMEOUT = 5
    FAILED = 6
    INTERRUPTED = 130


class PeagleError(Exception):
    """An expected failure: `message` says what went wrong, `hint` how to fix it."""

    exit_code: ExitCode = ExitCode.UNEXPECTED

    def __init__(self, message: str, hint: str | None = None, *, exit_code: ExitCode | None = None):
        super().__init__(message)
        self.message = message
        self.hint = hint
        if exit_code is not None:
            self.exit_code = exit_code

    def __str__(self) -> str:
        return self.one_line()

    def one_line(self) -> str:
        text = self.message.rstrip(".")
        if self.hint:
            text += f": {self.hint}"
        return " ".join(text.split())


class UsageError(PeagleError):
    """Bad input: a flag, a name, a payload. Nothing was written to AWS."""

    exit_code = ExitCode.USAGE


class CredentialsError(PeagleError):
    exit_code = ExitCode.AUTH


class QuotaError(PeagleError):
    exit_code = ExitCode.QUOTA


class WaitTimeout(PeagleError):
    exit_code = ExitCode.TIMEOUT


class EndpointFailed(PeagleError):
    """The endpoint, the container or the model server failed."""

    exit_code = ExitCode.FAILED


class Interrupted(PeagleError):
    exit_code = ExitCode.INTERRUPTED
