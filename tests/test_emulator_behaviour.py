"""The emulator itself: what it adds to moto, in-process and in server mode."""

import json
import urllib.request

import botocore.exceptions
import pytest

from peagle_deploy.testing import SageMakerEmulator

from .aws_shapes import sent_as_is

CONTAINER = {"Image": "763104351884.dkr.ecr.us-east-1.amazonaws.com/vllm:latest"}


def create_endpoint(sm, role, name="ep", instance_type="ml.g7e.2xlarge"):
    sm.create_model(ModelName=name, ExecutionRoleArn=role, PrimaryContainer=CONTAINER)
    sm.create_endpoint_config(EndpointConfigName=name, ProductionVariants=[{
        "VariantName": "AllTraffic", "ModelName": name, "InstanceType": instance_type, "InitialInstanceCount": 1}])
    sm.create_endpoint(EndpointName=name, EndpointConfigName=name)


def test_g7e_instance_types_are_accepted_in_process():
    with SageMakerEmulator.in_process() as emu:
        sm = emu.client("sagemaker")
        create_endpoint(sm, emu.role_arn, instance_type="ml.g7e.48xlarge")
        config = sm.describe_endpoint_config(EndpointConfigName="ep")
        assert config["ProductionVariants"][0]["InstanceType"] == "ml.g7e.48xlarge"
        with pytest.raises(botocore.exceptions.ClientError), sent_as_is():  # moto's own validation still applies
            sm.create_endpoint_config(EndpointConfigName="bad", ProductionVariants=[{
                "VariantName": "A", "ModelName": "ep", "InstanceType": "ml.nonsense.1x", "InitialInstanceCount": 1}])


def test_scripted_failure_after_creating_polls_in_server_mode():
    with SageMakerEmulator.server() as emu:
        emu.script_endpoints(creating_polls=2, final="Failed", reason="CUDA out of memory")
        sm = emu.client("sagemaker")  # talks HTTP to the server, like a subprocess would
        create_endpoint(sm, emu.role_arn)
        statuses = [sm.describe_endpoint(EndpointName="ep")["EndpointStatus"] for _ in range(3)]
        assert statuses == ["Creating", "Creating", "Failed"]
        assert sm.describe_endpoint(EndpointName="ep")["FailureReason"] == "CUDA out of memory"


def test_fault_injection_hits_the_named_action_once():
    with SageMakerEmulator.in_process() as emu:
        emu.fail("CreateEndpoint", code="ResourceLimitExceeded", message="no g7e for you")
        sm = emu.client("sagemaker")
        with pytest.raises(botocore.exceptions.ClientError) as caught:
            create_endpoint(sm, emu.role_arn)
        assert caught.value.response["Error"]["Code"] == "ResourceLimitExceeded"
        sm.create_endpoint(EndpointName="ep", EndpointConfigName="ep")  # the fault was used up
        assert emu.endpoint_status("ep") == "InService"


def test_throttling_every_other_call_is_absorbed_by_retries():
    with SageMakerEmulator.in_process() as emu:
        emu.throttle_every_other_call()
        sm = emu.client("sagemaker")
        create_endpoint(sm, emu.role_arn)
        assert sm.describe_endpoint(EndpointName="ep")["EndpointStatus"] == "InService"
        assert emu.calls.count("CreateModel") == 2  # one throttled, one retried


def test_jumpstart_bucket_is_seeded_with_manifest_and_specs():
    with SageMakerEmulator.in_process() as emu:
        s3 = emu.client("s3")
        manifest = json.loads(s3.get_object(Bucket="jumpstart-cache-prod-us-east-1",
                                            Key="models_manifest.json")["Body"].read())
        spec_keys = {entry["spec_key"] for entry in manifest}
        stored = {obj["Key"] for obj in s3.list_objects_v2(Bucket="jumpstart-cache-prod-us-east-1")["Contents"]}
        assert spec_keys and spec_keys <= stored
        assert any("qwen3-coder" in key for key in spec_keys)


def test_quota_answer_is_served():
    with SageMakerEmulator.in_process() as emu:
        emu.set_quota("ml.g7e.2xlarge", 3)
        quotas = emu.client("service-quotas").list_service_quotas(ServiceCode="sagemaker")["Quotas"]
        assert {q["QuotaName"]: q["Value"] for q in quotas} == {"ml.g7e.2xlarge for endpoint usage": 3}


def test_extra_wsgi_routes_plug_in_as_middlewares():
    def hello_route(app, emulator):
        def wrapped(environ, start_response):
            if environ["PATH_INFO"] == "/hello":
                start_response("200 OK", [("Content-Type", "text/plain")])
                return [emulator.region.encode()]
            return app(environ, start_response)
        return wrapped

    with SageMakerEmulator.server(region="eu-west-1", middlewares=[hello_route]) as emu:
        with urllib.request.urlopen(f"{emu.endpoint_url}/hello", timeout=10) as response:
            assert response.read() == b"eu-west-1"
        assert emu.client("sagemaker").list_endpoints()["Endpoints"] == []  # moto still answers behind it



def test_a_request_still_open_when_the_emulator_stops_does_not_outlive_it():
    """A request the server is still reading (or answering: a stalled stream) when the block ends: its thread once
    outlived the fixture (the server's close joined it without end, and the fixture gave up after 10 s), to wake
    at interpreter shutdown without module globals (a NameError in a thread). Leaving the block now ends the
    connection and joins every thread the server started."""
    import socket
    import threading
    import time

    before = set(threading.enumerate())
    with SageMakerEmulator.server(seed_jumpstart=False, set_env=False) as emu:
        client = socket.create_connection(("127.0.0.1", int(emu.endpoint_url.rsplit(":", 1)[1])), timeout=30)
        client.sendall(b"GET /moto-api/data.json HTTP/1.1\r\nHost: 127.0.0.1\r\n")  # the headers never end
        deadline = time.monotonic() + 60
        while not [t for t in threading.enumerate() if t not in before and "request" in t.name]:
            assert time.monotonic() < deadline, "the emulator never took the connection"
            time.sleep(0.01)
    try:
        leaked = [thread.name for thread in threading.enumerate() if thread not in before and thread.is_alive()]
        assert leaked == []
        while client.recv(65536):  # the server's side is shut: whatever it answered, then the end
            pass
    finally:
        client.close()
