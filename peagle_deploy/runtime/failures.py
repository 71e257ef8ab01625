"""One mapping from what a target answered to what peagle tells the user (and with which exit code).

Used by both transports (HTTP and SageMaker) for `invoke`, `bench` and `metrics`. AWS errors that are
not the container's go through `aws.translate_error`, the project's one AWS classifier.
"""

from __future__ import annotations

import json
import os

from ..errors import CredentialsError, EndpointFailed, ExitCode, PeagleError, QuotaError, UsageError


def error_text(detail: str | bytes) -> str:
    """The server's own error text from an error body (vLLM: {"error": {"message"}} or {"message"})."""
    if isinstance(detail, bytes):
        detail = detail.decode("utf-8", "replace")
    try:
        data = json.loads(detail)
    except ValueError:
        return " ".join(detail.split())[:300] or "(empty body)"
    if isinstance(data, dict):
        err = data.get("error", data)
        if isinstance(err, dict):
            return " ".join(str(err.get("message") or err).split())[:300]
        return str(err)[:300]
    return str(data)[:300]


class TargetHttpError(Exception):
    """A target answered a non-200 status; `text` is its own error text."""

    def __init__(self, status: int, text: str):
        super().__init__(f"HTTP {status}: {text}")
        self.status = status
        self.text = text
        self.message = f"HTTP {status}: {text}"
        self.kind = f"http_{status}"


def http_failure(status: int, text: str, where: str, log_hint: str) -> PeagleError:
    """A non-200 answer as a PeagleError: the request was refused (2), not allowed (3), throttled (4),
    or the server failed (6)."""
    message = f"{where} answered HTTP {status}: {text}"
    if status in (400, 404, 405, 413, 422):
        return UsageError(message, "check the URL, the payload and its limits")
    if status in (401, 403):
        return CredentialsError(message, "check the credentials the server expects")
    if status == 429:
        return QuotaError(message, "lower the request rate or the concurrency")
    return EndpointFailed(message, log_hint)


# SageMaker's refusal of a request to an inference component with no copy in service (docs/hosting.md, "Waking
# up"). Its message starts with these words: a container's own error that merely quotes them (vLLM echoes a value
# it refuses) is not taken for it
NO_CAPACITY_TEXT = "inference component has no capacity to process this request"


class NoCapacity(EndpointFailed):
    """SageMaker refused a request to an inference component that has no copy in service (scaled to zero, or
    its copies still starting): the refusal itself wakes a component that scales to zero (`runtime.waking`). Nothing
    failed: where it is not waited for (bench agree), it is exit 4, capacity, not 6."""

    exit_code = ExitCode.QUOTA


def is_no_capacity(code: str | None, text: str) -> bool:
    return code in ("ValidationError", "ValidationException") and \
        " ".join(text.split()).lower().startswith(NO_CAPACITY_TEXT)


def connect_error_text(exc: BaseException) -> str:
    """'connection refused', 'name or service not known', ... for a failed connection (aiohttp or OSError)."""
    os_error = getattr(exc, "os_error", None) or (exc if isinstance(exc, OSError) else None)
    if getattr(os_error, "errno", None):
        return os.strerror(os_error.errno).lower()
    return (str(exc) or "timed out").lower()
