"""`bench compare`, `bench advise` and `advise --measured` given peagle's own other files (a sweep's kept outputs, its
state file and report, a --json output): one line saying what the file is and which command reads it; with several
files, those are skipped with one line each (bench/file_kinds.py, results.read_results)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from peagle_deploy.bench.agreement import AgreementReport
from peagle_deploy.bench.file_kinds import peagle_file_kind
from peagle_deploy.testing.fake_vllm import FakeVllm

from .cli_runner import run_cli

TOKENS = [f" t{i}" for i in range(8)]


@pytest.fixture(scope="module")
def swept(tmp_path_factory) -> Path:
    """A finished URL sweep's folder (off and p-eagle K=3 against loopback stand-ins), as `peagle sweep` wrote it."""
    out = tmp_path_factory.mktemp("sweep")
    with FakeVllm(TOKENS, accepted_per_request=()) as off, FakeVllm(TOKENS) as p_eagle:
        done = run_cli("sweep", "my-model", "--concurrency", "1", "--num-prompts", "2", "--warmup", "0",
                       "--logs-wait", "0", "--dataset", "code", "--agreement-prompts", "2", "--out", str(out),
                       "--url", f"off={off.url}", "--url", f"p-eagle:3={p_eagle.url}")
    assert done.code == 0, done.stderr
    return out


def runs(out: Path) -> list[str]:
    """OUT/runs/*.json as the shell expands it (sorted)."""
    return sorted(str(p) for p in (out / "runs").glob("*.json"))


def error_line(stderr: str) -> str:
    [line] = [line for line in stderr.splitlines() if line.startswith("error: ")]
    return line


def test_compare_over_a_sweeps_runs_skips_its_outputs_files_with_one_line_each(swept):
    files = runs(swept)
    outputs = [f for f in files if Path(f).name.startswith("outputs-")]
    assert len(outputs) == 2 and len(files) == 4  # two results, two kept outputs
    done = run_cli("bench", "compare", *files, "--json")
    assert done.code == 0, done.stderr
    [table] = json.loads(done.stdout)["tables"]
    assert set(table["rows"][0]["otps"]) == {"off", "p-eagle K=3"}
    skipped = [line for line in done.stderr.splitlines() if line.startswith("note: skipped ")]
    assert [line.split()[2] for line in skipped] == [f"{f}:" for f in outputs]
    assert all(" that a sweep kept for its agreement check (the sweep reads it for its report's" in line
               for line in skipped)
    assert "re-run the benchmark" not in done.stderr


@pytest.mark.parametrize(("name", "says"), [
    ("runs/outputs-off.json", "is the greedy outputs of "),
    ("sweep-state.json", "is a sweep's state file, not benchmark results: 'peagle sweep --resume' reads it"),
    ("sweep.json", "is a sweep's report (sweep.json), not benchmark results: its benchmark results are the "
                   "bench-*.json files in runs/ beside it"),
])
def test_one_such_file_alone_is_refused_saying_what_it_is(swept, name, says):
    for argv in (["bench", "compare", str(swept / name)], ["bench", "advise", str(swept / name)],
                 ["bench", "advise", "--rates", "0.8", "--measured", str(swept / name)]):
        done = run_cli(*argv)
        assert done.code == 2, (argv, done.stderr)
        line = error_line(done.stderr)
        assert says in line and "re-run the benchmark" not in line, line


def test_advise_measured_skips_the_outputs_and_reads_the_results(swept):
    measured = [arg for f in runs(swept) for arg in ("--measured", f)]
    done = run_cli("bench", "advise", "--rates", "0.8,0.6", *measured, "--json")
    assert done.code == 0, done.stderr
    assert done.stderr.count("note: skipped ") == 2


def test_any_other_json_is_not_called_a_results_file_of_another_version(tmp_path):
    other = tmp_path / "other.json"
    other.write_text('{"hello": 1}')
    line = error_line(run_cli("bench", "compare", str(other)).stderr)
    assert line == (f"error: {other} is not a peagle bench results file (it has no schema_version): pass the "
                    "bench-*.json files 'peagle bench --out DIR' wrote")
    older = tmp_path / "older.json"
    older.write_text('{"schema_version": 0, "tool": "peagle bench"}')
    assert "has schema_version 0, this peagle reads 1: re-run the benchmark with this version of peagle" in \
        error_line(run_cli("bench", "compare", str(older)).stderr)


def test_the_json_outputs_of_bench_and_bench_agree_are_named():
    bench_json = {"result": {"schema_version": 1}, "files": ["out/bench-off-x.json"]}
    assert peagle_file_kind(bench_json).what == "the --json output of 'peagle bench'"
    agree = AgreementReport(baseline="a", candidate="b", dataset="code", prompts=1, max_tokens=8, agrees=True)
    assert peagle_file_kind(json.loads(agree.model_dump_json())).what == "the --json output of 'peagle bench agree'"
    assert peagle_file_kind({"schema_version": 1}) is None and peagle_file_kind([1]) is None


def test_the_key_sets_are_the_models_required_fields():
    """bench/ cannot import sweep/'s models (a floor up), so file_kinds keeps their required keys as data: they must
    stay the models' own."""
    from peagle_deploy.bench import file_kinds
    from peagle_deploy.bench.agreement import AgreementReport, OutputSample
    from peagle_deploy.sweep.report import SweepReport
    from peagle_deploy.sweep.state import SweepState

    assert file_kinds.OUTPUT_SAMPLE_KEYS == file_kinds.required_fields(OutputSample)
    assert file_kinds.SWEEP_STATE_KEYS == file_kinds.required_fields(SweepState)
    assert file_kinds.SWEEP_REPORT_KEYS == file_kinds.required_fields(SweepReport)
    assert file_kinds.AGREEMENT_REPORT_KEYS == file_kinds.required_fields(AgreementReport)
