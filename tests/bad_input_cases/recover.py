"""Bad inputs to `peagle recover` (issue 27): one stderr line naming the fix, exit 2, no AWS write."""

CASES = [
    dict(id="recover-needs-a-name", argv=["recover"], exit=2,
         stderr=r"^error: recover needs exactly one of NAME or --all: see peagle recover --help$"),
    dict(id="recover-name-and-all", argv=["recover", "ep1", "--all", "--json"], exit=2,
         stderr=r"recover needs exactly one of NAME or --all"),
    dict(id="recover-bad-name", argv=["recover", "bad_name!"], exit=2, stderr=r"breaks SageMaker's naming rules"),
    dict(id="recover-timeout-zero", argv=["recover", "ep1", "--timeout", "0"], exit=2,
         stderr=r"--timeout must be at least 1 and at most 86400 seconds, got 0: pass e.g. --timeout 3600$"),
    dict(id="recover-unmanaged", argv=["recover", "someone-elses-endpoint"], exit=2,
         stderr=r"endpoint 'someone-elses-endpoint' was not created by peagle: peagle only recovers what it "
                r"created; nothing was changed"),
]
