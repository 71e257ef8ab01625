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
