"""Seed an emulated S3 with the JumpStart specs peagle ships, in the real bucket's layout.

Against an emulator, JumpStart resolution goes through AWS_ENDPOINT_URL like every other AWS call:
a bucket `jumpstart-cache-prod-<region>` holding `models_manifest.json` and
`community_models/<id>/specs_v<ver>.json` is all the SDK needs.
"""

from __future__ import annotations

from typing import Any

from ..resources import templates_dir


def bucket_name(region: str) -> str:
    return f"jumpstart-cache-prod-{region}"


def seed_jumpstart_bucket(s3_client: Any, region: str) -> str:
    """Create the region's JumpStart cache bucket (if needed) and upload manifest and specs. Returns its name."""
    root = templates_dir() / "jumpstart"
    bucket = bucket_name(region)
    kwargs = {} if region == "us-east-1" else {"CreateBucketConfiguration": {"LocationConstraint": region}}
    try:
        s3_client.create_bucket(Bucket=bucket, **kwargs)
    except s3_client.exceptions.BucketAlreadyOwnedByYou:
        pass
    s3_client.put_object(Bucket=bucket, Key="models_manifest.json",
                         Body=(root / "manifest" / "models_manifest.json").read_bytes())
    specs = root / "specs"
    for path in sorted(specs.rglob("*.json")):
        s3_client.put_object(Bucket=bucket, Key=path.relative_to(specs).as_posix(), Body=path.read_bytes())
    return bucket
