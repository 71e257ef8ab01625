"""Bad deploy inputs (issue 11 item 2): each refused with one stderr line naming the fix, exit 2, no AWS write.

Format: see HELPERS.md (the harness in tests/test_bad_inputs_table.py runs the installed `peagle`).
"""

ROLE = "arn:aws:iam::123456789012:role/SageMakerRole"


def _tags(n: int) -> list[str]:
    return [arg for i in range(n) for arg in ("--tag", f"team{i}=ml")]


CASES = [
    # more than 50 tags per resource, peagle's own (13 on a P-EAGLE plan) and the 5 an update or cleanup
    # writes before it acts (its intent and lease) counted
    dict(id="tags-45", argv=["deploy", "qwen3-coder", "--dry-run", *_tags(45)], exit=2,
         stderr=r"^error: the resources would carry 58 tags \(45 --tag \+ 13 of peagle's, 5 more kept free for "
                r"update, cleanup and leases\); SageMaker allows 50: pass at most 32 --tag options$"),
    dict(id="tags-34-real", argv=["deploy", "gpt-oss-20b", "--role", ROLE, "--yes", *_tags(34)], exit=2,
         stderr=r"would carry 47 tags .*SageMaker allows 50"),
    dict(id="tag-reserved-jumpstart", argv=["deploy", "qwen3-coder", "--dry-run", "--tag",
                                            "sagemaker-sdk:jumpstart-model-id=x"], exit=2,
         stderr=r"--tag key 'sagemaker-sdk:jumpstart-model-id' uses a reserved prefix"),
    # an image that is not an ECR image URI (CreateModel takes Amazon ECR images only)
    dict(id="image-words", argv=["deploy", "qwen3-coder", "--dry-run", "--image", "not an image"], exit=2,
         stderr=r"--image 'not an image' is not an Amazon ECR image URI: pass <account>\.dkr\.ecr\."),
    dict(id="image-http-url", argv=["deploy", "qwen3-coder", "--role", ROLE, "--yes", "--image", "http://x/y:1"],
         exit=2, stderr=r"--image 'http://x/y:1' is not an Amazon ECR image URI"),
    dict(id="image-docker-hub", argv=["deploy", "qwen3-coder", "--dry-run", "--image", "vllm/vllm-openai:latest"],
         exit=2, stderr=r"is not an Amazon ECR image URI"),
    dict(id="image-other-region", argv=["deploy", "qwen3-coder", "--dry-run", "--region", "us-east-1", "--image",
                                        "123456789012.dkr.ecr.eu-west-1.amazonaws.com/peagle-vllm:1"], exit=2,
         stderr=r"--image is in eu-west-1 but the endpoint is in us-east-1: push the image to ECR in us-east-1"),
    # a role of another partition than the region's
    dict(id="role-china-in-aws", argv=["deploy", "qwen3-coder", "--dry-run", "--region", "us-east-1", "--role",
                                       "arn:aws-cn:iam::123456789012:role/r"], exit=2,
         stderr=r"--role is in partition aws-cn but region us-east-1 is in aws: pass a role ARN of the aws partition"),
    dict(id="role-govcloud-in-aws", argv=["deploy", "qwen3-coder", "--role", "arn:aws-us-gov:iam::123456789012:role/r",
                                          "--region", "us-west-2", "--yes"], exit=2,
         stderr=r"partition aws-us-gov but region us-west-2 is in aws"),
    dict(id="role-aws-in-china", argv=["deploy", "qwen3-coder", "--dry-run", "--region", "cn-north-1", "--role", ROLE],
         exit=2, stderr=r"partition aws but region cn-north-1 is in aws-cn"),
    dict(id="role-with-unknown-region", argv=["deploy", "qwen3-coder", "--dry-run", "--region", "mars-north-1",
                                              "--role", ROLE], exit=2, stderr=r"region 'mars-north-1' has no JumpStart"),
    # instance counts beyond any sane plan; a plan above the price guard needs an explicit price
    dict(id="instance-count-million", argv=["deploy", "qwen3-coder", "--dry-run", "--instance-count", "1000000"],
         exit=2, stderr=r"--instance-count must be at least 1 and at most 100, got 1000000: pass e\.g\. --instance-count 1 \(peagle's limit; more needs a SageMaker quota increase"),
    dict(id="instance-count-101-real", argv=["deploy", "qwen3-coder", "--role", ROLE, "--yes", "--instance-count",
                                             "101"], exit=2, stderr=r"at most 100, got 101"),
    dict(id="price-guard-with-yes", argv=["deploy", "gpt-oss-120b", "--instance-type", "ml.g7e.48xlarge",
                                          "--instance-count", "4", "--role", ROLE, "--yes"], exit=2,
         # 4 x $48/h, the emulated Pricing API's figure for ml.g7e.48xlarge (testing/pricing_emulation.py)
         stderr=r"this plan costs about \$192\.00/h, above the \$100\.00/h price guard: .*--max-price-per-hour 192"),
    dict(id="price-guard-low-limit", argv=["deploy", "qwen3-coder", "--role", ROLE, "--yes",
                                           "--max-price-per-hour", "1"], exit=2,
         stderr=r"above the \$1\.00/h price guard"),
    dict(id="max-price-zero", argv=["deploy", "qwen3-coder", "--role", ROLE, "--yes", "--max-price-per-hour", "0"],
         exit=2, stderr=r"--max-price-per-hour must be more than 0 and at most 100000 USD, got 0"),
    # a repeated --tag or --env key: refused, never "the last one wins" silently
    dict(id="tag-twice", argv=["deploy", "qwen3-coder", "--dry-run", "--tag", "team=a", "--tag", "team=b"], exit=2,
         stderr=r"--tag team is given twice \('a' and 'b'\): pass each --tag key once"),
    dict(id="env-twice", argv=["deploy", "qwen3-coder", "--role", ROLE, "--yes", "--env", "A=1", "--env", "A=2"],
         exit=2, stderr=r"--env A is given twice \('1' and '2'\): pass each --env key once"),
    dict(id="env-twice-same-value", argv=["deploy", "qwen3-coder", "--dry-run", "--env", "A=1", "--env", "A=1"],
         exit=2, stderr=r"--env A is given twice"),
    # an empty name is not "no name"
    dict(id="name-empty", argv=["deploy", "qwen3-coder", "--dry-run", "--name", ""], exit=2,
         stderr=r"--name is empty: pass a name, or leave --name out for a generated one"),
    dict(id="name-blank-real", argv=["deploy", "qwen3-coder", "--role", ROLE, "--yes", "--name", "  "], exit=2,
         stderr=r"--name is empty"),
    # --idle: the idle period is AWS's (target tracking's scale-in, about 15 minutes); every hint is "drop --idle",
    # which runs (issue 49 item 4: these once suggested "e.g. 90s", which --idle refused)
    *(dict(id=f"idle-{case}", argv=["deploy", "qwen3-coder", "--dry-run", "--scale-to-zero", "--idle", value],
           exit=2, stderr=r"^error: --idle .*: drop --idle \(AWS's target tracking takes a component to zero after "
                          r"about 15 minutes without a request; no setting changes that\)$")
      for case, value in (("0m", "0m"), ("30s", "30s"), ("minus-5m", "-5m"), ("empty", ""), ("30m", "30m"),
                          ("24h", "24h"))),
    # the speculative config: the user may add vLLM keys, never mode or K, never a lossy rejection unasked (issue 46)
    dict(id="env-lossy-fly", argv=["deploy", "qwen3-coder", "--role", ROLE, "--yes", "--env",
                                   'SM_VLLM_SPECULATIVE_CONFIG={"rejection_sample_method": "fly"}'], exit=2,
         stderr=r"^error: --env SM_VLLM_SPECULATIVE_CONFIG rejection_sample_method 'fly' is lossy \(.*\): the output "
                r"is no longer the target's: pass --allow-lossy to deploy it anyway"),
    dict(id="env-lossy-synthetic", argv=["deploy", "qwen3-coder", "--dry-run", "--json", "--env",
                                         'SM_VLLM_SPECULATIVE_CONFIG={"rejection_sample_method": "synthetic", '
                                         '"synthetic_acceptance_length": 2.5}'], exit=2,
         stderr=r"rejection_sample_method 'synthetic' is lossy"),
    dict(id="env-speculative-sets-k", argv=["deploy", "qwen3-coder", "--dry-run", "--env",
                                            'SM_VLLM_SPECULATIVE_CONFIG={"num_speculative_tokens": 5}'], exit=2,
         stderr=r"sets num_speculative_tokens, which peagle sets from --mode and --k: use --k instead$"),
    dict(id="env-speculative-other-spelling", argv=["deploy", "qwen3-coder", "--role", ROLE, "--yes", "--env",
                                                    'SM_VLLM_speculative_config={"rejection_sample_method": "fly"}'],
         exit=2, stderr=r"--env SM_VLLM_speculative_config reaches vLLM as --speculative-config and skips peagle's "
                        r"checks: spell it SM_VLLM_SPECULATIVE_CONFIG$"),
    dict(id="env-per-request-mode-off", argv=["deploy", "qwen3-coder", "--dry-run", "--mode", "off", "--env",
                                              "SM_VLLM_PER_REQUEST_SPEC_DECODE_METRICS=summary"], exit=2,
         stderr=r"--env SM_VLLM_PER_REQUEST_SPEC_DECODE_METRICS needs speculative decoding"),
    dict(id="env-per-request-old-vllm", argv=["deploy", "qwen3-coder", "--dry-run", "--env",
                                              "SM_VLLM_PER_REQUEST_SPEC_DECODE_METRICS=summary"], exit=2,
         stderr=r"needs vLLM 0\.29 or later, and the image runs vLLM 0\.18\.0 \(it would refuse the flag and not start\)"),
]
