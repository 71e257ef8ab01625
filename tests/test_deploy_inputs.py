"""Deploy input validation in inputs.py: the accepted shapes (the refusals are in tests/bad_input_cases/deploy.py)."""

import pytest

from peagle_deploy import inputs
from peagle_deploy.errors import UsageError
from peagle_deploy.plan import PlanRequest, build_plan
from tests.plan_inputs import resolver_for


@pytest.mark.parametrize("image,region", [
    ("763104351884.dkr.ecr.us-east-1.amazonaws.com/vllm:0.18.0-gpu-py312-cu129-ubuntu22.04-sagemaker", "us-east-1"),
    ("123456789012.dkr.ecr-fips.us-gov-west-1.amazonaws.com/peagle-vllm:1", "us-gov-west-1"),
    ("727897471807.dkr.ecr.cn-north-1.amazonaws.com.cn/team/peagle-vllm", "cn-north-1"),
    ("123456789012.dkr.ecr.eu-west-1.amazonaws.com/peagle@sha256:" + "a" * 64, "eu-west-1"),
])
def test_ecr_images_are_accepted(image, region):
    assert inputs.validate_image(image, region) == image


@pytest.mark.parametrize("image", ["", "123456789012.dkr.ecr.us-east-1.amazonaws.com/", "public.ecr.aws/x/y:1",
                                   "123456789012.dkr.ecr.us-east-1.amazonaws.com/x:" + "t" * 129,
                                   "123456789012.dkr.ecr.us-east-1.amazonaws.com/UPPER:1"])
def test_non_ecr_images_are_refused(image):
    with pytest.raises(UsageError, match="not an Amazon ECR image URI"):
        inputs.validate_image(image, "us-east-1")


@pytest.mark.parametrize("region,partition", [("us-east-1", "aws"), ("cn-northwest-1", "aws-cn"),
                                              ("us-gov-east-1", "aws-us-gov"), ("eu-central-1", "aws")])
def test_partition_comes_from_botocore(region, partition):
    assert inputs.partition_of(region) == partition
    arn = f"arn:{partition}:iam::123456789012:role/r"
    assert inputs.validate_role_arn(arn, region) == arn


def test_unknown_region_has_no_partition_and_is_left_to_the_region_check():
    assert inputs.partition_of("mars-north-1") is None
    assert inputs.validate_role_arn("arn:aws:iam::123456789012:role/r", "mars-north-1")


def test_price_guard():
    assert inputs.check_price(None, 100, interactive=False) is False  # no price data: nothing to guard
    assert inputs.check_price(100.0, 100, interactive=False) is False
    assert inputs.check_price(100.01, 100, interactive=True) is True  # a terminal: ask
    with pytest.raises(UsageError, match=r"--max-price-per-hour 101 to accept"):
        inputs.check_price(100.01, 100, interactive=False)
    assert inputs.parse_max_price(None) == inputs.PRICE_GUARD_USD_PER_HOUR
    with pytest.raises(UsageError):
        inputs.parse_max_price(-1)


def test_tag_limit_counts_peagles_own_tags():
    # 35 + 10 of peagle's = 45, and 5 kept free for what update and cleanup write on the endpoint before they act
    # (the intent, the lease)
    request = PlanRequest(model="qwen3-coder", tags={f"t{i}": "v" for i in range(35)})
    plan = build_plan(request, resolver=resolver_for())
    assert len(plan.create_endpoint["Tags"]) == 45
    with pytest.raises(UsageError, match="46 tags .* 5 more kept free for update, cleanup and leases"):
        build_plan(PlanRequest(model="qwen3-coder", tags={f"t{i}": "v" for i in range(36)}), resolver=resolver_for())


def test_plan_notes_a_price_above_the_guard():
    from tests.test_plan import listed_price

    plan = build_plan(PlanRequest(model="qwen3-coder", instance_type="ml.g7e.12xlarge", instance_count=16),
                      resolver=resolver_for(), price_lookup=listed_price)
    assert any("price guard" in note for note in plan.notes)
    assert not any("price guard" in note for note in build_plan(PlanRequest(model="qwen3-coder"),
                                                                resolver=resolver_for(), price_lookup=listed_price).notes)


def test_an_unknown_price_cannot_be_held_to_max_price_per_hour():
    """Without a price there is nothing to compare --max-price-per-hour with: refused, one line with the fix."""
    with pytest.raises(UsageError, match=r"--max-price-per-hour 50 cannot be checked: the SageMaker hosting price is "
                                         r"unknown \(no AWS credentials to ask the Pricing API\)") as refused:
        inputs.check_price(None, 50, interactive=False, explicit=True,
                           unknown_why="no AWS credentials to ask the Pricing API")
    assert "pricing:GetProducts" in refused.value.hint


def test_repeated_keys_are_refused_not_overwritten():
    with pytest.raises(UsageError, match="given twice"):
        inputs.parse_tags(["a=1", "b=2", "a=3"])
    assert inputs.parse_env(["A=1", "B=2"]) == {"A": "1", "B": "2"}


def test_empty_name_is_refused_in_the_plan_too():
    with pytest.raises(UsageError, match="--name is empty"):
        build_plan(PlanRequest(model="qwen3-coder", name=""), resolver=resolver_for())


def test_price_guard_is_passed_by_naming_the_price_and_the_deploy_carries_jumpstart_parity(tmp_path):
    """Through a `peagle` process (forked, tests/forked_peagle.py) against the emulator: refused with --yes alone,
    created when the script names a price at least the estimate; CreateModel got the prepacked artifact and the
    TP degree."""
    import json
    import math
    import subprocess

    from peagle_deploy.testing import SageMakerEmulator

    from .forked_peagle import forked_peagle

    exe = forked_peagle()
    args = ["deploy", "gpt-oss-120b", "--instance-type", "ml.g7e.48xlarge", "--instance-count", "4",
            "--name", "guarded", "--yes", "--json"]
    with SageMakerEmulator.server() as emu:
        env = {**emu.env, "COLUMNS": "200"}
        run = lambda *extra: subprocess.run([exe, *args, "--role", emu.role_arn, *extra], env=env,  # noqa: E731
                                            capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL)
        refused = run()
        # 4 x the emulated Pricing API's hourly figure for ml.g7e.48xlarge
        price = 4 * emu.hosting_prices["ml.g7e.48xlarge"]
        assert refused.returncode == 2 and f"--max-price-per-hour {math.ceil(price)}" in refused.stderr
        assert emu.client("sagemaker").list_models()["Models"] == []
        created = run("--max-price-per-hour", str(math.ceil(price) + 5))
        assert created.returncode == 0, created.stderr
        model = emu.client("sagemaker").describe_model(ModelName="guarded")
        assert "/artifacts/inference-prepack/" in model["PrimaryContainer"]["ModelDataSource"]["S3DataSource"]["S3Uri"]
        assert model["PrimaryContainer"]["Environment"]["TENSOR_PARALLEL_DEGREE"] == "8"
        assert json.loads(created.stdout)["plan"]["price_per_hour_usd"] > 100
