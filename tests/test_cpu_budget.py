"""The per-test CPU budget (tests/cpu_budget.py) fails a test that spends too much CPU, and only such a test."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from . import cpu_budget

ROOT = Path(__file__).resolve().parent.parent
SUITE = '''
import time


def _burn(seconds):
    end = time.process_time() + seconds
    while time.process_time() < end:
        pass


def test_burns_cpu():
    _burn(0.6)


def test_waits_without_cpu():
    time.sleep(0.6)  # wall time is not what the budget counts


def test_cheap():
    assert True
'''


def test_a_test_over_its_cpu_budget_fails_at_teardown_naming_what_it_spent(tmp_path):
    (tmp_path / "test_probe.py").write_text(SUITE, encoding="utf-8")
    env = {**os.environ, "PEAGLE_TEST_CPU_BUDGET_S": "0.3", "PYTHONPATH": str(ROOT),
           "PEAGLE_TEST_CPU_REPORT": str(tmp_path / "cpu.jsonl")}
    done = subprocess.run([sys.executable, "-m", "pytest", "-p", "tests.cpu_budget", "-p", "no:cacheprovider",
                           "-o", "addopts=", "-q", "-rA", "test_probe.py"], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=300)
    out = done.stdout + done.stderr
    assert done.returncode == 1, out
    assert "3 passed, 1 error" in out, out
    assert "ERROR at teardown of test_burns_cpu" in out, out
    assert "test_probe.py::test_burns_cpu used " in out and "over its budget of 0.3 s" in out, out
    spent = {row["nodeid"]: row["cpu_s"] for row in map(json.loads, (tmp_path / "cpu.jsonl").read_text().splitlines())}
    assert spent["test_probe.py::test_burns_cpu"] >= 0.6
    assert spent["test_probe.py::test_waits_without_cpu"] < 0.3


def test_the_exceptions_name_files_of_the_suite_with_a_reason_and_a_larger_budget():
    for prefix, (budget, reason) in cpu_budget.EXCEPTIONS.items():
        assert (ROOT / prefix.split("::")[0]).is_file(), prefix
        assert budget > cpu_budget.BUDGET_S and len(reason) > 20, prefix
    assert cpu_budget.budget_of("tests/test_fault_matrix.py::test_fault[x]")[0] > cpu_budget.BUDGET_S
    assert cpu_budget.budget_of("tests/test_models.py::test_x") == (cpu_budget.BUDGET_S, None)
