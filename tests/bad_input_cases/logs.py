"""Bad inputs for `peagle logs` (issue 15 item 3): one stderr line naming the fix, exit 2, no AWS write.

Format: see HELPERS.md (the harness in tests/test_bad_inputs_table.py runs the installed `peagle`).
"""

CASES = [
    dict(id="logs-invalid-name", argv=["logs", "bad_name!"], exit=2, stderr=r"'bad_name!' breaks SageMaker's naming rules"),
    dict(id="logs-since-no-unit", argv=["logs", "my-endpoint", "--since", "10"], exit=2,
         stderr=r"^error: --since '10' has no unit: add one: 10s, 10m or 10h$"),
    dict(id="logs-grep-empty", argv=["logs", "my-endpoint", "--grep", " "], exit=2, stderr=r"--grep is empty"),
    dict(id="logs-grep-quote", argv=["logs", "my-endpoint", "--grep", 'say "hi"'], exit=2,
         stderr=r"contains a double quote.*leave the quote out"),
    dict(id="logs-follow-json", argv=["logs", "my-endpoint", "--follow", "--json"], exit=2,
         stderr=r"--follow prints lines as they arrive.*drop one of them"),
    dict(id="logs-missing-group", argv=["logs", "never-started-endpoint"], exit=2,
         stderr=r"^error: no CloudWatch log group /aws/sagemaker/Endpoints/never-started-endpoint: .*peagle status"),
]

# issue 23: the classes of the new-user round
CASES += [
    # hints that work: logs has no --name; durations within --since's bound (1s to 365d)
    dict(id="logs-name-empty", argv=["logs", ""], exit=2,
         stderr=r"^error: NAME is empty: pass the endpoint's name \(peagle status lists peagle's endpoints\)$"),
    dict(id="logs-name-too-long", argv=["logs", "a" * 64], exit=2, stderr=r"SageMaker allows 63: pass the endpoint's name"),
    dict(id="logs-since-huge", argv=["logs", "my-endpoint", "--since", "99999999d"], exit=2,
         stderr=r"^error: --since '99999999d' is longer than 365d: pass at most 365d$"),
    dict(id="logs-since-overflow", argv=["logs", "my-endpoint", "--since", "9" * 40 + "w"], exit=2,
         stderr=r"is longer than 365d"),
    dict(id="logs-since-zero", argv=["logs", "my-endpoint", "--since", "0s"], exit=2, stderr=r"--since '0s' is shorter than 1s"),
    dict(id="logs-since-zero-no-unit", argv=["logs", "my-endpoint", "--since", "0"], exit=2,
         stderr=r"--since '0' has no unit: pass a duration from 1s to 365d"),
    dict(id="logs-since-negative", argv=["logs", "my-endpoint", "--since=-5m"], exit=2, stderr=r"--since '-5m' is not a duration"),
    dict(id="logs-since-exponent", argv=["logs", "my-endpoint", "--since", "1e9s"], exit=2, stderr=r"unknown unit 'e'"),
    dict(id="logs-since-misordered", argv=["logs", "my-endpoint", "--since", "5m1h"], exit=2,
         stderr=r"repeats or misorders its units"),
    dict(id="logs-grep-line-break", argv=["logs", "my-endpoint", "--grep", "a\nb"], exit=2,
         stderr=r"has a line break, and a log line has none"),
    dict(id="logs-since-huge-json", argv=["logs", "my-endpoint", "--since", "400d", "--json"], exit=2,
         stderr=r"longer than 365d"),
    dict(id="logs-ascii-terminal", argv=["logs", "caf\u00e9"], env={"PYTHONIOENCODING": "ascii"}, exit=2,
         stderr=r"name 'caf.' breaks SageMaker's naming rules"),
]
