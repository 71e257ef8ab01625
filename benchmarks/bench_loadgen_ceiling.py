"""The load generator's own ceiling: how many output tokens/s `peagle bench` measures accurately.

A fast local server (peagle_deploy.testing.fake_vllm: TTFT 0, thousands of tokens/s per stream)
runs in its own process pinned to CPU 0; this process (the client) is pinned to CPU 1. In the same
run, at the same concurrency, it measures:

1. `peagle bench`'s load generator (bench.loadgen.run_level + bench.http_sender.HttpChatSender);
2. a minimal raw-asyncio client that only counts SSE `data:` lines (no JSON, no timestamps).

and checks the targets of issue 6: >= 100,000 output tokens/s at concurrency 128, >= 0.6x the
minimal client, mean requests in flight >= 98% of the concurrency, and the reported tokens/s within
3% of what the server says it sent in the same window (read from the server's own counter as the
window opens and closes).

    .venv/bin/python benchmarks/bench_loadgen_ceiling.py [--concurrency 128] [--duration 10] [--json]

Results are recorded in docs/performance.md, section "Load generator ceiling".
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

TARGETS = {"otps": 100_000.0, "vs_minimal": 0.6, "held": 0.98, "server_agreement": 0.03}


def pin(cpu: int) -> None:
    if hasattr(os, "sched_setaffinity") and (os.cpu_count() or 1) > cpu:
        os.sched_setaffinity(0, {cpu})


def start_server(tokens_per_s: float, n_tokens: int) -> tuple[subprocess.Popen, int]:
    """fake_vllm in its own process on CPU 0; it prints its port on the first stdout line."""
    code = (
        "import os, sys\n"
        "if hasattr(os, 'sched_setaffinity') and (os.cpu_count() or 1) > 1: os.sched_setaffinity(0, {0})\n"
        "from peagle_deploy.testing.fake_vllm import main\n"
        "sys.exit(main(sys.argv[1:]))\n"
    )
    args = [sys.executable, "-c", code, "--port", "0", "--ttft", "0", "--tokens-per-s", str(tokens_per_s),
            "--tokens", str(n_tokens), "--print-port"]
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, text=True, cwd=ROOT)
    line = proc.stdout.readline() if proc.stdout else ""
    try:
        port = int(line.strip().split()[-1])
    except (ValueError, IndexError):
        proc.kill()
        raise SystemExit(f"the server did not print its port: {line!r}") from None
    return proc, port


async def server_tokens(port: int) -> float:
    """The server's own count of tokens sent (vllm:generation_tokens_total on its /metrics)."""
    from peagle_deploy.bench.acceptance import scrape_async

    counters = await scrape_async(f"http://127.0.0.1:{port}/metrics")
    if counters.generation_tokens is None:
        raise SystemExit("the server's /metrics has no vllm:generation_tokens_total")
    return counters.generation_tokens


async def run_loadgen(port: int, concurrency: int, duration: float, max_tokens: int) -> dict:
    from peagle_deploy.bench.http_sender import HttpChatSender
    from peagle_deploy.bench.loadgen import run_level

    prompts = [[{"role": "user", "content": "Write a long story."}]]
    edges: dict[str, asyncio.Task] = {}

    def on_window(edge: str) -> None:
        edges[edge] = asyncio.get_running_loop().create_task(server_tokens(port))

    async with HttpChatSender(f"http://127.0.0.1:{port}/invocations", max_tokens=max_tokens) as sender:
        m = await run_level(sender, prompts, concurrency, warmup=concurrency, duration=duration, on_window=on_window)
    sent = (await edges["close"]) - (await edges["open"])
    return {
        "output_tokens_per_s": m.output_tokens_per_s, "output_tokens": m.output_tokens, "window_s": m.window_s,
        "mean_in_flight": m.mean_in_flight, "concurrency_held": m.concurrency_held, "errors": m.errors,
        "completed": m.completed, "server_sent_in_window": sent, "server_tokens_per_s": sent / m.window_s,
        "ttft_ms_mean": m.ttft_ms.mean, "itl_ms_mean": m.itl_ms.mean,
    }


async def run_minimal(port: int, concurrency: int, duration: float, max_tokens: int) -> dict:
    """Raw asyncio streams, HTTP/1.1 keep-alive, counts `data: ` lines that are not [DONE]."""
    body = json.dumps({"messages": [{"role": "user", "content": "Write a long story."}], "max_tokens": max_tokens,
                       "stream": True}).encode()
    request = (b"POST /invocations HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
               b"Content-Length: %d\r\n\r\n%s" % (len(body), body))
    counts = {"lines": 0, "done": 0}
    t0 = time.perf_counter()
    stop = t0 + duration

    async def worker() -> None:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        try:
            while time.perf_counter() < stop:
                writer.write(request)
                tail = b""
                while True:
                    data = await reader.read(1 << 18)
                    if not data:
                        return
                    buf = tail + data
                    counts["lines"] += buf.count(b"data: ") - tail.count(b"data: ")
                    if buf.endswith(b"\r\n0\r\n\r\n"):
                        counts["done"] += 1
                        break
                    tail = buf[-8:]
        finally:
            writer.close()

    await asyncio.gather(*[worker() for _ in range(concurrency)])
    elapsed = time.perf_counter() - t0
    lines = counts["lines"] - counts["done"]  # every response ends with data: [DONE]
    return {"data_lines": lines, "elapsed_s": elapsed, "data_lines_per_s": lines / elapsed}


def machine() -> dict:
    import aiohttp

    cpu = ""
    try:
        cpu = next(ln.split(":", 1)[1].strip() for ln in Path("/proc/cpuinfo").read_text().splitlines()
                   if ln.startswith("model name"))
    except (OSError, StopIteration):
        pass
    return {"cpus": os.cpu_count(), "cpu_model": cpu, "load_avg_1m_before": os.getloadavg()[0],
            "python": platform.python_version(), "aiohttp": aiohttp.__version__, "platform": platform.platform()}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--concurrency", type=int, default=128)
    parser.add_argument("--duration", type=float, default=10.0)
    parser.add_argument("--tokens-per-s", type=float, default=4000.0, help="per stream, on the server")
    parser.add_argument("--tokens", type=int, default=2000, help="output tokens per request")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()

    info = machine()
    proc, port = start_server(args.tokens_per_s, args.tokens)
    pin(1)
    try:
        minimal = asyncio.run(run_minimal(port, args.concurrency, args.duration, args.tokens))
        loadgen = asyncio.run(run_loadgen(port, args.concurrency, args.duration, args.tokens))
    finally:
        proc.terminate()
        proc.wait(timeout=10)
    ratio = loadgen["output_tokens_per_s"] / minimal["data_lines_per_s"]
    agreement = abs(loadgen["output_tokens_per_s"] - loadgen["server_tokens_per_s"]) / loadgen["server_tokens_per_s"]
    checks = {
        "otps >= 100,000": loadgen["output_tokens_per_s"] >= TARGETS["otps"],
        "loadgen / minimal >= 0.6": ratio >= TARGETS["vs_minimal"],
        "held >= 98%": loadgen["concurrency_held"] >= TARGETS["held"],
        "within 3% of server": agreement <= TARGETS["server_agreement"],
        "no errors": loadgen["errors"] == 0,
    }
    report = {"settings": vars(args), "machine": info, "loadgen": loadgen, "minimal": minimal,
              "loadgen_vs_minimal": ratio, "server_disagreement": agreement, "checks": checks}
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        print(f"machine: {info['cpus']} CPUs ({info['cpu_model']}), load {info['load_avg_1m_before']:.2f}, "
              f"Python {info['python']}, aiohttp {info['aiohttp']}")
        print(f"minimal client : {minimal['data_lines_per_s']:>10,.0f} tokens/s")
        print(f"peagle loadgen : {loadgen['output_tokens_per_s']:>10,.0f} tokens/s ({ratio:.2f}x minimal), "
              f"held {loadgen['concurrency_held']:.1%}, server sent {loadgen['server_tokens_per_s']:,.0f}/s "
              f"in the window ({agreement:.2%} apart), errors {loadgen['errors']}")
        for name, ok in checks.items():
            print(f"  {'PASS' if ok else 'FAIL'}  {name}")
    return 0 if all(checks.values()) else 1


if __name__ == "__main__":
    raise SystemExit(main())
