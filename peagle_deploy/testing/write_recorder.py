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

Every request, read or write, is also recorded as the API call it is, `service:Operation` with the service's
SigV4 signing name (`sagemaker:DescribeEndpoint`, `logs:FilterLogEvents`, `s3:GetObject`,
`sagemaker:InvokeEndpointWithResponseStream`; a bearer-token request to the OpenAI route is
`sagemaker:CallWithBearerToken` and `sagemaker:InvokeEndpoint`): `recorder.api_calls("case-1")`. `peagle_deploy.iam_policy`
maps API calls to the IAM actions that allow them (tests/test_iam_policy.py).
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
_INVOCATION = re.compile(r"/invocations(-response-stream)?/?$|/openai/v1/chat/completions/?$")
_ROUTE = re.compile(r"^/endpoints/[^/]+/openai/v1/")


class WriteRecorder:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.requests: list[tuple[str | None, str, bool]] = []  # (caller, action, is_write)
        self.calls: list[tuple[str | None, str]] = []  # (caller, "service:Operation")

    def writes(self, caller: str | None = None) -> list[str]:
        """The write actions seen (from `caller`, or from anyone)."""
        with self._lock:
            return [action for who, action, write in self.requests if write and (caller is None or who == caller)]

    def actions(self, caller: str) -> list[str]:
        with self._lock:
            return [action for who, action, _ in self.requests if who == caller]

    def api_calls(self, caller: str) -> set[str]:
        """Every API call `caller` made, as `service:Operation` (reads too)."""
        with self._lock:
            return {call for who, call in self.calls if who == caller}

    def middleware(self, app: Any, emulator: Any = None) -> Any:
        def recording(environ: dict[str, Any], start_response: Any) -> Iterable[bytes]:
            action, write = _classify(environ)
            match = _APP_ID.search(environ.get("HTTP_USER_AGENT", ""))
            caller = match.group(1) if match else None
            with self._lock:
                self.requests.append((caller, action, write))
                self.calls.extend((caller, call) for call in api_calls(environ, action))
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


_SIGNING = re.compile(r"Credential=[^/]+/\d{8}/[^/]+/([^/]+)/aws4_request")
_S3_LIST = ("list-type", "prefix", "delimiter", "max-keys", "marker", "continuation-token")


def api_calls(environ: dict[str, Any], action: str) -> list[str]:
    """The API calls one request is: a request to SageMaker's OpenAI route with a bearer token is two (the
    token's own CallWithBearerToken, and InvokeEndpoint); any other request is `api_call`'s one."""
    if _ROUTE.match(environ.get("PATH_INFO", "")) and environ.get("HTTP_AUTHORIZATION", "").startswith("Bearer "):
        return ["sagemaker:CallWithBearerToken", "sagemaker:InvokeEndpoint"]
    return [api_call(environ, action)]


def api_call(environ: dict[str, Any], action: str) -> str:
    """`service:Operation` of a request: the service from its SigV4 credential scope (the signing name),
    the operation from the JSON target or query Action, or for REST APIs (S3, SageMaker's runtimes) from the
    method and path."""
    match = _SIGNING.search(environ.get("HTTP_AUTHORIZATION", ""))
    service = match.group(1) if match else "unsigned"
    if " " not in action:  # JSON or query protocol: `action` is the operation already
        return f"{service}:{action}"
    method, path = action.split(" ", 1)
    if service == "sagemaker" and path.startswith("/inference-routers/"):  # sagemaker-inference-router-runtime
        return f"sagemaker:{'InvokeInferenceRouterAsync' if path.endswith('/async-invocations') else 'InvokeInferenceRouter'}"
    if service == "sagemaker" and _INVOCATION.search(path):
        stream = path.rstrip("/").endswith("-response-stream")
        return f"sagemaker:{'InvokeEndpointWithResponseStream' if stream else 'InvokeEndpoint'}"
    if service == "s3":
        has_key = "/" in path.strip("/")
        query = parse_qs(environ.get("QUERY_STRING", ""), keep_blank_values=True)
        # a multipart upload's calls by their query markers, as botocore's S3 model routes them (`?uploads`,
        # `?uploadId=`): ListMultipartUploads, CreateMultipartUpload, UploadPart, CompleteMultipartUpload, ...
        if has_key and "uploadId" in query:
            operation = {"PUT": "UploadPart", "POST": "CompleteMultipartUpload", "DELETE": "AbortMultipartUpload",
                         "GET": "ListParts"}.get(method, f"{method}Part")
        elif has_key and method == "POST" and "uploads" in query:
            operation = "CreateMultipartUpload"
        elif has_key:
            operation = {"GET": "GetObject", "HEAD": "HeadObject", "PUT": "PutObject",
                         "DELETE": "DeleteObject"}.get(method, f"{method}Object")
        elif method == "GET" and "uploads" in query:
            operation = "ListMultipartUploads"
        elif method == "GET":
            operation = "ListObjectsV2" if query.get("list-type") == ["2"] else (
                "ListObjects" if any(k in query for k in _S3_LIST) or not query else f"GetBucket({','.join(query)})")
        else:
            operation = {"HEAD": "HeadBucket", "PUT": "CreateBucket", "DELETE": "DeleteBucket"}.get(method, method)
        return f"s3:{operation}"
    return f"{service}:{method} {path}"
