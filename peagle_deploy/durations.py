"""Moved: the one duration grammar is in `peagle_deploy.inputs` (with numbers, choices, lists and names). These
names stay importable from here for code written against the old module."""

from .inputs import DURATION_BOUNDS as BOUNDS
from .inputs import EXAMPLES, LONGEST, canonical_duration, format_duration, parse_duration

__all__ = ["BOUNDS", "EXAMPLES", "LONGEST", "canonical_duration", "format_duration", "parse_duration"]
