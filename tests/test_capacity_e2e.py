"""Issue 36's "Must show" for instance pools, quotas and capacity, through `peagle` processes (forked,
tests/forked_peagle.py) against the emulator in server mode, with another team's endpoint present and untouched:

- no ml.g7e.2xlarge capacity -> the endpoint serves from the ml.g7e.4xlarge pool, and status, bench and cost say so;
- a quota refusal of ml.g7e.2xlarge -> deployed with ml.g7e.4xlarge, one line saying why (Service Quotas read at
  plan time, and CreateEndpoint's own ResourceLimitExceeded answered by a replan);
- no pool with capacity, or no pool with quota -> exit 4, everything rolled back;
- SIGINT during the deploy -> nothing left; a crashed container -> no second attempt;
- `--dry-run` with two types prints the ordered plan with price, quota and fit.
"""

from __future__ import annotations

import json
import signal
import subprocess

import pytest

from peagle_deploy.testing.capacity_emulation import POOLS_CAPACITY_REASON, quota_message

from .forked_peagle import forked_peagle
from .peagle_process import PeagleProcess

G2, G4, G12 = "ml.g7e.2xlarge", "ml.g7e.4xlarge", "ml.g7e.12xlarge"
POOLS = f"{G2},{G4}"
NAME = "pooled-qwen"
THEIRS = "team-endpoint"


def peagle(emu, *args):
    env = {**emu.env, "COLUMNS": "200", "NO_COLOR": "1"}
    return subprocess.run([forked_peagle(), *args], env=env, capture_output=True, text=True, timeout=300,
                          stdin=subprocess.DEVNULL)


def deploy(emu, *extra):
    return peagle(emu, "deploy", "qwen3-coder", "--name", NAME, "--role", emu.role_arn, "--instance-type", POOLS,
                  "--yes", *extra)


@pytest.fixture
def theirs(emu):
    """Another team's endpoint on ml.g7e.8xlarge: every test ends with it as it was."""
    emu.create_endpoint_stack(THEIRS, instance_type="ml.g7e.8xlarge")
    before = emu.resource_names()
    yield before
    assert emu.endpoint_status(THEIRS) == "InService"
    names = emu.resource_names()
    for kind in ("endpoints", "configs", "models"):
        assert THEIRS in names[kind]


def creates_since(emu, start):
    return emu.calls[start:].count("CreateEndpoint")


def only_theirs(emu):
    return emu.resource_names() == {"endpoints": [THEIRS], "configs": [THEIRS], "models": [THEIRS]}


def test_no_capacity_for_the_first_type_serves_from_the_next_pool_and_status_bench_cost_say_so(emu, theirs,
                                                                                              tmp_path):
    emu.set_capacity(G2, 0)
    deployed = deploy(emu, "--provision-timeout", "600", "--json")
    assert deployed.returncode == 0, deployed.stderr
    result = json.loads(deployed.stdout)
    assert result["deployed"]["serving_pools"].startswith("serving from 1 x ml.g7e.4xlarge (pool priority 2 of 2)")
    assert {c["name"]: c["state"] for c in result["deployed"]["verification"]}["instance pools"] == "verified"
    assert emu.serving(NAME) == {"AllTraffic": {G4: {"instances": 1, "model": NAME}}}
    config = emu.client("sagemaker").describe_endpoint_config(EndpointConfigName=NAME)["ProductionVariants"][0]
    assert config["InstancePools"] == [{"InstanceType": G2, "Priority": 1}, {"InstanceType": G4, "Priority": 2}]
    assert config["VariantInstanceProvisionTimeoutInSeconds"] == 600

    status = peagle(emu, "status", NAME, "--json")
    assert status.returncode == 0, status.stderr
    [row] = json.loads(status.stdout)["endpoints"]
    assert (row["instance_type"], row["instance_count"]) == (G4, 1)
    assert row["price"]["instance_type"] == G4 and row["price_per_hour_usd"] == pytest.approx(emu.hosting_prices[G4])
    assert row["cost_so_far_usd"] is not None and row["instance_pools"] == [G2, G4]
    human = peagle(emu, "status", NAME).stdout
    assert "1 x ml.g7e.4xlarge" in human
    assert f"{NAME}: serving from 1 x ml.g7e.4xlarge (pool priority 2 of 2); pools: ml.g7e.2xlarge, ml.g7e.4xlarge" \
           in human

    bench = peagle(emu, "bench", NAME, "--concurrency", "1", "--num-prompts", "2", "--warmup", "0", "--logs-wait",
                   "0", "--out", str(tmp_path), "--no-chart", "--json")
    assert bench.returncode == 0, bench.stderr
    target = json.loads(bench.stdout)["result"]["target"]
    price = json.loads(bench.stdout)["result"]["price"]
    assert (target["instance_type"], target["instance_count"]) == (G4, 1)
    assert target["instance_pool"].startswith("serving from 1 x ml.g7e.4xlarge (pool priority 2 of 2)")
    assert price["instance_type"] == G4 and price["usd_per_hour"] == pytest.approx(emu.hosting_prices[G4])
    report = next(tmp_path.glob("*.md")).read_text()
    assert "- instance: 1 x ml.g7e.4xlarge (serving from 1 x ml.g7e.4xlarge (pool priority 2 of 2)" in report

    cleaned = peagle(emu, "cleanup", NAME, "--yes")
    assert cleaned.returncode == 0, cleaned.stderr
    assert only_theirs(emu)


def test_service_quotas_of_0_leave_the_type_out_with_one_line(emu, theirs):
    emu.set_quota(G2, 0)
    start = len(emu.calls)
    deployed = deploy(emu)
    assert deployed.returncode == 0, deployed.stderr
    assert deployed.stderr.count("ml.g7e.2xlarge: quota 0 in us-east-1; deploying with ml.g7e.4xlarge") == 1
    assert emu.serving(NAME) == {"AllTraffic": {G4: {"instances": 1, "model": NAME}}}
    assert creates_since(emu, start) == 1  # decided before any write


def test_a_second_pool_without_quota_is_planned_out_where_service_quotas_can_be_read(emu, theirs):
    """Must show (issue 44): SageMaker checks the pool list's quota whole at CreateEndpoint ("quota does not fall
    back, capacity does", Deepgram's SageMaker deployment documentation), so a short-quota type anywhere in the list
    would refuse the whole endpoint: peagle reads Service Quotas and plans without it, one line, one CreateEndpoint."""
    emu.set_quota(G4, 0)
    start = len(emu.calls)
    deployed = deploy(emu)
    assert deployed.returncode == 0, deployed.stderr
    assert deployed.stderr.count("ml.g7e.4xlarge: quota 0 in us-east-1; deploying with ml.g7e.2xlarge") == 1
    config = emu.client("sagemaker").describe_endpoint_config(EndpointConfigName=NAME)["ProductionVariants"][0]
    assert config["InstancePools"] == [{"InstanceType": G2, "Priority": 1}]
    assert config["RoutingConfig"] == {"RoutingStrategy": "LEAST_OUTSTANDING_REQUESTS"}  # a pool variant carries it
    assert emu.serving(NAME) == {"AllTraffic": {G2: {"instances": 1, "model": NAME}}}
    assert creates_since(emu, start) == 1  # decided before any write


def test_a_second_pool_without_quota_is_refused_once_and_planned_again_where_quotas_cannot_be_read(emu, theirs):
    """Service Quotas cannot be read (no servicequotas permission): the plan keeps both types, SageMaker refuses the
    whole list at CreateEndpoint naming the short one, and peagle answers that once: rolled back exactly, planned
    again without it, deployed."""
    emu.set_quota(G4, 0)
    emu.fail("ListServiceQuotas", code="AccessDeniedException", message="not allowed (emulated)", times=10)
    start = len(emu.calls)
    deployed = deploy(emu)
    assert deployed.returncode == 0, deployed.stderr
    assert deployed.stderr.count("ml.g7e.4xlarge: quota 0 in us-east-1; deploying with ml.g7e.2xlarge") == 1
    writes = [c for c in emu.calls[start:] if c.startswith(("Create", "Delete"))]
    assert writes[:8] == ["CreateModel", "CreateEndpointConfig", "CreateEndpoint",  # refused: the list is checked whole
                          "DeleteEndpointConfig", "DeleteModel",  # exactly what it made
                          "CreateModel", "CreateEndpointConfig", "CreateEndpoint"], writes
    assert creates_since(emu, start) == 2  # refused once, answered once
    config = emu.client("sagemaker").describe_endpoint_config(EndpointConfigName=NAME)["ProductionVariants"][0]
    assert config["InstancePools"] == [{"InstanceType": G2, "Priority": 1}]
    assert emu.serving(NAME) == {"AllTraffic": {G2: {"instances": 1, "model": NAME}}}


def test_a_quota_refusal_at_create_endpoint_is_answered_by_planning_again_without_that_type(emu, theirs):
    """Service Quotas said nothing (no value listed), CreateEndpoint refuses ml.g7e.2xlarge with SageMaker's own
    text: the attempt is rolled back exactly, the plan made again without that type, and deployed."""
    emu.fail("CreateEndpoint", code="ResourceLimitExceeded", message=quota_message(G2, 0, 0, 1))
    start = len(emu.calls)
    deployed = deploy(emu)
    assert deployed.returncode == 0, deployed.stderr
    assert deployed.stderr.count("ml.g7e.2xlarge: quota 0 in us-east-1; deploying with ml.g7e.4xlarge") == 1
    writes = [c for c in emu.calls[start:] if c.startswith(("Create", "Delete"))]
    assert writes == ["CreateModel", "CreateEndpointConfig", "CreateEndpoint",  # refused
                      "DeleteEndpointConfig", "DeleteModel",  # exactly what it made
                      "CreateModel", "CreateEndpointConfig", "CreateEndpoint",
                      "CreateLogGroup",  # the acceptance alarm's filters need the group the container has not made
                      "DeleteTags", "DeleteTags", "DeleteTags"], writes  # the deploy's lease released at the end
    config = emu.client("sagemaker").describe_endpoint_config(EndpointConfigName=NAME)["ProductionVariants"][0]
    assert config["InstancePools"] == [{"InstanceType": G4, "Priority": 1}]
    assert emu.serving(NAME) == {"AllTraffic": {G4: {"instances": 1, "model": NAME}}}


def test_a_quota_refusal_with_no_pool_left_is_exit_4_and_nothing_is_left(emu, theirs):
    emu.fail("CreateEndpoint", code="ResourceLimitExceeded", message=quota_message(G2, 0, 0, 1))
    emu.fail("CreateEndpoint", code="ResourceLimitExceeded", message=quota_message(G4, 1, 1, 1))
    refused = deploy(emu)
    assert refused.returncode == 4, refused.stderr
    assert "ml.g7e.2xlarge: quota 0 in us-east-1; deploying with ml.g7e.4xlarge" in refused.stderr
    last = refused.stderr.strip().splitlines()[-1]
    assert last.startswith("error: ml.g7e.4xlarge: quota 1 in us-east-1; no instance pool is left "
                           "(ml.g7e.2xlarge, ml.g7e.4xlarge refused for quota)"), last
    assert "rolled back: endpoint config, model deleted" in last and "Traceback" not in refused.stderr
    assert only_theirs(emu)


def test_no_capacity_in_any_pool_is_exit_4_with_sagemakers_reason_and_everything_rolled_back(emu, theirs):
    emu.set_capacity(G2, 0)
    emu.set_capacity(G4, 0)
    start = len(emu.calls)
    failed = deploy(emu, "--provision-timeout", "300")
    assert failed.returncode == 4, failed.stderr
    last = failed.stderr.strip().splitlines()[-1]
    assert last.startswith(f"error: endpoint {NAME} is Failed: {POOLS_CAPACITY_REASON.rstrip('.')}"), last
    assert "rolled back: endpoint, endpoint config, model deleted" in last
    assert creates_since(emu, start) == 1  # SageMaker tried every pool: no second attempt
    assert only_theirs(emu)


def test_a_crashed_container_is_not_tried_again(emu, theirs):
    emu.script_endpoints(final="Failed", reason="CannotStartContainerError: the container exited with code 139")
    start = len(emu.calls)
    failed = deploy(emu)
    assert failed.returncode == 6, failed.stderr
    assert "CannotStartContainerError" in failed.stderr.strip().splitlines()[-1]
    assert creates_since(emu, start) == 1 and "deploying with" not in failed.stderr
    assert only_theirs(emu)


@pytest.mark.parametrize("action,skip,when", [
    ("DescribeEndpoint", 1, "before"),  # waiting while SageMaker looks for capacity in the pools
    ("CreateEndpoint", 0, "after"),  # the attempt after a quota refusal (a refused call passes no gate), its
    # answer in flight
], ids=["waiting-for-capacity", "replan-CreateEndpoint-in-flight"])
def test_sigint_during_a_pooled_deploy_leaves_nothing(emu, theirs, action, skip, when):
    emu.set_capacity(G2, 0)
    emu.set_capacity(G4, 0)
    if action == "CreateEndpoint":
        emu.set_capacity(G4, None)
        emu.fail("CreateEndpoint", code="ResourceLimitExceeded", message=quota_message(G2, 0, 0, 1))
    gate = emu.gate(action, skip=skip, when=when, resource=NAME)
    run = PeagleProcess(["deploy", "qwen3-coder", "--name", NAME, "--role", emu.role_arn, "--instance-type", POOLS,
                         "--provision-timeout", "3600", "--yes"], emu.env, program=forked_peagle())
    gate.wait_entered()
    run.signal(signal.SIGINT)
    run.wait_for_stderr("received SIGINT")
    gate.release()
    assert run.finish() == 130, run.stderr
    last = run.stderr.strip().splitlines()[-1]
    assert last.startswith("error: interrupted by SIGINT") and "rolled back:" in last, run.stderr
    assert only_theirs(emu)


def test_dry_run_with_two_types_prints_the_ordered_plan_with_price_quota_and_fit(emu, theirs):
    emu.set_quota(G2, 3)
    emu.set_quota(G12, 0)
    start = len(emu.calls)
    shown = peagle(emu, "deploy", "qwen3-coder", "--name", NAME, "--instance-type", f"{G12},{G2},{G4}", "--dry-run")
    assert shown.returncode == 0, shown.stderr
    lines = [line.strip("│ ") for line in shown.stdout.splitlines()]
    rows = [line for line in lines if line.startswith(("pool ", "left out "))]
    assert rows == [
        "left out            -  ml.g7e.12xlarge: $12.00/h; quota 0, 0 in use; fits (192 GB of GPU memory; JumpStart "
        "deploys the model on ml.g7e.2xlarge (96 GB)); LEFT OUT: quota 0 in us-east-1",
        "pool                1. ml.g7e.2xlarge: $5.00/h; quota 3, 0 in use; fits (96 GB of GPU memory; JumpStart "
        "deploys the model on ml.g7e.2xlarge (96 GB)); model pooled-qwen",
        "pool                2. ml.g7e.4xlarge: $6.00/h; quota unknown (Service Quotas lists no 'ml.g7e.4xlarge for "
        "endpoint usage'); fits (96 GB of GPU memory; JumpStart deploys the model on ml.g7e.2xlarge (96 GB)); model "
        "pooled-qwen"], rows
    assert "note ml.g7e.12xlarge: quota 0 in us-east-1; deploying with ml.g7e.2xlarge, ml.g7e.4xlarge" in shown.stdout
    assert not any(c.startswith("Create") for c in emu.calls[start:])


def test_pools_with_their_own_model_update_status_and_cleanup(emu, theirs):
    """ml.g7e.12xlarge runs two GPUs: its pool has its own model (ModelNameOverride). Status does not call it unused,
    an update to another list replaces it, and cleanup removes every model of the endpoint, never another's."""
    emu.set_capacity(G2, 0)
    emu.script_update(updating_polls=1)
    deployed = peagle(emu, "deploy", "qwen3-coder", "--name", NAME, "--role", emu.role_arn, "--instance-type",
                      f"{G2},{G12}", "--yes")
    assert deployed.returncode == 0, deployed.stderr
    assert emu.serving(NAME) == {"AllTraffic": {G12: {"instances": 1, "model": f"{NAME}-p2"}}}
    env = emu.client("sagemaker").describe_model(ModelName=f"{NAME}-p2")["PrimaryContainer"]["Environment"]
    assert env["SM_VLLM_TENSOR_PARALLEL_SIZE"] == "2"
    status = peagle(emu, "status", NAME)
    assert "unused" not in status.stdout and "serving from 1 x ml.g7e.12xlarge (pool priority 2 of 2)" in status.stdout

    updated = peagle(emu, "update", NAME, "--instance-type", f"{G2},{G4}", "--bake", "0s", "--yes", "--json")
    assert updated.returncode == 0, updated.stderr
    assert emu.serving(NAME) == {"AllTraffic": {G4: {"instances": 1, "model": NAME}}}  # the pools share it now
    names = emu.resource_names()
    assert f"{NAME}-p2" not in names["models"] and len(names["configs"]) == 2  # the old pool's model went too
    [row] = json.loads(peagle(emu, "status", NAME, "--json").stdout)["endpoints"]
    assert (row["instance_type"], row["instance_pools"]) == (G4, [G2, G4]) and row["label_mismatch"] is None

    cleaned = peagle(emu, "cleanup", NAME, "--yes")
    assert cleaned.returncode == 0, cleaned.stderr
    assert only_theirs(emu)


def test_the_quota_check_counts_the_instances_of_pool_variants(emu, theirs):
    from peagle_deploy.lifecycle.quota import instances_in_use, instances_in_use_by_type

    emu.set_capacity(G2, 0)
    sm = emu.client("sagemaker")
    sm.create_model(ModelName="m", ExecutionRoleArn=emu.role_arn, PrimaryContainer={"Image": "img"})
    sm.create_endpoint_config(EndpointConfigName="pooled", ProductionVariants=[{
        "VariantName": "AllTraffic", "ModelName": "m", "InitialInstanceCount": 2,
        "InstancePools": [{"InstanceType": G2, "Priority": 1}, {"InstanceType": G4, "Priority": 2}]}])
    sm.create_endpoint(EndpointName="pooled", EndpointConfigName="pooled")
    assert emu.instances_in_use(G4) == 2
    assert instances_in_use(sm, G4) == 2 and instances_in_use(sm, G2) == 0
    assert instances_in_use_by_type(sm) == {G4: 2, "ml.g7e.8xlarge": 1}


def test_a_pools_own_model_carries_the_deploys_lease_and_is_not_unused_while_it_runs(emu, theirs):
    """A pool's own model (ModelNameOverride) is created with the deploy's lease, like its main model: while the
    deploy runs, status lists it in progress, never unused (what recover --all would remove); the lease goes at
    the end."""
    gate = emu.gate("CreateEndpoint", resource=NAME)
    run = PeagleProcess(["deploy", "qwen3-coder", "--name", NAME, "--role", emu.role_arn, "--instance-type",
                         f"{G2},{G12}", "--yes"], emu.env, program=forked_peagle())
    gate.wait_entered()
    document = json.loads(peagle(emu, "status", "--json").stdout)
    assert document["unused"] == [], document["unused"]
    assert sorted((u["kind"], u["name"], u["lease"]["operation"]) for u in document["in_progress"]) == [
        ("endpoint_config", NAME, "deploy"), ("model", NAME, "deploy"), ("model", f"{NAME}-p2", "deploy")]
    gate.release()
    assert run.finish() == 0, run.stderr
    sm = emu.client("sagemaker")
    arn = sm.describe_model(ModelName=f"{NAME}-p2")["ModelArn"]
    assert "peagle:lease" not in {t["Key"] for t in sm.list_tags(ResourceArn=arn)["Tags"]}  # released
    assert peagle(emu, "cleanup", NAME, "--yes").returncode == 0
    assert only_theirs(emu)
