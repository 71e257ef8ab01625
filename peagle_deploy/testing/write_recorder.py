"""Which AWS writes reached the emulator, and from which caller: a WSGI middleware for
`SageMakerEmulator.server(middlewares=[recorder.middleware])`.

Tests that run the real `peagle` executable against one shared emulator tell their processes apart by
botocore's application id: give each process `AWS_SDK_UA_APP_ID=<caller>` and botocore adds
`app/<caller>` to every request's User-Agent. A write is any action whose name starts with one of
`WRITE_PREFIXES` (JSON and query protocols: SageMaker, Service Quotas, CloudWatch Logs, IAM, ...) or
a REST request that changes something (S3's PUT, DELETE, PATCH, and POST other than an invocation).

    recorder = WriteRecorder()
    with SageMakerEmulator.server(middlewares=[recorder.middleware]) as emu:
        subprocess.run([...], env={**emu.env, "AWS_SDK_UA_APP_ID": "case-1"})
        assert recorder.writes("case-1") == []
"""

from __future__ import annotations

import io
import re
import threading
from collections.abc import Iterable
from typing import Any
from urllib.parse import parse_qs

WRITE_PREFIXES = ("Create", "Delete", "Update", "Put", "Start", "Stop", "Add", "Remove", "Tag", "Untag",
                  "Attach", "Detach", "Register", "Deregister", "Modify", "Set", "Request")
_APP_ID = re.compile(r"\bapp/([^\s]+)")
_INVOCATION = re.compile(r"/invocations(-response-stream)?/?$")


class WriteRecorder:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.requests: list[tuple[str | None, str, bool]] = []  # (caller, action, is_write)

    def writes(self, caller: str | None = None) -> list[str]:
        """The write actions seen (from `caller`, or from anyone)."""
        with self._lock:
            return [action for who, action, write in self.requests if write and (caller is None or who == caller)]

    def actions(self, caller: str) -> list[str]:
        with self._lock:
            return [action for who, action, _ in self.requests if who == caller]

    def middleware(self, app: Any, emulator: Any = None) -> Any:
        def recording(environ: dict[str, Any], start_response: Any) -> Iterable[bytes]:
            action, write = _classify(environ)
            match = _APP_ID.search(environ.get("HTTP_USER_AGENT", ""))
            with self._lock:
                self.requests.append((match.group(1) if match else None, action, write))
            return app(environ, start_response)

        return recording


def _classify(environ: dict[str, Any]) -> tuple[str, bool]:
    target = environ.get("HTTP_X_AMZ_TARGET")
    if target:  # JSON protocol: "SageMaker.CreateModel"
        action = target.rsplit(".", 1)[-1]
        return action, action.startswith(WRITE_PREFIXES)
    method = environ.get("REQUEST_METHOD", "GET")
    action = (parse_qs(environ.get("QUERY_STRING", "")).get("Action") or [None])[0]
    if action is None and method == "POST" and "x-www-form-urlencoded" in environ.get("CONTENT_TYPE", ""):
        body = environ["wsgi.input"].read(int(environ.get("CONTENT_LENGTH") or 0))
        environ["wsgi.input"] = io.BytesIO(body)  # put it back for moto
        action = (parse_qs(body.decode("utf-8", "replace")).get("Action") or [None])[0]
    if action:  # query protocol: IAM, STS, CloudWatch
        return action, action.startswith(WRITE_PREFIXES)
    path = environ.get("PATH_INFO", "")
    write = method in ("PUT", "DELETE", "PATCH") or (method == "POST" and not _INVOCATION.search(path))
    return f"{method} {path}", write
