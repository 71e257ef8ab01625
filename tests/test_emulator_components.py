"""The emulator's inference components (peagle_deploy/testing/component_emulation.py): boto3 against the emulator,
in-process and in server mode, each transition and refusal, placement on the instance type's hardware, and the
whole scale-to-zero cycle on the emulator's clock. Every request body is checked against botocore's shapes
(conftest's check_every_request)."""

from __future__ import annotations

import json
import threading
import urllib.error
import urllib.request
from datetime import datetime, timedelta, timezone

import botocore.exceptions
import pytest

from peagle_deploy.testing.component_emulation import (
    COPY_COUNT_AT_CREATE,
    HEADER_NOT_ALLOWED,
    HEADER_REQUIRED,
    MANAGED_SCALING_NEEDS_COMPONENTS,
    NO_CAPACITY,
    NOT_ENOUGH_HARDWARE,
    ManualClock,
    hardware,
)

ROLE = "arn:aws:iam::123456789012:role/peagle-emulator"
DIMENSION = "sagemaker:inference-component:DesiredCopyCount"


@pytest.fixture
def emu(emu_server):
    """A server of its own for each test: the module-wide one (conftest's `emu`) would be alive, patching moto's
    process-wide backends, while this file's in-process emulators run."""
    return emu_server


def component_endpoint(sm, name="ep", instance_type="ml.g7e.24xlarge", minimum=0, maximum=1, initial=1):
    sm.create_endpoint_config(EndpointConfigName=name, ExecutionRoleArn=ROLE, ProductionVariants=[{
        "VariantName": "AllTraffic", "InstanceType": instance_type, "InitialInstanceCount": initial,
        "ManagedInstanceScaling": {"Status": "ENABLED", "MinInstanceCount": minimum, "MaxInstanceCount": maximum},
        "RoutingConfig": {"RoutingStrategy": "LEAST_OUTSTANDING_REQUESTS"}}])
    sm.create_endpoint(EndpointName=name, EndpointConfigName=name)
    sm.create_model(ModelName=name, ExecutionRoleArn=ROLE,
                    PrimaryContainer={"Image": "123456789012.dkr.ecr.us-east-1.amazonaws.com/vllm:1"})


def component(sm, name, endpoint="ep", gpus=1, memory_mb=1024, copies=1, **extra):
    return sm.create_inference_component(
        InferenceComponentName=name, EndpointName=endpoint, VariantName="AllTraffic",
        Specification={"ModelName": endpoint, "ComputeResourceRequirements": {
            "NumberOfAcceleratorDevicesRequired": gpus, "MinMemoryRequiredInMb": memory_mb}},
        RuntimeConfig={"CopyCount": copies}, **extra)


def refused(call, *args, **kwargs) -> tuple[str, str]:
    with pytest.raises(botocore.exceptions.ClientError) as caught:
        call(*args, **kwargs)
    return caught.value.response["Error"]["Code"], caught.value.response["Error"]["Message"]


def runtime_config(sm, name):
    return sm.describe_inference_component(InferenceComponentName=name)["RuntimeConfig"]


def variant(sm, name="ep"):
    return sm.describe_endpoint(EndpointName=name)["ProductionVariants"][0]


# endpoint configs -------------------------------------------------------------------------------------------------
def test_a_component_based_config_round_trips_and_describe_endpoint_counts_its_instances(emu_in_process):
    sm = emu_in_process.client("sagemaker")
    component_endpoint(sm, minimum=0, maximum=2)
    config = sm.describe_endpoint_config(EndpointConfigName="ep")
    assert config["ExecutionRoleArn"] == ROLE  # moto drops it
    assert "ModelName" not in config["ProductionVariants"][0]
    assert config["ProductionVariants"][0]["ManagedInstanceScaling"]["MinInstanceCount"] == 0
    assert variant(sm)["CurrentInstanceCount"] == variant(sm)["DesiredInstanceCount"] == 1
    assert variant(sm)["ManagedInstanceScaling"] == {"Status": "ENABLED", "MinInstanceCount": 0, "MaxInstanceCount": 2}
    assert variant(sm)["RoutingConfig"] == {"RoutingStrategy": "LEAST_OUTSTANDING_REQUESTS"}


def test_endpoint_config_refusals(emu_in_process):
    sm = emu_in_process.client("sagemaker")
    sm.create_model(ModelName="m", ExecutionRoleArn=ROLE, PrimaryContainer={"Image": "i"})
    scaling = {"Status": "ENABLED", "MinInstanceCount": 0, "MaxInstanceCount": 1}
    assert refused(sm.create_endpoint_config, EndpointConfigName="a", ProductionVariants=[{
        "VariantName": "AllTraffic", "ModelName": "m", "InstanceType": "ml.g7e.2xlarge", "InitialInstanceCount": 1,
        "ManagedInstanceScaling": scaling}]) == ("ValidationException", MANAGED_SCALING_NEEDS_COMPONENTS)
    code, text = refused(sm.create_endpoint_config, EndpointConfigName="b", ProductionVariants=[{
        "VariantName": "AllTraffic", "InstanceType": "ml.g7e.2xlarge", "InitialInstanceCount": 1,
        "ManagedInstanceScaling": scaling}])
    assert code == "ValidationException" and "ExecutionRoleArn" in text
    code, text = refused(sm.create_endpoint_config, EndpointConfigName="c", ExecutionRoleArn=ROLE, ProductionVariants=[{
        "VariantName": "AllTraffic", "InstanceType": "ml.g7e.2xlarge", "InitialInstanceCount": 1,
        "ManagedInstanceScaling": {**scaling, "MinInstanceCount": 3}}])
    assert "MaxInstanceCount" in text
    assert emu_in_process.resource_names()["configs"] == []


# lifecycle ----------------------------------------------------------------------------------------------------------
def test_create_describe_update_delete_with_scripted_statuses(emu):
    sm = emu.client("sagemaker")  # server mode: over HTTP, as a subprocess would
    component_endpoint(sm)
    emu.components.script(creating_polls=2, updating_polls=1, deleting_polls=1)
    arn = component(sm, "ic")["InferenceComponentArn"]
    assert arn == "arn:aws:sagemaker:us-east-1:123456789012:inference-component/ic"
    statuses = [sm.describe_inference_component(InferenceComponentName="ic")["InferenceComponentStatus"]
                for _ in range(3)]
    assert statuses == ["Creating", "Creating", "InService"]
    described = sm.describe_inference_component(InferenceComponentName="ic")
    assert described["EndpointName"] == "ep" and described["VariantName"] == "AllTraffic"
    assert described["Specification"]["ComputeResourceRequirements"]["NumberOfAcceleratorDevicesRequired"] == 1
    assert described["RuntimeConfig"]["DesiredCopyCount"] == described["RuntimeConfig"]["CurrentCopyCount"] == 1
    sm.update_inference_component(InferenceComponentName="ic", Specification={
        "ModelName": "ep", "ComputeResourceRequirements": {"NumberOfAcceleratorDevicesRequired": 2,
                                                           "MinMemoryRequiredInMb": 2048}})
    assert [sm.describe_inference_component(InferenceComponentName="ic")["InferenceComponentStatus"]
            for _ in range(2)] == ["Updating", "InService"]
    assert emu.components.state("ic")["current"] == 1
    sm.delete_inference_component(InferenceComponentName="ic")
    assert sm.describe_inference_component(InferenceComponentName="ic")["InferenceComponentStatus"] == "Deleting"
    code, text = refused(sm.describe_inference_component, InferenceComponentName="ic")
    assert (code, text) == ("ValidationException", f'Could not find inference component "{arn}".')


def test_a_scripted_failure_ends_in_failed_with_its_reason_and_frees_the_instance(emu_in_process):
    sm = emu_in_process.client("sagemaker")
    component_endpoint(sm, instance_type="ml.g7e.2xlarge")
    emu_in_process.components.script(creating_polls=1, final="Failed", reason="CUDA out of memory")
    component(sm, "ic")
    emu_in_process.components.script()  # later components succeed; this one keeps the script it was created under
    assert sm.describe_inference_component(InferenceComponentName="ic")["InferenceComponentStatus"] == "Creating"
    described = sm.describe_inference_component(InferenceComponentName="ic")
    assert (described["InferenceComponentStatus"], described["FailureReason"]) == ("Failed", "CUDA out of memory")
    assert described["RuntimeConfig"]["CurrentCopyCount"] == 0
    component(sm, "next")  # the failed one's GPU is free again
    sm.delete_inference_component(InferenceComponentName="ic")  # a Failed component can be deleted
    assert emu_in_process.components.names() == ["next"]


def test_refusals_at_create(emu_in_process):
    sm = emu_in_process.client("sagemaker")
    component_endpoint(sm)
    component(sm, "ic")
    assert refused(component, sm, "ic") == (
        "ValidationException",
        'Cannot create already existing inference component '
        '"arn:aws:sagemaker:us-east-1:123456789012:inference-component/ic".')
    assert refused(component, sm, "x", endpoint="nope")[1] == (
        "Could not find endpoint 'arn:aws:sagemaker:us-east-1:123456789012:endpoint/nope'.")
    emu_in_process.create_endpoint_stack("classic")  # a model-based endpoint hosts no components
    assert "does not host inference components" in refused(component, sm, "x", endpoint="classic")[1]
    assert refused(component, sm, "x", copies=0)[1] == COPY_COUNT_AT_CREATE
    emu_in_process.script_endpoints(creating_polls=5)
    component_endpoint(sm, name="slow")
    assert "while it is Creating" in refused(component, sm, "x", endpoint="slow")[1]
    assert emu_in_process.components.names() == ["ic"]


# placement ----------------------------------------------------------------------------------------------------------
def test_hardware_is_awss_instance_data():
    assert hardware("ml.g7e.24xlarge").accelerators == 4
    assert hardware("ml.g7e.24xlarge").memory_mib == 1024 * 1024
    assert hardware("ml.g7e.2xlarge").vcpus == 8
    assert hardware("ml.nonsense.1x") is None


def test_four_one_gpu_components_share_one_g7e_24xlarge_and_a_fifth_does_not_fit(emu_in_process):
    sm = emu_in_process.client("sagemaker")
    component_endpoint(sm, instance_type="ml.g7e.24xlarge", maximum=1)
    for i in range(4):
        component(sm, f"c{i}")
    states = [emu_in_process.components.state(f"c{i}") for i in range(4)]
    assert {s["status"] for s in states} == {"InService"}
    assert len({i for s in states for i in s["instances"]}) == 1
    assert refused(component, sm, "c4") == ("ValidationException", NOT_ENOUGH_HARDWARE)
    assert refused(component, sm, "big", gpus=5)[1] == NOT_ENOUGH_HARDWARE  # more GPUs than the type has
    assert refused(component, sm, "fat", endpoint="ep", gpus=1, memory_mb=2 * 1024 * 1024)[1] == NOT_ENOUGH_HARDWARE
    sm.delete_inference_component(InferenceComponentName="c0")
    component(sm, "c4")  # the freed GPU takes it
    assert variant(sm)["CurrentInstanceCount"] == 1


def test_managed_scaling_adds_instances_up_to_the_maximum(emu_in_process):
    sm = emu_in_process.client("sagemaker")
    component_endpoint(sm, instance_type="ml.g7e.2xlarge", minimum=1, maximum=3)
    component(sm, "ic", copies=2)
    assert variant(sm)["DesiredInstanceCount"] == 2
    sm.update_inference_component_runtime_config(InferenceComponentName="ic", DesiredRuntimeConfig={"CopyCount": 3})
    assert variant(sm)["CurrentInstanceCount"] == 3
    assert refused(sm.update_inference_component_runtime_config, InferenceComponentName="ic",
                   DesiredRuntimeConfig={"CopyCount": 4})[1] == NOT_ENOUGH_HARDWARE
    sm.update_inference_component_runtime_config(InferenceComponentName="ic", DesiredRuntimeConfig={"CopyCount": 0})
    assert runtime_config(sm, "ic")["CurrentCopyCount"] == 0
    assert variant(sm)["DesiredInstanceCount"] == 3  # released only after the idle period, down to the minimum
    emu_in_process.clock = clock = ManualClock()
    emu_in_process.components.settle()  # idle from the new clock's start
    clock.advance(600)
    assert variant(sm)["CurrentInstanceCount"] == 1


def test_list_filters_sorts_and_pages(emu_in_process):
    sm = emu_in_process.client("sagemaker")
    emu_in_process.clock = clock = ManualClock()
    component_endpoint(sm, name="ep")
    component_endpoint(sm, name="other")
    for name, endpoint in (("b-one", "ep"), ("a-two", "ep"), ("c-three", "other")):
        component(sm, name, endpoint=endpoint)
        clock.advance(10)
    listed = sm.list_inference_components()["InferenceComponents"]
    assert [c["InferenceComponentName"] for c in listed] == ["c-three", "a-two", "b-one"]  # newest first
    by_name = sm.list_inference_components(SortBy="Name", SortOrder="Ascending", EndpointNameEquals="ep")
    assert [c["InferenceComponentName"] for c in by_name["InferenceComponents"]] == ["a-two", "b-one"]
    assert [c["InferenceComponentName"] for c in sm.list_inference_components(
        NameContains="THREE")["InferenceComponents"]] == ["c-three"]
    first = sm.list_inference_components(MaxResults=2)
    rest = sm.list_inference_components(MaxResults=2, NextToken=first["NextToken"])
    assert len(first["InferenceComponents"]) == 2 and len(rest["InferenceComponents"]) == 1
    assert "NextToken" not in rest
    assert sm.list_inference_components(StatusEquals="Failed")["InferenceComponents"] == []
    after = datetime.fromtimestamp(clock() - 15, tz=timezone.utc)
    assert [c["InferenceComponentName"] for c in sm.list_inference_components(
        CreationTimeAfter=after)["InferenceComponents"]] == ["c-three"]


def test_tags_on_the_component_arn(emu_in_process):
    sm = emu_in_process.client("sagemaker")
    component_endpoint(sm)
    arn = component(sm, "ic", Tags=[{"Key": "peagle:managed", "Value": "true"}])["InferenceComponentArn"]
    sm.add_tags(ResourceArn=arn, Tags=[{"Key": "team", "Value": "ml"}])
    assert {t["Key"] for t in sm.list_tags(ResourceArn=arn)["Tags"]} == {"peagle:managed", "team"}
    sm.delete_tags(ResourceArn=arn, TagKeys=["team"])
    assert sm.list_tags(ResourceArn=arn)["Tags"] == [{"Key": "peagle:managed", "Value": "true"}]
    sm.delete_inference_component(InferenceComponentName="ic")
    assert "Could not find resource" in refused(sm.list_tags, ResourceArn=arn)[1]


def test_a_copy_count_change_is_updating_until_its_copies_serve_and_refuses_another_meanwhile(emu_in_process):
    sm = emu_in_process.client("sagemaker")
    emu_in_process.clock = clock = ManualClock()
    emu_in_process.components.scaling(copy_start_s=300)
    component_endpoint(sm, instance_type="ml.g7e.12xlarge")
    component(sm, "ic")
    assert sm.describe_inference_component(InferenceComponentName="ic")["InferenceComponentStatus"] == "Creating"
    code, text = refused(sm.delete_inference_component, InferenceComponentName="ic")
    assert "while it is in state CREATE_IN_PROGRESS" in text
    clock.advance(300)
    sm.update_inference_component_runtime_config(InferenceComponentName="ic", DesiredRuntimeConfig={"CopyCount": 2})
    described = sm.describe_inference_component(InferenceComponentName="ic")
    assert described["InferenceComponentStatus"] == "Updating"
    assert described["RuntimeConfig"] == {"DesiredCopyCount": 2, "CurrentCopyCount": 1, "PlacementStatus": [
        {"InstanceType": "ml.g7e.12xlarge", "CurrentCopyCount": 1}]}
    assert "while it is in state UPDATE_RC_IN_PROGRESS" in refused(
        sm.update_inference_component_runtime_config, InferenceComponentName="ic",
        DesiredRuntimeConfig={"CopyCount": 1})[1]
    clock.advance(300)
    assert runtime_config(sm, "ic")["CurrentCopyCount"] == 2


def test_an_update_starts_the_new_copy_beside_the_old_one_which_serves_until_it_does(emu_in_process):
    """botocore's model: a rolling update "provisions capacity on the new endpoint fleet, routes traffic to that
    fleet, and terminates capacity on the old endpoint fleet". One copy fills an ml.g7e.2xlarge (one GPU), so the new
    copy needs a second instance; the old one answers meanwhile and is released once the new one serves."""
    sm, rt = emu_in_process.client("sagemaker"), emu_in_process.client("sagemaker-runtime")
    emu_in_process.clock = clock = ManualClock()
    emu_in_process.components.scaling(instance_start_s=100, copy_start_s=300)
    component_endpoint(sm, instance_type="ml.g7e.2xlarge", minimum=0, maximum=2)
    component(sm, "ic")
    clock.advance(400)
    [old] = emu_in_process.components.state("ic")["instances"]
    sm.update_inference_component(InferenceComponentName="ic", Specification={
        "ModelName": "ep", "ComputeResourceRequirements": {"NumberOfAcceleratorDevicesRequired": 1,
                                                           "MinMemoryRequiredInMb": 2048}})
    assert variant(sm)["DesiredInstanceCount"] == 2 and variant(sm)["CurrentInstanceCount"] == 1  # one starting
    assert sm.describe_inference_component(InferenceComponentName="ic")["InferenceComponentStatus"] == "Updating"
    assert rt.invoke_endpoint(EndpointName="ep", InferenceComponentName="ic", Body=b"{}")["Body"].read()  # old copy
    clock.advance(400)
    described = sm.describe_inference_component(InferenceComponentName="ic")
    assert described["InferenceComponentStatus"] == "InService"
    assert described["Specification"]["ComputeResourceRequirements"]["MinMemoryRequiredInMb"] == 2048
    [new] = emu_in_process.components.state("ic")["instances"]
    assert new != old and variant(sm)["CurrentInstanceCount"] == 2  # the old instance idles a while
    clock.advance(600)
    assert variant(sm)["CurrentInstanceCount"] == 1


def test_an_update_with_no_room_beside_the_old_copy_is_refused_and_changes_nothing(emu_in_process):
    sm = emu_in_process.client("sagemaker")
    component_endpoint(sm, instance_type="ml.g7e.2xlarge", minimum=0, maximum=1)
    component(sm, "ic")
    assert refused(sm.update_inference_component, InferenceComponentName="ic", Specification={
        "ModelName": "ep", "ComputeResourceRequirements": {"NumberOfAcceleratorDevicesRequired": 1,
                                                           "MinMemoryRequiredInMb": 2048}})[1] == NOT_ENOUGH_HARDWARE
    described = sm.describe_inference_component(InferenceComponentName="ic")
    assert described["InferenceComponentStatus"] == "InService"
    assert described["Specification"]["ComputeResourceRequirements"]["MinMemoryRequiredInMb"] == 1024


def test_an_update_of_a_component_at_zero_copies_needs_no_room_and_ends_at_once(emu_in_process):
    sm = emu_in_process.client("sagemaker")
    component_endpoint(sm, instance_type="ml.g7e.2xlarge", minimum=0, maximum=1)
    component(sm, "ic")
    sm.update_inference_component_runtime_config(InferenceComponentName="ic", DesiredRuntimeConfig={"CopyCount": 0})
    sm.update_inference_component(InferenceComponentName="ic", Specification={
        "ModelName": "ep", "ComputeResourceRequirements": {"NumberOfAcceleratorDevicesRequired": 1,
                                                           "MinMemoryRequiredInMb": 2048}})
    described = sm.describe_inference_component(InferenceComponentName="ic")
    assert described["InferenceComponentStatus"] == "InService"
    assert described["RuntimeConfig"]["DesiredCopyCount"] == 0
    assert described["Specification"]["ComputeResourceRequirements"]["MinMemoryRequiredInMb"] == 2048


def test_components_scale_to_zero_and_wake_in_their_own_region():
    """Application Auto Scaling, the alarms and the clock act on each region's components: a component in us-west-2
    idles to zero there and a request there wakes it, while the default region holds nothing."""
    from peagle_deploy.testing import SageMakerEmulator

    west = "us-west-2"
    with SageMakerEmulator.in_process(regions=(west,)) as emu:
        emu.clock = clock = ManualClock(start=1_800_000_000.0)
        sm, rt = emu.client("sagemaker", west), emu.client("sagemaker-runtime", west)
        aas, cw = emu.client("application-autoscaling", west), emu.client("cloudwatch", west)
        sm.create_model(ModelName="m", ExecutionRoleArn=ROLE,
                        PrimaryContainer={"Image": "123456789012.dkr.ecr.us-west-2.amazonaws.com/vllm:1"})
        sm.create_endpoint_config(EndpointConfigName="ep", ExecutionRoleArn=ROLE, ProductionVariants=[{
            "VariantName": "AllTraffic", "InstanceType": "ml.g7e.2xlarge", "InitialInstanceCount": 1,
            "ManagedInstanceScaling": {"Status": "ENABLED", "MinInstanceCount": 0, "MaxInstanceCount": 2}}])
        sm.create_endpoint(EndpointName="ep", EndpointConfigName="ep")
        sm.create_inference_component(InferenceComponentName="ic", EndpointName="ep", VariantName="AllTraffic",
                                      Specification={"ModelName": "m", "ComputeResourceRequirements": {
                                          "NumberOfAcceleratorDevicesRequired": 1, "MinMemoryRequiredInMb": 1024}},
                                      RuntimeConfig={"CopyCount": 1})
        from peagle_deploy.lifecycle.components import apply_scaling
        from peagle_deploy.scale_to_zero import ComponentScaling, IdleRule

        apply_scaling(aas, cw, ComponentScaling.planned("ic", copies=1, idle=IdleRule(), autoscale=None).requests([]))
        clock.advance(16 * 60)
        assert emu.components.state("ic", west)["desired"] == 0 and emu.components.names() == []
        with pytest.raises(botocore.exceptions.ClientError):
            rt.invoke_endpoint(EndpointName="ep", InferenceComponentName="ic", Body=b"{}")
        clock.advance(90)
        assert emu.components.state("ic", west)["desired"] == 1  # woken by its own region's wake-up alarm
        assert [a["Description"] for a in aas.describe_scaling_activities(
            ServiceNamespace="sagemaker", ResourceId="inference-component/ic")["ScalingActivities"]] == [
            "Setting desired copy count to 1.", "Setting desired copy count to 0."]
        assert emu.client("application-autoscaling").describe_scaling_activities(
            ServiceNamespace="sagemaker")["ScalingActivities"] == []  # none in the default region


def test_deleting_an_endpoint_that_hosts_components_is_refused_until_they_are_gone(emu_in_process):
    """*Assumed* (no source found; the console refuses): DeleteEndpoint names the components still on it."""
    sm = emu_in_process.client("sagemaker")
    component_endpoint(sm)
    component(sm, "ic")
    code, message = refused(sm.delete_endpoint, EndpointName="ep")
    assert code == "ValidationException" and "while it hosts inference components (ic)" in message
    assert sm.describe_endpoint(EndpointName="ep")["EndpointStatus"] == "InService"
    sm.delete_inference_component(InferenceComponentName="ic")
    sm.delete_endpoint(EndpointName="ep")
    assert emu_in_process.resource_names()["endpoints"] == []


def test_stranding_mode_leaves_the_components_behind(emu_in_process):
    """The other answer a real account may give (`delete_endpoint_with_components = "strand"`): the components stay,
    InService, holding their names; peagle's status and recover handle those leftovers."""
    sm = emu_in_process.client("sagemaker")
    emu_in_process.components.delete_endpoint_with_components = "strand"
    component_endpoint(sm)
    component(sm, "ic")
    sm.delete_endpoint(EndpointName="ep")
    assert sm.describe_inference_component(InferenceComponentName="ic")["InferenceComponentStatus"] == "InService"
    assert "already existing" in refused(component, sm, "ic")[1]
    sm.delete_inference_component(InferenceComponentName="ic")
    assert emu_in_process.components.names() == []


# invocations ------------------------------------------------------------------------------------------------------
def test_invocation_refusals_in_process(emu_in_process):
    sm, rt = emu_in_process.client("sagemaker"), emu_in_process.client("sagemaker-runtime")
    component_endpoint(sm)
    component(sm, "ic")
    emu_in_process.create_endpoint_stack("classic")
    assert rt.invoke_endpoint(EndpointName="ep", InferenceComponentName="ic", Body=b"{}")["Body"].read()
    assert refused(rt.invoke_endpoint, EndpointName="ep", Body=b"{}") == ("ValidationError", HEADER_REQUIRED)
    assert refused(rt.invoke_endpoint, EndpointName="classic", InferenceComponentName="ic",
                   Body=b"{}") == ("ValidationError", HEADER_NOT_ALLOWED)
    assert "not found" in refused(rt.invoke_endpoint, EndpointName="ep", InferenceComponentName="nope",
                                  Body=b"{}")[1]
    sm.update_inference_component_runtime_config(InferenceComponentName="ic", DesiredRuntimeConfig={"CopyCount": 0})
    assert refused(rt.invoke_endpoint, EndpointName="ep", InferenceComponentName="ic", Body=b"{}") == (
        "ValidationError", NO_CAPACITY)
    assert rt.invoke_endpoint(EndpointName="classic", Body=b"{}")["Body"].read()  # endpoints as before


def test_invoke_and_stream_a_component_in_server_mode(emu):
    sm, rt = emu.client("sagemaker"), emu.client("sagemaker-runtime")
    component_endpoint(sm)
    component(sm, "ic")
    emu.runtime.tokens = ["Hi", "!"]
    answer = json.loads(rt.invoke_endpoint(EndpointName="ep", InferenceComponentName="ic", Body=b"{}")["Body"].read())
    assert answer["choices"][0]["message"]["content"] == "Hi!"
    stream = rt.invoke_endpoint_with_response_stream(EndpointName="ep", InferenceComponentName="ic", Body=b"{}")
    text = b"".join(event["PayloadPart"]["Bytes"] for event in stream["Body"])
    assert b'"content": "Hi"' in text and text.endswith(b"data: [DONE]\n\n")
    assert refused(rt.invoke_endpoint_with_response_stream, EndpointName="ep", Body=b"{}")[1] == HEADER_REQUIRED
    sm.update_inference_component_runtime_config(InferenceComponentName="ic", DesiredRuntimeConfig={"CopyCount": 0})
    assert refused(rt.invoke_endpoint_with_response_stream, EndpointName="ep", InferenceComponentName="ic",
                   Body=b"{}") == ("ValidationError", NO_CAPACITY)


def _token() -> str:
    from botocore.credentials import Credentials
    from sagemaker.core.token_generator.token_generator import _generate_token

    return _generate_token(Credentials("testing", "testing", "testing"), "us-east-1", 600)


def _post(url: str, headers: dict[str, str]) -> tuple[int, dict]:
    request = urllib.request.Request(url, method="POST", headers={"Content-Type": "application/json", **headers},
                                     data=json.dumps({"model": "", "messages": [{"role": "user", "content": "hi"}]}).encode())
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


def test_the_openai_route_names_the_component_in_its_path(emu):
    sm = emu.client("sagemaker")
    component_endpoint(sm)
    component(sm, "ic")
    bearer = {"Authorization": f"Bearer {_token()}"}
    url = f"{emu.endpoint_url}/endpoints/ep/inference-components/ic/openai/v1/chat/completions"
    status, body = _post(url, bearer)
    assert status == 200 and body["object"] == "chat.completion"
    assert _post(url, {})[0] == 401  # the token is checked first
    status, body = _post(f"{emu.endpoint_url}/endpoints/ep/openai/v1/chat/completions", bearer)
    assert (status, body["error"]["message"]) == (400, HEADER_REQUIRED)
    status, body = _post(url, {**bearer, "X-Amzn-SageMaker-Inference-Component": "ic"})
    assert status == 400 and "in the path" in body["error"]["message"]
    sm.update_inference_component_runtime_config(InferenceComponentName="ic", DesiredRuntimeConfig={"CopyCount": 0})
    assert _post(url, bearer) == (400, {"error": {"message": NO_CAPACITY, "type": "invalid_request_error",
                                                  "code": "validation_error"}})


# faults and gates ---------------------------------------------------------------------------------------------------
def test_faults_and_gates_reach_the_component_actions(emu):
    sm = emu.client("sagemaker")
    component_endpoint(sm)
    emu.fail("CreateInferenceComponent", code="ResourceLimitExceeded", message="no copies for you")
    assert refused(component, sm, "ic") == ("ResourceLimitExceeded", "no copies for you")
    emu.fail("DeleteInferenceComponent", status=500, after=True, resource="ic")  # acted on, answer lost
    component(sm, "ic")
    component(sm, "other")
    code, text = refused(sm.delete_inference_component, InferenceComponentName="ic")
    assert "Could not find inference component" in text  # botocore's retry meets what the lost answer did
    assert emu.components.names() == ["other"]
    gate = emu.gate("UpdateInferenceComponentRuntimeConfig", when="before")
    worker = threading.Thread(target=sm.update_inference_component_runtime_config, kwargs={
        "InferenceComponentName": "other", "DesiredRuntimeConfig": {"CopyCount": 2}})
    worker.start()
    gate.wait_entered()
    assert emu.components.state("other")["desired"] == 1  # held before SageMaker acted
    gate.release()
    worker.join(30)
    assert not worker.is_alive()
    assert emu.components.state("other")["desired"] == 2


# Application Auto Scaling, alarms and the scale-to-zero cycle ------------------------------------------------------
def test_application_auto_scaling_on_components(emu_in_process):
    sm, aas = emu_in_process.client("sagemaker"), emu_in_process.client("application-autoscaling")
    cw = emu_in_process.client("cloudwatch")
    component_endpoint(sm, maximum=2)
    component(sm, "ic", copies=3)
    target = {"ServiceNamespace": "sagemaker", "ResourceId": "inference-component/ic", "ScalableDimension": DIMENSION}
    missing = {**target, "ResourceId": "inference-component/nope"}
    assert "no inference component" in refused(aas.register_scalable_target, **missing, MinCapacity=0,
                                               MaxCapacity=1)[1]
    aas.register_scalable_target(**target, MinCapacity=0, MaxCapacity=2)
    assert emu_in_process.components.state("ic")["desired"] == 2  # moved into MIN..MAX at once
    assert "does not apply" in refused(
        aas.put_scaling_policy, **target, PolicyName="p", PolicyType="TargetTrackingScaling",
        TargetTrackingScalingPolicyConfiguration={"TargetValue": 5.0, "PredefinedMetricSpecification": {
            "PredefinedMetricType": "SageMakerVariantInvocationsPerInstance"}})[1]
    aas.put_scaling_policy(**target, PolicyName="tt", PolicyType="TargetTrackingScaling",
                           TargetTrackingScalingPolicyConfiguration={"TargetValue": 5.0, "PredefinedMetricSpecification": {
                               "PredefinedMetricType": "SageMakerInferenceComponentInvocationsPerCopy"}})
    alarms = [a["AlarmName"] for a in cw.describe_alarms()["MetricAlarms"]]
    assert sorted(a.rsplit("-", 5)[0] for a in alarms) == ["TargetTracking-inference-component/ic-AlarmHigh",
                                                          "TargetTracking-inference-component/ic-AlarmLow"]
    sm.delete_inference_component(InferenceComponentName="ic")  # deregisters its target, policies and their alarms
    assert aas.describe_scalable_targets(ServiceNamespace="sagemaker")["ScalableTargets"] == []
    assert cw.describe_alarms()["MetricAlarms"] == []


def test_an_alarm_fires_by_its_own_threshold_not_on_any_failure(emu_in_process):
    """The AWS guide's example alarm (GreaterThanThreshold 1, Sum over 60 s) needs two failures in one minute."""
    sm, rt = emu_in_process.client("sagemaker"), emu_in_process.client("sagemaker-runtime")
    emu_in_process.clock = clock = ManualClock(start=1_800_000_000.0)  # on a minute boundary
    (name,) = emu_in_process.components.create_stack("s")
    cw = emu_in_process.client("cloudwatch")
    cw.put_metric_alarm(AlarmName="strict", MetricName="NoCapacityInvocationFailures", Namespace="AWS/SageMaker",
                        Statistic="Sum", Dimensions=[{"Name": "InferenceComponentName", "Value": name}],
                        Period=60, EvaluationPeriods=1, Threshold=1, ComparisonOperator="GreaterThanThreshold")
    sm.update_inference_component_runtime_config(InferenceComponentName=name, DesiredRuntimeConfig={"CopyCount": 0})

    def strict() -> dict:
        return cw.describe_alarms(AlarmNames=["strict"])["MetricAlarms"][0]

    refused(rt.invoke_endpoint, EndpointName="s", InferenceComponentName=name, Body=b"{}")
    clock.advance(61)
    assert (strict()["StateValue"], strict()["StateReason"]) == ("OK", "OK (emulated)")  # evaluated: 1 is not > 1
    for _ in range(2):
        refused(rt.invoke_endpoint, EndpointName="s", InferenceComponentName=name, Body=b"{}")
    clock.advance(60)
    assert strict()["StateValue"] == "ALARM"
    assert strict()["StateReason"].startswith("Threshold Crossed: datapoint [2.0]")


@pytest.mark.parametrize("mode", ["in_process", "server"])
def test_scale_to_zero_and_wake_up(mode, request):
    """idle -> 0 copies -> 0 instances; invoke -> no-capacity failure -> metric -> alarm -> step policy -> instance
    -> copy in service -> invoke answers; an unmanaged component-based stack beside it keeps its copy throughout."""
    emu = request.getfixturevalue("emu_in_process" if mode == "in_process" else "emu")
    sm, rt, cw = emu.client("sagemaker"), emu.client("sagemaker-runtime"), emu.client("cloudwatch")
    emu.clock = clock = ManualClock(start=1_800_000_000.0)
    emu.components.scaling(instance_start_s=100, copy_start_s=300)
    (theirs,) = emu.components.create_stack("theirs", min_instances=1)  # no scaling at all: unmanaged by peagle
    (ours,) = emu.components.create_stack("ours", scale_to_zero=True)
    clock.advance(300)
    assert emu.components.state(ours)["current"] == emu.components.state(theirs)["current"] == 1

    rt.invoke_endpoint(EndpointName="ours", InferenceComponentName=ours, Body=b"{}")
    clock.advance(899)  # target tracking's low alarm needs 15 idle minutes
    assert runtime_config(sm, ours)["DesiredCopyCount"] == 1
    clock.advance(1)
    assert runtime_config(sm, ours)["CurrentCopyCount"] == 0
    assert variant(sm, "ours")["CurrentInstanceCount"] == 1  # the instance outlives its last copy a while
    clock.advance(600)
    assert (variant(sm, "ours")["CurrentInstanceCount"], variant(sm, "ours")["DesiredInstanceCount"]) == (0, 0)
    assert sm.describe_endpoint(EndpointName="ours")["EndpointStatus"] == "InService"

    woke_at = clock.advance(5)
    assert refused(rt.invoke_endpoint, EndpointName="ours", InferenceComponentName=ours, Body=b"{}") == (
        "ValidationError", NO_CAPACITY)
    stats = cw.get_metric_statistics(Namespace="AWS/SageMaker", MetricName="NoCapacityInvocationFailures",
                                     Dimensions=[{"Name": "InferenceComponentName", "Value": ours}],
                                     StartTime=datetime.fromtimestamp(woke_at - 60, tz=timezone.utc),
                                     EndTime=datetime.fromtimestamp(woke_at + 60, tz=timezone.utc),
                                     Period=60, Statistics=["Sum"])
    assert sum(p["Sum"] for p in stats["Datapoints"]) == 1
    clock.advance(30)  # the wake alarm's 30 s period ends: ALARM, and its action raises the copy count
    alarm = cw.describe_alarms(AlarmNames=[f"{ours}-wake"])["MetricAlarms"][0]
    assert alarm["StateValue"] == "ALARM"
    assert runtime_config(sm, ours)["DesiredCopyCount"] == 1
    assert (variant(sm, "ours")["CurrentInstanceCount"], variant(sm, "ours")["DesiredInstanceCount"]) == (0, 1)
    assert sm.describe_inference_component(InferenceComponentName=ours)["InferenceComponentStatus"] == "Updating"
    clock.advance(100)
    assert variant(sm, "ours")["CurrentInstanceCount"] == 1
    refused(rt.invoke_endpoint, EndpointName="ours", InferenceComponentName=ours, Body=b"{}")  # still loading
    clock.advance(300)
    assert runtime_config(sm, ours)["CurrentCopyCount"] == 1
    assert rt.invoke_endpoint(EndpointName="ours", InferenceComponentName=ours, Body=b"{}")["Body"].read()
    assert [(a["component"], a["to"], a["cause"].split()[0]) for a in emu.components.activities
            if a["component"] == ours] == [(ours, 0, "TargetTracking"), (ours, 1, "StepScaling")]
    assert emu.components.state(theirs)["current"] == 1 and variant(sm, "theirs")["CurrentInstanceCount"] == 1
    assert timedelta(seconds=clock() - woke_at) < timedelta(minutes=8)


def test_one_long_clock_jump_plays_every_event_at_its_own_time(emu_in_process):
    """No call between creation and 30 minutes later: the copy loads (300 s), idles 15 minutes, is scaled in at
    t+1200, and its instance is released at t+1800, each at its own time."""
    emu_in_process.clock = clock = ManualClock(start=1_800_000_000.0)
    emu_in_process.components.scaling(copy_start_s=300)
    (name,) = emu_in_process.components.create_stack("ours", scale_to_zero=True)
    clock.advance(1800)
    assert emu_in_process.components.instances("ours") == {"current": 0, "desired": 0}
    assert [(a["time"] - 1_800_000_000.0, a["to"]) for a in emu_in_process.components.activities] == [(1200.0, 0)]


def test_a_client_that_polls_wakes_a_component_on_a_per_call_clock(emu):
    """What `peagle invoke` on a component at zero does, in a subprocess: retry until a copy answers. With
    `per_call_s` every AWS call moves the emulator's time, so the wake-up (alarm, instance, copy) happens within a
    bounded number of calls and no real time passes."""
    emu.clock = ManualClock(start=1_800_000_000.0)
    emu.components.scaling(instance_start_s=100, copy_start_s=300)
    sm, rt = emu.client("sagemaker"), emu.client("sagemaker-runtime")
    (name,) = emu.components.create_stack("ours", scale_to_zero=True)
    emu.clock.advance(300)
    sm.update_inference_component_runtime_config(InferenceComponentName=name, DesiredRuntimeConfig={"CopyCount": 0})
    emu.clock.per_call_s = 10.0
    started, failures = emu.clock(), 0
    for _ in range(200):
        try:
            rt.invoke_endpoint(EndpointName="ours", InferenceComponentName=name, Body=b"{}")
            break
        except botocore.exceptions.ClientError as error:
            assert error.response["Error"]["Message"] == NO_CAPACITY
            failures += 1
    else:
        pytest.fail("the component never woke up")
    # the 30 s alarm period, then the copy's 300 s on the instance that is still there (released only after 600 s)
    assert 30 <= failures <= 36 and 300 <= emu.clock() - started <= 370
    assert emu.components.instances("ours") == {"current": 1, "desired": 1}


def test_a_container_backend_leaves_a_component_based_endpoint_to_the_component_emulation():
    from peagle_deploy.testing import SageMakerEmulator
    from peagle_deploy.testing.container_backend import ContainerBackend

    with SageMakerEmulator.in_process(seed_jumpstart=False, backend=ContainerBackend({})) as emu:
        (name,) = emu.components.create_stack("ours")
        assert emu.endpoint_status("ours") == "InService"
        assert emu.components.state(name)["current"] == 1


def test_a_refused_copy_count_leaves_the_idle_instance_to_be_released(emu_in_process):
    sm = emu_in_process.client("sagemaker")
    emu_in_process.clock = clock = ManualClock()
    component_endpoint(sm, instance_type="ml.g7e.2xlarge", minimum=0, maximum=1)
    component(sm, "ic")
    sm.update_inference_component_runtime_config(InferenceComponentName="ic", DesiredRuntimeConfig={"CopyCount": 0})
    assert refused(sm.update_inference_component_runtime_config, InferenceComponentName="ic",
                   DesiredRuntimeConfig={"CopyCount": 2})[1] == NOT_ENOUGH_HARDWARE  # tried, then undone
    clock.advance(600)
    assert variant(sm)["DesiredInstanceCount"] == 0
