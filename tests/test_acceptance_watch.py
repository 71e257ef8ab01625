"""Acceptance watched while it serves, through the CLI (in-process) against the emulator server on its manual clock:
`deploy` creates the metric filters and the alarm (both hosting shapes), vLLM's lines become the metric, `status`
shows the last hour beside the floor and says when it fell; an update whose new fleet logs a collapsed acceptance is
rolled back by the alarm (SageMaker's guardrails, as the emulator models them); a successful update moves the alarm to
the new K; cleanup, a deploy's rollback and recover leave no filter or alarm of peagle's, and an unmanaged stack
with its own alarms and filters beside it comes through untouched."""

from __future__ import annotations

import json

import pytest

from peagle_deploy.acceptance_alarm import NAMESPACE, alarm_name, filter_pattern
from .cli_runner import run_cli

NAME = "watched"
THEIRS = "theirs"
FORMAT = ("INFO 12-01 10:00:00 [metrics.py:120] SpecDecoding metrics: Mean acceptance length: %.2f, Accepted "
          "throughput: 1.00 tokens/s, Drafted throughput: 1.00 tokens/s, Accepted: %d tokens, Drafted: %d tokens, "
          "Per-position acceptance rate: %s, Avg Draft acceptance rate: %.1f%%")


def line(k: int, drafts: int, accepted: int) -> str:
    """vLLM's line for `drafts` drafts of K tokens with `accepted` accepted (the rates spread over the positions)."""
    rates = ", ".join(f"{min(1.0, max(0.0, accepted / drafts - i)):.3f}" for i in range(k))
    return FORMAT % (1 + accepted / drafts, accepted, drafts * k, rates, accepted / (drafts * k) * 100)


HEALTHY = line(3, 100, 180)  # K=3, mean acceptance length 2.80
COLLAPSED_K5 = line(5, 100, 1)  # K=5, 1.01: the V2 runner's sequential P-EAGLE heads (vLLM 43010)


def peagle(emu, *args):
    result = run_cli(*args, env={**emu.env, "COLUMNS": "250", "NO_COLOR": "1"}, fake_clock=False)
    return result


def alarms(emu) -> dict[str, dict]:
    return {a["AlarmName"]: a for a in emu.client("cloudwatch").describe_alarms()["MetricAlarms"]}


def filters(emu) -> dict[str, list[str]]:
    found = {}
    for f in emu.client("logs").describe_metric_filters()["metricFilters"]:
        found.setdefault(f["logGroupName"], []).append(f["filterName"])
    return {group: sorted(names) for group, names in found.items()}


def serve(emu, clock, owner: str, text: str, minutes: int, *, component: bool = False) -> None:
    """The container logs `text` every 10 s for `minutes`, from now on the emulator's clock, which then stands at its
    last line: traffic still flows as status reads it."""
    emu.put_log_lines(owner, [text] * (6 * minutes), start_ms=int(clock() * 1000), step_ms=10_000,
                      component=owner if component else None)
    clock.advance(60 * minutes - 9)


@pytest.fixture
def theirs(emu, clocked):
    """Someone else's endpoint with its own alarms (one even named as peagle's would be, without peagle's tag) and
    metric filters, one of them in peagle's endpoint's log group: none may be touched."""
    emu.create_endpoint_stack(THEIRS)
    cw, logs = emu.client("cloudwatch"), emu.client("logs")
    for alarm in ("theirs-p99-latency", alarm_name(THEIRS)):
        cw.put_metric_alarm(AlarmName=alarm, Namespace="AWS/SageMaker", MetricName="ModelLatency", Statistic="Average",
                            Period=60, EvaluationPeriods=1, Threshold=1000.0, ComparisonOperator="GreaterThanThreshold",
                            Tags=[{"Key": "team", "Value": "ml"}])
    for owner in (THEIRS, NAME):
        group = f"/aws/sagemaker/Endpoints/{owner}"
        logs.create_log_group(logGroupName=group)
        logs.put_metric_filter(logGroupName=group, filterName="their-acceptance", filterPattern=filter_pattern(3),
                               metricTransformations=[{"metricName": f"{owner}-theirs", "metricNamespace": "Theirs",
                                                       "metricValue": "$accepted"}])
    return {"alarms": sorted(alarms(emu)), "filters": filters(emu)}


def untouched(emu, theirs) -> None:
    assert {name for name in alarms(emu) if not name.startswith(alarm_name(NAME))} == set(theirs["alarms"])
    now = filters(emu)
    for group, names in theirs["filters"].items():
        assert set(names) <= set(now.get(group, [])), group
    assert THEIRS in emu.resource_names()["endpoints"]


def deploy(emu, *extra):
    done = peagle(emu, "deploy", "qwen3-coder", "--name", NAME, "--role", emu.role_arn, "--yes", "--json", *extra)
    assert done.code == 0, done.stderr
    return json.loads(done.stdout)


def status(emu) -> tuple[dict, str]:
    doc = peagle(emu, "status", NAME, "--json")
    human = peagle(emu, "status", NAME)
    assert doc.code == human.code == 0, doc.stderr + human.stderr
    [row] = json.loads(doc.stdout)["endpoints"]
    return row["acceptance"], human.stdout


def test_deploy_creates_the_metric_and_alarm_and_status_shows_them_and_their_fall(emu, clocked, theirs):
    doc = deploy(emu)
    assert doc["deployed"]["acceptance_alarm"].startswith(f"{alarm_name(NAME)}: vLLM's mean acceptance length at K=3")
    group = f"/aws/sagemaker/Endpoints/{NAME}"
    assert filters(emu)[group] == ["peagle-acceptance-watched-k3-accepted", "peagle-acceptance-watched-k3-drafted",
                                   "their-acceptance"]
    alarm = alarms(emu)[alarm_name(NAME)]
    assert (alarm["Threshold"], alarm["ComparisonOperator"], alarm["EvaluationPeriods"]) == (1.12, "LessThanThreshold", 3)
    tags = {t["Key"]: t["Value"] for t in emu.client("cloudwatch").list_tags_for_resource(
        ResourceARN=alarm["AlarmArn"])["Tags"]}
    assert tags["peagle:managed"] == "true" and tags["peagle:endpoint"] == NAME

    serve(emu, clocked, NAME, HEALTHY, 5)  # vLLM's lines become CloudWatch's metric, one datapoint per line
    stats = emu.client("cloudwatch").get_metric_statistics(
        Namespace=NAMESPACE, MetricName=f"{NAME}/K3/AcceptedTokens", Statistics=["Sum", "SampleCount"], Period=3600,
        StartTime=clocked() - 3600, EndTime=clocked())["Datapoints"]
    assert [(p["Sum"], p["SampleCount"]) for p in stats] == [(180.0 * 30, 30.0)]
    acceptance, human = status(emu)
    assert acceptance["mean_acceptance_length"] == pytest.approx(2.8) and acceptance["k"] == 3
    assert (acceptance["floor"], acceptance["alarm_state"], acceptance["fallen"]) == (1.12, "OK", False)
    assert f"{NAME}: acceptance: mean acceptance length 2.80 at K=3 over the last hour, " in human
    assert "floor 1.12; alarm peagle-acceptance-watched OK" in human

    serve(emu, clocked, NAME, line(3, 100, 1), 10)  # acceptance collapses for ten minutes
    acceptance, human = status(emu)
    assert acceptance["fallen"] is True and acceptance["alarm_state"] == "ALARM"
    assert acceptance["recent_mean_acceptance_length"] == pytest.approx(1.01)  # the hour's still holds the good part
    assert acceptance["mean_acceptance_length"] == pytest.approx(1 + 3 * (180 * 30 + 60) / (300 * 90))
    assert "1.01 over the last 3 min" in human
    assert "FALLEN below the floor 1.12 over the last 3 min; alarm peagle-acceptance-watched ALARM (Threshold " \
           "Crossed" in human
    untouched(emu, theirs)


def test_an_update_whose_new_fleet_collapses_is_rolled_back_by_the_alarm(emu, clocked, theirs):
    deploy(emu)
    serve(emu, clocked, NAME, HEALTHY, 3)
    before = alarms(emu)[alarm_name(NAME)]
    emu.script_update(updating_polls=500, new_fleet_logs=[COLLAPSED_K5])  # SageMaker keeps it Updating meanwhile
    done = peagle(emu, "update", NAME, "--k", "5", "--yes")
    assert done.code == 6, done.stderr
    [error] = [ln for ln in done.stderr.splitlines() if ln.startswith("error: ")]
    assert f"the update of {NAME} failed and SageMaker rolled it back: Rolled back: CloudWatch alarm " \
           f"{alarm_name(NAME)}" in error
    assert "the new fleet (K=5) accepted too few draft tokens: its mean acceptance length stayed below 1.16" in error
    assert "the endpoint still serves the old configuration (K=3)" in error
    assert "filter peagle-acceptance-watched-k5-accepted removed" in error and "put back as it was" in error
    update_request = emu.update_requests[-1]["DeploymentConfig"]["AutoRollbackConfiguration"]
    assert update_request == {"Alarms": [{"AlarmName": alarm_name(NAME)}]}
    # what serves is K=3 again, watched as before the update: its filters and its alarm at K=3
    assert emu.resource_names()["endpoints"] == sorted([NAME, THEIRS])
    assert filters(emu)[f"/aws/sagemaker/Endpoints/{NAME}"] == [
        "peagle-acceptance-watched-k3-accepted", "peagle-acceptance-watched-k3-drafted", "their-acceptance"]
    after = alarms(emu)[alarm_name(NAME)]
    assert (after["Threshold"], after["Metrics"]) == (before["Threshold"], before["Metrics"])
    acceptance, human = status(emu)
    assert acceptance["k"] == 3 and acceptance["alarm_k"] == 3
    assert f"InService: Rolled back: CloudWatch alarm {alarm_name(NAME)}" in human  # why, in status too
    untouched(emu, theirs)


def test_a_successful_update_moves_the_alarm_to_the_new_k(emu, clocked, theirs):
    deploy(emu)
    emu.script_update(updating_polls=2)
    done = peagle(emu, "update", NAME, "--k", "5", "--bake", "0s", "--yes")
    assert done.code == 0, done.stderr
    assert "the baking period (0s) is shorter than the acceptance alarm needs" in done.stderr  # said in the plan
    assert filters(emu)[f"/aws/sagemaker/Endpoints/{NAME}"] == [
        "peagle-acceptance-watched-k5-accepted", "peagle-acceptance-watched-k5-drafted", "their-acceptance"]
    alarm = alarms(emu)[alarm_name(NAME)]
    assert alarm["Threshold"] == 1.16 and alarm["Metrics"][-1]["Expression"] == "1 + 5 * accepted / drafted"
    serve(emu, clocked, NAME, line(5, 100, 300), 3)  # the new fleet serves: its lines feed the K=5 metrics
    acceptance, _ = status(emu)
    assert (acceptance["k"], acceptance["alarm_k"]) == (5, 5) and acceptance["mean_acceptance_length"] == pytest.approx(4.0)
    untouched(emu, theirs)


def test_an_update_out_of_a_fall_is_judged_on_its_new_fleet_only(emu, clocked, theirs):
    """The alarm is in ALARM (K=3 fell); PutMetricAlarm keeps an alarm's state, so without peagle setting it to
    INSUFFICIENT_DATA SageMaker would roll back at once the update meant to end the fall."""
    deploy(emu)
    serve(emu, clocked, NAME, line(3, 100, 1), 5)
    assert alarms(emu)[alarm_name(NAME)]["StateValue"] == "ALARM"
    emu.script_update(updating_polls=40, new_fleet_logs=[line(5, 100, 250)])  # eagle3 K=5 accepts again
    done = peagle(emu, "update", NAME, "--k", "5", "--mode", "eagle3", "--yes")
    assert done.code == 0, done.stderr
    alarm = alarms(emu)[alarm_name(NAME)]
    assert alarm["Metrics"][-1]["Expression"] == "1 + 5 * accepted / drafted" and alarm["StateValue"] != "ALARM"
    assert alarm["Threshold"] == 1.4  # eagle3's break-even at K=5: K drafter passes
    untouched(emu, theirs)


def test_an_update_to_mode_off_removes_the_alarm_and_its_filters(emu, clocked, theirs):
    deploy(emu)
    emu.script_update(updating_polls=2)
    plan = json.loads(peagle(emu, "update", NAME, "--mode", "off", "--dry-run", "--json").stdout)["update"]
    assert plan["acceptance_alarm"] is None and any("speculation is off" in n for n in plan["notes"])
    assert any(w.startswith("DeleteMetricFilter + DeleteAlarms") for w in plan["writes"])
    done = peagle(emu, "update", NAME, "--mode", "off", "--bake", "0s", "--yes")
    assert done.code == 0, done.stderr
    assert alarm_name(NAME) not in alarms(emu)  # nothing drafts: nothing to watch
    assert filters(emu)[f"/aws/sagemaker/Endpoints/{NAME}"] == ["their-acceptance"]
    untouched(emu, theirs)


def test_cleanup_leaves_no_filter_or_alarm_of_peagles_and_theirs_untouched(emu, clocked, theirs):
    deploy(emu)
    done = peagle(emu, "cleanup", NAME, "--yes")
    assert done.code == 0, done.stderr
    assert f"deleted alarm {alarm_name(NAME)}" in done.stdout
    assert f"deleted metric filter /aws/sagemaker/Endpoints/{NAME}:peagle-acceptance-watched-k3-drafted" in done.stdout
    assert alarm_name(NAME) not in alarms(emu)
    assert not [f for names in filters(emu).values() for f in names if f.startswith("peagle-")]
    untouched(emu, theirs)
    everything = peagle(emu, "cleanup", "--all", "--yes")  # theirs, and the alarm named as peagle's, stay
    assert everything.code == 0, everything.stderr
    untouched(emu, theirs)


def test_component_hosting_watches_the_components_log_group(emu, clocked, theirs):
    doc = deploy(emu, "--hosting", "component")
    group = f"/aws/sagemaker/InferenceComponents/{NAME}"
    assert doc["plan"]["acceptance_alarm"]["log_group"] == group
    assert filters(emu)[group] == ["peagle-acceptance-watched-k3-accepted", "peagle-acceptance-watched-k3-drafted"]
    serve(emu, clocked, NAME, HEALTHY, 4, component=True)
    acceptance, _ = status(emu)
    assert acceptance["mean_acceptance_length"] == pytest.approx(2.8)
    done = peagle(emu, "cleanup", NAME, "--yes")
    assert done.code == 0, done.stderr
    assert alarm_name(NAME) not in alarms(emu) and group not in filters(emu)
    untouched(emu, theirs)


def test_a_deploy_that_fails_at_the_alarm_rolls_back_its_filters_and_endpoint(emu, clocked, theirs):
    emu.fail("PutMetricAlarm", code="ValidationException", message="injected for the acceptance alarm")
    done = peagle(emu, "deploy", "qwen3-coder", "--name", NAME, "--role", emu.role_arn, "--yes")
    assert done.code == 2, done.stderr
    assert "rolled back" in done.stderr and "metric filter" in done.stderr
    assert NAME not in emu.resource_names()["endpoints"] and alarm_name(NAME) not in alarms(emu)
    assert filters(emu)[f"/aws/sagemaker/Endpoints/{NAME}"] == ["their-acceptance"]
    untouched(emu, theirs)


def test_recover_removes_what_a_killed_deploy_left(emu, clocked, theirs):
    """A deploy killed in its rollback after the endpoint went (its model, config and endpoint deleted behind it):
    its filters and alarm are peagle's leftovers, which recover finds by the alarm and removes."""
    deploy(emu)
    sm = emu.client("sagemaker")
    for delete, key in ((sm.delete_endpoint, "EndpointName"), (sm.delete_endpoint_config, "EndpointConfigName"),
                        (sm.delete_model, "ModelName")):
        delete(**{key: NAME})
    assert alarm_name(NAME) in alarms(emu)
    status_line = peagle(emu, "status")
    assert status_line.code == 0
    done = peagle(emu, "recover", NAME)
    assert done.code == 0, done.stderr
    assert f"deleted alarm {alarm_name(NAME)}" in done.stdout and "deleted metric filter" in done.stdout
    assert alarm_name(NAME) not in alarms(emu)
    assert filters(emu)[f"/aws/sagemaker/Endpoints/{NAME}"] == ["their-acceptance"]
    again = peagle(emu, "recover", "--all")
    assert again.code == 0 and "nothing left to finish" in again.stdout
    emu.client("sagemaker").delete_endpoint(EndpointName=THEIRS)  # their alarm named as peagle's, its endpoint gone
    theirs_too = peagle(emu, "recover", "--all")
    assert theirs_too.code == 0 and "nothing left to finish" in theirs_too.stdout, theirs_too.stdout
    assert alarm_name(THEIRS) in alarms(emu)  # not peagle's (no peagle:managed): left, and not mentioned
