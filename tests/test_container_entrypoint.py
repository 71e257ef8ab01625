"""The container entrypoint, run for real with a stand-in `vllm` on PATH that records its argv: the argv is the contract."""

import json
import os
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
    ({"HF_MODEL_ID": "m", "SM_VLLM_PORT": "9000", "SM_VLLM_ENABLE_LORA": "False"}, ["serve", "m", "--port", "8080"]),
    ({"HF_MODEL_ID": "m", "SM_VLLM_CUDA_GRAPH_SIZES": "[1, 2, 4]"},
     ["serve", "m", "--port", "8080", "--cuda-graph-sizes", "1", "2", "4"]),
    ({"HF_MODEL_ID": "m", "SM_VLLM_ALLOWED_METHODS": '["GET"]', "SM_VLLM_ALLOWED_HEADERS": '["x-a"]'},
     ["serve", "m", "--port", "8080", "--allowed-headers", '["x-a"]', "--allowed-methods", '["GET"]']),
]


@pytest.mark.parametrize("env,argv", GOLDEN, ids=[str(i) for i in range(len(GOLDEN))])
def test_golden_env_to_argv(box, env, argv):
    out, recorded = run_entrypoint(box, env)
    assert out.returncode == 0, out.stderr
    assert recorded["argv"] == argv
    assert recorded["env"] == {k: v for k, v in env.items() if k.startswith("SM_VLLM_")}  # env reaches vLLM


def test_model_resolution_all_three_branches(box):
    """SM_VLLM_MODEL wins; else the model dir (/opt/ml/model, moved by PEAGLE_MODEL_DIR) if non-empty; else HF_MODEL_ID."""
    model_dir = box["tmp"] / "model"
    model_dir.mkdir()
    env = {"HF_MODEL_ID": "hub/id", "PEAGLE_MODEL_DIR": str(model_dir)}
    assert run_entrypoint(box, env)[1]["argv"][1] == "hub/id"  # empty dir: falls through to HF_MODEL_ID
    (model_dir / "config.json").write_text("{}")
    box["record"].unlink()
    assert run_entrypoint(box, env)[1]["argv"][1] == str(model_dir)
    box["record"].unlink()
    assert run_entrypoint(box, {**env, "SM_VLLM_MODEL": "/explicit"})[1]["argv"][1] == "/explicit"


def test_p_eagle_config_passes_as_one_argument(box):
    config = json.dumps({**SPEC_OK, "model": box["drafter"]})
    out, recorded = run_entrypoint(box, {"HF_MODEL_ID": "m", "SM_VLLM_SPECULATIVE_CONFIG": config})
    assert out.returncode == 0, out.stderr
    assert recorded["argv"] == ["serve", "m", "--port", "8080", "--speculative-config", config]


def test_print_args_does_not_start_vllm(box):
    out, recorded = run_entrypoint(box, {"HF_MODEL_ID": "m", "SM_VLLM_ENFORCE_EAGER": "true"}, "--print-args")
    assert out.returncode == 0 and recorded is None
    assert out.stdout.strip() == "vllm serve m --port 8080 --enforce-eager"


def test_sagemaker_serve_argument_is_accepted(box):
    """SageMaker runs `docker run IMAGE serve`: the entrypoint must start vLLM, not refuse the argument."""
    out, recorded = run_entrypoint(box, {"HF_MODEL_ID": "m"}, "serve")
    assert out.returncode == 0, out.stderr
    assert recorded["argv"] == ["serve", "m", "--port", "8080"]
    box["record"].unlink()
    refused, never = run_entrypoint(box, {"HF_MODEL_ID": "m"}, "train")
    assert refused.returncode == 2 and never is None and "unknown argument 'train'" in refused.stderr


INVALID = [
    ("not-json", lambda ok, d: "{not json", "is not valid JSON"),
    ("json-array", lambda ok, d: json.dumps([ok]), "must be one JSON object, got list"),
    ("unknown-field", lambda ok, d: json.dumps({**ok, "num_speculative_token": 3}),
     "fields vLLM does not accept: num_speculative_token"),
    ("method-not-eagle3", lambda ok, d: json.dumps({**ok, "method": "eagle"}), 'P-EAGLE needs "method": "eagle3"'),
    ("method-missing", lambda ok, d: json.dumps({k: v for k, v in ok.items() if k != "method"}), "but method is None"),
    # without parallel drafting too: vLLM itself would die on it seconds later with a pydantic docs URL
    ("method-typo-sequential", lambda ok, d: json.dumps({**ok, "method": "eagle-3", "parallel_drafting": False}),
     "method 'eagle-3' is not one vLLM 0.32.0 (no vLLM installed here) accepts; did you mean \"eagle3\"?"),
    ("method-p-eagle", lambda ok, d: json.dumps({**ok, "method": "p-eagle"}), 'did you mean "eagle3"?'),
    ("method-unknown", lambda ok, d: json.dumps({**ok, "method": "zzz"}), 'P-EAGLE and EAGLE-3 use "eagle3"'),
    ("method-not-a-string", lambda ok, d: json.dumps({**ok, "method": 3}), "method must be a string"),
    ("k-zero", lambda ok, d: json.dumps({**ok, "num_speculative_tokens": 0}), "num_speculative_tokens must be > 0, got 0"),
    ("k-negative", lambda ok, d: json.dumps({**ok, "num_speculative_tokens": -3}),
     "num_speculative_tokens must be > 0, got -3"),
    ("k-string", lambda ok, d: json.dumps({**ok, "num_speculative_tokens": "3"}), "must be a whole number, got '3'"),
    ("k-missing", lambda ok, d: json.dumps({k: v for k, v in ok.items() if k != "num_speculative_tokens"}),
     "has no num_speculative_tokens"),
    ("drafter-missing", lambda ok, d: json.dumps({**ok, "model": ok["model"] + "-missing"}),
     "does not exist (is the eagle channel mounted?)"),
    ("no-mask-token", lambda ok, d: json.dumps({**ok, "model": d["nomask"]}), "names no mask token id"),
    ("mask-token-nested-in-eagle-config", lambda ok, d: json.dumps({**ok, "model": d["nested"]}),
     "names no mask token id"),
    ("tensor-parallel-size-inside", lambda ok, d: json.dumps({**ok, "tensor_parallel_size": 2}),
     "must not set tensor_parallel_size"),
]


def _drafter(tmp, name, config):
    path = tmp / name
    path.mkdir()
    (path / "config.json").write_text(json.dumps(config))
    return str(path)


@pytest.mark.parametrize("make,message", [(m, msg) for _, m, msg in INVALID], ids=[i for i, _, _ in INVALID])
def test_invalid_speculative_config_stops_before_vllm(box, make, message):
    dirs = {"nomask": _drafter(box["tmp"], "nomask", {"architectures": ["LlamaForCausalLMEagle3"]}),
            "nested": _drafter(box["tmp"], "nested", {"eagle_config": {"ptd_token_id": 5}})}
    config = make({**SPEC_OK, "model": box["drafter"]}, dirs)
    out, recorded = run_entrypoint(box, {"HF_MODEL_ID": "m", "SM_VLLM_SPECULATIVE_CONFIG": config})
    assert out.returncode == 2, out.stderr
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("peagle-container: error: ") and message in lines[0], lines
    assert out.stdout == ""
    assert recorded is None and not box["record"].exists(), "vLLM was started"


@pytest.mark.parametrize("mask", [{"pard_token": 1}, {"ptd_token_id": 2}, {"mask_token_id": 3},
                                  {"dflash_config": {"mask_token_id": 4}}], ids=str)
def test_every_mask_token_name_vllm_reads_is_accepted(box, mask):
    drafter = _drafter(box["tmp"], "head", {"architectures": ["LlamaForCausalLMEagle3"], **mask})
    config = json.dumps({**SPEC_OK, "model": drafter})
    out, recorded = run_entrypoint(box, {"HF_MODEL_ID": "m", "SM_VLLM_SPECULATIVE_CONFIG": config})
    assert out.returncode == 0, out.stderr
    assert recorded["argv"][-2:] == ["--speculative-config", config]


def test_hub_drafter_id_is_not_checked_on_disk(box):
    config = json.dumps({**SPEC_OK, "model": "amazon/GPT-OSS-20B-P-EAGLE"})
    out, recorded = run_entrypoint(box, {"HF_MODEL_ID": "m", "SM_VLLM_SPECULATIVE_CONFIG": config})
    assert out.returncode == 0, out.stderr
    assert recorded["argv"][-1] == config


def test_no_model_at_all(box):
    out, recorded = run_entrypoint(box, {})
    assert out.returncode == 2 and "no model" in out.stderr and recorded is None


def test_entrypoint_needs_only_the_standard_library():
    """The Dockerfile installs peagle with --no-deps: the entrypoint must not import typer, rich, pydantic, boto3."""
    code = ("import sys, peagle_deploy.container.__main__; "
            "print(sorted({m.split('.')[0] for m in sys.modules} & {'typer', 'rich', 'pydantic', 'boto3', 'botocore'}))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and out.stdout.strip() == "[]", out.stdout + out.stderr


def test_method_list_is_the_installed_vllms_own(box, tmp_path):
    """With a vLLM beside the entrypoint its own `SpeculativeMethod` Literal decides (read, not imported)."""
    package = tmp_path / "site" / "vllm"
    (package / "config").mkdir(parents=True)
    (package / "__init__.py").write_text("raise ImportError('the entrypoint must not import vLLM')\n")
    (package / "config" / "speculative.py").write_text(
        "from typing import Literal\nMTPTypes = Literal['mtp', 'future_mtp']\n"
        "SpeculativeMethod = Literal['ngram', 'eagle3', MTPTypes]\n")
    env = {"HF_MODEL_ID": "m", "PYTHONPATH": str(tmp_path / "site")}
    for method, accepted in (("future_mtp", True), ("eagle3", True), ("medusa", False)):
        config = json.dumps({"method": method, "num_speculative_tokens": 2, "model": "hub/drafter"})
        out, recorded = run_entrypoint(box, {**env, "SM_VLLM_SPECULATIVE_CONFIG": config})
        assert (out.returncode == 0) is accepted, (method, out.stderr)
        if not accepted:
            assert out.stderr == ("peagle-container: error: SM_VLLM_SPECULATIVE_CONFIG method 'medusa' is not one "
                                  "vLLM (installed) accepts; P-EAGLE and EAGLE-3 use \"eagle3\"\n")
        box["record"].unlink(missing_ok=True)
