"""The clock that peagle's polls wait on (the InService wait, read retries, CloudWatch log polls), and the wall
clock that leases are written and judged by (`lifecycle.lease`) and that `status` and `cleanup --expired` read (ages,
expiries, the cost so far).

Commands pass `clock.sleep` and `clock.monotonic` to them, looked up when the command runs, so that a test
harness running the CLI in-process or forked can swap these two for a fake clock: no test waits 2 s for a
poll. `clock.now` is looked up the same way, so that a test can run a command "later" (a lease that has expired)
without waiting for it, and a test whose emulator runs on a manual clock (hours of scale to zero in no time) shows
peagle the same time. Library callers inject their own (`lifecycle.deploy(..., sleep=...)`).
"""

from __future__ import annotations

import time
from datetime import UTC, datetime

sleep = time.sleep
monotonic = time.monotonic


def now() -> datetime:
    """The wall clock, in UTC."""
    return datetime.now(UTC)


POLL_ENV = "PEAGLE_POLL_INTERVAL_S"  # a fixed poll interval (e.g. 0 against a local emulator in CI, docs/ci.md)


def _fixed_interval() -> float | None:
    import os

    value = os.environ.get(POLL_ENV, "").strip()
    try:
        return max(0.0, float(value)) if value else None
    except ValueError:
        return None


def poll_intervals(first: float = 2.0, factor: float = 1.5, cap: float = 30.0):
    """The waits between polls: `first` growing by `factor` up to `cap`, or PEAGLE_POLL_INTERVAL_S when it is set
    (every poll of peagle's: the InService waits, read retries, the wake-up of a component at zero)."""
    fixed = _fixed_interval()
    while fixed is not None:
        yield fixed
    delay = first
    while True:
        yield delay
        delay = min(cap, delay * factor)
