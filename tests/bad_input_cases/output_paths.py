"""The user's environment and paths are never a bug (issue 23, class 5): an --out that is a file, a file path
below a file, a fifo or folder where a file belongs, malformed URLs, an ASCII-only terminal. Each is one line and
exit 2 (exit 1 says "a bug in peagle"); nothing is written."""

DEAD = "http://127.0.0.1:9"
RESULT = {"r.json": "{}"}

CASES = [
    # --out / --output naming a file, or a path under a file
    dict(id="bench-out-is-a-file", argv=["bench", DEAD, "-n", "1", "--out", "o"], files={"o": "x"}, exit=2,
         stderr=r"^error: --out o is a file, not a folder: pass a folder for --out \(peagle creates it if missing\)"),
    dict(id="bench-out-under-a-file", argv=["bench", DEAD, "-n", "1", "--out", "o/sub"], files={"o": "x"}, exit=2,
         stderr=r"--out o/sub is not a folder \(o is a file\)"),
    dict(id="compare-out-is-a-file", argv=["bench", "compare", "--published", "aws-blog", "--out", "o"],
         files={"o": "x"}, exit=2, stderr=r"--out o is a file, not a folder"),
    dict(id="compare-out-under-a-file-json", argv=["bench", "compare", "--published", "aws-blog", "--out", "o/x",
                                                   "--json"], files={"o": "x"}, exit=2, stderr=r"is not a folder"),
    dict(id="compare-out-is-a-fifo", argv=["bench", "compare", "--published", "aws-blog", "--out", "o"],
         files={"o": "<fifo>"}, exit=2, stderr=r"--out o is a fifo, not a folder"),
    dict(id="sweep-out-is-a-file", argv=["sweep", "m", "--url", f"off={DEAD}", "--out", "o"], files={"o": "x"},
         exit=2, stderr=r"--out o is a file, not a folder"),
    dict(id="container-output-is-a-file", argv=["container", "dockerfile", "--output", "o"], files={"o": "x"},
         exit=2, stderr=r"--output o is a file, not a directory"),
    # files peagle reads: a fifo would block for ever, a folder is no file
    dict(id="compare-result-a-fifo", argv=["bench", "compare", "f"], files={"f": "<fifo>"}, exit=2,
         stderr=r"result file f is a fifo, not a file"),
    dict(id="compare-result-a-folder", argv=["bench", "compare", "d"], files={"d": "<dir>"}, exit=2,
         stderr=r"result file d is a directory, not a file"),
    dict(id="compare-published-a-fifo", argv=["bench", "compare", "--published", "f"], files={"f": "<fifo>"}, exit=2,
         stderr=r"--published f is a fifo, not a file"),
    dict(id="container-env-file-a-fifo", argv=["container", "args", "--env-file", "f"], files={"f": "<fifo>"}, exit=2,
         stderr=r"--env-file f is a fifo, not a file"),
    dict(id="bench-dataset-a-fifo", argv=["bench", DEAD, "--dataset", "f"], files={"f": "<fifo>"}, exit=2,
         stderr=r"dataset 'f' is neither a built-in set nor a file"),
    # malformed URLs: a typo, not a bug
    dict(id="invoke-ipv6-unclosed", argv=["invoke", "http://[::1/v1", "hi"], exit=2,
         stderr=r"^error: target URL 'http://\[::1/v1' is not a valid URL \(Invalid IPv6 URL\): use http://host:port, "
                r"with an IPv6 address in brackets"),
    dict(id="invoke-ipv6-unclosed-json", argv=["invoke", "http://[::1", "hi", "--json"], exit=2,
         stderr=r"is not a valid URL"),
    dict(id="bench-ipv6-unclosed", argv=["bench", "http://[::1/v1", "-n", "1"], exit=2, stderr=r"is not a valid URL"),
    dict(id="metrics-ipv6-unclosed", argv=["metrics", "http://[fe80::1"], exit=2, stderr=r"is not a valid URL"),
    dict(id="invoke-port-not-a-number", argv=["invoke", "http://127.0.0.1:x/v1", "hi"], exit=2,
         stderr=r"the port in 'http://127\.0\.0\.1:x/v1' is not a number"),
    # an ASCII-only terminal: the error line (with '?' for what it cannot show), exit 2 not 1
    dict(id="ascii-unknown-model", argv=["deploy", "qw\u00ebn-coder", "--dry-run"], env={"PYTHONIOENCODING": "ascii"},
         exit=2, stderr=r"unknown model 'qw.n-coder'"),
    dict(id="ascii-bad-name-json", argv=["update", "caf\u00e9", "--k", "3", "--json"], env={"PYTHONIOENCODING": "ascii"},
         exit=2, stderr=r"name 'caf.' breaks SageMaker's naming rules"),
    dict(id="ascii-dead-target", argv=["invoke", DEAD, "h\u00e9llo"], env={"PYTHONIOENCODING": "ascii"}, exit=6,
         stderr=r"connection refused by http://127\.0\.0\.1:9"),
    dict(id="c-locale", argv=["sweep", "\u6a21\u578b", "--dry-run"], env={"LC_ALL": "C", "LANG": "C", "PYTHONIOENCODING": None},
         exit=2, stderr=r"unknown model"),
    # tags: AWS's pattern, refused before any AWS write (a newline made model, config and endpoint)
    dict(id="tag-value-newline-real", argv=["deploy", "qwen3-coder", "--role", "{role}", "--yes", "--tag", "team=a\nb"],
         exit=2, stderr=r"--tag 'team=a\\nb' has characters AWS tags do not allow: .*\(no tab or newline\)$"),
    dict(id="tag-value-tab", argv=["deploy", "qwen3-coder", "--dry-run", "--tag", "team=a\tb"], exit=2,
         stderr=r"has characters AWS tags do not allow"),
    dict(id="tag-key-newline", argv=["deploy", "qwen3-coder", "--dry-run", "--tag", "te\nam=a"], exit=2,
         stderr=r"has characters AWS tags do not allow"),
    # a pasted value with its line break (a regex's $ matches before a final newline): refused before AWS
    dict(id="deploy-name-trailing-newline", argv=["deploy", "qwen3-coder", "--role", "{role}", "--yes", "--name",
                                                  "prod\n"], exit=2, stderr=r"name 'prod\\n' breaks SageMaker's naming rules"),
    dict(id="status-name-trailing-newline", argv=["status", "prod\n"], exit=2, stderr=r"breaks SageMaker's naming rules"),
    dict(id="local-name-trailing-newline", argv=["local", "stop", "--name", "x\n"], exit=2,
         stderr=r"is not a valid server name"),
]
