"""The load generator's transport for a SageMaker endpoint: InvokeEndpointWithResponseStream.

botocore's client is synchronous, so each request runs in a worker thread (one per request in
flight). The event stream goes through runtime.eventstream.payload_parts (peagle's reader) and the
PayloadPart bytes through the same ChunkTally as the HTTP path, timestamped as they arrive. Failures
keep SageMaker's own text: the container's error (ModelError) as `http_<its status>`, others by code.
"""

from __future__ import annotations

import asyncio
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from ..runtime.eventstream import StreamFailure, payload_parts
from ..runtime.failures import TargetHttpError, error_text
from ..runtime.payload import MAX_BODY_BYTES
from ..runtime.sse import ChunkTally, StreamError
from ..runtime.target_ref import TargetRef
from .records import Messages, RequestRecord
from .request_bodies import RequestBodies


class SageMakerCallError(Exception):
    """A SageMaker API error other than the container's own (throttling, validation, credentials)."""

    def __init__(self, code: str, text: str):
        super().__init__(f"{code}: {text}")
        self.kind = code
        self.message = f"{code}: {text}"


class SageMakerChatSender:
    def __init__(self, session: Any, target: TargetRef, *, max_tokens: int = 256, temperature: float = 0.0,
                 timeout: float = 600.0, max_in_flight: int = 128):
        self.session = session
        self.target = target
        # InvokeEndpoint's names: the endpoint, and its inference component when it hosts components
        self.addressed = {"EndpointName": target.name, **({"InferenceComponentName": target.inference_component}
                                                            if target.inference_component else {})}
        self.body = RequestBodies({"max_tokens": max_tokens, "temperature": temperature}, limit=MAX_BODY_BYTES)
        self.timeout = timeout
        self.max_in_flight = max_in_flight
        self._client: Any = None
        self._pool: ThreadPoolExecutor | None = None

    async def __aenter__(self) -> SageMakerChatSender:
        self._client = self.session.client(
            "sagemaker-runtime", max_pool_connections=self.max_in_flight + 8, read_timeout=self.timeout
        )
        self._pool = ThreadPoolExecutor(max_workers=self.max_in_flight + 8, thread_name_prefix="peagle-bench")
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)

    async def __call__(self, messages: Messages, rec: RequestRecord, answer: bytearray | None = None) -> None:
        """`answer`: when given, the stream's payload bytes are copied into it (for a multi-turn record)."""
        cancel = threading.Event()
        streams: list[Any] = []
        loop = asyncio.get_running_loop()
        try:
            await loop.run_in_executor(self._pool, self._blocking, self.body(messages), rec, cancel, streams,
                                       answer)
        except asyncio.CancelledError:
            cancel.set()
            for stream in streams:  # a thread blocked in a read wakes up now, not at its read timeout
                stream.close()
            raise

    def _blocking(self, body: bytes, rec: RequestRecord, cancel: threading.Event, streams: list[Any],
                  answer: bytearray | None = None) -> None:
        from ..aws import botocore_exceptions, error_code, error_message

        bx = botocore_exceptions()
        clock = time.perf_counter
        try:
            resp = self._client.invoke_endpoint_with_response_stream(
                **self.addressed, Body=body, ContentType="application/json", Accept="text/event-stream"
            )
        except bx.ClientError as exc:
            if error_code(exc) == "ModelError":
                status = int(exc.response.get("OriginalStatusCode") or 500)
                raise TargetHttpError(status, error_text(str(exc.response.get("OriginalMessage") or
                                                             error_message(exc)))) from None
            raise SageMakerCallError(error_code(exc) or "ClientError", error_message(exc)) from None
        stream = resp["Body"]
        streams.append(stream)
        if cancel.is_set():
            stream.close()
            return
        tally = ChunkTally(rec)
        try:
            for part in payload_parts(stream):  # peagle's event-stream reader: twice botocore's frame rate
                if cancel.is_set():
                    return
                tally.feed(part, clock())
                if answer is not None:
                    answer += part
        except StreamFailure as exc:
            raise StreamError(exc.message, exc.kind) from None
        except Exception:
            if cancel.is_set():  # the stream was closed under us: the request was cancelled
                return
            raise
        finally:
            stream.close()
        tally.finish(clock())
