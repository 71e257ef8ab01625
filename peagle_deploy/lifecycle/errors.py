"""Kept for older imports: AWS error classification lives in `peagle_deploy.aws`."""

from ..aws import is_already_exists, is_not_found, is_transient

__all__ = ["is_already_exists", "is_not_found", "is_transient"]
