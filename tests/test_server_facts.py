"""Server facts over labels: a server's own mode and K (its /metrics, start-up log or served config) win over
--mode/--k, a sweep's --url MODE:K= label and an endpoint's tags; a label that disagrees is said in one line
naming both values, and a sweep refuses it before measuring anything unless --trust-labels.

The servers are FakeVllm stand-ins shaped like vLLM's /metrics (one per-position series per draft position,
none with speculation off); tests/real_vllm checks that vLLM's own page has that shape.
"""

from __future__ import annotations

import json
import subprocess

import pytest

from peagle_deploy.bench.acceptance import parse_prometheus
from peagle_deploy.bench.server_facts import ServerFacts, from_counters, from_startup, reconcile, suggested_label
from peagle_deploy.lifecycle.startup_log import parse_startup
from peagle_deploy.served_config import speculation_from_config, speculation_from_env
from peagle_deploy.testing.fake_vllm import FakeVllm
from peagle_deploy.testing.sweep_standins import url_standins
from tests.cli_runner import run_cli
from tests.forked_peagle import forked_peagle

pytestmark = pytest.mark.usefixtures("no_aws")
QUICK = ["-c", "1", "-n", "2", "--warmup", "0", "--no-chart"]


def peagle(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([forked_peagle(), *args], capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL)


# the K=3 server labelled K=7 (issue 20, item 1), through the installed executable ----------------------------

def test_sweep_refuses_a_k3_server_labelled_k7_before_measuring(tmp_path):
    with url_standins([("off", None), ("p-eagle", 3)]) as (off, p_eagle_3):
        url = p_eagle_3.split("=", 1)[1]
        res = peagle("sweep", "qwen3-coder", "--url", off, "--url", f"p-eagle:7={url}", *QUICK[:4],
                     "--out", str(tmp_path))
    assert res.returncode == 2, res.stderr
    [line] = [ln for ln in res.stderr.splitlines() if ln.strip()]
    assert line.startswith("error: --url p-eagle:7 labels it p-eagle K=7, but the server runs speculative decoding "
                           "with K=3 (read from ")
    assert f"label it --url p-eagle:3={url}" in line and "--trust-labels" in line
    assert not (tmp_path / "runs").exists()  # nothing was measured, not even the baseline


def test_sweep_with_trust_labels_measures_and_records_the_servers_k(tmp_path):
    with url_standins([("off", None), ("p-eagle", 3)]) as (off, p_eagle_3):
        url = p_eagle_3.split("=", 1)[1]
        res = peagle("sweep", "qwen3-coder", "--url", off, "--url", f"p-eagle:7={url}", *QUICK[:4],
                     "--trust-labels", "--out", str(tmp_path), "--json")
    assert res.returncode == 0, res.stderr
    assert "warning: --url p-eagle:7 labels it p-eagle K=7, but the server runs speculative decoding with K=3" \
        in " ".join(res.stderr.split())
    rows = {r["label"]: r for r in json.loads(res.stdout)["report"]["configurations"]}
    assert rows["p-eagle K=7"]["server"] == "speculative K=3" and "K=3" in rows["p-eagle K=7"]["label_disagrees"]
    saved = json.loads((tmp_path / rows["p-eagle K=7"]["result_file"]).read_text(encoding="utf-8"))  # beside the state
    assert (saved["target"]["k"], saved["target"]["k_source"], saved["target"]["label_k"]) == (3, "server", 7)
    assert "## Labels the servers contradict" in (tmp_path / "sweep.md").read_text(encoding="utf-8")
    assert rows["off"]["label_disagrees"] is None  # the baseline really runs without speculation


def test_sweep_refuses_a_speculative_label_on_a_server_without_speculation(tmp_path):
    with url_standins([("off", None)]) as [off]:
        url = off.split("=", 1)[1]
        res = peagle("sweep", "qwen3-coder", "--url", f"p-eagle:3={url}", *QUICK[:4], "--out", str(tmp_path))
    assert res.returncode == 2
    assert "labels it p-eagle K=3, but the server runs without speculative decoding (off)" in res.stderr
    assert f"label it --url off={url}" in res.stderr


def test_bench_warns_with_both_values_and_the_results_file_holds_the_servers_k(tmp_path):
    with url_standins([("p-eagle", 3)]) as [p_eagle_3]:
        url = p_eagle_3.split("=", 1)[1]
        res = peagle("bench", url, "--mode", "p-eagle", "--k", "7", *QUICK, "--out", str(tmp_path))
    assert res.returncode == 0, res.stderr
    [warning] = [ln for ln in res.stderr.splitlines() if "labels it" in ln]  # one line (piped: never wrapped)
    assert warning.startswith("warning: --mode/--k labels it p-eagle K=7, but the server runs speculative decoding "
                              "with K=3 (read from ")
    assert warning.endswith("the results record the server's values")
    [saved] = tmp_path.glob("bench-*.json")
    assert saved.name.startswith("bench-p-eagle-K3-")
    target = json.loads(saved.read_text(encoding="utf-8"))["target"]
    assert (target["mode"], target["k"], target["mode_source"], target["k_source"]) == ("p-eagle", 3, "flags", "server")
    assert (target["label_mode"], target["label_k"]) == ("p-eagle", 7)
    assert target["server"]["speculative"] is True and target["server"]["k"] == 3
    assert "3 per-position series" in target["server"]["sources"][0]
    summary = saved.with_suffix(".md").read_text(encoding="utf-8")
    assert "label contradicted: --mode/--k labels it p-eagle K=7" in summary


def test_bench_without_a_label_uses_what_the_server_shows(tmp_path):
    with url_standins([("off", None)]) as [off]:
        res = peagle("bench", off.split("=", 1)[1], *QUICK, "--out", str(tmp_path), "--json")
    assert res.returncode == 0, res.stderr
    target = json.loads(res.stdout)["result"]["target"]
    assert (target["mode"], target["mode_source"], target["label_mode"]) == ("off", "server", None)
    assert "labels it" not in res.stderr


def test_compare_shows_an_old_results_files_measured_k_and_says_so(tmp_path):
    """A results file from before peagle read the server's K: labelled K=7, its acceptance counted 3 positions."""
    with url_standins([("p-eagle", 3)]) as [p_eagle_3]:
        res = peagle("bench", p_eagle_3.split("=", 1)[1], "--mode", "p-eagle", "--k", "3", *QUICK,
                     "--out", str(tmp_path))
    assert res.returncode == 0, res.stderr
    [path] = tmp_path.glob("bench-*.json")
    old = json.loads(path.read_text(encoding="utf-8"))
    old["target"] = {key: old["target"][key] for key in ("kind", "name", "model", "instance_type", "instance_count")}
    old["target"].update(mode="p-eagle", k=7, mode_source="flags")
    path.write_text(json.dumps(old), encoding="utf-8")
    compared = peagle("bench", "compare", str(path), "--json")
    assert compared.returncode == 0, compared.stderr
    [table] = json.loads(compared.stdout)["tables"]
    assert table["columns"] == ["p-eagle K=3"]
    assert any("labelled p-eagle K=7 (flags) but its acceptance" in w and "counted 3 draft positions" in w
               for w in table["warnings"])
    advised = peagle("bench", "advise", str(path))
    assert advised.returncode == 0 and "counted 3 draft positions" in " ".join(advised.stderr.split())


def test_metrics_of_a_url_names_what_the_server_runs():
    with FakeVllm(accepted_per_request=(4, 3, 2, 1, 1)) as server:
        res = peagle("metrics", server.url, "--window", "0s", "--json")
    assert res.returncode == 0, res.stderr
    server_facts = json.loads(res.stdout)["server"]
    assert server_facts["speculative"] is True and server_facts["k"] == 5


# the parts --------------------------------------------------------------------------------------------------

def test_metrics_pages_give_k_or_off():
    with FakeVllm(accepted_per_request=(3, 2, 1)) as on, FakeVllm(accepted_per_request=()) as off:
        facts_on = from_counters(parse_prometheus(on.metrics_text()), on.url)  # before any request: K is there
        facts_off = from_counters(parse_prometheus(off.metrics_text()), off.url)
    assert (facts_on.speculative, facts_on.k, facts_on.mode) == (True, 3, None)
    assert (facts_off.speculative, facts_off.mode) == (False, "off")
    not_vllm = from_counters(parse_prometheus("process_cpu_seconds_total 1.0\n"), "http://x/metrics")
    assert not not_vllm.known and "not vLLM" in not_vllm.notes[0]


def test_served_config_and_startup_log_speak_the_same_words():
    p_eagle = {"model": "/opt/ml/additional-model-data-sources/eagle", "method": "eagle3",
               "num_speculative_tokens": 5, "parallel_drafting": True}
    assert speculation_from_env({"SM_VLLM_SPECULATIVE_CONFIG": json.dumps(p_eagle)}).describe() == "p-eagle K=5"
    assert speculation_from_env({}).mode == "off"
    assert speculation_from_env({"SM_VLLM_SPECULATIVE_CONFIG": "{not json"}).mode is None
    assert speculation_from_config({**p_eagle, "parallel_drafting": False}).describe() == "eagle3 K=5"
    logged = parse_startup(["INFO non-default args: {'speculative_config': " + repr(p_eagle) + "}"], "file:x")
    assert from_startup(logged).describe() == "p-eagle K=5"


def test_reconcile_server_first_label_where_the_server_is_silent():
    metrics_k3 = ServerFacts(speculative=True, k=3, sources=["http://h/metrics (3 per-position series)"])
    r = reconcile("p-eagle", 7, metrics_k3, label_source="flags", label_name="--mode/--k")
    assert (r.mode, r.k, r.mode_source, r.k_source) == ("p-eagle", 3, "flags", "server")
    assert "labels it p-eagle K=7" in r.disagreement and "K=3" in r.disagreement
    agree = reconcile("eagle3", 3, metrics_k3, label_source="flags")
    assert agree.disagreement is None and agree.k_source == "server"
    served = ServerFacts(speculative=True, mode="eagle3", k=3, sources=["served config"])
    assert "p-eagle K=3" in reconcile("p-eagle", 3, served, label_source="tags").disagreement  # the method differs
    unknown = reconcile("p-eagle", 7, ServerFacts(), label_source="flags")
    assert (unknown.mode, unknown.k, unknown.disagreement) == ("p-eagle", 7, None)
    assert suggested_label("p-eagle", metrics_k3) == "p-eagle:3"
    assert suggested_label("p-eagle", ServerFacts(speculative=False, mode="off")) == "off"


# a URL's mode: said to be a label when nothing shows it, read where a fact exists (issue 37 item 4) ---------------

ENGINE_LINE = ("INFO [core.py:93] Initializing a V1 LLM engine (v0.32.0) with config: model='/opt/ml/model', "
               "speculative_config=SpeculativeConfig(method='eagle3', model='/opt/ml/drafter', num_spec_tokens=3)")


def test_a_mode_only_labelled_is_said_to_be_a_label(tmp_path):
    with FakeVllm(accepted_per_request=(3, 2, 1)) as server:
        res = run_cli("bench", server.url, "--mode", "eagle3", *QUICK, "-d", "chat", "--out", str(tmp_path))
    assert res.code == 0, res.stderr
    [note] = [line for line in res.stderr.splitlines() if "is a label" in line]
    assert note == (f"note: mode eagle3 is a label (--mode/--k), not read from the server: it shows speculative "
                    f"decoding with K=3 but not its method (read from {server.url}/metrics (3 per-position series)); "
                    "the results say so")
    said = ("speculative decoding: eagle3 K=3 (read from " + server.url + "/metrics (3 per-position series); mode "
            "eagle3 from --mode only, not shown by the server)")
    assert said in res.stdout  # the terminal, beside the title
    [saved] = tmp_path.glob("bench-eagle3-K3-*.json")
    assert f"- {said}" in saved.with_suffix(".md").read_text(encoding="utf-8")
    target = json.loads(saved.read_text(encoding="utf-8"))["target"]
    assert (target["mode"], target["mode_source"], target["k_source"]) == ("eagle3", "flags", "server")


@pytest.fixture
def local_p_eagle(tmp_path, monkeypatch):
    """A loopback server that `peagle local` remembers starting as P-EAGLE K=3: its state file (this process
    stands in for the server's process) and a start-up log whose engine line, as vLLM's does, omits the method."""
    import os
    from datetime import UTC, datetime

    from peagle_deploy.local import state
    from peagle_deploy.local.process import start_time

    monkeypatch.setenv("PEAGLE_STATE_DIR", str(tmp_path / "state"))
    with FakeVllm(accepted_per_request=(3, 2, 1)) as server:
        log = tmp_path / "state" / "pe.log"
        state.private_dir()
        log.write_text(ENGINE_LINE + "\n", encoding="utf-8")
        spec = json.dumps({"model": "/opt/ml/drafter", "method": "eagle3", "num_speculative_tokens": 3,
                           "parallel_drafting": True})
        state.save(state.LocalServer(
            name="pe", url=server.url, port=int(server.url.rsplit(":", 1)[1]), pid=os.getpid(),
            start_time=start_time(os.getpid()), log_path=str(log), started_at=datetime.now(UTC), model_dir="/m",
            drafter_dir="/d", mode="p-eagle", k=3, speculative_config=spec, environment={}, command=["vllm"]))
        yield server


def test_a_peagle_local_servers_mode_is_read_from_its_state_and_wins_over_the_label(local_p_eagle, tmp_path):
    res = run_cli("bench", local_p_eagle.url, "--mode", "eagle3", *QUICK, "-d", "chat", "--out", str(tmp_path),
                  "--json")
    assert res.code == 0, res.stderr
    [warning] = [line for line in res.stderr.splitlines() if "labels it" in line]
    assert warning.startswith("warning: --mode/--k labels it eagle3, but the server runs p-eagle K=3 (read from ")
    assert "the SM_VLLM_SPECULATIVE_CONFIG peagle local server 'pe' was started with" in warning
    assert "is a label" not in res.stderr and "P-EAGLE or EAGLE-3" not in res.stderr  # the state said which
    target = json.loads(res.stdout)["result"]["target"]
    assert (target["mode"], target["mode_source"], target["label_mode"]) == ("p-eagle", "server", "eagle3")
    assert [p.name.startswith("bench-p-eagle-K3-") for p in tmp_path.glob("bench-*.json")] == [True]
    unlabelled = run_cli("bench", local_p_eagle.url, *QUICK, "-d", "chat", "--out", str(tmp_path), "--json")
    assert json.loads(unlabelled.stdout)["result"]["target"]["mode"] == "p-eagle" and "warning" not in unlabelled.stderr
