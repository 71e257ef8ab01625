"""`--region us-east-1,us-west-2`: a deploy tried region by region, in the order given.

In each region the plan is built for that region by the one plan builder (its spec and image, price, quota) and
deployed with `capacity.deploy_with_replan`. Only one failure moves on to the next region: no pool can serve
there (SageMaker's capacity failure after it tried every pool, or a quota refusal with no type left: QuotaError,
exit 4), raised after the rollback, and checked: nothing of the attempt is left in that region. Every other
failure (a crashed container, a bad config, credentials, an interruption) stops at once, as a one-region deploy
does. docs/capacity.md, "Several regions".
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..errors import PeagleError, QuotaError, UsageError
from ..pools import CAPACITY_REASON_PREFIX

REGION_SEPARATOR = ","
_REGION = re.compile(r"^[a-z]{2}(?:-[a-z]+)+-[0-9]+\Z")


def is_region_name(text: str) -> bool:
    return bool(_REGION.match(text))


def parse_regions(value: str | None, default: str) -> list[str]:
    """`--region` as an ordered list: one region (today's flag) or several separated by commas, each once."""
    if value is None:
        return [default]
    if REGION_SEPARATOR not in value:  # one region: as before the list existed (the plan's checks judge it)
        return [value]
    from ..inputs import read_list

    regions = read_list(value, "--region", "us-east-1,us-west-2")  # commas without spaces, no empty entry
    fix = "pass --region us-east-1,us-west-2 (regions in the order to try, separated by commas)"
    for region in regions:
        if not _REGION.match(region):
            raise UsageError(f"--region {value!r}: {region!r} is not an AWS region name", fix)
    twice = sorted({r for r in regions if regions.count(r) > 1})
    if twice:
        raise UsageError(f"--region lists {twice[0]} twice", "list each region once, in the order to try")
    return regions


@dataclass
class Attempt:
    """One region's try: `outcome` is 'deployed', 'no capacity' or 'no quota'; `detail` says why."""

    region: str
    outcome: str
    detail: str


def no_room(error: PeagleError) -> tuple[str, str] | None:
    """('no capacity' | 'no quota', what SageMaker or Service Quotas said) when `error` means that no pool of the
    plan can serve in its region; None for every other failure."""
    if not isinstance(error, QuotaError):
        return None
    at = error.message.find(CAPACITY_REASON_PREFIX)
    if at >= 0:
        return "no capacity", error.message[at:].rstrip(".")
    return "no quota", error.message.rstrip(".")


def attempt_line(attempt: Attempt, kind: str, following: str) -> str:
    """`us-east-1: no ml.g7e capacity (SageMaker: "..."); rolled back, nothing left there; trying us-west-2`."""
    said = f'SageMaker: "{attempt.detail}"' if attempt.outcome == "no capacity" else attempt.detail
    what = attempt.outcome.replace("no ", f"no {kind} ", 1)
    return f"{attempt.region}: {what} ({said}); rolled back, nothing left there; trying {following}"


def family(types: list[str]) -> str:
    """'ml.g7e' for the types' common family, else 'instance'."""
    families = {".".join(t.split(".")[:2]) for t in types if t}
    return families.pop() if len(families) == 1 else "instance"


def try_regions(regions: list[str], attempt: Callable[[str], Any], *, left_behind: Callable[[str], list[str]],
                kind: Callable[[], str], on_note: Callable[[str], None]) -> tuple[Any, list[Attempt]]:
    """`attempt(region)` for each region in order until one deploys: (its result, every attempt). A region moves
    on to the next only when `no_room` says so and `left_behind(region)` finds nothing of the attempt there;
    anything else is raised as it is. The last region's failure names every attempt."""
    attempts: list[Attempt] = []
    for index, region in enumerate(regions):
        try:
            result = attempt(region)
        except PeagleError as error:
            room = no_room(error)
            if room is None or left_behind(region):
                raise
            attempts.append(Attempt(region, *room))
            if index + 1 < len(regions):
                on_note(attempt_line(attempts[-1], kind(), regions[index + 1]))
                continue
            tried = "; ".join(f"{a.region}: {a.outcome} ({a.detail})" for a in attempts)
            raise QuotaError(f"no region of {', '.join(regions)} can serve this deploy ({tried}); rolled back, "
                             "nothing left in any of them", "list other --region values, or try again later") \
                from None
        attempts.append(Attempt(region, "deployed", f"serving in {region}"))
        return result, attempts
    raise AssertionError("unreachable")
