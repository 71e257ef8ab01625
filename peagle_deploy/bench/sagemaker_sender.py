"""The load generator's transport for a SageMaker endpoint: InvokeEndpointWithResponseStream.

botocore's client is synchronous, so each request runs in a worker thread (one per request in
flight); botocore parses the AWS event stream, and the PayloadPart bytes (SSE split at arbitrary
boundaries) go through the same SseTokenCounter as the HTTP path, timestamped as they arrive.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from ..runtime.eventstream import StreamFailure, payload_parts
from .http_sender import HttpStatusError, SseTokenCounter, StreamError
from .loadgen import Messages, RequestRecord


class SageMakerChatSender:
    def __init__(
        self,
        session: Any,
        endpoint: str,
        *,
        max_tokens: int = 256,
        temperature: float = 0.0,
        timeout: float = 600.0,
        max_in_flight: int = 128,
    ):
        self.session = session
        self.endpoint = endpoint
        self.max_tokens = max_tokens
        self.temperature = temperature
        self.timeout = timeout
        self.max_in_flight = max_in_flight
        self._client: Any = None
        self._pool: ThreadPoolExecutor | None = None

    def body(self, messages: Messages) -> bytes:
        return json.dumps(
            {
                "messages": messages,
                "max_tokens": self.max_tokens,
                "temperature": self.temperature,
                "stream": True,
                "stream_options": {"include_usage": True},
            }
        ).encode()

    async def __aenter__(self) -> SageMakerChatSender:
        self._client = self.session.client(
            "sagemaker-runtime", max_pool_connections=self.max_in_flight + 8, read_timeout=self.timeout
        )
        self._pool = ThreadPoolExecutor(max_workers=self.max_in_flight + 8, thread_name_prefix="peagle-bench")
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)

    async def __call__(self, messages: Messages, rec: RequestRecord) -> None:
        cancel = threading.Event()
        loop = asyncio.get_running_loop()
        try:
            await loop.run_in_executor(self._pool, self._blocking, self.body(messages), rec, cancel)
        except asyncio.CancelledError:
            cancel.set()
            raise

    def _blocking(self, body: bytes, rec: RequestRecord, cancel: threading.Event) -> None:
        import botocore.exceptions

        clock = time.perf_counter
        try:
            resp = self._client.invoke_endpoint_with_response_stream(
                EndpointName=self.endpoint, Body=body, ContentType="application/json", Accept="text/event-stream"
            )
        except botocore.exceptions.ClientError as exc:
            meta = exc.response.get("ResponseMetadata", {})
            raise HttpStatusError(
                int(meta.get("HTTPStatusCode") or 500), str(exc.response.get("Error", {}).get("Code", ""))
            ) from None
        stream = resp["Body"]
        counter = SseTokenCounter(rec)
        try:
            for part in payload_parts(stream):  # peagle's event-stream reader: twice botocore's frame rate
                if cancel.is_set():
                    return
                counter.feed(part, clock())
        except StreamFailure as exc:
            raise StreamError({"error": {"code": exc.kind, "message": exc.message}}) from None
        finally:
            stream.close()
        counter.finish()
