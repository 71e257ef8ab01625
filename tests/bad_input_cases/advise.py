"""Bad inputs for `peagle bench advise` (issue 23): --measured files are read (and refused when they cannot be),
every number has the one bound (peagle_deploy.numbers), modes go through the one parser."""

from datetime import UTC, datetime

from peagle_deploy.bench.acceptance import Acceptance
from peagle_deploy.bench.results import BenchResult, LevelResult, Settings, TargetInfo
from peagle_deploy.bench.stats import Summary


def _result(mode: str, k: int | None, per_position: list[float] | None) -> str:
    when = datetime(2026, 11, 22, 10, 0, tzinfo=UTC)
    level = LevelResult(concurrency=1, window_s=10, completed=10, output_tokens=1000, output_tokens_per_s=100,
                        requests_per_s=1, mean_in_flight=1, concurrency_held=1.0, ttft_ms=Summary(), itl_ms=Summary(),
                        tpot_ms=Summary(), e2e_ms=Summary())
    acceptance = (Acceptance(source="test", k=k, per_position=per_position) if per_position else None)
    return BenchResult(
        tool_version="0", started_at=when, finished_at=when,
        target=TargetInfo(kind="container", name="http://127.0.0.1:9", model="m", mode=mode, k=k, mode_source="flags"),
        settings=Settings(dataset="humaneval", dataset_source="built-in", num_prompts_in_dataset=24, max_tokens=256,
                          temperature=0, warmup=None, duration_s=10, num_prompts=None),
        levels=[level], acceptance=acceptance).model_dump_json()


OFF_RUN = {"off.json": _result("off", None, None)}
PEAGLE_RUN = {"p.json": _result("p-eagle", 3, [0.8, 0.6, 0.4])}
ADVISE = ["bench", "advise"]

CASES = [
    # --measured FILE is read: one line when it cannot be, or holds no acceptance
    dict(id="advise-measured-off-run-only", argv=[*ADVISE, "--measured", "off.json"], files=OFF_RUN, exit=2,
         stderr=r"^error: give a results file, --rates or a --measured run with per-position acceptance: "),
    dict(id="advise-measured-missing", argv=[*ADVISE, "--measured", "gone.json"], exit=2,
         stderr=r"result file gone\.json not found"),
    dict(id="advise-measured-a-folder", argv=[*ADVISE, "--measured", "d"], files={"d": "<dir>"}, exit=2,
         stderr=r"result file d is a directory, not a file"),
    dict(id="advise-measured-a-fifo", argv=[*ADVISE, "--measured", "f"], files={"f": "<fifo>"}, exit=2,
         stderr=r"result file f is a fifo, not a file"),
    dict(id="advise-measured-not-json", argv=[*ADVISE, "--measured", "x.json"], files={"x.json": "{"}, exit=2,
         stderr=r"x\.json is not a JSON results file"),
    dict(id="advise-measured-old-schema", argv=[*ADVISE, "--measured", "x.json"], files={"x.json": '{"schema_version": 0}'},
         exit=2, stderr=r"x\.json has schema_version 0"),
    dict(id="advise-measured-bad-with-rates", argv=[*ADVISE, "--rates", "0.8", "--measured", "gone.json"], exit=2,
         stderr=r"result file gone\.json not found"),
    dict(id="advise-result-a-fifo", argv=[*ADVISE, "f"], files={"f": "<fifo>"}, exit=2, stderr=r"is a fifo, not a file"),
    dict(id="advise-result-without-acceptance", argv=[*ADVISE, "off.json"], files=OFF_RUN, exit=2,
         stderr=r"off\.json has no per-position acceptance"),
    dict(id="advise-result-and-rates", argv=[*ADVISE, "p.json", "--rates", "0.8"], files=PEAGLE_RUN, exit=2,
         stderr=r"give a results file or --rates, not both: drop one of them"),
    # numbers: finite and bounded (--draft-cost inf recommended K=1 at 0.00x)
    dict(id="advise-draft-cost-inf", argv=[*ADVISE, "--measured", "p.json", "--draft-cost", "inf"], files=PEAGLE_RUN,
         exit=2, stderr=r"--draft-cost must be at least 0 and at most 10 target decoding steps, got inf"),
    dict(id="advise-draft-cost-nan", argv=[*ADVISE, "--rates", "0.8", "--draft-cost", "nan"], exit=2, stderr=r"--draft-cost"),
    dict(id="advise-verify-cost-huge", argv=[*ADVISE, "--rates", "0.8", "--verify-cost", "1e9"], exit=2,
         stderr=r"--verify-cost must be at least 0 and at most 10"),
    dict(id="advise-max-k-huge", argv=[*ADVISE, "--rates", "0.8", "--max-k", "99"], exit=2, stderr=r"--max-k"),
    dict(id="advise-rates-inf", argv=[*ADVISE, "--rates", "0.8,inf"], exit=2, stderr=r"acceptance rates must be between 0 and 1"),
    dict(id="advise-rates-nan", argv=[*ADVISE, "--rates", "nan"], exit=2, stderr=r"acceptance rates must be between 0 and 1"),
    dict(id="advise-draft-cost-inf-json", argv=[*ADVISE, "--rates", "0.8", "--draft-cost", "inf", "--json"], exit=2,
         stderr=r"--draft-cost must be"),
    # modes: the one parser (P-EAGLE is accepted); the advisor has no 'off'
    dict(id="advise-mode-typo", argv=[*ADVISE, "--rates", "0.8", "--mode", "p-eagel"], exit=2,
         stderr=r"--mode 'p-eagel' is not a mode: pass --mode p-eagle, eagle3, dflash or off"),
    dict(id="advise-mode-off", argv=[*ADVISE, "--rates", "0.8", "--mode", "off"], exit=2,
         stderr=r"unknown mode 'off' for the advisor: use p-eagle, eagle3 or dflash"),
    dict(id="advise-mode-none-spelling", argv=[*ADVISE, "--rates", "0.8", "--mode", "NONE"], exit=2,
         stderr=r"--mode 'NONE' is not a mode: pass --mode off"),
]
