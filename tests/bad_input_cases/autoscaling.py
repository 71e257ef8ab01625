"""Bad autoscaling inputs (issue 15 item 2): `--autoscale MIN:MAX --target-concurrency N` on deploy. Each is
refused with one stderr line naming the fix, exit 2, before anything reaches AWS (real deploys included).

Format: see HELPERS.md (the harness in tests/test_bad_inputs_table.py runs the installed `peagle`).
"""

ROLE = "arn:aws:iam::123456789012:role/SageMakerRole"
DRY = ["deploy", "qwen3-coder", "--dry-run"]
REAL = ["deploy", "qwen3-coder", "--role", ROLE, "--yes"]

CASES = [
    dict(id="not-a-range", argv=[*DRY, "--autoscale", "four", "--target-concurrency", "8"], exit=2,
         stderr=r"^error: --autoscale 'four' is not MIN:MAX: pass e\.g\. --autoscale 1:4$"),
    dict(id="one-number", argv=[*REAL, "--autoscale", "4", "--target-concurrency", "8"], exit=2,
         stderr=r"--autoscale '4' is not MIN:MAX"),
    dict(id="negative", argv=[*DRY, "--autoscale=-1:4", "--target-concurrency", "8"], exit=2,
         stderr=r"--autoscale '-1:4' is not MIN:MAX"),
    dict(id="zero-min", argv=[*REAL, "--autoscale", "0:4", "--target-concurrency", "8"], exit=2,
         stderr=r"--autoscale minimum must be at least 1, got 0: pass e\.g\. --autoscale 1:4 \(an instance-based "
                r"endpoint cannot scale to zero; --scale-to-zero hosts the model as an inference component that "
                r"does\)$"),
    dict(id="zero-min-component", argv=[*REAL, "--hosting", "component", "--autoscale", "0:2", "--target-concurrency",
                                        "8"], exit=2,
         stderr=r"^error: --autoscale minimum must be at least 1, got 0 \(an inference component scales to zero "
                r"with --scale-to-zero\): pass --autoscale 1:2, and add --scale-to-zero for zero copies when idle$"),
    dict(id="min-above-max", argv=[*REAL, "--autoscale", "5:2", "--target-concurrency", "8"], exit=2,
         stderr=r"--autoscale 5:2 has its minimum above its maximum: pass MIN:MAX with MIN <= MAX, e\.g\. "
                r"--autoscale 2:5$"),
    dict(id="max-too-high", argv=[*DRY, "--autoscale", "1:500", "--target-concurrency", "8"], exit=2,
         stderr=r"--autoscale maximum 500 is above peagle's limit of 100"),
    dict(id="no-target", argv=[*REAL, "--autoscale", "1:4"], exit=2,
         stderr=r"--autoscale needs a target: add --target-concurrency N"),
    dict(id="target-without-autoscale", argv=[*REAL, "--target-concurrency", "8"], exit=2,
         stderr=r"--target-concurrency only applies with --autoscale: add --autoscale MIN:MAX"),
    dict(id="invocations-without-autoscale", argv=[*DRY, "--target-invocations", "100"], exit=2,
         stderr=r"--target-invocations only applies with --autoscale"),
    dict(id="two-targets", argv=[*REAL, "--autoscale", "1:4", "--target-concurrency", "8",
                                 "--target-invocations", "100"], exit=2,
         stderr=r"--target-concurrency and --target-invocations are two metrics.*pass only one of them"),
    dict(id="target-zero", argv=[*REAL, "--autoscale", "1:4", "--target-concurrency", "0"], exit=2,
         stderr=r"--target-concurrency must be more than 0 and at most 4096 concurrent requests per instance, got 0: pass e\.g\. --target-concurrency 8"),
    dict(id="target-negative", argv=[*DRY, "--autoscale", "1:4", "--target-invocations=-5"], exit=2,
         stderr=r"--target-invocations must be more than 0 and at most 1000000 invocations per instance per minute, got -5"),
    dict(id="target-nan", argv=[*DRY, "--autoscale", "1:4", "--target-concurrency", "nan"], exit=2,
         stderr=r"--target-concurrency must be more than 0 .* got nan"),
    dict(id="target-words", argv=[*DRY, "--autoscale", "1:4", "--target-concurrency", "lots"], exit=2,
         stderr=r"--target-concurrency 'lots' is not a number: pass e\.g\. --target-concurrency 8"),
    dict(id="count-below-min", argv=[*REAL, "--autoscale", "2:4", "--target-concurrency", "8",
                                     "--instance-count", "1"], exit=2,
         stderr=r"--instance-count 1 is outside --autoscale 2:4: pass --instance-count between 2 and 4, or leave it "
                r"out to start at 2"),
    dict(id="count-above-max", argv=[*DRY, "--autoscale", "1:2", "--target-concurrency", "8",
                                     "--instance-count", "3"], exit=2,
         stderr=r"--instance-count 3 is outside --autoscale 1:2"),
    dict(id="no-wait", argv=[*REAL, "--autoscale", "1:2", "--target-concurrency", "8", "--no-wait"], exit=2,
         stderr=r"--autoscale is registered once the endpoint is InService, so it needs the deploy to wait: "
                r"drop --no-wait"),
    dict(id="json", argv=[*DRY, "--autoscale", "3:1", "--target-concurrency", "8", "--json"], exit=2,
         stderr=r"--autoscale 3:1 has its minimum above its maximum"),
    # the price guard counts the autoscaling maximum: 10 x ml.g7e.48xlarge is far above $100/h
    dict(id="price-guard-at-max", argv=[*REAL, "--instance-type", "ml.g7e.48xlarge", "--autoscale", "1:10",
                                        "--target-concurrency", "8"], exit=2,
         stderr=r"this plan costs about \$[0-9,.]+/h, above the \$100\.00/h price guard"),
]
