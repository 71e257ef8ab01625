"""When ml.g7e capacity or quota runs out: the quotas a plan's pools are held to, and the replan after a refusal.

- `QuotaReader`: the `FactSource` quota lookup (plan.py): each instance type's Service Quotas value
  '<type> for endpoint usage' and the instances of that type in use in the region (`quota.py`, pools counted).
  ListServiceQuotas and the endpoint scan are read once per command, whatever the number of types.
- `deploy_with_replan`: `deploying.deploy`, and when CreateEndpoint is refused with ResourceLimitExceeded naming one
  of the plan's instance pools (the quota was not readable, or was taken since the plan), the attempt is rolled
  back as any failure is (exactly what it created), the plan is made again without that type through the same
  builder (`replan`) and deployed, with one line saying why. A refusal with no pool left is exit 4. Every other
  failure, a capacity failure included (SageMaker already tried every pool), stops at once as `deploy` does.

The region failover (`regions.py`, `--region A,B`) wraps `deploy_with_replan` per region: it raises QuotaError
(exit 4) exactly when no pool of the plan can serve in that region (quota or capacity), after the rollback there.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..errors import PeagleError, QuotaError
from ..plan import DeploymentPlan
from ..pools import Quota, quota_refusal
from .apply import DeployResult
from .deploying import deploy
from .quota import instances_in_use_by_type, quota_name


class QuotaReader:
    """(instance type, region) -> Quota, for `FactSource(quota_lookup=...)`: one ListServiceQuotas and one scan of
    the region's endpoints, whatever the number of types asked. A read that fails leaves the quota unknown (the
    plan says so; CreateEndpoint refuses if it is short, and `deploy_with_replan` answers that)."""

    def __init__(self, session: Any):
        self.session = session
        self._limits: dict[str, float] | None = None
        self._used: dict[str, int] | None = None
        self._why: str = ""

    def __call__(self, instance_type: str, region: str) -> Quota:
        if region != self.session.region:
            return Quota(limit=None, detail=f"not read: the session is for {self.session.region}")
        limits = self._read_limits()
        name = quota_name(instance_type)
        if limits is None:
            return Quota(limit=None, detail=f"Service Quotas could not be read ({self._why})")
        if name not in limits:
            return Quota(limit=None, detail=f"Service Quotas lists no '{name}'")
        used = self._read_used(instance_type)
        return Quota(limit=limits[name], used=used, detail=f"Service Quotas '{name}'"
                     + ("" if used is not None else f"; instances in use unknown ({self._why})"))

    def _read_limits(self) -> dict[str, float] | None:
        from ..aws import translate_error

        if self._limits is None and not self._why:
            try:
                client = self.session.client("service-quotas")
                limits = {}
                for page in client.get_paginator("list_service_quotas").paginate(ServiceCode="sagemaker"):
                    for quota in page.get("Quotas", []):
                        limits[quota.get("QuotaName")] = float(quota["Value"])
                self._limits = limits
            except Exception as exc:  # any AWS failure: the quota is unknown
                error = translate_error(exc)
                if error is None:
                    raise
                self._why = error.one_line()
        return self._limits

    def _read_used(self, instance_type: str) -> int | None:
        from ..aws import translate_error

        if self._used is None:
            try:
                self._used = instances_in_use_by_type(self.session.client("sagemaker"),
                                                      self.session.client("application-autoscaling"))
            except Exception as exc:
                error = translate_error(exc)
                if error is None:
                    raise
                self._why = error.one_line()
                return None
        return self._used.get(instance_type, 0)


def still_there(session: Any, plan: DeploymentPlan) -> list[str]:
    """What of this plan's resources still exists after a rolled-back attempt (a retry needs their names free)."""
    from ..describe import describe

    sm = session.client("sagemaker")
    names = [("endpoint", plan.endpoint_name), ("endpoint_config", plan.endpoint_name), ("model", plan.endpoint_name)]
    names += [("model", body["ModelName"]) for body in plan.create_pool_models]
    return [f"{kind} {name}" for kind, name in names if describe(sm, kind, name) is not None]  # type: ignore[arg-type]


def refused_pool(error: PeagleError, plan: DeploymentPlan) -> tuple[str, float] | None:
    """(instance type, quota) when `error` is CreateEndpoint's quota refusal naming one of the plan's pools."""
    if not isinstance(error, QuotaError) or not plan.pools or "CreateEndpoint (" not in error.message:
        return None
    named = quota_refusal(error.message)
    return named if named is not None and named[0] in plan.pool_types else None


def deploy_with_replan(plan: DeploymentPlan, session: Any, *, replan: Callable[[list[str]], DeploymentPlan],
                       on_note: Callable[[str], None] | None = None, **deploy_args: Any) -> DeployResult:
    """`apply.deploy(plan)`; a quota refusal of one of its pools at CreateEndpoint: `replan(refused types)` and
    deploy again (module docstring). `replan` builds the same request without those types (same name)."""
    note = on_note or (lambda _line: None)
    refused: list[str] = []
    while True:
        try:
            return deploy(plan, session, on_note=on_note, **deploy_args)
        except QuotaError as error:
            named = refused_pool(error, plan)
            if named is None:
                raise
            instance_type, limit = named
            remaining = [t for t in plan.pool_types if t != instance_type]
            left = still_there(session, plan)
            if left:  # the rollback could not remove them: the names are not free for another attempt
                raise
            refused.append(instance_type)
            where = f"quota {limit:g} in {plan.region}"
            if not remaining:
                tried = ", ".join(refused)
                raise QuotaError(f"{instance_type}: {where}; no instance pool is left ({tried} refused for quota)",
                                 error.hint) from None
            plan = replan(refused)
            note(f"{instance_type}: {where}; deploying with {', '.join(plan.pool_types)}")
