"""`peagle deploy MODEL --dry-run`: the complete plan without any AWS account."""

import json
import os
import subprocess


from .cli_runner import run_cli
from .conftest import PEAGLE
from .forked_peagle import forked_peagle


def no_aws_env(tmp_path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env.update(AWS_CONFIG_FILE=str(tmp_path / "none"), AWS_SHARED_CREDENTIALS_FILE=str(tmp_path / "none"),
               AWS_EC2_METADATA_DISABLED="true", COLUMNS="250")
    return env


def dry_run_json(*args):
    result = run_cli("deploy", *args, "--dry-run", "--offline", "--json")
    assert result.code == 0, result.stderr
    return json.loads(result.stdout)["plan"]


def test_installed_executable_prints_the_plan_without_credentials(tmp_path):
    """The README's first command, through the installed executable: a new process with no AWS account
    imports the SageMaker SDK itself (which reads the AWS settings at import)."""
    out = subprocess.run([PEAGLE, "deploy", "qwen3-coder", "--dry-run"], env=no_aws_env(tmp_path),
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    text = out.stdout
    assert "nothing was created" in text
    assert '"method": "eagle3", "num_speculative_tokens": 3, "parallel_drafting": true' in text
    assert '"ChannelName": "eagle"' in text
    assert "shipped" in text and "unverified" in text
    for body in ("CreateModel", "CreateEndpointConfig", "CreateEndpoint"):
        assert body in text


def test_a_peagle_process_prints_one_json_document(tmp_path):
    out = subprocess.run([forked_peagle(), "deploy", "qwen3-coder", "--dry-run", "--json"], env=no_aws_env(tmp_path),
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    plan = json.loads(out.stdout)["plan"]
    assert plan["resolution_source"] == "shipped"
    assert plan["model_id"] == "huggingface-llm-qwen3-coder-30b-a3b-instruct"


def test_default_plan_has_p_eagle_k3_and_drafter_channel():
    plan = dry_run_json("qwen3-coder")
    container = plan["create_model"]["PrimaryContainer"]
    config = json.loads(container["Environment"]["SM_VLLM_SPECULATIVE_CONFIG"])
    assert config == {"model": "/opt/ml/additional-model-data-sources/eagle", "method": "eagle3",
                      "num_speculative_tokens": 3, "parallel_drafting": True}
    assert [c["ChannelName"] for c in container["AdditionalModelDataSources"]] == ["eagle"]
    assert plan["instance_type"] == "ml.g7e.2xlarge" and plan["gpus_per_instance"] == 1
    # no credentials, no sourced SageMaker hosting price for ml.g7e shipped: unknown, never an EC2 figure
    assert plan["price_per_hour_usd"] is None and plan["price"]["source"] == "unknown"


def test_mode_off_drops_config_and_channel():
    container = dry_run_json("qwen3-coder", "--mode", "off")["create_model"]["PrimaryContainer"]
    assert "SM_VLLM_SPECULATIVE_CONFIG" not in container["Environment"]
    assert "AdditionalModelDataSources" not in container


def leaf_diffs(a, b, path=""):
    """Paths whose values differ between two JSON documents."""
    if isinstance(a, dict) and isinstance(b, dict) and a.keys() == b.keys():
        return [d for key in a for d in leaf_diffs(a[key], b[key], f"{path}/{key}")]
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        return [d for i, (x, y) in enumerate(zip(a, b)) for d in leaf_diffs(x, y, f"{path}/{i}")]
    return [] if a == b else [(path, a, b)]


def without_creation_time(plan):
    plan.pop("created_at")
    plan["tags"].pop("peagle:created-at")
    for body in ("create_model", "create_endpoint_config", "create_endpoint"):
        plan[body]["Tags"] = [t for t in plan[body]["Tags"] if t["Key"] != "peagle:created-at"]
    return plan


def test_k7_changes_only_k():
    base = without_creation_time(dry_run_json("qwen3-coder", "--name", "ep"))
    seven = without_creation_time(dry_run_json("qwen3-coder", "--name", "ep", "--k", "7"))
    # the acceptance alarm is K's own (its pattern counts K rates, its metrics and floor are K's): said apart
    alarms = [plan.pop("acceptance_alarm") for plan in (base, seven)]
    assert [(a["k"], a["floor"]["value"]) for a in alarms] == [(3, 1.12), (7, 1.2)]
    for plan in (base, seven):
        plan["notes"] = [n for n in plan["notes"] if not n.startswith("acceptance alarm")]
    k_tag = [i for i, t in enumerate(base["create_model"]["Tags"]) if t["Key"] == "peagle:k"][0]
    assert {path for path, _, _ in leaf_diffs(base, seven)} == {
        "/k", "/speculative_config", "/tags/peagle:k",
        "/create_model/PrimaryContainer/Environment/SM_VLLM_SPECULATIVE_CONFIG",
        *{f"/{body}/Tags/{k_tag}/Value" for body in ("create_model", "create_endpoint_config", "create_endpoint")},
    }
    old, new = json.loads(base["speculative_config"]), json.loads(seven["speculative_config"])
    assert new["num_speculative_tokens"] == 7 and {**new, "num_speculative_tokens": 3} == old


def test_options_shape_the_plan():
    plan = dry_run_json("gemma-4-31b", "--accept-eula", "--name", "gemma-test", "--region", "eu-west-1",
                        "--role", "arn:aws:iam::123456789012:role/SageMaker", "--tag", "team=ml", "--ttl", "4h",
                        "--image", "123456789012.dkr.ecr.eu-west-1.amazonaws.com/peagle-vllm:1",
                        "--env", "SM_VLLM_MAX_MODEL_LEN=16384", "--instance-count", "2")
    assert plan["endpoint_name"] == "gemma-test" and plan["region"] == "eu-west-1"
    assert plan["create_model"]["ExecutionRoleArn"] == "arn:aws:iam::123456789012:role/SageMaker"
    assert plan["tags"]["team"] == "ml" and "peagle:expires-at" in plan["tags"]
    container = plan["create_model"]["PrimaryContainer"]
    assert container["Image"].endswith("peagle-vllm:1") and container["AdditionalModelDataSources"]
    assert container["Environment"]["SM_VLLM_MAX_MODEL_LEN"] == "16384"
    assert container["ModelDataSource"]["S3DataSource"]["ModelAccessConfig"] == {"AcceptEula": True}
    assert plan["create_endpoint_config"]["ProductionVariants"][0]["InitialInstanceCount"] == 2
    assert plan["price_per_hour_usd"] is None and plan["price"]["instance_count"] == 2
    assert plan["missing"] == []


def test_models_command_lists_four_models_with_unverified_marks():
    result = run_cli("models", "--json")
    models = {m["alias"]: m for m in json.loads(result.stdout)["models"]}
    assert set(models) == {"gpt-oss-120b", "gpt-oss-20b", "qwen3-coder", "gemma-4-31b"}
    assert models["gemma-4-31b"]["gated"] is True
    assert "model_id" in models["qwen3-coder"]["unverified"]
    assert models["qwen3-coder"]["max_k"] == 18 and models["gpt-oss-20b"]["max_k"] == 10


def test_the_human_plan_prints_the_shared_tags_once_and_json_keeps_every_body_whole():
    """The same 13 tags in each of three bodies were about 150 of the first screen's 249 lines."""
    human = run_cli("deploy", "qwen3-coder", "--dry-run", "--offline", "--name", "tagged", "--tag", "team=ml")
    assert human.code == 0, human.stderr
    plan = dry_run_json("qwen3-coder", "--name", "tagged", "--tag", "team=ml")
    tags = plan["create_model"]["Tags"]
    assert tags == plan["create_endpoint_config"]["Tags"] == plan["create_endpoint"]["Tags"]  # --json: whole
    assert len(tags) == 14 and {"Key": "team", "Value": "ml"} in tags
    text = human.stdout
    assert "\nTags (on the model, the endpoint config and the endpoint)\n" in text
    lines = text.splitlines()
    for tag in tags:
        if tag["Key"] != "peagle:created-at":  # the two runs differ in their creation time only
            assert [ln.split() for ln in lines if tag["Key"] in ln.split()] == [[tag["Key"], tag["Value"]]], tag
    assert text.count('"Tags": "the 14 tags above"') == 3 and '"Key"' not in text
    assert len(lines) < 120, len(lines)  # from about 250
