import json
from datetime import UTC, datetime, timedelta

import pytest

from peagle_deploy.errors import UsageError
from peagle_deploy.plan import PlanRequest, build_plan
from peagle_deploy.speculative import Mode
from peagle_deploy.tag_keys import MANAGED as MANAGED_TAG

from .plan_inputs import resolver_for

NOW = datetime(2026, 11, 22, 12, 0, 0, tzinfo=UTC)


def listed_price(kind, region, count, each=6.5):
    """A price as pricing.instance_price returns one from the Pricing API (plans here make no AWS call)."""
    from peagle_deploy.pricing import Price

    known = kind.startswith("ml.g7e.")
    return Price(instance_type=kind, instance_count=count, region=region, usd_per_hour=each * count if known else None,
                 usd_per_hour_each=each if known else None, usd_per_day=each * count * 24 if known else None,
                 source="aws-pricing-api" if known else "unknown", estimate=not known, detail="stub")


def plan_for(**kwargs):
    resolver = kwargs.pop("resolver", None) or resolver_for()
    return build_plan(PlanRequest(**{"model": "qwen3-coder", **kwargs}), resolver=resolver, now=NOW,
                      price_lookup=listed_price)


def container(plan):
    return plan.create_model["PrimaryContainer"]


def test_p_eagle_default_renders_exact_speculative_config_and_drafter_channel():
    plan = plan_for()
    env = container(plan)["Environment"]
    assert json.loads(env["SM_VLLM_SPECULATIVE_CONFIG"]) == {
        "model": "/opt/ml/additional-model-data-sources/eagle",
        "method": "eagle3",
        "num_speculative_tokens": 3,
        "parallel_drafting": True,
    }
    [channel] = container(plan)["AdditionalModelDataSources"]
    assert channel["ChannelName"] == "eagle"
    assert channel["S3DataSource"]["S3Uri"].startswith("s3://jumpstart-cache-prod-us-east-1/lmi-eagle-heads/")
    assert plan.mode is Mode.P_EAGLE and plan.k == 3


def test_k_changes_only_k():
    def without_k(plan):
        text = json.dumps(plan.model_dump(mode="json"))
        return text.replace('"num_speculative_tokens\\": 7', '"num_speculative_tokens\\": 3').replace(
            "p-eagle-k7", "p-eagle-k3")

    base, seven = plan_for(name="ep"), plan_for(name="ep", k=7)
    assert json.loads(container(seven)["Environment"]["SM_VLLM_SPECULATIVE_CONFIG"])["num_speculative_tokens"] == 7
    assert seven.k == 7 and seven.tags["peagle:k"] == "7"
    base_data, seven_data = base.model_dump(mode="json"), seven.model_dump(mode="json")
    changed = {key for key in base_data if base_data[key] != seven_data[key]}
    assert changed == {"k", "speculative_config", "tags", "create_model", "create_endpoint_config", "create_endpoint"}
    seven_data["k"] = 3
    seven_data["tags"]["peagle:k"] = "3"
    seven_data["speculative_config"] = base_data["speculative_config"]
    seven_data["create_model"]["PrimaryContainer"]["Environment"]["SM_VLLM_SPECULATIVE_CONFIG"] = base_data["speculative_config"]
    for body in ("create_model", "create_endpoint_config", "create_endpoint"):
        for tag in seven_data[body]["Tags"]:
            if tag["Key"] == "peagle:k":
                tag["Value"] = "3"
    assert seven_data == base_data


def test_mode_off_drops_config_and_channel_even_when_spec_has_them():
    plan = plan_for(mode=Mode.OFF)
    assert "SM_VLLM_SPECULATIVE_CONFIG" not in container(plan)["Environment"]
    assert "AdditionalModelDataSources" not in container(plan)
    assert plan.k is None and plan.speculative_config is None and plan.drafter_channel is None
    assert plan.tags["peagle:mode"] == "off"


def test_eagle3_mode_is_sequential_with_same_json():
    plan = plan_for(mode=Mode.EAGLE3, k=5)
    cfg = json.loads(container(plan)["Environment"]["SM_VLLM_SPECULATIVE_CONFIG"])
    assert cfg["parallel_drafting"] is False and cfg["method"] == "eagle3" and cfg["num_speculative_tokens"] == 5


def test_user_k_survives_spec_default_and_user_env_passes_through():
    plan = plan_for(k=9, env={"SM_VLLM_MAX_MODEL_LEN": "16384", "EXTRA": "1"})
    env = container(plan)["Environment"]
    assert json.loads(env["SM_VLLM_SPECULATIVE_CONFIG"])["num_speculative_tokens"] == 9
    assert env["SM_VLLM_MAX_MODEL_LEN"] == "16384" and env["EXTRA"] == "1"
    assert env["HF_MODEL_ID"] == "/opt/ml/model"


@pytest.mark.parametrize("added,flag", [({"num_speculative_tokens": 5}, "--k"), ({"parallel_drafting": False},
                                                                                    "--mode"),
                                        ({"method": "eagle"}, "--mode"), ({"model": "/x"}, "--mode")])
def test_env_cannot_set_mode_or_k_through_the_speculative_config(added, flag):
    """The keys that carry mode and K stay peagle's: each is refused, naming the flag that sets it."""
    with pytest.raises(UsageError, match=f"sets {next(iter(added))}, which peagle sets from --mode and --k") as err:
        plan_for(env={"SM_VLLM_SPECULATIVE_CONFIG": json.dumps(added)})
    assert err.value.hint == f"use {flag} instead" or err.value.hint.startswith(f"use {flag} ")


def test_env_adds_vllm_keys_after_peagles_speculative_config():
    """Any other SpeculativeConfig key is added after peagle's (mode and K kept); the verification compares the
    merged config (plan.speculative_config is what the environment carries)."""
    added = {"draft_sample_method": "probabilistic", "num_speculative_tokens_per_batch_size": [[1, 8, 3], [9, 64, 1]]}
    plan = plan_for(k=5, env={"SM_VLLM_SPECULATIVE_CONFIG": json.dumps(added)})
    sent = container(plan)["Environment"]["SM_VLLM_SPECULATIVE_CONFIG"]
    assert sent == plan.speculative_config
    assert json.loads(sent) == {"model": "/opt/ml/additional-model-data-sources/eagle", "method": "eagle3",
                                "num_speculative_tokens": 5, "parallel_drafting": True, **added}
    assert "PEAGLE_ALLOW_LOSSY" not in container(plan)["Environment"]


@pytest.mark.parametrize("method", ["fly", "synthetic"])
def test_a_lossy_rejection_method_is_refused_unless_allowed(method):
    added = {"rejection_sample_method": method, **({"synthetic_acceptance_length": 2.5} if method == "synthetic"
                                                   else {})}
    env = {"SM_VLLM_SPECULATIVE_CONFIG": json.dumps(added)}
    with pytest.raises(UsageError, match=f"rejection_sample_method '{method}' is lossy") as err:
        plan_for(env=env)
    assert "--allow-lossy" in err.value.hint
    plan = plan_for(env=env, allow_lossy=True)
    environment = container(plan)["Environment"]
    assert json.loads(environment["SM_VLLM_SPECULATIVE_CONFIG"])["rejection_sample_method"] == method
    assert environment["PEAGLE_ALLOW_LOSSY"] == "true"  # the bundled container runs it too
    assert any(note.startswith("LOSSY: ") for note in plan.notes)
    assert any(note.startswith("synthetic acceptance") for note in plan.notes) is (method == "synthetic")


@pytest.mark.parametrize("env,message", [
    ({"SM_VLLM_speculative_config": "{}"}, "--env SM_VLLM_speculative_config reaches vLLM as --speculative-config"),
    ({"SM_VLLM_SPECULATIVE_CONF": "{}"}, "--env SM_VLLM_SPECULATIVE_CONF reaches vLLM as --speculative-config"),
    ({"SM_VLLM_SPECULATIVE_CONFIG": "[]"}, "must be one JSON object"),
    ({"SM_VLLM_SPECULATIVE_CONFIG": "{"}, "is not valid JSON"),
    ({"SM_VLLM_SPECULATIVE_CONFIG": '{"rejection_sample_method": "blok"}'},
     "rejection_sample_method 'blok' is not one vLLM accepts"),
    ({"SM_VLLM_SPECULATIVE_CONFIG": '{"num_speculative_tokens_per_batch_size": [[2, 8, 3]]}'},
     "the first range must start at batch size 1"),
    ({"SM_VLLM_SPECULATIVE_CONFIG": '{"draft_tensor_parallel": 1}'}, "does not accept: draft_tensor_parallel"),
])
def test_speculative_additions_vllm_would_refuse_are_refused_at_plan_time(env, message):
    with pytest.raises(UsageError, match=message.replace("(", r"\(").replace("[", r"\[")):
        plan_for(env=env)


def test_speculative_additions_need_speculation():
    with pytest.raises(UsageError, match="--mode off has none"):
        plan_for(mode=Mode.OFF, env={"SM_VLLM_SPECULATIVE_CONFIG": '{"draft_sample_method": "greedy"}'})


def test_env_count_limit_counts_spec_defaults():
    env = {f"V{i}": "x" for i in range(97)}  # 4 from the spec + 97 = 101
    with pytest.raises(UsageError, match="100"):
        plan_for(env=env)


def test_bodies_share_one_name_and_carry_tags():
    plan = plan_for(name="my-ep", tags={"team": "ml"}, ttl=timedelta(hours=4), role="arn:aws:iam::123456789012:role/r")
    assert plan.create_model["ModelName"] == "my-ep"
    assert plan.create_endpoint_config["EndpointConfigName"] == "my-ep"
    assert plan.create_endpoint_config["ProductionVariants"][0]["ModelName"] == "my-ep"
    assert plan.create_endpoint == {"EndpointName": "my-ep", "EndpointConfigName": "my-ep",
                                    "Tags": plan.create_endpoint["Tags"]}
    tags = {t["Key"]: t["Value"] for t in plan.create_endpoint["Tags"]}
    assert tags[MANAGED_TAG] == "true" and tags["team"] == "ml"
    assert tags["peagle:expires-at"] == (NOW + timedelta(hours=4)).isoformat()
    assert plan.create_model["ExecutionRoleArn"] == "arn:aws:iam::123456789012:role/r"
    assert plan.missing == []


def test_without_role_the_plan_says_what_is_missing():
    plan = plan_for()
    assert "ExecutionRoleArn" not in plan.create_model
    assert any("--role" in m for m in plan.missing)


def test_variant_uses_spec_timeouts_and_instance():
    plan = plan_for(instance_type="ml.g7e.12xlarge", instance_count=2)
    variant = plan.create_endpoint_config["ProductionVariants"][0]
    assert variant["InstanceType"] == "ml.g7e.12xlarge" and variant["InitialInstanceCount"] == 2
    assert variant["ContainerStartupHealthCheckTimeoutInSeconds"] == 3600
    assert variant["ModelDataDownloadTimeoutInSeconds"] == 3600
    assert plan.gpus_per_instance == 2
    assert container(plan)["Environment"]["SM_VLLM_TENSOR_PARALLEL_SIZE"] == "2"
    assert plan.price_per_hour_usd == pytest.approx(2 * 6.5) and plan.price_per_day_usd == pytest.approx(2 * 6.5 * 24)


def test_gated_model_needs_eula_and_records_acceptance():
    resolver = resolver_for(gated=True)
    with pytest.raises(UsageError, match="--accept-eula"):
        plan_for(model="gemma-4-31b", resolver=resolver)
    assert resolver.calls == []  # refused before any resolution
    plan = plan_for(model="gemma-4-31b", accept_eula=True, resolver=resolver)
    assert container(plan)["ModelDataSource"]["S3DataSource"]["ModelAccessConfig"] == {"AcceptEula": True}


def test_image_override_keeps_model_data_and_drafter():
    plan = plan_for(image="123456789012.dkr.ecr.us-east-1.amazonaws.com/peagle-vllm:1")
    assert container(plan)["Image"] == "123456789012.dkr.ecr.us-east-1.amazonaws.com/peagle-vllm:1"
    assert container(plan)["AdditionalModelDataSources"][0]["ChannelName"] == "eagle"
    assert plan.image_overridden


def test_instance_outside_g7e_refused_before_resolution_unless_allowed():
    resolver = resolver_for()
    with pytest.raises(UsageError, match="--allow-any-instance"):
        plan_for(instance_type="ml.p5.48xlarge", resolver=resolver)
    assert resolver.calls == []
    plan = plan_for(instance_type="ml.p5.48xlarge", allow_any_instance=True, resolver=resolver)
    assert plan.instance_type == "ml.p5.48xlarge" and plan.price_per_hour_usd is None


def test_instance_not_in_spec_list_refused():
    with pytest.raises(UsageError, match="does not support ml.g7e.48xlarge"):
        plan_for(instance_type="ml.g7e.48xlarge")


def test_spec_without_drafter_only_deploys_mode_off():
    resolver = resolver_for(drafter=False)
    with pytest.raises(UsageError, match="--mode off"):
        plan_for(resolver=resolver)
    assert plan_for(resolver=resolver, mode=Mode.OFF).drafter_channel is None


def test_default_name_is_valid_and_descriptive():
    plan = plan_for(k=7)
    assert plan.endpoint_name == "peagle-qwen3-coder-p-eagle-k7-261122-120000"
    assert len(plan.endpoint_name) <= 63


def test_model_id_override_reaches_resolver():
    resolver = resolver_for()
    plan = plan_for(model_id="huggingface-llm-qwen3-coder-30b-a3b-instruct-fp8", resolver=resolver)
    assert resolver.calls[0][0] == "huggingface-llm-qwen3-coder-30b-a3b-instruct-fp8"
    assert plan.tags["peagle:model-id"] == "huggingface-llm-qwen3-coder-30b-a3b-instruct-fp8"


def test_unverified_catalog_values_are_marked():
    plan = plan_for()
    assert "catalog.model_id" in plan.unverified


@pytest.mark.parametrize("mode", list(Mode))
def test_bodies_are_valid_sagemaker_requests(mode):
    """Each body satisfies the SageMaker API model strictly (tests/aws_shapes.py: botocore's validator, then
    enum, range, length and pattern)."""
    from .aws_shapes import assert_valid_request

    plan = plan_for(mode=mode, role="arn:aws:iam::123456789012:role/r", tags={"team": "ml"}, ttl=timedelta(hours=1))
    for operation, body in (("CreateModel", plan.create_model), ("CreateEndpointConfig", plan.create_endpoint_config),
                            ("CreateEndpoint", plan.create_endpoint)):
        assert_valid_request("sagemaker", operation, body)
