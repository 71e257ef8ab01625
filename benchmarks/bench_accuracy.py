"""How close `peagle bench` comes to a server's own schedule (a calibration, not a test: it depends on load).

The paced server (peagle_deploy.testing.paced_server, its own process) sends TTFT 0.5 s, 50 tokens/s per
stream, 40-80 tokens per response. At concurrency 1, 8 and 128 the load generator must report output
tokens/s within 3% of what the server's own counter says it wrote over the same window, and TTFT,
ITL and TPOT within 3% of the schedule, with >= 98% of the concurrency held.

    .venv/bin/python benchmarks/bench_accuracy.py [--concurrency 1,8,128] [--duration 3]

It used to be a test (tests/test_bench_paced.py); on a loaded 2-core machine its 3% tolerance failed
now and then, so it lives here and its figures are recorded in docs/bench.md ("How accurate it is").
"""

from __future__ import annotations

import argparse
import asyncio
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

TTFT_S, TOKENS_PER_S, TOLERANCE = 0.5, 50.0, 0.03


def start_server() -> tuple[subprocess.Popen, str]:
    proc = subprocess.Popen([sys.executable, "-m", "peagle_deploy.testing.paced_server", "--port", "0", "--ttft",
                             str(TTFT_S), "--tokens-per-s", str(TOKENS_PER_S), "--tokens", "80", "--min-tokens", "40"],
                            stdout=subprocess.PIPE, text=True, cwd=ROOT)
    line = proc.stdout.readline() if proc.stdout else ""
    if not line.startswith("PORT "):
        proc.kill()
        raise SystemExit(f"paced server did not start: {line!r}")
    return proc, f"http://127.0.0.1:{int(line.split()[1])}"


async def level(url: str, concurrency: int, duration: float):
    from peagle_deploy.bench.http_sender import HttpChatSender
    from peagle_deploy.bench.loadgen import run_level
    from peagle_deploy.bench.prometheus import scrape_async

    edges: dict[str, asyncio.Task] = {}

    def on_window(edge: str) -> None:
        edges[edge] = asyncio.get_running_loop().create_task(scrape_async(url + "/metrics"))

    async with HttpChatSender(url + "/invocations", max_tokens=1000) as sender:
        m = await run_level(sender, [[{"role": "user", "content": "hi"}]], concurrency, warmup=concurrency,
                            duration=duration, on_window=on_window)
    sent = (await edges["close"]).generation_tokens - (await edges["open"]).generation_tokens
    return m, sent


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--concurrency", default="1,8,128")
    parser.add_argument("--duration", type=float, default=3.0)
    args = parser.parse_args()
    proc, url = start_server()
    ok = True
    try:
        for conc in [int(c) for c in args.concurrency.split(",")]:
            m, sent = asyncio.run(level(url, conc, args.duration))
            figures = {
                "otps vs server": (m.output_tokens_per_s, sent / m.window_s),
                "ttft ms": (m.ttft_ms.mean, TTFT_S * 1000),
                "itl ms": (m.itl_ms.mean, 1000 / TOKENS_PER_S),
                "tpot ms": (m.tpot_ms.mean, 1000 / TOKENS_PER_S),
            }
            line = [f"c={conc:<4} held {m.concurrency_held:.1%}"]
            ok &= m.concurrency_held >= 0.98 and m.errors == 0
            for name, (got, want) in figures.items():
                off = abs(got - want) / want
                ok &= off <= TOLERANCE
                line.append(f"{name} {got:,.1f} ({off:.2%} off)")
            print(", ".join(line))
    finally:
        proc.terminate()
        proc.wait(timeout=10)
    print("PASS" if ok else "FAIL", f"(tolerance {TOLERANCE:.0%})")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
