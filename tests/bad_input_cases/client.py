"""Bad inputs to invoke, bench and metrics (issues 11 and 12): one stderr line naming the fix, the README's exit
code, no AWS write. Format: see HELPERS.md (the harness in tests/test_bad_inputs_table.py runs the installed
`peagle`). Port 9 on loopback (discard) has nothing listening in the test environment."""

CASES = [
    # one target rule for every command
    dict(id="invoke-port-out-of-range", argv=["invoke", "http://127.0.0.1:99999", "hi"], exit=2,
         stderr=r"^error: the port in 'http://127\.0\.0\.1:99999' is not a number from 1 to 65535"),
    dict(id="bench-port-out-of-range", argv=["bench", "http://127.0.0.1:99999"], exit=2,
         stderr=r"^error: the port in 'http://127\.0\.0\.1:99999' is not a number from 1 to 65535"),
    dict(id="metrics-port-out-of-range", argv=["metrics", "http://127.0.0.1:99999"], exit=2,
         stderr=r"not a number from 1 to 65535"),
    dict(id="invoke-port-word", argv=["invoke", "http://127.0.0.1:http", "hi"], exit=2,
         stderr=r"is not a number from 1 to 65535"),
    dict(id="invoke-url-no-host", argv=["invoke", "http://:8080", "hi"], exit=2, stderr=r"has no host"),
    dict(id="invoke-ftp-url", argv=["invoke", "ftp://h/x", "hi"], exit=2, stderr=r"unsupported target URL"),
    dict(id="bench-bad-endpoint-name", argv=["bench", "my_endpoint!"], exit=2,
         stderr=r"neither a URL nor a SageMaker endpoint name"),
    dict(id="invoke-long-endpoint-name", argv=["invoke", "e" * 64, "hi"], exit=2,
         stderr=r"neither a URL nor a SageMaker endpoint name"),
    dict(id="invoke-kind-unknown", argv=["invoke", "http://127.0.0.1:9", "hi", "--target-kind", "grpc"], exit=2,
         stderr=r"unknown target kind 'grpc'"),
    dict(id="invoke-kind-sagemaker-url", argv=["invoke", "http://127.0.0.1:9", "hi", "--target-kind", "sagemaker"],
         exit=2, stderr=r"--target-kind sagemaker needs an endpoint name"),
    dict(id="invoke-url-with-query", argv=["invoke", "http://127.0.0.1:9/v1?x=1", "hi"], exit=2,
         stderr=r"has a query or fragment"),
    # payloads
    dict(id="invoke-binary-payload", argv=["invoke", "http://127.0.0.1:9", "--payload", "/bin/sh"], exit=2,
         stderr=r"--payload /bin/sh is not UTF-8 text"),
    dict(id="invoke-payload-directory", argv=["invoke", "http://127.0.0.1:9", "--payload", "/"], exit=2,
         stderr=r"cannot read --payload /"),
    dict(id="invoke-timeout-zero", argv=["invoke", "http://127.0.0.1:9", "hi", "--timeout", "0"], exit=2,
         stderr=r"--timeout must be at least 1 and at most 86400 seconds, got 0"),
    # bench: fail before measuring
    dict(id="bench-out-unwritable", argv=["bench", "http://127.0.0.1:9", "-n", "1", "--out", "/proc/peagle-out"],
         exit=2, stderr=r"--out /proc/peagle-out is not a writable folder .*: pass a folder you can write to$"),
    dict(id="bench-out-is-a-file", argv=["bench", "http://127.0.0.1:9", "-n", "1", "--out", "/etc/hostname"],
         exit=2, stderr=r"is a file, not a folder"),
    dict(id="bench-dead-target", argv=["bench", "http://127.0.0.1:9", "-n", "1", "--out", "/tmp/peagle-bench-dead"],
         exit=6, stderr=r"^error: cannot reach http://127\.0\.0\.1:9 \(connection refused\): start the server"),
    dict(id="bench-dataset-not-jsonl", argv=["bench", "http://127.0.0.1:9", "-d", "/etc/hostname"], exit=2,
         stderr=r"hostname line 1 is not valid JSON"),
    dict(id="bench-concurrency-zero", argv=["bench", "http://127.0.0.1:9", "-c", "0"], exit=2,
         stderr=r"--concurrency '0': each must be at least 1 and at most 4096, got 0"),
    # metrics windows
    dict(id="metrics-since-on-url", argv=["metrics", "http://127.0.0.1:9", "--since", "5m"], exit=2,
         stderr=r"use --window 60s"),
    dict(id="metrics-window-on-endpoint", argv=["metrics", "my-endpoint", "--window", "30s"], exit=2,
         stderr=r"--window measures a URL's counters"),
    dict(id="metrics-window-not-a-span", argv=["metrics", "http://127.0.0.1:9", "--window", "soon"], exit=2,
         stderr=r"is not a duration"),
    dict(id="metrics-dead-url", argv=["metrics", "http://127.0.0.1:9", "--window", "0s"], exit=6,
         stderr=r"cannot reach http://127\.0\.0\.1:9/metrics"),
]
