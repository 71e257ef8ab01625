"""A stand-in for vLLM's OpenAI server on loopback: /ping, /health, /metrics, /invocations, /v1/chat/completions.

For invoke, bench and metrics tests that need controlled timing or faults (real behaviour is tested
against real vLLM, tests/real_vllm). Streams vLLM-format SSE chunks (`streaming.chat_sse`); a token
may be a whole delta (reasoning, tool calls). `mode` injects failures: "error" (HTTP 500 with a
vLLM-style error body), "stall" (stop sending mid-stream for `stall_s`), "truncate" (close without
[DONE]), "inband_error" (an `{"object": "error"}` event after the first chunk). `/metrics` serves
vLLM's spec-decode counters, growing by `accepted_per_request` per request served (none: speculation off):
4 drafts per request, `accepted_per_request[i]` of them accepting position i. `acceptance_cycle` gives each
request its own such pattern instead (request n gets pattern n mod its length). With `per_request_metrics`,
as vLLM 0.29+ with --per-request-spec-decode-metrics: each answer (n == 1) carries the request's own
`metrics.speculative_decoding`, in a stream in the usage chunk, consistent with the counters.

    with FakeVllm(tokens=["a", "b"]) as server:
        PeagleClient(server.url).chat(...)
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from .server_threads import ClosingThreadingMixIn
from .streaming import chat_json, chat_sse, send_reply, spec_decoding_metrics

_PATHS = ("/invocations", "/v1/chat/completions")


class _Server(ClosingThreadingMixIn, ThreadingHTTPServer):
    request_queue_size = 1024  # many connections at once must be accepted, not dropped


class FakeVllm:
    def __init__(self, tokens: list[str | dict] | None = None, *, mode: str = "ok", stall_s: float = 5.0,
                 gap_s: float = 0.0, usage: bool = True, accepted_per_request: tuple[int, ...] = (3, 2, 1),
                 answer: Callable[[dict[str, Any]], list[str]] | None = None, per_request_metrics: bool = False,
                 acceptance_cycle: list[tuple[int, ...]] | None = None):
        self.tokens = tokens or ["def", " quick", "sort", "(xs", "):", " ✓"]
        self.answer = answer  # request body -> the tokens of a non-streamed answer (default: self.tokens)
        self.mode = mode
        self.stall_s = stall_s
        self.gap_s = gap_s  # pause before each token chunk (a lower bound on the gaps a client sees)
        self.usage = usage
        self.accepted_per_request = accepted_per_request  # per draft position; 4 draft tokens per draft
        self.acceptance_cycle = acceptance_cycle or [accepted_per_request]
        self.per_request_metrics = per_request_metrics
        self.requests: list[dict[str, Any]] = []
        self.gets: list[str] = []
        self.authorizations: list[tuple[str, str | None]] = []  # (path, Authorization header) of every request
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None
        self._closing = threading.Event()  # set on exit: a stalled or paced answer ends with the server

    @property
    def url(self) -> str:
        assert self._server is not None, "start the server first"
        return f"http://127.0.0.1:{self._server.server_port}"

    DRAFTS_PER_REQUEST = 4

    def pattern(self, n: int) -> tuple[int, ...]:
        """Request n's accepted drafts per position (of DRAFTS_PER_REQUEST drafts)."""
        return self.acceptance_cycle[n % len(self.acceptance_cycle)]

    def spec_decoding(self, n: int) -> dict[str, Any] | None:
        """Request n's metrics.speculative_decoding, as vLLM computes it from the same steps (None: off)."""
        accepted = self.pattern(n)
        if not accepted:
            return None
        drafts = self.DRAFTS_PER_REQUEST
        bounds = [drafts, *accepted, 0]  # drafts that accepted at least j tokens, j = 0..K+1
        return spec_decoding_metrics([bounds[j] - bounds[j + 1] for j in range(len(accepted) + 1)])

    def metrics_text(self) -> str:
        """vLLM's page: a gauge always; the spec-decode counters (one per-position series per draft position,
        present from the start) only with speculation on (`accepted_per_request` empty: off)."""
        n = len(self.requests)
        k = len(self.accepted_per_request)
        gauge = 'vllm:num_requests_running{engine="0",model_name="fake-model"} 0.0'
        if not k:
            return gauge + "\n"
        per_position = [0.0] * k
        for i in range(n):
            for position, accepted in enumerate(self.pattern(i)):
                per_position[position] += accepted
        drafts = float(self.DRAFTS_PER_REQUEST * n)
        lines = [gauge, f"vllm:spec_decode_num_drafts_total{{engine=\"0\"}} {drafts}",
                 f"vllm:spec_decode_num_draft_tokens_total{{engine=\"0\"}} {drafts * k}",
                 f"vllm:spec_decode_num_accepted_tokens_total{{engine=\"0\"}} {sum(per_position)}"]
        lines += [f"vllm:spec_decode_num_accepted_tokens_per_pos_total{{engine=\"0\",position=\"{i}\"}} {a}"
                  for i, a in enumerate(per_position)]
        return "\n".join(lines) + "\n"

    def __enter__(self) -> FakeVllm:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.0"  # one response per connection, body ends at close

            def log_message(self, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                fake.gets.append(self.path)
                fake.authorizations.append((self.path, self.headers.get("Authorization")))
                if self.path in ("/ping", "/health"):
                    self._send(200, b"", "text/plain")
                elif self.path == "/metrics":
                    self._send(200, fake.metrics_text().encode(), "text/plain; version=0.0.4")
                elif self.path == "/v1/models":
                    self._send(200, b'{"object": "list", "data": [{"id": "fake-model", "object": "model"}]}')
                else:
                    self._send(404, b'{"error": {"message": "not found"}}')

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")
                number = len(fake.requests)
                fake.requests.append({"path": self.path, "body": body})
                spec = fake.spec_decoding(number) if fake.per_request_metrics and (body.get("n") or 1) == 1 else None
                fake.authorizations.append((self.path, self.headers.get("Authorization")))
                if self.path not in _PATHS:
                    self._send(404, b'{"error": {"message": "not found"}}')
                    return
                if fake.mode == "error":
                    self._send(500, json.dumps({"object": "error", "message": "CUDA out of memory",
                                                "type": "InternalServerError", "code": 500}).encode())
                    return
                if not body.get("stream"):
                    tokens = fake.answer(body) if fake.answer is not None else \
                        [t if isinstance(t, str) else "" for t in fake.tokens]
                    payload = chat_json(tokens, logprobs=bool(body.get("logprobs")), spec_decoding=spec)
                    if fake.mode != "stall":
                        self._send(200, payload)
                        return
                    self.send_response(200)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(payload)))
                    self.end_headers()
                    for byte in payload:  # trickle: never idle for long, never done in time
                        self.wfile.write(bytes([byte]))
                        self.wfile.flush()
                        if fake._closing.wait(fake.stall_s / len(payload)):
                            return
                    return
                truncated = fake.mode == "truncate"
                include_usage = bool((body.get("stream_options") or {}).get("include_usage"))
                sse = chat_sse(fake.tokens, finish_reason=None if truncated else "stop", done=not truncated,
                               usage=fake.usage and not truncated and include_usage, spec_decoding=spec)
                events = [e + b"\n\n" for e in sse.split(b"\n\n") if e]
                if fake.mode == "inband_error":
                    error = {"object": "error", "message": "The model ran out of KV cache", "code": 500}
                    events = events[:2] + [b"data: " + json.dumps(error).encode() + b"\n\n"]
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.end_headers()
                if fake.mode == "stall" or not fake.gap_s:
                    sse = b"".join(events)
                    half = len(sse) // 2
                    self.wfile.write(sse[:half])
                    self.wfile.flush()
                    if fake.mode == "stall" and fake._closing.wait(fake.stall_s):
                        return  # the server stops: the stall ends with it, not JOIN_S later
                    self.wfile.write(sse[half:])
                    return
                for i, event in enumerate(events):
                    if 0 < i <= len(fake.tokens) and fake._closing.wait(fake.gap_s):
                        return
                    self.wfile.write(event)
                    self.wfile.flush()

            _send = send_reply

        self._server = _Server(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._closing.set()
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
        if self._thread is not None:
            self._thread.join(10)
