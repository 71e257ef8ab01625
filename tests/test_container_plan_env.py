"""The env a `peagle deploy --image` plan sends to SageMaker is accepted by the bundled entrypoint as is.

The plan's CreateModel Environment (from the shipped JumpStart spec) goes through the real entrypoint with a
stand-in `vllm`; only the two SageMaker mount points are moved into tmp_path, as SageMaker would fill them.
"""

import json
import os
import stat
import subprocess
import sys

from .cli_runner import run_cli

EAGLE_MOUNT = "/opt/ml/additional-model-data-sources/eagle"


def _plan_environment(image):
    result = run_cli("deploy", "qwen3-coder", "--image", image, "--dry-run", "--offline", "--region", "us-east-1",
                     "--role", "arn:aws:iam::111122223333:role/sm", "--json")
    assert result.code == 0, result.stderr
    create_model = json.loads(result.stdout)["plan"]["create_model"]
    container = create_model.get("PrimaryContainer") or create_model["Containers"][0]
    assert container["Image"] == image
    channels = [source["ChannelName"] for source in container["AdditionalModelDataSources"]]
    assert channels == ["eagle"]  # --image keeps JumpStart's drafter channel
    return container["Environment"]


def test_deploy_plan_environment_starts_vllm_with_the_drafter(tmp_path):
    env = _plan_environment("111122223333.dkr.ecr.us-east-1.amazonaws.com/peagle-vllm:0.1.0")
    speculative = json.loads(env["SM_VLLM_SPECULATIVE_CONFIG"])
    assert speculative["model"] == EAGLE_MOUNT and speculative["parallel_drafting"] is True

    model_dir, drafter, bin_dir = tmp_path / "model", tmp_path / "eagle", tmp_path / "bin"
    for path in (model_dir, drafter, bin_dir):
        path.mkdir()
    (model_dir / "config.json").write_text("{}")
    (drafter / "config.json").write_text(json.dumps({"architectures": ["LlamaForCausalLMEagle3"], "ptd_token_id": 1}))
    record = tmp_path / "record.json"
    fake = bin_dir / "vllm"
    fake.write_text(f"#!{sys.executable}\nimport json, sys\njson.dump(sys.argv[1:], open({str(record)!r}, 'w'))\n")
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR)

    moved = env["SM_VLLM_SPECULATIVE_CONFIG"].replace(EAGLE_MOUNT, str(drafter))
    run_env = {**env, "SM_VLLM_SPECULATIVE_CONFIG": moved, "PEAGLE_MODEL_DIR": str(model_dir),
               "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}", "HOME": str(tmp_path)}
    out = subprocess.run([sys.executable, "-m", "peagle_deploy.container"], env=run_env, cwd=tmp_path,
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr

    assert sorted(k for k in env if k.startswith("SM_VLLM_")) == [
        "SM_VLLM_MAX_MODEL_LEN", "SM_VLLM_SPECULATIVE_CONFIG", "SM_VLLM_TENSOR_PARALLEL_SIZE"]
    assert json.loads(record.read_text()) == [
        "serve", str(model_dir), "--port", "8080", "--max-model-len", env["SM_VLLM_MAX_MODEL_LEN"],
        "--speculative-config", moved, "--tensor-parallel-size", env["SM_VLLM_TENSOR_PARALLEL_SIZE"]]
