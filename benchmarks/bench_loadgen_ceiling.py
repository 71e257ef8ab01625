"""The load generator's own ceiling: how many output tokens/s `peagle bench` measures accurately.

A fast local server (peagle_deploy.testing.paced_server: TTFT 0, thousands of tokens/s per stream,
vLLM-shaped chunks) runs in its own process pinned to CPU 0; this process (the client) is pinned to
CPU 1. In the same
run, at the same concurrency, it measures:

1. `peagle bench`'s load generator (bench.loadgen.run_level + bench.http_sender.HttpChatSender);
2. a minimal raw-asyncio client that only counts SSE `data:` lines (no JSON, no timestamps);
3. an aiohttp client that sends the same requests, reads the same streams and counts nothing (the
   transport's own cost: peagle's counting is what it pays on top of this one).

and checks the targets of issue 6: >= 100,000 output tokens/s at concurrency 128, >= 0.6x the
minimal client, mean requests in flight >= 98% of the concurrency, and the reported tokens/s within
3% of what the server says it sent in the same window (read from the server's own counter as the
window opens and closes).

    .venv/bin/python benchmarks/bench_loadgen_ceiling.py [--concurrency 128] [--duration 10]
        [--tokens-per-s 4000] [--max-batch 0] [--pairs 1] [--profile FILE] [--json]

CPU per token is each client's process time over its measured window divided by the tokens the server
says it sent in that window (its own counter, read at the window's edges), so the three are divided by
the same truth. Efficiency = another client's CPU per token / peagle's (1.0: peagle costs no more).
`--pairs N` runs the three clients N times in turn (the order rotating each round) and prints the median
and the range of the per-round ratios: on a shared machine only ratios measured in one round mean much.
`--profile FILE` writes a cProfile of peagle's client (pstats) for the last round. `--prototype` adds a
fourth client: peagle's load generator over benchmarks/proto_buffered_sender.py (asyncio BufferedProtocol
+ httptools; measured, not adopted: it has no TLS, proxies or aiohttp's error classes).

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
import statistics
import resource
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from peagle_deploy.testing.streaming import event_frame  # noqa: E402 - after the path set-up

TARGETS = {"otps": 100_000.0, "vs_minimal": 0.6, "held": 0.98, "server_agreement": 0.03, "vs_aiohttp": 0.95}


def pin(cpu: int) -> None:
    if hasattr(os, "sched_setaffinity") and (os.cpu_count() or 1) > cpu:
        os.sched_setaffinity(0, {cpu})


def start_server(tokens_per_s: float, n_tokens: int, max_batch: int) -> tuple[subprocess.Popen, int]:
    """The paced server (peagle_deploy.testing.paced_server) in its own process, pinned to CPU 0."""
    code = (
        "import os, sys\n"
        "if hasattr(os, 'sched_setaffinity') and (os.cpu_count() or 1) > 1: os.sched_setaffinity(0, {0})\n"
        "from peagle_deploy.testing.paced_server import main\n"
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


async def run_loadgen(port: int, concurrency: int, duration: float, max_tokens: int,
                      prototype: bool = False) -> dict:
    """peagle's load generator; with `prototype`, over benchmarks/proto_buffered_sender.py instead of aiohttp."""
    from peagle_deploy.bench.http_sender import HttpChatSender
    from peagle_deploy.bench.loadgen import run_level

    prompts = [[{"role": "user", "content": "Write a long story."}]]
    edges: dict[str, asyncio.Task] = {}

    cpu: dict[str, float] = {}

    def on_window(edge: str) -> None:
        cpu[edge] = time.process_time()
        edges[edge] = asyncio.get_running_loop().create_task(server_tokens(port))

    if prototype:
        sys.path.insert(0, str(Path(__file__).resolve().parent))
        from proto_buffered_sender import BufferedChatSender

        transport = BufferedChatSender("127.0.0.1", port, max_tokens=max_tokens)
    else:
        transport = HttpChatSender(f"http://127.0.0.1:{port}/invocations", max_tokens=max_tokens)
    async with transport as sender:
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
        "cpu_us_per_token": (cpu["close"] - cpu["open"]) / max(sent, 1) * 1e6,
        "cpu_us_per_counted_token": (cpu["close"] - cpu["open"]) / max(m.output_tokens, 1) * 1e6,
    }


class _Window:
    """A fixed window after a warm-up: process CPU and the server's token counter read at both edges."""

    def __init__(self, port: int, warmup_s: float, duration: float):
        self.port, self.warmup_s, self.duration = port, warmup_s, duration
        self.t0 = time.perf_counter()
        self.stop_at = self.t0 + warmup_s + duration

    async def measure(self) -> dict:
        await asyncio.sleep(self.warmup_s)
        cpu0, sent0, t0 = time.process_time(), await server_tokens(self.port), time.perf_counter()
        await asyncio.sleep(max(0.0, self.stop_at - time.perf_counter()))
        cpu1, t1 = time.process_time(), time.perf_counter()
        sent = await server_tokens(self.port) - sent0
        return {"window_s": t1 - t0, "server_sent_in_window": sent, "server_tokens_per_s": sent / (t1 - t0),
                "cpu_us_per_token": (cpu1 - cpu0) / max(sent, 1) * 1e6}


def _request_body(max_tokens: int) -> bytes:
    return json.dumps(
        {"messages": [{"role": "user", "content": "Write a long story."}], "max_tokens": max_tokens, "stream": True}
    ).encode()


async def run_minimal(port: int, concurrency: int, duration: float, max_tokens: int, warmup_s: float = 1.0) -> dict:
    """Raw asyncio streams, HTTP/1.1 keep-alive; counts `data: ` lines, less the three per response that
    carry no token in the paced server's format (role chunk, usage chunk, [DONE]; the finish chunk has
    empty content and is counted neither here nor by peagle, so: less 4)."""
    body = _request_body(max_tokens)
    request = (
        b"POST /invocations HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        b"Content-Length: %d\r\n\r\n%s" % (len(body), body)
    )
    counts = {"lines": 0, "done": 0}
    window = _Window(port, warmup_s, duration)
    cpu0 = time.process_time()
    t0 = time.perf_counter()

    async def worker() -> None:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        try:
            while time.perf_counter() < window.stop_at:
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

    measured, *_ = await asyncio.gather(window.measure(), *[worker() for _ in range(concurrency)])
    elapsed = time.perf_counter() - t0
    lines = counts["lines"] - 4 * counts["done"]  # role, finish, usage, [DONE] per completed response
    return {"data_lines": lines, "elapsed_s": elapsed, "data_lines_per_s": lines / elapsed,
            "cpu_us_per_line": (time.process_time() - cpu0) / max(lines, 1) * 1e6, **measured}


async def run_aiohttp_bare(port: int, concurrency: int, duration: float, max_tokens: int,
                           warmup_s: float = 1.0) -> dict:
    """aiohttp with the session, headers and body peagle's sender uses; it reads every stream to its end
    (`iter_any`, as peagle does) and counts nothing: what the transport alone costs."""
    import aiohttp

    body = _request_body(max_tokens)
    headers = {"Content-Type": "application/json", "Accept": "text/event-stream"}
    url = f"http://127.0.0.1:{port}/invocations"
    window = _Window(port, warmup_s, duration)
    reads = {"n": 0}

    async def worker(session) -> None:
        while time.perf_counter() < window.stop_at:
            async with session.post(url, data=body, headers=headers) as resp:
                async for _data in resp.content.iter_any():
                    reads["n"] += 1

    connector = aiohttp.TCPConnector(limit=0, force_close=False)
    async with aiohttp.ClientSession(connector=connector, timeout=aiohttp.ClientTimeout(total=600)) as session:
        measured, *_ = await asyncio.gather(window.measure(), *[worker(session) for _ in range(concurrency)])
    return {"reads": reads["n"], **measured}


def run_sagemaker_frames(concurrency: int, duration: float, n_tokens: int) -> dict:
    """The SageMaker transport's own ceiling: botocore (fake credentials, no network: a before-send
    hook answers every InvokeEndpointWithResponseStream with pre-built frames, one token per frame)."""
    os.environ.update(AWS_ACCESS_KEY_ID="testing", AWS_SECRET_ACCESS_KEY="testing", AWS_EC2_METADATA_DISABLED="true")
    from botocore.awsrequest import AWSResponse

    from peagle_deploy.aws import AwsSession
    from peagle_deploy.bench.loadgen import run_level
    from peagle_deploy.bench.sagemaker_sender import SageMakerChatSender
    from peagle_deploy.runtime.target_ref import parse_target

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
        async with SageMakerChatSender(session, parse_target("bench"), max_in_flight=concurrency) as sender:
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


def _spread(values: list[float]) -> dict:
    return {"median": statistics.median(values), "min": min(values), "max": max(values), "values": values}


def run_round(port: int, args: argparse.Namespace, order: list[str], profile: str | None) -> dict:
    """The three clients in `order`, one after the other, on the same server."""
    out: dict[str, dict] = {}
    for name in order:
        if name == "minimal":
            out[name] = asyncio.run(run_minimal(port, args.concurrency, args.duration, args.tokens))
        elif name == "aiohttp":
            out[name] = asyncio.run(run_aiohttp_bare(port, args.concurrency, args.duration, args.tokens))
        elif name == "prototype":
            out[name] = asyncio.run(run_loadgen(port, args.concurrency, args.duration, args.tokens, prototype=True))
        elif profile:
            import cProfile

            prof = cProfile.Profile()
            out[name] = prof.runcall(asyncio.run, run_loadgen(port, args.concurrency, args.duration, args.tokens))
            prof.dump_stats(profile)
        else:
            out[name] = asyncio.run(run_loadgen(port, args.concurrency, args.duration, args.tokens))
    loadgen, minimal, bare = out["loadgen"], out["minimal"], out["aiohttp"]
    out["ratios"] = {
        "loadgen_vs_minimal_tok_s": loadgen["output_tokens_per_s"] / minimal["data_lines_per_s"],
        "efficiency_vs_minimal": minimal["cpu_us_per_token"] / loadgen["cpu_us_per_token"],
        "efficiency_vs_aiohttp": bare["cpu_us_per_token"] / loadgen["cpu_us_per_token"],
        "aiohttp_vs_minimal": minimal["cpu_us_per_token"] / bare["cpu_us_per_token"],
    }
    if "prototype" in out:
        out["ratios"]["prototype_efficiency_vs_minimal"] = minimal["cpu_us_per_token"] / out["prototype"]["cpu_us_per_token"]
    out["order"] = order
    out["load_avg_1m"] = os.getloadavg()[0]
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--concurrency", type=int, default=128)
    parser.add_argument("--duration", type=float, default=10.0)
    parser.add_argument("--tokens-per-s", type=float, default=4000.0, help="per stream, on the server")
    parser.add_argument("--tokens", type=int, default=2000, help="output tokens per request")
    parser.add_argument("--max-batch", type=int, default=0, help="server: events per write (0: all due)")
    parser.add_argument("--pairs", type=int, default=1, help="rounds of the three clients, order rotating")
    parser.add_argument("--profile", help="write a cProfile (pstats) of peagle's client, last round")
    parser.add_argument("--prototype", action="store_true",
                        help="also peagle's load generator over the BufferedProtocol + httptools prototype")
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
    clients = ["minimal", "aiohttp", "loadgen", *(["prototype"] if args.prototype else [])]
    rounds = []
    try:
        for i in range(args.pairs):
            order = clients[i % len(clients):] + clients[:i % len(clients)]
            rounds.append(run_round(port, args, order, args.profile if i == args.pairs - 1 else None))
            if not args.json:
                r = rounds[-1]
                print(f"round {i + 1} ({', '.join(order)}; load {r['load_avg_1m']:.2f}): CPU per token "
                      f"minimal {r['minimal']['cpu_us_per_token']:.3f} us, aiohttp {r['aiohttp']['cpu_us_per_token']:.3f}"
                      f" us, peagle {r['loadgen']['cpu_us_per_token']:.3f} us; efficiency vs aiohttp "
                      f"{r['ratios']['efficiency_vs_aiohttp']:.3f}, vs minimal {r['ratios']['efficiency_vs_minimal']:.3f}",
                      flush=True)
    finally:
        proc.terminate()
        proc.wait(timeout=10)
    summary = {key: _spread([r["ratios"][key] for r in rounds]) for key in rounds[0]["ratios"]}
    last = rounds[-1]
    loadgen, minimal = last["loadgen"], last["minimal"]
    agreement = max(abs(r["loadgen"]["output_tokens_per_s"] - r["loadgen"]["server_tokens_per_s"])
                    / r["loadgen"]["server_tokens_per_s"] for r in rounds)
    checks = {
        "otps >= 100,000": min(r["loadgen"]["output_tokens_per_s"] for r in rounds) >= TARGETS["otps"],
        "loadgen / minimal >= 0.6 (median)": summary["loadgen_vs_minimal_tok_s"]["median"] >= TARGETS["vs_minimal"],
        "held >= 98%": min(r["loadgen"]["concurrency_held"] for r in rounds) >= TARGETS["held"],
        "within 3% of server": agreement <= TARGETS["server_agreement"],
        "no errors": all(r["loadgen"]["errors"] == 0 for r in rounds),
        "efficiency vs aiohttp >= 0.95 (median)": summary["efficiency_vs_aiohttp"]["median"] >= TARGETS["vs_aiohttp"],
    }
    report = {
        "settings": vars(args),
        "machine": info,
        "rounds": rounds,
        "summary": summary,
        "server_disagreement_max": agreement,
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
              f"{minimal['cpu_us_per_token']:.3f} us CPU per token (last round)")
        print(
            f"peagle loadgen : {loadgen['output_tokens_per_s']:>10,.0f} tokens/s, "
            f"held {loadgen['concurrency_held']:.1%}, server sent {loadgen['server_tokens_per_s']:,.0f}/s "
            f"in the window, errors {loadgen['errors']}, {loadgen['cpu_us_per_token']:.3f} us CPU per token"
        )
        cpu, lag = loadgen["client_cpu"], loadgen["loop_lag_ms_mean"]
        print(f"  client CPU {'n/a' if cpu is None else f'{cpu:.0%}'} of a core, event-loop lag "
              f"{'n/a' if lag is None else f'{lag:.1f} ms'}, max RSS {loadgen['max_rss_mib']:.0f} MiB")
        for key, spread in summary.items():
            print(f"  {key}: median {spread['median']:.3f} (min {spread['min']:.3f}, max {spread['max']:.3f}, "
                  f"{len(rounds)} rounds)")
        for name, ok in checks.items():
            print(f"  {'PASS' if ok else 'FAIL'}  {name}")
    return 0 if all(checks.values()) else 1


if __name__ == "__main__":
    raise SystemExit(main())
