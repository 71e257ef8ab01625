"""peagle's own tags (`peagle:*`) as one typed model: written by the plan, read by status, cleanup and bench.

Reading is strict and never crashes: a value that cannot be read (an expiry without a time zone, a K that
is not a number) becomes a `problem` naming the tag, and the field stays unknown (None). Callers decide
what an unknown value means (cleanup --expired skips such an endpoint and says so; it never treats an
unreadable expiry as 'never expires' silently).
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from pydantic import BaseModel, Field

from .autoscale import AutoscalePolicy
from .scale_to_zero import IdleRule
from .tag_keys import LEASE, MANAGED, SWEEP_ID

_KEYS = {
    "managed": MANAGED, "model": "peagle:model", "model_id": "peagle:model-id", "mode": "peagle:mode",
    "k": "peagle:k", "instance_type": "peagle:instance-type", "instance_count": "peagle:instance-count",
    "created_at": "peagle:created-at", "expires_at": "peagle:expires-at", "version": "peagle:version",
    "sweep_id": SWEEP_ID, "autoscale": "peagle:autoscale", "endpoint": "peagle:endpoint",
    "hosting": "peagle:hosting", "components": "peagle:components", "scale_to_zero": "peagle:scale-to-zero",
    "regions_tried": "peagle:regions-tried", "copies_autoscale": "peagle:copies-autoscale",
}
# Intent tags: written on an endpoint before an update or a cleanup acts, cleared after it (lifecycle/intent.py);
# the lease: who works on a resource now, until when (lifecycle/lease.py). Never copied to another resource.
UPDATE_FROM, UPDATE_TO, UPDATE_AUTOSCALE, DELETING = (
    "peagle:update-from", "peagle:update-to", "peagle:update-autoscale", "peagle:deleting")
INTENT_KEYS = (UPDATE_FROM, UPDATE_TO, UPDATE_AUTOSCALE, DELETING, LEASE)


class PeagleTags(BaseModel):
    """The `peagle:*` tags of one resource."""

    managed: bool = False
    model: str | None = None
    model_id: str | None = None
    mode: str | None = None
    k: int | None = Field(default=None, description="None when speculation is off (written as 0)")
    instance_type: str | None = None
    instance_count: int | None = None
    created_at: datetime | None = None
    expires_at: datetime | None = None
    version: str | None = None
    sweep_id: str | None = Field(default=None, description="the `peagle sweep` that created it, if one did")
    autoscale: AutoscalePolicy | None = Field(default=None, description="the autoscaling peagle registered, if any")
    endpoint: str | None = Field(default=None, description="the endpoint a config or model was made for")
    hosting: str | None = Field(default=None, description="'component' for an endpoint that hosts inference "
                                                          "components (no tag: a classic endpoint)")
    components: list[str] = Field(default_factory=list, description="the inference components peagle made for it")
    scale_to_zero: IdleRule | None = Field(default=None, description="the idle rule peagle registered, if any")
    copies_autoscale: AutoscalePolicy | None = Field(default=None, description="an inference component's "
                                                     "--autoscale: its copies' range and target (peagle:autoscale "
                                                     "is a variant's instances)")
    regions_tried: list[str] = Field(default_factory=list, description="a `--region A,B` deploy: the regions it "
                                     "tried up to this resource's, in order (lifecycle/region_search.py)")
    problems: list[str] = Field(default_factory=list, description="tags that were present but unreadable")

    def to_aws(self) -> dict[str, str]:
        """Key -> value, as SageMaker stores them (managed=true, K=0 for off, ISO 8601 times in UTC)."""
        values: dict[str, Any] = {
            "managed": "true" if self.managed else None, "model": self.model, "model_id": self.model_id,
            "mode": self.mode, "k": str(self.k or 0) if self.mode else None, "instance_type": self.instance_type,
            "instance_count": None if self.instance_count is None else str(self.instance_count),
            "created_at": _write_time(self.created_at), "expires_at": _write_time(self.expires_at),
            "version": self.version, "sweep_id": self.sweep_id,
            "autoscale": self.autoscale.to_tag() if self.autoscale else None, "endpoint": self.endpoint,
            "hosting": self.hosting, "components": " ".join(self.components) or None,
            "scale_to_zero": self.scale_to_zero.to_tag() if self.scale_to_zero else None,
            "regions_tried": " ".join(self.regions_tried) or None,
            "copies_autoscale": self.copies_autoscale.to_tag() if self.copies_autoscale else None,
        }
        return {_KEYS[field]: value for field, value in values.items() if value is not None}

    @classmethod
    def from_aws(cls, tags: dict[str, str] | list[dict[str, str]] | None) -> PeagleTags:
        """Parse a resource's tags (dict or SageMaker's [{'Key','Value'}] list); never raises."""
        if isinstance(tags, list):
            tags = {t["Key"]: t["Value"] for t in tags}
        tags = tags or {}
        problems: list[str] = []
        raw = {field: tags.get(key) for field, key in _KEYS.items()}
        return cls(
            managed=(raw["managed"] or "").strip().lower() == "true",
            model=raw["model"], model_id=raw["model_id"], mode=raw["mode"], version=raw["version"],
            sweep_id=raw["sweep_id"], endpoint=raw["endpoint"], hosting=raw["hosting"],
            components=(raw["components"] or "").split(), regions_tried=(raw["regions_tried"] or "").split(),
            scale_to_zero=_read_idle(raw["scale_to_zero"], problems),
            instance_type=raw["instance_type"],
            k=_read_int("k", raw["k"], problems, zero_is_none=True),
            instance_count=_read_int("instance_count", raw["instance_count"], problems),
            created_at=_read_time("created_at", raw["created_at"], problems),
            expires_at=_read_time("expires_at", raw["expires_at"], problems),
            autoscale=_read_autoscale(raw["autoscale"], problems),
            copies_autoscale=_read_autoscale(raw["copies_autoscale"], problems, key="copies_autoscale"),
            problems=problems,
        )

    def expired(self, now: datetime) -> bool | None:
        """True/False, or None when the expiry tag exists but could not be read."""
        if self.expires_at is None:
            return None if any(p.startswith(_KEYS["expires_at"]) for p in self.problems) else False
        return self.expires_at <= now


def is_managed(tags: dict[str, str] | list[dict[str, str]] | None) -> bool:
    return PeagleTags.from_aws(tags).managed


def _write_time(moment: datetime | None) -> str | None:
    if moment is None:
        return None
    if moment.tzinfo is None:
        raise ValueError("peagle tag times must carry a time zone")
    return moment.astimezone(UTC).isoformat()


def _read_time(field: str, value: str | None, problems: list[str]) -> datetime | None:
    if value is None or value == "":
        return None
    try:
        moment = datetime.fromisoformat(value.strip().replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        problems.append(f"{_KEYS[field]} {value!r} is not an ISO 8601 time")
        return None
    if moment.tzinfo is None:
        problems.append(f"{_KEYS[field]} {value!r} has no time zone (write e.g. {value}+00:00)")
        return None
    return moment.astimezone(UTC)


def _read_autoscale(value: str | None, problems: list[str], key: str = "autoscale") -> AutoscalePolicy | None:
    if value is None or value == "":
        return None
    try:
        return AutoscalePolicy.from_tag(value)
    except ValueError:  # pydantic's ValidationError is a ValueError too
        problems.append(f"{_KEYS[key]} {value!r} is not MIN:MAX METRIC=TARGET")
        return None


def _read_idle(value: str | None, problems: list[str]) -> IdleRule | None:
    if value is None or value == "":
        return None
    try:
        return IdleRule.from_tag(value)
    except ValueError:
        problems.append(f"{_KEYS['scale_to_zero']} {value!r} is not MINUTESm (e.g. 15m)")
        return None


def _read_int(field: str, value: str | None, problems: list[str], *, zero_is_none: bool = False) -> int | None:
    if value is None or value == "":
        return None
    text = value.strip()
    if not text.isdigit():
        problems.append(f"{_KEYS[field]} {value!r} is not a whole number")
        return None
    number = int(text)
    return None if zero_is_none and number == 0 else number
