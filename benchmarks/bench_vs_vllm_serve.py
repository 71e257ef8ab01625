"""`vllm bench serve` and `peagle bench run` against the same real vLLM server, side by side.

    # a running server (any OpenAI-compatible vLLM):
    .venv-vllm/bin/python benchmarks/bench_vs_vllm_serve.py --url http://127.0.0.1:8080 --levels 1,4
    # or let the script start vLLM (CPU build) with the tiny P-EAGLE models through peagle's entrypoint:
    .venv-vllm/bin/python benchmarks/bench_vs_vllm_serve.py --tiny p-eagle --levels 1,4,8

Both tools send streaming chat completions (vllm: `--backend openai-chat`, peagle: the `/v1` URL) with the same
output length, the same number of measured requests per level and temperature 0. Prints a Markdown table of
output tokens/s, TTFT and ITL (means and medians, ms) per level; --json writes the raw figures too. A benchmark,
not a timed test: numbers depend on the machine.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

BIN = Path(sys.executable).parent


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def start_tiny_server(mode: str, k: int, workdir: Path) -> tuple[subprocess.Popen, str]:
    """Tiny models + `python -m peagle_deploy.container` (which execs vllm serve) on a loopback port."""
    from peagle_deploy.testing.tiny_models import build_tiny_models

    models = build_tiny_models(workdir / "tiny")
    port = _free_port()
    env = {**os.environ, "PEAGLE_MODEL_DIR": str(models.target), "PEAGLE_PORT": str(port),
           "SM_VLLM_HOST": "127.0.0.1", "SM_VLLM_ENFORCE_EAGER": "true", "SM_VLLM_MAX_MODEL_LEN": "1024",
           "HF_HUB_OFFLINE": "1", "VLLM_NO_USAGE_STATS": "1", "VLLM_CPU_KVCACHE_SPACE": "1",
           "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}"}
    if mode != "off":
        env["SM_VLLM_SPECULATIVE_CONFIG"] = json.dumps({"model": str(models.drafter), "method": "eagle3",
                                                        "num_speculative_tokens": k,
                                                        "parallel_drafting": mode == "p-eagle"})
    log = open(workdir / "vllm.log", "wb")
    proc = subprocess.Popen([sys.executable, "-m", "peagle_deploy.container"], env=env, stdout=log,
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


def vllm_bench(url: str, model: str, concurrency: int, prompts: int, out_len: int, in_len: int,
               workdir: Path) -> dict:
    name = f"vllm-c{concurrency}.json"
    cmd = [str(BIN / "vllm"), "bench", "serve", "--backend", "openai-chat", "--base-url", url,
           "--endpoint", "/v1/chat/completions", "--model", model, "--tokenizer", model,
           "--dataset-name", "random", "--random-input-len", str(in_len), "--random-output-len", str(out_len),
           "--num-prompts", str(prompts), "--max-concurrency", str(concurrency), "--num-warmups",
           str(concurrency), "--temperature", "0", "--ignore-eos", "--disable-tqdm", "--save-result",
           "--result-dir", str(workdir), "--result-filename", name]
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, timeout=1800)
    raw = json.loads((workdir / name).read_text())
    return {"output_tok_s": raw["output_throughput"], "ttft_mean": raw["mean_ttft_ms"],
            "ttft_p50": raw["median_ttft_ms"], "itl_mean": raw["mean_itl_ms"], "itl_p50": raw["median_itl_ms"],
            "tpot_mean": raw["mean_tpot_ms"], "completed": raw["completed"]}


def peagle_bench(url: str, concurrency: int, prompts: int, out_len: int, workdir: Path) -> dict:
    cmd = [str(BIN / "peagle"), "bench", "run", url + "/v1", "-c", str(concurrency), "-n", str(prompts),
           "--max-tokens", str(out_len), "--warmup", str(concurrency), "--temperature", "0", "--no-chart",
           "-o", str(workdir / f"peagle-c{concurrency}"), "--json"]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True, timeout=1800)
    level = json.loads(out.stdout)["result"]["levels"][0]
    return {"output_tok_s": level["output_tokens_per_s"], "ttft_mean": level["ttft_ms"]["mean"],
            "ttft_p50": level["ttft_ms"]["p50"], "itl_mean": level["itl_ms"]["mean"],
            "itl_p50": level["itl_ms"]["p50"], "tpot_mean": level["tpot_ms"]["mean"],
            "completed": level["completed"]}


def table(rows: list[dict]) -> str:
    head = ("| c | tool | output tok/s | TTFT mean | TTFT p50 | ITL mean | ITL p50 | TPOT mean | requests |\n"
            "|---|---|---|---|---|---|---|---|---|")
    lines = [head]
    for row in rows:
        for tool in ("vllm bench serve", "peagle bench"):
            r = row[tool]
            lines.append(f"| {row['c']} | {tool} | {r['output_tok_s']:.1f} | {r['ttft_mean']:.1f} | "
                         f"{r['ttft_p50']:.1f} | {r['itl_mean']:.1f} | {r['itl_p50']:.1f} | {r['tpot_mean']:.2f} | "
                         f"{r['completed']} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    where = parser.add_mutually_exclusive_group(required=True)
    where.add_argument("--url", help="a running vLLM server, e.g. http://127.0.0.1:8080")
    where.add_argument("--tiny", choices=["p-eagle", "eagle3", "off"], help="start vLLM with the tiny models")
    parser.add_argument("--k", type=int, default=3)
    parser.add_argument("--levels", default="1,4,8", help="concurrency levels, comma-separated")
    parser.add_argument("--prompts", type=int, default=32, help="measured requests per level (both tools)")
    parser.add_argument("--output-len", type=int, default=128)
    parser.add_argument("--input-len", type=int, default=64, help="vllm bench serve's random prompt length")
    parser.add_argument("--json", type=Path, help="also write the raw figures here")
    args = parser.parse_args(argv)
    if shutil.which("vllm", path=str(BIN)) is None:
        sys.stderr.write(f"error: no vllm next to {sys.executable}; run it with .venv-vllm/bin/python\n")
        return 2
    workdir = Path(tempfile.mkdtemp(prefix="bench-vs-vllm-"))
    proc = None
    try:
        if args.tiny:
            proc, url = start_tiny_server(args.tiny, args.k, workdir)
        else:
            url = args.url.rstrip("/")
        model = served_model(url)
        rows = []
        for c in [int(x) for x in args.levels.split(",")]:
            rows.append({"c": c, "vllm bench serve": vllm_bench(url, model, c, args.prompts, args.output_len,
                                                                args.input_len, workdir),
                         "peagle bench": peagle_bench(url, c, args.prompts, args.output_len, workdir)})
            sys.stderr.write(f"level {c} done\n")
        print(table(rows))
        if args.json:
            args.json.write_text(json.dumps({"url": url, "model": model, "settings": vars(args) | {"json": None},
                                             "rows": rows}, indent=2, default=str))
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
