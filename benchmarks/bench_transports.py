"""SageMaker's two transports side by side on the emulator's stand-in: `peagle bench NAME --transport both`.

The emulator (moto in server mode with peagle's runtime middleware and OpenAI route) runs in its own process
pinned to CPU 0, its scripted endpoint answering every request with the same N-token completion, one SSE event per
token (one PayloadPart per event on the event stream, as SageMaker passes vLLM's flushes on), `--gap-ms` apart. The
installed `peagle bench` runs pinned to CPU 1, so the client CPU per token it reports is the load generator's alone:
InvokeEndpointWithResponseStream (botocore, a thread per request, peagle's event-stream reader) against the OpenAI
route (aiohttp, plain SSE, a bearer token). Both transports are measured level by level in turns in ONE run; the
ratios (route / event stream) are what to compare, not the absolute figures of a loaded machine.

    .venv/bin/python benchmarks/bench_transports.py [--concurrency 1,8,32] [--duration 8] [--tokens 256]
        [--gap-ms 0] [--runs 1] [--json]

Results are recorded in docs/performance.md, section "SageMaker's two transports".
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PEAGLE = str(Path(sys.executable).parent / "peagle")
NAME = "bench-transports"

SERVER = """
import os, sys
if hasattr(os, "sched_setaffinity") and (os.cpu_count() or 1) > 1:
    os.sched_setaffinity(0, {0})
from peagle_deploy.testing import SageMakerEmulator
tokens, gap = int(sys.argv[1]), float(sys.argv[2])
with SageMakerEmulator.server(set_env=False) as emu:
    emu.create_endpoint_stack(sys.argv[3])
    emu.runtime.tokens = [" tok"] * tokens
    emu.runtime.part_size = 0  # one PayloadPart per SSE event
    emu.runtime.token_gap_s = gap
    print("ENV " + __import__("json").dumps(emu.env), flush=True)
    sys.stdin.read()  # until the benchmark closes our stdin
"""


def start_emulator(tokens: int, gap_s: float) -> tuple[subprocess.Popen, dict[str, str]]:
    proc = subprocess.Popen([sys.executable, "-c", SERVER, str(tokens), str(gap_s), NAME], cwd=ROOT,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    for _ in range(200):  # bounded: the emulator prints its environment once it serves
        line = proc.stdout.readline()
        if line.startswith("ENV "):
            return proc, json.loads(line[4:])
        if not line and proc.poll() is not None:
            break
    proc.kill()
    raise SystemExit("the emulator did not start")


def bench(env: dict[str, str], args: argparse.Namespace, out_dir: Path) -> dict:
    def on_cpu_1() -> None:
        if hasattr(os, "sched_setaffinity") and (os.cpu_count() or 1) > 1:
            os.sched_setaffinity(0, {1})

    argv = [PEAGLE, "bench", NAME, "--transport", "both", "-c", args.concurrency, "--duration", str(args.duration),
            "--max-tokens", str(args.tokens), "--out", str(out_dir), "--no-chart", "--json"]
    done = subprocess.run(argv, env={**env, "AWS_ENDPOINT_URL_PRICING": "http://127.0.0.1:9"}, capture_output=True,
                          text=True, preexec_fn=on_cpu_1, timeout=3600)
    if done.returncode != 0:
        raise SystemExit(f"peagle bench failed ({done.returncode}): {done.stderr[-2000:]}")
    return json.loads(done.stdout)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--concurrency", default="1,8,32")
    parser.add_argument("--duration", type=float, default=8.0)
    parser.add_argument("--tokens", type=int, default=256)
    parser.add_argument("--gap-ms", type=float, default=0.0)
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()

    proc, env = start_emulator(args.tokens, args.gap_ms / 1000)
    runs = []
    try:
        with tempfile.TemporaryDirectory(prefix="bench-transports-") as tmp:
            for run in range(args.runs):
                runs.append({"load_before": os.getloadavg()[0],
                             "comparison": bench(env, args, Path(tmp) / str(run))})
    finally:
        proc.stdin.close()
        proc.wait(timeout=60)
    if args.json:
        print(json.dumps({"settings": vars(args), "python": platform.python_version(), "runs": [
            {"load_before": r["load_before"], "levels": r["comparison"]["levels"],
             "ratios": r["comparison"]["ratios"]} for r in runs]}, indent=2))
        return 0
    for index, r in enumerate(runs, 1):
        print(f"run {index} (load {r['load_before']:.1f}), {args.tokens} tokens per answer, gap {args.gap_ms:g} ms")
        print("| c | transport | output tok/s | TTFT p50 ms | client CPU us/token | saturated |")
        print("|---|---|---|---|---|---|")
        for lv in r["comparison"]["levels"]:
            print(f"| {lv['concurrency']} | {lv['transport']} | {lv['output_tokens_per_s']:,.0f} | "
                  f"{lv['ttft_p50_ms']:.1f} | {lv['client_cpu_us_per_token']:.1f} | {lv['client_saturated']} |")
        print("| c | route/stream tok/s | TTFT p50 | CPU/token |")
        print("|---|---|---|---|")
        for ratio in r["comparison"]["ratios"]:
            print(f"| {ratio['concurrency']} | {ratio['output_tokens_per_s']:.2f}x | {ratio['ttft_p50']:.2f}x | "
                  f"{ratio['client_cpu_per_token']:.2f}x |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
