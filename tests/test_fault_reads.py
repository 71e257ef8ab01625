"""Issue 10 items 4 and 10: reads retry (a read failure is not an endpoint failure), and the emulator
refuses duplicate names as SageMaker does."""

import pytest

from peagle_deploy import lifecycle
from peagle_deploy.aws import AwsSession
from peagle_deploy.errors import ExitCode, PeagleError
from peagle_deploy.plan import PlanRequest, build_plan
from peagle_deploy.testing import SageMakerEmulator

from .test_lifecycle_faults import EMPTY, FakeClock, resources


@pytest.fixture
def emu(monkeypatch):
    with SageMakerEmulator.in_process() as emulator:  # sets its own AWS_MAX_ATTEMPTS: this one goes after it
        monkeypatch.setenv("AWS_MAX_ATTEMPTS", "1")  # botocore's own retries off: peagle's must carry the day
        yield emulator


def plan(emu):
    return build_plan(PlanRequest(model="qwen3-coder", role=emu.role_arn, region=emu.region, name="reads"))


def run(emu, **kwargs):
    clock = FakeClock()
    return lifecycle.deploy(plan(emu), AwsSession(emu.region), sleep=clock.sleep, clock=clock,
                            handle_signals=False, **kwargs), clock


@pytest.mark.parametrize("code,status", [("InternalFailure", 500), ("ThrottlingException", 400),
                                         ("ServiceUnavailable", 503)])
def test_transient_describe_errors_during_wait_and_verification_are_asked_again(emu, code, status):
    emu.script_endpoints(creating_polls=2)
    emu.fail("DescribeEndpoint", code=code, status=status, times=3, skip=1)  # skip the existence check
    emu.fail("DescribeModel", code=code, status=status, times=2, skip=1)  # the verification's read
    emu.fail("DescribeEndpointConfig", code=code, status=status, times=1, skip=1)
    seen = []
    result, _ = run(emu, on_progress=lambda s, e, d: seen.append(s))
    assert result.status == "InService" and [c.name for c in result.verification if not c.ok] == ["vLLM start-up"]
    assert result.verification[-1].state == "not verified"  # no container log in the emulator: not a failure
    assert seen.count("Unknown") == 3 and seen[-1] == "InService"
    assert resources(emu)["endpoints"] == ["reads"]  # nothing was rolled back


def test_a_persistent_read_failure_is_the_aws_error_not_endpoint_failed(emu):
    from peagle_deploy.lifecycle.wait import READ_ATTEMPTS

    emu.script_endpoints(creating_polls=50)
    emu.fail("DescribeEndpoint", code="InternalFailure", status=500, times=READ_ATTEMPTS, skip=1)
    with pytest.raises(PeagleError) as err:
        run(emu)
    assert err.value.exit_code == ExitCode.UNEXPECTED != ExitCode.FAILED
    assert "InternalFailure" in str(err.value) and "rolled back: endpoint, endpoint config, model deleted" in str(
        err.value)
    assert resources(emu) == EMPTY


def test_when_aws_cannot_even_be_read_for_the_rollback_the_command_is_printed_and_works(emu):
    emu.script_endpoints(creating_polls=50)
    emu.fail("DescribeEndpoint", code="InternalFailure", status=500, times=100, skip=1)
    with pytest.raises(PeagleError) as err:
        run(emu)
    assert "rollback incomplete: remove what is left with 'peagle cleanup reads --region us-east-1 --yes'" in str(
        err.value)
    emu._faults.clear()
    lifecycle.cleanup(AwsSession(emu.region), "reads")
    assert resources(emu) == EMPTY


def test_access_denied_while_waiting_is_exit_3_at_once(emu):
    emu.script_endpoints(creating_polls=50)
    emu.fail("DescribeEndpoint", code="AccessDeniedException", times=1, skip=1)
    with pytest.raises(PeagleError) as err:
        run(emu)
    assert err.value.exit_code == ExitCode.AUTH


@pytest.mark.parametrize("create,kind", [("create_model", "model"),
                                         ("create_endpoint_config", "endpoint configuration"),
                                         ("create_endpoint", "endpoint")])
def test_the_emulator_refuses_duplicate_names_like_sagemaker(emu, create, kind):
    import botocore.exceptions

    emu.create_endpoint_stack("taken")
    sm = emu.client("sagemaker")
    bodies = {
        "create_model": dict(ModelName="taken", ExecutionRoleArn=emu.role_arn, PrimaryContainer={"Image": "y"}),
        "create_endpoint_config": dict(EndpointConfigName="taken", ProductionVariants=[{
            "VariantName": "AllTraffic", "ModelName": "taken", "InstanceType": "ml.g7e.2xlarge",
            "InitialInstanceCount": 1}]),
        "create_endpoint": dict(EndpointName="taken", EndpointConfigName="taken"),
    }
    with pytest.raises(botocore.exceptions.ClientError) as err:
        getattr(sm, create)(**bodies[create])
    assert err.value.response["Error"]["Code"] == "ValidationException"
    assert f'Cannot create already existing {kind} "arn:aws:sagemaker:us-east-1:' in str(err.value)
    assert sm.describe_model(ModelName="taken")["PrimaryContainer"]["Image"].endswith("other:1")  # not overwritten


def test_status_and_leftovers_back_off_on_peagles_clock_not_the_real_one(emu):
    """The back-off between read retries waits on `peagle_deploy.clock` (which a harness can swap), as every
    other poll does: `status` and `leftovers` had bound `time.sleep` itself, a real 1 + 2 s per retried read."""
    from peagle_deploy.lifecycle import inventory

    from .cli_runner import fake_wait_clock

    run(emu)
    emu.fail("DescribeEndpoint", code="ThrottlingException", status=400, times=2)
    with fake_wait_clock() as clock:
        rows = inventory.status(AwsSession(emu.region))
    assert [row.name for row in rows] == ["reads"] and clock.sleeps == [1.0, 2.0]
    emu.fail("ListEndpoints", code="ServiceUnavailable", status=503, times=1)
    with fake_wait_clock() as clock:
        assert inventory.leftovers(AwsSession(emu.region)) == []
    assert clock.sleeps == [1.0]
