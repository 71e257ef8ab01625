"""Plan parity with JumpStart: for every shipped spec and every ml.g7e type it supports, the plan's image, model
data, drafter channel, environment, timeouts and network isolation equal what sagemaker-core's own JumpStart
retrieval functions return for the same config and instance. The only differences are peagle's documented
overrides (docs/configuration.md): its speculative config (the user's mode and K), the tensor-parallel raise on
multi-GPU instances, and the user's --env.

The expected side calls the SDK directly (not through peagle_deploy.jumpstart), pointed at the shipped specs
with the SDK's own local-override variables.
"""

from __future__ import annotations

import copy
import json
import shutil
import types

import pytest

from peagle_deploy import jumpstart
from peagle_deploy.catalog import load_catalog
from peagle_deploy.errors import UsageError
from peagle_deploy.instances import instance_info
from peagle_deploy.plan import PlanRequest, build_plan
from peagle_deploy.speculative import Mode

CONFIG = "lmi-optimized"
SPECULATIVE = "SM_VLLM_SPECULATIVE_CONFIG"
TP = "SM_VLLM_TENSOR_PARALLEL_SIZE"


def _shipped_specs_env(monkeypatch, root=None):
    root = root or jumpstart.shipped_root()
    monkeypatch.setenv(jumpstart.MANIFEST_ENV, str(root / "manifest"))
    monkeypatch.setenv(jumpstart.SPECS_ENV, str(root / "specs"))


def _sdk_expected(model_id: str, region: str, instance: str) -> dict:
    """What sagemaker-core says JumpStart deploys (the SDK's functions, as its model factory calls them)."""
    from sagemaker.core import environment_variables, image_uris, model_uris
    from sagemaker.core.common_utils import camel_case_to_pascal_case
    from sagemaker.core.jumpstart import accessors, artifacts
    from sagemaker.core.jumpstart.utils import (
        _add_model_access_configs_to_model_data_sources,
        get_draft_model_content_bucket,
    )
    from sagemaker.core.shapes import ModelAccessConfig

    accessors.JumpStartModelsAccessor.reset_cache()
    specs = accessors.JumpStartModelsAccessor.get_model_specs(region=region, model_id=model_id, version="*")
    version = specs.version
    common = dict(region=region, model_id=model_id, model_version=version, config_name=CONFIG,
                  sagemaker_session=types.SimpleNamespace(s3_client=None))
    specs.set_config(CONFIG)
    channels = []
    for source in specs.get_speculative_decoding_s3_data_sources():
        source = copy.deepcopy(source)
        source.s3_data_source.set_bucket(get_draft_model_content_bucket(provider=source.provider, region=region))
        channels.append(camel_case_to_pascal_case(source.to_json()))
    channels = _add_model_access_configs_to_model_data_sources(
        channels, {model_id: ModelAccessConfig(accept_eula=True)}, model_id, region)
    deploy = artifacts._retrieve_model_deploy_kwargs(instance_type=instance, **common)
    return {
        "image": image_uris.retrieve(framework=None, image_scope="inference", instance_type=instance, **common),
        "model_uri": model_uris.retrieve(model_scope="inference", instance_type=instance, **common),
        "env": environment_variables.retrieve_default(include_aws_sdk_env_vars=True, instance_type=instance,
                                                       **common),
        "channels": channels,
        "startup": deploy["container_startup_health_check_timeout"],
        "download": deploy["model_data_download_timeout"],
        "isolation": artifacts._retrieve_model_init_kwargs(**common)["enable_network_isolation"],
        "prepack_key": specs.hosting_prepacked_artifact_key,
        "supported": list(specs.supported_inference_instance_types),
    }


def _cases():
    """(alias, instance type) for each shipped spec and each ml.g7e type its lmi-optimized config lists."""
    cases = []
    for alias, entry in sorted(load_catalog().items()):
        path = next((jumpstart.shipped_root() / "specs" / "community_models" / entry.model_id).glob("specs_v*.json"))
        component = json.loads(path.read_text())["inference_config_components"][CONFIG]
        for instance in component["supported_inference_instance_types"]:
            if instance.startswith("ml.g7e."):
                cases.append((alias, instance))
    return cases


CASES = _cases()
# every spec and g7e type in us-east-1, and each spec's first g7e type in a second region (regional images
# and buckets) - every pair in every region would only repeat the same lookups
REGION_CASES = [(alias, instance, "us-east-1") for alias, instance in CASES] + [
    (alias, next(i for a, i in CASES if a == alias), "eu-west-1") for alias in sorted({a for a, _ in CASES})]


def test_every_shipped_spec_has_a_g7e_case():
    assert {alias for alias, _ in CASES} == set(load_catalog())
    assert len(CASES) >= 4


@pytest.mark.parametrize("alias,instance,region", REGION_CASES, ids=["-".join(c) for c in REGION_CASES])
def test_plan_equals_what_sagemaker_core_retrieves(monkeypatch, alias, instance, region):
    _shipped_specs_env(monkeypatch)
    entry = load_catalog()[alias]
    expected = _sdk_expected(entry.model_id, region, instance)
    plan = build_plan(PlanRequest(model=alias, instance_type=instance, region=region, offline=True,
                                  accept_eula=entry.gated))
    container = plan.create_model["PrimaryContainer"]
    variant = plan.create_endpoint_config["ProductionVariants"][0]

    assert container["Image"] == expected["image"]
    model_data = container["ModelDataSource"]["S3DataSource"]
    assert model_data["S3Uri"] == expected["model_uri"]
    assert model_data["S3Uri"].endswith(expected["prepack_key"]) and "/inference-prepack/" in model_data["S3Uri"]
    assert plan.model_data_prepacked
    assert container["AdditionalModelDataSources"] == expected["channels"]
    assert variant["ContainerStartupHealthCheckTimeoutInSeconds"] == expected["startup"]
    assert variant["ModelDataDownloadTimeoutInSeconds"] == expected["download"]
    assert plan.create_model["EnableNetworkIsolation"] is expected["isolation"]

    # the environment: the SDK's, instance variant included, plus only peagle's documented overrides
    overrides = {SPECULATIVE: plan.speculative_config}
    gpus = instance_info(instance).gpus
    if gpus > 1:
        overrides[TP] = str(gpus)
        assert any(TP in note for note in plan.notes)
    assert container["Environment"] == {**expected["env"], **overrides}
    assert "TENSOR_PARALLEL_DEGREE" in container["Environment"]


def test_mode_off_differs_from_jumpstart_only_by_the_absent_speculative_config(monkeypatch):
    _shipped_specs_env(monkeypatch)
    expected = _sdk_expected("openai-reasoning-gpt-oss-20b", "us-east-1", "ml.g7e.2xlarge")
    plan = build_plan(PlanRequest(model="gpt-oss-20b", mode=Mode.OFF, offline=True))
    container = plan.create_model["PrimaryContainer"]
    assert container["Environment"] == {k: v for k, v in expected["env"].items() if k != SPECULATIVE}
    assert "AdditionalModelDataSources" not in container


def test_user_k_and_env_win_over_the_sdk_values(monkeypatch):
    """The SDK's ModelBuilder path lets spec defaults overwrite user env (K=7 sent as 3): peagle applies last."""
    _shipped_specs_env(monkeypatch)
    plan = build_plan(PlanRequest(model="gpt-oss-20b", k=7, offline=True,
                                  env={"TENSOR_PARALLEL_DEGREE": "1", "SM_VLLM_MAX_MODEL_LEN": "4096"}))
    env = plan.create_model["PrimaryContainer"]["Environment"]
    assert json.loads(env[SPECULATIVE])["num_speculative_tokens"] == 7
    assert env["SM_VLLM_MAX_MODEL_LEN"] == "4096"


def test_attribution_tags_are_the_sdks_jumpstart_tags(monkeypatch):
    from sagemaker.core.jumpstart.enums import JumpStartScriptScope
    from sagemaker.core.jumpstart.utils import add_jumpstart_model_info_tags

    _shipped_specs_env(monkeypatch)
    plan = build_plan(PlanRequest(model="qwen3-coder", offline=True))
    sdk = add_jumpstart_model_info_tags(None, "huggingface-llm-qwen3-coder-30b-a3b-instruct", plan.model_version,
                                        config_name=CONFIG, scope=JumpStartScriptScope.INFERENCE)
    assert sdk and all(plan.tags[tag["Key"]] == tag["Value"] for tag in sdk)
    assert "sagemaker.amazonaws.com/model-source" not in plan.tags  # the SDK's reuse key: deliberately absent
    for body in (plan.create_model, plan.create_endpoint_config, plan.create_endpoint):
        assert {t["Key"]: t["Value"] for t in body["Tags"]} == plan.tags


@pytest.fixture
def gated_drafter_root(tmp_path, monkeypatch):
    """The shipped specs with qwen3-coder's drafter moved to the gated bucket behind a EULA (a spec variant)."""
    root = tmp_path / "jumpstart"
    shutil.copytree(jumpstart.shipped_root(), root)
    model_id = load_catalog()["qwen3-coder"].model_id
    path = next((root / "specs" / "community_models" / model_id).glob("specs_v*.json"))
    spec = json.loads(path.read_text())
    for component in spec["inference_config_components"].values():
        for entry in component.get("hosting_additional_data_sources", {}).get("speculative_decoding", []):
            entry["provider"] = {"name": "JumpStart", "classification": "gated"}
            entry["hosting_eula_key"] = "fmhMetadata/eula/qwenDrafterEula.txt"
    path.write_text(json.dumps(spec))
    monkeypatch.setattr(jumpstart, "shipped_root", lambda: root)
    return root


def test_gated_drafter_needs_the_eula_and_gets_model_access_config(gated_drafter_root, monkeypatch):
    from .aws_shapes import assert_valid_request

    with pytest.raises(UsageError) as err:
        build_plan(PlanRequest(model="qwen3-coder", offline=True))
    assert "drafter" in str(err.value) and "--accept-eula" in str(err.value)

    plan = build_plan(PlanRequest(model="qwen3-coder", offline=True, accept_eula=True,
                                  role="arn:aws:iam::123456789012:role/r"))
    channel = plan.create_model["PrimaryContainer"]["AdditionalModelDataSources"][0]
    assert channel["S3DataSource"]["S3Uri"].startswith("s3://jumpstart-private-cache-prod-us-east-1/lmi-eagle-heads/")
    assert channel["S3DataSource"]["ModelAccessConfig"] == {"AcceptEula": True}
    assert "HostingEulaKey" not in json.dumps(plan.create_model)
    assert any("gated bucket" in note for note in plan.notes)
    assert_valid_request("sagemaker", "CreateModel", plan.create_model)

    _shipped_specs_env(monkeypatch, gated_drafter_root)  # and it is exactly what the SDK builds
    expected = _sdk_expected(plan.model_id, "us-east-1", plan.instance_type)
    assert plan.create_model["PrimaryContainer"]["AdditionalModelDataSources"] == expected["channels"]


def test_gated_drafter_is_irrelevant_with_mode_off(gated_drafter_root):
    plan = build_plan(PlanRequest(model="qwen3-coder", mode=Mode.OFF, offline=True))
    assert "AdditionalModelDataSources" not in plan.create_model["PrimaryContainer"]


def test_dry_run_of_gpt_oss_20b_shows_prepack_tp_degree_and_user_overrides(tmp_path):
    """`peagle deploy gpt-oss-20b --dry-run --json` as a process (forked, tests/forked_peagle.py), no credentials."""
    import os
    import subprocess

    from .forked_peagle import forked_peagle

    exe = forked_peagle()
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env.update(AWS_SHARED_CREDENTIALS_FILE=str(tmp_path / "none"), AWS_CONFIG_FILE=str(tmp_path / "none"),
               AWS_EC2_METADATA_DISABLED="true")
    out = subprocess.run([str(exe), "deploy", "gpt-oss-20b", "--dry-run", "--json", "--k", "7",
                          "--env", "TENSOR_PARALLEL_DEGREE=1", "--env", "SM_VLLM_MAX_MODEL_LEN=16384"],
                         capture_output=True, text=True, env=env, timeout=300)
    assert out.returncode == 0, out.stderr
    plan = json.loads(out.stdout)["plan"]
    container = plan["create_model"]["PrimaryContainer"]
    assert "/artifacts/inference-prepack/" in container["ModelDataSource"]["S3DataSource"]["S3Uri"]
    assert container["Environment"]["TENSOR_PARALLEL_DEGREE"] == "1"
    assert container["Environment"]["SM_VLLM_MAX_MODEL_LEN"] == "16384"  # the spec says 8192: --env wins
    assert json.loads(container["Environment"][SPECULATIVE])["num_speculative_tokens"] == 7  # the spec says 3
    assert plan["resolution_source"] == "shipped"
