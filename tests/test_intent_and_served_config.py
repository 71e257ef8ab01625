"""The pieces under issue 27's recovery: the served-config parser (K and mode read from the model, not the tags),
intent tags within SageMaker's tag limits, and the emulator's per-caller faults and lost answers."""

from __future__ import annotations

import json

import pytest

from peagle_deploy.autoscale import AutoscalePolicy
from peagle_deploy.lifecycle.intent import UpdateIntent, read_update_intent
from peagle_deploy.served_config import spec_of_environment
from peagle_deploy.speculative import ENV_VAR, Mode, SpeculativeSettings


@pytest.mark.parametrize("settings", [SpeculativeSettings(mode=Mode.P_EAGLE, k=7),
                                      SpeculativeSettings(mode=Mode.EAGLE3, k=3),
                                      SpeculativeSettings(mode=Mode.OFF)])
def test_the_parser_reads_back_what_speculative_writes(settings):
    rendered = settings.render()
    spec = spec_of_environment({ENV_VAR: rendered} if rendered else {"OTHER": "x"})
    assert (spec.mode, spec.k, spec.problem) == (settings.mode.value, settings.k, None)


@pytest.mark.parametrize("value,problem", [("{not json", "is not JSON"), ("[1]", "not a JSON object"),
                                           (json.dumps({"method": "ngram", "num_speculative_tokens": 4}),
                                            "method 'ngram' is not one peagle deploys"),
                                           (json.dumps({"method": "eagle3"}), "no num_speculative_tokens")])
def test_an_unreadable_speculative_config_is_a_problem_not_a_crash(value, problem):
    assert problem in spec_of_environment({ENV_VAR: value}).problem


def test_intent_tags_fit_sagemakers_limits_and_read_back():
    longest = "a" * 44 + "-u261122200000-3f9a"  # a 63-character update name
    policy = AutoscalePolicy(min_capacity=1, max_capacity=100, metric="invocations", target=12.5)
    intent = UpdateIntent(from_config="a" * 63, to_config=longest, autoscale=policy)
    tags = intent.to_tags()
    assert all(len(k) <= 128 and len(v) <= 256 for k, v in tags.items())
    assert read_update_intent(tags) == intent
    assert read_update_intent({**tags, "peagle:update-autoscale": "none"}).autoscale is None
    unreadable = read_update_intent({**tags, "peagle:update-autoscale": "garbled"})
    assert unreadable.autoscale is None and unreadable.autoscale_known is False
    assert read_update_intent({"peagle:update-from": "x"}) is None
    with pytest.raises(ValueError, match="tag limits"):
        UpdateIntent(from_config="a", to_config="b" * 300).to_tags()


def test_emulator_faults_and_gates_apply_to_their_caller_only_and_a_lost_answer_acts(emu_in_process, monkeypatch):
    from botocore.exceptions import ClientError

    emu = emu_in_process
    monkeypatch.setenv("AWS_SDK_UA_APP_ID", "other")
    other = emu.client("sagemaker")
    monkeypatch.setenv("AWS_SDK_UA_APP_ID", "me")
    mine = emu.client("sagemaker")
    emu.fail("CreateModel", "InternalFailure", status=500, after=True, caller="me")
    body = {"ExecutionRoleArn": emu.role_arn, "PrimaryContainer": {"Image": "x"}}
    other.create_model(ModelName="theirs", **body)  # another caller's call: no fault
    with pytest.raises(ClientError) as lost:
        mine.create_model(ModelName="mine", **body)
    # SageMaker acted; botocore retried the 500 and the retry met what the first attempt did
    assert "already existing" in str(lost.value)
    assert "mine" in emu.resource_names()["models"]
    emu.fail("DeleteModel", "ValidationException", "refused", caller="me")
    emu.clear_faults("me")
    mine.delete_model(ModelName="mine")
    assert emu.resource_names()["models"] == ["theirs"]
