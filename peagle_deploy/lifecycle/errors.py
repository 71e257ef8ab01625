"""Classifying AWS errors for the lifecycle: 'it is not there' versus everything else."""

from __future__ import annotations

from ..aws import error_code, error_message

_NOT_FOUND_CODES = {"ResourceNotFound", "ResourceNotFoundException", "NotFound"}


def is_not_found(exc: BaseException) -> bool:
    """SageMaker answers a describe/delete of a missing resource with ValidationException 'Could not find'."""
    code = error_code(exc)
    if code in _NOT_FOUND_CODES:
        return True
    return code == "ValidationException" and "could not find" in error_message(exc).lower()
