"""Bad inputs for `peagle update NAME` (issue 15 item 1): one stderr line naming the fix, exit 2, no AWS write.

Cases that need a peagle endpoint to exist (a K deeper than the drafter, nothing to change, a missing rollback
alarm) are in tests/test_update_units.py and tests/test_update_cli.py; this table's emulator holds only
`someone-elses-endpoint` (not peagle's).
"""

CASES = [
    dict(id="nothing-to-update", argv=["update", "prod"], exit=2,
         stderr=r"^error: nothing to update: pass --k, --mode, --instance-type or --instance-count$"),
    dict(id="nothing-to-update-json", argv=["update", "prod", "--json"], exit=2, stderr=r"nothing to update"),
    dict(id="k-zero", argv=["update", "prod", "--k", "0"], exit=2, stderr=r"--k must be at least 1, got 0"),
    dict(id="k-words", argv=["update", "prod", "--k", "seven"], exit=2,
         stderr=r"--k must be a whole number, got 'seven'"),
    dict(id="k-with-mode-off", argv=["update", "prod", "--mode", "off", "--k", "7"], exit=2,
         stderr=r"--k has no effect with --mode off: drop --k"),
    dict(id="mode-unknown", argv=["update", "prod", "--mode", "medusa"], exit=2,
         stderr=r"unknown mode 'medusa': use one of p-eagle, eagle3, off"),
    dict(id="instance-count-zero", argv=["update", "prod", "--instance-count", "0"], exit=2,
         stderr=r"--instance-count must be at least 1"),
    dict(id="instance-type-not-g7e", argv=["update", "prod", "--instance-type", "ml.m5.large"], exit=2,
         stderr=r"'ml.m5.large' is not an ml.g7e instance: .*--allow-any-instance"),
    dict(id="bake-no-unit", argv=["update", "prod", "--k", "7", "--bake", "300"], exit=2,
         stderr=r"--bake '300' has no unit: add one: 300s, 300m or 300h"),
    dict(id="bake-too-long", argv=["update", "prod", "--k", "7", "--bake", "2h"], exit=2,
         stderr=r"--bake '2h' is longer than 1h00m"),
    dict(id="bake-negative", argv=["update", "prod", "--k", "7", "--bake=-5m"], exit=2,
         stderr=r"--bake '-5m' is not a duration"),
    dict(id="alarm-twice", argv=["update", "prod", "--k", "7", "--rollback-alarm", "a", "--rollback-alarm", "a"],
         exit=2, stderr=r"a --rollback-alarm is given twice: pass each alarm once"),
    dict(id="alarm-empty", argv=["update", "prod", "--k", "7", "--rollback-alarm", ""], exit=2,
         stderr=r"--rollback-alarm '' is not a CloudWatch alarm name"),
    dict(id="alarms-too-many", argv=["update", "prod", "--k", "7",
                                     *[arg for i in range(11) for arg in ("--rollback-alarm", f"a{i}")]],
         exit=2, stderr=r"11 --rollback-alarm options; SageMaker allows 10"),
    dict(id="name-invalid", argv=["update", "bad_name!", "--k", "7"], exit=2,
         stderr=r"'bad_name!' breaks SageMaker's naming rules"),
    dict(id="timeout-zero", argv=["update", "prod", "--k", "7", "--timeout", "0"], exit=2,
         stderr=r"--timeout must be positive"),
    dict(id="max-price-zero", argv=["update", "prod", "--k", "7", "--max-price-per-hour", "0"], exit=2,
         stderr=r"--max-price-per-hour must be positive"),
    dict(id="missing-endpoint", argv=["update", "no-such-endpoint", "--k", "7", "--yes"], exit=2,
         stderr=r"^error: no endpoint named 'no-such-endpoint' in us-east-1: check the name and --region"),
    dict(id="unmanaged-endpoint", argv=["update", "someone-elses-endpoint", "--k", "7", "--yes"], exit=2,
         stderr=r"^error: endpoint 'someone-elses-endpoint' was not created by peagle: peagle only updates "
                r"endpoints it created"),
    dict(id="unmanaged-endpoint-dry-run-json", argv=["update", "someone-elses-endpoint", "--k", "7", "--dry-run",
                                                     "--json"], exit=2, stderr=r"was not created by peagle"),
]
