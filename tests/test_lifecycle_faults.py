"""Deploy, wait, verify, roll back: every failure ends with no peagle resource left (or the cleanup command)."""

import itertools

import pytest

from peagle_deploy import lifecycle
from peagle_deploy.aws import AwsSession
from peagle_deploy.errors import ExitCode, PeagleError
from peagle_deploy.plan import PlanRequest, build_plan
from peagle_deploy.speculative import Mode


@pytest.fixture
def emu(emu_in_process):
    return emu_in_process


def make_plan(emu, **kwargs):
    return build_plan(PlanRequest(model="qwen3-coder", role=emu.role_arn, region=emu.region, name="ep-under-test",
                                  **kwargs))


class FakeClock:
    """Time that advances only when the code under test sleeps."""

    def __init__(self):
        self.now = 0.0
        self.sleeps = []

    def sleep(self, seconds):
        self.sleeps.append(seconds)
        self.now += seconds

    def __call__(self):
        return self.now


def resources(emu):
    sm = emu.client("sagemaker")
    return {
        "endpoints": [e["EndpointName"] for e in sm.list_endpoints()["Endpoints"]],
        "configs": [c["EndpointConfigName"] for c in sm.list_endpoint_configs()["EndpointConfigs"]],
        "models": [m["ModelName"] for m in sm.list_models()["Models"]],
    }


EMPTY = {"endpoints": [], "configs": [], "models": []}


def deploy(emu, plan, **kwargs):
    clock = FakeClock()
    return lifecycle.deploy(plan, AwsSession(emu.region), sleep=clock.sleep, clock=clock, **kwargs), clock


def test_deploy_waits_verifies_and_reports(emu):
    emu.script_endpoints(creating_polls=4)
    seen = []
    result, clock = deploy(emu, make_plan(emu), on_progress=lambda s, e, d: seen.append(s))
    assert result.status == "InService"
    assert seen == ["Creating"] * 4 + ["InService"]
    assert [c.name for c in result.verification if c.ok] == ["speculative config", "drafter channel", "instance type"]
    assert result.verification[-1].name == "vLLM start-up" and result.verification[-1].state == "not verified"
    assert clock.sleeps[0] == 2.0 and clock.sleeps == sorted(clock.sleeps)  # adaptive: fast first, backing off
    assert resources(emu) == {"endpoints": ["ep-under-test"], "configs": ["ep-under-test"], "models": ["ep-under-test"]}


def test_mode_off_verifies_absence(emu):
    result, _ = deploy(emu, make_plan(emu, mode=Mode.OFF))
    checks = {c.name: c for c in result.verification}
    assert checks["speculative config"].ok and checks["speculative config"].actual is None
    assert checks["drafter channel"].ok and checks["drafter channel"].actual is None


@pytest.mark.parametrize("action,left_before_rollback", [
    ("CreateModel", 0), ("CreateEndpointConfig", 1), ("CreateEndpoint", 2)])
def test_failure_at_each_create_rolls_back(emu, action, left_before_rollback):
    """AWS rejecting a create as invalid is bad input (exit 2), as in every other command."""
    emu.fail(action, code="ValidationException", message="injected at " + action)
    with pytest.raises(PeagleError) as err:
        deploy(emu, make_plan(emu))
    assert err.value.exit_code == ExitCode.USAGE
    assert f"injected at {action}" in str(err.value)
    if left_before_rollback:
        assert "rolled back" in str(err.value)
    assert resources(emu) == EMPTY


def test_failed_endpoint_reports_reason_and_log_group_and_rolls_back(emu):
    emu.script_endpoints(creating_polls=2, final="Failed", reason="CUDA out of memory while loading the drafter")
    with pytest.raises(PeagleError) as err:
        deploy(emu, make_plan(emu))
    assert err.value.exit_code == ExitCode.FAILED == 6
    text = str(err.value)
    assert "CUDA out of memory while loading the drafter" in text
    assert "/aws/sagemaker/Endpoints/ep-under-test" in text and "rolled back" in text
    assert resources(emu) == EMPTY


def test_timeout_exits_5_with_commands_and_rolls_back(emu):
    emu.script_endpoints(creating_polls=10_000)
    with pytest.raises(PeagleError) as err:
        deploy(emu, make_plan(emu), timeout_s=600)
    assert err.value.exit_code == ExitCode.TIMEOUT == 5
    assert "aws sagemaker wait endpoint-in-service --endpoint-name ep-under-test" in str(err.value)
    assert resources(emu) == EMPTY


def test_keep_on_failure_keeps_resources_and_prints_cleanup_command(emu):
    emu.script_endpoints(final="Failed", reason="health check failed")
    with pytest.raises(PeagleError) as err:
        deploy(emu, make_plan(emu), keep_on_failure=True)
    assert "peagle cleanup ep-under-test --region us-east-1 --yes" in str(err.value)
    assert resources(emu)["endpoints"] == ["ep-under-test"]
    report = lifecycle.cleanup(AwsSession(emu.region), "ep-under-test")
    assert [o.result for o in report.outcomes] == ["deleted"] * 3
    assert resources(emu) == EMPTY


def test_interrupt_during_wait_rolls_back_and_exits_130(emu):
    emu.script_endpoints(creating_polls=100)
    ticks = itertools.count()

    def sleep(_seconds):
        if next(ticks) == 2:
            raise KeyboardInterrupt

    with pytest.raises(PeagleError) as err:
        lifecycle.deploy(make_plan(emu), AwsSession(emu.region), sleep=sleep, clock=lambda: 0.0)
    assert err.value.exit_code == ExitCode.INTERRUPTED == 130
    assert resources(emu) == EMPTY


def test_throttling_on_every_other_call_still_deploys_and_cleans_up(emu, monkeypatch):
    import time
    import types

    import botocore.endpoint

    import botocore.retries.bucket

    # botocore's backoff and its adaptive rate limiter wait for real: record the waits, skip them
    backoffs, limiter_waits = [], []
    monkeypatch.setattr(botocore.endpoint, "time", types.SimpleNamespace(sleep=backoffs.append, time=time.time))
    original = botocore.retries.bucket.TokenBucket._sleep_amount

    def no_wait(bucket, amount):
        wanted = original(bucket, amount)
        if wanted > 0:
            limiter_waits.append(wanted)
        return 0

    monkeypatch.setattr(botocore.retries.bucket.TokenBucket, "_sleep_amount", no_wait)
    emu.throttle_every_other_call()
    emu.script_endpoints(creating_polls=1)
    result, _ = deploy(emu, make_plan(emu))
    assert result.status == "InService"
    assert "ThrottlingException" not in str(result)
    lifecycle.cleanup(AwsSession(emu.region), "ep-under-test")
    assert resources(emu) == EMPTY
    assert len(emu.calls) > 20  # every other call was refused and retried
    assert backoffs and limiter_waits  # botocore's adaptive mode backed off and slowed its send rate


def test_quota_short_stops_before_any_create(emu):
    emu.set_quota("ml.g7e.2xlarge", 0)
    with pytest.raises(PeagleError) as err:
        deploy(emu, make_plan(emu))
    assert err.value.exit_code == ExitCode.QUOTA == 4
    assert "ml.g7e.2xlarge for endpoint usage" in str(err.value)
    assert not any(c.startswith("Create") for c in emu.calls)


def test_quota_enough_is_reported(emu):
    emu.set_quota("ml.g7e.2xlarge", 2)
    result, _ = deploy(emu, make_plan(emu))
    assert "quota 'ml.g7e.2xlarge for endpoint usage': 2, 0 in use, 1 requested" in result.notes


def test_existing_name_is_refused_without_writes(emu):
    deploy(emu, make_plan(emu))
    calls_before = len(emu.calls)
    with pytest.raises(PeagleError) as err:
        deploy(emu, make_plan(emu))
    assert err.value.exit_code == ExitCode.USAGE and "already exists" in str(err.value)
    assert not any(c.startswith("Create") for c in emu.calls[calls_before:])


def test_verification_catches_a_dropped_drafter_channel(emu, monkeypatch):
    """If SageMaker (or a tool in between) drops the drafter channel, deploy fails instead of lying."""
    from moto.sagemaker import models as sm_models

    original = sm_models.SageMakerModelBackend.create_model

    def drop_channel(backend, *args, **kwargs):
        container = kwargs.get("primary_container") or {}
        container.pop("AdditionalModelDataSources", None)
        return original(backend, *args, **kwargs)

    monkeypatch.setattr(sm_models.SageMakerModelBackend, "create_model", drop_channel)
    with pytest.raises(PeagleError) as err:
        deploy(emu, make_plan(emu))
    assert err.value.exit_code == ExitCode.FAILED
    assert "verification failed: drafter channel" in str(err.value)
    assert resources(emu) == EMPTY
