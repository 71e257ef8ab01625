"""Transports for one chat request (`peagle invoke`): a URL over HTTP, or a SageMaker endpoint (through
InvokeEndpoint(WithResponseStream), or through its OpenAI route: HTTP with a bearer token made on the fly).

All take the same body and return the same bytes: an OpenAI chat-completion JSON, or an SSE stream
of chat-completion chunks. What a target is (kind, request URL) comes from `target_ref.parse_target`;
what a failure means from `failures` (HTTP) and `aws.translate_error` (AWS). Every call has a total
deadline as well as an idle timeout.
"""

from __future__ import annotations

import http.client
import socket
import time
from collections.abc import Callable, Iterator
from typing import Any
from urllib.parse import urlsplit

from ..errors import CredentialsError, EndpointFailed, PeagleError, UsageError, WaitTimeout
from .eventstream import StreamFailure, botocore_payload_parts
from .failures import NoCapacity, error_text, http_failure, is_no_capacity
from .target_ref import TargetRef

READ_SIZE = 65536


class Deadline:
    """A total time budget: `left()` seconds remain; `check(what)` raises WaitTimeout once it is spent."""

    def __init__(self, seconds: float, clock: Any = time.monotonic):
        self.seconds, self._clock = seconds, clock
        self._end = clock() + seconds

    def left(self) -> float:
        return self._end - self._clock()

    def check(self, what: str) -> None:
        if self.left() <= 0:
            raise WaitTimeout(f"{what} took longer than --timeout {self.seconds:g}s",
                              "raise --timeout or lower --max-tokens")


class HttpTarget:
    """A container or OpenAI URL over the standard library's HTTP client (one request, one connection)."""

    def __init__(self, ref: TargetRef, *, idle_timeout: float = 60.0, headers: dict[str, str] | None = None,
                 auth: Callable[[], dict[str, str]] | None = None):
        self.ref = ref
        self.kind = ref.kind
        self.name = ref.name
        self.log_hint = ref.log_hint
        self._url = urlsplit(ref.request_url)
        self._idle_timeout = idle_timeout
        self._headers = {**ref.headers, **(headers or {})}
        self._auth = auth  # headers made per request (a bearer token that is renewed)

    def _failure(self, status: int, detail: bytes, error_type: str | None) -> PeagleError:
        return http_failure(status, error_text(detail), self.name, self.log_hint)

    def _post(self, body: bytes, accept: str, deadline: Deadline) -> tuple[http.client.HTTPConnection, Any]:
        cls = http.client.HTTPSConnection if self._url.scheme == "https" else http.client.HTTPConnection
        conn = cls(self._url.hostname, self._url.port, timeout=max(0.01, min(self._idle_timeout, deadline.left())))
        try:
            conn.request("POST", self._url.path, body=body, headers={
                "Content-Type": "application/json", "Accept": accept, **self._headers,
                **(self._auth() if self._auth else {})})
            response = conn.getresponse()
        except ConnectionRefusedError:
            conn.close()
            raise EndpointFailed(f"connection refused by {self.name}",
                                 "is the container running and listening on that port?") from None
        except socket.timeout:
            conn.close()
            deadline.check(f"the request to {self.name}")
            raise WaitTimeout(f"{self.name} sent no response in {self._idle_timeout:g}s",
                              "raise --timeout, or check the server") from None
        except OSError as exc:
            conn.close()
            raise EndpointFailed(f"could not reach {self.name}: {exc.strerror or exc}", "check the URL") from None
        if response.status != 200:
            detail = response.read(4000)
            conn.close()
            raise self._failure(response.status, detail, response.getheader("x-amzn-ErrorType"))
        return conn, response

    def _reads(self, response: Any, conn: Any, deadline: Deadline) -> Iterator[bytes]:
        while True:
            deadline.check(f"the answer of {self.name}")
            if conn.sock is not None:
                conn.sock.settimeout(max(0.01, min(self._idle_timeout, deadline.left())))
            try:
                chunk = response.read1(READ_SIZE)
            except socket.timeout:
                deadline.check(f"the answer of {self.name}")
                raise WaitTimeout(f"{self.name} sent nothing for {self._idle_timeout:g}s (stalled stream)",
                                  "raise --timeout, or check the server") from None
            except http.client.IncompleteRead:
                return  # the caller reports the truncation
            if not chunk:
                return
            yield chunk

    def send(self, body: bytes, deadline: Deadline) -> bytes:
        conn, response = self._post(body, "application/json", deadline)
        try:
            return b"".join(self._reads(response, conn, deadline))
        finally:
            conn.close()

    def stream(self, body: bytes, deadline: Deadline) -> Iterator[bytes]:
        conn, response = self._post(body, "text/event-stream", deadline)
        try:
            yield from self._reads(response, conn, deadline)
        finally:
            conn.close()


class SageMakerTarget:
    """A SageMaker endpoint through sagemaker-runtime (boto3 from peagle's one AWS seam)."""

    kind = "sagemaker"

    def __init__(self, ref: TargetRef, *, region: str | None = None, profile: str | None = None,
                 idle_timeout: float = 60.0):
        from ..aws import AwsSession

        self.ref = ref
        self.name = ref.name
        self.log_hint = ref.log_hint
        self._session = AwsSession(region, profile, read_timeout=idle_timeout)
        self._idle_timeout = idle_timeout
        self._deadline: Deadline | None = None  # the call in flight's, read by the retry guard
        self._guarded: Any = None  # the client the guard is registered on

    @property
    def _client(self) -> Any:
        return self._session.client("sagemaker-runtime")

    def _client_for(self, deadline: Deadline) -> Any:
        """sagemaker-runtime whose reads wait at most the idle timeout or the whole budget, whichever is
        shorter, and whose retries (botocore retries a read timeout) stop once the call's deadline is spent:
        one call never takes much longer than --timeout, streamed or not."""
        self._deadline = deadline
        client = (self._client if deadline.seconds >= self._idle_timeout else
                  self._session.client("sagemaker-runtime", read_timeout=max(0.01, deadline.seconds)))
        if client is not self._guarded:
            client.meta.events.register_first("needs-retry.sagemaker-runtime", self._stop_retrying_when_late)
            self._guarded = client
        return client

    def _stop_retrying_when_late(self, **_kwargs: Any) -> None:
        if self._deadline is not None:
            self._deadline.check(f"the answer of {self.name}")

    def _explain(self, exc: Exception) -> Exception:
        """ClientError -> a one-line PeagleError: not found, not InService, or the container's own error."""
        from ..aws import error_code, error_message, translate_error

        code, message = error_code(exc), error_message(exc)
        if code == "ModelError":
            response = getattr(exc, "response", {})
            original = response.get("OriginalMessage") or message
            status = int(response.get("OriginalStatusCode") or 500)
            return http_failure(status, error_text(str(original)), f"the container of {self.name}", self.log_hint)
        if code in ("ValidationError", "ValidationException"):
            return refused_request(self._session, self.ref, message, code)
        return translate_error(exc) or exc

    def _addressed(self) -> dict[str, str]:
        """InvokeEndpoint's names: the endpoint, and the inference component of it when it hosts components."""
        names = {"EndpointName": self.name}
        if self.ref.inference_component:
            names["InferenceComponentName"] = self.ref.inference_component
        return names

    def send(self, body: bytes, deadline: Deadline) -> bytes:
        import urllib3.exceptions

        from ..aws import botocore_exceptions

        bx = botocore_exceptions()
        try:
            response = self._client_for(deadline).invoke_endpoint(
                **self._addressed(), Body=body, ContentType="application/json", Accept="application/json")
            parts = []
            for part in response["Body"].iter_chunks(READ_SIZE):
                deadline.check(f"the answer of {self.name}")
                parts.append(part)
            return b"".join(parts)
        except bx.ClientError as exc:
            raise self._explain(exc) from None
        except (bx.ReadTimeoutError, urllib3.exceptions.ReadTimeoutError):
            deadline.check(f"the answer of {self.name}")
            raise WaitTimeout(f"{self.name} sent no answer in {self._idle_timeout:g}s", "raise --timeout") from None

    def stream(self, body: bytes, deadline: Deadline) -> Iterator[bytes]:
        import urllib3.exceptions
        from botocore.eventstream import ParserError

        from ..aws import botocore_exceptions

        bx = botocore_exceptions()
        try:
            response = self._client_for(deadline).invoke_endpoint_with_response_stream(
                **self._addressed(), Body=body, ContentType="application/json", Accept="text/event-stream")
            events = response["Body"]
            try:
                for part in botocore_payload_parts(events):
                    deadline.check(f"the answer of {self.name}")
                    yield part
            finally:
                events.close()
        except StreamFailure as exc:
            raise EndpointFailed(f"{self.name} stream failed ({exc.kind}): {exc.message}", self.log_hint) from None
        except bx.ClientError as exc:
            raise self._explain(exc) from None
        except (bx.ReadTimeoutError, urllib3.exceptions.ReadTimeoutError):
            deadline.check(f"the answer of {self.name}")
            raise WaitTimeout(f"{self.name} sent nothing for {self._idle_timeout:g}s (stalled stream)",
                              "raise --timeout, or check the endpoint") from None
        except ParserError as exc:  # bad prelude or CRC32
            raise EndpointFailed(f"{self.name} sent a corrupt event stream: {exc}", self.log_hint) from None


def not_in_service(name: str, described: dict[str, Any]) -> PeagleError:
    """An endpoint a request cannot reach yet: Failed is exit 6 (it failed); Creating, Updating or Deleting is
    exit 2 (nothing failed: wait for it), as `peagle update` says of the same states."""
    status = described.get("EndpointStatus")
    if status == "Failed":
        reason = f" ({described['FailureReason']})" if described.get("FailureReason") else ""
        return EndpointFailed(f"endpoint {name} is Failed{reason}",
                              f"see why with 'peagle logs {name}', or remove it with 'peagle cleanup {name} --yes'")
    return UsageError(f"endpoint {name} is {status}, not InService",
                      f"wait for it (peagle status {name} shows it) and run this again")


def refused_request(session: Any, ref: TargetRef, message: str, code: str | None = "ValidationError"
                    ) -> PeagleError:
    """SageMaker's ValidationError for a request to `ref`: its inference component has no copy in service
    (NoCapacity: waking it is the caller's), no such endpoint (2), not InService (6), an endpoint that hosts
    components asked without one (2), or the request itself (2). DescribeEndpoint tells which."""
    name = ref.name
    if ref.inference_component and is_no_capacity(code, message):
        return NoCapacity(f"{ref.described} has no copy in service: {message}",
                          f"a component that scales to zero wakes on this refusal: 'peagle invoke {name} hi' waits "
                          "for a copy (minutes); run this again once it answers")
    if "inference component name header is required" in message.lower():
        return _no_component_named(session, name)
    try:
        described = session.client("sagemaker").describe_endpoint(EndpointName=name)
    except Exception:  # noqa: BLE001 - it does not exist (or cannot be described)
        return UsageError(f"no endpoint named {name!r} in {session.region}",
                          "check the name and --region (peagle status lists peagle's endpoints)")
    if described["EndpointStatus"] != "InService":
        return not_in_service(name, described)
    return UsageError(f"SageMaker rejected the request: {message}", "check the payload")


def _no_component_named(session: Any, name: str) -> PeagleError:
    """SageMaker wants a component for endpoint `name` and the request named none: the endpoint hosts none now (the
    listing worked and was empty: a deploy or cleanup that did not finish), or peagle could not list them (why)."""
    from ..aws import translate_error

    try:
        pages = session.client("sagemaker").get_paginator("list_inference_components").paginate(
            EndpointNameEquals=name)
        hosted = [c["InferenceComponentName"] for page in pages for c in page.get("InferenceComponents", [])]
    except Exception as exc:  # noqa: BLE001 - a read failure: say which, and how to name one by hand
        error = translate_error(exc)
        if error is None:
            raise
        return UsageError(f"endpoint {name} hosts inference components and the request named none",
                          f"pass --component NAME (peagle could not list them: {error.one_line()})")
    if hosted:  # one appeared since the request was addressed
        return UsageError(f"endpoint {name} hosts inference components and the request named none",
                          f"pass --component {sorted(hosted)[0]}" if len(hosted) == 1 else
                          f"pass --component with one of {', '.join(sorted(hosted))}")
    region = f" --region {session.region}" if getattr(session, "region", None) else ""
    return EndpointFailed(f"endpoint {name} is made for inference components and hosts none now (SageMaker lists "
                          "none)", f"'peagle status {name}{region}' shows what it holds and bills; 'peagle recover "
                          f"{name}{region}' completes the peagle deploy that made it (its component, then its "
                          "scaling) or, where that cannot be done, removes it; 'peagle cleanup "
                          f"{name}{region} --yes' removes it")


class OpenAIRouteTarget(HttpTarget):
    """A SageMaker endpoint through its OpenAI route: plain HTTP and SSE to .../endpoints/NAME/openai/v1, with a
    bearer token made on the fly (`runtime.openai_route`). The container's own answers, errors included, come
    back as is; SageMaker's own refusals (no such endpoint, a refused token) are explained like InvokeEndpoint's."""

    def __init__(self, ref: TargetRef, *, region: str | None = None, profile: str | None = None,
                 idle_timeout: float = 60.0):
        from ..aws import AwsSession
        from .openai_route import TokenSource, base_url

        self._session = AwsSession(ref.session_region(region), profile, read_timeout=idle_timeout)
        routed = ref if ref.api_base else ref.model_copy(update={"api_base": base_url(
            self._session, ref.name, ref.inference_component)})
        tokens = TokenSource(self._session)
        tokens.headers()  # no credentials is exit 3 before any request
        super().__init__(routed, idle_timeout=idle_timeout, auth=tokens.headers)

    def _failure(self, status: int, detail: bytes, error_type: str | None) -> PeagleError:
        text = error_text(detail)
        error_type = error_type.split(":")[0] if error_type else None  # AWS may add ':<namespace>'
        if status == 400 and self.ref.inference_component and is_no_capacity("ValidationError", text):
            return refused_request(self._session, self.ref, text)  # its error type unmeasured: its words decide
        if error_type in ("ValidationError", "ValidationException"):
            return refused_request(self._session, self.ref, text, error_type)
        if error_type is not None and status in (401, 403):
            return CredentialsError(f"SageMaker refused the bearer token for {self.name} (HTTP {status}: {text})",
                                    "the caller needs sagemaker:CallWithBearerToken and sagemaker:InvokeEndpoint "
                                    "(peagle iam-policy invoke), a clock within minutes of AWS, and the "
                                    "endpoint's region")
        return super()._failure(status, detail, error_type)


def open_target(ref: TargetRef, *, region: str | None = None, profile: str | None = None,
                idle_timeout: float = 60.0) -> HttpTarget | SageMakerTarget:
    if ref.kind == "sagemaker" and ref.is_route:
        return OpenAIRouteTarget(ref, region=region, profile=profile, idle_timeout=idle_timeout)
    if ref.kind == "sagemaker":
        return SageMakerTarget(ref, region=ref.session_region(region), profile=profile, idle_timeout=idle_timeout)
    return HttpTarget(ref, idle_timeout=idle_timeout)
