"""The results file of one `peagle bench` run: a versioned pydantic schema, one JSON file per run."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import datetime
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ..errors import UsageError
from .acceptance import Acceptance
from .request_acceptance import RequestAcceptanceSummary
from ..pricing import Price
from .server_facts import ServerFacts
from ..runtime.waking import ColdStart
from .stats import Summary

SCHEMA_VERSION = 1


class TargetInfo(BaseModel):
    model_config = ConfigDict(extra="forbid")

    kind: str  # "sagemaker", "container" or "openai"
    name: str  # endpoint name or URL
    model: str | None = None
    mode: str | None = None  # p-eagle | eagle3 | off: the server's, else the label's (see mode_source)
    k: int | None = None  # the server's K, else the label's (see k_source)
    mode_source: str | None = None  # "server", "flags", "tags" or "url-label"
    k_source: str | None = None
    label_mode: str | None = Field(None, description="what --mode, --url MODE:K= or the peagle:mode tag said")
    label_k: int | None = None
    label_source: str | None = None  # "flags", "tags" or "url-label"
    server: ServerFacts | None = Field(None, description="what the server showed it runs, and where it was read")
    label_disagrees: str | None = Field(None, description="the label against the server's values, in one line")
    instance_type: str | None = None
    instance_count: int | None = None
    instance_pool: str | None = Field(None, description="instance pools: which one serves (DescribeEndpoint)")
    transport: str | None = None  # sagemaker: invoke-endpoint or openai-route (SageMaker's OpenAI route)
    inference_component: str | None = None  # sagemaker: the endpoint's inference component the run addressed


class Settings(BaseModel):
    model_config = ConfigDict(extra="forbid")

    dataset: str
    dataset_source: str
    num_prompts_in_dataset: int
    turns_in_dataset: int | None = Field(None, description="requests one pass sends, when records have "
                                                           "several turns (MT-Bench: 80 records, 160 turns)")
    max_tokens: int
    temperature: float
    warmup: int | None = Field(description="warm-up requests per level; null: one per in-flight slot")
    duration_s: float | None
    num_prompts: int | None


class LevelResult(BaseModel):
    """One concurrency level. Latencies in milliseconds; see docs/bench.md for each definition."""

    model_config = ConfigDict(extra="forbid")

    concurrency: int
    window_s: float = Field(description="length of the measured window")
    completed: int = Field(description="measured requests that finished by the end of the window")
    cut_at_end: int = Field(0, description="requests still running when a --duration window closed")
    warmup_requests: int = 0
    errors: int = 0
    error_kinds: dict[str, int] = {}
    error_examples: dict[str, str] = Field({}, description="the server's own text of one error of each kind")
    output_tokens: int = Field(description="output tokens received in the window")
    output_tokens_per_s: float
    requests_per_s: float
    mean_in_flight: float = Field(description="time-weighted mean of requests in flight over the window")
    concurrency_held: float = Field(description="mean_in_flight / concurrency")
    tokens_per_chunk: float | None = Field(
        None, description="mean output tokens per streamed chunk (from usage); > 1 under speculative decoding")
    ttft_ms: Summary = Field(description="to the first chunk with output tokens: content, reasoning or tool call")
    ttfc_ms: Summary = Field(Summary(), description="to the first chunk with content")
    itl_ms: Summary = Field(description="between consecutive chunks, per chunk (as vllm bench serve)")
    tpot_ms: Summary = Field(description="per output token: (E2E - TTFT) / (output tokens - 1)")
    e2e_ms: Summary
    usd_per_million_output_tokens: float | None = None
    client_cpu: float | None = Field(None, description="CPU time of the load generator / window (1.0 = one core)")
    loop_lag_ms: Summary = Field(Summary(), description="event-loop lag of the load generator over the window")
    client_saturated: bool = Field(False, description="the load generator, not the target, limited this level: it "
                                   "used a whole core, or its event loop was never idle (starved of CPU)")
    client_judged: bool = Field(True, description="false: the window was too short for the load-generator verdict "
                                "(client_saturated, host_busy), so none was given; client_note says so")
    loop_busy: float | None = Field(None, description="share of the window the event loop ran or waited for a CPU "
                                                      "(/proc/thread-self/schedstat); 1 - idle")
    loop_waiting: float | None = Field(None, description="share of the window it waited for a CPU other processes held")
    host_busy: bool = Field(False, description="other processes delayed the load generator, which still kept up "
                                               "with its work: throughput and latencies can carry the wait")
    client_note: str | None = Field(None, description="why the level is marked saturated or host busy")
    loop_sleeps_per_s: float | None = Field(None, description="times per second the event loop went idle "
                                                              "(voluntary context switches)")
    loop_preemptions_per_s: float | None = Field(None, description="times per second it was taken off the CPU with "
                                                                   "work left (involuntary context switches)")


class BenchResult(BaseModel):
    model_config = ConfigDict(extra="forbid")

    schema_version: int = SCHEMA_VERSION
    tool: str = "peagle bench"
    tool_version: str
    started_at: datetime
    finished_at: datetime
    target: TargetInfo
    settings: Settings
    price: Price | None = None
    levels: list[LevelResult]
    acceptance: Acceptance | None = None
    request_acceptance: RequestAcceptanceSummary | None = Field(
        None, description="per request, where the answers carried vLLM's metrics.speculative_decoding (0.29+)")
    cold_start: ColdStart | None = Field(None, description="an inference component's: what reaching a copy took "
                                                           "before anything was measured (in no level's figures)")
    complete: bool = True
    stopped: str | None = Field(None, description="why the run stopped before its last level, if it did")

    def label(self) -> str:
        """'p-eagle K=7', 'eagle3 K=3', 'off', 'speculative K=3' (the server showed K, not the method), or
        the target name when nothing is known."""
        if self.target.mode is None:
            return f"speculative K={self.target.k}" if self.target.k else self.target.name
        if self.target.mode == "off" or not self.target.k:
            return self.target.mode
        return f"{self.target.mode} K={self.target.k}"


def write_result(result: BenchResult, out_dir: Path) -> Path:
    """bench-<label>-<UTC time to the millisecond>.json, a name no other run has (safe_write.claim_unique: a
    second run in the same millisecond, or a link planted at the name, gets `-2`); the .md and .png beside it
    share its stem."""
    from ..redaction import safe_name
    from ..safe_write import claim_unique, write_text

    stamp = result.started_at.strftime("%Y%m%dT%H%M%S.") + f"{result.started_at.microsecond // 1000:03d}Z"
    path = claim_unique(out_dir, f"bench-{safe_name(result.label())}-{stamp}", ".json", beside=(".md", ".png"))
    return write_text(path, result.model_dump_json(indent=2) + "\n")


class NotBenchResults(UsageError):
    """One of peagle's other files (bench/file_kinds.py): a command reading several results may skip it."""

    def __init__(self, path: Path, what: str, reader: str):
        super().__init__(f"{path} is {what}, not benchmark results", reader)
        self.skipped = f"skipped {path}: {what} ({reader})"


def read_results(paths: list[Path], *, skipped: Callable[[str], None]) -> list[BenchResult]:
    """Every file's results, for commands that read several (a glob over a sweep's runs/ meets its outputs-*.json):
    one of peagle's other files is skipped with one line to `skipped` while others remain; refused (exit 2)
    when nothing else is left. Any other bad file is refused, as `read_result` does."""
    results, others = [], []
    for path in paths:
        try:
            results.append(read_result(path))
        except NotBenchResults as exc:
            others.append(exc)
    if others and not results:
        raise others[0]
    for exc in others:
        skipped(exc.skipped)
    return results


def read_result(path: Path) -> BenchResult:
    from ..safe_write import regular_file

    regular_file(path, what="result file", hint="pass JSON files written by 'peagle bench --out DIR'")  # no fifo
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise UsageError(
            f"result file {path} not found", "pass JSON files written by 'peagle bench --out DIR'"
        ) from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise UsageError(
            f"{path} is not a JSON results file ({type(exc).__name__})",
            "pass JSON files written by 'peagle bench --out DIR'",
        ) from None
    version = data.get("schema_version") if isinstance(data, dict) else None
    if version != SCHEMA_VERSION:
        from .file_kinds import peagle_file_kind

        kind = peagle_file_kind(data)
        if kind is not None:
            raise NotBenchResults(path, kind.what, kind.reader)
        if version is None:
            raise UsageError(f"{path} is not a peagle bench results file (it has no schema_version)",
                             "pass the bench-*.json files 'peagle bench --out DIR' wrote")
        raise UsageError(f"{path} has schema_version {version!r}, this peagle reads {SCHEMA_VERSION}",
                         "re-run the benchmark with this version of peagle")
    try:
        return BenchResult.model_validate(data)
    except ValidationError as exc:
        err = exc.errors()[0]
        where = ".".join(str(p) for p in err.get("loc", ()))
        raise UsageError(
            f"{path} is not a valid results file ({where}: {err.get('msg')})",
            "pass JSON files written by 'peagle bench --out DIR'",
        ) from None
