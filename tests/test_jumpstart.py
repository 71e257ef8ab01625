"""JumpStart resolution through the real SDK: shipped specs (local override) and an emulated S3 bucket."""

import json
import subprocess
import sys

import pytest

from peagle_deploy import jumpstart
from peagle_deploy.errors import UsageError
from peagle_deploy.plan import PlanRequest, build_plan
from peagle_deploy.speculative import Mode

MODELS = {
    "openai-reasoning-gpt-oss-20b": "gpt-oss-20b-p-eagle",
    "openai-reasoning-gpt-oss-120b": "gpt-oss-120b-p-eagle",
    "huggingface-llm-qwen3-coder-30b-a3b-instruct": "qwen3-coder-30b-a3b-instruct-p-eagle",
    "huggingface-vlm-gemma-4-31b-it": "gemma-4-31b-it-p-eagle",
}


@pytest.fixture
def aws_env(monkeypatch):
    for name in ("AWS_PROFILE", "AWS_ENDPOINT_URL", "AWS_JUMPSTART_MANIFEST_LOCAL_ROOT_DIR_OVERRIDE",
                 "AWS_JUMPSTART_SPECS_LOCAL_ROOT_DIR_OVERRIDE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")


@pytest.mark.parametrize("model_id,drafter", MODELS.items())
def test_offline_resolution_of_every_shipped_spec(model_id, drafter):
    spec = jumpstart.resolve(model_id, region="us-west-2", offline=True)
    assert spec.source == "shipped" and "offline" in spec.source_detail
    assert spec.inference_config == "lmi-optimized"
    assert spec.image_uri == ("763104351884.dkr.ecr.us-west-2.amazonaws.com/"
                              "vllm:0.18.0-gpu-py312-cu129-ubuntu22.04-sagemaker")
    assert spec.drafter.S3Uri.endswith(f"lmi-eagle-heads/models/{drafter}/")
    assert spec.drafter.S3Uri.startswith("s3://jumpstart-cache-prod-us-west-2/")
    assert json.loads(spec.environment["SM_VLLM_SPECULATIVE_CONFIG"])["parallel_drafting"] is True
    assert spec.startup_health_check_timeout_s == 3600 and spec.model_data_download_timeout_s == 3600
    assert "ml.g7e.2xlarge" in spec.supported_instance_types


def test_only_the_real_spec_is_fully_verified():
    assert jumpstart.resolve("openai-reasoning-gpt-oss-20b", region="us-east-1", offline=True).unverified == {}
    qwen = jumpstart.resolve("huggingface-llm-qwen3-coder-30b-a3b-instruct", region="us-east-1", offline=True)
    assert "inference_config_components.lmi-optimized.hosting_additional_data_sources" in qwen.unverified


def test_gemma_is_gated_in_the_private_bucket():
    spec = jumpstart.resolve("huggingface-vlm-gemma-4-31b-it", region="us-east-1", offline=True)
    assert spec.gated
    assert spec.model_data.S3Uri.startswith("s3://jumpstart-private-cache-prod-us-east-1/")


def test_plan_from_real_spec_overrides_spec_default_k_and_bodies_are_valid():
    """The spec's own SM_VLLM_SPECULATIVE_CONFIG says K=3: the user's K must win (the SDK's override trap)."""
    from .aws_shapes import assert_valid_request

    for model, extra in (("gpt-oss-20b", {}), ("gemma-4-31b", {"accept_eula": True})):
        plan = build_plan(PlanRequest(model=model, k=7, offline=True, role="arn:aws:iam::123456789012:role/r",
                                      **extra))
        env = plan.create_model["PrimaryContainer"]["Environment"]
        assert json.loads(env["SM_VLLM_SPECULATIVE_CONFIG"])["num_speculative_tokens"] == 7
        assert_valid_request("sagemaker", "CreateModel", plan.create_model)  # no SDK-only field (HostingEulaKey)
        assert_valid_request("sagemaker", "CreateEndpointConfig", plan.create_endpoint_config)
        assert_valid_request("sagemaker", "CreateEndpoint", plan.create_endpoint)
        off = build_plan(PlanRequest(model=model, mode=Mode.OFF, offline=True, **extra))
        assert "SM_VLLM_SPECULATIVE_CONFIG" not in off.create_model["PrimaryContainer"]["Environment"]


def test_g7e_instance_outside_the_real_spec_list_is_refused():
    with pytest.raises(UsageError) as err:
        build_plan(PlanRequest(model="gpt-oss-20b", instance_type="ml.g7e.12xlarge", offline=True))
    assert "does not support ml.g7e.12xlarge" in str(err.value) and "ml.g7e.2xlarge" in str(err.value)


def test_region_without_jumpstart_bucket():
    with pytest.raises(UsageError) as err:
        jumpstart.resolve("openai-reasoning-gpt-oss-20b", region="mars-north-1", offline=True)
    assert "has no JumpStart bucket" in str(err.value) and "us-east-1" in str(err.value)


def test_unknown_model_id():
    with pytest.raises(UsageError) as err:
        jumpstart.resolve("no-such-model", region="us-east-1", offline=True)
    assert "--model-id" in str(err.value)


def test_live_resolution_reads_the_bucket_through_boto3(aws_env):
    """mock_aws S3 seeded in the real bucket layout: the SDK path answers with source=sdk."""
    import boto3
    from moto import mock_aws

    from peagle_deploy.testing.jumpstart_bucket import seed_jumpstart_bucket

    with mock_aws():
        seed_jumpstart_bucket(boto3.client("s3", region_name="eu-west-1"), "eu-west-1")
        spec = jumpstart.resolve("huggingface-llm-qwen3-coder-30b-a3b-instruct", region="eu-west-1")
    assert spec.source == "sdk" and spec.unverified == {}
    assert "jumpstart-cache-prod-eu-west-1" in spec.source_detail
    assert spec.drafter.S3Uri.startswith("s3://jumpstart-cache-prod-eu-west-1/lmi-eagle-heads/")


def test_live_resolution_of_a_model_the_bucket_lacks_is_an_error_not_a_fallback(aws_env):
    import boto3
    from moto import mock_aws

    from peagle_deploy.testing.jumpstart_bucket import seed_jumpstart_bucket

    with mock_aws():
        seed_jumpstart_bucket(boto3.client("s3", region_name="us-east-1"), "us-east-1")
        with pytest.raises(UsageError) as err:
            jumpstart.resolve("huggingface-llm-qwen3-coder-480b", region="us-east-1")
    assert "JumpStart has no model" in str(err.value)


def test_each_resolution_reads_its_own_source_not_what_the_other_left_in_the_sdks_cache(aws_env):
    """The SDK keeps one process-wide cache of manifests and specs: a live resolution after one from the shipped
    specs (and the other way round) must not be answered from what the other read."""
    import json

    import boto3
    from moto import mock_aws

    from peagle_deploy.testing.jumpstart_bucket import seed_jumpstart_bucket

    model = "huggingface-llm-qwen3-coder-30b-a3b-instruct"
    with mock_aws():
        s3 = boto3.client("s3", region_name="us-east-1")
        bucket = seed_jumpstart_bucket(s3, "us-east-1")
        manifest = json.loads(s3.get_object(Bucket=bucket, Key="models_manifest.json")["Body"].read())
        s3.put_object(Bucket=bucket, Key="models_manifest.json",
                      Body=json.dumps([entry for entry in manifest if entry["model_id"] != model]).encode())
        assert jumpstart.resolve(model, region="us-east-1", offline=True).source == "shipped"
        with pytest.raises(UsageError, match="JumpStart has no model"):  # the bucket's manifest, not the shipped one
            jumpstart.resolve(model, region="us-east-1")
        assert jumpstart.resolve(model, region="us-east-1", offline=True).source == "shipped"


def test_unreachable_s3_falls_back_to_shipped_specs_and_says_so(aws_env, monkeypatch):
    import socket

    with socket.socket() as sock:  # a loopback port with nothing listening: connection refused at once
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    monkeypatch.setenv("AWS_ENDPOINT_URL", f"http://127.0.0.1:{port}")
    spec = jumpstart.resolve("openai-reasoning-gpt-oss-20b", region="us-east-1")
    assert spec.source == "shipped"
    assert "could not be read" in spec.source_detail


def test_importing_the_seam_does_not_import_the_sdk():
    code = "import sys, peagle_deploy.jumpstart, peagle_deploy.plan; print('sagemaker' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60)
    assert out.stdout.strip() == "False"
