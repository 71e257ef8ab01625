"""The fast suite's time per file and its ten slowest tests, from two runs' `--durations=0` output (docs/performance.md,
"The fast suite after issue 48").

    .venv/bin/python -m pytest -n auto --dist loadfile -p no:cacheprovider --durations=0 > before.log   # one commit
    .venv/bin/python -m pytest -n auto --dist loadfile -p no:cacheprovider --durations=0 > after.log    # the other
    python benchmarks/suite_per_file.py before.log after.log

A file's time is the sum of its tests' setup, call and teardown as pytest reports them (durations under 5 ms are
hidden by pytest and not counted); files under --min seconds in both runs are summed on one line.
"""

from __future__ import annotations

import argparse
import collections
import re

_LINE = re.compile(r"\s*([\d.]+)s (setup|call|teardown)\s+(.+?)\s*$")


def durations(path: str) -> tuple[collections.Counter[str], list[tuple[float, str, str]]]:
    """(seconds per test file, every (seconds, phase, node id)) of one run's log."""
    per_file: collections.Counter[str] = collections.Counter()
    rows = []
    with open(path, encoding="utf-8", errors="replace") as log:
        for line in log:
            found = _LINE.match(line)
            if found:
                seconds, phase, node = float(found.group(1)), found.group(2), found.group(3)
                per_file[node.split("::")[0]] += seconds
                rows.append((seconds, phase, node))
    return per_file, rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("before")
    parser.add_argument("after")
    parser.add_argument("--min", type=float, default=3.0, help="seconds under which a file is summed with the rest")
    parser.add_argument("--slowest", type=int, default=10)
    args = parser.parse_args()
    before, _ = durations(args.before)
    after, rows = durations(args.after)
    files = sorted(set(before) | set(after), key=lambda f: (-before.get(f, 0), f))
    shown = [f for f in files if max(before.get(f, 0), after.get(f, 0)) >= args.min]
    rest = [f for f in files if f not in shown]
    print("| file | before (s) | after (s) |\n|---|---|---|")
    for name in shown:
        print(f"| {name} | {before.get(name, 0):.1f} | {after.get(name, 0):.1f} |")
    print(f"| {len(rest)} other files (each under {args.min:g} s) | {sum(before.get(f, 0) for f in rest):.1f} | "
          f"{sum(after.get(f, 0) for f in rest):.1f} |")
    print(f"| **sum of test times** | {sum(before.values()):.1f} | {sum(after.values()):.1f} |\n")
    print("| seconds | phase | test |\n|---|---|---|")
    for seconds, phase, node in sorted(rows, reverse=True)[:args.slowest]:
        print(f"| {seconds:.1f} | {phase} | {node} |")


if __name__ == "__main__":
    main()
