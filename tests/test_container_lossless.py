"""The bundled container's checks of the newer speculative-config keys (issue 46): a lossy rejection method refused
unless allowed, synthetic acceptance said, vLLM's value rules applied before it starts, and per-request acceptance
turned on where the installed vLLM has it. In-process: `main(["--print-args"])` returns before it would exec vLLM."""

import json

import pytest

from peagle_deploy.container import __main__ as entrypoint
from peagle_deploy.container import lossless
from peagle_deploy.container.args import ContainerConfigError, build_argv, with_defaults
from peagle_deploy.container.validate import validate
from peagle_deploy.container.vllm_version import has_per_request_spec_metrics

BASE = {"method": "eagle3", "num_speculative_tokens": 3, "model": "hub/drafter"}


def env_with(**added):
    return {"HF_MODEL_ID": "m", "SM_VLLM_SPECULATIVE_CONFIG": json.dumps({**BASE, **added})}


@pytest.mark.parametrize("method,why", [("fly", "fly rejection"), ("synthetic", "coin flip")])
def test_a_lossy_rejection_method_is_refused_unless_allowed(method, why):
    extra = {"synthetic_acceptance_length": 2.0} if method == "synthetic" else {}
    env = env_with(rejection_sample_method=method, **extra)
    with pytest.raises(ContainerConfigError) as err:
        validate(env, vllm_version="0.33.0")
    assert f"rejection_sample_method {method!r} is lossy" in str(err.value) and why in str(err.value)
    assert str(err.value).endswith("set PEAGLE_ALLOW_LOSSY=true to run it anyway")
    for value in ("true", "1", "YES"):
        assert validate({**env, "PEAGLE_ALLOW_LOSSY": value}, vllm_version="0.33.0")["rejection_sample_method"] == method
    with pytest.raises(ContainerConfigError):
        validate({**env, "PEAGLE_ALLOW_LOSSY": "false"}, vllm_version="0.33.0")


@pytest.mark.parametrize("method", ["standard", "block"])
def test_lossless_rejection_methods_pass(method):
    assert validate(env_with(rejection_sample_method=method), vllm_version="0.32.0")["rejection_sample_method"] == method
    assert lossless.warnings({**BASE, "rejection_sample_method": method}) == []


def test_synthetic_acceptance_is_said_in_one_line_whenever_it_runs():
    config = {**BASE, "rejection_sample_method": "synthetic", "synthetic_acceptance_length": 2.5}
    lines = lossless.warnings(config)
    assert len(lines) == 2 and lines[0].startswith("synthetic acceptance: ") and "measure no drafter" in lines[0]
    assert "running it because PEAGLE_ALLOW_LOSSY is set" in lines[1]


@pytest.mark.parametrize("added,message", [
    ({"rejection_sample_method": "blok"}, "rejection_sample_method 'blok' is not one vLLM accepts (block, fly, "
                                          "standard, synthetic)"),
    ({"draft_sample_method": "random"}, "draft_sample_method 'random' is not one vLLM accepts"),
    ({"synthetic_acceptance_length": 2.0}, "need rejection_sample_method \"synthetic\""),
    ({"rejection_sample_method": "synthetic"}, "needs exactly one of synthetic_acceptance_rates or "
                                               "synthetic_acceptance_length"),
    ({"rejection_sample_method": "synthetic", "synthetic_acceptance_length": 5}, "must be in [1, 4], got 5"),
    ({"rejection_sample_method": "synthetic", "synthetic_acceptance_rates": [0.5, 0.6, 0.1]},
     "must be 3 non-increasing values in [0, 1]"),
    ({"num_speculative_tokens_per_batch_size": []}, "must be a non-empty list"),
    ({"num_speculative_tokens_per_batch_size": [[1, 8]]}, "each entry is [range_start, range_end, K]"),
    ({"num_speculative_tokens_per_batch_size": [[1, 8, -1]]}, "needs 0 < range_start <= range_end and K >= 0"),
    ({"num_speculative_tokens_per_batch_size": [[2, 8, 3]]}, "the first range must start at batch size 1"),
    ({"num_speculative_tokens_per_batch_size": [[1, 8, 3], [8, 16, 1]]}, "the batch-size ranges overlap"),
])
def test_newer_keys_get_vllms_own_value_rules(added, message):
    """vLLM 0.32.0's SpeculativeConfig and dynamic-schedule rules, checked in a second instead of at start-up."""
    env = {**env_with(**added), "PEAGLE_ALLOW_LOSSY": "true"}
    with pytest.raises(ContainerConfigError) as err:
        validate(env, vllm_version="0.32.0")
    assert message in str(err.value)


def test_valid_newer_keys_pass():
    config = validate(env_with(draft_sample_method="probabilistic", rejection_sample_method="block",
                               num_speculative_tokens_per_batch_size=[[1, 8, 3], [16, 256, 1]]), vllm_version="0.32.0")
    assert config["num_speculative_tokens_per_batch_size"] == [[1, 8, 3], [16, 256, 1]]


def test_the_installed_vllms_own_literal_decides(monkeypatch):
    """vLLM 0.32.0 has no fly: with it installed, fly is not a value it accepts (allowed or not)."""
    monkeypatch.setattr(lossless, "installed_literal",
                        lambda name: frozenset({"standard", "synthetic", "block"}) if name == "RejectionSampleMethod"
                        else None)
    env = {**env_with(rejection_sample_method="fly"), "PEAGLE_ALLOW_LOSSY": "true"}
    with pytest.raises(ContainerConfigError, match=r"'fly' is not one vLLM 0.32.0 accepts \(block, standard, "
                                                   r"synthetic\)"):
        validate(env, vllm_version="0.32.0")


@pytest.mark.parametrize("key", ["SM_VLLM_speculative_config", "SM_VLLM_Speculative_Config", "SM_VLLM_SPECULATIVE_CONF",
                                 "SM_VLLM_SPECU"])
def test_another_spelling_of_the_speculative_config_is_refused(key):
    """The entrypoint lowercases flag names and vLLM's argparse completes an unambiguous prefix: each of these would
    reach vLLM as --speculative-config with no check at all."""
    assert build_argv({"HF_MODEL_ID": "m", key: "{}"})[5].startswith("--specu")  # what it would become
    with pytest.raises(ContainerConfigError, match=f"{key} reaches vLLM as --speculative-config and skips every "
                                                   "check of it; spell it SM_VLLM_SPECULATIVE_CONFIG"):
        validate({"HF_MODEL_ID": "m", key: json.dumps({**BASE, "rejection_sample_method": "fly"})})
    assert lossless.speculative_spellings({"SM_VLLM_SPEC_TOKENS": "3", "SM_VLLM_SPECULATIVE_CONFIG": "{}"}) == []


def test_per_request_acceptance_without_speculation_is_refused():
    """vLLM 0.32.0 raises `--per-request-spec-decode-metrics requires speculative decoding` at start-up."""
    with pytest.raises(ContainerConfigError, match="SM_VLLM_PER_REQUEST_SPEC_DECODE_METRICS needs speculative"):
        validate({"HF_MODEL_ID": "m", "SM_VLLM_PER_REQUEST_SPEC_DECODE_METRICS": "summary"})
    assert validate({"HF_MODEL_ID": "m", "SM_VLLM_PER_REQUEST_SPEC_DECODE_METRICS": "none"}) is None


@pytest.mark.parametrize("version,on", [("0.28.0", False), ("0.29.0", True), ("0.32.0+cpu", True), ("0.33.0", True),
                                        ("0.18.0", False), (None, False)])
def test_per_request_acceptance_is_turned_on_where_the_installed_vllm_has_it(version, on):
    assert has_per_request_spec_metrics(version) is (None if version is None else on)
    env = env_with()
    argv = build_argv(with_defaults(env, version))
    assert (argv[5:7] == ["--per-request-spec-decode-metrics", "summary"]) is on, argv  # sorted: before --speculative
    assert "--per-request-spec-decode-metrics" not in build_argv(with_defaults({"HF_MODEL_ID": "m"}, version))
    kept = build_argv(with_defaults({**env, "SM_VLLM_PER_REQUEST_SPEC_DECODE_METRICS": "none"}, version))
    assert kept[kept.index("--per-request-spec-decode-metrics") + 1] == "none"  # the environment's own value wins


def run_main(monkeypatch, capsys, env, version):
    monkeypatch.setattr(entrypoint.os, "environ", env)
    monkeypatch.setattr(entrypoint, "installed_vllm_version", lambda: version)
    code = entrypoint.main(["--print-args"])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_entrypoint_runs_vllm_with_per_request_acceptance_and_says_synthetic(monkeypatch, capsys):
    env = {**env_with(rejection_sample_method="synthetic", synthetic_acceptance_length=2.5),
           "PEAGLE_ALLOW_LOSSY": "true"}
    code, out, err = run_main(monkeypatch, capsys, env, "0.32.0")
    assert code == 0, err
    assert " --per-request-spec-decode-metrics summary --speculative-config " in out
    assert err.splitlines()[0].startswith("peagle-container: warning: synthetic acceptance: ")


def test_entrypoint_refuses_fly_in_one_line_before_vllm(monkeypatch, capsys):
    code, out, err = run_main(monkeypatch, capsys, env_with(rejection_sample_method="fly"), "0.33.0")
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and err.startswith("peagle-container: error: SM_VLLM_SPECULATIVE_CONFIG "
                                                   "rejection_sample_method 'fly' is lossy")
