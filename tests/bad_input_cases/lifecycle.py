"""Bad inputs for status, cleanup, --ttl/--since (the duration grammar) and a broken AWS environment (issue 11
items 1 and 3, issue 10 item 9): one stderr line naming the fix, the README's exit code, no AWS write.
A missing profile is bad input (2, a name that does not exist); an unreadable config file or an unreachable
AWS is access to AWS (3).

Format: see HELPERS.md (the harness in tests/test_bad_inputs_table.py runs the installed `peagle`).
"""

from pathlib import Path

ROLE = "arn:aws:iam::123456789012:role/SageMakerRole"
MALFORMED_CONFIG = str(Path(__file__).with_name("malformed_aws_config.ini"))
DEAD = {"AWS_ENDPOINT_URL": "http://127.0.0.1:9", "AWS_MAX_ATTEMPTS": "1"}  # port 9 (discard): nothing listens

CASES = [
    # cleanup that would do nothing is not success (issue 11 item 3)
    dict(id="cleanup-no-selector", argv=["cleanup", "--yes"], exit=2,
         stderr=r"^error: cleanup needs exactly one of NAME, --all or --expired"),
    dict(id="cleanup-name-and-all", argv=["cleanup", "x", "--all", "--yes"], exit=2, stderr=r"exactly one of"),
    dict(id="cleanup-all-and-expired", argv=["cleanup", "--all", "--expired", "--yes"], exit=2,
         stderr=r"exactly one of"),
    dict(id="cleanup-invalid-name", argv=["cleanup", "bad_name!", "--yes"], exit=2,
         stderr=r"'bad_name!' breaks SageMaker's naming rules"),
    dict(id="cleanup-name-too-long", argv=["cleanup", "a" * 70, "--yes"], exit=2,
         stderr=r"is 70 characters; SageMaker allows 63"),
    dict(id="cleanup-missing-name", argv=["cleanup", "no-such-endpoint", "--yes"], exit=2,
         stderr=r"^error: no endpoint, endpoint config or model named 'no-such-endpoint' in us-east-1: check the name"),
    dict(id="cleanup-missing-name-json", argv=["cleanup", "no-such-endpoint", "--yes", "--json"], exit=2,
         stderr=r"no endpoint, endpoint config or model named 'no-such-endpoint'"),
    dict(id="cleanup-no-yes-no-terminal", argv=["cleanup", "--all"], exit=2, stderr=r"pass --yes to confirm"),
    # status
    dict(id="status-invalid-name", argv=["status", "bad_name!"], exit=2, stderr=r"breaks SageMaker's naming rules"),
    dict(id="status-missing-name", argv=["status", "no-such-endpoint"], exit=2,
         stderr=r"no endpoint named 'no-such-endpoint' in us-east-1"),
    # the one duration grammar: --ttl and --since
    dict(id="ttl-no-unit", argv=["deploy", "qwen3-coder", "--dry-run", "--ttl", "90"], exit=2,
         stderr=r"^error: --ttl '90' has no unit: add one: 90m or 90h$"),
    dict(id="ttl-words", argv=["deploy", "qwen3-coder", "--dry-run", "--ttl", "soon"], exit=2,
         stderr=r"--ttl 'soon' is not a duration: pass e\.g\. 15m, 2h, 1h30m or 2d"),
    dict(id="ttl-zero", argv=["deploy", "qwen3-coder", "--dry-run", "--ttl", "0m"], exit=2,
         stderr=r"--ttl '0m' is shorter than 15m \(an endpoint takes about 10 minutes to come InService\)"),
    dict(id="ttl-negative", argv=["deploy", "qwen3-coder", "--dry-run", "--ttl=-5m"], exit=2,
         stderr=r"--ttl '-5m' is not a duration"),
    dict(id="ttl-too-long", argv=["deploy", "qwen3-coder", "--dry-run", "--ttl", "31d"], exit=2,
         stderr=r"--ttl '31d' is longer than 30d: pass at most 30d"),
    dict(id="ttl-misordered", argv=["deploy", "qwen3-coder", "--dry-run", "--ttl", "30m1h"], exit=2,
         stderr=r"repeats or misorders its units: write the largest unit first"),
    dict(id="ttl-unknown-unit", argv=["deploy", "qwen3-coder", "--dry-run", "--ttl", "3y"], exit=2,
         stderr=r"unknown unit 'y'"),
    dict(id="since-no-unit", argv=["metrics", "my-endpoint", "--since", "90"], exit=2,
         stderr=r"--since '90' has no unit"),
    dict(id="since-words", argv=["metrics", "my-endpoint", "--since", "yesterday"], exit=2,
         stderr=r"--since 'yesterday' is not a duration"),
    # a broken AWS environment is never exit 1 (issue 11 item 1): 3 for access, 2 for a malformed setting
    dict(id="aws-missing-profile", argv=["status"], env={"AWS_PROFILE": "nope"}, exit=2,
         stderr=r"^error: AWS profile 'nope' \(from AWS_PROFILE\) not found: check --profile or AWS_PROFILE"),
    dict(id="aws-missing-profile-flag", argv=["status", "--profile", "nope"], exit=2,
         stderr=r"AWS profile 'nope' not found: check --profile"),
    dict(id="aws-missing-profile-cleanup", argv=["cleanup", "--all", "--yes"], env={"AWS_PROFILE": "nope"}, exit=2,
         stderr=r"AWS profile 'nope'"),
    dict(id="aws-malformed-config", argv=["status"], env={"AWS_CONFIG_FILE": MALFORMED_CONFIG,
                                                          "AWS_PROFILE": "default"}, exit=3,
         stderr=r"cannot read .*malformed_aws_config\.ini: fix or move that file"),
    dict(id="aws-dead-endpoint-status", argv=["status"], env=DEAD, exit=3,
         stderr=r"could not reach AWS at http://127\.0\.0\.1:9"),
    dict(id="aws-dead-endpoint-cleanup", argv=["cleanup", "--expired", "--yes"], env=DEAD, exit=3,
         stderr=r"could not reach AWS"),
    dict(id="aws-dead-endpoint-deploy", argv=["deploy", "qwen3-coder", "--role", ROLE, "--yes", "--offline"],
         env=DEAD, exit=3, stderr=r"could not reach AWS"),
    dict(id="aws-malformed-endpoint-url", argv=["status"], env={"AWS_ENDPOINT_URL": "not a url"}, exit=2,
         stderr=r"AWS_ENDPOINT_URL must be a URL"),
    dict(id="aws-bad-region-format", argv=["status", "--region", "bad region"], exit=2,
         stderr=r"no usable AWS region .*pass --region"),
]
