"""`peagle recover` of an endpoint peagle made for its own inference component: the deploy completed, from the plan
its tags and its model describe, or, where it cannot be, the whole stack removed.

A `--hosting component` (`--scale-to-zero`) deploy makes, in order, the model, the endpoint config, the endpoint, the
inference component, then its scaling (the scalable target, target tracking with scale-in, the wake-up policy and
alarm: scale_to_zero.py). Cut short in between (a SIGKILL, a closed laptop), it leaves an endpoint that bills: its
instances run for a component that is not there, or a component runs that never scales to zero. What the deploy
meant is on the endpoint's tags (`peagle:components`, `peagle:instance-count`: the copies, `peagle:scale-to-zero`,
`peagle:copies-autoscale`) and in the model peagle made for the component (its container and environment):

- no component (`create_missing`): deploy's own plan is built again (`plan.build_plan`, the request those describe,
  as `update` plans what serves now) and its CreateInferenceComponent sent with the endpoint's peagle tags; the
  component is waited for until InService and checked against the plan (the model it names, a copy's GPUs and
  memory), as deploy checks it;
- its scaling (`register_missing`): `ComponentScaling.missing` says which of the plan's requests Application Auto
  Scaling and CloudWatch do not hold as asked; those are sent, in order, and nothing else;
- where it cannot be completed (`Unfinishable`: the model is gone, the endpoint or the component Failed, the plan is
  refused), recover removes the whole stack in SageMaker's order, as the deploy's own rollback would have.

Idempotent: once the component and each request are there, nothing is written. A sweep's endpoint (its
components come and go with the sweep) is never completed here.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..errors import EndpointFailed, PeagleError, WaitTimeout
from ..scale_to_zero import WAKE_POLICY
from ..tags import INTENT_KEYS, PeagleTags
from .components import apply_scaling, read_registered, scaling_gap, wait_component
from .wait import Progress

Read = Callable[[Callable[[], Any]], Any]


class Unfinishable(Exception):
    """The deploy cannot be completed (why): recover removes what it made instead."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


def own_component(peagle: PeagleTags) -> str | None:
    """The component a deploy made this endpoint for (None: not one, or a sweep's host of many)."""
    if peagle.hosting != "component" or peagle.sweep_id or not peagle.components:
        return None
    return peagle.components[0]


def component_plan(sm: Any, name: str, described: dict[str, Any], raw_tags: dict[str, str], peagle: PeagleTags, *,
                   region: str, read: Read) -> Any:
    """Deploy's plan of the component `name` for this endpoint, built again from what the deploy left: the model
    peagle made for it (mode and K from its SM_VLLM_SPECULATIVE_CONFIG, the user's speculative keys, the tensor
    parallel degree), the endpoint config's instance type, and the tags (model, copies, scale to zero, --autoscale).
    Unfinishable when the model is gone or the plan is refused."""
    from ..describe import describe
    from ..hosting import TP_ENV, Hosting
    from ..plan import FactSource, PlanRequest, build_plan
    from ..pricing import instance_price
    from ..served_config import spec_of_environment
    from ..speculative import Mode
    from .update_plan import _user_speculative

    model = _model_for(sm, name, described["EndpointName"], read)
    if model is None:
        raise Unfinishable(f"no model peagle made for its component {name} is left")
    config = read(lambda: describe(sm, "endpoint_config", described["EndpointConfigName"])) or {}
    variant = next(iter(config.get("ProductionVariants") or []), {})
    container = model.get("PrimaryContainer") or {}
    environment = container.get("Environment") or {}
    served = spec_of_environment(environment)
    try:
        mode = Mode((served.mode if served.problem is None else peagle.mode) or Mode.P_EAGLE.value)
        k = served.k if served.problem is None else peagle.k
        env = {**_user_speculative(container, mode), **({TP_ENV: environment[TP_ENV]} if TP_ENV in environment
                                                       else {})}
        request = PlanRequest(
            model=peagle.model or "", model_id=peagle.model_id, model_version=_jumpstart_version(raw_tags),
            mode=mode, k=None if mode is Mode.OFF else k, name=name, instance_type=variant.get("InstanceType"),
            instance_count=peagle.instance_count or 1, allow_any_instance=True, region=region,
            role=model.get("ExecutionRoleArn") or config.get("ExecutionRoleArn"), accept_eula=True, env=env,
            allow_lossy=True, hosting=Hosting.COMPONENT, scale_to_zero=peagle.scale_to_zero,
            autoscale=peagle.copies_autoscale)
        # no price is needed to complete it: the shipped table, never the Pricing API
        facts = FactSource(price_lookup=lambda t, r, c: instance_price(t, r, count=c, offline=True))
        plan = build_plan(request, facts=facts, now=peagle.created_at)
    except (PeagleError, ValueError) as exc:
        why = exc.one_line() if isinstance(exc, PeagleError) else str(exc).splitlines()[0]
        raise Unfinishable(f"its deploy's plan cannot be built again ({why})") from None
    body = plan.create_inference_component
    # the component names the live model (an update's NAME-u... where one replaced the deploy's)
    return plan.model_copy(update={"create_inference_component": {
        **body, "Specification": {**body["Specification"], "ModelName": model["ModelName"]}}})


def _model_for(sm: Any, component: str, endpoint: str, read: Read) -> dict[str, Any] | None:
    """The model peagle made for the endpoint's component: the deploy's (named as the component), else the newest
    of those tagged for the endpoint's component (an update's `NAME-u...`); None when there is none."""
    from ..describe import describe
    from .components import _component_models

    found = read(lambda: describe(sm, "model", component))
    if found is not None:
        return found
    made = read(lambda: _component_models(sm, endpoint))
    described = [m for m in (read(lambda n=n: describe(sm, "model", n)) for n in made) if m is not None]
    return max(described, key=lambda m: (m.get("CreationTime") is not None, m.get("CreationTime") or 0), default=None)


def _jumpstart_version(raw_tags: dict[str, str]) -> str | None:
    """The JumpStart model version the deploy planned with: the SDK's attribution tag on the endpoint, if any."""
    from sagemaker.core.jumpstart.enums import JumpStartTag

    return raw_tags.get(JumpStartTag.MODEL_VERSION.value) or None


def create_missing(session: Any, sm: Any, name: str, described: dict[str, Any], raw_tags: dict[str, str],
                   peagle: PeagleTags, *, read: Read, timeout_s: float, sleep: Callable[[float], None],
                   clock: Callable[[], float], on_progress: Progress | None,
                   note: Callable[[str], None]) -> list[str]:
    """CreateInferenceComponent `name` from deploy's plan, then InService and checked; what was done, one line each.
    Unfinishable where it cannot be made or Failed."""
    from .component_apply import component_check

    plan = component_plan(sm, name, described, raw_tags, peagle, region=session.region, read=read)
    body = {**plan.create_inference_component, "Tags": _tag_list(raw_tags)}
    model = body["Specification"]["ModelName"]
    note(f"{described['EndpointName']} hosts no inference component: creating {name} from its deploy's plan")
    sm.create_inference_component(**body)
    done = [f"created inference component {name} (the deploy's plan: model {model}, "
            f"{_copies(body)}, {_per_copy(body)})"]
    settled = wait_for(sm, name, timeout_s=timeout_s, sleep=sleep, clock=clock, on_progress=on_progress,
                       endpoint=described["EndpointName"])
    check = component_check(plan, settled)
    done.append(f"inference component {name} {settled.get('InferenceComponentStatus')}; the model it names and a "
                f"copy's GPUs and memory against the plan: {check.line()}")
    return done


def wait_for(sm: Any, name: str, *, timeout_s: float, sleep: Callable[[float], None], clock: Callable[[], float],
             on_progress: Progress | None, endpoint: str) -> dict[str, Any]:
    """The component once InService; Unfinishable when it Failed (SageMaker's reason); a timeout says to run
    recover again."""
    try:
        return wait_component(sm, name, timeout_s=timeout_s, sleep=sleep, clock=clock, on_progress=on_progress)
    except EndpointFailed as exc:
        raise Unfinishable(exc.message) from None
    except WaitTimeout as exc:
        raise WaitTimeout(exc.message, f"SageMaker is still on it; run 'peagle recover {endpoint}' again "
                                       "later") from None


def register_missing(session: Any, name: str, raw_tags: dict[str, str], peagle: PeagleTags, *,
                     read: Read) -> list[str]:
    """The requests of the component's intended scaling that are not registered as asked, sent in order; one line
    saying what (none when all of it is there, or it asks for none)."""
    aas, cloudwatch = session.client("application-autoscaling"), session.client("cloudwatch")
    registered = read(lambda: read_registered(aas, cloudwatch, name))
    intended, missing = scaling_gap(name, peagle, registered)
    if intended is None or not missing:
        return []
    requests = [r for r in intended.requests(_tag_list(raw_tags)) if r.step in missing]
    wake = registered.policy(WAKE_POLICY).get("PolicyARN")
    apply_scaling(aas, cloudwatch, requests, arns={WAKE_POLICY: wake} if wake else None)
    there = [intended.step_label(step) for step in intended.steps if step not in missing]
    return [f"scaling of {name} registered: {', '.join(intended.step_label(step) for step in missing)}"
            + (f" (there already: {', '.join(there)})" if there else "")
            + f"; {intended.describe()}"]


def _tag_list(raw_tags: dict[str, str]) -> list[dict[str, str]]:
    """The endpoint's tags as its component and alarm carry them (peagle's and the user's), without the intent and
    the lease of work on the endpoint."""
    return [{"Key": k, "Value": v} for k, v in raw_tags.items() if k not in INTENT_KEYS]


def _copies(body: dict[str, Any]) -> str:
    copies = (body.get("RuntimeConfig") or {}).get("CopyCount", 1)
    return f"{copies} cop{'y' if copies == 1 else 'ies'}"


def _per_copy(body: dict[str, Any]) -> str:
    needs = (body.get("Specification") or {}).get("ComputeResourceRequirements") or {}
    return (f"{needs.get('NumberOfAcceleratorDevicesRequired', 0):g} GPU(s) and {needs.get('MinMemoryRequiredInMb')} "
            "MB per copy")


__all__ = ["Unfinishable", "component_plan", "create_missing", "own_component", "register_missing", "wait_for"]
