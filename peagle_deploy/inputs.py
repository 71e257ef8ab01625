"""Validation of user-supplied values, each failure one UsageError (exit 2) naming the fix.

Limits are SageMaker's own: names 63 chars matching ^[a-zA-Z0-9](-*[a-zA-Z0-9])*$, container environment
values 1024 bytes and at most 100 variables, tags 128/256 chars and at most 50 per resource.
"""

from __future__ import annotations

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
RESERVED_TAG_PREFIXES = ("aws:", "peagle:")
TTL_MAX = timedelta(days=30)  # --ttl is parsed by durations.parse_duration


def validate_name(name: str) -> str:
    if len(name) > NAME_MAX:
        raise UsageError(f"name {name!r} is {len(name)} characters; SageMaker allows {NAME_MAX}",
                         "choose a shorter --name")
    if not NAME_RE.match(name):
        raise UsageError(f"name {name!r} breaks SageMaker's naming rules",
                         "use letters, digits and single or repeated hyphens, starting and ending with a letter or digit")
    return name


def validate_role_arn(arn: str) -> str:
    if not ROLE_ARN_RE.match(arn.strip()):
        raise UsageError(f"--role {arn!r} is not an IAM role ARN",
                         "pass arn:aws:iam::<12-digit account>:role/<name>")
    return arn.strip()


def parse_instance_count(value: int) -> int:
    if value < 1:
        raise UsageError(f"--instance-count must be at least 1, got {value}", "pass --instance-count 1 or more")
    return value


def _split_pair(raw: str, flag: str) -> tuple[str, str]:
    key, sep, value = raw.partition("=")
    if not sep or not key.strip():
        raise UsageError(f"{flag} {raw!r} is not KEY=VALUE", f"pass {flag} KEY=VALUE")
    return key.strip(), value


def parse_env(pairs: list[str]) -> dict[str, str]:
    env: dict[str, str] = {}
    for raw in pairs:
        key, value = _split_pair(raw, "--env")
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


def parse_tags(pairs: list[str]) -> dict[str, str]:
    tags: dict[str, str] = {}
    for raw in pairs:
        key, value = _split_pair(raw, "--tag")
        if key.lower().startswith(RESERVED_TAG_PREFIXES):
            raise UsageError(f"--tag key {key!r} uses a reserved prefix", "peagle: and aws: tags are set by peagle or AWS")
        if len(key) > TAG_KEY_MAX or len(value) > TAG_VALUE_MAX:
            raise UsageError(f"--tag {key!r} is too long", f"keys up to {TAG_KEY_MAX}, values up to {TAG_VALUE_MAX} characters")
        if not TAG_TEXT_RE.match(key) or not TAG_TEXT_RE.match(value):
            raise UsageError(f"--tag {raw!r} has characters AWS tags do not allow",
                             "use letters, digits, spaces and _ . : / = + - @")
        tags[key] = value
    return tags
