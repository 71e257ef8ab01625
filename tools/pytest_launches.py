"""A pytest plugin that counts, per test, how `peagle` ran: processes started with the installed `peagle` (or
`peagle-container`) executable, forked runs (the suite's shim, tests/forked_peagle.py) and in-process runs
(tests/cli_runner.py), and writes them with each test's wall time (setup + call + teardown) and CPU time to
$PEAGLE_LAUNCH_REPORT as JSON lines. A launch inside `bash -c` is not counted (the docs examples), but its CPU is.
The CPU of a test: this process's (the in-thread emulators included), its waited-for children's (executables,
shims) and the fork server's children's (the forked runs), user + system. Works beside pytest-xdist (one line
per test from each worker).

    PEAGLE_LAUNCH_REPORT=/tmp/launches.jsonl python -m pytest -n auto --dist loadfile -p tools.pytest_launches

Summarise with `python tools/pytest_launches.py /tmp/launches.jsonl`. Not used by the suite itself.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path

_lock = threading.Lock()
_current: dict = {"nodeid": None, "launches": Counter()}
_real_init = subprocess.Popen.__init__


def _program(args) -> str | None:
    if isinstance(args, (str, bytes)):
        args = [args]
    try:
        argv = [os.fsdecode(a) for a in args]
    except TypeError:
        return None
    if not argv:
        return None
    name = Path(argv[0]).name
    if name == "peagle" and "/peagle-fork-" in argv[0]:
        return "forked"
    if name in ("peagle", "peagle-container"):
        return name
    if len(argv) > 1 and name.startswith("python") and argv[1].endswith("peagle_forkserver.py"):
        return "forkserver"
    if len(argv) > 2 and name.startswith("python") and argv[1] == "-m" and argv[2].startswith("peagle_deploy"):
        return "python -m " + argv[2]
    return None


def _counting_init(self, args, *a, **kw):
    program = _program(args)
    if program is not None:
        with _lock:
            _current["launches"][program] += 1
    return _real_init(self, args, *a, **kw)


def pytest_configure(config):
    subprocess.Popen.__init__ = _counting_init
    try:
        from tests import cli_runner
    except ImportError:
        return
    real_run_cli = cli_runner.run_cli

    def counting_run_cli(*args, **kwargs):
        with _lock:
            _current["launches"]["in-process"] += 1
        return real_run_cli(*args, **kwargs)

    cli_runner.run_cli = counting_run_cli


def pytest_unconfigure(config):
    subprocess.Popen.__init__ = _real_init


def _cpu_seconds() -> float:
    """User + system CPU of this process, its waited-for children and the fork server's (with its children)."""
    import resource

    total = 0.0
    for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN):
        usage = resource.getrusage(who)
        total += usage.ru_utime + usage.ru_stime
    try:
        from tests.forked_peagle import _server

        proc = _server.get("proc")
        if proc is not None:
            fields = Path(f"/proc/{proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
            total += sum(int(v) for v in fields[11:15]) / os.sysconf("SC_CLK_TCK")  # utime stime cutime cstime
    except (ImportError, OSError, ValueError):
        pass
    return total


def pytest_runtest_protocol(item, nextitem):
    with _lock:
        _current["nodeid"] = item.nodeid
        _current["launches"] = Counter()
    item._launch_start = time.monotonic()
    item._cpu_start = _cpu_seconds()


def pytest_runtest_logfinish(nodeid, location):
    pass


def pytest_runtest_teardown(item, nextitem):
    pass


def pytest_runtest_makereport(item, call):
    if call.when != "teardown":
        return
    path = os.environ.get("PEAGLE_LAUNCH_REPORT")
    if not path:
        return
    with _lock:
        launches = dict(_current["launches"])
    seconds = time.monotonic() - getattr(item, "_launch_start", time.monotonic())
    cpu = _cpu_seconds() - getattr(item, "_cpu_start", 0.0)
    with open(path, "a", encoding="utf-8") as out:
        out.write(json.dumps({"nodeid": item.nodeid, "seconds": round(seconds, 3), "cpu": round(cpu, 3),
                              "launches": launches}) + "\n")


def summarise(path: str) -> None:
    rows = [json.loads(line) for line in Path(path).read_text().splitlines() if line.strip()]
    total = sum(r["seconds"] for r in rows)
    print(f"{len(rows)} tests, {total:.0f} s in tests, {sum(r.get('cpu', 0) for r in rows):.0f} s of CPU")
    executable = [r for r in rows if r["launches"].get("peagle") or r["launches"].get("peagle-container")]
    forked = [r for r in rows if r["launches"].get("forked") and r not in executable]
    in_process = [r for r in rows if r["launches"].get("in-process") and r not in executable and r not in forked]
    for label, group, keys in (("start the executable", executable, ("peagle", "peagle-container")),
                               ("run forked (and not the executable)", forked, ("forked",)),
                               ("run in-process only", in_process, ("in-process",))):
        print(f"{len(group)} tests {label}: {sum(r['seconds'] for r in group):.0f} s, "
              f"{sum(r.get('cpu', 0) for r in group):.0f} s CPU, "
              f"{sum(r['launches'].get(k, 0) for r in group for k in keys)} runs")
    rest = [r for r in rows if r not in executable and r not in forked and r not in in_process]
    print(f"{len(rest)} tests run no peagle command: {sum(r['seconds'] for r in rest):.0f} s, "
          f"{sum(r.get('cpu', 0) for r in rest):.0f} s CPU")
    by_file: Counter = Counter()
    cpu_by_file: Counter = Counter()
    launches_by_file: Counter = Counter()
    for r in rows:
        f = r["nodeid"].split("::")[0]
        by_file[f] += r["seconds"]
        cpu_by_file[f] += r.get("cpu", 0)
        launches_by_file[f] += r["launches"].get("peagle", 0) + r["launches"].get("peagle-container", 0)
    for f, s in cpu_by_file.most_common():
        print(f"{s:8.1f} s CPU {by_file[f]:8.1f} s  {launches_by_file[f]:4d} launches  {f}")


if __name__ == "__main__":
    summarise(sys.argv[1])
