"""Bad inputs for `peagle iam-policy` (issue 23): every command with AWS calls has a list (sweep included);
an unknown one, a bad --role or --name-prefix is one line, exit 2."""

CASES = [
    dict(id="iam-unknown-command", argv=["iam-policy", "nope"], exit=2,
         stderr=r"^error: no IAM list for nope: choose from deploy, status, invoke, openai, bench, metrics, logs, update, "
                r"cleanup, recover, sweep, drafter$"),
    dict(id="iam-bucket-not-a-bucket", argv=["iam-policy", "drafter", "--bucket", "My Bucket"], exit=2,
         stderr=r"--bucket 'My Bucket' is not an S3 bucket or BUCKET/PREFIX: pass --bucket my-bucket/drafters"),
    dict(id="iam-unknown-command-json", argv=["iam-policy", "--json", "sweep", "sweeps"], exit=2,
         stderr=r"no IAM list for sweeps"),
    dict(id="iam-local-has-no-aws", argv=["iam-policy", "local"], exit=2, stderr=r"no IAM list for local"),
    dict(id="iam-role-not-an-arn", argv=["iam-policy", "--role", "nope"], exit=2,
         stderr=r"--role 'nope' is not an IAM role ARN"),
    dict(id="iam-role-empty", argv=["iam-policy", "sweep", "--role", ""], exit=2, stderr=r"--role '' is not an IAM role ARN"),
    dict(id="iam-name-prefix-empty", argv=["iam-policy", "--name-prefix", ""], exit=2,
         stderr=r"--name-prefix '' is not the start of an endpoint name"),
    dict(id="iam-name-prefix-space", argv=["iam-policy", "sweep", "--name-prefix", "a b"], exit=2,
         stderr=r"--name-prefix 'a b' is not the start of an endpoint name"),
    dict(id="iam-name-prefix-newline", argv=["iam-policy", "--name-prefix", "peagle-\n"], exit=2,
         stderr=r"is not the start of an endpoint name"),
    dict(id="iam-unknown-option", argv=["iam-policy", "--format", "yaml"], exit=2,
         stderr=r"No such option: --format.*see 'peagle iam-policy --help'$"),
]
