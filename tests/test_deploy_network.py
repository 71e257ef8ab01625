"""deploy --subnet/--security-group/--kms-key (issue 15 item 4): in the plan (text and --json), sent as
CreateModel's VpcConfig and CreateEndpointConfig's KmsKeyId, verified after deploy against what SageMaker holds."""

from __future__ import annotations

import json

import pytest

from peagle_deploy import lifecycle
from peagle_deploy.aws import AwsSession
from peagle_deploy.errors import EndpointFailed
from peagle_deploy.plan import PlanRequest, build_plan
from tests.cli_runner import run_cli

SUBNETS = ["subnet-0123456789abcdef0", "subnet-0fedcba9876543210"]
GROUP = "sg-0123456789abcdef0"
KEY = "arn:aws:kms:us-east-1:123456789012:key/1234abcd-12ab-34cd-56ef-1234567890ab"
NETWORK_ARGS = ["--subnet", SUBNETS[0], "--subnet", SUBNETS[1], "--security-group", GROUP, "--kms-key", KEY]


def _request(**kwargs):
    return PlanRequest(model="qwen3-coder", offline=True, subnets=SUBNETS, security_groups=[GROUP], kms_key=KEY,
                       **kwargs)


def test_plan_carries_vpc_config_and_kms_key():
    plan = build_plan(_request())
    assert plan.create_model["VpcConfig"] == {"Subnets": SUBNETS, "SecurityGroupIds": [GROUP]}
    assert plan.create_endpoint_config["KmsKeyId"] == KEY
    assert plan.vpc_config == plan.create_model["VpcConfig"] and plan.kms_key_id == KEY
    assert "create_endpoint_config.KmsKeyId" in plan.unverified  # local instance storage: said, not hidden
    from .aws_shapes import assert_valid_request

    assert_valid_request("sagemaker", "CreateModel", plan.create_model)  # subnet and group ids, the key's pattern
    assert_valid_request("sagemaker", "CreateEndpointConfig", plan.create_endpoint_config)


def test_plan_without_network_options_is_unchanged():
    plan = build_plan(PlanRequest(model="qwen3-coder", offline=True))
    assert "VpcConfig" not in plan.create_model and "KmsKeyId" not in plan.create_endpoint_config
    assert plan.vpc_config is None and plan.kms_key_id is None


@pytest.mark.parametrize("key", ["1234abcd-12ab-34cd-56ef-1234567890ab", "alias/my-key",
                                 "arn:aws:kms:us-east-1:123456789012:alias/my-key",
                                 "mrk-1234abcd12ab34cd56ef1234567890ab"])
def test_every_documented_key_form_is_accepted(key):
    assert build_plan(PlanRequest(model="qwen3-coder", offline=True, kms_key=key)).kms_key_id == key


def test_dry_run_shows_them_in_text_and_json(no_aws):
    human = run_cli("deploy", "qwen3-coder", "--dry-run", *NETWORK_ARGS)
    assert human.code == 0, human.stderr
    assert f"vpc subnets          {SUBNETS[0]}, {SUBNETS[1]}" in human.stdout
    assert f"vpc security groups  {GROUP}" in human.stdout and f"volume kms key       {KEY}" in human.stdout
    doc = json.loads(run_cli("deploy", "qwen3-coder", "--dry-run", "--json", *NETWORK_ARGS).stdout)
    assert doc["plan"]["vpc_config"] == {"Subnets": SUBNETS, "SecurityGroupIds": [GROUP]}
    assert doc["plan"]["create_model"]["VpcConfig"]["SecurityGroupIds"] == [GROUP]
    assert doc["plan"]["create_endpoint_config"]["KmsKeyId"] == KEY


def test_deploy_sends_and_verifies_them(emu_in_process):
    emu = emu_in_process
    result = run_cli("deploy", "qwen3-coder", "--name", "private-ep", "--role", emu.role_arn, "--yes", "--json",
                     *NETWORK_ARGS)
    assert result.code == 0, result.stderr
    checks = {c["name"]: c for c in json.loads(result.stdout)["deployed"]["verification"]}
    assert checks["VPC config"]["ok"] and checks["volume KMS key"]["ok"]
    sm = emu.client("sagemaker")
    assert sm.describe_model(ModelName="private-ep")["VpcConfig"] == {"Subnets": SUBNETS, "SecurityGroupIds": [GROUP]}
    assert sm.describe_endpoint_config(EndpointConfigName="private-ep")["KmsKeyId"] == KEY


def test_a_dropped_setting_is_reported_and_rolled_back(emu_in_process, monkeypatch):
    """SageMaker (here: the emulator, told to) holding no VpcConfig and no key fails verification, exit 6."""
    from moto.sagemaker import models as sm_models

    emu = emu_in_process
    create_model = sm_models.SageMakerModelBackend.create_model
    create_config = sm_models.SageMakerModelBackend.create_endpoint_config
    monkeypatch.setattr(sm_models.SageMakerModelBackend, "create_model",
                        lambda backend, *a, **kw: create_model(backend, *a, **{**kw, "vpc_config": None}))
    monkeypatch.setattr(sm_models.SageMakerModelBackend, "create_endpoint_config",
                        lambda backend, *a, **kw: create_config(backend, *a, **{**kw, "kms_key_id": None}))
    plan = build_plan(PlanRequest(model="qwen3-coder", role=emu.role_arn, region=emu.region, name="dropped",
                                  subnets=SUBNETS, security_groups=[GROUP], kms_key=KEY))
    with pytest.raises(EndpointFailed) as failure:
        lifecycle.deploy(plan, AwsSession(emu.region), sleep=lambda _s: None, handle_signals=False)
    message = str(failure.value)
    assert "VPC config: expected" in message and "volume KMS key: expected" in message
    assert "rolled back" in message
    assert emu.resource_names() == {"endpoints": [], "configs": [], "models": []}
