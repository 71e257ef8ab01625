"""The contract tier against a real account: `PEAGLE_AWS_TESTS=1 pytest -m aws` (docs/ci.md, "The contract tier").

One test per behaviour docs/ci.md marks *assumed* or takes from a third party (scenarios.BEHAVIOURS: each check's
docstring says the behaviour, its source, and what a different answer would change in peagle); those that cannot be
shown cheaply are listed and skipped with the reason. The cost is printed before anything starts, `--max-cost`
caps it, and the session ends with peagle's cleanup of everything the tier made (conftest.py, `aws_account`)."""

from __future__ import annotations

import pytest

from .scenarios import BEHAVIOURS

pytestmark = pytest.mark.aws


@pytest.mark.parametrize("behaviour", [
    pytest.param(b, id=b.id, marks=[pytest.mark.skip(reason=f"not shown: {b.aws_skip}")] if b.aws_skip else [])
    for b in BEHAVIOURS])
def test_on_aws(behaviour, aws_account):
    behaviour.check(aws_account)
