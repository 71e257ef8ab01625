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

NAME_RE = re.compile(r"^[a-zA-Z0-9](-*[a-zA-Z0-9])*\Z")
NAME_MAX = 63
ROLE_ARN_RE = re.compile(r"^arn:aws[a-z-]*:iam::\d{12}:role/[\w+=,.@/-]{1,512}\Z")
ENV_KEY_RE = re.compile(r"^[a-zA-Z_][a-zA-Z0-9_]{0,1023}\Z")
ENV_VALUE_MAX_BYTES = 1024
ENV_MAX_VARS = 100
TAG_KEY_MAX, TAG_VALUE_MAX, TAGS_MAX = 128, 256, 50
TAG_PUNCTUATION = "_.:/=+-@"  # with letters, digits and separators: AWS's ^([\p{L}\p{Z}\p{N}_.:/=+\-@]*)$
RESERVED_TAG_PREFIXES = ("aws:", "peagle:", "sagemaker-sdk:")  # AWS's, peagle's, JumpStart attribution
# <account>.dkr.ecr[-fips].<region>.<AWS domain>/<repository>[:tag | @sha256:digest]: CreateModel takes
# images from Amazon ECR only (peagle sends no ImageConfig for other registries), in the model's region.
ECR_IMAGE_RE = re.compile(
    r"^(?P<account>\d{12})\.dkr\.ecr(?:-fips)?\.(?P<region>[a-z]{2}(?:-[a-z]+)+-\d)\."
    r"(?:amazonaws\.com(?:\.cn)?|[a-z0-9.-]+)/(?P<repo>[a-z0-9][a-z0-9._/-]*)"
    r"(?::(?P<tag>[\w][\w.-]{0,127})|@sha256:[0-9a-f]{64})?\Z")
IMAGE_MAX = 255
MAX_INSTANCE_COUNT = 100  # peagle's guard: SageMaker's API has no maximum; the account quota decides
PRICE_GUARD_USD_PER_HOUR = 100.0  # a real deploy above this needs --max-price-per-hour (or a prompt)
TTL_MAX = timedelta(days=30)  # --ttl is parsed by durations.parse_duration


def validate_name(name: str, *, flag: str = "NAME") -> str:
    """An endpoint name: `flag` is deploy's optional `--name`, or the NAME argument of the commands that act on an
    existing endpoint (their hints must not advise an option they lack)."""
    option = flag.startswith("--")
    if not name.strip():
        raise UsageError(f"{flag} is empty", "pass a name, or leave --name out for a generated one" if option
                         else "pass the endpoint's name (peagle status lists peagle's endpoints)")
    if len(name) > NAME_MAX:
        raise UsageError(f"name {name!r} is {len(name)} characters; SageMaker allows {NAME_MAX}",
                         "choose a shorter --name" if option else f"pass the endpoint's name (at most {NAME_MAX} "
                         "characters; peagle status lists peagle's endpoints)")
    if not NAME_RE.match(name):
        raise UsageError(f"name {name!r} breaks SageMaker's naming rules",
                         "use letters, digits and single or repeated hyphens, starting and ending with a letter or digit")
    return name


# SageMaker's instance types, e.g. ml.g7e.2xlarge, ml.trn1n.32xlarge (its API's InstanceType enum is all of this shape)
INSTANCE_TYPE_RE = re.compile(r"^ml\.[a-z0-9]+(?:-[a-z0-9]+)*\.[a-z0-9]+\Z")


def check_instance_type(value: str | None, flag: str = "--instance-type") -> str | None:
    """An instance type is used exactly as typed, so one that differs from a well-formed type by what cannot be
    seen (a space, a tab, a zero-width character) or by case is refused, shown quoted, with the type to pass.
    Anything else goes on to the checks that list the supported types (plan.py)."""
    if value is None or INSTANCE_TYPE_RE.match(value):
        return value
    visible = "".join(ch for ch in value if ch.isprintable() and not ch.isspace())
    fix = f"pass {flag} {visible.lower()}" if INSTANCE_TYPE_RE.match(visible.lower()) else \
        "pass a type such as ml.g7e.2xlarge"
    if value != value.strip():
        raise UsageError(f"{flag} {value!r} has spaces around the instance type", fix)
    foreign = [ch for ch in dict.fromkeys(value) if not (ch.isascii() and (ch.isalnum() or ch in ".-"))]
    if any(ch.isprintable() and not ch.isspace() for ch in foreign):  # ';', '/', a letter of another script...
        raise UsageError(f"{flag} {ascii(value)} holds characters an instance type cannot hold: "
                         f"{', '.join(ascii(ch) for ch in foreign)}", "pass a type such as ml.g7e.2xlarge "
                         "(letters, digits, dots and hyphens)")  # each quoted, escaped where not plain ASCII
    if visible != value:
        raise UsageError(f"{flag} {value!r} holds characters that cannot be seen (shown escaped)", fix)
    if INSTANCE_TYPE_RE.match(value.lower()):
        raise UsageError(f"{flag} {value!r}: SageMaker's instance types are lower case", fix)
    return value


def parse_instance_types(value: str | None, flag: str = "--instance-type") -> list[str]:
    """`--instance-type` as a priority list: one type, or types separated by commas (at most 5, none twice)."""
    from .pools import MAX_POOLS, POOL_SEPARATOR

    if value is None:
        return []
    types = [part.strip() for part in value.split(POOL_SEPARATOR)]
    if any(not t for t in types):
        raise UsageError(f"{flag} {value!r} has an empty entry", f"pass {flag} ml.g7e.2xlarge,ml.g7e.4xlarge "
                         "(types in priority order, separated by commas)")
    if len(types) > MAX_POOLS:
        raise UsageError(f"{flag} lists {len(types)} instance types; SageMaker takes at most {MAX_POOLS} pools",
                         f"pass at most {MAX_POOLS} types")
    for t in types:
        check_instance_type(t, flag)
    twice = sorted({t for t in types if types.count(t) > 1})
    if twice:
        raise UsageError(f"{flag} lists {twice[0]} twice", "list each instance type once, in priority order")
    return types


def check_instance_types(value: str | None, flag: str = "--instance-type") -> str | None:
    """One instance type as `check_instance_type` checks it, or a comma-separated priority list of them (instance
    pools, `parse_instance_types`; a command that takes one type refuses a list itself)."""
    if value is None or "," not in value:
        return check_instance_type(value, flag)
    parse_instance_types(value, flag)
    return value


# options whose value goes to AWS as typed: checked by cli.common.run before the command's body, in every command
TEXT_CHECKS = {"instance_type": check_instance_types}


def partition_of(region: str) -> str | None:
    """The AWS partition of a region (aws, aws-cn, aws-us-gov, ...), from botocore's own endpoint data;
    None for a region botocore does not know (the region check names that problem)."""
    import botocore.session

    from .aws import botocore_exceptions

    try:
        return botocore.session.get_session().get_partition_for_region(region)
    except botocore_exceptions().UnknownRegionError:
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


def check_price(price_per_hour: float | None, limit: float, *, interactive: bool, explicit: bool = False,
                unknown_why: str | None = None, unknown_fix: str | None = None) -> bool:
    """True when the plan needs an explicit price confirmation; refuse (exit 2) when none can be asked.
    An unknown price cannot be held to an explicit --max-price-per-hour: refused, before any AWS write.
    `unknown_why`/`unknown_fix`: the Price's detail and fix (network, credentials or permission)."""
    if price_per_hour is None and explicit:
        raise UsageError(f"--max-price-per-hour {limit:g} cannot be checked: the SageMaker hosting price is unknown"
                         + (f" ({unknown_why})" if unknown_why else ""),
                         f"{unknown_fix or 'give credentials that allow pricing:GetProducts'}, or drop "
                         "--max-price-per-hour to accept an unknown price (docs/configuration.md#prices)")
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


def check_tag_count(tags: dict[str, str], user_tags: int, *, reserve: int = 0) -> None:
    """SageMaker allows 50 tags per resource, peagle's own included; `reserve` stay free for the tags an update
    or cleanup writes on the endpoint before it acts (its intent) and the lease of the command at work."""
    if len(tags) + reserve > TAGS_MAX:
        own = len(tags) - user_tags
        raise UsageError(f"the resources would carry {len(tags)} tags ({user_tags} --tag + {own} of peagle's, "
                         f"{reserve} more kept free for update, cleanup and leases); SageMaker allows {TAGS_MAX}",
                         f"pass at most {TAGS_MAX - own - reserve} --tag options")


def is_tag_text(text: str) -> bool:
    """AWS's tag pattern: letters (L), separators (Z: a space, not a tab or newline), digits (N) and _.:/=+-@."""
    import unicodedata

    return all(ch in TAG_PUNCTUATION or unicodedata.category(ch)[0] in "LZN" for ch in text)


def parse_tags(pairs: list[str]) -> dict[str, str]:
    tags: dict[str, str] = {}
    for raw in pairs:
        key, value = _split_pair(raw, "--tag", tags)
        if key.lower().startswith(RESERVED_TAG_PREFIXES):
            raise UsageError(f"--tag key {key!r} uses a reserved prefix",
                             "peagle:, sagemaker-sdk: and aws: tags are set by peagle, JumpStart or AWS")
        if len(key) > TAG_KEY_MAX or len(value) > TAG_VALUE_MAX:
            raise UsageError(f"--tag {key!r} is too long", f"keys up to {TAG_KEY_MAX}, values up to {TAG_VALUE_MAX} characters")
        if not is_tag_text(key) or not is_tag_text(value):
            raise UsageError(f"--tag {raw!r} has characters AWS tags do not allow",
                             "use letters, digits, spaces and _ . : / = + - @ (no tab or newline)")
        tags[key] = value
    return tags


# private networking and encryption ----------------------------------------------------------------------
SUBNET_RE = re.compile(r"^subnet-(?:[0-9a-f]{8}|[0-9a-f]{17})\Z")
SECURITY_GROUP_RE = re.compile(r"^sg-(?:[0-9a-f]{8}|[0-9a-f]{17})\Z")
SUBNETS_MAX, SECURITY_GROUPS_MAX = 16, 5  # SageMaker's VpcConfig limits
_KMS_KEY_ID = r"(?:[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}|mrk-[0-9a-f]{32})"
_KMS_ALIAS = r"alias/[a-zA-Z0-9/_-]{1,250}"
KMS_KEY_RE = re.compile(rf"^(?:{_KMS_KEY_ID}|{_KMS_ALIAS})\Z")
KMS_ARN_RE = re.compile(rf"^arn:(?P<partition>aws[a-z-]*):kms:(?P<region>[a-z0-9-]+):\d{{12}}:"
                        rf"(?:key/{_KMS_KEY_ID}|{_KMS_ALIAS})\Z")


def _unique_ids(values: list[str], flag: str, pattern: re.Pattern[str], shape: tuple[str, str], maximum: int) -> list[str]:
    ids: list[str] = []
    for raw in values:
        value = raw.strip()
        if not pattern.match(value):
            raise UsageError(f"{flag} {raw!r} is not a {shape[0]} id", f"pass {flag} {shape[1]}")
        if value in ids:
            raise UsageError(f"{flag} {value} is given twice", f"pass each {flag} once")
        ids.append(value)
    if len(ids) > maximum:
        raise UsageError(f"{len(ids)} {flag} options; SageMaker allows {maximum}", f"pass at most {maximum}")
    return ids


def parse_vpc_config(subnets: list[str], security_groups: list[str]) -> dict[str, list[str]] | None:
    """--subnet/--security-group as CreateModel's VpcConfig (None when neither is given). SageMaker needs
    both: subnets without security groups, or the reverse, is refused before any AWS call."""
    if not subnets and not security_groups:
        return None
    subnet_ids = _unique_ids(subnets, "--subnet", SUBNET_RE, ("VPC subnet", "subnet-0123456789abcdef0"),
                             SUBNETS_MAX)
    group_ids = _unique_ids(security_groups, "--security-group", SECURITY_GROUP_RE,
                            ("VPC security group", "sg-0123456789abcdef0"), SECURITY_GROUPS_MAX)
    if not group_ids:
        raise UsageError("--subnet needs at least one --security-group (SageMaker's VpcConfig takes both)",
                         "add --security-group sg-... of the same VPC")
    if not subnet_ids:
        raise UsageError("--security-group needs at least one --subnet (SageMaker's VpcConfig takes both)",
                         "add --subnet subnet-... of the same VPC (two in different Availability Zones for "
                         "more than one instance)")
    return {"Subnets": subnet_ids, "SecurityGroupIds": group_ids}


def validate_kms_key(key: str, region: str) -> str:
    """--kms-key: a key id, key ARN, alias name or alias ARN (CreateEndpointConfig's KmsKeyId forms); an
    ARN must be in the deploy region (KMS keys are regional)."""
    text = key.strip()
    match = KMS_ARN_RE.match(text)
    if match is None and not KMS_KEY_RE.match(text):
        raise UsageError(f"--kms-key {key!r} is not a KMS key id, key ARN, alias or alias ARN",
                         "pass e.g. --kms-key alias/my-key, a key id (1234abcd-12ab-34cd-56ef-1234567890ab) or "
                         "arn:aws:kms:<region>:<account>:key/<key id>")
    if match is not None and match["region"] != region:
        raise UsageError(f"--kms-key is in {match['region']} but the endpoint is in {region}",
                         f"pass a key of {region} (KMS keys are regional) or --region {match['region']}")
    if match is not None and partition_of(region) not in (None, match["partition"]):
        raise UsageError(f"--kms-key is in partition {match['partition']} but region {region} is in "
                         f"{partition_of(region)}", "pass a key ARN of the region's partition")
    return text


# an S3 bucket name's characters (lower-case letters, digits, '.' and '-', a letter or digit at both ends; S3 itself
# also wants 3 or more, which it says when asked: a short placeholder such as s3://b/p still plans a --dry-run) and
# a key prefix of printable characters
_S3_URI = re.compile(r"^s3://(?P<bucket>[a-z0-9](?:[a-z0-9.-]{0,61}[a-z0-9])?)(?:/(?P<prefix>[^\s]*))?$")


def parse_s3_prefix(value: str, *, flag: str) -> tuple[str, str]:
    """s3://BUCKET/PREFIX -> (bucket, prefix without slashes at either end); one line naming the fix otherwise."""
    match = _S3_URI.match((value or "").strip())
    if match is None or ".." in match["bucket"]:
        raise UsageError(f"{flag} {value!r} is not an S3 location", f"pass {flag} s3://BUCKET/PREFIX")
    prefix = (match["prefix"] or "").strip("/")
    if not prefix:
        raise UsageError(f"{flag} {value!r} names a bucket but no prefix",
                         f"pass {flag} s3://{match['bucket']}/PREFIX (a folder of its own)")
    return match["bucket"], prefix
