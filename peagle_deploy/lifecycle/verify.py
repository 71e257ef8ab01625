"""After InService: prove that what SageMaker holds is what the plan asked for.

Users have been burned by the speculative config and the drafter channel being silently dropped,
and by JumpStart deploying another instance type than asked; each is checked against the live
resources, not the request we sent.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

from pydantic import BaseModel

from ..errors import EndpointFailed
from ..plan import DeploymentPlan
from ..speculative import DRAFTER_CHANNEL, ENV_VAR


class Check(BaseModel):
    name: str
    ok: bool
    expected: Any = None
    actual: Any = None
    detail: str | None = None
    warnings: list[str] = []


def _json_or_text(value: str | None) -> Any:
    if value is None:
        return None
    try:
        return json.loads(value)
    except ValueError:
        return value


def vllm_startup(logs: Any, plan: DeploymentPlan, *, sleep: Callable[[float], None] = time.sleep) -> Check:
    """What vLLM logged at start (CloudWatch): version, runner, parsed config. Informational: never fails."""
    from .startup_log import read_cloudwatch

    expected = json.loads(plan.speculative_config) if plan.speculative_config else None
    info = read_cloudwatch(logs, plan.endpoint_name, expected=expected, sleep=sleep)
    return Check(name="vLLM start-up", ok=True, expected=expected, actual=info.model_dump(exclude={"warnings"}),
                 detail=info.summary(), warnings=info.warnings)


def verify(sm: Any, plan: DeploymentPlan, logs: Any = None, *, sleep: Callable[[float], None] = time.sleep,
           read: Callable[[Callable[[], Any]], Any] = lambda call: call()) -> list[Check]:
    """`read` wraps each describe (deploy passes `wait.read_retrying`: a transient error is asked again)."""
    model = read(lambda: sm.describe_model(ModelName=plan.create_model["ModelName"]))
    container = model.get("PrimaryContainer", {})
    env = container.get("Environment", {})
    channels = {c.get("ChannelName"): c for c in container.get("AdditionalModelDataSources", [])}
    drafter = channels.get(DRAFTER_CHANNEL)
    expected_uri = plan.drafter_channel["S3DataSource"]["S3Uri"] if plan.drafter_channel else None
    config = read(lambda: sm.describe_endpoint_config(
        EndpointConfigName=plan.create_endpoint_config["EndpointConfigName"]))
    variants = config.get("ProductionVariants", [])
    checks = [
        Check(name="speculative config", ok=_json_or_text(env.get(ENV_VAR)) == _json_or_text(plan.speculative_config),
              expected=plan.speculative_config, actual=env.get(ENV_VAR)),
        Check(name="drafter channel", ok=(drafter["S3DataSource"]["S3Uri"] if drafter else None) == expected_uri,
              expected=expected_uri, actual=drafter["S3DataSource"]["S3Uri"] if drafter else None),
        Check(name="instance type", ok=[v.get("InstanceType") for v in variants] == [plan.instance_type],
              expected=plan.instance_type, actual=[v.get("InstanceType") for v in variants]),
    ]
    checks.extend(network_checks(plan, model, config))
    if logs is not None:
        checks.append(vllm_startup(logs, plan, sleep=sleep))
    return checks


def network_checks(plan: DeploymentPlan, model: dict[str, Any], config: dict[str, Any]) -> list[Check]:
    """--subnet/--security-group and --kms-key as SageMaker holds them (checked only when asked for)."""
    checks = []
    if plan.vpc_config:
        held = model.get("VpcConfig") or {}
        expected = {key: sorted(values) for key, values in plan.vpc_config.items()}
        actual = {key: sorted(held.get(key) or []) for key in expected}
        checks.append(Check(name="VPC config", ok=actual == expected, expected=expected, actual=held or None))
    if plan.kms_key_id:
        checks.append(Check(name="volume KMS key", ok=config.get("KmsKeyId") == plan.kms_key_id,
                            expected=plan.kms_key_id, actual=config.get("KmsKeyId")))
    return checks


def require(checks: list[Check]) -> None:
    failed = [c for c in checks if not c.ok]
    if failed:
        what = "; ".join(f"{c.name}: expected {c.expected!r}, found {c.actual!r}" for c in failed)
        raise EndpointFailed(f"verification failed: {what}", "the endpoint does not run what was planned")
