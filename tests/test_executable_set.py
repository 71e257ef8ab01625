"""The installed executable is started only by the tests tests/README.md names (its "executable set"): every
other test runs peagle in-process or forked, which costs a fraction of a new Python process."""

from __future__ import annotations

import re
from pathlib import Path

TESTS = Path(__file__).resolve().parent


def test_every_fast_suite_file_that_starts_the_executable_is_named_in_the_readme():
    table = (TESTS / "README.md").read_text(encoding="utf-8").split("## The executable set", 1)[1]
    named = set(re.findall(r"`(test_\w+\.py)", table))
    starting = {path.name for path in TESTS.glob("test_*.py")
                if re.search(r"\bPEAGLE\b|\bExecutable\(\)", path.read_text(encoding="utf-8"))
                and path.name != Path(__file__).name}
    assert starting, "no test file names PEAGLE: the check would pass for nothing"  # (or interrupt_helpers' Executable)
    assert not starting - named, f"start the installed peagle but are not in tests/README.md's executable set: " \
                                 f"{sorted(starting - named)} (run them forked: tests/forked_peagle.py)"
