"""Moved: the one rule for numbers is in `peagle_deploy.inputs` (with durations, choices, lists and names). These
names stay importable from here for code written against the old module."""

from .inputs import BOUNDS, MAX_CONCURRENCY, MAX_INSTANCES, MAX_K, Bound, check_params
from .inputs import check_number as check

__all__ = ["BOUNDS", "MAX_CONCURRENCY", "MAX_INSTANCES", "MAX_K", "Bound", "check", "check_params"]
