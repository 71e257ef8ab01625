"""The clock that peagle's polls wait on (the InService wait, read retries, CloudWatch log polls), and the wall
clock that `status` and `cleanup --expired` read (ages, expiries, the cost so far).

Commands pass `clock.sleep` and `clock.monotonic` to them, looked up when the command runs, so that a test
harness running the CLI in-process or forked can swap these two for a fake clock: no test waits 2 s for a
poll; and `clock.now`, so that a test whose emulator runs on a manual clock (hours of scale to zero in no time)
shows peagle the same time. Library callers inject their own (`lifecycle.deploy(..., sleep=...)`).
"""

from __future__ import annotations

import time
from datetime import UTC, datetime

sleep = time.sleep
monotonic = time.monotonic


def _wall() -> datetime:
    return datetime.now(UTC)


now = _wall
