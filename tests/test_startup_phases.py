"""vLLM's start-up phases (weights, compile, graphs, KV cache, server) read from its own log lines.

The 0.32.0 CPU logs in tests/fixtures/vllm_logs/ are real: the P-EAGLE and EAGLE-3 starts of the tier's tiny
models with --enforce-eager, a start that vLLM refused while loading the drafter (no mask_hidden), and
`0.32.0-cpu-compile-start.log`, the tiny target without --enforce-eager (torch.compile on CPU, 2 loaded cores).
The GPU lines are vLLM 0.32.0's format strings (gpu_model_runner.py, compilation/monitor.py, v1/engine/core.py)
filled in, and the older spellings those of earlier releases' source; no GPU log of ours has them.
"""

from pathlib import Path

import pytest

from peagle_deploy.lifecycle.startup_phases import FROM_TIMESTAMPS, FROM_VLLM, parse_phases, read_phases

LOGS = Path(__file__).parent / "fixtures" / "vllm_logs"
EAGER_PHASES = ["api_server", "engine_start", "weights", "kv_cache", "server"]


def lines(name):
    return (LOGS / name).read_text(encoding="utf-8").splitlines()


def phases_of(result):
    return {phase.name: (phase.seconds, phase.source) for phase in result.phases}


def test_real_032_p_eagle_start_eager():
    result = read_phases(LOGS / "0.32.0-cpu-p-eagle-start.log")
    assert [p.name for p in result.phases] == EAGER_PHASES
    assert phases_of(result) == {
        "api_server": (25.0, FROM_TIMESTAMPS),    # 17:02:43 banner -> 17:03:08 engine core
        "engine_start": (28.0, FROM_TIMESTAMPS),  # -> 17:03:36 "Starting to load model"
        "weights": (3.0, FROM_TIMESTAMPS),        # -> 17:03:39, the drafter's "Loading weights took 0.04 seconds"
        "kv_cache": (6.3, FROM_VLLM),             # "init engine (...) took 6.30 s": no compile, no graphs
        "server": (1.0, FROM_TIMESTAMPS),         # 17:03:47 -> 17:03:48 "Starting vLLM server on"
    }
    assert result.get("weights").lines == ["Starting to load model /tmp/h2/tiny/target...",
                                            "Loading weights took 0.04 seconds"]
    assert result.disabled.startswith("Enforce eager set, disabling torch.compile, CUDAGraphs")
    assert result.ready is True
    assert result.log_span_s == 65.0 and result.total_s == 63.3 <= result.log_span_s
    assert result.summary() == (
        "API server: config, tokenizer, engine process 25 s, engine and worker processes, up to loading 28 s, "
        "model weights (target and drafter) 3 s, profile, KV cache, warm-up 6.3 s, API server ready 1 s, "
        "torch.compile and CUDA graphs off (--enforce-eager)")


def test_every_phase_line_is_a_line_of_the_log():
    text = (LOGS / "0.32.0-cpu-eagle3-start.log").read_text(encoding="utf-8")
    result = parse_phases(text.splitlines(), "file")
    assert [p.name for p in result.phases] == EAGER_PHASES
    for phase in result.phases:
        assert phase.lines and all(line and line in text for line in phase.lines), phase
    assert result.get("api_server").lines[0] == "version 0.32.0"  # the banner without its ASCII logo


def test_real_032_cpu_compile_is_timed_from_its_warm_up_lines():
    """The CPU build compiles in DYNAMO_TRACE_ONCE mode, which logs no "torch.compile took" figure: the phase
    is the worker's "Warming up model for the compilation..." to "Warming up done.", inside init engine."""
    result = read_phases(LOGS / "0.32.0-cpu-compile-start.log")
    assert [p.name for p in result.phases] == ["api_server", "engine_start", "weights", "compile", "kv_cache",
                                               "server"]
    assert result.get("compile").seconds == 120.0 and result.get("compile").source == FROM_TIMESTAMPS
    assert result.get("compile").lines == ["Warming up model for the compilation...", "Warming up done."]
    assert result.get("kv_cache").seconds == pytest.approx(0.83)  # init engine's 120.83 s less the compile
    assert result.disabled is None and result.ready is True


def test_a_start_vllm_refused_has_the_phases_it_reached():
    result = read_phases(LOGS / "0.32.0-cpu-no-mask-hidden.log")
    assert [p.name for p in result.phases] == ["api_server", "engine_start", "weights"]
    assert result.ready is False and result.log_span_s is None


@pytest.mark.parametrize("name", ["0.32.0-cpu-bad-argument.log", "0.32.0-cpu-missing-model.log"])
def test_no_phases_before_the_engine(name):
    result = read_phases(LOGS / name)
    assert [p.name for p in result.phases] in ([], ["api_server"])
    assert "kv_cache" not in [p.name for p in result.phases]


def test_no_log_at_all(tmp_path):
    result = read_phases(tmp_path / "missing.log")
    assert result.phases == [] and result.summary() == "no vLLM start-up phases found"


def test_the_last_start_in_a_log_counts():
    result = parse_phases(lines("0.32.0-cpu-eagle3-start.log") + lines("0.32.0-cpu-p-eagle-start.log"), "file")
    assert phases_of(result)["api_server"] == (25.0, FROM_TIMESTAMPS)
    assert phases_of(result)["kv_cache"] == (6.3, FROM_VLLM)


GPU_032 = [  # vLLM 0.32.0's format strings filled in, the GPU path (P-EAGLE, compiled, CUDA graphs)
    "(APIServer pid=7) INFO 11-28 10:00:00 [api_utils.py:347]  ▄▄ ▄█ █     █     █ ▀▄▀ █  version 0.32.0",
    "(EngineCore pid=9) INFO 11-28 10:00:20 [core.py:133] Initializing a V1 LLM engine (v0.32.0) with config: "
    "model='/opt/ml/model', speculative_config=SpeculativeConfig(method='eagle3', model='/opt/ml/"
    "additional-model-data-sources/eagle', num_spec_tokens=3)",
    "(Worker pid=11) INFO 11-28 10:00:31 [gpu_model_runner.py:5040] Starting to load model /opt/ml/model...",
    "(Worker pid=11) INFO 11-28 10:01:40 [default_loader.py:502] Loading weights took 66.20 seconds",
    "(Worker pid=11) INFO 11-28 10:01:41 [gpu_model_runner.py:5071] Loading drafter model...",
    "(Worker pid=11) INFO 11-28 10:01:42 [default_loader.py:502] Loading weights took 0.85 seconds",
    "(Worker pid=11) INFO 11-28 10:01:42 [gpu_model_runner.py:5150] Model loading took 57.12 GiB memory and "
    "71.304521 seconds",
    "(Worker pid=11) INFO 11-28 10:01:43 [monitor.py:40] [backbone] Starting torch.compile",
    "(Worker pid=11) INFO 11-28 10:02:20 [monitor.py:63] [backbone] torch.compile took 37.41 s in total",
    "(Worker pid=11) INFO 11-28 10:02:25 [monitor.py:63] [eagle_head] torch.compile took 4.59 s in total",
    "(Worker pid=11) INFO 11-28 10:02:47 [gpu_model_runner.py:6582] Graph capturing finished in 12 secs, "
    "took 0.61 GiB",
    "(EngineCore pid=9) INFO 11-28 10:02:49 [core.py:396] init engine (profile, create kv cache, warmup model) "
    "took 65.80 s (compilation: 42.00 s)",
    "(APIServer pid=7) INFO 11-28 10:02:56 [entry.py:140] Starting vLLM server on http://0.0.0.0:8080",
    "INFO:     Application startup complete.",
]


def test_gpu_032_lines_use_vllms_own_figures():
    result = parse_phases(GPU_032, "cloudwatch")
    assert phases_of(result) == {
        "api_server": (20.0, FROM_TIMESTAMPS),
        "engine_start": (11.0, FROM_TIMESTAMPS),
        "weights": (71.3, FROM_VLLM),     # target and drafter in one figure, not the per-model lines
        "compile": (42.0, FROM_VLLM),     # both compiled parts
        "graphs": (12.0, FROM_VLLM),
        "kv_cache": (11.8, FROM_VLLM),    # 65.80 - 42.00 - 12
        "server": (7.0, FROM_TIMESTAMPS),
    }
    assert [p.name for p in result.phases] == ["api_server", "engine_start", "weights", "compile", "graphs",
                                               "kv_cache", "server"]
    assert result.total_s <= result.log_span_s == 176.0
    assert result.ready is True and result.disabled is None


def test_compilation_from_the_engine_line_when_no_compile_line_was_read():
    engine = [line for line in GPU_032 if "torch.compile" not in line]
    result = parse_phases(engine, "cloudwatch")
    assert phases_of(result)["compile"] == (42.0, FROM_VLLM)
    assert result.get("compile").lines == ["init engine (profile, create kv cache, warmup model) took 65.80 s "
                                           "(compilation: 42.00 s)"]


def test_older_spellings():
    older = [  # 0.7-0.10: "takes", "%.4f GiB and", "seconds", "vLLM API server version", "Starting vLLM API server"
        "INFO 03-07 03:06:40 [api_server.py:912] vLLM API server version 0.8.5",
        "INFO 03-07 03:06:45 [core.py:58] Initializing a V1 LLM engine (v0.8.5) with config: model='m'",
        "INFO 03-07 03:06:47 [gpu_model_runner.py:1329] Starting to load model m...",
        "INFO 03-07 03:06:55 [gpu_model_runner.py:1347] Model loading took 14.9927 GiB and 7.512345 seconds",
        "INFO 03-07 03:07:10 [monitor.py:33] torch.compile takes 13.05 s in total",
        "INFO 03-07 03:07:20 [gpu_model_runner.py:1686] Graph capturing finished in 9 secs, took 0.52 GiB",
        "INFO 03-07 03:07:21 [core.py:159] init engine (profile, create kv cache, warmup model) took 25.40 seconds",
        "INFO 03-07 03:07:22 [api_server.py:1090] Starting vLLM API server 0 on http://0.0.0.0:8080",
    ]
    result = parse_phases(older, "file")
    assert phases_of(result) == {
        "api_server": (5.0, FROM_TIMESTAMPS), "engine_start": (2.0, FROM_TIMESTAMPS),
        "weights": (7.51, FROM_VLLM), "compile": (13.05, FROM_VLLM), "graphs": (9.0, FROM_VLLM),
        "kv_cache": (3.35, FROM_VLLM), "server": (1.0, FROM_TIMESTAMPS)}
    assert result.ready is False  # no uvicorn line read


def test_timestamps_running_backwards_give_no_phase():
    shuffled = [GPU_032[0].replace("10:00:00", "10:00:30"), *GPU_032[1:]]  # banner after the engine line
    result = parse_phases(shuffled, "cloudwatch")
    assert result.get("api_server") is None and result.get("engine_start") is not None


def test_tensor_parallel_workers_compile_side_by_side():
    """Each TP worker logs its own compile: the phase is one worker's parts summed, not every worker's."""
    tp = [*GPU_032[:8],
          "(Worker_TP0 pid=11) INFO 11-28 10:02:20 [monitor.py:63] [backbone] torch.compile took 37.41 s in total",
          "(Worker_TP1 pid=12) INFO 11-28 10:02:21 [monitor.py:63] [backbone] torch.compile took 38.02 s in total",
          "(Worker_TP0 pid=11) INFO 11-28 10:02:25 [monitor.py:63] [eagle_head] torch.compile took 4.59 s in total",
          "(Worker_TP1 pid=12) INFO 11-28 10:02:25 [monitor.py:63] [eagle_head] torch.compile took 3.70 s in total",
          *GPU_032[10:]]
    result = parse_phases(tp, "cloudwatch")
    assert phases_of(result)["compile"] == (42.0, FROM_VLLM)  # TP0: 37.41 + 4.59; TP1's 41.72 is less
    assert [line.split("] ")[0] for line in result.get("compile").lines] == ["[backbone", "[eagle_head"]
    assert phases_of(result)["kv_cache"] == (11.8, FROM_VLLM)
