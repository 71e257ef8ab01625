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
