"""The acceptance alarm as planned (acceptance_alarm.py): its filter pattern against vLLM's own lines, the mean
acceptance length it computes against the one vLLM logs, its floor and where it comes from, its requests against
botocore's models, and the options that ask for it. No AWS: the emulator's matcher (acceptance_emulation.match) is
the model of CloudWatch Logs' space-delimited patterns."""

from __future__ import annotations

import inspect
import json
from pathlib import Path

import pytest

from peagle_deploy import acceptance_alarm as aa
from peagle_deploy.bench.acceptance import parse_log_line
from peagle_deploy.errors import UsageError
from peagle_deploy.log_groups import endpoint_log_group
from peagle_deploy.testing.acceptance_emulation import match, tokens
from tests.aws_shapes import assert_valid_request
from tests.cli_runner import run_cli

FIXTURES = Path(__file__).parent / "fixtures"
FORMAT = ("SpecDecoding metrics: Mean acceptance length: %.2f, Accepted throughput: %.2f tokens/s, "
          "Drafted throughput: %.2f tokens/s, Accepted: %d tokens, Drafted: %d tokens, "
          "Per-position acceptance rate: %s, Avg Draft acceptance rate: %.1f%%")  # vllm/v1/spec_decode/metrics.py


def vllm_line(drafts: int, accepted_per_position: list[int], prefix: str) -> str:
    """vLLM's line as its logger writes it (`SpecDecodingLogging.log`, 0.28.0 and 0.32.0 alike)."""
    k, accepted = len(accepted_per_position), sum(accepted_per_position)
    rates = ", ".join(f"{a / drafts:.3f}" for a in accepted_per_position)
    return prefix + FORMAT % (1 + accepted / drafts, accepted / 10, drafts * k / 10, accepted, drafts * k, rates,
                              accepted / (drafts * k) * 100)


PREFIXES = ["(APIServer pid=14477) INFO 11-22 17:04:10 [metrics.py:120] ",  # vllm serve, 0.2x-0.3x
            "INFO 11-22 10:15:03 [metrics.py:94] ",  # without the API server's process prefix
            "INFO [metrics.py:96] ",  # as the emulator's stand-ins write it
            "[INFO] 2026-12-01T10:00:00Z model_server: "]  # a wrapper's own prefix (an image's launcher)


@pytest.mark.parametrize("prefix", PREFIXES)
@pytest.mark.parametrize("k", [1, 3, 7, 10])
def test_the_pattern_of_k_reads_the_counts_of_vllms_line_at_k_behind_any_prefix(prefix, k):
    line = vllm_line(400, [400 - 30 * i for i in range(k)], prefix)
    fields = match(aa.filter_pattern(k), line)
    assert fields is not None
    assert (float(fields["accepted"]), float(fields["drafted"])) == (sum(400 - 30 * i for i in range(k)), 400 * k)
    logged = parse_log_line(line)
    # vLLM's own mean acceptance length (1 + accepted / drafts) is what the alarm's metric math computes
    assert aa.mean_length(k, float(fields["accepted"]), float(fields["drafted"])) == pytest.approx(
        logged.mean_acceptance_length, abs=0.005)
    for other in {k - 1, k + 1} - {0}:  # a line of another K never feeds K's metrics
        assert match(aa.filter_pattern(other), line) is None


def test_the_pattern_reads_the_real_vllm_032_log_and_nothing_else_in_it():
    lines = (FIXTURES / "vllm_logs" / "0.32.0-cpu-p-eagle-start.log").read_text().splitlines()
    matched = [(line, match(aa.filter_pattern(3), line)) for line in lines]
    found = [(f["accepted"], f["drafted"]) for _, f in matched if f is not None]
    assert found == [("60", "60"), ("30", "30")]  # the two SpecDecoding lines, nothing else of ~150
    for line, fields in matched:
        if fields is not None:  # K=3 at 100% acceptance: vLLM logged 4.00, the metric math says the same
            assert aa.mean_length(3, float(fields["accepted"]), float(fields["drafted"])) == \
                parse_log_line(line).mean_acceptance_length == 4.0


def test_the_metric_math_is_vllms_definition_and_never_below_it():
    """1 + K * accepted / drafted = 1 + accepted / drafts when every draft has K tokens; a draft vLLM trims (fewer
    tokens) makes drafted / K fewer than the drafts, so the figure is at least vLLM's: the alarm never fires early."""
    assert aa.mean_length(3, 2110, 3000) == pytest.approx(1 + 2110 / 1000)
    assert aa.mean_length(3, 0, 3000) == 1.0
    assert aa.mean_length(3, 10, 0) is None
    drafts, drafted = 1000, 2900  # 100 drafts trimmed to 2 tokens
    assert aa.mean_length(3, 1500, drafted) >= 1 + 1500 / drafts


def test_tokens_group_brackets_and_quotes_as_cloudwatch_does():
    assert tokens('a [b c] "d e" f') == ["a", "[b c]", '"d e"', "f"]


def test_the_default_floor_is_the_advisors_break_even_length():
    params = inspect.signature(__import__("peagle_deploy.bench.advisor", fromlist=["advise"]).advise).parameters
    assert (aa.VERIFY_COST, aa.DRAFT_COST) == (params["verify_cost"].default, params["draft_cost"].default)
    assert [aa.break_even(k, "p-eagle") for k in (1, 3, 5, 7)] == [1.08, 1.12, 1.16, 1.2]
    assert aa.break_even(3, "eagle3") == 1.24  # K drafter passes
    floor = aa.default_floor(3, "p-eagle")
    assert (floor.value, floor.kind) == (1.12, "default") and "break-even" in floor.source


def measured(length: float, k: int = 3, mode: str = "p-eagle", at: str = "2026-11-30T10:00:00+00:00",
             source: str = "bench-a.json") -> aa.MeasuredAcceptance:
    return aa.MeasuredAcceptance(mean_acceptance_length=length, mode=mode, k=k, model="qwen3-coder",
                                 measured_at=at, source=source)


def test_a_measured_floor_is_half_the_newest_gain_of_the_same_configuration_never_under_break_even():
    request = aa.AcceptanceRequest(measured_from="results/", measured=[
        measured(3.0, at="2026-11-30T10:00:00+00:00", source="old.json"),
        measured(2.6, at="2026-12-01T10:00:00+00:00", source="new.json"),
        measured(4.0, k=5, at="2026-12-02T10:00:00+00:00"), measured(4.0, mode="eagle3")])
    floor = aa.choose_floor(request, k=3, mode="p-eagle", model=("qwen3-coder",))
    assert (floor.value, floor.kind) == (1.8, "measured") and "new.json" in floor.source
    low = aa.choose_floor(aa.AcceptanceRequest(measured_from="r", measured=[measured(1.1)]), k=3, mode="p-eagle")
    assert low.value == 1.12 and "raised to the break-even" in low.source
    with pytest.raises(UsageError, match="no bench or sweep result of p-eagle K=7 .*p-eagle K=3"):
        aa.choose_floor(request, k=7, mode="p-eagle")
    given = aa.choose_floor(aa.AcceptanceRequest(floor=1.5), k=3, mode="p-eagle")
    assert (given.value, given.kind, given.source) == (1.5, "given", "--acceptance-floor 1.5")


def test_no_alarm_without_speculation_or_when_asked_none():
    common = {"owner": "ep", "log_group": "/aws/sagemaker/Endpoints/ep", "tags": {}}
    assert aa.plan_alarm(None, k=3, mode="p-eagle", **common) == (None, [])
    off, notes = aa.plan_alarm(aa.AcceptanceRequest(), k=None, mode="off", **common)
    assert off is None and "speculation is off" in notes[0]
    skipped, notes = aa.plan_alarm(aa.AcceptanceRequest(enabled=False), k=3, mode="p-eagle", **common)
    assert skipped is None and "--no-acceptance-alarm" in notes[0]


@pytest.mark.parametrize("k", [1, 3, 18])
def test_every_request_is_valid_for_botocores_models(k):
    tags = {"peagle:managed": "true", "peagle:endpoint": "ep-" + "x" * 55, "team": "ml"}
    alarm, _ = aa.plan_alarm(aa.AcceptanceRequest(), owner="ep-" + "x" * 60, log_group=endpoint_log_group("ep"),
                             k=k, mode="eagle3", tags=tags)
    for body in alarm.put_metric_filters:
        assert_valid_request("logs", "PutMetricFilter", body)
    assert_valid_request("cloudwatch", "PutMetricAlarm", alarm.put_metric_alarm)
    assert aa.k_of_filter(alarm.put_metric_filters[0]["filterName"]) == k


def test_the_dry_run_says_the_alarm_its_floor_and_its_source(no_aws):
    done = run_cli("deploy", "qwen3-coder", "--dry-run", "--name", "ep", "--json")
    assert done.code == 0, done.stderr
    plan = json.loads(done.stdout)["plan"]
    alarm = plan["acceptance_alarm"]
    assert alarm["alarm_name"] == "peagle-acceptance-ep" and alarm["floor"]["value"] == 1.12
    assert [m.get("Expression") for m in alarm["put_metric_alarm"]["Metrics"]][-1] == "1 + 3 * accepted / drafted"
    assert any(n.startswith("acceptance alarm peagle-acceptance-ep") for n in plan["notes"])
    human = run_cli("deploy", "qwen3-coder", "--dry-run", "--name", "ep", "--acceptance-floor", "1.6")
    assert human.code == 0 and "PutMetricAlarm peagle-acceptance-ep: 1 + 3 * accepted / drafted < 1.60" in human.stdout
    assert "given: --acceptance-floor 1.6" in human.stdout
    off = json.loads(run_cli("deploy", "qwen3-coder", "--dry-run", "--name", "ep", "--json",
                             "--no-acceptance-alarm").stdout)["plan"]
    assert off["acceptance_alarm"] is None and any("--no-acceptance-alarm" in n for n in off["notes"])


def test_a_bench_result_sets_the_floor(no_aws, tmp_path):
    result = {"schema_version": 1, "tool_version": "0.1.0", "started_at": "2026-11-30T10:00:00Z",
              "finished_at": "2026-11-30T10:05:00Z",
              "target": {"kind": "sagemaker", "name": "ep", "model": "qwen3-coder", "mode": "p-eagle", "k": 3},
              "settings": {"dataset": "humaneval", "dataset_source": "x", "num_prompts_in_dataset": 1, "max_tokens": 8,
                           "temperature": 0.0, "warmup": 0, "duration_s": None, "num_prompts": 1},
              "levels": [], "acceptance": {"source": "CloudWatch", "mean_acceptance_length": 2.5}}
    (tmp_path / "runs").mkdir()
    (tmp_path / "runs" / "bench-p-eagle-K3-20261130T100000.000Z.json").write_text(json.dumps(result))
    done = run_cli("deploy", "qwen3-coder", "--dry-run", "--name", "ep", "--json", "--acceptance-floor",
                   str(tmp_path))
    assert done.code == 0, done.stderr
    floor = json.loads(done.stdout)["plan"]["acceptance_alarm"]["floor"]
    assert (floor["value"], floor["kind"]) == (1.75, "measured") and "bench-p-eagle-K3" in floor["source"]
    other_k = run_cli("deploy", "qwen3-coder", "--dry-run", "--name", "ep", "--k", "5", "--acceptance-floor",
                      str(tmp_path))
    assert other_k.code == 2 and "no bench or sweep result of p-eagle K=5 (p-eagle K=3)" in other_k.stderr


@pytest.mark.parametrize("argv, said", [
    (["--acceptance-floor", "0.9"], "--acceptance-floor 0.9 is not a mean acceptance length above 1"),
    (["--acceptance-floor", "nan"], "is not a mean acceptance length above 1"),
    (["--acceptance-floor", "no/such/results"], "is neither a number nor a file or folder"),
    (["--acceptance-floor", "1.5", "--no-acceptance-alarm"], "--acceptance-floor has no effect with "
                                                             "--no-acceptance-alarm"),
])
def test_bad_floors_are_refused_in_one_line(no_aws, argv, said):
    done = run_cli("deploy", "qwen3-coder", "--dry-run", "--name", "ep", *argv)
    assert done.code == 2 and said in done.stderr and "Traceback" not in done.stderr
