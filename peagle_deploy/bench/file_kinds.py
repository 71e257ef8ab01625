"""peagle's own JSON files that are not benchmark results, known by their keys.

A sweep's folder holds bench results (`runs/bench-*.json`) beside the greedy outputs it keeps for the agreement
check (`runs/outputs-*.json`), its state file and its report, so `bench compare OUT/runs/*.json` meets them all. A
command given one says what the file is and which command reads it; `bench compare` and `advise --measured` skip
it with one line when other results remain (`results.NotBenchResults`).
"""

from __future__ import annotations

from typing import Any, NamedTuple


class FileKind(NamedTuple):
    what: str  # "the greedy outputs a sweep kept ...", after "<path> is "
    reader: str  # which command reads it


# The required fields of each model, as data: bench/ sits below sweep/ and imports none of its models
# (tests/test_bench_file_kinds.py checks these against the models' own required fields).
OUTPUT_SAMPLE_KEYS = frozenset({"answers", "max_tokens", "target", "temperature", "unit"})  # agreement.OutputSample
SWEEP_STATE_KEYS = frozenset({"configs", "plan", "request"})  # sweep.state.SweepState
SWEEP_REPORT_KEYS = frozenset({  # sweep.report.SweepReport
    "budget_usd", "concurrency", "configurations", "estimated_usd", "model", "published", "ratios", "recommendation",
    "removed", "spent_usd", "status", "stopped_reason", "sweep_id", "tables"})
AGREEMENT_REPORT_KEYS = frozenset({"agrees", "baseline", "candidate", "dataset", "max_tokens", "prompts"})


def required_fields(model: Any) -> set[str]:
    return {name for name, field in model.model_fields.items() if field.is_required()}


def peagle_file_kind(data: Any) -> FileKind | None:
    """What peagle file `data` (a parsed JSON document) is, when it is one of peagle's other files; else None."""
    if not isinstance(data, dict):
        return None
    keys = set(data)
    if OUTPUT_SAMPLE_KEYS <= keys:
        return FileKind(f"the greedy outputs of {data.get('target')!s} that a sweep kept for its agreement check",
                        "the sweep reads it for its report's 'greedy output vs off' column; no command takes it "
                        "as an argument")
    if SWEEP_STATE_KEYS <= keys:
        return FileKind("a sweep's state file", "'peagle sweep --resume' reads it")
    if SWEEP_REPORT_KEYS <= keys:
        return FileKind("a sweep's report (sweep.json)",
                        "its benchmark results are the bench-*.json files in runs/ beside it")
    if AGREEMENT_REPORT_KEYS <= keys:
        return FileKind("the --json output of 'peagle bench agree'", "no peagle command reads it")
    inner = data.get("result")
    if isinstance(inner, dict) and "schema_version" in inner and "files" in data:
        return FileKind("the --json output of 'peagle bench'", "the results file it names under 'files' is what "
                        "'bench compare' and 'bench advise' read")
    return None
