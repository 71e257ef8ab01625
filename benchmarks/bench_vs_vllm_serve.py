"""`peagle bench run` and `vllm bench serve` against the same real vLLM server, in interleaved pairs.

    # starts vLLM (CPU build) with the tiny P-EAGLE models through peagle's entrypoint, then measures:
    .venv-vllm/bin/python benchmarks/bench_vs_vllm_serve.py --tiny p-eagle --levels 1,4,8,16 --pairs 5 \\
        --min-window 30 --json bench-vs-vllm.json
    # or a server you run (its served model name must be a local path: vllm bench serve loads its tokenizer)
    .venv-vllm/bin/python benchmarks/bench_vs_vllm_serve.py --url http://127.0.0.1:8080 --levels 1,4

Same request shape for both tools: streaming chat completions to /v1/chat/completions, the same prompts (one
JSONL file: vllm's `custom` data set with --skip-chat-template, peagle's --dataset), the same output length,
temperature 0, the same number of measured requests per level (calibrated so each window lasts at least
--min-window seconds), warm-up = concurrency. Each pair runs both tools back to back, the order alternating
between pairs, so a drift of the machine's load hits both. Prints a Markdown table per level: median output
tok/s of each tool, the median of the per-pair ratios peagle / vllm and their spread, the window length and the
machine load, and each client's CPU and its wait for a CPU (/proc/PID/task/*/schedstat) over its window. On a
2-core machine vLLM's CPU workers keep both cores busy and a client that waits for a CPU leaves the server without
its next request: `--pin` puts the server on CPU 0 and each client on CPU 1. A benchmark, not a timed test: the
numbers depend on the machine and its load.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import resource
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

BIN = Path(sys.executable).parent
WORDS = ("speculative decoding drafts tokens that the target model verifies in parallel one forward pass "
         "endpoints serve answer ping invocations log acceptance quick brown fox jumps over lazy dog").split()


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


PINNED: dict[str, set[int]] = {}  # --pin: {"server": {0}, "client": {1}}


def _pinned(role: str):
    cpus = PINNED.get(role)
    return (lambda: os.sched_setaffinity(0, cpus)) if cpus else None


def start_tiny_server(mode: str, k: int, workdir: Path) -> tuple[subprocess.Popen, str]:
    """Tiny models + `python -m peagle_deploy.container` (which execs vllm serve) on a loopback port."""
    from peagle_deploy.testing.tiny_models import build_tiny_models

    models = build_tiny_models(workdir / "tiny")
    port = _free_port()
    env = {**os.environ, "PEAGLE_MODEL_DIR": str(models.target), "PEAGLE_PORT": str(port),
           "SM_VLLM_HOST": "127.0.0.1", "SM_VLLM_ENFORCE_EAGER": "true", "SM_VLLM_MAX_MODEL_LEN": "1024",
           "HF_HUB_OFFLINE": "1", "VLLM_NO_USAGE_STATS": "1", "VLLM_CPU_KVCACHE_SPACE": "1",
           **({"VLLM_CPU_OMP_THREADS_BIND": ",".join(map(str, sorted(PINNED["server"])))} if PINNED else {}),
           "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}"}
    if mode != "off":
        env["SM_VLLM_SPECULATIVE_CONFIG"] = json.dumps({"model": str(models.drafter), "method": "eagle3",
                                                        "num_speculative_tokens": k,
                                                        "parallel_drafting": mode == "p-eagle"})
    log = open(workdir / "vllm.log", "wb")
    proc = subprocess.Popen([sys.executable, "-m", "peagle_deploy.container"], env=env, stdout=log,
                            preexec_fn=_pinned("server"),
                            stderr=subprocess.STDOUT, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"vLLM exited with {proc.returncode}; see {workdir / 'vllm.log'}")
        try:
            with urllib.request.urlopen(url + "/ping", timeout=5):
                return proc, url
        except OSError:
            time.sleep(1)
    os.killpg(proc.pid, signal.SIGKILL)
    raise SystemExit("vLLM did not become ready within 600 s")


def served_model(url: str) -> str:
    with urllib.request.urlopen(url + "/v1/models", timeout=30) as answer:
        return json.load(answer)["data"][0]["id"]


def write_prompts(path: Path, count: int = 64, words: int = 48, seed: int = 20261124) -> Path:
    """`count` prompts of `words` random words (about 64 tokens with the tiny tokenizer), one JSONL file."""
    rng = random.Random(seed)
    path.write_text("".join(json.dumps({"prompt": " ".join(rng.choice(WORDS) for _ in range(words))}) + "\n"
                            for _ in range(count)))
    return path


def vllm_bench(url: str, model: str, c: int, n: int, out_len: int, prompts: Path, workdir: Path, tag: str) -> dict:
    name = f"vllm-{tag}.json"
    cmd = [str(BIN / "vllm"), "bench", "serve", "--backend", "openai-chat", "--base-url", url,
           "--endpoint", "/v1/chat/completions", "--model", model, "--tokenizer", model,
           "--dataset-name", "custom", "--dataset-path", str(prompts), "--skip-chat-template",
           "--custom-output-len", str(out_len), "--num-prompts", str(n), "--max-concurrency", str(c),
           "--num-warmups", str(c), "--temperature", "0", "--ignore-eos", "--disable-tqdm", "--save-result",
           "--result-dir", str(workdir), "--result-filename", name]
    began, cpu = time.monotonic(), _children_cpu()
    _, samples = run_watched(cmd)
    cpu = _children_cpu() - cpu
    raw = json.loads((workdir / name).read_text())
    return {"output_tok_s": raw["output_throughput"], "window_s": raw["duration"], "wall_s": time.monotonic() - began,
            "client_cpu_s": cpu, **in_window(samples, raw["duration"]), "output_tokens": raw["total_output_tokens"],
            "completed": raw["completed"],
            "ttft_p50": raw["median_ttft_ms"], "itl_p50": raw["median_itl_ms"], "tpot_mean": raw["mean_tpot_ms"]}


def peagle_bench(url: str, c: int, n: int, out_len: int, prompts: Path, workdir: Path, tag: str) -> dict:
    cmd = [str(BIN / "peagle"), "bench", "run", url + "/v1", "-c", str(c), "-n", str(n), "--dataset", str(prompts),
           "--max-tokens", str(out_len), "--warmup", str(c), "--temperature", "0", "--no-chart",
           "-o", str(workdir / f"peagle-{tag}"), "--json"]
    began, cpu = time.monotonic(), _children_cpu()
    stdout, samples = run_watched(cmd)
    cpu = _children_cpu() - cpu
    level = json.loads(stdout)["result"]["levels"][0]
    return {"output_tok_s": level["output_tokens_per_s"], "window_s": level["window_s"],
            "wall_s": time.monotonic() - began, "client_cpu_s": cpu, **in_window(samples, level["window_s"]),
            "output_tokens": level["output_tokens"],
            "completed": level["completed"], "ttft_p50": level["ttft_ms"]["p50"], "itl_p50": level["itl_ms"]["p50"],
            "tpot_mean": level["tpot_ms"]["mean"], "client_cpu": level.get("client_cpu"),
            "loop_lag_mean_ms": (level.get("loop_lag_ms") or {}).get("mean"),
            "held": level.get("concurrency_held")}


def _sched_s(pid: int) -> tuple[float, float, float, float]:
    """(on-CPU, waiting for a CPU) seconds of the main thread of `pid` (an asyncio client's event loop), then the
    same summed over all its threads (/proc/PID/task/*/schedstat)."""
    main = (0.0, 0.0)
    ran = waited = 0.0
    for stat in Path(f"/proc/{pid}/task").glob("*/schedstat"):
        try:
            fields = stat.read_text().split()
        except OSError:
            continue
        cpu, wait = int(fields[0]) / 1e9, int(fields[1]) / 1e9
        ran, waited = ran + cpu, waited + wait
        if stat.parent.name == str(pid):
            main = (cpu, wait)
    return (*main, ran, waited)


def run_watched(cmd: list[str]) -> tuple[str, list[tuple[float, ...]]]:
    """Run a client to its end; its stdout and samples (time, then _sched_s) every 0.1 s until it exits, so the
    CPU it used and waited for can be read over its measured window alone (start-up excluded: vllm bench's
    imports cost seconds). On two cores shared with vLLM's CPU workers, a client that waits for a CPU can
    neither send the next request nor read the next token meanwhile."""
    with tempfile.TemporaryFile() as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.DEVNULL, preexec_fn=_pinned("client"))
        samples: list[tuple[float, ...]] = []
        deadline = time.monotonic() + 3600
        while proc.poll() is None and time.monotonic() < deadline:
            sched = _sched_s(proc.pid)
            if sched[2]:
                samples.append((time.monotonic(), *sched))
            time.sleep(0.1)
        if proc.poll() is None:
            proc.kill()
        if proc.wait() != 0:
            raise subprocess.CalledProcessError(proc.returncode, cmd)
        out.seek(0)
        return out.read().decode(), samples


def in_window(samples: list[tuple[float, ...]], window_s: float) -> dict:
    """CPU used and time waited for a CPU over the last `window_s` seconds the client ran (its measured window,
    which ends as it writes its results), as shares of that time: its main thread (the event loop), and all its
    threads summed (which can pass 100% when several wait at once)."""
    if len(samples) < 2:
        return {"client_cpu_share": None, "client_wait_share": None, "client_wait_share_all_threads": None}
    end = samples[-1]
    start = min(samples, key=lambda s: abs(s[0] - (end[0] - window_s)))
    span = max(end[0] - start[0], 1e-9)
    return {"client_cpu_share": (end[3] - start[3]) / span, "client_wait_share": (end[2] - start[2]) / span,
            "client_wait_share_all_threads": (end[4] - start[4]) / span}


def _pct(share: float | None) -> str:
    return "?" if share is None else f"{share:.0%}"


def _children_cpu() -> float:
    """CPU seconds (user + system) of this script's finished children: the tool just run, start-up included.
    On a 2-core machine the client's CPU is taken from the server's, so a heavier client sees a slower server."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def calibrate(url: str, model: str, c: int, out_len: int, prompts: Path, workdir: Path, min_window: float) -> int:
    """Measured requests per run so that a window lasts at least `min_window` s (from a short probe run)."""
    probe_n = max(4 * c, 8)
    probe = vllm_bench(url, model, c, probe_n, out_len, prompts, workdir, f"probe-c{c}")
    per_s = probe["completed"] / probe["window_s"]
    return max(probe_n, math.ceil(per_s * min_window * 1.15))


def summarize(c: int, n: int, pairs: list[dict]) -> dict:
    ratios = [p["peagle"]["output_tok_s"] / p["vllm"]["output_tok_s"] for p in pairs]
    return {"c": c, "requests": n, "pairs": len(pairs),
            "vllm_median": statistics.median(p["vllm"]["output_tok_s"] for p in pairs),
            "peagle_median": statistics.median(p["peagle"]["output_tok_s"] for p in pairs),
            "ratio_median": statistics.median(ratios), "ratio_min": min(ratios), "ratio_max": max(ratios),
            "peagle_lower": sum(r < 1 for r in ratios), "ratios": ratios,
            **{f"{tool}_{share}": statistics.median(p[tool][share] or 0.0 for p in pairs)
               for tool in ("vllm", "peagle") for share in ("client_cpu_share", "client_wait_share")},
            **{f"{tool}_tokens_per_request": statistics.median(
                p[tool]["output_tokens"] / max(p[tool]["completed"], 1) for p in pairs) for tool in ("vllm", "peagle")},
            "window_s_median": statistics.median(min(p["vllm"]["window_s"], p["peagle"]["window_s"]) for p in pairs),
            "load": [p["load"] for p in pairs]}


def table(levels: list[dict]) -> str:
    lines = ["| c | requests/run | pairs | vllm bench serve tok/s (median) | peagle bench tok/s (median) | "
             "peagle / vllm: median | min - max | pairs peagle lower | window s (median) | load avg (1 min) | "
             "client in its window: CPU, vllm / peagle | waiting for a CPU, vllm / peagle | tokens per request, vllm / peagle |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for s in levels:
        loads = [x for x in s["load"] if x is not None]
        lines.append(f"| {s['c']} | {s['requests']} | {s['pairs']} | {s['vllm_median']:.1f} | {s['peagle_median']:.1f} "
                     f"| {s['ratio_median']:.3f} | {s['ratio_min']:.3f} - {s['ratio_max']:.3f} | "
                     f"{s['peagle_lower']} of {s['pairs']} | {s['window_s_median']:.1f} | "
                     f"{min(loads):.1f} - {max(loads):.1f} | {s['vllm_client_cpu_share']:.0%} / "
                     f"{s['peagle_client_cpu_share']:.0%} | {s['vllm_client_wait_share']:.0%} / "
                     f"{s['peagle_client_wait_share']:.0%} | {s['vllm_tokens_per_request']:.1f} / "
                     f"{s['peagle_tokens_per_request']:.1f} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    where = parser.add_mutually_exclusive_group(required=True)
    where.add_argument("--url", help="a running vLLM server, e.g. http://127.0.0.1:8080")
    where.add_argument("--tiny", choices=["p-eagle", "eagle3", "off"], help="start vLLM with the tiny models")
    parser.add_argument("--k", type=int, default=3)
    parser.add_argument("--levels", default="1,4,8,16", help="concurrency levels, comma-separated")
    parser.add_argument("--pairs", type=int, default=5, help="interleaved pairs per level")
    parser.add_argument("--min-window", type=float, default=30.0, help="seconds each measured window lasts at least")
    parser.add_argument("--output-len", type=int, default=128)
    parser.add_argument("--model", help="the served model name (default: the first of /v1/models); a local path")
    parser.add_argument("--json", type=Path, help="also write the raw figures here")
    parser.add_argument("--pin", action="store_true",
                        help="server (and vLLM's OpenMP threads) on CPU 0, each client on CPU 1: neither tool's "
                             "client waits behind vLLM's workers (with --tiny)")
    args = parser.parse_args(argv)
    if shutil.which("vllm", path=str(BIN)) is None:
        sys.stderr.write(f"error: no vllm next to {sys.executable}; run it with .venv-vllm/bin/python\n")
        return 2
    if args.pin:
        PINNED.update(server={0}, client={1})
    workdir = Path(tempfile.mkdtemp(prefix="bench-vs-vllm-"))
    prompts = write_prompts(workdir / "prompts.jsonl")
    proc = None
    raw: dict = {"settings": {k: v for k, v in vars(args).items() if k != "json"}, "levels": []}
    try:
        if args.tiny:
            proc, url = start_tiny_server(args.tiny, args.k, workdir)
        else:
            url = args.url.rstrip("/")
        model = args.model or served_model(url)
        summaries = []
        for c in [int(x) for x in args.levels.split(",")]:
            n = calibrate(url, model, c, args.output_len, prompts, workdir, args.min_window)
            pairs = []
            for i in range(args.pairs):
                tools = ("vllm", "peagle") if i % 2 == 0 else ("peagle", "vllm")
                pair = {"order": list(tools), "load": os.getloadavg()[0]}
                for tool in tools:
                    tag = f"c{c}-{i}-{tool}"
                    pair[tool] = (vllm_bench(url, model, c, n, args.output_len, prompts, workdir, tag)
                                  if tool == "vllm" else peagle_bench(url, c, n, args.output_len, prompts, workdir, tag))
                pairs.append(pair)
                sys.stderr.write(f"c={c} pair {i + 1}/{args.pairs}: peagle/vllm "
                                 f"{pair['peagle']['output_tok_s'] / pair['vllm']['output_tok_s']:.3f} "
                                 f"(load {pair['load']:.1f}; client CPU s vllm {pair['vllm']['client_cpu_s']:.1f}, "
                                 f"peagle {pair['peagle']['client_cpu_s']:.1f}; in the window, CPU / waiting for a CPU: vllm "
                                 f"{_pct(pair['vllm']['client_cpu_share'])} / {_pct(pair['vllm']['client_wait_share'])}, "
                                 f"peagle {_pct(pair['peagle']['client_cpu_share'])} / "
                                 f"{_pct(pair['peagle']['client_wait_share'])})\n")
            summaries.append(summarize(c, n, pairs))
            raw["levels"].append({"c": c, "requests": n, "pairs": pairs})
            if args.json:
                args.json.write_text(json.dumps(raw | {"summary": summaries}, indent=2))
        print(table(summaries))
    finally:
        if proc is not None and proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
    return 0


if __name__ == "__main__":
    sys.exit(main())
