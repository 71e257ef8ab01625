"""lifecycle/lease.py: the `peagle:lease` tag, its holder's heartbeat and release, against the in-process emulator.
Time is injected (`now=`, the heartbeat's `wait`): nothing here waits."""

from __future__ import annotations

import os
from datetime import UTC, datetime, timedelta

import pytest

from peagle_deploy.inputs import TAG_VALUE_MAX, is_tag_text
from peagle_deploy.lifecycle.lease import EXPIRY_S, PERIOD_S, Lease, LeaseHolder, fresh_lease, read_lease
from peagle_deploy.tag_keys import LEASE

T0 = datetime(2026, 6, 1, 10, 0, 0, tzinfo=UTC)
MANAGED = [{"Key": "peagle:managed", "Value": "true"}]


class Clock:
    def __init__(self):
        self.at = T0

    def __call__(self):
        return self.at


def tags_of(sm, arn):
    return {t["Key"]: t["Value"] for t in sm.list_tags(ResourceArn=arn)["Tags"]}


def model(emu, name="m1"):
    sm = emu.client("sagemaker")
    arn = sm.create_model(ModelName=name, ExecutionRoleArn=emu.role_arn, PrimaryContainer={"Image": "x"},
                          Tags=MANAGED)["ModelArn"]
    return sm, arn


def test_the_tag_reads_back_and_is_judged_by_the_readers_clock():
    lease = Lease(operation="update", host="build-7.example", pid=4242, run_id="9f3a1c2e", since=T0,
                  until=T0 + timedelta(seconds=EXPIRY_S))
    value = lease.to_tag()
    assert value == ("update host=build-7.example pid=4242 id=9f3a1c2e since=2026-06-01T10:00:00Z "
                     "until=2026-06-01T10:10:00Z")
    assert len(value) <= TAG_VALUE_MAX and is_tag_text(value)  # SageMaker takes it as it is
    fresh = read_lease({LEASE: value}, T0 + timedelta(seconds=EXPIRY_S - 1))
    assert fresh.fresh and fresh.owner == "build-7.example (pid 4242, run 9f3a1c2e)"
    assert fresh.describe() == ("update in progress on build-7.example (pid 4242, run 9f3a1c2e) since "
                                "2026-06-01T10:00:00Z (lease fresh until 2026-06-01T10:10:00Z)")
    stale = read_lease({LEASE: value}, T0 + timedelta(seconds=EXPIRY_S))
    assert not stale.fresh and fresh_lease({LEASE: value}, T0 + timedelta(seconds=EXPIRY_S)) is None
    assert stale.describe().endswith("since 2026-06-01T10:00:00Z abandoned (lease expired at 2026-06-01T10:10:00Z)")


@pytest.mark.parametrize("value", ["", "update", "update host=h pid=x id=ab since=2026-06-01T10:00:00Z until=z",
                                   "update host=h pid=1 id=ab since=2026-06-01T10:00:00 until=2026-06-01T10:00:00"])
def test_a_lease_that_cannot_be_read_is_no_lease(value):
    assert read_lease({LEASE: value}, T0) is None
    assert read_lease(None, T0) is None


def test_the_period_leaves_nine_missed_refreshes_before_a_live_owner_looks_abandoned():
    assert EXPIRY_S / PERIOD_S >= 10


def test_a_create_carries_the_lease_and_the_heartbeat_moves_it_on(emu_in_process):
    clock = Clock()
    sm = emu_in_process.client("sagemaker")
    holder = LeaseHolder(sm, "deploy", now=clock)
    body = holder.with_tag({"ModelName": "m1", "ExecutionRoleArn": emu_in_process.role_arn,
                            "PrimaryContainer": {"Image": "x"}, "Tags": MANAGED + [{"Key": LEASE, "Value": "old"}]})
    assert [t["Key"] for t in body["Tags"]] == ["peagle:managed", LEASE]  # one lease, this one
    arn = sm.create_model(**body)["ModelArn"]
    holder.hold(arn)
    first = read_lease(tags_of(sm, arn), clock.at)
    assert (first.operation, first.until, first.fresh) == ("deploy", T0 + timedelta(seconds=EXPIRY_S), True)

    clock.at += timedelta(seconds=PERIOD_S)
    waits = iter([False, True])  # one period passes, then the owner stops
    holder.beat(wait=lambda seconds: next(waits))
    moved = read_lease(tags_of(sm, arn), clock.at)
    assert moved.until == clock.at + timedelta(seconds=EXPIRY_S) and moved.since == T0
    assert moved.run_id == first.run_id


def test_a_lease_taken_over_is_never_written_back(emu_in_process):
    clock = Clock()
    sm, arn = model(emu_in_process)
    holder = LeaseHolder(sm, "update", now=clock)
    sm.add_tags(ResourceArn=arn, Tags=[{"Key": k, "Value": v} for k, v in holder.tags().items()])
    holder.hold(arn)
    sm.delete_tags(ResourceArn=arn, TagKeys=[LEASE])  # a `recover --force` elsewhere took the work over
    holder.refresh()
    assert LEASE not in tags_of(sm, arn) and holder.held == [] and holder.lost == [arn]
    other = LeaseHolder(sm, "update", now=clock)  # and another run holds it now: ours must not remove theirs
    sm.add_tags(ResourceArn=arn, Tags=[{"Key": k, "Value": v} for k, v in other.tags().items()])
    holder.hold(arn)
    holder.release()
    assert read_lease(tags_of(sm, arn)).run_id == other.lease.run_id


def test_release_removes_the_lease_and_a_sweeps_expires_it_at_once(emu_in_process):
    clock = Clock()
    sm, arn = model(emu_in_process, "m1")
    _, kept = model(emu_in_process, "m2")
    with LeaseHolder(sm, "deploy", now=clock) as holder:
        sm.add_tags(ResourceArn=arn, Tags=[{"Key": LEASE, "Value": holder.value()}])
        holder.hold(arn)
        holder.hold(arn + "-gone")  # deleted meanwhile: nothing to release there
    assert LEASE not in tags_of(sm, arn)

    sweep = LeaseHolder(sm, "sweep", now=clock, expire_on_release=True)
    sm.add_tags(ResourceArn=kept, Tags=[{"Key": LEASE, "Value": sweep.value()}])
    sweep.hold(kept)
    clock.at += timedelta(seconds=30)
    sweep.release()
    left = read_lease(tags_of(sm, kept), clock.at)
    assert left.until == clock.at and not left.fresh  # abandoned at once: peagle recover removes it


def test_a_cleanup_whose_delete_fails_keeps_its_intent_and_releases_its_lease(emu_in_process):
    """The cleanup's lease goes on with `peagle:deleting`; when the delete fails the process ends without
    deleting: its intent stays for `peagle recover`, its lease does not (recover need not wait for it)."""
    from peagle_deploy.aws import AwsSession
    from peagle_deploy.lifecycle import cleanup

    emu = emu_in_process
    emu.create_endpoint_stack("ep9", tags=MANAGED)
    emu.fail("DeleteEndpoint", "ValidationException", "refused (emulated)")
    report = cleanup(AwsSession(emu.region), "ep9", wait=False)
    assert report.error is not None
    sm = emu.client("sagemaker")
    tags = tags_of(sm, sm.describe_endpoint(EndpointName="ep9")["EndpointArn"])
    assert "peagle:deleting" in tags and LEASE not in tags
    assert {"AddTags", "DeleteTags"} <= set(emu.calls)


def test_what_a_teardown_deleted_is_no_longer_held(emu_in_process):
    from peagle_deploy.lifecycle.outcome import Outcome

    holder = LeaseHolder(None, "sweep")
    arns = [f"arn:aws:sagemaker:us-east-1:123456789012:{part}/{name}" for part, name in (
        ("endpoint", "peagle-sw1-off"), ("endpoint-config", "peagle-sw1-off"), ("model", "Peagle-SW1-off"),
        ("endpoint", "peagle-sw1-p-eagle-k3"))]
    for arn in arns:
        holder.hold(arn)
    holder.drop_deleted([Outcome(kind="endpoint", name="peagle-sw1-off", result="deleted"),
                         Outcome(kind="endpoint_config", name="peagle-sw1-off", result="already gone"),
                         Outcome(kind="model", name="peagle-sw1-off", result="deleted"),  # AWS lowercases ARNs
                         Outcome(kind="endpoint", name="peagle-sw1-p-eagle-k3", result="failed")])
    assert holder.held == [arns[3]]  # still there: its lease is released (a sweep's: expired) at the end


def test_a_denied_refresh_says_once_which_permission_is_missing(emu_in_process):
    """AWS's AccessDenied on the heartbeat: one line naming the action and the resource, not one every 60 s."""
    clock = Clock()
    sm, arn = model(emu_in_process)
    said: list[str] = []
    holder = LeaseHolder(sm, "deploy", now=clock, warn=said.append)
    sm.add_tags(ResourceArn=arn, Tags=[{"Key": k, "Value": v} for k, v in holder.tags().items()])
    holder.hold(arn)
    written = read_lease(tags_of(sm, arn)).until
    emu_in_process.fail("AddTags", code="AccessDeniedException", times=3,
                        message=f"User: arn:aws:sts::123456789012:user/moto is not authorized to perform: "
                                f"sagemaker:AddTags on resource: {arn}")
    for _ in range(3):  # three periods, three refused refreshes
        clock.at += timedelta(seconds=PERIOD_S)
        holder.refresh()
    assert said == [f"the deploy's lease could not be refreshed: AWS denied sagemaker:AddTags on {arn} "
                    f"(AccessDeniedException); its {LEASE} tag goes stale at {written:%Y-%m-%dT%H:%M:%SZ} and the "
                    "deploy then looks abandoned to peagle status and recover: allow sagemaker:AddTags there (peagle "
                    "iam-policy deploy --json)"]
    clock.at += timedelta(seconds=PERIOD_S)
    holder.refresh()  # allowed again: the lease moves on, nothing more is said
    assert read_lease(tags_of(sm, arn)).until == clock.at + timedelta(seconds=EXPIRY_S) and len(said) == 1


def test_any_other_failed_refresh_is_one_line_too_without_a_traceback(emu_in_process, capsys):
    clock = Clock()
    sm, arn = model(emu_in_process)
    holder = LeaseHolder(sm, "update", now=clock)  # the default: stderr
    sm.add_tags(ResourceArn=arn, Tags=[{"Key": k, "Value": v} for k, v in holder.tags().items()])
    holder.hold(arn)
    emu_in_process.fail("ListTags", code="ServiceUnavailable", message="try later", status=503, times=20)
    holder.refresh()
    holder.refresh()
    err = capsys.readouterr().err
    assert err.splitlines() == [f"warning: the update's lease on {arn} could not be refreshed (ServiceUnavailable: try "
                                "later); peagle tries again every 60 s, and the lease stays fresh until "
                                f"{T0 + timedelta(seconds=EXPIRY_S):%Y-%m-%dT%H:%M:%SZ}"]
    assert "Traceback" not in err
# the owner's machine (issue 45 item 3): lifecycle/lease_owner.py ------------------------------------------------
def _dead_pid() -> int:
    """A pid that was a process of this machine and is gone (reaped)."""
    import subprocess
    import sys

    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def _here(**fields) -> Lease:
    from peagle_deploy.lifecycle import lease_owner

    values = dict(operation="deploy", host=lease_owner.host_name(), pid=4242, run_id="9f3a1c2e", since=T0,
                  until=T0 + timedelta(seconds=EXPIRY_S), pids=lease_owner.process_table())
    return Lease(**{**values, **fields})


def test_the_tag_records_the_process_and_its_process_table_within_awss_256_characters():
    holder = LeaseHolder(None, "cleanup")
    value = holder.value()
    lease = read_lease({LEASE: value})
    assert (lease.pid, lease.start, lease.pids) == (os.getpid(), lease_owner_started(), holder.lease.pids)
    assert lease.fresh and lease.gone is None  # this process, this run: running
    longest = Lease(operation="cleanup", host="h" * 63, pid=4194304, start="9" * 20, pids="f" * 8, run_id="f" * 8,
                    since=T0, until=T0).to_tag()
    assert len(longest) <= TAG_VALUE_MAX and is_tag_text(longest)
    holder.release()


def lease_owner_started():
    from peagle_deploy.lifecycle import lease_owner

    return lease_owner.started(os.getpid())


def test_on_its_machine_a_dead_owner_is_abandoned_at_once_with_why():
    pid = _dead_pid()
    lease = read_lease({LEASE: _here(pid=pid).to_tag()}, T0)  # the lease is fresh by its clock
    assert not lease.fresh and fresh_lease({LEASE: _here(pid=pid).to_tag()}, T0) is None
    assert lease.gone.startswith(f"its process (pid {pid}) is no longer running on ")
    assert lease.describe().endswith(f"abandoned (its process (pid {pid}) is no longer running on {lease.host})")
    assert "in progress" not in lease.describe()


@pytest.mark.parametrize("elsewhere", [{"host": "build-7.example"}, {"pids": "0badcafe"}, {"pids": None}])
def test_elsewhere_or_in_another_process_table_the_expiry_alone_counts(elsewhere):
    """Another host, another pid namespace or boot (a container sharing the host name), or a lease that does not
    say (older peagle, another system): the pid cannot be judged from here."""
    lease = read_lease({LEASE: _here(pid=_dead_pid(), **elsewhere).to_tag()}, T0)
    assert lease.fresh and lease.gone is None


def test_a_pid_that_is_another_process_now_is_abandoned():
    lease = read_lease({LEASE: _here(pid=os.getpid(), start="1").to_tag()}, T0)  # this pid started later
    assert not lease.fresh and lease.gone == f"pid {os.getpid()} on {lease.host} is now another process"


def test_in_its_own_process_a_run_that_ended_no_longer_holds_its_lease():
    holder = LeaseHolder(None, "update")
    value = holder.value()
    assert read_lease({LEASE: value}).fresh
    holder.release()  # its tag could not be removed (nothing held here): the run has ended all the same
    ended = read_lease({LEASE: value})
    assert not ended.fresh and ended.gone == f"its run ended in this process (pid {os.getpid()})"
