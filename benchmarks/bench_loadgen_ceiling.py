"""The load generator's own ceiling: how many output tokens/s `peagle bench` measures accurately.

A fast local server (peagle_deploy.bench.paced_server: TTFT 0, thousands of tokens/s per stream,
vLLM-shaped chunks) runs in its own process pinned to CPU 0; this process (the client) is pinned to
CPU 1. In the same
run, at the same concurrency, it measures:

1. `peagle bench`'s load generator (bench.loadgen.run_level + bench.http_sender.HttpChatSender);
2. a minimal raw-asyncio client that only counts SSE `data:` lines (no JSON, no timestamps).

and checks the targets of issue 6: >= 100,000 output tokens/s at concurrency 128, >= 0.6x the
minimal client, mean requests in flight >= 98% of the concurrency, and the reported tokens/s within
3% of what the server says it sent in the same window (read from the server's own counter as the
window opens and closes).

    .venv/bin/python benchmarks/bench_loadgen_ceiling.py [--concurrency 128] [--duration 10]
        [--tokens-per-s 4000] [--max-batch 0] [--json]

(--max-batch 1 makes the server write one event per write, as a GPU server emits one token per step;
0 lets it write every event that is due together, so the schedule, not its CPU, sets the pace.)

Results are recorded in docs/performance.md, section "Load generator ceiling".
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import resource
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from peagle_deploy.testing.streaming import event_frame  # noqa: E402 - after the path set-up

TARGETS = {"otps": 100_000.0, "vs_minimal": 0.6, "held": 0.98, "server_agreement": 0.03}


def pin(cpu: int) -> None:
    if hasattr(os, "sched_setaffinity") and (os.cpu_count() or 1) > cpu:
        os.sched_setaffinity(0, {cpu})


def start_server(tokens_per_s: float, n_tokens: int, max_batch: int) -> tuple[subprocess.Popen, int]:
    """The paced server (peagle_deploy.bench.paced_server) in its own process, pinned to CPU 0."""
    code = (
        "import os, sys\n"
        "if hasattr(os, 'sched_setaffinity') and (os.cpu_count() or 1) > 1: os.sched_setaffinity(0, {0})\n"
        "from peagle_deploy.bench.paced_server import main\n"
        "sys.exit(main(sys.argv[1:]))\n"
    )
    args = [
        sys.executable,
        "-c",
        code,
        "--port",
        "0",
        "--ttft",
        "0",
        "--tokens-per-s",
        str(tokens_per_s),
        "--tokens",
        str(n_tokens),
        "--max-batch",
        str(max_batch),
    ]
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, text=True, cwd=ROOT)
    line = proc.stdout.readline() if proc.stdout else ""
    if not line.startswith("PORT "):
        proc.kill()
        raise SystemExit(f"the server did not start: {line!r}")
    return proc, int(line.split()[1])


async def server_tokens(port: int) -> float:
    """The server's own count of tokens sent (vllm:generation_tokens_total on its /metrics)."""
    try:
        from peagle_deploy.bench.prometheus import scrape_async
    except ImportError:  # before the acceptance split (to measure an older tree the same way)
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

    cpu: dict[str, float] = {}

    def on_window(edge: str) -> None:
        cpu[edge] = time.process_time()
        edges[edge] = asyncio.get_running_loop().create_task(server_tokens(port))

    async with HttpChatSender(f"http://127.0.0.1:{port}/invocations", max_tokens=max_tokens) as sender:
        m = await run_level(sender, prompts, concurrency, warmup=concurrency, duration=duration, on_window=on_window)
    sent = (await edges["close"]) - (await edges["open"])
    return {
        "output_tokens_per_s": m.output_tokens_per_s,
        "output_tokens": m.output_tokens,
        "window_s": m.window_s,
        "mean_in_flight": m.mean_in_flight,
        "concurrency_held": m.concurrency_held,
        "errors": m.errors,
        "completed": m.completed,
        "server_sent_in_window": sent,
        "server_tokens_per_s": sent / m.window_s,
        "ttft_ms_mean": m.ttft_ms.mean,
        "itl_ms_mean": m.itl_ms.mean,
        "client_cpu": getattr(m, "client_cpu", None),
        "loop_lag_ms_mean": getattr(getattr(m, "loop_lag_ms", None), "mean", None),
        "max_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "cpu_us_per_token": (cpu["close"] - cpu["open"]) / max(m.output_tokens, 1) * 1e6,
    }


async def run_minimal(port: int, concurrency: int, duration: float, max_tokens: int) -> dict:
    """Raw asyncio streams, HTTP/1.1 keep-alive; counts `data: ` lines, less the three per response that
    carry no token in the paced server's format (role chunk, usage chunk, [DONE]; the finish chunk has
    empty content and is counted neither here nor by peagle, so: less 4)."""
    body = json.dumps(
        {"messages": [{"role": "user", "content": "Write a long story."}], "max_tokens": max_tokens, "stream": True}
    ).encode()
    request = (
        b"POST /invocations HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        b"Content-Length: %d\r\n\r\n%s" % (len(body), body)
    )
    counts = {"lines": 0, "done": 0}
    cpu0 = time.process_time()
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
    lines = counts["lines"] - 4 * counts["done"]  # role, finish, usage, [DONE] per completed response
    return {"data_lines": lines, "elapsed_s": elapsed, "data_lines_per_s": lines / elapsed,
            "cpu_us_per_token": (time.process_time() - cpu0) / max(lines, 1) * 1e6}


def run_sagemaker_frames(concurrency: int, duration: float, n_tokens: int) -> dict:
    """The SageMaker transport's own ceiling: botocore (fake credentials, no network: a before-send
    hook answers every InvokeEndpointWithResponseStream with pre-built frames, one token per frame)."""
    os.environ.update(AWS_ACCESS_KEY_ID="testing", AWS_SECRET_ACCESS_KEY="testing", AWS_EC2_METADATA_DISABLED="true")
    from botocore.awsrequest import AWSResponse

    from peagle_deploy.aws import AwsSession
    from peagle_deploy.bench.loadgen import run_level
    from peagle_deploy.bench.sagemaker_sender import SageMakerChatSender

    token = (b'data: {"id":"c","object":"chat.completion.chunk","created":0,"model":"m","choices":[{"index":0,'
             b'"delta":{"content":" tok"},"logprobs":null,"finish_reason":null}]}\n\n')
    tail = (b'data: {"choices":[],"usage":{"prompt_tokens":1,"completion_tokens":%d,"total_tokens":9}}\n\n'
            b"data: [DONE]\n\n" % n_tokens)
    frames = [event_frame(token)] * n_tokens + [event_frame(tail)]

    class Raw:
        def stream(self, **_):
            yield from frames

        def close(self):
            pass

    def answer(request, **_):
        return AWSResponse(request.url, 200, {"Content-Type": "application/vnd.amazon.eventstream"}, Raw())

    session = AwsSession("us-east-1")
    client = session.client("sagemaker-runtime", max_pool_connections=concurrency + 8, read_timeout=600)
    client.meta.events.register("before-send.sagemaker-runtime.InvokeEndpointWithResponseStream", answer)

    async def go():
        async with SageMakerChatSender(session, "bench", max_in_flight=concurrency) as sender:
            sender._client = client  # the hooked client (same configuration as the sender's own)
            return await run_level(sender, [[{"role": "user", "content": "x"}]], concurrency, warmup=concurrency,
                                   duration=duration)

    m = asyncio.run(go())
    return {"output_tokens_per_s": m.output_tokens_per_s, "concurrency_held": m.concurrency_held,
            "errors": m.errors}


def machine() -> dict:
    import aiohttp

    cpu = ""
    try:
        cpu = next(
            ln.split(":", 1)[1].strip()
            for ln in Path("/proc/cpuinfo").read_text().splitlines()
            if ln.startswith("model name")
        )
    except (OSError, StopIteration):
        pass
    return {
        "cpus": os.cpu_count(),
        "cpu_model": cpu,
        "load_avg_1m_before": os.getloadavg()[0],
        "python": platform.python_version(),
        "aiohttp": aiohttp.__version__,
        "platform": platform.platform(),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--concurrency", type=int, default=128)
    parser.add_argument("--duration", type=float, default=10.0)
    parser.add_argument("--tokens-per-s", type=float, default=4000.0, help="per stream, on the server")
    parser.add_argument("--tokens", type=int, default=2000, help="output tokens per request")
    parser.add_argument("--max-batch", type=int, default=0, help="server: events per write (0: all due)")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--sagemaker-frames", action="store_true",
                        help="instead: the SageMaker transport's ceiling (botocore event-stream decoding, no network)")
    args = parser.parse_args()
    if args.sagemaker_frames:
        pin(1)
        sm = run_sagemaker_frames(args.concurrency, args.duration, args.tokens)
        print(json.dumps(sm, indent=2) if args.json else
              f"SageMaker transport: {sm['output_tokens_per_s']:,.0f} tokens/s at concurrency {args.concurrency}, "
              f"held {sm['concurrency_held']:.1%}, errors {sm['errors']}")
        return 0

    info = machine()
    proc, port = start_server(args.tokens_per_s, args.tokens, args.max_batch)
    pin(1)
    try:
        minimal = asyncio.run(run_minimal(port, args.concurrency, args.duration, args.tokens))
        loadgen = asyncio.run(run_loadgen(port, args.concurrency, args.duration, args.tokens))
    finally:
        proc.terminate()
        proc.wait(timeout=10)
    ratio = loadgen["output_tokens_per_s"] / minimal["data_lines_per_s"]
    efficiency = minimal["cpu_us_per_token"] / loadgen["cpu_us_per_token"]
    agreement = abs(loadgen["output_tokens_per_s"] - loadgen["server_tokens_per_s"]) / loadgen["server_tokens_per_s"]
    checks = {
        "otps >= 100,000": loadgen["output_tokens_per_s"] >= TARGETS["otps"],
        "loadgen / minimal >= 0.6": ratio >= TARGETS["vs_minimal"],
        "held >= 98%": loadgen["concurrency_held"] >= TARGETS["held"],
        "within 3% of server": agreement <= TARGETS["server_agreement"],
        "no errors": loadgen["errors"] == 0,
    }
    report = {
        "settings": vars(args),
        "machine": info,
        "loadgen": loadgen,
        "minimal": minimal,
        "loadgen_vs_minimal": ratio,
        "cpu_efficiency_vs_minimal": efficiency,
        "server_disagreement": agreement,
        "checks": checks,
    }
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        print(
            f"machine: {info['cpus']} CPUs ({info['cpu_model']}), load {info['load_avg_1m_before']:.2f}, "
            f"Python {info['python']}, aiohttp {info['aiohttp']}"
        )
        print(f"minimal client : {minimal['data_lines_per_s']:>10,.0f} tokens/s, "
              f"{minimal['cpu_us_per_token']:.2f} us CPU per token")
        print(
            f"peagle loadgen : {loadgen['output_tokens_per_s']:>10,.0f} tokens/s ({ratio:.2f}x minimal), "
            f"held {loadgen['concurrency_held']:.1%}, server sent {loadgen['server_tokens_per_s']:,.0f}/s "
            f"in the window ({agreement:.2%} apart), errors {loadgen['errors']}"
        )
        cpu, lag = loadgen["client_cpu"], loadgen["loop_lag_ms_mean"]
        print(f"  {loadgen['cpu_us_per_token']:.2f} us CPU per token "
              f"({minimal['cpu_us_per_token'] / loadgen['cpu_us_per_token']:.2f}x the minimal client's efficiency: "
              f"its throughput ratio on an idle core)")
        print(f"  client CPU {'n/a' if cpu is None else f'{cpu:.0%}'} of a core, event-loop lag "
              f"{'n/a' if lag is None else f'{lag:.1f} ms'}, max RSS {loadgen['max_rss_mib']:.0f} MiB")
        for name, ok in checks.items():
            print(f"  {'PASS' if ok else 'FAIL'}  {name}")
    return 0 if all(checks.values()) else 1


if __name__ == "__main__":
    raise SystemExit(main())
