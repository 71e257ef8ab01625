"""The SDK traps of BRIEF section 5 that resolution must step around."""

import json
import shutil
import subprocess
import sys

import pytest

from peagle_deploy import jumpstart
from peagle_deploy.errors import UsageError

GEMMA = "huggingface-vlm-gemma-4-31b-it"


def test_hosting_eula_key_on_the_drafter_entry_never_reaches_the_create_model_shape(tmp_path, monkeypatch):
    """A spec whose drafter entry carries `hosting_eula_key` (the SDK then emits HostingEulaKey, which
    CreateModel rejects): the resolved drafter keeps only CreateModel's S3DataSource fields."""
    root = tmp_path / "jumpstart"
    shutil.copytree(jumpstart.shipped_root(), root)
    spec_path = next((root / "specs" / "community_models" / GEMMA).glob("specs_v*.json"))
    spec = json.loads(spec_path.read_text())
    entry = spec["inference_config_components"]["lmi-optimized"]["hosting_additional_data_sources"][
        "speculative_decoding"][0]
    entry["hosting_eula_key"] = "fmhMetadata/eula/gemmaEula.txt"
    spec_path.write_text(json.dumps(spec))
    monkeypatch.setattr(jumpstart, "shipped_root", lambda: root)

    resolved = jumpstart.resolve(GEMMA, region="us-east-1", offline=True)
    assert resolved.drafter is not None
    dumped = json.dumps(resolved.drafter.model_dump(exclude_none=True))
    assert "eulakey" not in dumped.lower() and "fmhMetadata" not in dumped
    assert set(json.loads(dumped)) <= {"S3Uri", "S3DataType", "CompressionType", "ModelAccessConfig"}
    # the EULA key makes the channel gated: CreateModel then needs AcceptEula on that data source
    assert resolved.drafter_gated and resolved.drafter.ModelAccessConfig == {"AcceptEula": True}


def test_unknown_version_is_a_usage_error_naming_the_fix():
    with pytest.raises(UsageError) as err:
        jumpstart.resolve("openai-reasoning-gpt-oss-20b", region="us-east-1", version="99.0.0", offline=True)
    assert "99.0.0" in str(err.value) and "--model-id" in str(err.value)


def test_resolution_needs_neither_sagemaker_serve_nor_the_factory_module():
    """With sagemaker-core alone `sagemaker.core.jumpstart.factory.utils` cannot even be imported (it
    needs sagemaker.serve): resolution must stay off that module; role validation lives in sagemaker.serve
    (ModelBuilder), so it cannot run either."""
    code = ("import sys; from peagle_deploy.jumpstart import resolve; "
            "s = resolve('openai-reasoning-gpt-oss-20b', region='us-east-1', offline=True); "
            "print(s.source, any(m.startswith('sagemaker.core.jumpstart.factory') for m in sys.modules), "
            "'sagemaker.serve' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split() == ["shipped", "False", "False"]


def test_no_credentials_falls_back_to_shipped_specs_without_asking_s3(monkeypatch, tmp_path):
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE",
                 "AWS_ENDPOINT_URL", "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI", "AWS_CONTAINER_CREDENTIALS_FULL_URI",
                 "AWS_WEB_IDENTITY_TOKEN_FILE", "AWS_JUMPSTART_MANIFEST_LOCAL_ROOT_DIR_OVERRIDE",
                 "AWS_JUMPSTART_SPECS_LOCAL_ROOT_DIR_OVERRIDE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")  # no instance-metadata probe off this machine
    spec = jumpstart.resolve("huggingface-llm-qwen3-coder-30b-a3b-instruct", region="us-east-1")
    assert spec.source == "shipped"
    assert spec.source_detail.startswith("no AWS credentials found")
    assert spec.unverified  # the Qwen spec was never seen: its guesses are flagged, not presented as fact
