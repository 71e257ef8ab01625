"""The contract tier's scenarios against the emulator, on every run of the fast suite: the same functions
`pytest -m aws` runs against a real account (scenarios.py), on one emulator per module, its time a manual clock
(the idle quarter-hours pass at once). Each run builds its stack, observes, and removes it with peagle's cleanup;
the module ends with the tier's sweep of its name prefix."""

from __future__ import annotations

import pytest

from .scenarios import BEHAVIOURS

SHOWN = [b for b in BEHAVIOURS if b.run is not None]


@pytest.mark.parametrize("behaviour", SHOWN, ids=[b.id for b in SHOWN])
def test_on_the_emulator(behaviour, emulator_account):
    behaviour.check(emulator_account)


def test_every_run_removed_its_stack_with_peagles_cleanup(emulator_account):
    """After every run (each once, shared with the tests above), nothing of the module's prefix is left: each run
    removed its own stack with peagle's cleanup, as it does on AWS, and every endpoint it made is counted ended."""
    from .cleanup import leftovers
    from .scenarios import RUNS, observe

    for key in RUNS:
        observe(emulator_account, key)
    assert leftovers(emulator_account, emulator_account.prefix) == []
    meter = emulator_account.meter
    assert set(meter.started) == set(meter.ended) and len(meter.started) >= 6
