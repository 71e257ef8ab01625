"""The clock that peagle's polls wait on (the InService wait, read retries, CloudWatch log polls).

Commands pass `clock.sleep` and `clock.monotonic` to them, looked up when the command runs, so that a test
harness running the CLI in-process or forked can swap these two for a fake clock: no test waits 2 s for a
poll. Library callers inject their own (`lifecycle.deploy(..., sleep=...)`).
"""

from __future__ import annotations

import time

sleep = time.sleep
monotonic = time.monotonic
