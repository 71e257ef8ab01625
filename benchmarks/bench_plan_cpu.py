"""CPU of one `build_plan` (the plan every deploy, update and sweep configuration starts from) against the emulator:
JumpStart resolution from its bucket, the role's partition, the component checks. Prints milliseconds of CPU and
wall per plan, the median of ROUNDS rounds of N plans each, for the classic and the component shape.

    .venv/bin/python benchmarks/bench_plan_cpu.py            # docs/performance.md, "A slower machine"
"""

from __future__ import annotations

import statistics
import sys
import time

ROUNDS, N = 5, 20


def main() -> None:
    from peagle_deploy.plan import PlanRequest, build_plan
    from peagle_deploy.testing import SageMakerEmulator

    with SageMakerEmulator.server() as emu:
        for hosting in ("endpoint", "component"):
            request = PlanRequest(model="qwen3-coder", role=emu.role_arn, region=emu.region, name="bench",
                                  hosting=hosting)
            build_plan(request)  # the SDK imported, the first fetch done
            cpu, wall = [], []
            for _ in range(ROUNDS):
                c0, t0 = time.process_time(), time.perf_counter()
                for _ in range(N):
                    build_plan(request)
                cpu.append((time.process_time() - c0) / N * 1000)
                wall.append((time.perf_counter() - t0) / N * 1000)
            print(f"build_plan ({hosting}): {statistics.median(cpu):.1f} ms CPU, {statistics.median(wall):.1f} ms wall "
                  f"per plan (median of {ROUNDS} x {N}; Python {sys.version.split()[0]})")


if __name__ == "__main__":
    main()
