"""Bad inputs for instance pools and capacity reservations (issue 36): `--instance-type A,B`, `--provision-timeout`,
`--capacity-reservation` and its preference. One stderr line naming the fix, exit 2, no AWS write.

Format: see the harness (tests/test_bad_inputs_table.py).
"""

DRY = ["deploy", "qwen3-coder", "--dry-run"]
REAL = ["deploy", "qwen3-coder", "--role", "{role}", "--yes"]
POOLS = ["--instance-type", "ml.g7e.2xlarge,ml.g7e.4xlarge"]
ARN = "arn:aws:sagemaker:us-east-1:123456789012:ml-reservation/team-a"

CASES = [
    dict(id="empty-entry", argv=[*REAL, "--instance-type", "ml.g7e.2xlarge,,ml.g7e.4xlarge"], exit=2,
         stderr=r"^error: --instance-type 'ml\.g7e\.2xlarge,,ml\.g7e\.4xlarge' has an empty entry: pass "
                r"--instance-type ml\.g7e\.2xlarge,ml\.g7e\.4xlarge"),
    dict(id="listed-twice", argv=[*DRY, "--instance-type", "ml.g7e.2xlarge,ml.g7e.2xlarge"], exit=2,
         stderr=r"--instance-type lists ml\.g7e\.2xlarge twice: list each instance type once"),
    dict(id="six-pools", argv=[*DRY, "--instance-type", ",".join(f"ml.g7e.{s}xlarge" for s in (2, 4, 8, 12, 24, 48))],
         exit=2, stderr=r"--instance-type lists 6 instance types; SageMaker takes at most 5 pools"),
    dict(id="pool-not-g7e", argv=[*REAL, "--instance-type", "ml.g7e.2xlarge,ml.m5.large"], exit=2,
         stderr=r"'ml\.m5\.large' is not an ml\.g7e instance: .*--allow-any-instance"),
    dict(id="pool-upper-case", argv=[*DRY, "--instance-type", "ml.g7e.2xlarge,ML.G7E.4XLARGE"], exit=2,
         stderr=r"SageMaker's instance types are lower case: pass --instance-type ml\.g7e\.4xlarge"),
    dict(id="timeout-too-short", argv=[*REAL, *POOLS, "--provision-timeout", "60"], exit=2,
         stderr=r"--provision-timeout must be at least 300 and at most 3600 seconds, got 60"),
    dict(id="timeout-one-type", argv=[*DRY, "--provision-timeout", "600"], exit=2,
         stderr=r"--provision-timeout applies to instance pools: drop --provision-timeout, or give --instance-type "
                r"two or more types in priority order \(ml\.g7e\.2xlarge,ml\.g7e\.4xlarge\)$"),
    dict(id="reservation-not-an-arn", argv=[*REAL, "--capacity-reservation", "team-a"], exit=2,
         stderr=r"--capacity-reservation 'team-a' is not an ML capacity reservation ARN"),
    dict(id="reservation-other-region", argv=[*REAL, "--capacity-reservation", ARN.replace("us-east-1", "us-west-2")],
         exit=2, stderr=r"--capacity-reservation is in us-west-2, the deploy in us-east-1: pass --region us-west-2"),
    dict(id="reservation-preference-unknown", argv=[*DRY, "--capacity-reservation", ARN,
                                                    "--capacity-reservation-preference", "reservations-first"],
         exit=2, stderr=r"--capacity-reservation-preference 'reservations-first' is not one SageMaker knows: pass "
                        r"--capacity-reservation-preference capacity-reservations-only$"),
    dict(id="preference-alone", argv=[*DRY, "--capacity-reservation-preference", "capacity-reservations-only"],
         exit=2, stderr=r"--capacity-reservation-preference needs --capacity-reservation"),
    dict(id="pools-with-component", argv=[*DRY, *POOLS, "--scale-to-zero"], exit=2,
         stderr=r"^error: instance pools \(--instance-type A,B\) are for --hosting endpoint; an inference component's "
                r"endpoint runs on one instance type: pass --instance-type ml\.g7e\.2xlarge, or deploy without "
                r"--hosting component and --scale-to-zero$"),
    dict(id="reservation-with-component", argv=[*REAL, "--hosting", "component", "--capacity-reservation", ARN],
         exit=2, stderr=r"^error: --capacity-reservation is for --hosting endpoint; .*: drop --capacity-reservation, "),
    dict(id="sweep-list", argv=["sweep", "qwen3-coder", "--dry-run", *POOLS], exit=2,
         stderr=r"a sweep runs every configuration on one instance type, so its rows compare like with like: pass one "
                r"type, e\.g\. --instance-type ml\.g7e\.2xlarge"),
    dict(id="bench-list", argv=["bench", "http://127.0.0.1:9/v1", *POOLS], exit=2,
         stderr=r"bench prices one instance type: pass the type the server runs on"),
    dict(id="update-listed-twice", argv=["update", "prod", "--instance-type", "ml.g7e.4xlarge,ml.g7e.4xlarge"],
         exit=2, stderr=r"--instance-type lists ml\.g7e\.4xlarge twice"),
]
