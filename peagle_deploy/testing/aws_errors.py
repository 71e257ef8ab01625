"""AWS's JSON error answer (status, headers, body) as the emulator's own additions give it: the faults of every
action, the Pricing API and inference components. moto's own refusals keep moto's exceptions."""

from __future__ import annotations

import json


def json_error(status: int, code: str, message: str) -> tuple[int, dict[str, str], str]:
    """An awsJson-protocol error: `x-amzn-ErrorType` and `__type` carry `code`, which botocore reads as the
    ClientError's code."""
    return status, {"Content-Type": "application/x-amz-json-1.1", "x-amzn-ErrorType": code}, \
        json.dumps({"__type": code, "message": message})
