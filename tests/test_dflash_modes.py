"""`--mode dflash` wherever a mode is taken: deploy's plan (AWS's vLLM image, the speculative config with its attention
backend, the staged drafter's channel, the runner note), Gemma refused in one line, K as DFlash counts it; on the
emulator, a sweep of the four modes with its side-by-side table and the advisor's choice, and `bench agree` off vs
dflash."""

from __future__ import annotations

import json
import os
import subprocess

import pytest

from peagle_deploy.testing.sweep_standins import SpecModel, SweepStandIn, startup_lines
from tests.cli_runner import run_cli
from tests.forked_peagle import forked_peagle

DRAFTER = "s3://my-drafters/qwen3-coder/dflash"
DLC = "763104351884.dkr.ecr.us-east-1.amazonaws.com/vllm:0.28.0-gpu-py312-cu129-ubuntu22.04-sagemaker"


def plan(*args: str, env: dict[str, str] | None = None) -> dict:
    result = run_cli("deploy", "qwen3-coder", "--mode", "dflash", *args, "--dry-run", "--offline", "--json", env=env)
    assert result.code == 0, result.stderr
    return json.loads(result.stdout)["plan"]


def test_the_dry_run_shows_image_speculative_config_channel_and_runner_note(tmp_path):
    env = {**os.environ, "COLUMNS": "250", "PEAGLE_STATE_DIR": str(tmp_path)}
    human = run_cli("deploy", "qwen3-coder", "--mode", "dflash", "--dry-run", "--offline", "--drafter", DRAFTER,
                    env=env)
    assert human.code == 0, human.stderr
    out = human.stdout
    assert "mode                dflash, K=7" in out
    assert ('speculative config  {"model": "/opt/ml/additional-model-data-sources/dflash", "method": "dflash", '
            '"num_speculative_tokens": 7}') in out
    assert f"drafter channel     dflash <- {DRAFTER}/" in out
    assert f"image               {DLC}" in out
    assert "JumpStart's P-EAGLE image runs vLLM 0.18.0, which has no DFlash" in out
    assert "the image's vLLM 0.28.0 makes Model Runner V2 the default for dense models" in out  # the runner note
    assert "DFlash runs on V2 only for those models, on V1 otherwise" in out
    assert "--attention-backend flash_attn (SM_VLLM_ATTENTION_BACKEND)" in out
    assert "unverified image_uri: AWS's vLLM 0.28.0 image for SageMaker is named by analogy" in out

    body = plan("--drafter", DRAFTER, env=env)
    env_sent = body["create_model"]["PrimaryContainer"]["Environment"]
    assert json.loads(env_sent["SM_VLLM_SPECULATIVE_CONFIG"]) == {
        "model": "/opt/ml/additional-model-data-sources/dflash", "method": "dflash", "num_speculative_tokens": 7}
    assert env_sent["SM_VLLM_ATTENTION_BACKEND"] == "flash_attn"
    assert body["create_model"]["PrimaryContainer"]["AdditionalModelDataSources"] == [{
        "ChannelName": "dflash", "S3DataSource": {"S3Uri": DRAFTER + "/", "S3DataType": "S3Prefix",
                                                  "CompressionType": "None"}}]
    assert body["tags"]["peagle:mode"] == "dflash" and body["tags"]["peagle:k"] == "7"
    # the speculative config as the container turns it into vLLM's argv
    from peagle_deploy.container.args import build_argv

    argv = build_argv(env_sent)
    assert argv[argv.index("--attention-backend") + 1] == "flash_attn"
    assert json.loads(argv[argv.index("--speculative-config") + 1])["method"] == "dflash"


def test_without_a_staged_drafter_the_plan_says_it_is_missing_and_a_real_deploy_refuses(tmp_path):
    env = {**os.environ, "PEAGLE_STATE_DIR": str(tmp_path)}
    body = plan(env=env)
    assert body["drafter_channel"] is None
    assert any(m.startswith("the DFlash drafter in S3: stage it with peagle drafter stage qwen3-coder --method "
                            "dflash") for m in body["missing"])
    real = run_cli("deploy", "qwen3-coder", "--mode", "dflash", "--role", "arn:aws:iam::123456789012:role/r",
                   "--offline", "--yes", env=env)
    assert real.code == 2
    assert real.stderr.strip().splitlines() == [
        "error: --mode dflash needs the qwen3-coder DFlash drafter in S3: stage it first: peagle drafter stage "
        "qwen3-coder --method dflash --to s3://BUCKET/PREFIX (or pass --drafter s3://BUCKET/PREFIX)"]


def test_k_is_dflashs_own_and_bounded_by_its_block():
    assert plan("--drafter", DRAFTER, "--k", "15")["k"] == 15
    deep = run_cli("deploy", "qwen3-coder", "--mode", "dflash", "--k", "16", "--drafter", DRAFTER, "--dry-run",
                   "--offline")
    assert deep.code == 2
    assert "--k 16 is deeper than the qwen3-coder DFlash drafter was trained for (15): pass --k 1..15" in deep.stderr


@pytest.mark.parametrize("argv", [
    ["deploy", "gemma-4-31b", "--mode", "dflash", "--accept-eula", "--dry-run", "--offline"],
    ["sweep", "gemma-4-31b", "--modes", "off,dflash", "--dry-run", "--accept-eula"],
    ["local", "start", "/tmp", "--model", "gemma-4-31b", "--mode", "dflash", "--drafter", "/tmp", "--dry-run"],
])
def test_gemma_has_no_dflash_drafter_said_in_one_line(argv):
    result = run_cli(*argv)
    assert result.code == 2, result.stdout + result.stderr
    assert result.stderr.strip().splitlines() == [
        "error: gemma-4-31b has no DFlash drafter: --mode dflash is for gpt-oss-120b, gpt-oss-20b, qwen3-coder; use "
        "--mode p-eagle, eagle3 or off for gemma-4-31b"]


def test_an_image_older_than_dflash_is_refused_with_why():
    result = run_cli("deploy", "qwen3-coder", "--mode", "dflash", "--drafter", DRAFTER, "--dry-run", "--offline",
                     "--image", "763104351884.dkr.ecr.us-east-1.amazonaws.com/vllm:0.18.0-gpu-py312-cu129-ubuntu22.04-"
                     "sagemaker")
    assert result.code == 2
    assert ("--image cannot run DFlash: JumpStart's P-EAGLE image runs vLLM 0.18.0, which has no DFlash (vLLM's "
            "speculative methods name \"dflash\" from 0.20") in result.stderr


def test_startup_lines_of_the_stand_in_are_what_the_start_up_check_verifies():
    """The emulator's stand-in logs what a DFlash server would, and deploy's check reads it as DFlash."""
    from peagle_deploy.lifecycle.startup_log import parse_startup
    from peagle_deploy.lifecycle.verify import startup_check

    expected = {"model": "/opt/ml/additional-model-data-sources/dflash", "method": "dflash",
                "num_speculative_tokens": 7}
    info = parse_startup(startup_lines(DLC, "dflash", 7), "stand-in")
    check = startup_check(info, expected, how_to_check="-")
    assert check.state == "verified"
    assert check.detail == ("vLLM 0.28.0, speculative dflash, K=7, DFlash drafter (Resolved architecture: "
                            "DFlashDraftModel)")
    eagle = parse_startup(startup_lines(DLC, "eagle3", 7), "stand-in")
    assert startup_check(eagle, expected, how_to_check="-").state == "failed"


# on the emulator -----------------------------------------------------------------------------------------------
FAST = ["--concurrency", "1,2", "--num-prompts", "2", "--warmup", "0", "--logs-wait", "0", "--provision-estimate", "60"]


def peagle(emu, *args):
    env = {**emu.env, "COLUMNS": "250"}
    return subprocess.run([forked_peagle(), *args], env=env, capture_output=True, text=True, timeout=600)


def test_a_sweep_of_the_four_modes_puts_them_in_one_table_and_names_the_best(emu_server, tmp_path):
    # the stand-in's DFlash accepts more and drafts no dearer (its own numbers, not a measurement): about 1.4x P-EAGLE
    # (at the stand-in's default pace: which mode the table shows fastest is read from the table, not assumed)
    standin = SweepStandIn(emu_server, model=SpecModel(dflash_accept=0.99, dflash_draft_cost=0.03)).install()
    emu = standin.emulator
    res = peagle(emu, "sweep", "qwen3-coder", "--modes", "off,eagle3,p-eagle,dflash", "--k", "3", *FAST,
                 "--drafter", DRAFTER, "--budget", "40", "--role", emu.role_arn, "--yes", "--out", str(tmp_path))
    assert res.returncode == 0, res.stderr
    out = res.stdout
    assert "side by side:" in out
    report = json.loads((tmp_path / "sweep.json").read_text())
    assert [c["label"] for c in report["configurations"]] == ["off", "eagle3 K=3", "p-eagle K=3", "dflash K=3"]
    [table] = report["tables"]
    runs = {(r["run"], r["concurrency"]): r for r in table["runs"]}
    assert set(runs) == {(label, c) for label in ("off", "eagle3 K=3", "p-eagle K=3", "dflash K=3") for c in (1, 2)}
    for (label, _), row in runs.items():
        assert row["output_tokens_per_s"] > 0 and row["e2e_ms_p50"] > 0 and row["usd_per_million_output_tokens"] > 0
        if label != "off":
            assert row["mean_acceptance_length"] > 1
    assert runs[("dflash K=3", 1)]["mean_acceptance_length"] == pytest.approx(1 + 0.99 + 0.99 ** 2 + 0.99 ** 3,
                                                                              abs=0.02)
    # the version each ran on, from its start-up lines: JumpStart's 0.18 image, DFlash on AWS's 0.28 image
    assert runs[("dflash K=3", 1)]["vllm"] == "vLLM 0.28.0, runner not logged"
    assert runs[("p-eagle K=3", 1)]["vllm"] == "vLLM 0.18.0, runner not logged"
    # the advisor names the mode the table measured fastest at more levels, and what it ran on
    rec = report["recommendation"]
    fastest = {}
    for c in (1, 2):
        best = max((r for r in table["runs"] if r["concurrency"] == c and r["mode"] != "off"),
                   key=lambda r: r["output_tokens_per_s"])
        fastest.setdefault(best["mode"], []).append(c)
    counts = sorted((len(v) for v in fastest.values()), reverse=True)
    winner = None if len(counts) > 1 and counts[0] == counts[1] else max(fastest, key=lambda m: len(fastest[m]))
    assert rec["mode"] == winner
    if winner is not None:
        ran_on = "vLLM 0.28.0, runner not logged" if winner == "dflash" else "vLLM 0.18.0, runner not logged"
        assert rec["ran_on"] == ran_on
        assert (f"recommended: {winner} at K={rec['k']} (the mode measured faster, on {ran_on}; K from its measured "
                "acceptance)") in out
    assert any(line.startswith("Each ran on: P-EAGLE vLLM 0.18.0") for line in rec["reasoning"])
    md = (tmp_path / "sweep.md").read_text()
    assert "| conc. | run | output tok/s | TPOT p50 ms | E2E p50 ms | mean acc. length | $ / M tokens | vLLM, runner |" \
        in md
    assert "best DFlash" in md
    # the DFlash endpoint mounted the drafter from the --drafter prefix, on AWS's vLLM image
    dflash_tags = next(t for name, t in standin.tags.items() if name.endswith("-dflash-k3"))
    assert dflash_tags["peagle:mode"] == "dflash"
    sm = emu.client("sagemaker")
    assert not sm.list_endpoints()["Endpoints"]  # all torn down
    # bench compare reads the runs back: the same four in one table
    compare = run_cli("bench", "compare", *[str(p) for p in (tmp_path / "runs").glob("*.json")], "--json")
    assert compare.code == 0, compare.stderr
    [measured] = [t for t in json.loads(compare.stdout)["tables"] if t["kind"] == "measured"]
    assert {r["mode"] for r in measured["runs"]} == {"off", "eagle3", "p-eagle", "dflash"}


def test_bench_agree_checks_dflash_against_off(emu, monkeypatch, tmp_path):
    for key, value in emu.env.items():
        if key.startswith("AWS_"):
            monkeypatch.setenv(key, value)
    prompts = tmp_path / "prompts.jsonl"
    prompts.write_text("".join(json.dumps({"prompt": f"prompt {i}"}) + "\n" for i in range(4)))
    dflash = {"SM_VLLM_SPECULATIVE_CONFIG": json.dumps({"model": "/opt/ml/additional-model-data-sources/dflash",
                                                        "method": "dflash", "num_speculative_tokens": 7})}
    emu.create_endpoint_stack("dflash-ep", environment=dflash)
    emu.create_endpoint_stack("off-ep")
    refused = run_cli("bench", "agree", "dflash-ep", "off-ep", "--dataset", str(prompts), "-n", "2")
    assert refused.code == 2 and "the baseline dflash-ep runs speculative decoding (dflash K=7" in refused.stderr
    ok = run_cli("bench", "agree", "off-ep", "dflash-ep", "--dataset", str(prompts), "-n", "2", "--json")
    assert ok.code == 0, ok.stderr
    doc = json.loads(ok.stdout)
    assert doc["baseline_check"]["baseline"] == "off"
    assert doc["greedy"]["identical_share"] == 1.0
    assert doc["greedy"]["verdict"] != "beyond noise"


def test_deploy_update_and_cleanup_of_a_dflash_endpoint(emu, tmp_path):
    """deploy --mode dflash mounts the drafter channel on AWS's image; update --k keeps it; update --mode p-eagle
    moves to JumpStart's image and drafter and drops DFlash's attention backend; cleanup removes it all."""
    env = {**emu.env, "PEAGLE_STATE_DIR": str(tmp_path)}
    deployed = run_cli("deploy", "qwen3-coder", "--mode", "dflash", "--drafter", DRAFTER, "--name", "coder-dflash",
                       "--role", emu.role_arn, "--yes", env=env)
    assert deployed.code == 0, deployed.stderr
    sm = emu.client("sagemaker")

    def container() -> dict:
        config = sm.describe_endpoint(EndpointName="coder-dflash")["EndpointConfigName"]
        model = sm.describe_endpoint_config(EndpointConfigName=config)["ProductionVariants"][0]["ModelName"]
        return sm.describe_model(ModelName=model)["PrimaryContainer"]

    status = run_cli("status", "coder-dflash", "--json", env=env)
    assert status.code == 0, status.stderr
    assert '"dflash"' in status.stdout and "K=7" in run_cli("status", "coder-dflash", env=env).stdout
    first = container()
    assert first["Image"] == DLC and first["Environment"]["SM_VLLM_ATTENTION_BACKEND"] == "flash_attn"
    assert first["AdditionalModelDataSources"][0]["ChannelName"] == "dflash"
    deeper = run_cli("update", "coder-dflash", "--k", "15", "--yes", env=env)
    assert deeper.code == 0, deeper.stderr
    second = container()
    assert json.loads(second["Environment"]["SM_VLLM_SPECULATIVE_CONFIG"])["num_speculative_tokens"] == 15
    assert second["AdditionalModelDataSources"] == first["AdditionalModelDataSources"]  # the live channel kept
    moved = run_cli("update", "coder-dflash", "--mode", "p-eagle", "--k", "3", "--yes", env=env)
    assert moved.code == 0, moved.stderr
    third = container()
    assert "SM_VLLM_ATTENTION_BACKEND" not in third["Environment"]
    assert [c["ChannelName"] for c in third["AdditionalModelDataSources"]] == ["eagle"]
    assert "vllm:0.18.0" in third["Image"]
    gone = run_cli("cleanup", "coder-dflash", "--yes", env=env)
    assert gone.code == 0, gone.stderr
    assert not sm.list_endpoints()["Endpoints"] and not sm.list_models()["Models"]


def test_local_runs_the_dflash_plan_with_the_drafter_as_its_channel(tmp_path):
    from tests.test_container_dflash import drafter

    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text("{}")
    path = drafter(tmp_path)
    result = run_cli("local", "start", str(model), "--model", "qwen3-coder", "--mode", "dflash", "--k", "5",
                     "--drafter", path, "--dry-run", env={**os.environ, "COLUMNS": "250"})
    assert result.code == 0, result.stderr
    assert "SM_VLLM_ATTENTION_BACKEND=flash_attn" in result.stdout
    assert f'"model": "{path}", "method": "dflash", "num_speculative_tokens": 5' in result.stdout
    bad = run_cli("local", "start", str(model), "--model", "qwen3-coder", "--mode", "dflash", "--k", "5",
                  "--drafter", str(model), "--dry-run")
    assert bad.code == 2 and "is not a DFlash drafter's" in bad.stderr  # the entrypoint's own check, before vLLM


@pytest.mark.parametrize("image, says", [
    ("vllm/vllm-openai:v0.33.0", "runs DFlash on Model Runner V2 (the default for every model from 0.29"),
    (DLC, "DFlash runs on V2 only for those models, on V1 otherwise"),
    ("123456789012.dkr.ecr.us-east-1.amazonaws.com/peagle-vllm:0.1.0", "the image's tag names no vLLM version"),
])
def test_the_runner_note_follows_the_images_vllm(image, says):
    from peagle_deploy.vllm_runner import dflash_image, dflash_image_refusal, dflash_runner_note

    assert says in dflash_runner_note(image)
    assert dflash_image_refusal(image) is None
    assert dflash_image("763104351884.dkr.ecr.eu-west-1.amazonaws.com/vllm:0.18.0-gpu-py312-cu129-ubuntu22.04-"
                        "sagemaker") == DLC.replace("us-east-1", "eu-west-1")
    assert "vLLM 0.19.0, which has no DFlash" in dflash_image_refusal("vllm/vllm-openai:v0.19.0")


def test_update_to_dflash_takes_the_drafter_or_refuses_without_one(emu, tmp_path):
    env = {**emu.env, "PEAGLE_STATE_DIR": str(tmp_path)}
    deployed = run_cli("deploy", "qwen3-coder", "--name", "coder", "--k", "3", "--role", emu.role_arn, "--yes",
                       env=env)
    assert deployed.code == 0, deployed.stderr
    emu.calls.clear()
    refused = run_cli("update", "coder", "--mode", "dflash", "--yes", env=env)
    assert refused.code == 2
    assert "--mode dflash needs the qwen3-coder DFlash drafter in S3" in refused.stderr
    assert not [c for c in emu.calls if c.startswith(("Create", "Update"))]
    plan = run_cli("update", "coder", "--mode", "dflash", "--drafter", DRAFTER, "--dry-run", "--json", env=env)
    assert plan.code == 0, plan.stderr
    body = json.loads(plan.stdout)["update"]
    channels = body["create_model"]["PrimaryContainer"]["AdditionalModelDataSources"]
    assert [c["ChannelName"] for c in channels] == ["dflash"] and channels[0]["S3DataSource"]["S3Uri"] == DRAFTER + "/"
    assert body["create_model"]["PrimaryContainer"]["Image"] == DLC
