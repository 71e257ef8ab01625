"""Intent before action: what an update or a cleanup is about to do, written on the endpoint's own tags before
its first write and cleared after its last, so any peagle on any machine (`peagle status`, `peagle recover`)
can finish it after a signal, a SIGKILL or a lost answer.

- an update: `peagle:update-from` (the config it moves from), `peagle:update-to` (the one it moves to; unique per
  update, so it also says whose intent it is) and `peagle:update-autoscale` (the autoscaling to hold after it:
  the `peagle:autoscale` form, or `none`);
- a cleanup: `peagle:deleting` (when it was asked) on each endpoint before DeleteEndpoint.

Each is written with the lease of the command at work (`lifecycle.lease`): while it is fresh, nobody else acts on
the intent.

SageMaker's tag limits: keys up to 128 characters, values up to 256 of letters, digits, spaces and
`_ . : / = + - @`; endpoint config names (63 characters of letters, digits and `-`) and the autoscale form fit.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from pydantic import BaseModel

from ..autoscale import AutoscalePolicy
from ..inputs import TAG_KEY_MAX, TAG_VALUE_MAX, is_tag_text
from ..tag_keys import LEASE
from ..tags import DELETING, UPDATE_AUTOSCALE, UPDATE_FROM, UPDATE_TO

NO_AUTOSCALING = "none"


def recover_command(name: str, region: str) -> str:
    """The one command that finishes whatever an interrupted update, cleanup or sweep teardown left."""
    return f"peagle recover {name} --region {region}"


class UpdateIntent(BaseModel):
    from_config: str
    to_config: str
    autoscale: AutoscalePolicy | None = None
    autoscale_known: bool = True  # False: the tag was missing or unreadable (keep what the endpoint has)

    def to_tags(self) -> dict[str, str]:
        tags = {UPDATE_FROM: self.from_config, UPDATE_TO: self.to_config,
                UPDATE_AUTOSCALE: self.autoscale.to_tag() if self.autoscale else NO_AUTOSCALING}
        for key, value in tags.items():
            _check(key, value)
        return tags


def read_update_intent(tags: dict[str, str]) -> UpdateIntent | None:
    """The unfinished update recorded on an endpoint's tags, or None."""
    source, target = tags.get(UPDATE_FROM), tags.get(UPDATE_TO)
    if not source or not target:
        return None
    raw = tags.get(UPDATE_AUTOSCALE)
    if raw == NO_AUTOSCALING:
        return UpdateIntent(from_config=source, to_config=target, autoscale=None)
    try:
        policy = AutoscalePolicy.from_tag(raw) if raw else None
    except ValueError:
        policy = None
    return UpdateIntent(from_config=source, to_config=target, autoscale=policy, autoscale_known=policy is not None)


def deletion_requested(tags: dict[str, str]) -> bool:
    return bool(tags.get(DELETING))


def write_update_intent(sm: Any, arn: str, intent: UpdateIntent, lease: dict[str, str] | None = None) -> None:
    """The intent, with the update's lease (`lifecycle.lease`) in the same AddTags."""
    tags = {**intent.to_tags(), **(lease or {})}
    sm.add_tags(ResourceArn=arn, Tags=[{"Key": k, "Value": v} for k, v in tags.items()])


def clear_update_intent(sm: Any, arn: str) -> None:
    """The intent and whoever's lease held it: the update is settled."""
    sm.delete_tags(ResourceArn=arn, TagKeys=[UPDATE_FROM, UPDATE_TO, UPDATE_AUTOSCALE, LEASE])


def write_deletion_request(sm: Any, arn: str, now: datetime | None = None,
                           lease: dict[str, str] | None = None) -> None:
    moment = (now or datetime.now(UTC)).astimezone(UTC).replace(microsecond=0).isoformat()
    _check(DELETING, moment)
    tags = {DELETING: moment, **(lease or {})}
    sm.add_tags(ResourceArn=arn, Tags=[{"Key": k, "Value": v} for k, v in tags.items()])


def _check(key: str, value: str) -> None:
    """A tag SageMaker would refuse is a bug here, never a half-written intent at run time."""
    if len(key) > TAG_KEY_MAX or len(value) > TAG_VALUE_MAX or not is_tag_text(value):
        raise ValueError(f"tag {key}={value!r} breaks SageMaker's tag limits")
