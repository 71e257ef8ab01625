"""Removing what the contract tier made, with peagle's own cleanup and nothing else, restricted to the tier's names.

`remove(account, stack)` runs at the end of every run (its stack, even when the run failed), `sweep(account)` at
the end of the session or module (everything of this session's prefix that is still there). Both call
`peagle_deploy.lifecycle.cleanup` (what `peagle cleanup NAME --yes` calls) on each name that starts with the given
one: the endpoints first (their components, scaling and alarms go first, in SageMaker's order), then components
left without an endpoint (peagle's cleanup of the endpoint's name removes them), then configs and models. Whatever
is still there afterwards comes back as `Leftover`s, each with the exact command that removes it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .account import Account

COPY_DIMENSION = "sagemaker:inference-component:DesiredCopyCount"


@dataclass(frozen=True)
class Leftover:
    kind: str
    name: str
    command: str

    def __str__(self) -> str:
        return f"{self.kind} {self.name}: {self.command}"


def _ours(name: str, start: str) -> bool:
    return name == start or name.startswith(start if start.endswith("-") else start + "-")


def _names(account: Account, start: str) -> dict[str, list[Any]]:
    """Everything of the region whose name starts with `start`: endpoints, configs, models, components (name and
    endpoint), alarms, scalable targets."""
    sm = account.client("sagemaker")
    found: dict[str, list[Any]] = {}
    for kind, paginator, key, field in (("endpoint", "list_endpoints", "Endpoints", "EndpointName"),
                                        ("endpoint_config", "list_endpoint_configs", "EndpointConfigs",
                                         "EndpointConfigName"),
                                        ("model", "list_models", "Models", "ModelName")):
        found[kind] = sorted(item[field] for page in sm.get_paginator(paginator).paginate(NameContains=start)
                             for item in page.get(key, []) if _ours(item[field], start))
    found["inference_component"] = sorted(
        (item["InferenceComponentName"], item.get("EndpointName", ""))
        for page in sm.get_paginator("list_inference_components").paginate(NameContains=start)
        for item in page.get("InferenceComponents", []) if _ours(item["InferenceComponentName"], start))
    cloudwatch = account.client("cloudwatch")
    found["alarm"] = sorted(
        alarm["AlarmName"]
        for prefix in (f"peagle-wake-up-{start}", f"peagle-idle-{start}", f"TargetTracking-inference-component/{start}")
        for page in cloudwatch.get_paginator("describe_alarms").paginate(AlarmNamePrefix=prefix)
        for alarm in page.get("MetricAlarms", []))
    aas = account.client("application-autoscaling")
    found["scalable_target"] = sorted(
        target["ResourceId"]
        for page in aas.get_paginator("describe_scalable_targets").paginate(ServiceNamespace="sagemaker")
        for target in page.get("ScalableTargets", [])
        if _ours(target["ResourceId"].removeprefix("inference-component/"), start)
        and target["ResourceId"].startswith("inference-component/"))
    return found


def _peagle_cleanup(account: Account, name: str) -> str | None:
    """`peagle cleanup NAME --yes`'s library call; its failure in one line (None when it did its part)."""
    from peagle_deploy import lifecycle
    from peagle_deploy.errors import PeagleError

    try:
        report = lifecycle.cleanup(account.session, name)
    except PeagleError as exc:
        return exc.message
    except Exception as exc:  # noqa: BLE001 - an AWS error peagle did not translate: the sweep reports what is left
        return f"{type(exc).__name__}: {exc}"
    for outcome in report.outcomes:
        if outcome.kind == "endpoint" and outcome.result in ("deleted", "already gone"):
            account.meter.end(outcome.name, account.now())
    return report.error.message if report.error else None


def _remove_matching(account: Account, start: str) -> tuple[list[Leftover], list[str]]:
    failures: list[str] = []
    found = _names(account, start)
    for endpoint in found["endpoint"]:
        if (why := _peagle_cleanup(account, endpoint)) is not None:
            failures.append(f"peagle cleanup {endpoint}: {why}")
    stranded = _names(account, start)["inference_component"]
    for host in sorted({endpoint for _, endpoint in stranded if endpoint}):
        if (why := _peagle_cleanup(account, host)) is not None:
            failures.append(f"peagle cleanup {host}: {why}")
    rest = _names(account, start)
    for name in sorted(set(rest["endpoint_config"]) | set(rest["model"])):  # a stack's name before its '-...' ones
        if _exists(account, name) and (why := _peagle_cleanup(account, name)) is not None:
            failures.append(f"peagle cleanup {name}: {why}")
    return leftovers(account, start), failures


def _exists(account: Account, name: str) -> bool:
    """A config or a model of that name is still there (an earlier cleanup of its stack may have removed it)."""
    from peagle_deploy.describe import describe

    sm = account.client("sagemaker")
    return describe(sm, "endpoint_config", name) is not None or describe(sm, "model", name) is not None


def leftovers(account: Account, start: str) -> list[Leftover]:
    """What of `start`'s names is still there, each with the command that removes it."""
    where = f"--region {account.region}"
    found = _names(account, start)
    left = [Leftover(kind, name, f"peagle cleanup {name} {where} --yes")
            for kind in ("endpoint", "endpoint_config", "model") for name in found[kind]]
    left += [Leftover("inference_component", name, f"peagle cleanup {endpoint or name} {where} --yes")
             for name, endpoint in found["inference_component"]]
    left += [Leftover("alarm", name, f"aws cloudwatch delete-alarms {where} --alarm-names '{name}'")
             for name in found["alarm"]]
    left += [Leftover("scalable_target", resource,
                      f"aws application-autoscaling deregister-scalable-target {where} --service-namespace sagemaker "
                      f"--scalable-dimension {COPY_DIMENSION} --resource-id {resource}")
             for resource in found["scalable_target"]]
    return left


def remove(account: Account, stack: str) -> list[Leftover]:
    """A run's stack and everything named after it, by peagle's cleanup; what is left (the session's sweep tries
    again). Never raises: a run's own failure is the one to report."""
    try:
        left, _ = _remove_matching(account, stack)
    except Exception:  # noqa: BLE001 - the sweep at the end lists and removes whatever this left
        return []
    return left


def sweep(account: Account) -> tuple[list[Leftover], list[str]]:
    """Everything of this session's prefix: (what is left, each with its command; peagle cleanup's failures)."""
    return _remove_matching(account, account.prefix)
