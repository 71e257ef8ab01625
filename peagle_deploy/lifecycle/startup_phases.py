"""How long vLLM's start-up took, phase by phase, read from vLLM's own log lines: what a cold start costs
(scale to zero wakes a container that starts from nothing: docs/hosting.md).

Phases, in the order vLLM runs them; they do not overlap, so their sum is at most the start's wall time:

| phase | from | vLLM's lines (0.32 source; older spellings too) |
|---|---|---|
| `api_server` | log timestamps | the first line of the start (the banner, "vLLM (API) server version") to the engine core's "Initializing a V1 LLM engine (v%s) with config" |
| `engine_start` | log timestamps | that line to the worker's "Starting to load model %s..." (worker process, its imports, distributed init) |
| `weights` | vLLM's figure, else timestamps | GPU: "Model loading took %s GiB memory and %.6f seconds" ("... %.4f GiB and ..." before), target and drafter; CPU (no such line): from "Starting to load model" to the last "Loading weights took %.2f seconds" |
| `compile` | vLLM's figure, else timestamps | "torch.compile took %.2f s in total" (one per compiled part, summed per process; "takes" in older releases; "torch.compile and initial profiling/warmup run together took ..."), else the engine line's "(compilation: %.2f s)"; CPU (its DYNAMO_TRACE_ONCE mode logs no figure): "Warming up model for the compilation..." to "Warming up done." |
| `graphs` | vLLM's figure | "Graph capturing finished in %.0f secs, took %.2f GiB" (CUDA graphs: GPU only) |
| `kv_cache` | vLLM's figures | "init engine (profile, create kv cache, warmup model) took %.2f s" ("seconds" before) less compile and graphs, which run inside it |
| `server` | log timestamps | the "init engine" line to the API server's "Starting vLLM server on %s" (tokenizer, chat template, routes) |

vLLM's log timestamps ("INFO 11-28 00:12:04 [file.py:N]") are whole seconds, so a phase read from them may be up
to a second long or short. The seconds before the first line (the Python imports of the entrypoint and vLLM) are
not in the log at all: a caller that timed the start knows them (benchmarks/bench_cold_start.py).
"--enforce-eager" (vLLM: "Enforce eager set, disabling torch.compile, CUDAGraphs, ...") leaves out compile and
graphs; `disabled` says so in vLLM's words. A log with several starts is read for its last one.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from datetime import datetime
from pathlib import Path

from pydantic import BaseModel, Field

from .startup_log import ENGINE_VERSION, is_banner, plain

PHASES = {
    "api_server": "API server: config, tokenizer, engine process",
    "engine_start": "engine and worker processes, up to loading",
    "weights": "model weights (target and drafter)",
    "compile": "torch.compile",
    "graphs": "CUDA graph capture",
    "kv_cache": "profile, KV cache, warm-up",
    "server": "API server ready",
}
FROM_VLLM = "vLLM's figure"
FROM_TIMESTAMPS = "log timestamps"

# vLLM's logger prefix: the level, then the time as "%m-%d %H:%M:%S" (no year, whole seconds)
STAMP = re.compile(r"\b(?:DEBUG|INFO|WARNING|ERROR|CRITICAL) (\d\d)-(\d\d) (\d\d):(\d\d):(\d\d)\b")
_LOAD_START = re.compile(r"Starting to load model ")
_MODEL_LOADING = re.compile(r"Model loading took [\d.]+ GiB (?:memory )?and (?P<s>[\d.]+) seconds")
_WEIGHTS = re.compile(r"Loading weights took (?P<s>[\d.]+) seconds")
_COMPILE = re.compile(r"torch\.compile (?:and initial profiling/warmup run together )?(?:took|takes) "
                      r"(?P<s>[\d.]+) s in total")
_CPU_WARMUP_START = re.compile(r"Warming up model for the compilation\.\.\.")
_CPU_WARMUP_DONE = re.compile(r"Warming up done\.")
_GRAPHS = re.compile(r"Graph capturing finished in (?P<s>[\d.]+) secs")
_INIT_ENGINE = re.compile(r"init engine \(profile, create kv cache, warmup model\) took (?P<s>[\d.]+) "
                          r"s(?:econds)?(?: \(compilation: (?P<compile>[\d.]+) s)?")
_SERVER = re.compile(r"Starting vLLM server on \S+|Starting vLLM API server(?: \d+)? on \S+")
_READY = re.compile(r"Application startup complete\.")
_PID = re.compile(r"^\s*\([\w-]+ pid=(\d+)\)")  # "(Worker_TP1 pid=11) "
_FILEINFO = re.compile(r"^\s*\[[^\]]*\]\s*")  # "[core.py:402] "
_LOGO = re.compile(r"[█▄▀]+\s*")  # the banner's ASCII logo around "version 0.32.0"
_EAGER = re.compile(r"Enforce eager set, disabling torch\.compile[^.]*\.")


class Phase(BaseModel):
    name: str
    label: str
    seconds: float
    source: str = Field(description=f"{FROM_VLLM!r}: a duration vLLM logged; {FROM_TIMESTAMPS!r}: the difference "
                        "of two lines' timestamps (whole seconds)")
    lines: list[str] = Field(description="vLLM's lines it was read from (messages without the logger prefix)")


class StartupPhases(BaseModel):
    """One start's phases, in vLLM's order; a phase vLLM did not log is absent."""

    source: str
    phases: list[Phase] = Field(default_factory=list)
    disabled: str | None = Field(None, description="vLLM's line when --enforce-eager left out compile and graphs")
    ready: bool = Field(False, description="uvicorn's 'Application startup complete.' was read")
    log_span_s: float | None = Field(None, description="timestamps: the first line of the start to 'Starting vLLM "
                                     "server on'")

    def get(self, name: str) -> Phase | None:
        return next((phase for phase in self.phases if phase.name == name), None)

    @property
    def total_s(self) -> float:
        return round(sum(phase.seconds for phase in self.phases), 2)

    def summary(self) -> str:
        if not self.phases:
            return "no vLLM start-up phases found"
        parts = [f"{PHASES[p.name]} {p.seconds:g} s" for p in self.phases]
        if self.disabled:
            parts.append("torch.compile and CUDA graphs off (--enforce-eager)")
        return ", ".join(parts)


def _message(line: str) -> str:
    """The message after vLLM's logger prefix ("(Worker pid=7) INFO 11-28 00:12:04 [file.py:N] ")."""
    match = STAMP.search(line)
    rest = line[match.end():] if match else line
    return _LOGO.sub("", _FILEINFO.sub("", rest)).strip()


def _stamp(line: str) -> float | None:
    """Seconds since the start of a leap year (vLLM logs no year): only differences are used."""
    if (m := STAMP.search(line)) is None:
        return None
    month, day, hour, minute, second = map(int, m.groups())
    try:
        return (datetime(2000, month, day, hour, minute, second) - datetime(2000, 1, 1)).total_seconds()
    except ValueError:
        return None


class _Start:
    """What one start logged: the timestamp and line of each marker, and vLLM's figures."""

    def __init__(self) -> None:
        self.marks: dict[str, tuple[float | None, str]] = {}
        self.model_loading: tuple[float, str] | None = None
        self.weights: list[tuple[float | None, str]] = []
        self.compiles: dict[str | None, list[tuple[float, str]]] = {}  # per process: each TP worker compiles
        self.graphs: tuple[float, str] | None = None
        self.init_engine: tuple[float, float | None, str] | None = None
        self.disabled: str | None = None
        self.ready = False

    def mark(self, name: str, stamp: float | None, message: str, *, first: bool = True) -> None:
        if not first or name not in self.marks:
            self.marks[name] = (stamp, message)


def _scan(lines: Iterable[str]) -> _Start:
    start = _Start()
    for raw in lines:
        line = plain(raw)
        if is_banner(line):
            start = _Start()  # the API server's banner: a start begins (a later one's phases are what count)
        stamp = _stamp(line)
        message = _message(line)
        if stamp is not None:
            start.mark("first", stamp, message)
        if ENGINE_VERSION.search(line):
            start.mark("engine", stamp, message[:120])
        elif _LOAD_START.search(line):
            start.mark("load", stamp, message)
        elif (m := _MODEL_LOADING.search(line)) is not None:
            start.model_loading = (float(m.group("s")), message)
        elif _WEIGHTS.search(line):
            start.weights.append((stamp, message))
        elif (m := _COMPILE.search(line)) is not None:
            pid = _PID.search(line)
            start.compiles.setdefault(pid.group(1) if pid else None, []).append((float(m.group("s")), message))
        elif _CPU_WARMUP_START.search(line):
            start.mark("warmup", stamp, message)
        elif _CPU_WARMUP_DONE.search(line):
            start.mark("warmup_done", stamp, message, first=False)
        elif (m := _GRAPHS.search(line)) is not None:
            start.graphs = (float(m.group("s")), message)
        elif (m := _INIT_ENGINE.search(line)) is not None:
            compile_s = float(m.group("compile")) if m.group("compile") else None
            start.init_engine = (float(m.group("s")), compile_s, message)
            start.mark("init_engine", stamp, message, first=False)
        elif _SERVER.search(line):
            start.mark("server", stamp, message, first=False)
        elif _READY.search(line):
            start.ready = True
        if start.disabled is None and (m := _EAGER.search(line)) is not None:
            start.disabled = m.group(0)
    return start


def _between(start: _Start, begin: str, end: str) -> tuple[float, list[str]] | None:
    """The seconds between two markers' timestamps, or None when either is missing or they run backwards."""
    if begin not in start.marks or end not in start.marks:
        return None
    (t0, line0), (t1, line1) = start.marks[begin], start.marks[end]
    if t0 is None or t1 is None or t1 < t0:
        return None
    return t1 - t0, [line0, line1]


def parse_phases(lines: Iterable[str], source: str) -> StartupPhases:
    """The phases of the last start in `lines` (any logger prefix, CloudWatch messages or a container's log)."""
    start = _scan(lines)
    result = StartupPhases(source=source, disabled=start.disabled, ready=start.ready)

    def add(name: str, seconds: float, how: str, lines_read: list[str]) -> None:
        result.phases.append(Phase(name=name, label=PHASES[name], seconds=round(max(seconds, 0.0), 2), source=how,
                                   lines=lines_read))

    if (span := _between(start, "first", "engine")) is not None:
        add("api_server", span[0], FROM_TIMESTAMPS, span[1])
    if (span := _between(start, "engine", "load")) is not None:
        add("engine_start", span[0], FROM_TIMESTAMPS, span[1])
    if start.model_loading is not None:
        add("weights", start.model_loading[0], FROM_VLLM, [start.model_loading[1]])
    elif start.weights and "load" in start.marks:
        start.marks["weights_done"] = start.weights[-1]
        if (span := _between(start, "load", "weights_done")) is not None:
            add("weights", span[0], FROM_TIMESTAMPS, span[1])
    compile_s: float | None = None
    if start.compiles:  # the parts one process compiled, summed; tensor-parallel workers compile side by side
        parts = max(start.compiles.values(), key=lambda found: sum(seconds for seconds, _ in found))
        compile_s = sum(seconds for seconds, _ in parts)
        add("compile", compile_s, FROM_VLLM, [line for _, line in parts])
    elif start.init_engine is not None and start.init_engine[1] is not None:
        compile_s = start.init_engine[1]
        add("compile", compile_s, FROM_VLLM, [start.init_engine[2]])
    elif (span := _between(start, "warmup", "warmup_done")) is not None:
        compile_s = span[0]
        add("compile", compile_s, FROM_TIMESTAMPS, span[1])
    if start.graphs is not None:
        add("graphs", start.graphs[0], FROM_VLLM, [start.graphs[1]])
    if start.init_engine is not None:
        inside = (compile_s or 0.0) + (start.graphs[0] if start.graphs else 0.0)
        add("kv_cache", start.init_engine[0] - inside, FROM_VLLM, [start.init_engine[2]])
    if (span := _between(start, "init_engine", "server")) is not None:
        add("server", span[0], FROM_TIMESTAMPS, span[1])
    if (span := _between(start, "first", "server")) is not None:
        result.log_span_s = span[0]
    return result


def read_phases(path: str | Path, source: str | None = None) -> StartupPhases:
    """From a container's log file (the tail vLLM's start is in)."""
    from ..vllm_failure import tail

    return parse_phases(tail(path, max_bytes=4_000_000), source=source or f"file:{path}")
