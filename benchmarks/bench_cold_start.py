"""What a cold start of the container costs, phase by phase: real vLLM (CPU build) started from nothing, again and
again, with and without the tier's drafter.

    PYTHONPATH=$PWD .venv-vllm/bin/python benchmarks/bench_cold_start.py --modes off,p-eagle --runs 3 \\
        [--compile] [--json cold-start.json] [--keep]
    PYTHONPATH=$PWD .venv-vllm/bin/python benchmarks/bench_cold_start.py --table cold-start.json   # its table again

Each run starts `python -m peagle_deploy.container` (which execs `vllm serve`) as the real-vLLM tier does: the
CreateModel environment `peagle deploy qwen3-coder --mode MODE --k 3` sends (offline specs), the SageMaker mounts
moved to the tiny models (`peagle_deploy.testing.tiny_models`; P-EAGLE and EAGLE-3 with the tier's mode-sensitive
drafter), `SM_VLLM_MAX_MODEL_LEN=512`, `SM_VLLM_ENFORCE_EAGER=true` (the tier's setting; `--compile` drops it, and
gives every run empty vLLM and TorchInductor caches, as a fresh instance has). Runs of the modes alternate (off,
p-eagle, off, ...), one server at a time; each is stopped (its whole process group) before the next starts.

Per run: the wall time from starting the process to the first 200 on GET /health; the seconds before vLLM's first
log line (the imports of the entrypoint and vLLM: the log cannot say them), stamped as each line arrives; vLLM's
phases read from its own log by `peagle_deploy.lifecycle.startup_phases` (weights, compile, graphs, KV cache and
the timestamped ones between them); and the seconds from uvicorn's "Application startup complete." to the first
200. Prints one Markdown table (median, min-max per phase and mode) and the machine's load average; the numbers
depend on the machine and its load. Results: docs/hosting.md, "What a cold start costs".
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

BIN = Path(sys.executable).parent
MODEL_ALIAS = "qwen3-coder"
EAGLE_MOUNT = "/opt/ml/additional-model-data-sources/eagle"
K = 3
RUNTIME_ENV = {"HF_HUB_OFFLINE": "1", "VLLM_NO_USAGE_STATS": "1", "VLLM_CPU_KVCACHE_SPACE": "1",
               "TOKENIZERS_PARALLELISM": "false", "DO_NOT_TRACK": "1", "PYTHONUNBUFFERED": "1"}
START_TIMEOUT_S = 900.0
BEFORE_LOG = "before_log"      # process start -> vLLM's first log line (benchmark clock)
UNTIMED = "untimed"            # the log's span less the phases read from it
TO_HEALTH = "to_health"        # "Application startup complete." -> first 200 on /health (benchmark clock)
WALL = "wall"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def plan_environment(mode: str) -> dict[str, str]:
    """The CreateModel Environment `peagle deploy qwen3-coder --mode MODE --k 3` sends (offline specs)."""
    from peagle_deploy.plan import PlanRequest, build_plan

    request = PlanRequest(model=MODEL_ALIAS, mode=mode, k=K if mode != "off" else None, offline=True,
                          env={"SM_VLLM_MAX_MODEL_LEN": "512"})
    return dict(build_plan(request).create_model["PrimaryContainer"]["Environment"])


def run_environment(mode: str, target: Path, drafter: Path, port: int, workdir: Path, compile_: bool) -> dict:
    env = {**os.environ, **plan_environment(mode), **RUNTIME_ENV, "PEAGLE_MODEL_DIR": str(target),
           "PEAGLE_PORT": str(port), "SM_VLLM_HOST": "127.0.0.1",
           "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}"}
    if compile_:  # empty caches: what a new instance starts with
        env["VLLM_CACHE_ROOT"] = str(workdir / "vllm-cache")
        env["TORCHINDUCTOR_CACHE_DIR"] = str(workdir / "inductor-cache")
    else:
        env["SM_VLLM_ENFORCE_EAGER"] = "true"
    if env.get("SM_VLLM_SPECULATIVE_CONFIG"):
        config = json.loads(env["SM_VLLM_SPECULATIVE_CONFIG"])
        assert config["model"] == EAGLE_MOUNT, config
        config["model"] = str(drafter)
        env["SM_VLLM_SPECULATIVE_CONFIG"] = json.dumps(config)
    return env


class LogPump(threading.Thread):
    """Copies the child's output to its log file, noting when vLLM's first line and uvicorn's ready line arrive."""

    def __init__(self, stream, path: Path):
        super().__init__(daemon=True)
        self.stream, self.path = stream, path
        self.first_line: float | None = None
        self.app_ready: float | None = None

    def run(self) -> None:
        from peagle_deploy.lifecycle.startup_phases import STAMP

        with open(self.path, "wb") as log:
            for raw in iter(self.stream.readline, b""):
                now = time.monotonic()
                log.write(raw)
                text = raw.decode("utf-8", "replace")
                if self.first_line is None and STAMP.search(text):
                    self.first_line = now
                if self.app_ready is None and "Application startup complete." in text:
                    self.app_ready = now


def health(port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2) as answer:
            return answer.status == 200
    except (urllib.error.URLError, OSError, ValueError):
        return False


def stop(proc: subprocess.Popen) -> None:
    for sig, wait_s in ((signal.SIGTERM, 30), (signal.SIGKILL, 10)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(timeout=wait_s)
            return
        except subprocess.TimeoutExpired:
            continue


def one_start(mode: str, target: Path, drafter: Path, workdir: Path, compile_: bool) -> dict:
    from peagle_deploy.lifecycle.startup_phases import parse_phases

    workdir.mkdir(parents=True)
    port = _free_port()
    env = run_environment(mode, target, drafter, port, workdir, compile_)
    load = os.getloadavg()[0]
    began = time.monotonic()
    proc = subprocess.Popen([sys.executable, "-m", "peagle_deploy.container"], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True,
                            cwd=workdir)
    pump = LogPump(proc.stdout, workdir / "vllm.log")
    pump.start()
    ready = None
    try:
        while time.monotonic() - began < START_TIMEOUT_S:
            if health(port):
                ready = time.monotonic()
                break
            if proc.poll() is not None:
                break
            time.sleep(0.25)
    finally:
        stop(proc)
        pump.join(timeout=30)
    if ready is None:
        raise SystemExit(f"{mode}: vLLM not ready (exit {proc.returncode}); see {workdir / 'vllm.log'}")
    lines = (workdir / "vllm.log").read_text(encoding="utf-8", errors="replace").splitlines()
    phases = parse_phases(lines, source=str(workdir / "vllm.log"))
    row = {"mode": mode, "compile": compile_, "load_avg_1m": load, WALL: round(ready - began, 2),
           BEFORE_LOG: round(pump.first_line - began, 2) if pump.first_line else None,
           TO_HEALTH: round(ready - pump.app_ready, 2) if pump.app_ready else None,
           "log_span_s": phases.log_span_s, "disabled": phases.disabled,
           "phases": {p.name: p.seconds for p in phases.phases},
           "sources": {p.name: p.source for p in phases.phases}}
    if phases.log_span_s is not None:
        row[UNTIMED] = round(max(phases.log_span_s - phases.total_s, 0.0), 2)
    return row


def spread(values: list[float]) -> str:
    if not values:
        return "-"
    med = statistics.median(values)
    return f"{med:.1f}" if len(values) == 1 else f"{med:.1f} ({min(values):.1f}-{max(values):.1f})"


def table(rows: list[dict], modes: list[str]) -> str:
    from peagle_deploy.lifecycle.startup_phases import PHASES

    clock = "benchmark clock"
    order = [(BEFORE_LOG, "before vLLM's first line: imports", clock)]
    order += [(name, label, None) for name, label in PHASES.items()]
    order += [(UNTIMED, "in the log, between the phases above", "log timestamps"),
              (TO_HEALTH, "'Application startup complete.' to the first 200 on /health", clock),
              (WALL, "**wall: process start to the first 200 on /health**", clock)]
    head = "| phase | read from | " + " | ".join(modes) + " |\n|---|---|" + "---|" * len(modes) + "\n"
    body = []
    for key, label, source in order:
        mine = {mode: [r for r in rows if r["mode"] == mode] for mode in modes}
        if key in PHASES:
            cells = [spread([r["phases"][key] for r in mine[mode] if key in r["phases"]]) for mode in modes]
            source = ", ".join(sorted({r["sources"][key] for r in rows if key in r["sources"]})) or "-"
        else:
            cells = [spread([r[key] for r in mine[mode] if r.get(key) is not None]) for mode in modes]
        if key == "graphs" and all(cell == "-" for cell in cells):
            cells, source = ["GPU only, not measured here"] * len(modes), "vLLM's figure"
        if key == "compile" and all(cell == "-" for cell in cells) and any(r["disabled"] for r in rows):
            cells, source = ["off (--enforce-eager)"] * len(modes), "vLLM's line"
        if any(cell != "-" for cell in cells):
            body.append(f"| {label} | {source} | " + " | ".join(cells) + " |")
    return head + "\n".join(body)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--modes", default="off,p-eagle", help="comma-separated: off, p-eagle, eagle3")
    parser.add_argument("--runs", type=int, default=3, help="starts per mode")
    parser.add_argument("--compile", action="store_true", help="without --enforce-eager: torch.compile, empty caches")
    parser.add_argument("--json", type=Path, help="write every run here")
    parser.add_argument("--keep", action="store_true", help="keep the work folder (logs) and print its path")
    parser.add_argument("--table", type=Path, metavar="JSON", help="only print the table of runs written by --json")
    args = parser.parse_args(argv)
    modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    if args.table:
        rows = json.loads(args.table.read_text())
        print(table(rows, [m for m in modes if any(r["mode"] == m for r in rows)]))
        return
    from peagle_deploy.testing.tiny_models import build_mode_sensitive_drafter, build_tiny_models

    root = Path(tempfile.mkdtemp(prefix="peagle-cold-start-"))
    tiny = build_tiny_models(root / "tiny")
    drafter = build_mode_sensitive_drafter(tiny, root / "mode-sensitive")
    rows = []
    for run in range(args.runs):
        for mode in modes:
            row = one_start(mode, tiny.target, drafter, root / f"{mode}-{run}", args.compile)
            rows.append(row)
            print(f"run {run + 1} {mode}: wall {row[WALL]} s, before the log {row[BEFORE_LOG]} s, "
                  f"phases {row['phases']}, load {row['load_avg_1m']:.1f}", file=sys.stderr, flush=True)
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2))
    import importlib.metadata

    version = importlib.metadata.version("vllm")
    print(f"vLLM {version} (CPU build), tiny models (peagle_deploy.testing.tiny_models), "
          f"{'torch.compile, empty caches' if args.compile else '--enforce-eager'}, {args.runs} runs per mode, "
          f"{os.cpu_count()} CPUs, load average {statistics.median(r['load_avg_1m'] for r in rows):.1f} (median at "
          "each start); median (min-max):\n")
    print(table(rows, modes))
    if args.keep:
        print(f"\nlogs: {root}")
    else:
        import shutil

        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
