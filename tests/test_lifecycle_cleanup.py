"""status and cleanup select by peagle's tags only: unmanaged resources always survive."""

from datetime import UTC, datetime, timedelta

import pytest

from peagle_deploy import lifecycle
from peagle_deploy.aws import AwsSession
from peagle_deploy.errors import PeagleError
from peagle_deploy.plan import PlanRequest, build_plan


@pytest.fixture
def emu(emu_in_process):
    return emu_in_process


def deploy(emu, name, **kwargs):
    plan = build_plan(PlanRequest(model="qwen3-coder", role=emu.role_arn, region=emu.region, name=name, **kwargs))
    lifecycle.deploy(plan, AwsSession(emu.region), sleep=lambda _s: None)
    return plan


def unmanaged_stack(emu, name, tags=()):
    emu.create_endpoint_stack(name, tags=list(tags))


def names(emu):
    sm = emu.client("sagemaker")
    return (sorted(e["EndpointName"] for e in sm.list_endpoints()["Endpoints"]),
            sorted(c["EndpointConfigName"] for c in sm.list_endpoint_configs()["EndpointConfigs"]),
            sorted(m["ModelName"] for m in sm.list_models()["Models"]))


def test_status_lists_only_managed_endpoints_with_cost(emu):
    deploy(emu, "mine", k=7, ttl=timedelta(hours=2))
    unmanaged_stack(emu, "theirs")
    later = datetime.now(UTC) + timedelta(minutes=30)
    [row] = lifecycle.status(AwsSession(emu.region), now=later)
    assert (row.name, row.status, row.mode, row.k, row.instance_type) == ("mine", "InService", "p-eagle", 7,
                                                                         "ml.g7e.2xlarge")
    assert 29 * 60 < row.age_s < 32 * 60 and 85 * 60 < row.expires_in_s < 91 * 60
    # the price is the Pricing API's answer (here the emulator's figure), with its source
    hourly = emu.hosting_prices["ml.g7e.2xlarge"]
    assert row.price.source == "aws-pricing-api" and row.price_per_hour_usd == hourly
    assert row.cost_so_far_usd == pytest.approx(hourly * row.age_s / 3600, abs=0.01)
    with pytest.raises(PeagleError, match="not created by peagle"):
        lifecycle.status(AwsSession(emu.region), "theirs")


def test_cleanup_all_spares_unmanaged_even_with_a_look_alike_tag(emu):
    deploy(emu, "mine-1")
    deploy(emu, "mine-2")
    unmanaged_stack(emu, "theirs")
    unmanaged_stack(emu, "sneaky", tags=[{"Key": "peagle:managed", "Value": "false"}])
    report = lifecycle.cleanup(AwsSession(emu.region), all_=True)
    assert sorted((o.kind, o.name) for o in report.deleted) == sorted(
        (kind, name) for name in ("mine-1", "mine-2") for kind in ("endpoint", "endpoint_config", "model"))
    assert names(emu) == (["sneaky", "theirs"], ["sneaky", "theirs"], ["sneaky", "theirs"])


def test_cleanup_by_name_refuses_unmanaged_and_a_missing_name_is_an_error(emu):
    """Nothing done is not success (issue 11 item 3): someone else's endpoint and a name that does not exist
    both raise a UsageError (exit 2), and nothing is deleted."""
    unmanaged_stack(emu, "theirs")
    with pytest.raises(PeagleError, match="not created by peagle") as err:
        lifecycle.cleanup(AwsSession(emu.region), "theirs")
    assert err.value.exit_code == 2
    assert names(emu) == (["theirs"], ["theirs"], ["theirs"])
    deploy(emu, "mine")
    assert [o.result for o in lifecycle.cleanup(AwsSession(emu.region), "mine").outcomes] == ["deleted"] * 3
    with pytest.raises(PeagleError, match="no endpoint, endpoint config or model named 'mine'") as err:
        lifecycle.cleanup(AwsSession(emu.region), "mine")
    assert err.value.exit_code == 2


def test_managed_endpoint_on_an_unmanaged_model_keeps_the_model(emu):
    """Tags are checked on every resource, not only on the endpoint."""
    unmanaged_stack(emu, "shared")
    sm = emu.client("sagemaker")
    sm.create_endpoint_config(EndpointConfigName="mine-cfg", ProductionVariants=[{
        "VariantName": "AllTraffic", "ModelName": "shared", "InstanceType": "ml.g7e.2xlarge",
        "InitialInstanceCount": 1}], Tags=[{"Key": "peagle:managed", "Value": "true"}])
    sm.create_endpoint(EndpointName="mine", EndpointConfigName="mine-cfg",
                       Tags=[{"Key": "peagle:managed", "Value": "true"}])
    report = lifecycle.cleanup(AwsSession(emu.region), "mine")
    assert [(o.kind, o.name, o.result) for o in report.outcomes] == [
        ("endpoint", "mine", "deleted"), ("endpoint_config", "mine-cfg", "deleted"), ("model", "shared", "left")]
    assert "shared" in names(emu)[2]


def test_cleanup_expired_only_removes_endpoints_past_their_ttl(emu):
    deploy(emu, "short", ttl=timedelta(hours=1))
    deploy(emu, "long", ttl=timedelta(hours=8))
    deploy(emu, "forever")
    unmanaged_stack(emu, "theirs")
    in_two_hours = datetime.now(UTC) + timedelta(hours=2)
    report = lifecycle.cleanup(AwsSession(emu.region), expired=True, now=lambda: in_two_hours)
    assert {o.name for o in report.deleted} == {"short"}
    assert names(emu)[0] == ["forever", "long", "theirs"]


def test_cleanup_all_removes_leftover_managed_models(emu):
    sm = emu.client("sagemaker")
    sm.create_model(ModelName="orphan", ExecutionRoleArn=emu.role_arn, PrimaryContainer={"Image": "x"},
                    Tags=[{"Key": "peagle:managed", "Value": "true"}])
    report = lifecycle.cleanup(AwsSession(emu.region), all_=True)
    assert [(o.kind, o.name, o.result) for o in report.outcomes] == [("model", "orphan", "deleted")]


def test_cleanup_needs_exactly_one_selector(emu):
    with pytest.raises(PeagleError, match="exactly one"):
        lifecycle.cleanup(AwsSession(emu.region), "x", all_=True)


def test_status_report_describes_each_endpoint_and_config_once_and_finds_the_same(emu, monkeypatch):
    """`peagle status` reads its rows and then what nothing uses: the endpoints and configs the rows described are
    not described again (10 of 40 round trips for 5 endpoints), and the answer is what the two reads give apart.
    One botocore session does it all (the Pricing client is the status session's own)."""
    from peagle_deploy import aws
    from peagle_deploy.lifecycle.inventory import leftovers, report

    deploy(emu, "mine-1")
    deploy(emu, "mine-2")
    deploy(emu, "gone")
    unmanaged_stack(emu, "theirs")
    emu.client("sagemaker").delete_endpoint(EndpointName="gone")  # its config and model are left over
    apart = AwsSession(emu.region)
    want_rows, want_unused = lifecycle.status(apart), leftovers(apart)

    built = []
    real_session = aws._botocore_session
    monkeypatch.setattr(aws, "_botocore_session", lambda profile: built.append(profile) or real_session(profile))
    session = AwsSession(emu.region)
    calls: list[str] = []
    session.client("sagemaker").meta.events.register(
        "before-call.sagemaker", lambda model, **_: calls.append(model.name))
    rows, unused = report(session)

    assert [r.name for r in rows] == [r.name for r in want_rows] == ["mine-1", "mine-2"]
    assert [(r.mode, r.k, r.price_per_hour_usd) for r in rows] == [(r.mode, r.k, r.price_per_hour_usd)
                                                                    for r in want_rows]
    assert [(u.kind, u.name) for u in unused] == [(u.kind, u.name) for u in want_unused] == [
        ("endpoint_config", "gone"), ("model", "gone")]
    assert calls.count("DescribeEndpoint") == 3  # mine-1, mine-2, theirs: once each
    assert calls.count("DescribeEndpointConfig") == 4  # mine-1, mine-2, gone, theirs: once each
    assert len(built) == 1


def test_a_describe_that_failed_in_a_report_is_asked_again():
    from peagle_deploy.lifecycle.inventory import _DescribedOnce

    answers = iter([RuntimeError("throttled"), {"EndpointName": "a"}])

    class Client:
        def describe_endpoint(self, **kwargs):
            answer = next(answers)
            if isinstance(answer, Exception):
                raise answer
            return answer

        def list_endpoints(self):
            return "passed through"

    sm = _DescribedOnce(Client())
    with pytest.raises(RuntimeError):
        sm.describe_endpoint(EndpointName="a")
    assert sm.describe_endpoint(EndpointName="a") == {"EndpointName": "a"}
    assert sm.describe_endpoint(EndpointName="a") == {"EndpointName": "a"}  # kept: `answers` is spent
    assert sm.list_endpoints() == "passed through"
