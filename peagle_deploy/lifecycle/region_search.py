"""Where a deploy's resources are: `status`, `recover` and `cleanup` over every region a deploy used.

A `--region us-east-1,us-west-2` deploy tags what it creates in each region with `peagle:regions-tried`: the
regions it tried up to that one, in order (`PeagleTags.regions_tried`). The tag is on AWS, so any peagle on any
machine reads it; an interrupted attempt's model and config carry it too (and its lease, `lifecycle.lease`).

`status`, `recover` and `cleanup` take `--region` as deploy does (one region, or several separated by commas)
and look in each listed region in order, then in every region that the tags of what they found there name and
that they have not looked in yet, until none is new. A region where nothing of peagle's (of NAME's) is found is
said in one line: `checked us-east-1: nothing of peagle's`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TypeVar

Found = TypeVar("Found")


def search_regions(listed: list[str], look: Callable[[str], Found],
                   named: Callable[[Found], Iterable[str]]) -> list[tuple[str, Found]]:
    """(region, what `look(region)` found) for each listed region in order, then for each region `named` (the
    tags of what was found) says that was not looked in yet, in the order they were named."""
    queue = list(listed)
    done: list[tuple[str, Found]] = []
    while queue:
        region = queue.pop(0)
        found = look(region)
        done.append((region, found))
        seen = {r for r, _ in done} | set(queue)
        queue += [r for r in dict.fromkeys(named(found)) if r not in seen]
    return done


def nothing_line(region: str, name: str | None = None) -> str:
    """What a region search says of a region where it found nothing: of NAME's, when a NAME was asked for (other
    peagle endpoints may well be there), else of peagle's."""
    if name:
        return f"checked {region}: no endpoint named {name} and nothing peagle made for it"
    return f"checked {region}: nothing of peagle's"


def tagged_regions(*groups: Iterable[object]) -> list[str]:
    """Every region the `regions_tried` of the given rows, leftovers or recoveries names, once, in order."""
    regions: list[str] = []
    for group in groups:
        for item in group:
            regions += [r for r in getattr(item, "regions_tried", []) or [] if r not in regions]
    return followable(regions)


def followable(regions: Iterable[str]) -> list[str]:
    """The entries of a tag that are AWS region names: a hand-edited tag sends no command to a made-up region."""
    from .regions import is_region_name

    return [r for r in regions if is_region_name(r)]
