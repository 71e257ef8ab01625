"""A stand-in for vLLM's OpenAI server on loopback: /ping, /invocations, /v1/chat/completions.

For invoke tests and for users who want to try `peagle invoke` without a GPU. Streams vLLM-format
SSE chunks (see `streaming.chat_sse`); `mode` injects failures: "error" (HTTP 500 with a vLLM-style
error body), "stall" (stop sending mid-stream for `stall_s`), "truncate" (close without [DONE]).

    with FakeVllm(tokens=["a", "b"]) as server:
        PeagleClient(server.url).chat(...)
"""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from .streaming import chat_json, chat_sse


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 1024  # many connections at once must be accepted, not dropped


class FakeVllm:
    def __init__(self, tokens: list[str] | None = None, *, mode: str = "ok", stall_s: float = 5.0):
        self.tokens = tokens or ["def", " quick", "sort", "(xs", "):", " ✓"]
        self.mode = mode
        self.stall_s = stall_s
        self.requests: list[dict[str, Any]] = []
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        assert self._server is not None, "start the server first"
        return f"http://127.0.0.1:{self._server.server_port}"

    def __enter__(self) -> FakeVllm:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.0"  # one response per connection, body ends at close

            def log_message(self, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                if self.path == "/ping":
                    self._send(200, b"", "text/plain")
                else:
                    self._send(404, b'{"error": {"message": "not found"}}')

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")
                fake.requests.append({"path": self.path, "body": body})
                if self.path not in ("/invocations", "/v1/chat/completions"):
                    self._send(404, b'{"error": {"message": "not found"}}')
                    return
                if fake.mode == "error":
                    self._send(500, json.dumps({"object": "error", "message": "CUDA out of memory",
                                                "type": "InternalServerError", "code": 500}).encode())
                    return
                if not body.get("stream"):
                    self._send(200, chat_json(fake.tokens))
                    return
                truncated = fake.mode == "truncate"
                sse = chat_sse(fake.tokens, finish_reason=None if truncated else "stop", done=not truncated,
                               usage=not truncated and bool((body.get("stream_options") or {}).get("include_usage")))
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.end_headers()
                half = len(sse) // 2
                self.wfile.write(sse[:half])
                self.wfile.flush()
                if fake.mode == "stall":
                    time.sleep(fake.stall_s)
                self.wfile.write(sse[half:])

            def _send(self, status: int, payload: bytes, content_type: str = "application/json") -> None:
                self.send_response(status)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

        self._server = _Server(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
        if self._thread is not None:
            self._thread.join(10)
