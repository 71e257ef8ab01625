"""Issue 35's sweep on components: `peagle sweep MODEL --hosting component` runs every mode x K as an inference
component of ONE endpoint on a multi-GPU ml.g7e, measured one at a time, beside the classic layout's estimate.

Against the emulator server with the sweep stand-ins (peagle_deploy.testing.sweep_standins, which answer per
component and write each component's SpecDecoding lines to its own log group), and an unmanaged component-based
stack beside peagle's that must come through untouched. Commands run forked (tests/interrupt_helpers.py `Forked`);
interrupts are synchronised on emulator gates and stand-in holds, never on time."""

from __future__ import annotations

import json
import os
import signal

import pytest

from peagle_deploy.testing.pricing_emulation import EMULATED_HOSTING_USD
from peagle_deploy.testing.sweep_standins import SweepStandIn

from .aws_shapes import request_errors
from .interrupt_helpers import ELSEWHERE, LATER, Executable, Forked

peagle = Forked()
FAST = ["--concurrency", "1,2", "--num-prompts", "2", "--warmup", "0", "--logs-wait", "0", "--provision-estimate", "60"]
THREE = ["--modes", "off,eagle3,p-eagle", "--k", "3"]
LABELS = ["off", "eagle3 K=3", "p-eagle K=3"]
THEIRS = "theirs"


@pytest.fixture
def standin(emu):
    return SweepStandIn(emu).install()


@pytest.fixture
def theirs(emu):
    """Someone else's component-based stack (an endpoint with two components): never touched."""
    names = emu.components.create_stack(THEIRS, components=2)
    emu.calls.clear()
    return names


def everything(emu) -> dict:
    return {**emu.resource_names(), "components": emu.components.names()}


def sweep(emu, tmp_path, *extra, json_out=True):
    args = ["sweep", "qwen3-coder", "--hosting", "component", *THREE, *FAST, "--budget", "40", "--role", emu.role_arn,
            "--yes", "--out", str(tmp_path), *extra]
    return peagle.run([*args, "--json"] if json_out else args, {**emu.env, "AWS_SDK_UA_APP_ID": "sweeper"})


def test_three_components_on_one_instance_measured_one_at_a_time_beside_the_classic_estimate(standin, theirs,
                                                                                           tmp_path):
    """Must-show: off, EAGLE-3 and P-EAGLE as three components of one ml.g7e.24xlarge endpoint; the report names the
    layout and what the classic layout would have cost; nothing of peagle's is left, theirs is untouched."""
    emu = standin.emulator
    before = everything(emu)
    done = sweep(emu, tmp_path)
    assert done.code == 0, done.stderr
    report = json.loads(done.stdout)["report"]
    sweep_id = report["sweep_id"]
    host = f"peagle-{sweep_id}"
    ours = [f"{host}-off", f"{host}-eagle3-k3", f"{host}-p-eagle-k3"]
    assert report["status"] == "done" and [c["label"] for c in report["configurations"]] == LABELS
    layout = report["layout"]
    assert layout["hosting"] == "component" and layout["endpoint"] == host
    assert layout["instance_type"] == "ml.g7e.24xlarge" and layout["batches"] == [LABELS]
    # the classic layout's estimate, as the plan made it: three ml.g7e.2xlarge endpoints at the emulated price
    state = json.loads((tmp_path / "sweep-state.json").read_text())
    classic = state["plan"]["classic"]
    assert [c["instance_type"] for c in classic["configurations"]] == ["ml.g7e.2xlarge"] * 3
    assert layout["classic_estimated_usd"] == classic["estimated_usd"] == pytest.approx(
        sum(EMULATED_HOSTING_USD["ml.g7e.2xlarge"] * c["estimated_s"] / 3600 for c in classic["configurations"]),
        abs=1e-3)
    assert state["plan"]["estimated_usd"] == pytest.approx(
        EMULATED_HOSTING_USD["ml.g7e.24xlarge"] * state["plan"]["layout"]["estimated_s"] / 3600, abs=1e-3)
    md = (tmp_path / "sweep.md").read_text()
    assert f"- layout: inference components: one endpoint {host} on ml.g7e.24xlarge (4 GPUs)" in md
    assert f"would have cost about ${classic['estimated_usd']:,.2f}" in md
    assert "At $5.00/h, the hosting price of ml.g7e.2xlarge (where a deploy of one configuration runs)" in md
    # spent: the one endpoint's instance-hours, all of the sweep's spend
    assert 0 < report["spent_usd"] == layout["spent_on_endpoint_usd"] <= 40
    # each configuration measured on its own component, acceptance per K from the component's own log group
    for row in report["configurations"]:
        assert row["status"] == "done" and set(row["output_tokens_per_s"]) == {"1", "2"}
        assert row["target"] in ours
        if row["mode"] != "off":
            assert len(row["per_position_acceptance"]) == 3 and row["per_position_acceptance"][0] == pytest.approx(0.8)
    result = json.loads((tmp_path / report["configurations"][2]["result_file"]).read_text())
    assert result["acceptance"]["source"] == f"cloudwatch:/aws/sagemaker/InferenceComponents/{host}-p-eagle-k3"
    assert sorted(standin.served) == sorted(ours)  # every request named a component of ours
    assert not standin.together  # one at a time: no two components ever served at the same moment
    for name in ours:
        tags = standin.tags[name]
        assert tags["peagle:managed"] == "true" and tags["peagle:sweep-id"] == sweep_id
        assert tags["peagle:endpoint"] == host and "peagle:expires-at" in tags
    # one endpoint, its components each created after it was InService and removed before it; each model with its
    # own speculative config, verified
    calls = emu.calls
    assert calls.count("CreateEndpoint") == 1 and calls.count("CreateInferenceComponent") == 3
    assert calls.count("CreateModel") == 3
    last_component_delete = max(i for i, c in enumerate(calls) if c == "DeleteInferenceComponent")
    assert last_component_delete < calls.index("DeleteEndpoint")
    assert sorted(report["removed"]) == sorted([*ours, host])
    assert everything(emu) == before  # nothing of peagle's, and theirs all there
    for name in theirs:
        assert emu.components.state(name)["status"] == "InService"


def killed_mid_bench(standin, tmp_path) -> None:
    """A component sweep SIGKILLed while eagle3 K=3 is benchmarked (off measured): the installed executable itself,
    so no handler runs."""
    emu = standin.emulator
    release = standin.hold_at("-eagle3-k3")
    args = ["sweep", "qwen3-coder", "--hosting", "component", *THREE, *FAST, "--budget", "40", "--role", emu.role_arn,
            "--yes", "--out", str(tmp_path)]
    run = Executable().start(args, emu.env)
    try:
        assert standin.arrived["-eagle3-k3"].wait(300), "the sweep never benchmarked eagle3 K=3"
        run.signal(signal.SIGKILL)
        run.finish()
    finally:
        release.set()


def test_the_dry_run_shows_the_layout_each_body_valid_and_both_estimates(no_aws):
    out = peagle.run(["sweep", "qwen3-coder", "--hosting", "component", *THREE, "--dry-run", "--json"], dict(os.environ))
    assert out.code == 0, out.stderr
    plan = json.loads(out.stdout)["plan"]
    assert plan["hosting"] == "component" and plan["layout"]["instance_type"] == "ml.g7e.24xlarge"
    layout = plan["layout"]
    host = layout["endpoint"]
    bodies = [("CreateEndpointConfig", layout["create_endpoint_config"]), ("CreateEndpoint", layout["create_endpoint"])]
    variant = layout["create_endpoint_config"]["ProductionVariants"][0]
    assert "ModelName" not in variant and variant["InstanceType"] == "ml.g7e.24xlarge"
    assert variant["ManagedInstanceScaling"] == {"Status": "ENABLED", "MinInstanceCount": 1, "MaxInstanceCount": 1}
    host_tags = {t["Key"]: t["Value"] for t in layout["create_endpoint"]["Tags"]}
    assert "peagle:mode" not in host_tags and host_tags["peagle:hosting"] == "component"  # no one component's mode
    configs = {}
    for component in layout["components"]:
        body = component["create_inference_component"]
        assert body["EndpointName"] == host and body["Specification"]["ModelName"] == component["component"]
        assert body["Specification"]["ComputeResourceRequirements"] == {
            "NumberOfAcceleratorDevicesRequired": 1.0, "MinMemoryRequiredInMb": 131072}  # one GPU of four
        env = component["create_model"]["PrimaryContainer"]["Environment"]
        assert env["SM_VLLM_TENSOR_PARALLEL_SIZE"] == "1"
        configs[component["label"]] = env.get("SM_VLLM_SPECULATIVE_CONFIG")
        bodies += [("CreateModel", component["create_model"]), ("CreateInferenceComponent", body)]
    assert configs["off"] is None
    assert json.loads(configs["eagle3 K=3"])["parallel_drafting"] is False
    assert json.loads(configs["p-eagle K=3"])["parallel_drafting"] is True
    for operation, body in bodies:
        assert request_errors("sagemaker", operation, body) == [], (operation, body)
    assert plan["classic"]["estimated_s"] > 0 and len(plan["classic"]["configurations"]) == 3
    human = peagle.run(["sweep", "qwen3-coder", "--hosting", "component", *THREE, "--dry-run"],
                       {**os.environ, "COLUMNS": "250"})
    assert human.code == 0, human.stderr
    for text in ("one endpoint " + "peagle-", "on ml.g7e.24xlarge (4 GPUs", "estimates side by side",
                 "components (this sweep)", "classic: one endpoint per configuration", "3 x ml.g7e.2xlarge",
                 'method="eagle3" num_speculative_tokens=3 parallel_drafting=true'):
        assert text in human.stdout, text


def test_the_dry_run_prices_both_layouts_and_chooses_the_instance(emu):
    out = peagle.run(["sweep", "qwen3-coder", "--hosting", "component", "--concurrency", "1,4", "--dry-run",
                      "--json", "--budget", "100"], emu.env)
    assert out.code == 0, out.stderr
    plan = json.loads(out.stdout)["plan"]
    layout = plan["layout"]
    # seven configurations: the smallest ml.g7e with seven GPUs is the ml.g7e.48xlarge (eight)
    assert layout["instance_type"] == "ml.g7e.48xlarge" and len(layout["batches"]) == 1
    assert layout["price_per_hour_usd"] == EMULATED_HOSTING_USD["ml.g7e.48xlarge"]
    assert layout["estimated_s"] == pytest.approx(2 * 600 + 7 * layout["bench_s"] + 120)
    assert plan["estimated_usd"] == layout["estimated_usd"] == pytest.approx(48 * layout["estimated_s"] / 3600,
                                                                             abs=1e-3)
    assert plan["classic"]["price_per_hour_usd"] == EMULATED_HOSTING_USD["ml.g7e.2xlarge"]
    batched = peagle.run(["sweep", "qwen3-coder", "--hosting", "component", "--instance-type", "ml.g7e.24xlarge",
                          "--dry-run", "--json"], emu.env)
    assert batched.code == 0, batched.stderr
    layout = json.loads(batched.stdout)["plan"]["layout"]
    assert [len(b) for b in layout["batches"]] == [4, 3] and "in 2 batches of up to 4" in layout["choice"]
    assert layout["estimated_s"] == pytest.approx(3 * 600 + 7 * layout["bench_s"] + 120)
    assert list(emu.calls) == ["GetProducts"] * emu.calls.count("GetProducts")  # a dry run only reads prices


@pytest.mark.parametrize("extra,error", [
    (["--parallel", "2"], "--parallel 2 with --hosting component: the components share one instance"),
    (["--hosting", "shared"], "--hosting 'shared' is not a hosting: pass --hosting endpoint or component"),
    (["--instance-type", "ml.g5.12xlarge"], "instance type 'ml.g5.12xlarge' is not an ml.g7e instance"),
])
def test_bad_input_is_one_line_and_creates_nothing(emu, tmp_path, extra, error):
    out = sweep(emu, tmp_path, *extra, json_out=False)
    assert out.code == 2, out.stderr
    assert out.last_error.startswith(f"error: {error}"), out.stderr
    assert len([ln for ln in out.stderr.splitlines() if ln.strip()]) == 1
    assert not [c for c in emu.calls if c.startswith("Create")]


def test_url_and_components_are_refused_together(no_aws, tmp_path):
    out = peagle.run(["sweep", "my-model", "--hosting", "component", "--url", "off=http://127.0.0.1:9/v1",
                      "--out", str(tmp_path)], dict(os.environ))
    assert out.code == 2 and "--hosting component deploys every configuration" in out.last_error, out.stderr


def test_batches_load_each_after_the_one_before_is_measured_and_removed(standin, tmp_path):
    """Two GPUs for three configurations: off and EAGLE-3 first, P-EAGLE once a GPU is free again."""
    emu = standin.emulator
    done = sweep(emu, tmp_path, "--instance-type", "ml.g7e.12xlarge")
    assert done.code == 0, done.stderr
    report = json.loads(done.stdout)["report"]
    assert report["layout"]["batches"] == [["off", "eagle3 K=3"], ["p-eagle K=3"]]
    assert all(c["status"] == "done" for c in report["configurations"])
    calls = [c for c in emu.calls if c in ("CreateInferenceComponent", "DeleteInferenceComponent")]
    assert calls == ["CreateInferenceComponent"] * 2 + ["DeleteInferenceComponent"] * 2 + [
        "CreateInferenceComponent", "DeleteInferenceComponent"]
    assert not standin.together and everything(emu) == {"endpoints": [], "configs": [], "models": [],
                                                         "components": []}


@pytest.mark.parametrize("moment", ["creating the second component", "benchmarking a component"])
def test_sigint_mid_sweep_tears_down_components_before_the_endpoint(standin, theirs, tmp_path, moment):
    emu = standin.emulator
    before = everything(emu)
    if moment == "creating the second component":
        gate = emu.gate("CreateInferenceComponent", skip=1, caller="sweeper")
        release = gate.release
    else:
        release = standin.hold_at("-eagle3-k3").set
    args = ["sweep", "qwen3-coder", "--hosting", "component", *THREE, *FAST, "--budget", "40", "--role", emu.role_arn,
            "--yes", "--out", str(tmp_path)]
    run = peagle.start(args, {**emu.env, "AWS_SDK_UA_APP_ID": "sweeper"})
    try:
        if moment == "creating the second component":
            gate.wait_entered(unless=lambda: run.code is not None)
        else:
            assert standin.arrived["-eagle3-k3"].wait(300), "the sweep never benchmarked eagle3 K=3"
        emu.calls.clear()
        run.signal(signal.SIGINT)
        if moment == "creating the second component":
            release()  # the create in flight is answered (a create is never abandoned half-way)
        code = run.finish()
    finally:
        release()
    assert code == 130, run.stderr
    state = json.loads((tmp_path / "sweep-state.json").read_text())
    host = f"peagle-{state['request']['sweep_id']}"
    assert everything(emu) == before, run.stderr
    held = f"{host}-eagle3-k3"  # the component whose create, or whose bench, the signal came in
    [removed] = [line for line in run.stderr.splitlines() if line.startswith(f"removed {host} (")]
    assert "inference components " in removed and held in removed, removed
    assert removed.endswith("endpoint, endpoint config, models): interrupted") and "Traceback" not in run.stderr
    assert emu.calls.index("DeleteInferenceComponent") < emu.calls.index("DeleteEndpoint")
    assert state["status"] == "interrupted" and state["host"]["status"] == "stopped"
    assert f"continue with 'peagle sweep --resume {tmp_path / 'sweep-state.json'}'" in run.last_error


def test_sigkill_then_recover_all_removes_the_components_before_their_endpoint(standin, theirs, tmp_path):
    emu = standin.emulator
    before = everything(emu)
    killed_mid_bench(standin, tmp_path)
    left = everything(emu)
    host = next(e for e in left["endpoints"] if e != THEIRS)
    assert [c for c in left["components"] if c.startswith(host)]  # the killed sweep left its components
    emu.calls.clear()
    fresh = peagle.run(["recover", "--all"], {**emu.env, **ELSEWHERE})  # fresh, seen from another machine: left alone
    assert fresh.code == 0 and f"{host}: skipped the sweep's endpoint: sweep in progress on" in fresh.stdout, \
        fresh.stderr
    assert host in everything(emu)["endpoints"]
    status = peagle.run(["status"], {**emu.env, **ELSEWHERE, **LATER, "COLUMNS": "250"})
    assert status.code == 0 and "abandoned (lease expired at" in status.stdout, status.stderr
    assert f"{host}: finish with 'peagle recover {host} --region us-east-1'" in status.stdout
    done = peagle.run(["recover", "--all"], {**emu.env, **LATER})  # ten minutes on: the lease has expired
    assert done.code == 0, done.stderr
    assert everything(emu) == before, done.stdout
    assert emu.calls.index("DeleteInferenceComponent") < emu.calls.index("DeleteEndpoint")


def test_sigint_whose_teardown_is_refused_names_the_exact_command_that_finishes_it(standin, theirs, tmp_path):
    """The component's delete is refused during the teardown: the endpoint is left (deleting it would strand the
    component), and the error names the command that removes what is left; that command does."""
    emu = standin.emulator
    before = everything(emu)
    release = standin.hold_at("-off")
    args = ["sweep", "qwen3-coder", "--hosting", "component", *THREE, *FAST, "--budget", "40", "--role", emu.role_arn,
            "--yes", "--out", str(tmp_path)]
    run = peagle.start(args, {**emu.env, "AWS_SDK_UA_APP_ID": "sweeper"})
    try:
        assert standin.arrived["-off"].wait(300), "the sweep never benchmarked off"
        emu.fail("DeleteInferenceComponent", code="AccessDeniedException", message="injected: no permission",
                 caller="sweeper")
        run.signal(signal.SIGINT)
        code = run.finish()
    finally:
        release.set()
    host = f"peagle-{json.loads((tmp_path / 'sweep-state.json').read_text())['request']['sweep_id']}"
    assert code == 130, run.stderr
    assert host in everything(emu)["endpoints"]  # left: it still hosts a component
    command = f"peagle recover {host} --region us-east-1"
    assert f"'{command}' finishes the deletion" in run.last_error, run.stderr
    assert f"could not remove {host}:" in run.stderr
    state = json.loads((tmp_path / "sweep-state.json").read_text())
    assert state["host"]["status"] in ("deployed", "deploying") and state["host"]["error"]  # live: --resume retries
    done = peagle.run(command.split()[1:], {**emu.env, **LATER})
    assert done.code == 0, done.stderr
    assert everything(emu) == before


def test_a_lost_answer_of_create_inference_component_is_found_and_torn_down(standin, theirs, tmp_path):
    """SageMaker made the component but its answer never came: the sweep fails, and its teardown finds the component
    on its endpoint and removes it before the endpoint."""
    emu = standin.emulator
    before = everything(emu)
    emu.fail("CreateInferenceComponent", "ServiceUnavailable", "answer lost (emulated)", status=503, after=True,
             times=10, skip=1, caller="sweeper")
    done = sweep(emu, tmp_path, json_out=False)
    assert done.code not in (0, 2) and "Traceback" not in done.stderr, done.stderr
    host = f"peagle-{json.loads((tmp_path / 'sweep-state.json').read_text())['request']['sweep_id']}"
    [removed] = [line for line in done.stderr.splitlines() if line.startswith(f"removed {host} (")]
    assert f"{host}-eagle3-k3" in removed, removed  # the component whose answer was lost
    assert everything(emu) == before


def test_sigkill_then_resume_removes_the_endpoint_left_and_measures_only_what_is_left(standin, tmp_path):
    emu = standin.emulator
    killed_mid_bench(standin, tmp_path)
    host = next(iter(everything(emu)["endpoints"]))
    served = dict(standin.served)
    state_file = tmp_path / "sweep-state.json"
    done = peagle.run(["sweep", "--resume", str(state_file), "--json"], emu.env)
    assert done.code == 0, done.stderr
    assert f"removed {host} (inference components" in done.stderr
    report = json.loads(done.stdout)["report"]
    assert [c["status"] for c in report["configurations"]] == ["done"] * 3
    again = sorted(name.removeprefix(host + "-") for name in standin.served if standin.served[name] != served.get(name))
    assert again == ["eagle3-k3", "p-eagle-k3"]  # off was measured before the kill: not again
    assert not standin.together
    assert everything(emu) == {"endpoints": [], "configs": [], "models": [], "components": []}
    assert report["spent_usd"] == pytest.approx(json.loads(state_file.read_text())["host"]["spent_usd"], abs=1e-6)  # 6 places


def test_a_budget_stop_between_benches_tears_the_endpoint_down_and_counts_its_hours(emu_server, tmp_path):
    """Every request takes an hour of the sweep's clock: off's one request makes the endpoint cost more than the
    budget leaves, so the next bench is refused before it starts; the endpoint goes, its hours counted."""
    from peagle_deploy.aws import AwsSession
    from peagle_deploy.output import Output
    from peagle_deploy.sweep.component_runner import ComponentSweep
    from peagle_deploy.sweep.config import SweepRequest, configurations
    from peagle_deploy.sweep.estimate import plan_sweep
    from peagle_deploy.sweep.runner import BudgetStop
    from peagle_deploy.sweep.state import ConfigState, StateFile, SweepState

    standin = SweepStandIn(emu_server).install()
    now = [1_000_000.0]
    serve = standin.on_request

    def on_request(name, body):
        now[0] += 3600
        serve(name, body)

    emu_server.runtime.on_request = on_request
    hourly = emu_server.hosting_prices["ml.g7e.12xlarge"]  # two configurations: two GPUs
    request = SweepRequest(model="qwen3-coder", configurations=configurations(["off", "p-eagle"], [3]),
                           concurrency=[1], num_prompts=1, warmup=0, budget_usd=0.9 * hourly, role=emu_server.role_arn,
                           logs_wait_s=0, provision_s=60, teardown_s=60, sweep_id="swtest-0035", agreement_prompts=0,
                           hosting="component")
    plan, deployments = plan_sweep(request, offline=False)
    sf = StateFile(tmp_path / "sweep-state.json", SweepState(
        request=request, plan=plan, configs={c.label: ConfigState(label=c.label) for c in plan.configurations}))
    sweep = ComponentSweep(sf, Output(True), tmp_path, session=AwsSession("us-east-1"), deployments=deployments,
                           layout=plan.layout, clock=lambda: now[0])
    with pytest.raises(BudgetStop) as stopped:
        sweep.run(1)
    assert "budget: benchmarking of p-eagle K=3 would bring the sweep to about" in stopped.value.one_line()
    off, peagle_k3 = sf.state.configs["off"], sf.state.configs["p-eagle K=3"]
    assert off.status == "done" and off.measured
    assert not peagle_k3.measured and peagle_k3.error.startswith("budget: benchmarking of p-eagle K=3")
    assert sf.state.host.status == "stopped" and sf.state.host.spent_usd >= hourly  # the hour off's request took
    assert sweep.spent_usd() == pytest.approx(sf.state.host.spent_usd)
    assert emu_server.components.names() == [] and not any(emu_server.resource_names().values())
