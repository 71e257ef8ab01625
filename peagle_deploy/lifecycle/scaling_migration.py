"""Moving a scale-to-zero component from an older peagle's idle rule to AWS's recipe.

An older peagle took a `--scale-to-zero` component to zero with a rule of its own: target tracking's scale-in
disabled (or no target tracking at all), and a step policy `peagle-scale-to-zero` on a metric-math alarm
`peagle-idle-NAME` (`FILL(Invocations,0)+FILL(NoCapacityInvocationFailures,0) < 1`). No AWS source says Application
Auto Scaling acts on such an alarm; if it does not, the component never reaches zero and bills every hour. AWS's
recipe (scale_to_zero.py) scales in by target tracking itself.

`read_move` reads what Application Auto Scaling and CloudWatch hold for one component (reads only) and says what the
move writes, `apply_move` writes it; `peagle update NAME --scale-to-zero` (or any update of such an endpoint) and
`peagle recover NAME` call both. In order, so the component is never without a way to zero:
1. PutScalingPolicy `peagle-target-tracking`, scale-in on (the target it had with `--autoscale`, else the guide's);
2. DeleteScalingPolicy `peagle-scale-to-zero`;
3. DeleteAlarms `peagle-idle-NAME`, only if it carries `peagle:managed=true` (an alarm of that name that is not
   peagle's is never touched, and is said).
The scalable target and the wake-up policy and alarm are the same in both rules and stay. Idempotent: a move cut
short (a signal, a refused write) leaves something of the old rule, which the next `read_move` finds.
`scale_to_zero.scaling_from_live` is the pure part: the live target and policies -> the scaling AWS's recipe asks
for.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field

from ..autoscale import POLICY_NAME
from ..scale_to_zero import (
    COPY_DIMENSION,
    LEGACY_IDLE_POLICY,
    NAMESPACE,
    legacy_idle_alarm_name,
    resource_id,
    scaling_from_live,
)
from ..tags import PeagleTags


class ScalingMove(BaseModel):
    """What moving one component to AWS's rule writes (nothing is written to build it)."""

    component: str
    tracking: dict[str, Any] | None = Field(description="PutScalingPolicy: target tracking, scale-in on (None: the "
                                                        "component has no scalable target to attach it to)")
    delete_policy: bool = Field(description=f"the old step policy {LEGACY_IDLE_POLICY} is there")
    delete_alarm: str | None = Field(None, description="the old idle alarm, peagle's")
    foreign_alarm: str | None = Field(None, description="an alarm of the old name that is not peagle's: left")

    @property
    def writes(self) -> list[str]:
        rid = resource_id(self.component)
        found = []
        if self.tracking is not None:
            config = self.tracking["TargetTrackingScalingPolicyConfiguration"]
            metric = config["PredefinedMetricSpecification"]["PredefinedMetricType"]
            found.append(f"PutScalingPolicy {POLICY_NAME} on {rid} (target tracking on {metric}="
                         f"{config['TargetValue']:g}, scale-in on: AWS's recipe takes it to zero)")
        if self.delete_policy:
            found.append(f"DeleteScalingPolicy {LEGACY_IDLE_POLICY} on {rid} (an older peagle's idle rule)")
        if self.delete_alarm:
            found.append(f"DeleteAlarms {self.delete_alarm} (its metric-math idle alarm)")
        return found


def read_move(aas: Any, cloudwatch: Any, component: str) -> ScalingMove | None:
    """What moving `component` to AWS's rule writes; None when nothing of the old rule is there. Reads only."""
    from .components import metric_alarms, read_copy_scaling

    target, policies = read_copy_scaling(aas, component)
    alarms = metric_alarms(cloudwatch, legacy_idle_alarm_name(component))
    old_policy = any(p.get("PolicyName") == LEGACY_IDLE_POLICY for p in policies)
    if not old_policy and not alarms:
        return None
    ours = foreign = None
    for alarm in alarms:
        tags = cloudwatch.list_tags_for_resource(ResourceARN=alarm["AlarmArn"]).get("Tags", [])
        if PeagleTags.from_aws(tags).managed:
            ours = alarm["AlarmName"]
        else:
            foreign = alarm["AlarmName"]
    tracking = None
    if target is not None:
        scaling = scaling_from_live(component, target, policies)
        live = next((p.get("TargetTrackingScalingPolicyConfiguration") for p in policies
                     if p.get("PolicyName") == POLICY_NAME), None)
        wanted = next(r.body for r in scaling.requests([]) if r.step == "target_tracking")
        if live != wanted["TargetTrackingScalingPolicyConfiguration"]:
            tracking = wanted
    if not old_policy and ours is None and tracking is None:
        return None  # only someone else's alarm of that name: nothing of peagle's to move
    return ScalingMove(component=component, tracking=tracking, delete_policy=old_policy, delete_alarm=ours,
                       foreign_alarm=foreign)


def apply_move(aas: Any, cloudwatch: Any, move: ScalingMove) -> list[str]:
    """The move's writes in order (module docstring); what was done, one line each. A delete whose object is
    already gone counts as done."""
    from .autoscaling import _not_registered

    done = []
    if move.tracking is not None:
        aas.put_scaling_policy(**move.tracking)
        done.append(f"target tracking {POLICY_NAME} with scale-in on (AWS's recipe)")
    if move.delete_policy:
        try:
            aas.delete_scaling_policy(PolicyName=LEGACY_IDLE_POLICY, ServiceNamespace=NAMESPACE,
                                      ResourceId=resource_id(move.component), ScalableDimension=COPY_DIMENSION)
        except Exception as exc:  # noqa: BLE001 - gone already is done
            if not _not_registered(exc):
                raise
        done.append(f"the older idle policy {LEGACY_IDLE_POLICY} deleted")
    if move.delete_alarm:
        cloudwatch.delete_alarms(AlarmNames=[move.delete_alarm])
        done.append(f"the older idle alarm {move.delete_alarm} deleted")
    if move.foreign_alarm:
        done.append(f"alarm {move.foreign_alarm} left: not created by peagle (no peagle:managed tag)")
    return done


def describe_move(move: ScalingMove, endpoint: str) -> str:
    """One line for a plan or a note."""
    return (f"{endpoint} scales to zero by an older peagle's idle rule (a metric-math alarm, unconfirmed on AWS): "
            f"moved to AWS's recipe (target tracking's own scale-in, about 15 minutes)")


def move_endpoint(session: Any, sm: Any, described: dict[str, Any], peagle: PeagleTags) -> list[str]:
    """`peagle recover`'s step: the endpoint's component moved to AWS's rule where an older one is left; the lines
    of what was done (none when nothing was)."""
    from .component_status import component_of

    name = component_of(sm, described, peagle)
    if name is None:
        return []
    aas, cloudwatch = session.client("application-autoscaling"), session.client("cloudwatch")
    move = read_move(aas, cloudwatch, name)
    if move is None:
        return []
    return [f"scaling of {name} moved to AWS's recipe: " + "; ".join(apply_move(aas, cloudwatch, move))]


__all__ = ["ScalingMove", "apply_move", "describe_move", "move_endpoint", "read_move", "scaling_from_live"]
