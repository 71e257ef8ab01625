"""Validation of user-supplied deploy values, each failure one UsageError (exit 2) naming the fix.

One function per input, all here; `plan.build_plan` calls them before anything reaches AWS. Limits are
SageMaker's own where it documents one: names 63 chars matching ^[a-zA-Z0-9](-*[a-zA-Z0-9])*$, container
environment values 1024 bytes and at most 100 variables, tags 128/256 chars and at most 50 per resource
(peagle's own tags counted), container images from Amazon ECR in the model's region, a role in the
region's partition. SageMaker documents no upper bound for InitialInstanceCount (the account quota
decides), so peagle's own guard is MAX_INSTANCE_COUNT, and a plan above the hourly price guard needs an
explicit confirmation (docs/configuration.md).
"""

from __future__ import annotations

import math
import re
from datetime import timedelta

from .errors import UsageError

NAME_RE = re.compile(r"^[a-zA-Z0-9](-*[a-zA-Z0-9])*$")
NAME_MAX = 63
ROLE_ARN_RE = re.compile(r"^arn:aws[a-z-]*:iam::\d{12}:role/[\w+=,.@/-]{1,512}$")
ENV_KEY_RE = re.compile(r"^[a-zA-Z_][a-zA-Z0-9_]{0,1023}$")
ENV_VALUE_MAX_BYTES = 1024
ENV_MAX_VARS = 100
TAG_KEY_MAX, TAG_VALUE_MAX, TAGS_MAX = 128, 256, 50
TAG_TEXT_RE = re.compile(r"^[\w\s.:/=+\-@]*$", re.UNICODE)
RESERVED_TAG_PREFIXES = ("aws:", "peagle:", "sagemaker-sdk:")  # AWS's, peagle's, JumpStart attribution
# <account>.dkr.ecr[-fips].<region>.<AWS domain>/<repository>[:tag | @sha256:digest]: CreateModel takes
# images from Amazon ECR only (peagle sends no ImageConfig for other registries), in the model's region.
ECR_IMAGE_RE = re.compile(
    r"^(?P<account>\d{12})\.dkr\.ecr(?:-fips)?\.(?P<region>[a-z]{2}(?:-[a-z]+)+-\d)\."
    r"(?:amazonaws\.com(?:\.cn)?|[a-z0-9.-]+)/(?P<repo>[a-z0-9][a-z0-9._/-]*)"
    r"(?::(?P<tag>[\w][\w.-]{0,127})|@sha256:[0-9a-f]{64})?$")
IMAGE_MAX = 255
MAX_INSTANCE_COUNT = 100  # peagle's guard: SageMaker's API has no maximum; the account quota decides
PRICE_GUARD_USD_PER_HOUR = 100.0  # a real deploy above this needs --max-price-per-hour (or a prompt)
TTL_RE = re.compile(r"^(?:(\d+)d)?(?:(\d+)h)?(?:(\d+)m)?$")
TTL_MAX = timedelta(days=30)


def validate_name(name: str) -> str:
    if not name.strip():
        raise UsageError("--name is empty", "pass a name, or leave --name out for a generated one")
    if len(name) > NAME_MAX:
        raise UsageError(f"name {name!r} is {len(name)} characters; SageMaker allows {NAME_MAX}",
                         "choose a shorter --name")
    if not NAME_RE.match(name):
        raise UsageError(f"name {name!r} breaks SageMaker's naming rules",
                         "use letters, digits and single or repeated hyphens, starting and ending with a letter or digit")
    return name


def partition_of(region: str) -> str | None:
    """The AWS partition of a region (aws, aws-cn, aws-us-gov, ...), from botocore's own endpoint data;
    None for a region botocore does not know (the region check names that problem)."""
    import botocore.exceptions
    import botocore.session

    try:
        return botocore.session.get_session().get_partition_for_region(region)
    except botocore.exceptions.UnknownRegionError:
        return None


def validate_role_arn(arn: str, region: str | None = None) -> str:
    arn = arn.strip()
    if not ROLE_ARN_RE.match(arn):
        raise UsageError(f"--role {arn!r} is not an IAM role ARN",
                         "pass arn:aws:iam::<12-digit account>:role/<name>")
    if region:
        partition, expected = arn.split(":")[1], partition_of(region)
        if expected is not None and partition != expected:
            raise UsageError(f"--role is in partition {partition} but region {region} is in {expected}",
                             f"pass a role ARN of the {expected} partition (arn:{expected}:iam::...) "
                             "or a --region of its partition")
    return arn


def validate_image(image: str, region: str) -> str:
    """An --image must be an Amazon ECR image URI in the deploy region (CreateModel's rule)."""
    text = image.strip()
    match = ECR_IMAGE_RE.match(text) if len(text) <= IMAGE_MAX else None
    if match is None:
        raise UsageError(f"--image {image!r} is not an Amazon ECR image URI",
                         "pass <account>.dkr.ecr.<region>.amazonaws.com/<repository>:<tag>")
    if match["region"] != region:
        raise UsageError(f"--image is in {match['region']} but the endpoint is in {region}",
                         f"push the image to ECR in {region} or pass --region {match['region']}")
    return text


def parse_instance_count(value: int) -> int:
    if value < 1:
        raise UsageError(f"--instance-count must be at least 1, got {value}", "pass --instance-count 1 or more")
    if value > MAX_INSTANCE_COUNT:
        raise UsageError(f"--instance-count {value} is above peagle's limit of {MAX_INSTANCE_COUNT}",
                         f"pass --instance-count 1..{MAX_INSTANCE_COUNT} (more needs a SageMaker quota increase "
                         "and several endpoints)")
    return value


def parse_max_price(value: float | None) -> float:
    """--max-price-per-hour: the hourly estimate a script accepts without a prompt (default the guard)."""
    if value is None:
        return PRICE_GUARD_USD_PER_HOUR
    if not value > 0:
        raise UsageError(f"--max-price-per-hour must be positive, got {value}", "pass e.g. --max-price-per-hour 50")
    return value


def check_price(price_per_hour: float | None, limit: float, *, interactive: bool) -> bool:
    """True when the plan needs an explicit price confirmation; refuse (exit 2) when none can be asked."""
    if price_per_hour is None or price_per_hour <= limit:
        return False
    if not interactive:
        raise UsageError(f"this plan costs about ${price_per_hour:,.2f}/h, above the ${limit:,.2f}/h price guard",
                         f"check --instance-type/--instance-count, or pass --max-price-per-hour "
                         f"{math.ceil(price_per_hour)} to accept it")
    return True


def _split_pair(raw: str, flag: str, seen: dict[str, str]) -> tuple[str, str]:
    key, sep, value = raw.partition("=")
    if not sep or not key.strip():
        raise UsageError(f"{flag} {raw!r} is not KEY=VALUE", f"pass {flag} KEY=VALUE")
    key = key.strip()
    if key in seen:
        raise UsageError(f"{flag} {key} is given twice ({seen[key]!r} and {value!r})", f"pass each {flag} key once")
    return key, value


def parse_env(pairs: list[str]) -> dict[str, str]:
    env: dict[str, str] = {}
    for raw in pairs:
        key, value = _split_pair(raw, "--env", env)
        if not ENV_KEY_RE.match(key):
            raise UsageError(f"--env name {key!r} is not a valid variable name", "use letters, digits and _")
        if len(value.encode("utf-8")) > ENV_VALUE_MAX_BYTES:
            raise UsageError(f"--env {key} value is {len(value.encode('utf-8'))} bytes; SageMaker allows "
                             f"{ENV_VALUE_MAX_BYTES}", "shorten the value")
        env[key] = value
    return env


def check_env_count(env: dict[str, str]) -> None:
    if len(env) > ENV_MAX_VARS:
        raise UsageError(f"the container environment would have {len(env)} variables; SageMaker allows "
                         f"{ENV_MAX_VARS}", "drop some --env pairs")


def check_tag_count(tags: dict[str, str], user_tags: int) -> None:
    """SageMaker allows 50 tags per resource, peagle's own included."""
    if len(tags) > TAGS_MAX:
        own = len(tags) - user_tags
        raise UsageError(f"the resources would carry {len(tags)} tags ({user_tags} --tag + {own} of peagle's); "
                         f"SageMaker allows {TAGS_MAX}", f"pass at most {TAGS_MAX - own} --tag options")


def parse_tags(pairs: list[str]) -> dict[str, str]:
    tags: dict[str, str] = {}
    for raw in pairs:
        key, value = _split_pair(raw, "--tag", tags)
        if key.lower().startswith(RESERVED_TAG_PREFIXES):
            raise UsageError(f"--tag key {key!r} uses a reserved prefix",
                             "peagle:, sagemaker-sdk: and aws: tags are set by peagle, JumpStart or AWS")
        if len(key) > TAG_KEY_MAX or len(value) > TAG_VALUE_MAX:
            raise UsageError(f"--tag {key!r} is too long", f"keys up to {TAG_KEY_MAX}, values up to {TAG_VALUE_MAX} characters")
        if not TAG_TEXT_RE.match(key) or not TAG_TEXT_RE.match(value):
            raise UsageError(f"--tag {raw!r} has characters AWS tags do not allow",
                             "use letters, digits, spaces and _ . : / = + - @")
        tags[key] = value
    return tags


def parse_ttl(text: str) -> timedelta:
    """'90m', '4h', '2d', '1h30m' -> timedelta (> 0, at most 30 days)."""
    raw = text.strip().lower()
    match = TTL_RE.match(raw)
    if not raw or not match or not any(match.groups()):
        raise UsageError(f"--ttl {text!r} is not a duration", "pass e.g. --ttl 90m, 4h, 2d or 1h30m")
    days, hours, minutes = (int(g) if g else 0 for g in match.groups())
    ttl = timedelta(days=days, hours=hours, minutes=minutes)
    if ttl <= timedelta(0):
        raise UsageError("--ttl must be longer than zero", "pass e.g. --ttl 4h")
    if ttl > TTL_MAX:
        raise UsageError(f"--ttl {text} is longer than 30 days", "pass a shorter --ttl")
    return ttl
