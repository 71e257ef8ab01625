"""Where a chat request goes: a SageMaker endpoint, a container URL, or an OpenAI-compatible URL.

All three take the same body and return the same bytes: an OpenAI chat-completion JSON, or an SSE
stream of chat-completion chunks. Only transport differs:
- sagemaker: `InvokeEndpoint` / `InvokeEndpointWithResponseStream` (SigV4 via boto3); botocore parses
  the AWS event stream into PayloadPart events (`eventstream.botocore_payload_parts`);
- container: the SageMaker container contract, `GET /ping` and `POST /invocations` (vLLM routes an
  OpenAI chat body there);
- openai: `POST <base>/chat/completions` for a base URL ending in /v1.
"""

from __future__ import annotations

import http.client
import json
import socket
from collections.abc import Iterator
from typing import Any, Literal
from urllib.parse import urlsplit

from ..errors import EndpointFailed, UsageError, WaitTimeout
from .eventstream import StreamFailure, botocore_payload_parts

Kind = Literal["sagemaker", "container", "openai"]
READ_SIZE = 65536


def classify(target: str, kind: str | None = None) -> Kind:
    """http(s) URLs ending in /v1 are OpenAI base URLs, other URLs containers; anything else an endpoint name."""
    if kind:
        if kind not in ("sagemaker", "container", "openai"):
            raise UsageError(f"unknown target kind {kind!r}", "use sagemaker, container or openai")
        return kind  # type: ignore[return-value]
    if target.startswith(("http://", "https://")):
        return "openai" if urlsplit(target).path.rstrip("/").endswith("/v1") else "container"
    if "://" in target:
        raise UsageError(f"unsupported target URL {target!r}", "use http://host:port or an endpoint name")
    return "sagemaker"


class HttpTarget:
    """A container or OpenAI URL, over the standard library's HTTP client (one request, one connection)."""

    def __init__(self, url: str, kind: Kind, *, idle_timeout: float = 60.0, headers: dict[str, str] | None = None):
        self.url = url.rstrip("/")
        self.kind = kind
        parts = urlsplit(self.url)
        if not parts.hostname:
            raise UsageError(f"target URL {url!r} has no host", "use http://host:port")
        self._parts = parts
        self._path = (parts.path.rstrip("/") + "/chat/completions") if kind == "openai" else \
            (parts.path.rstrip("/") + "/invocations")
        self._idle_timeout = idle_timeout
        self._headers = headers or {}
        self.name = self.url

    @property
    def log_hint(self) -> str:
        return "check the container's own log (docker logs)"

    def _connect(self) -> http.client.HTTPConnection:
        cls = http.client.HTTPSConnection if self._parts.scheme == "https" else http.client.HTTPConnection
        return cls(self._parts.hostname, self._parts.port, timeout=self._idle_timeout)

    def _post(self, body: bytes, accept: str) -> tuple[http.client.HTTPConnection, http.client.HTTPResponse]:
        conn = self._connect()
        try:
            conn.request("POST", self._path, body=body, headers={
                "Content-Type": "application/json", "Accept": accept, **self._headers})
            response = conn.getresponse()
        except ConnectionRefusedError:
            conn.close()
            raise EndpointFailed(f"connection refused by {self.url}",
                                 "is the container running and listening on that port?") from None
        except socket.timeout:
            conn.close()
            raise WaitTimeout(f"{self.url} sent no response in {self._idle_timeout:g}s",
                              "raise --timeout, or check the server") from None
        except OSError as exc:
            conn.close()
            raise EndpointFailed(f"could not reach {self.url}: {exc.strerror or exc}", "check the URL") from None
        if response.status != 200:
            detail = response.read(2000).decode("utf-8", "replace")
            conn.close()
            raise EndpointFailed(f"{self.url} answered HTTP {response.status}: {_error_text(detail)}", self.log_hint)
        return conn, response

    def send(self, body: bytes) -> bytes:
        conn, response = self._post(body, "application/json")
        try:
            return _read_all(response, self)
        finally:
            conn.close()

    def stream(self, body: bytes) -> Iterator[bytes]:
        conn, response = self._post(body, "text/event-stream")
        try:
            while True:
                try:
                    chunk = response.read1(READ_SIZE)
                except socket.timeout:
                    raise WaitTimeout(f"{self.url} sent nothing for {self._idle_timeout:g}s (stalled stream)",
                                      "raise --timeout, or check the server") from None
                except http.client.IncompleteRead:
                    return  # the caller reports the truncation
                if not chunk:
                    return
                yield chunk
        finally:
            conn.close()

    def ping(self) -> bool:
        if self.kind != "container":
            return True
        conn = self._connect()
        try:
            conn.request("GET", self._parts.path.rstrip("/") + "/ping")
            return conn.getresponse().status == 200
        except OSError:
            return False
        finally:
            conn.close()


def _read_all(response: http.client.HTTPResponse, target: Any) -> bytes:
    try:
        return response.read()
    except socket.timeout:
        raise WaitTimeout(f"{target.name} stopped sending for {target._idle_timeout:g}s",
                          "raise --timeout, or check the server") from None


def _error_text(detail: str) -> str:
    try:
        data = json.loads(detail)
    except ValueError:
        return " ".join(detail.split())[:300] or "(empty body)"
    if isinstance(data, dict):
        err = data.get("error", data)
        if isinstance(err, dict):
            return str(err.get("message") or err)[:300]
        return str(err)[:300]
    return str(data)[:300]


class SageMakerTarget:
    """A SageMaker endpoint through sagemaker-runtime (boto3 from peagle's one AWS seam)."""

    kind: Kind = "sagemaker"

    def __init__(self, name: str, *, region: str | None = None, profile: str | None = None,
                 idle_timeout: float = 60.0):
        from ..aws import AwsSession

        self.name = name
        self._session = AwsSession(region, profile, read_timeout=idle_timeout)
        self._idle_timeout = idle_timeout

    @property
    def log_hint(self) -> str:
        return f"container logs: CloudWatch log group /aws/sagemaker/Endpoints/{self.name}"

    @property
    def _client(self) -> Any:
        return self._session.client("sagemaker-runtime")

    def _explain(self, exc: Exception) -> Exception:
        """ClientError -> a one-line PeagleError: not found, not InService, or the container's own error."""
        from ..aws import error_code, error_message, translate_error

        code, message = error_code(exc), error_message(exc)
        if code == "ModelError":
            response = getattr(exc, "response", {})
            original = response.get("OriginalMessage") or message
            status = response.get("OriginalStatusCode", "?")
            return EndpointFailed(f"the container of {self.name} answered {status}: {_error_text(str(original))}",
                                  self.log_hint)
        if code == "ValidationError" or code == "ValidationException":
            try:
                described = self._session.client("sagemaker").describe_endpoint(EndpointName=self.name)
            except Exception:  # noqa: BLE001 - it does not exist (or cannot be described)
                return UsageError(f"no endpoint named {self.name!r} in {self._session.region}",
                                  "check the name and --region (peagle status lists peagle's endpoints)")
            if described["EndpointStatus"] != "InService":
                return EndpointFailed(f"endpoint {self.name} is {described['EndpointStatus']}, not InService",
                                      f"wait for it (peagle status {self.name}) or read its FailureReason")
            return EndpointFailed(f"SageMaker rejected the request: {message}")
        return translate_error(exc) or exc

    def send(self, body: bytes) -> bytes:
        import botocore.exceptions

        try:
            response = self._client.invoke_endpoint(EndpointName=self.name, Body=body,
                                                    ContentType="application/json", Accept="application/json")
        except botocore.exceptions.ClientError as exc:
            raise self._explain(exc) from None
        except botocore.exceptions.ReadTimeoutError:
            raise WaitTimeout(f"{self.name} sent no answer in {self._idle_timeout:g}s", "raise --timeout") from None
        return response["Body"].read()

    def stream(self, body: bytes) -> Iterator[bytes]:
        import botocore.exceptions
        import urllib3.exceptions
        from botocore.eventstream import ParserError

        try:
            response = self._client.invoke_endpoint_with_response_stream(
                EndpointName=self.name, Body=body, ContentType="application/json", Accept="text/event-stream")
            yield from botocore_payload_parts(response["Body"])
        except StreamFailure as exc:
            raise EndpointFailed(f"{self.name} stream failed ({exc.kind}): {exc.message}", self.log_hint) from None
        except botocore.exceptions.ClientError as exc:
            raise self._explain(exc) from None
        except (botocore.exceptions.ReadTimeoutError, urllib3.exceptions.ReadTimeoutError):
            raise WaitTimeout(f"{self.name} sent nothing for {self._idle_timeout:g}s (stalled stream)",
                              "raise --timeout, or check the endpoint") from None
        except ParserError as exc:  # bad prelude or CRC32
            raise EndpointFailed(f"{self.name} sent a corrupt event stream: {exc}", self.log_hint) from None

    def ping(self) -> bool:
        return True


def open_target(target: str, *, kind: str | None = None, region: str | None = None, profile: str | None = None,
                idle_timeout: float = 60.0) -> HttpTarget | SageMakerTarget:
    resolved = classify(target, kind)
    if resolved == "sagemaker":
        return SageMakerTarget(target, region=region, profile=profile, idle_timeout=idle_timeout)
    return HttpTarget(target, resolved, idle_timeout=idle_timeout)
