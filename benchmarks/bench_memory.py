"""Memory per request of `peagle bench`: RSS over a long run of short answers.

A fast local server (peagle_deploy.testing.paced_server, as fast as it can, 16 tokens per answer) in its
own process; `peagle bench URL --concurrency 128 --duration 45 --max-tokens 16 --warmup 0 --mode off
--no-chart --json` in another; this script samples the bench process's RSS from /proc every 0.5 s and
reports the mean RSS over seconds 10-15 and over the last 5 s, the peak, the slope of a least-squares
line through the samples from second 10 on, and that slope divided by the request rate (bytes kept per
finished request).

    .venv/bin/python benchmarks/bench_memory.py [--duration 45] [--concurrency 128] [--tokens 16]
        [--tree PATH] [--json]

`--tree PATH` runs the peagle of another checkout (e.g. one extracted with `git archive`) against the
same server, to measure before and after. Results are in docs/performance.md, "Memory per request".
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

PEAGLE = "import sys; from peagle_deploy.cli.app import main; main(sys.argv[1:])"


def start_server(tokens: int) -> tuple[subprocess.Popen, int]:
    args = [sys.executable, "-m", "peagle_deploy.testing.paced_server", "--port", "0", "--ttft", "0",
            "--tokens-per-s", "0", "--tokens", str(tokens)]
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, text=True, cwd=ROOT,
                            env={**os.environ, "PYTHONPATH": str(ROOT)})
    line = proc.stdout.readline() if proc.stdout else ""
    if not line.startswith("PORT "):
        proc.kill()
        raise SystemExit(f"the server did not start: {line!r}")
    return proc, int(line.split()[1])


def rss_mib(pid: int) -> float | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        return None
    return None


def slope(points: list[tuple[float, float]]) -> float:
    """Least-squares slope (MiB/s) of (t, rss) points."""
    n = len(points)
    if n < 2:
        return 0.0
    mt = sum(t for t, _ in points) / n
    mr = sum(r for _, r in points) / n
    var = sum((t - mt) ** 2 for t, _ in points)
    return sum((t - mt) * (r - mr) for t, r in points) / var if var else 0.0


def mean_between(samples: list[tuple[float, float]], lo: float, hi: float) -> float | None:
    inside = [r for t, r in samples if lo <= t < hi]
    return sum(inside) / len(inside) if inside else None


def run(tree: Path, port: int, duration: float, concurrency: int, tokens: int, extra: list[str],
        interval: float = 0.5) -> dict:
    with tempfile.TemporaryDirectory(prefix="peagle-mem-") as out:
        args = [sys.executable, "-c", PEAGLE, "bench", f"http://127.0.0.1:{port}", "--concurrency",
                str(concurrency), "--duration", str(duration), "--max-tokens", str(tokens), "--warmup", "0",
                "--mode", "off", "--no-chart", "--json", "--out", out, *extra]
        env = {**os.environ, "PYTHONPATH": str(tree)}
        proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, cwd=out)
        t0 = time.monotonic()
        samples: list[tuple[float, float]] = []
        while proc.poll() is None:
            rss = rss_mib(proc.pid)
            if rss is not None:
                samples.append((time.monotonic() - t0, rss))
            time.sleep(interval)
        stdout, stderr = proc.communicate()
    try:
        doc = json.loads(stdout)
        level = doc["result"]["levels"][0]
    except (ValueError, KeyError, IndexError):
        raise SystemExit(f"peagle bench failed (exit {proc.returncode}): {stderr.decode()[-2000:]}") from None
    # the window opens once the process has started (about 1 s of imports): measure from the samples' end
    end = samples[-1][0] if samples else 0.0
    start = end - duration
    steady = [(t, r) for t, r in samples if t >= start + 10]
    growth = slope(steady)
    rps = level["requests_per_s"]
    return {
        "tree": str(tree),
        "requests_completed": level["completed"],
        "requests_per_s": rps,
        "output_tokens_per_s": level["output_tokens_per_s"],
        "concurrency_held": level["concurrency_held"],
        "errors": level["errors"],
        "client_cpu": level.get("client_cpu"),
        "rss_mib_10_15s": mean_between(samples, start + 10, start + 15),
        "rss_mib_last_5s": mean_between(samples, end - 5, end + 1),
        "rss_mib_peak": max((r for _, r in samples), default=None),
        "rss_slope_mib_per_s": growth,
        "bytes_per_request": growth * 2**20 / rps if rps else None,
        "samples": len(samples),
        "load_avg_1m": os.getloadavg()[0],
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--duration", type=float, default=45.0)
    parser.add_argument("--concurrency", type=int, default=128)
    parser.add_argument("--tokens", type=int, default=16, help="output tokens per answer")
    parser.add_argument("--tree", type=Path, action="append",
                        help="a peagle checkout to measure (repeatable: run in turn); default this one")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("extra", nargs="*", help="more `peagle bench` options, after --")
    args = parser.parse_args()
    trees = args.tree or [ROOT]
    server, port = start_server(args.tokens)
    load_before = os.getloadavg()[0]
    try:
        results = [run(tree.resolve(), port, args.duration, args.concurrency, args.tokens, args.extra)
                   for tree in trees]
    finally:
        server.terminate()
        server.wait(timeout=10)
    if args.json:
        print(json.dumps({"settings": {k: str(v) for k, v in vars(args).items()}, "load_avg_1m_before": load_before,
                          "runs": results}, indent=2))
        return 0
    print(f"c={args.concurrency}, {args.tokens} tokens per answer, {args.duration:g} s, load {load_before:.2f} before")
    for r in results:
        print(f"{r['tree']}: {r['requests_completed']:,} requests ({r['requests_per_s']:,.0f}/s), "
              f"RSS {r['rss_mib_10_15s']:.0f} MiB at 10-15 s, {r['rss_mib_last_5s']:.0f} MiB in the last 5 s, "
              f"peak {r['rss_mib_peak']:.0f} MiB, slope {r['rss_slope_mib_per_s']:+.3f} MiB/s "
              f"({r['bytes_per_request']:.0f} bytes per request), client CPU {r['client_cpu']}, "
              f"load {r['load_avg_1m']:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
