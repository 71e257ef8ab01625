"""vLLM's start-up phases read from a real start: the tier's smallest server (mode off, pooled), its own log."""

import re

import pytest

from peagle_deploy.lifecycle.startup_phases import parse_phases

pytestmark = pytest.mark.real_vllm
USES_SERVER_POOL = True

# what each phase is read from, as this test finds it in the log for itself
LOGGED = {"weights": r"Loading weights took|Model loading took",
          "compile": r"torch\.compile .*?(?:took|takes) [\d.]+ s in total|Warming up model for the compilation",
          "graphs": r"Graph capturing finished",
          "kv_cache": r"init engine \(profile, create kv cache, warmup model\) took",
          "engine_start": r"Starting to load model", "server": r"Starting vLLM server on"}


def test_every_phase_vllm_logged_is_read_and_they_fit_in_the_wall_time(off_server):
    text = off_server.log()
    result = parse_phases(text.splitlines(), "file")
    names = [phase.name for phase in result.phases]
    logged = {name for name, pattern in LOGGED.items() if re.search(pattern, text)}
    assert logged == {"weights", "kv_cache", "engine_start", "server"}  # --enforce-eager: no compile, no graphs
    assert logged | {"api_server"} == set(names), result
    assert names == ["api_server", "engine_start", "weights", "kv_cache", "server"]  # vLLM's order
    assert result.disabled and "disabling torch.compile" in result.disabled and result.ready
    for phase in result.phases:
        assert phase.seconds >= 0 and phase.lines and all(line in text for line in phase.lines), phase
    # init engine's own figure, as vLLM printed it (nothing ran inside it to subtract)
    [init_engine] = re.findall(r"warmup model\) took ([\d.]+) s", text)
    assert result.get("kv_cache").seconds == pytest.approx(float(init_engine))
    # the phases do not overlap: together at most the time from starting the process to /ping answering
    assert off_server.started_s is not None
    assert result.total_s <= off_server.started_s, (result.summary(), off_server.started_s)
    assert result.log_span_s is not None and result.total_s <= result.log_span_s + 1
