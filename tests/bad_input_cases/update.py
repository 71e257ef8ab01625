"""Bad inputs for `peagle update NAME` (issue 15 item 1): one stderr line naming the fix, exit 2, no AWS write.

The table's emulator holds `someone-elses-endpoint` (not peagle's) and `peagle-autoscaled` (peagle's, seeded by
the harness), so refusals that need a live peagle endpoint are here too.
"""

CASES = [
    dict(id="nothing-to-update", argv=["update", "prod"], exit=2,
         stderr=r"^error: nothing to update: pass --k, --mode, --instance-type, --instance-count or --autoscale$"),
    dict(id="nothing-to-update-json", argv=["update", "prod", "--json"], exit=2, stderr=r"nothing to update"),
    dict(id="k-words", argv=["update", "prod", "--k", "seven"], exit=2,
         stderr=r"--k 'seven' is not a whole number: pass e\.g\. --k 3"),
    dict(id="k-with-mode-off", argv=["update", "prod", "--mode", "off", "--k", "7"], exit=2,
         stderr=r"--k has no effect with --mode off: drop --k"),
    dict(id="mode-unknown", argv=["update", "prod", "--mode", "medusa"], exit=2,
         stderr=r"--mode 'medusa' is not a mode: pass --mode p-eagle, eagle3, dflash or off"),
    dict(id="instance-count-zero", argv=["update", "prod", "--instance-count", "0"], exit=2,
         stderr=r"--instance-count must be at least 1"),
    dict(id="instance-type-not-g7e", argv=["update", "prod", "--instance-type", "ml.m5.large"], exit=2,
         stderr=r"'ml.m5.large' is not an ml.g7e instance: .*--allow-any-instance"),
    dict(id="bake-no-unit", argv=["update", "prod", "--k", "7", "--bake", "300"], exit=2,
         stderr=r"--bake '300' has no unit: add one: 300s$"),
    dict(id="bake-too-long", argv=["update", "prod", "--k", "7", "--bake", "2h"], exit=2,
         stderr=r"--bake '2h' is longer than 1h: pass at most 1h"),
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
         stderr=r"--timeout must be at least 1 and at most 86400 seconds, got 0"),
    dict(id="max-price-zero", argv=["update", "prod", "--k", "7", "--max-price-per-hour", "0"], exit=2,
         stderr=r"--max-price-per-hour must be more than 0 and at most 100000 USD, got 0"),
    dict(id="autoscale-no-target", argv=["update", "prod", "--autoscale", "1:4"], exit=2,
         stderr=r"--autoscale needs a target"),
    dict(id="autoscale-min-above-max", argv=["update", "prod", "--autoscale", "4:1", "--target-concurrency", "8"],
         exit=2, stderr=r"has its minimum above its maximum"),
    dict(id="target-without-autoscale", argv=["update", "prod", "--target-concurrency", "8"], exit=2,
         stderr=r"--target-concurrency only applies with --autoscale"),
    dict(id="missing-endpoint", argv=["update", "no-such-endpoint", "--k", "7", "--yes"], exit=2,
         stderr=r"^error: no endpoint named 'no-such-endpoint' in us-east-1: check the name and --region"),
    dict(id="unmanaged-endpoint", argv=["update", "someone-elses-endpoint", "--k", "7", "--yes"], exit=2,
         stderr=r"^error: endpoint 'someone-elses-endpoint' was not created by peagle: peagle only updates "
                r"endpoints it created"),
    dict(id="unmanaged-endpoint-dry-run-json", argv=["update", "someone-elses-endpoint", "--k", "7", "--dry-run",
                                                     "--json"], exit=2, stderr=r"was not created by peagle"),
]

# issue 23: the classes of the new-user round. `peagle-autoscaled` is a peagle endpoint the table seeds
# (qwen3-coder, P-EAGLE K=3, 1 x ml.g7e.2xlarge, autoscaled 1:4 on concurrency 8); none of these changes it.
EP = ["update", "peagle-autoscaled"]

CASES += [
    # documented but refused, refused but documented: deploy's rules on the live endpoint
    dict(id="count-outside-live-autoscaling", argv=[*EP, "--instance-count", "9", "--dry-run"], exit=2,
         stderr=r"^error: --instance-count 9 is outside the endpoint's autoscaling 1:4: pass --instance-count between "
                r"1 and 4, or widen the range with it: --autoscale 1:9 --target-concurrency 8$"),
    dict(id="count-outside-live-autoscaling-real", argv=[*EP, "--instance-count", "9", "--yes"], exit=2,
         stderr=r"is outside the endpoint's autoscaling 1:4"),
    dict(id="count-outside-new-autoscaling", argv=[*EP, "--instance-count", "9", "--autoscale", "1:4",
                                                   "--target-concurrency", "8"], exit=2,
         stderr=r"--instance-count 9 is outside --autoscale 1:4"),
    dict(id="autoscale-unchanged", argv=[*EP, "--autoscale", "1:4", "--target-concurrency", "8", "--dry-run"],
         exit=2, stderr=r"already autoscales 1-4 instances, target 8 .*: nothing to update; pass another --autoscale"),
    dict(id="autoscale-only-not-peagles", argv=["update", "someone-elses-endpoint", "--autoscale", "2:3",
                                                "--target-concurrency", "4", "--yes"], exit=2,
         stderr=r"was not created by peagle"),
    dict(id="autoscale-only-missing", argv=["update", "no-such-endpoint", "--autoscale", "2:3",
                                            "--target-concurrency", "4", "--dry-run"], exit=2,
         stderr=r"no endpoint named 'no-such-endpoint'"),
    dict(id="nothing-changes", argv=[*EP, "--k", "3", "--yes"], exit=2,
         stderr=r"already serves K=3, 1 x ml\.g7e\.2xlarge: nothing to update"),
    dict(id="k-deeper-than-drafter", argv=[*EP, "--k", "20", "--dry-run"], exit=2,
         stderr=r"--k 20 is deeper than the qwen3-coder drafter was trained for \(18\): pass --k 1\.\.18"),
    dict(id="instance-type-not-in-spec", argv=[*EP, "--instance-type", "ml.g7e.99xlarge", "--dry-run"], exit=2,
         stderr=r"does not support ml\.g7e\.99xlarge"),
    dict(id="alarm-missing", argv=[*EP, "--k", "4", "--rollback-alarm", "nope", "--yes"], exit=2,
         stderr=r"CloudWatch alarm 'nope' does not exist"),
    # hints that work: the K bound every command shares, NAME (update has no --name)
    dict(id="k-zero-hint", argv=["update", "prod", "--k", "0"], exit=2,
         stderr=r"--k must be at least 1, got 0: pass --k 1 or more, or --mode off"),
    # the bound is the endpoint's drafter's (qwen3-coder's: 18), read from it: its hint is a K that works (issue 49)
    dict(id="k-above-the-drafter", argv=["update", "peagle-autoscaled", "--k", "40", "--dry-run"], exit=2,
         stderr=r"--k 40 is deeper than the qwen3-coder drafter was trained for \(18\): pass --k 1\.\.18$"),
    dict(id="k-float-text", argv=["update", "prod", "--k", "1e3"], exit=2, stderr=r"--k '1e3' is not a whole number: pass e\.g\. --k 3"),
    dict(id="name-empty", argv=["update", "", "--k", "4"], exit=2,
         stderr=r"^error: NAME is empty: pass the endpoint's name \(peagle status lists peagle's endpoints\)$"),
    dict(id="name-too-long", argv=["update", "a" * 64, "--k", "4"], exit=2,
         stderr=r"is 64 characters; SageMaker allows 63: pass the endpoint's name"),
    dict(id="bake-no-unit-within-bounds", argv=["update", "prod", "--k", "4", "--bake", "90"], exit=2,
         stderr=r"--bake '90' has no unit: add one: 90s$"),
    dict(id="bake-overflow", argv=["update", "prod", "--k", "4", "--bake", "99999999999999999999999999d"], exit=2,
         stderr=r"is longer than 1h"),
    # numbers: one bound per flag, the same as deploy's
    dict(id="target-concurrency-huge", argv=[*EP, "--autoscale", "1:4", "--target-concurrency", "1e9"], exit=2,
         stderr=r"--target-concurrency must be more than 0 and at most 4096 concurrent requests per instance, got 1e\+09"),
    dict(id="target-concurrency-inf", argv=[*EP, "--autoscale", "1:4", "--target-concurrency", "inf"], exit=2,
         stderr=r"got inf"),
    dict(id="target-invocations-nan", argv=[*EP, "--autoscale", "1:4", "--target-invocations", "nan"], exit=2,
         stderr=r"--target-invocations must be .* got nan"),
    dict(id="instance-count-above-limit", argv=["update", "prod", "--instance-count", "101"], exit=2,
         stderr=r"--instance-count must be at least 1 and at most 100, got 101"),
    dict(id="max-price-inf", argv=["update", "prod", "--k", "4", "--max-price-per-hour", "inf"], exit=2,
         stderr=r"--max-price-per-hour must be more than 0 and at most 100000 USD, got inf"),
    dict(id="timeout-huge-json", argv=["update", "prod", "--k", "4", "--timeout", "99999999", "--json"], exit=2,
         stderr=r"--timeout must be at least 1 and at most 86400 seconds"),
    # flags that agree: the one mode parser (P-EAGLE and EAGLE-3 work as for deploy); refusals still refuse
    dict(id="mode-spelled-off-with-k", argv=["update", "prod", "--mode", "OFF", "--k", "3"], exit=2,
         stderr=r"--mode 'OFF' is not a mode: pass --mode off and drop --k \(off drafts nothing, so it takes no K\)$"),
]

# a pasted name with its line break: refused before AWS (a regex's $ matches before a final newline; \Z does not)
CASES += [
    dict(id="name-trailing-newline", argv=["update", "prod\n", "--k", "4"], exit=2,
         stderr=r"name 'prod\\n' breaks SageMaker's naming rules"),
]
