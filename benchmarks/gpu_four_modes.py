"""off, EAGLE-3, P-EAGLE and DFlash on one GPU, side by side: for a session lent a GPU (../shared/GPU.md).

NOT RUN YET: no GPU was available to the session that wrote it, and docs/dflash.md claims no GPU figure. Two steps:

    python benchmarks/gpu_four_modes.py prepare OUT [--k 3]     # here: models, and each mode's container environment
    python benchmarks/gpu_four_modes.py run OUT                 # on the GPU machine: four servers, bench, compare

`prepare` builds the tiny target with its EAGLE-3 head (every draft accepted) and a DFlash drafter
(tiny_models.write_dflash_drafter), and writes the exact container environment `peagle deploy qwen3-coder --mode M
--k K` plans for each mode (the drafter mounts moved to the model folders). `run` needs, on the GPU machine, vLLM
0.26.0 (the newest that runs on its torch 2.11; it has DFlash, which vLLM names from 0.20) set up as GPU.md says,
and peagle's own dependencies (pydantic, aiohttp, hdrhistogram, typer, rich) installed with `pip --target`. It
starts the four servers through peagle's entrypoint at once (SM_VLLM_KV_CACHE_MEMORY_BYTES so that vLLM skips its
memory profiling, as GPU.md found), benchmarks each with `peagle bench run URL --mode M --k K` (c=1 and 8), and
writes `peagle bench compare`'s side-by-side table (throughput, latency, acceptance, runner from each log).
A 2-layer target exaggerates the drafter's and the runner's share of a step: the figures say which runner each
mode ran on and how that ranks the modes, not what a 30B target gains. Put them in docs/dflash.md with their source.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

MODES = ("off", "eagle3", "p-eagle", "dflash")
MOUNTS = {"eagle": "/opt/ml/additional-model-data-sources/eagle",
          "dflash": "/opt/ml/additional-model-data-sources/dflash"}
KV_BYTES = str(16 * 1024 ** 3)


def prepare(out: Path, k: int) -> None:
    from peagle_deploy.plan import PlanRequest, build_plan
    from peagle_deploy.testing.tiny_models import build_dflash_drafter, build_tiny_models

    models = build_tiny_models(out / "models", mask_token_key="pard_token")  # every vLLM from 0.16 reads it
    dflash = build_dflash_drafter(models, out / "models" / "dflash")
    drafters = {"eagle3": models.drafter, "p-eagle": models.drafter, "dflash": dflash}
    for mode in MODES:
        plan = build_plan(PlanRequest(model="qwen3-coder", mode=mode, k=None if mode == "off" else k, offline=True))
        env = dict(plan.create_model["PrimaryContainer"]["Environment"])
        if mode != "off":
            config = json.loads(env["SM_VLLM_SPECULATIVE_CONFIG"])
            config["model"] = str(drafters[mode])
            env["SM_VLLM_SPECULATIVE_CONFIG"] = json.dumps(config)
        env.update(SM_VLLM_MAX_MODEL_LEN="1024", SM_VLLM_KV_CACHE_MEMORY_BYTES=KV_BYTES, SM_VLLM_HOST="127.0.0.1")
        (out / f"env-{mode}.json").write_text(json.dumps({"env": env, "k": plan.k, "target": str(models.target)},
                                                         indent=2))
    print(f"prepared {out}: carry it to the GPU machine and run: python {sys.argv[0]} run {out}")


def _port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def run(out: Path, wait_s: float) -> None:
    servers = {}
    for mode in MODES:
        spec = json.loads((out / f"env-{mode}.json").read_text())
        port = _port()
        env = {**os.environ, **spec["env"], "PEAGLE_MODEL_DIR": spec["target"], "PEAGLE_PORT": str(port),
               "HF_HUB_OFFLINE": "1", "VLLM_NO_USAGE_STATS": "1"}
        log = (out / f"vllm-{mode}.log").open("w")
        proc = subprocess.Popen([sys.executable, "-m", "peagle_deploy.container"], env=env, stdout=log,
                                stderr=subprocess.STDOUT, start_new_session=True)
        servers[mode] = (proc, port, spec["k"])
    try:
        deadline = {mode: time.monotonic() + wait_s for mode in MODES}  # a fixed allowance each (GPU.md)
        for mode, (proc, port, _) in servers.items():
            while True:
                if proc.poll() is not None:
                    raise SystemExit(f"{mode}: vLLM exited ({proc.returncode}); see {out}/vllm-{mode}.log")
                try:
                    urllib.request.urlopen(f"http://127.0.0.1:{port}/ping", timeout=5)
                    break
                except OSError:
                    if time.monotonic() > deadline[mode]:
                        raise SystemExit(f"{mode}: not ready after {wait_s:.0f} s") from None
                    time.sleep(3)
        for mode, (_, port, k) in servers.items():
            args = ["peagle", "bench", "run", f"http://127.0.0.1:{port}", "--mode", mode, "-c", "1,8", "--duration",
                    "30", "--max-tokens", "256", "--no-chart", "-o", str(out / "runs")]
            subprocess.run(args + ([] if mode == "off" else ["--k", str(k)]), check=True)
        runs = sorted(str(p) for p in (out / "runs").glob("*.json"))
        subprocess.run(["peagle", "bench", "compare", *runs, "--out", str(out)], check=True)
    finally:
        for proc, _, _ in servers.values():
            try:
                os.killpg(proc.pid, 15)
            except ProcessLookupError:
                pass


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("step", choices=("prepare", "run"))
    parser.add_argument("out", type=Path)
    parser.add_argument("--k", type=int, default=3)
    parser.add_argument("--wait", type=float, default=300.0, help="seconds each server may take to start")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    prepare(args.out, args.k) if args.step == "prepare" else run(args.out, args.wait)


if __name__ == "__main__":
    main()
