"""Acceptance watched while the endpoint serves, as pure data (no AWS call): a CloudWatch Logs metric filter on
vLLM's own `SpecDecoding metrics` lines and a CloudWatch alarm when speculation stops paying. docs/monitoring.md
says it for users; `lifecycle.acceptance_watch` sends, reads and removes what this module plans.

The metric is made by CloudWatch itself, with no extra process on the endpoint: vLLM logs, every logging interval
(10 s) with drafts in it (vllm/v1/spec_decode/metrics.py, `SpecDecodingLogging.log`, the same format string in
vLLM 0.28.0 and 0.32.0)

    SpecDecoding metrics: Mean acceptance length: %.2f, Accepted throughput: %.2f tokens/s, Drafted throughput:
    %.2f tokens/s, Accepted: %d tokens, Drafted: %d tokens, Per-position acceptance rate: %s, Avg Draft
    acceptance rate: %.1f%%

(the per-position rates: K values joined by ", "), behind a logger prefix that differs between vLLM versions and
images ("(APIServer pid=7) INFO 11-22 10:00:00 [metrics.py:120] ", "INFO [metrics.py:96] "). SageMaker puts the
container's output in /aws/sagemaker/Endpoints/NAME (an inference component's in
/aws/sagemaker/InferenceComponents/NAME). A metric filter's space-delimited pattern reads fields by position: one
leading `...` takes the prefix, whatever its length, and the fields after it are counted from the line's end, which
holds K per-position rates. So the pattern is K's own: a line of another K never matches it, and each K publishes its
own metrics (`metric_name`). Only whole fields can be a metric's value: the accepted and drafted token counts are
(`60`); the logged mean acceptance length is not (`4.00,` carries the comma), so the length is metric math:

    mean acceptance length = 1 + accepted / drafts, drafts = drafted / K  ->  1 + K * accepted / drafted

vLLM's own definition (`mean_acceptance_length = 1 + (num_accepted_tokens / num_drafts)` in the same function);
a draft proposes K tokens, fewer only where vLLM trims one near the request's end, so drafted / K is at most the
drafts, and the length computed here is at least vLLM's: the alarm never fires early for it.

The floor: what the deploy was told (`--acceptance-floor N`), else half the gain the newest bench or sweep result of
the same configuration measured (`--acceptance-floor RESULTS`), never under the break-even length, else the
break-even length itself: where speculation stops paying in the K advisor's first-order cost model
(bench/advisor.py: a step costs 1 + VERIFY_COST * K + DRAFT_COST plain decoding steps, the drafting K times for
sequential EAGLE-3), `default_floor`.
"""

from __future__ import annotations

import math
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from .errors import UsageError

NAMESPACE = "peagle/Speculation"
PREFIX = "peagle-acceptance-"  # the alarm's and the filters' names: how cleanup tells peagle's from others'
PERIOD_S = 60
EVALUATION_PERIODS = 3  # minutes below the floor, every one of them, before the alarm fires
LOG_INTERVAL_S = 10  # vLLM's default stats logging interval (VLLM_LOG_STATS_INTERVAL)
# bench/advisor.py's first-order cost model (`advise` defaults; tests/test_acceptance_alarm.py keeps them equal)
VERIFY_COST, DRAFT_COST = 0.02, 0.06
SEQUENTIAL_MODES = ("eagle3",)  # K drafter passes per step; every other speculative mode drafts K in one pass
HALF_GAIN = 0.5  # a measured floor: this share of the measured gain over no speculation (length - 1)
VALUES = {"accepted": "AcceptedTokens", "drafted": "DraftedTokens"}
Value = Literal["accepted", "drafted"]


def alarm_name(owner: str) -> str:
    """The alarm of an endpoint (or of its inference component, named as the endpoint): peagle-acceptance-NAME."""
    return f"{PREFIX}{owner}"


def filter_name(owner: str, k: int, value: Value) -> str:
    return f"{PREFIX}{owner}-k{k}-{value}"


def metric_name(owner: str, k: int, value: Value) -> str:
    """Metric filters take their dimensions from fields of the line only, and no field names the endpoint: the
    endpoint and K are in the metric's name (NAME/K3/AcceptedTokens)."""
    return f"{owner}/K{k}/{VALUES[value]}"


def k_of_filter(name: str) -> int | None:
    """K of one of peagle's filter names (None: not one)."""
    if not name.startswith(PREFIX) or not name.endswith(("-accepted", "-drafted")):
        return None
    stem = name.rsplit("-", 1)[0]
    head, _, k = stem.rpartition("-k")
    return int(k) if head and k.isdigit() else None


def filter_pattern(k: int) -> str:
    """The space-delimited pattern of vLLM's line at K: the prefix in `...`, then every field to the line's end."""
    fields = ["...", 'accepted_label="Accepted:"', "accepted", "accepted_unit", 'drafted_label="Drafted:"', "drafted",
              "drafted_unit", 'rates_label="Per-position"', "rates_of", "rates_colon",
              *(f"p{i}" for i in range(1, k + 1)), 'avg_label="Avg"', "avg_draft", "avg_acceptance", "avg_rate",
              "avg_percent"]
    return "[" + ", ".join(fields) + "]"


def break_even(k: int, mode: str) -> float:
    """The mean acceptance length at which a speculative step costs as much as the plain steps it replaces."""
    drafting = DRAFT_COST * k if mode in SEQUENTIAL_MODES else DRAFT_COST
    return round(1 + VERIFY_COST * k + drafting, 2)


class AcceptanceFloor(BaseModel):
    """The mean acceptance length below which the alarm fires, and where it comes from."""

    model_config = ConfigDict(frozen=True)

    value: float = Field(gt=1, description="mean acceptance length (1 = no draft token ever accepted)")
    kind: Literal["default", "given", "measured"]
    short: str = Field(description="the source in a few words")
    source: str


def default_floor(k: int, mode: str) -> AcceptanceFloor:
    passes = f"{k} drafter passes" if mode in SEQUENTIAL_MODES else "one drafter pass"
    return AcceptanceFloor(value=break_even(k, mode), kind="default", short=f"break-even for {mode} K={k}", source=(
        f"peagle's default for {mode} K={k}: the break-even length, where a step (verifying {k} draft tokens, "
        f"{passes}) costs as much as the plain steps it saves, in the K advisor's cost model (1 + {VERIFY_COST}*K "
        f"+ {DRAFT_COST}{'*K' if mode in SEQUENTIAL_MODES else ''})"))


class MeasuredAcceptance(BaseModel):
    """A mean acceptance length a bench or sweep result measured, and what it measured."""

    model_config = ConfigDict(frozen=True)

    mean_acceptance_length: float
    mode: str | None
    k: int | None
    model: str | None = None
    measured_at: str = Field(description="when the run started (ISO 8601)")
    source: str = Field(description="the result file and where in it the figure was read")


class AcceptanceRequest(BaseModel):
    """What the user chose: on or off, and the floor (a number, results to take it from, or peagle's default)."""

    model_config = ConfigDict(frozen=True)

    enabled: bool = True
    floor: float | None = Field(None, description="--acceptance-floor N: the mean acceptance length itself")
    measured: list[MeasuredAcceptance] = Field(default_factory=list, description="--acceptance-floor RESULTS: "
                                               "every result read; the newest of the plan's configuration decides")
    measured_from: str | None = None
    off_because: str | None = Field(None, description="why it is off when the user did not say --no-acceptance-alarm")


def choose_floor(request: AcceptanceRequest, *, k: int, mode: str, model: tuple[str, ...] = ()) -> AcceptanceFloor:
    """The floor for K and mode (see the module docstring); a results path with no run of this configuration is
    refused in one line."""
    if request.floor is not None:
        given = f"--acceptance-floor {request.floor:g}"
        return AcceptanceFloor(value=request.floor, kind="given", short=given, source=given)
    if request.measured_from is None:
        return default_floor(k, mode)
    same = [m for m in request.measured if m.mode == mode and m.k == k and (m.model is None or not model
                                                                            or m.model in model)]
    if not same:
        seen = sorted({f"{m.mode} K={m.k}" for m in request.measured}) or ["no run with a measured acceptance"]
        raise UsageError(f"--acceptance-floor {request.measured_from}: no bench or sweep result of {mode} K={k} "
                         f"({', '.join(seen)})", "pass results of this configuration, a number (e.g. "
                                                 "--acceptance-floor 1.5), or leave it out for peagle's default")
    newest = max(same, key=lambda m: m.measured_at)
    half = round(1 + HALF_GAIN * (newest.mean_acceptance_length - 1), 2)
    floor = max(half, break_even(k, mode))
    why = (f"half the gain measured by {newest.source} at {newest.measured_at} (mean acceptance length "
           f"{newest.mean_acceptance_length:.2f})")
    if floor > half:
        why += f", raised to the break-even length {floor:.2f}"
    return AcceptanceFloor(value=floor, kind="measured", source=why,
                           short=f"half the gain of {newest.mean_acceptance_length:.2f} measured")


class AcceptanceAlarm(BaseModel):
    """The metric filters and the alarm of one endpoint (or its inference component) at one K: the requests, as sent."""

    model_config = ConfigDict(frozen=True)

    owner: str = Field(description="the endpoint, or the inference component whose log group it is")
    log_group: str
    k: int
    mode: str
    floor: AcceptanceFloor
    alarm_name: str
    put_metric_filters: list[dict[str, Any]]
    put_metric_alarm: dict[str, Any]

    def describe(self) -> str:
        """One line: what fires it, the floor and its source in short."""
        return (f"{self.alarm_name}: vLLM's mean acceptance length at K={self.k} below {self.floor.value:.2f} "
                f"({self.floor.kind}: {self.floor.short}) for {EVALUATION_PERIODS * PERIOD_S // 60} minutes with "
                f"traffic, from its SpecDecoding lines in {self.log_group}")

    def writes(self) -> list[str]:
        return [*(f"PutMetricFilter {body['filterName']} on {body['logGroupName']}" for body in self.put_metric_filters),
                f"PutMetricAlarm {self.alarm_name} (mean acceptance length < {self.floor.value:.2f} for "
                f"{EVALUATION_PERIODS} min; floor: {self.floor.kind})"]


def alarm_body(owner: str, k: int, mode: str, floor: AcceptanceFloor, tags: dict[str, str]) -> dict[str, Any]:
    """PutMetricAlarm: 1 + K * accepted / drafted per minute, below the floor for EVALUATION_PERIODS minutes in a row.
    A minute without SpecDecoding lines (no traffic: vLLM logs nothing without drafts) is missing data, neither good
    nor bad; the alarm has no action of its own (an update names it as a rollback alarm, you may add one)."""
    stats = [{"Id": value, "ReturnData": False, "MetricStat": {
        "Metric": {"Namespace": NAMESPACE, "MetricName": metric_name(owner, k, value)}, "Period": PERIOD_S,
        "Stat": "Sum"}} for value in ("accepted", "drafted")]
    return {
        "AlarmName": alarm_name(owner),
        "AlarmDescription": (f"peagle: vLLM's mean acceptance length on {owner} ({mode} K={k}) below {floor.value:.2f} "
                             f"for {EVALUATION_PERIODS} minutes: speculation no longer pays. Floor: {floor.source}")[:1024],
        "ActionsEnabled": True,
        "Metrics": [*stats, {"Id": "length", "Expression": f"1 + {k} * accepted / drafted",
                             "Label": "mean acceptance length (1 + K * accepted / drafted)", "ReturnData": True}],
        "EvaluationPeriods": EVALUATION_PERIODS, "DatapointsToAlarm": EVALUATION_PERIODS,
        "Threshold": floor.value, "ComparisonOperator": "LessThanThreshold", "TreatMissingData": "missing",
        "Tags": [{"Key": key, "Value": value} for key, value in tags.items()],
    }


def filter_bodies(owner: str, log_group: str, k: int) -> list[dict[str, Any]]:
    return [{"logGroupName": log_group, "filterName": filter_name(owner, k, value), "filterPattern": filter_pattern(k),
             "metricTransformations": [{"metricName": metric_name(owner, k, value), "metricNamespace": NAMESPACE,
                                        "metricValue": f"${value}", "unit": "Count"}]}
            for value in ("accepted", "drafted")]


def plan_alarm(request: AcceptanceRequest | None, *, owner: str, log_group: str, k: int | None, mode: str,
               tags: dict[str, str], model: tuple[str, ...] = ()) -> tuple[AcceptanceAlarm | None, list[str]]:
    """The alarm for one endpoint's plan, and the plan's note on it (None with --no-acceptance-alarm, without
    speculation, or when nobody asked: a sweep's endpoints)."""
    if request is None:
        return None, []
    if not request.enabled:
        why = request.off_because or "--no-acceptance-alarm"
        return None, [f"no acceptance alarm ({why}): nothing watches vLLM's acceptance once it serves"]
    if mode == "off" or not k:
        return None, ["no acceptance alarm: speculation is off, vLLM drafts nothing"]
    floor = choose_floor(request, k=k, mode=mode, model=model)
    alarm = AcceptanceAlarm(owner=owner, log_group=log_group, k=k, mode=mode, floor=floor, alarm_name=alarm_name(owner),
                            put_metric_filters=filter_bodies(owner, log_group, k),
                            put_metric_alarm=alarm_body(owner, k, mode, floor, tags))
    return alarm, [f"acceptance alarm {alarm.describe()}; created once the endpoint is InService and verified "
                   "(docs/monitoring.md)"]


def parse_floor_number(text: str) -> float | None:
    """--acceptance-floor as a number (None: not a number, so a results path); refused outside (1, 1000)."""
    try:
        value = float(text)
    except ValueError:
        return None
    if not math.isfinite(value) or not 1 < value < 1000:
        raise UsageError(f"--acceptance-floor {text} is not a mean acceptance length above 1",
                         "pass e.g. --acceptance-floor 1.5 (1 would mean no draft token is ever accepted)")
    return value


def mean_length(k: int, accepted: float, drafted: float) -> float | None:
    """vLLM's mean acceptance length from token counts at K (see the module docstring); None without drafts."""
    return 1 + k * accepted / drafted if drafted > 0 else None
