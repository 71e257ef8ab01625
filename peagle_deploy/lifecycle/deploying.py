"""`lifecycle.deploy`: a plan of either hosting shape, by the module that deploys it (`apply.deploy_endpoint`
for a classic endpoint, `component_apply.deploy_component` for an inference component). A module of its own
because component_apply builds on apply's rollback: apply choosing between them would close a circle."""

from __future__ import annotations

from typing import Any

from ..plan import DeploymentPlan
from .apply import DeployResult


def deploy(plan: DeploymentPlan, session: Any, **options: Any) -> DeployResult:
    """Create, wait, verify (and scale) `plan`; every failure or signal rolls back (see the two modules)."""
    if plan.hosting == "component":
        from .component_apply import deploy_component

        return deploy_component(plan, session, **options)
    from .apply import deploy_endpoint

    return deploy_endpoint(plan, session, **options)
