"""What the contract scenarios build, through boto3 (every body checked against botocore's model by the suite):
models of the tier's image, component-based and classic endpoints, inference components, invocations. Every
resource carries peagle's tags (`Account.tags`), so peagle's own cleanup removes it, and its name starts with the
tier's prefix, so nothing else is touched.

The image is peagle's container in a minimal mode (tests/contract/Dockerfile: the shipped Dockerfile's entrypoint,
`python -m peagle_deploy.container`, with peagle's vLLM stand-in as `vllm`): it answers /ping and /invocations on
8080 and prints vLLM's start-up lines, and its answer names the model label it was started with, so a scenario can
tell which copy answered.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any

from .account import Account

VARIANT = "AllTraffic"
ROUTING = {"RoutingStrategy": "LEAST_OUTSTANDING_REQUESTS"}
# waits (seconds): bounded, as generous as a real account's minutes need; the emulator's pass in emulated time
ENDPOINT_TIMEOUT_S = 30 * 60
COMPONENT_TIMEOUT_S = 30 * 60
POLL_S = 30


def model_environment(label: str) -> dict[str, str]:
    """The minimal container's environment: peagle's entrypoint turns SM_VLLM_* into `vllm serve LABEL --port 8080
    --host 0.0.0.0` (the stand-in answers with LABEL as its model)."""
    return {"SM_VLLM_MODEL": label, "SM_VLLM_HOST": "0.0.0.0"}


def create_model(account: Account, name: str, stack: str, label: str | None = None) -> str:
    account.client("sagemaker").create_model(
        ModelName=name, ExecutionRoleArn=account.role_arn, Tags=account.tags(stack),
        PrimaryContainer={"Image": account.image, "Environment": model_environment(label or name)})
    return name


def memory_mb(account: Account, fraction: float) -> int:
    """`fraction` of the instance's memory, in MB (AWS's EC2 instance data, as the emulator reads it)."""
    from peagle_deploy.testing.component_emulation import hardware

    box = hardware(account.instance_type)
    if box is None:
        raise AssertionError(f"no memory figure for {account.instance_type} in AWS's EC2 instance data")
    return max(128, math.floor(box.memory_mib * fraction))


def component_endpoint(account: Account, stack: str, *, max_instances: int, min_instances: int = 1,
                       components: list[str] = ()) -> None:
    """A component-based endpoint `stack` (config of the same name: the instances only), InService."""
    sm = account.client("sagemaker")
    sm.create_endpoint_config(
        EndpointConfigName=stack, ExecutionRoleArn=account.role_arn, Tags=account.tags(stack),
        ProductionVariants=[{"VariantName": VARIANT, "InstanceType": account.instance_type,
                             "InitialInstanceCount": 1,
                             "ManagedInstanceScaling": {"Status": "ENABLED", "MinInstanceCount": min_instances,
                                                        "MaxInstanceCount": max_instances},
                             "RoutingConfig": dict(ROUTING)}])
    create_endpoint(account, stack, stack, tags=account.tags(stack, hosting="component", components=list(components)))


def create_endpoint(account: Account, name: str, config: str, *, tags: list[dict[str, str]] | None = None) -> dict:
    """CreateEndpoint, then wait for InService (a Failed endpoint fails the run with SageMaker's reason)."""
    sm = account.client("sagemaker")
    sm.create_endpoint(EndpointName=name, EndpointConfigName=config, Tags=tags or account.tags(name))
    account.meter.start(name, account.instance_type, account.now())
    return wait_endpoint(account, name, "InService")


def wait_endpoint(account: Account, name: str, *wanted: str, timeout_s: float = ENDPOINT_TIMEOUT_S) -> dict:
    sm = account.client("sagemaker")

    def settled() -> dict | None:
        described = sm.describe_endpoint(EndpointName=name)
        account.meter.saw(name, instances(described))
        status = described["EndpointStatus"]
        if status == "Failed" and "Failed" not in wanted:
            raise AssertionError(f"endpoint {name} Failed: {described.get('FailureReason')}")
        return described if status in wanted else None

    return account.wait(f"endpoint {name} {'/'.join(wanted)}", settled, timeout_s=timeout_s, every_s=POLL_S)


def instances(described_endpoint: dict) -> int:
    """The instances a DescribeEndpoint answer says run or start (the most of current and desired)."""
    variants = described_endpoint.get("ProductionVariants") or []
    return sum(max(int(v.get("CurrentInstanceCount") or 0), int(v.get("DesiredInstanceCount") or 0))
               for v in variants)


def current_instances(account: Account, endpoint: str) -> int:
    described = account.client("sagemaker").describe_endpoint(EndpointName=endpoint)
    account.meter.saw(endpoint, instances(described))
    return sum(int(v.get("CurrentInstanceCount") or 0) for v in described.get("ProductionVariants") or [])


def create_component(account: Account, name: str, endpoint: str, model: str, *, memory: int, copies: int = 1,
                     wait: bool = True) -> dict | None:
    """CreateInferenceComponent (the ModelName form, as peagle's), then (with `wait`) InService."""
    account.client("sagemaker").create_inference_component(
        InferenceComponentName=name, EndpointName=endpoint, VariantName=VARIANT, Tags=account.tags(endpoint),
        Specification={"ModelName": model, "ComputeResourceRequirements": {"MinMemoryRequiredInMb": memory}},
        RuntimeConfig={"CopyCount": copies})
    return wait_component(account, name) if wait else None


def describe_component(account: Account, name: str) -> dict | None:
    from peagle_deploy.lifecycle.components import describe_component as describe

    return describe(account.client("sagemaker"), name)


def wait_component(account: Account, name: str, *wanted: str, timeout_s: float = COMPONENT_TIMEOUT_S) -> dict:
    """Until the component is in one of `wanted` (InService by default; "gone": deleted), Failed failing the run."""
    wanted = wanted or ("InService",)

    def settled() -> dict | None:
        described = describe_component(account, name)
        if described is None:
            return {"InferenceComponentStatus": "gone"} if "gone" in wanted else None
        status = described["InferenceComponentStatus"]
        if status == "Failed" and "Failed" not in wanted:
            raise AssertionError(f"inference component {name} Failed: {described.get('FailureReason')}")
        return described if status in wanted else None

    found = account.wait(f"inference component {name} {'/'.join(wanted)}", settled, timeout_s=timeout_s,
                         every_s=POLL_S)
    if found.get("InferenceComponentStatus") == "InService":
        account.container_output(found["EndpointName"], name, found["Specification"]["ModelName"])
    return found


def wait_copies(account: Account, name: str, count: int, timeout_s: float = COMPONENT_TIMEOUT_S) -> dict:
    """Until the component is InService with `count` copies current and desired (a copy-count change done)."""
    def settled() -> dict | None:
        described = describe_component(account, name)
        done = described and described["InferenceComponentStatus"] == "InService" and copies(described) == (count,
                                                                                                          count)
        return described if done else None

    return account.wait(f"inference component {name} at {count} copies", settled, timeout_s=timeout_s,
                        every_s=POLL_S)


def copies(described_component: dict) -> tuple[int, int]:
    """(current, desired) copies of a DescribeInferenceComponent answer."""
    runtime = described_component.get("RuntimeConfig") or {}
    return int(runtime.get("CurrentCopyCount") or 0), int(runtime.get("DesiredCopyCount") or 0)


@dataclass(frozen=True)
class Answer:
    """One invocation: answered (the model label that answered) or refused (SageMaker's code and message)."""

    ok: bool
    model: str | None = None
    code: str | None = None
    message: str = ""


def invoke(account: Account, endpoint: str, component: str | None = None) -> Answer:
    """InvokeEndpoint with a one-token chat request (the tier's container answers any)."""
    from peagle_deploy.aws import error_code, error_message

    runtime = account.client("sagemaker-runtime")
    kwargs: dict[str, Any] = {"EndpointName": endpoint, "ContentType": "application/json",
                              "Body": json.dumps({"messages": [{"role": "user", "content": "hi"}], "max_tokens": 1})}
    if component:
        kwargs["InferenceComponentName"] = component
    try:
        body = runtime.invoke_endpoint(**kwargs)["Body"].read()
    except Exception as exc:  # noqa: BLE001 - a refusal is what some scenarios look for
        code = error_code(exc)
        if not code:
            raise
        return Answer(False, code=code, message=error_message(exc))
    try:
        model = json.loads(body).get("model")
    except ValueError:
        model = None
    return Answer(True, model=model)


def refusal(call: Any, **kwargs: Any) -> tuple[str, str] | None:
    """(code, message) of an AWS refusal of `call(**kwargs)`, None when it was accepted."""
    from peagle_deploy.aws import error_code, error_message

    try:
        call(**kwargs)
    except Exception as exc:  # noqa: BLE001 - the refusal is the observation
        code = error_code(exc)
        if not code:
            raise
        return code, error_message(exc)
    return None
