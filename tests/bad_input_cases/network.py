"""Bad inputs for deploy's private networking and encryption (issue 15 item 4): --subnet, --security-group,
--kms-key. One stderr line naming the fix, exit 2, no AWS write (checked before anything reaches AWS).

Format: see HELPERS.md (the harness in tests/test_bad_inputs_table.py runs the installed `peagle`).
"""

ROLE = "arn:aws:iam::123456789012:role/SageMakerRole"
SUBNET, GROUP = "subnet-0123456789abcdef0", "sg-0123456789abcdef0"
REAL = ["deploy", "qwen3-coder", "--role", ROLE, "--yes"]  # a real deploy: the refusal comes before any write

CASES = [
    dict(id="subnet-without-security-group", argv=[*REAL, "--subnet", SUBNET], exit=2,
         stderr=r"^error: --subnet needs at least one --security-group .*: add --security-group sg-"),
    dict(id="security-group-without-subnet", argv=[*REAL, "--security-group", GROUP], exit=2,
         stderr=r"^error: --security-group needs at least one --subnet .*: add --subnet subnet-"),
    dict(id="subnet-shape", argv=[*REAL, "--subnet", "subnet-xyz", "--security-group", GROUP], exit=2,
         stderr=r"--subnet 'subnet-xyz' is not a VPC subnet id: pass --subnet subnet-0123456789abcdef0"),
    dict(id="subnet-is-a-group", argv=[*REAL, "--subnet", GROUP, "--security-group", GROUP], exit=2,
         stderr=r"--subnet 'sg-0123456789abcdef0' is not a VPC subnet id"),
    dict(id="security-group-shape", argv=[*REAL, "--subnet", SUBNET, "--security-group", "default"], exit=2,
         stderr=r"--security-group 'default' is not a VPC security group id"),
    dict(id="subnet-twice", argv=[*REAL, "--subnet", SUBNET, "--subnet", SUBNET, "--security-group", GROUP],
         exit=2, stderr=r"--subnet subnet-0123456789abcdef0 is given twice: pass each --subnet once"),
    dict(id="too-many-security-groups",
         argv=[*REAL, "--subnet", SUBNET, *[a for i in range(6) for a in ("--security-group", f"sg-{i:08x}")]],
         exit=2, stderr=r"6 --security-group options; SageMaker allows 5"),
    dict(id="kms-key-shape", argv=[*REAL, "--kms-key", "my key"], exit=2,
         stderr=r"--kms-key 'my key' is not a KMS key id, key ARN, alias or alias ARN: pass e\.g\. --kms-key alias/"),
    dict(id="kms-key-other-region", argv=[*REAL, "--kms-key",
                                          "arn:aws:kms:eu-west-1:123456789012:key/1234abcd-12ab-34cd-56ef-1234567890ab"],
         exit=2, stderr=r"--kms-key is in eu-west-1 but the endpoint is in us-east-1"),
    dict(id="kms-key-dry-run", argv=["deploy", "qwen3-coder", "--dry-run", "--kms-key", "alias/"], exit=2,
         stderr=r"is not a KMS key id"),
]
