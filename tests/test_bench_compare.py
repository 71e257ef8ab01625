"""`peagle bench compare`, the K advisor and the chart: like with like only, and the MEASURED mode comparison."""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import datetime, timezone

import pytest

from peagle_deploy.bench.advisor import advise, comparison_from_results
from peagle_deploy.bench.compare import compare_results, compare_warnings, mode_comparison, read_published
from peagle_deploy.bench.results import BenchResult, LevelResult, Settings, TargetInfo, write_result
from peagle_deploy.bench.stats import Summary
from peagle_deploy.errors import UsageError

from .cli_runner import run_cli

G7E = "ml.g7e.2xlarge"


def run(mode, k, otps, *, model="gpt-oss-20b", instance=G7E, dataset="humaneval", minute=0, max_tokens=256,
        name="ep"):
    levels = [LevelResult(concurrency=c, window_s=10, completed=10, output_tokens=int(v * 10),
                          output_tokens_per_s=v, requests_per_s=1, mean_in_flight=c, concurrency_held=1.0,
                          ttft_ms=Summary(), itl_ms=Summary(), tpot_ms=Summary(), e2e_ms=Summary())
              for c, v in otps.items()]
    when = datetime(2026, 11, 22, 10, minute, tzinfo=timezone.utc)
    return BenchResult(
        tool_version="0", started_at=when, finished_at=when,
        target=TargetInfo(kind="sagemaker", name=f"{name}-{mode}-{k}", model=model, mode=mode, k=k,
                          mode_source="tags", instance_type=instance, instance_count=1 if instance else None),
        settings=Settings(dataset=dataset, dataset_source="built-in", num_prompts_in_dataset=24,
                          max_tokens=max_tokens, temperature=0, warmup=None, duration_s=10, num_prompts=None),
        levels=levels,
    )


# the H100 / vLLM 0.25.1 shape (BRIEF section 13): EAGLE-3 on the V2 runner beat P-EAGLE on V1
H100 = [run("off", None, {1: 300, 8: 2000}, minute=1), run("p-eagle", 7, {1: 618, 8: 3812}, minute=2),
        run("eagle3", 7, {1: 818, 8: 5474}, minute=3), run("p-eagle", 3, {1: 582, 8: 3500}, minute=4)]


def test_runs_of_two_models_never_share_a_table_or_a_speedup():
    runs = [run("off", None, {1: 100}, model="gpt-oss-20b", minute=1),
            run("p-eagle", 7, {1: 300}, model="qwen3-coder", minute=2)]
    tables = compare_results(runs)
    assert [(t.model, t.columns) for t in tables] == [("gpt-oss-20b", ["off"]), ("qwen3-coder", ["p-eagle K=7"])]
    assert all(v is None for t in tables for r in t.rows for v in r.speedup_vs_off.values())
    assert "gpt-oss-20b" in tables[0].title and G7E in tables[0].title and "humaneval" in tables[0].title
    (warning,) = compare_warnings(tables)
    assert "2 models" in warning and "no speed-up is computed across them" in warning


def test_a_run_that_names_no_model_is_said_as_unknown_not_none():
    # `peagle bench URL` without --model beside an endpoint's run (docs/bench.md's own example)
    tables = compare_results([run("off", None, {1: 100}, model=None, instance=None, minute=1),
                              run("p-eagle", 7, {1: 300}, minute=2)])
    text = " ".join(compare_warnings(tables))
    assert "2 models (gpt-oss-20b, model unknown)" in text and "(instance unknown, ml.g7e.2xlarge)" in text
    assert "None" not in text


def test_instances_and_datasets_are_kept_apart_too():
    runs = [run("off", None, {1: 100}, minute=1), run("p-eagle", 7, {1: 300}, instance="ml.g7e.12xlarge", minute=2),
            run("p-eagle", 7, {1: 280}, dataset="chat", minute=3)]
    tables = compare_results(runs)
    assert len(tables) == 3
    text = " ".join(compare_warnings(tables))
    assert "instance setups" in text and "data sets" in text


def test_unknown_model_and_different_settings_are_flagged_in_the_table():
    runs = [run("off", None, {1: 100}, model=None, instance=None, minute=1),
            run("p-eagle", 7, {1: 300}, model=None, instance=None, minute=2, max_tokens=512)]
    (table,) = compare_results(runs)
    text = " ".join(table.warnings)
    assert "model unknown" in text and "instance type unknown" in text and "differ in max_tokens (256, 512)" in text


def test_the_measured_mode_comparison_can_favour_eagle3():
    (table,) = compare_results(H100)
    assert [r.faster_mode for r in table.rows] == ["eagle3", "eagle3"]
    comparison = mode_comparison(table)
    assert comparison.winner == "eagle3" and comparison.eagle3_wins == [1, 8] and comparison.best_eagle3_k[1] == 7
    assert comparison.ratio[1] == pytest.approx(618 / 818, abs=1e-3)
    assert any("EAGLE-3 faster at c=1, c=8" in n for n in table.notes)
    assert any("--mode eagle3" in n for n in table.notes)


def test_the_measured_mode_comparison_can_favour_p_eagle():
    runs = [run("p-eagle", 7, {1: 1032, 8: 5786}), run("eagle3", 3, {1: 651, 8: 3979}, minute=1)]
    comparison = mode_comparison(compare_results(runs)[0])
    assert comparison.winner == "p-eagle" and comparison.peagle_wins == [1, 8]


def test_advisor_takes_the_measured_mode_not_an_assumption():
    rates = [0.8, 0.62, 0.5, 0.4, 0.3, 0.25, 0.2]
    unmeasured = advise(rates, mode="p-eagle")
    assert unmeasured.recommended_mode is None
    assert any("does not say which mode is faster" in line for line in unmeasured.explanation)

    measured = advise(rates, mode="p-eagle", measured=comparison_from_results(H100))
    assert measured.recommended_mode == "eagle3"
    text = " ".join(measured.explanation)
    assert "Recommended mode, as measured: EAGLE-3 (deploy --mode eagle3 --k 7)" in text
    assert "re-run the advisor with --mode eagle3" in text


def test_advisor_refuses_measurements_that_are_not_like_with_like():
    with pytest.raises(UsageError, match="2 model/instance/data-set groups"):
        comparison_from_results([*H100, *(run(r.target.mode, r.target.k, {1: 1.0}, model="qwen3-coder", minute=9)
                                           for r in H100)])
    with pytest.raises(UsageError, match="runs of two speculative modes"):
        comparison_from_results([run("p-eagle", 7, {1: 1.0})])


def test_published_tables_name_their_model_and_hardware():
    tables = read_published()
    assert {t.kind for t in tables} == {"published"}
    assert all(t.model.startswith("Qwen3-Coder") and "B200" in t.instance for t in tables)
    assert not compare_warnings(tables)  # published references are not measured runs to keep apart


def test_chart_panels_start_at_zero_and_name_model_instance_dataset():
    pytest.importorskip("matplotlib")
    from peagle_deploy.bench.plot import build_figure

    tables = compare_results(H100) + read_published()
    axes = build_figure(tables).axes
    assert len(axes) == 3  # the measured table and both published ones
    assert all(ax.get_ylim()[0] == 0 for ax in axes)
    title = axes[0].get_title()
    assert "gpt-oss-20b" in title and G7E in title and "humaneval" in title
    assert "B200" in axes[1].get_title() and "Qwen3-Coder" in axes[1].get_title()


def test_the_chart_is_a_png_written_without_pyplot(tmp_path):
    """The chart is drawn on a bare Figure and written by the Agg canvas: a real PNG, and pyplot (process-wide
    figure state, unsafe from the sweep's worker threads) never loads."""
    pytest.importorskip("matplotlib")
    code = ("import sys; from pathlib import Path; from peagle_deploy.bench.compare import read_published; "
            "from peagle_deploy.bench.plot import plot_tables; "
            f"out = plot_tables(read_published(), Path({str(tmp_path / 'c.png')!r})); "
            "print(out is not None, 'matplotlib.pyplot' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.stdout.split() == ["True", "False"], done.stderr
    assert (tmp_path / "c.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_compare_command_warns_on_stderr_and_charts_published_figures(tmp_path):
    files = [str(write_result(r, tmp_path)) for r in
             [run("off", None, {1: 100}, minute=1), run("p-eagle", 7, {1: 300}, model="qwen3-coder", minute=2)]]
    res = run_cli("bench", "compare", *files, "--published", "aws-blog", "--out", str(tmp_path / "out"), "--json")
    assert res.code == 0, res.stderr
    assert "no speed-up is computed across them" in res.stderr
    doc = json.loads(res.stdout)
    assert [t["model"] for t in doc["tables"]] == ["gpt-oss-20b", "qwen3-coder"]
    md = (tmp_path / "out" / "compare.md").read_text()
    assert "measured: qwen3-coder on ml.g7e.2xlarge, humaneval" in md


def test_advise_command_with_measured_runs(tmp_path):
    files = [arg for r in H100 for arg in ("--measured", str(write_result(r, tmp_path)))]
    res = run_cli("bench", "advise", "--rates", "0.8,0.6,0.5", *files, "--json")
    assert res.code == 0, res.stderr
    doc = json.loads(res.stdout)
    assert doc["recommended_mode"] == "eagle3" and doc["measured"]["eagle3_wins"] == [1, 8]


def test_published_rows_are_paired_by_data_set_only(tmp_path):
    """A HumanEval run sits beside the published HumanEval table only; a look-alike run beside none, and says so."""
    humaneval = [str(write_result(r, tmp_path / "a")) for r in
                 [run("off", None, {1: 100}, minute=1), run("p-eagle", 7, {1: 300}, minute=2)]]
    res = run_cli("bench", "compare", *humaneval, "--published", "aws-blog", "--json")
    assert res.code == 0, res.stderr
    assert [t["dataset"] for t in json.loads(res.stdout)["published"]] == ["humaneval"]
    assert "no published figures" not in res.stderr

    alike = str(write_result(run("p-eagle", 7, {1: 300}, dataset="humaneval-like", minute=3), tmp_path / "b"))
    res = run_cli("bench", "compare", alike, "--published", "aws-blog", "--json")
    assert res.code == 0, res.stderr
    assert json.loads(res.stdout)["published"] == []
    assert "no published figures for data set 'humaneval-like' (published: humaneval, speed-bench-code)" in res.stderr

    res = run_cli("bench", "compare", "--published", "aws-blog", "--json")  # no runs: every published table
    assert {t["dataset"] for t in json.loads(res.stdout)["published"]} == {"humaneval", "speed-bench-code"}
