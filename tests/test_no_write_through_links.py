"""Issue 28: peagle never writes through a link someone planted, writes each file whole or not at all, and
gives every result a name no other run has (peagle_deploy/safe_write.py, used by every writer).

A planted link points at a "victim" file; after peagle ran, the victim is unchanged and peagle either refused
in one line (exit 2) or put a fresh regular file where the link was.
"""

from __future__ import annotations

import json
import os
import re
import stat
import threading
from datetime import datetime, timezone
from pathlib import Path

import pytest

from peagle_deploy import safe_write
from peagle_deploy.bench.results import BenchResult, LevelResult, Settings, TargetInfo, write_result
from peagle_deploy.bench.stats import Summary
from peagle_deploy.errors import UsageError
from peagle_deploy.testing.fake_vllm import FakeVllm
from tests.cli_runner import run_cli
from tests.local_helpers import free_port, model_dirs, peagle, stand_in_env

VICTIM = "someone else's file\n"


def plant(directory: Path, names: list[str], victims: Path) -> dict[str, Path]:
    """A link at each name in `directory`, to a victim file of its own."""
    directory.mkdir(parents=True, exist_ok=True)
    victims.mkdir(parents=True, exist_ok=True)
    planted = {}
    for name in names:
        victim = victims / f"victim-{name}"
        victim.write_text(VICTIM)
        (directory / name).symlink_to(victim)
        planted[name] = victim
    return planted


def untouched(planted: dict[str, Path]) -> bool:
    return all(v.read_text() == VICTIM for v in planted.values())


def result(mode: str = "off", when: datetime | None = None) -> BenchResult:
    when = when or datetime(2026, 11, 22, 10, 0, 0, 123456, tzinfo=timezone.utc)
    level = LevelResult(concurrency=1, window_s=1, completed=1, output_tokens=10, output_tokens_per_s=10,
                        requests_per_s=1, mean_in_flight=1, concurrency_held=1, ttft_ms=Summary(), itl_ms=Summary(),
                        tpot_ms=Summary(), e2e_ms=Summary())
    return BenchResult(tool_version="0", started_at=when, finished_at=when,
                       target=TargetInfo(kind="container", name="http://127.0.0.1:1", mode=mode, mode_source="flags"),
                       settings=Settings(dataset="humaneval", dataset_source="built-in", num_prompts_in_dataset=1,
                                         max_tokens=8, temperature=0, warmup=0, duration_s=None, num_prompts=1),
                       levels=[level])


def one_error_line(stderr: str) -> str:
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), stderr
    return lines[0]


# sweep --out -----------------------------------------------------------------------------------------------


def test_sweep_refuses_links_in_out_before_measuring_anything(tmp_path, no_aws):
    out = tmp_path / "shared" / "sw1"
    planted = plant(out, ["sweep.md", "sweep.json", "sweep.png"], tmp_path / "victims")
    with FakeVllm() as server:
        res = run_cli("sweep", "m", "--url", f"off={server.url}/v1", "-c", "1", "-n", "1", "--warmup", "0",
                      "--out", str(out))
        assert server.requests == []  # refused before the first request
    assert res.code == 2
    assert re.search(r"sweep\.(json|md|png) is a symbolic link", one_error_line(res.stderr))
    assert untouched(planted) and not (out / "sweep-state.json").exists()


def test_sweep_report_written_after_a_link_appeared_replaces_it(tmp_path):
    """A link planted while the sweep runs (after the check) is replaced by the report, never followed."""
    from peagle_deploy.sweep.report import REPORT_FILES, write_report

    out = tmp_path / "out"
    planted = plant(out, list(REPORT_FILES), tmp_path / "victims")

    class Report:  # the writer's view of a report: JSON, Markdown and the tables for the chart
        tables: list = []
        published: list = []
        files: list = []

        def model_dump_json(self, indent):
            return json.dumps({"sweep": "whole"})

    import peagle_deploy.sweep.report as report_mod

    original = report_mod.markdown
    report_mod.markdown = lambda report: "# the report\n"
    try:
        files = write_report(Report(), out)
    finally:
        report_mod.markdown = original
    assert untouched(planted)
    for name in ("sweep.json", "sweep.md"):
        assert not (out / name).is_symlink() and (out / name).is_file()
    assert json.loads((out / "sweep.json").read_text()) == {"sweep": "whole"}
    assert files == [str(out / "sweep.json"), str(out / "sweep.md")]


# bench --out and bench compare --out -------------------------------------------------------------------------


def test_bench_results_skip_names_taken_by_links(tmp_path):
    pytest.importorskip("matplotlib")
    from peagle_deploy.bench.runner import write_outputs

    run = result()
    stem = "bench-off-20261122T100000.123Z"
    planted = plant(tmp_path, [f"{stem}.json", f"{stem}-2.md", f"{stem}-3.png"], tmp_path / "victims")
    files = write_outputs(run, tmp_path)
    assert untouched(planted)
    assert [Path(f).name for f in files] == [f"{stem}-4.json", f"{stem}-4.md", f"{stem}-4.png"]
    for f in files:
        assert not Path(f).is_symlink() and Path(f).stat().st_size > 0
    assert Path(files[2]).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_a_link_at_the_chart_name_is_replaced_not_followed(tmp_path):
    pytest.importorskip("matplotlib")
    from peagle_deploy.bench.compare import compare_results
    from peagle_deploy.bench.plot import plot_tables

    planted = plant(tmp_path, ["chart.png"], tmp_path / "victims")
    written = plot_tables(compare_results([result()]), tmp_path / "chart.png")
    assert untouched(planted) and written == tmp_path / "chart.png"
    assert not written.is_symlink() and written.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_two_runs_in_the_same_millisecond_get_two_files(tmp_path):
    """The concurrent-sweep case: identical labels and start times never share (or overwrite) a file."""
    runs = [result(mode="off") for _ in range(8)]
    paths: list[Path] = []
    lock = threading.Lock()

    def write(run):
        path = write_result(run, tmp_path)
        with lock:
            paths.append(path)

    threads = [threading.Thread(target=write, args=(r,)) for r in runs]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert len(set(paths)) == 8 and all(json.loads(p.read_text())["target"]["mode"] == "off" for p in paths)


def test_bench_run_out_with_planted_links_keeps_their_targets(tmp_path, no_aws):
    out = tmp_path / "out"
    planted = plant(out, [".peagle-write-test"], tmp_path / "victims")  # the old probe's predictable name
    with FakeVllm() as server:
        res = run_cli("bench", server.url, "-c", "1", "-n", "1", "--warmup", "0", "--out", str(out), "--json")
    assert res.code == 0, res.stderr
    assert untouched(planted)
    written = json.loads(res.stdout)["files"]
    assert written and all(Path(f).is_file() and not Path(f).is_symlink() for f in written)


def test_bench_compare_refuses_a_linked_out_entry(tmp_path, no_aws):
    source = write_result(result(), tmp_path / "runs")
    planted = plant(tmp_path / "cmp", ["compare.md"], tmp_path / "victims")
    res = run_cli("bench", "compare", str(source), "--out", str(tmp_path / "cmp"))
    assert res.code == 2 and "compare.md is a symbolic link" in one_error_line(res.stderr)
    assert untouched(planted)


def test_container_dockerfile_refuses_a_linked_output_entry(tmp_path, no_aws):
    planted = plant(tmp_path / "ctx", ["Dockerfile"], tmp_path / "victims")
    res = run_cli("container", "dockerfile", "--output", str(tmp_path / "ctx"), "--force")
    assert res.code == 2 and "Dockerfile is a symbolic link" in one_error_line(res.stderr)
    assert untouched(planted)


# the local state directory -----------------------------------------------------------------------------------


def test_local_start_replaces_planted_log_and_tmp_links(tmp_path):
    """The issue's attack: NAME.log and NAME.tmp planted as links in the state directory."""
    env = stand_in_env(tmp_path, HF_TOKEN="ignored")
    state = Path(env["PEAGLE_STATE_DIR"])
    planted = plant(state, ["sec.log", "sec.tmp"], tmp_path / "victims")
    target, drafter = model_dirs(tmp_path / "models")
    port = free_port()
    old = os.umask(0o022)
    try:
        start = peagle("local", "start", str(target), "--drafter", str(drafter), "--port", str(port), "--name", "sec",
                       "--timeout", "60", "--env", "HF_TOKEN=hf_linkTestSecret42", env=env)
    finally:
        os.umask(old)
        stopped = peagle("local", "stop", "--name", "sec", env=env)
    assert start.returncode == 0, start.stderr
    assert stopped.returncode == 0, stopped.stderr
    assert untouched(planted)
    log = state / "sec.log"
    assert not log.is_symlink() and stat.S_IMODE(log.stat().st_mode) == 0o600 and log.stat().st_size > 0
    assert stat.S_IMODE(state.stat().st_mode) == 0o700
    assert "hf_linkTestSecret42" not in "".join(v.read_text() for v in planted.values())


# the writer itself ---------------------------------------------------------------------------------------------


def test_an_interrupted_write_leaves_the_old_file_whole(tmp_path):
    path = safe_write.write_text(tmp_path / "report.md", "old, whole\n")

    class Boom(Exception):
        pass

    with pytest.raises(Boom):
        with safe_write.replace_file(path) as handle:
            handle.write("new, half")
            raise Boom
    assert path.read_text() == "old, whole\n"
    assert [p.name for p in tmp_path.iterdir()] == ["report.md"]  # no temporary left behind


def test_private_files_and_directories_whatever_the_umask(tmp_path):
    old = os.umask(0o000)
    try:
        directory = safe_write.make_dir(tmp_path / "a" / "b", private=True)
        private = safe_write.write_text(directory / "state.json", "{}", private=True)
        public = safe_write.write_text(tmp_path / "report.md", "x")
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "a").stat().st_mode) == 0o700
    assert stat.S_IMODE(directory.stat().st_mode) == 0o700
    assert stat.S_IMODE(private.stat().st_mode) == 0o600
    assert stat.S_IMODE(public.stat().st_mode) == 0o666  # a report is what open() gives: 0666 less the umask
    wide = tmp_path / "wide"
    wide.mkdir(mode=0o755)
    safe_write.make_dir(wide, private=True)  # an existing state directory of an older peagle is narrowed
    assert stat.S_IMODE(wide.stat().st_mode) == 0o700


@pytest.mark.skipif(os.geteuid() != 0, reason="giving a directory to another user needs root")
def test_a_state_directory_of_another_user_is_refused(tmp_path):
    theirs = tmp_path / "theirs"
    theirs.mkdir()
    os.chown(theirs, 65534, 65534)
    with pytest.raises(UsageError, match="belongs to another user"):
        safe_write.make_dir(theirs, private=True)


def test_file_names_never_hold_a_secret(tmp_path):
    from peagle_deploy.redaction import register_secret

    register_secret("nameLeakSecret77")
    path = safe_write.write_text(tmp_path / "bench-http---u-nameLeakSecret77-host.json", "{}")
    assert "nameLeakSecret77" not in path.name and path.suffix == ".json" and path.exists()
