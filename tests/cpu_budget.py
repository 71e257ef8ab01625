"""The CPU budget of one test (issue 48): a test that uses more CPU than BUDGET_S fails, so the fast suite stays fast.

What counts is the CPU the test made this machine spend, user + system, from the start of its set-up to the end of
its teardown: this pytest process's (the test itself, the in-process `peagle` runs, the emulators and stand-in
servers in their threads), its waited-for children's (the installed executable, shims, bash) and the fork
server's finished children's (the forked runs; tests/forked_peagle.py). CPU time, not wall time: a loaded machine
makes a test wait for a core more than it makes it spend more of one, so the budget does not trip beside a CPU hog
(the same tests measured 1.0-1.5 times the CPU there that they use on a quieter machine; docs/performance.md, "The
fast suite after issue 48"). A module fixture's set-up counts for the first test that uses it.

BUDGET_S is generous: about three times the most any test used in the measurement it was set by (9 s: the SIGKILLed
sweep run by the installed executable, then resumed), apart from the files in EXCEPTIONS, whose first test runs a
whole table in a module fixture. A test over its budget gets an error at teardown naming what it spent; make it
cheaper (tests/README.md: in-process or forked rather than the executable, the module's emulator, the manual clock),
or, if its cost is its subject, name it in EXCEPTIONS with its own budget and the reason. `PEAGLE_TEST_CPU_BUDGET_S`
sets one budget for every test (`0` turns the check off, e.g. under a profiler); `PEAGLE_TEST_CPU_REPORT=PATH`
appends every test's figure to PATH (JSON lines).
"""

from __future__ import annotations

import json
import os
import resource
import sys
from pathlib import Path

import pytest

BUDGET_S = 30.0
# a file, or a test's node id (or its start) -> (budget in CPU seconds, why it needs more); measured on a loaded
# machine (load average 15-20): the most its first test used, then about three times that. On a slower machine
# (2026-12-02: the whole suite on 1.7 times the CPU) the first tests of these files used 22.9-75.7 s alone, and the
# most any other test used was 9.0 s (docs/performance.md, "A slower machine").
EXCEPTIONS: dict[str, tuple[float, str]] = {
    "tests/test_bad_inputs_table.py": (150.0, "its module fixtures run every bad-input case and follow every hint "
                                              "(471 cases, 17 through the executable, and ~190 hints) before its first "
                                              "test (52 s)"),
    "tests/test_fault_matrix.py": (150.0, "its module fixture runs every scenario (31 interrupted commands, each "
                                          "followed by status and recovery: 93 forked runs) before its first test "
                                          "(51 s)"),
    "tests/test_documented_commands.py": (60.0, "the first test of a document runs all of its lines (docs/sweep.md: "
                                                "sweeps of seven configurations; the README: deploys, benches, "
                                                "agreement, update, cleanup) (15 s)"),
    "tests/test_iam_policy.py": (60.0, "its module fixture runs every command's scenarios against the recording "
                                       "emulator (30 forked runs) before its first test (12 s; 22.9 s on a "
                                       "machine that runs the suite on 1.7 times the CPU)"),
    "tests/test_recover_scale_to_zero.py": (90.0, "its module fixture SIGKILLs a scale-to-zero deploy at each of its "
                                                  "8 writes, on this machine and another (16 deploys, each followed "
                                                  "by status and recover: about 50 forked runs) before its first "
                                                  "test (17.8 s on the machine the other budgets were set on, 33.6 s "
                                                  "in a clean-clone CI on one that runs the suite on 1.7 times the "
                                                  "CPU)"),
}


def budget_of(nodeid: str) -> tuple[float, str | None]:
    """(the budget of test `nodeid` in CPU seconds, the reason it has its own or None)."""
    env = os.environ.get("PEAGLE_TEST_CPU_BUDGET_S")
    if env is not None:
        return float(env), None
    for prefix, (budget, reason) in EXCEPTIONS.items():
        if nodeid == prefix or nodeid.startswith((prefix + "::", prefix + "[")):
            return budget, reason
    return BUDGET_S, None


def cpu_seconds() -> float:
    """User + system CPU of this process, its waited-for children and the fork server's finished children."""
    total = 0.0
    for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN):
        usage = resource.getrusage(who)
        total += usage.ru_utime + usage.ru_stime
    forked = sys.modules.get(f"{__package__}.forked_peagle")
    proc = forked._server.get("proc") if forked else None
    if proc is not None:
        try:
            fields = Path(f"/proc/{proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
            total += (int(fields[13]) + int(fields[14])) / os.sysconf("SC_CLK_TCK")  # cutime, cstime
        except (OSError, ValueError, IndexError):
            pass
    return total


OPT_IN_TIERS = {"real_vllm", "container", "contention"}  # markers the fast suite deselects (pyproject's addopts)
_started: dict[str, float] = {}


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item):
    """From before the test's fixtures are set up; the fast suite's tests only (an opt-in tier starts vLLM and
    containers whose CPU is counted when they are stopped)."""
    if not OPT_IN_TIERS & {mark.name for mark in item.iter_markers()}:
        _started[item.nodeid] = cpu_seconds()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    """A test over its budget fails at its teardown, with what it spent."""
    report = yield
    if call.when == "teardown":
        over = finish(item.nodeid)
        if over and report.passed:
            report.outcome, report.longrepr = "failed", over
    return report


def finish(nodeid: str) -> str | None:
    """After the test's teardown: why it went over its budget, or None."""
    if nodeid not in _started:
        return None
    spent = cpu_seconds() - _started.pop(nodeid)
    report_path = os.environ.get("PEAGLE_TEST_CPU_REPORT")
    if report_path:
        with open(report_path, "a", encoding="utf-8") as out:
            out.write(json.dumps({"nodeid": nodeid, "cpu_s": round(spent, 3)}) + "\n")
    budget, reason = budget_of(nodeid)
    if not budget or spent <= budget:
        return None
    own = f" (its own budget: {reason})" if reason else ""
    return (f"{nodeid} used {spent:.1f} s of CPU, over its budget of {budget:g} s{own}: make it cheaper "
            "(tests/README.md: in-process or forked, the module's emulator, the manual clock), or name it in "
            "tests/cpu_budget.py's EXCEPTIONS with the reason")
