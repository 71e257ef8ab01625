"""A stand-in for the `vllm` executable, for fast tests of what runs the container (`peagle local`, the
emulator's container backend) where real vLLM's 30-80 s start would dominate.

    python -m peagle_deploy.testing.vllm_stand_in serve MODEL --port P [--speculative-config JSON] [...]

It prints vLLM 0.32's start-up lines (same formats: logo with version, non-default args, engine config,
runner choice, a DFlash drafter's architecture), serves /ping, /health, /invocations, /v1/chat/completions (greedy "!" tokens, as the
tiny models answer) and /metrics, logs a `SpecDecoding metrics` line per request with acceptance 1.0,
and stops on SIGTERM. It listens on `--host` (default 127.0.0.1; the contract tier's image passes 0.0.0.0, the
SageMaker container contract) and `--port`. Knobs (environment):
  PEAGLE_STAND_IN_VERSION   version it claims (default 0.32.0)
  PEAGLE_STAND_IN_RUNNER    v2 (default) | parallel-fallback (vLLM 0.25.1's line) | triton (the CPU build's)
  PEAGLE_STAND_IN_FAIL      exit 1 during start-up with this exception line after vLLM's wrapper traceback
  PEAGLE_STAND_IN_DELAY_S   seconds before /ping answers (default 0)
`install(bin_dir)` writes a `vllm` shim that runs it, to put first on PATH.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from .streaming import chat_json, chat_sse, send_reply

RUNNER_LINES = {
    "v2": ("INFO", "Using V2 Model Runner"),
    "parallel-fallback": ("WARNING", "Model Runner V2 does not yet support parallel drafting for EAGLE speculative "
                                     "decoding; using the V1 model runner instead."),
    "triton": ("WARNING", "Model Runner V2 requires Triton; using the V1 model runner instead."),
}


def install(bin_dir: Path) -> Path:
    """Write `bin_dir/vllm`, a shim that execs this stand-in with this Python."""
    bin_dir.mkdir(parents=True, exist_ok=True)
    shim = bin_dir / "vllm"
    shim.write_text(f"#!/bin/sh\nexec '{sys.executable}' -m peagle_deploy.testing.vllm_stand_in \"$@\"\n")
    shim.chmod(0o755)
    return shim


def _line(level: str, where: str, message: str) -> str:
    stamp = time.strftime("%m-%d %H:%M:%S")
    return f"(APIServer pid={os.getpid()}) {level} {stamp} [{where}] {message}"


def _log(level: str, where: str, message: str) -> None:
    sys.stdout.write(_line(level, where, message) + "\n")
    sys.stdout.flush()


def _parse(argv: list[str]) -> tuple[str, str, int, dict[str, Any] | None]:
    if len(argv) < 2 or argv[0] != "serve":
        sys.stderr.write("usage: vllm serve MODEL [--host H] [--port P] ...\n")
        raise SystemExit(2)
    model, host, port, spec = argv[1], "127.0.0.1", 8000, None
    for i, arg in enumerate(argv):
        if arg == "--port":
            port = int(argv[i + 1])
        elif arg == "--host":
            host = argv[i + 1]
        elif arg == "--speculative-config":
            spec = json.loads(argv[i + 1])
    return model, host, port, spec


def startup_lines(model: str, port: int = 8000, spec: dict[str, Any] | None = None,
                  version: str | None = None) -> list[str]:
    """The start-up lines it prints before serving (vLLM's formats: logo with version, non-default args, runner
    choice, engine config), for a harness that stands in for the container's output (the contract tier's
    emulated account writes them to a component's log group, as SageMaker does with a real container's)."""
    version = version or os.environ.get("PEAGLE_STAND_IN_VERSION", "0.32.0")
    args = {"model_tag": model, "port": port, "model": model, **({"speculative_config": spec} if spec else {})}
    level, runner_line = RUNNER_LINES[os.environ.get("PEAGLE_STAND_IN_RUNNER", "v2")]
    spec_repr = "None" if not spec else (f"SpeculativeConfig(method={spec.get('method')!r}, "
                                         f"model={spec.get('model')!r}, num_spec_tokens={spec.get('num_speculative_tokens')})")
    # a DFlash server logs its drafter's architecture (a line only it logs)
    dflash = [_line("INFO", "model.py:733", "Resolved architecture: DFlashDraftModel")] if spec and spec.get(
        "method") == "dflash" else []
    return [_line("INFO", "api_utils.py:347", f" ▄▄ ▄█ █     █     █ ▀▄▀ █  version {version}"),
            _line("INFO", "api_utils.py:286", f"non-default args: {args!r}"),
            *dflash,
            _line(level, "vllm.py:725", runner_line),
            _line("INFO", "core.py:133", f"Initializing a V1 LLM engine (v{version}) with config: model={model!r}, "
                                         f"speculative_config={spec_repr}, tokenizer={model!r}")]


class _Counters:
    def __init__(self, k: int | None):
        self.k = k
        self.drafts = self.accepted = 0
        self.lock = threading.Lock()

    def record(self, tokens: int) -> None:
        if not self.k:
            return
        drafts = max(1, -(-(tokens - 1) // (self.k + 1)))
        with self.lock:
            self.drafts += drafts
            self.accepted += drafts * self.k
        rates = ", ".join(["1.000"] * self.k)
        _log("INFO", "metrics.py:120",
             f"SpecDecoding metrics: Mean acceptance length: {self.k + 1:.2f}, Accepted throughput: 1.00 tokens/s, "
             f"Drafted throughput: 1.00 tokens/s, Accepted: {drafts * self.k} tokens, Drafted: {drafts * self.k} "
             f"tokens, Per-position acceptance rate: {rates}, Avg Draft acceptance rate: 100.0%")

    def prometheus(self) -> bytes:
        if not self.k:
            return b"# HELP vllm:num_requests_running Number of requests.\nvllm:num_requests_running 0.0\n"
        labels = 'engine="0",model_name="stand-in"'
        lines = [f"vllm:spec_decode_num_drafts_total{{{labels}}} {self.drafts}.0",
                 f"vllm:spec_decode_num_draft_tokens_total{{{labels}}} {self.drafts * self.k}.0",
                 f"vllm:spec_decode_num_accepted_tokens_total{{{labels}}} {self.accepted}.0"]
        lines += [f'vllm:spec_decode_num_accepted_tokens_per_pos_total{{{labels},position="{p}"}} {self.drafts}.0'
                  for p in range(self.k)]
        return ("\n".join(lines) + "\n").encode()


def main(argv: list[str] | None = None) -> int:
    model, host, port, spec = _parse(sys.argv[1:] if argv is None else argv)
    for line in startup_lines(model, port, spec):
        sys.stdout.write(line + "\n")
    sys.stdout.flush()
    failure = os.environ.get("PEAGLE_STAND_IN_FAIL")
    if failure:
        sys.stdout.write("Traceback (most recent call last):\n  File \"vllm/v1/engine/core.py\", line 1, in run\n"
                         f"{failure}\nRuntimeError: Engine core initialization failed. See root cause above. "
                         "Failed core proc(s): {}\n")
        sys.stdout.flush()
        return 1
    time.sleep(float(os.environ.get("PEAGLE_STAND_IN_DELAY_S", "0")))
    counters = _Counters(spec.get("num_speculative_tokens") if spec else None)

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.0"

        def log_message(self, *args: Any) -> None:
            pass

        def do_GET(self) -> None:
            if self.path in ("/ping", "/health"):
                self._send(200, b"", "text/plain")
            elif self.path == "/metrics":
                self._send(200, counters.prometheus(), "text/plain; version=0.0.4")
            else:
                self._send(404, b'{"error": {"message": "not found"}}')

        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")
            if self.path not in ("/invocations", "/v1/chat/completions"):
                self._send(404, b'{"error": {"message": "not found"}}')
                return
            tokens = ["!"] * int(body.get("max_tokens") or 16)
            counters.record(len(tokens))
            if not body.get("stream"):
                self._send(200, chat_json(tokens, model=model, logprobs=bool(body.get("logprobs"))))
                return
            usage = bool((body.get("stream_options") or {}).get("include_usage"))
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.end_headers()
            self.wfile.write(chat_sse(tokens, model=model, usage=usage))

        _send = send_reply

    server = ThreadingHTTPServer((host, port), Handler)
    server.daemon_threads = True

    def stop(signum: int, frame: Any) -> None:
        _log("INFO", "launcher.py:110", "Shutting down FastAPI HTTP server.")
        threading.Thread(target=server.shutdown, daemon=True).start()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    _log("INFO", "launcher.py:44", f"Starting vLLM server on http://{host}:{port}")
    server.serve_forever()
    server.server_close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
