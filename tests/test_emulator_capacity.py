"""The emulator's capacity, quotas, instance pools, capacity reservations, regions and inference routers.

Every request body below is also checked against botocore's shapes (conftest's `check_every_request`), so the
new members (InstancePools, VariantInstanceProvisionTimeoutInSeconds, CapacityReservationConfig, the router
operations) are sent as SageMaker would accept them.
"""

import json

import botocore.exceptions
import pytest

from peagle_deploy.testing import SageMakerEmulator
from peagle_deploy.testing.capacity_emulation import CAPACITY_REASON, POOLS_CAPACITY_REASON

from .aws_shapes import StrictShapeError, assert_valid_request

ROLE = "arn:aws:iam::123456789012:role/peagle-emulator"
IMAGE = {"Image": "763104351884.dkr.ecr.us-east-1.amazonaws.com/vllm:latest"}
G2, G4, G8 = "ml.g7e.2xlarge", "ml.g7e.4xlarge", "ml.g7e.8xlarge"
WEST = "us-west-2"


def model(sm, name):
    sm.create_model(ModelName=name, ExecutionRoleArn=ROLE, PrimaryContainer=IMAGE)


def plain(name, instance_type=G2, count=1, **extra):
    return {"EndpointConfigName": name, "ProductionVariants": [{
        "VariantName": "AllTraffic", "ModelName": "m", "InstanceType": instance_type, "InitialInstanceCount": count,
        **extra}]}


def pooled(name, pools, timeout=None, count=1, **extra):
    variant = {"VariantName": "AllTraffic", "ModelName": "m", "InitialInstanceCount": count,
               "InstancePools": [{"InstanceType": t, "Priority": i + 1, **({"ModelNameOverride": o} if o else {})}
                                 for i, (t, o) in enumerate(pools)], **extra}
    if timeout is not None:
        variant["VariantInstanceProvisionTimeoutInSeconds"] = timeout
    return {"EndpointConfigName": name, "ProductionVariants": [variant]}


def deploy(sm, name, config):
    sm.create_endpoint_config(**config)
    sm.create_endpoint(EndpointName=name, EndpointConfigName=config["EndpointConfigName"])


def described(sm, name):
    return sm.describe_endpoint(EndpointName=name)


def refused(call, code):
    with pytest.raises(botocore.exceptions.ClientError) as caught:
        call()
    assert caught.value.response["Error"]["Code"] == code, caught.value.response["Error"]
    return caught.value.response["Error"]["Message"]


@pytest.fixture
def sm(emu):
    client = emu.client("sagemaker")
    model(client, "m")
    return client


# capacity -----------------------------------------------------------------------------------------------
def test_no_capacity_fails_the_endpoint_with_sagemakers_reason(emu, sm):
    emu.create_endpoint_stack("theirs", instance_type=G4)  # another type, not limited: untouched
    emu.set_capacity(G2, 0)
    deploy(sm, "ep", plain("ep"))
    assert {e["EndpointName"]: e["EndpointStatus"] for e in sm.list_endpoints()["Endpoints"]} == {
        "ep": "Creating", "theirs": "InService"}
    answer = described(sm, "ep")
    assert answer["EndpointStatus"] == "Failed" and answer["FailureReason"] == CAPACITY_REASON
    assert answer["FailureReason"].startswith("Unable to provision requested ML compute capacity")
    assert answer["ProductionVariants"][0]["CurrentInstanceCount"] == 0
    assert described(sm, "theirs")["EndpointStatus"] == "InService"
    assert emu.instances_in_use(G2) == 0 and emu.instances_in_use(G4) == 1


def test_capacity_is_taken_by_running_instances_and_given_back_on_delete(emu, sm):
    emu.set_capacity(G2, 2)
    deploy(sm, "a", plain("a", count=2))
    assert described(sm, "a")["EndpointStatus"] == "InService" and emu.instances_in_use(G2) == 2
    deploy(sm, "b", plain("b"))
    assert described(sm, "b")["EndpointStatus"] == "Failed"  # both instances are a's
    sm.delete_endpoint(EndpointName="a")
    sm.delete_endpoint(EndpointName="b")
    sm.create_endpoint(EndpointName="c", EndpointConfigName="b")
    assert described(sm, "c")["EndpointStatus"] == "InService"
    assert emu.instances_in_use(G2) == 1


def test_unmanaged_endpoints_answer_as_before(emu, sm):
    """Capacity unlimited (the default): DescribeEndpoint is moto's, with no pool or reservation member."""
    emu.create_endpoint_stack("theirs")
    deploy(sm, "ep", plain("ep", count=2))
    for name, count in (("theirs", 1), ("ep", 2)):
        answer = described(sm, name)
        assert answer["EndpointStatus"] == "InService"
        assert answer["ProductionVariants"] == [{"VariantName": "AllTraffic", "CurrentInstanceCount": count,
                                                 "DesiredInstanceCount": count}]


# instance pools -----------------------------------------------------------------------------------------
def test_pools_fall_through_to_the_next_type_which_serves_its_override_model(emu, sm):
    model(sm, "m-4x")
    emu.set_capacity(G2, 0)
    deploy(sm, "ep", pooled("ep", [(G2, None), (G4, "m-4x")], timeout=600))
    answer = described(sm, "ep")
    assert answer["EndpointStatus"] == "InService"
    assert answer["ProductionVariants"][0]["InstancePools"] == [
        {"InstanceType": G2, "CurrentInstanceCount": 0}, {"InstanceType": G4, "CurrentInstanceCount": 1}]
    assert answer["ProductionVariants"][0]["CurrentInstanceCount"] == 1
    assert emu.serving("ep") == {"AllTraffic": {G4: {"instances": 1, "model": "m-4x"}}}
    config = sm.describe_endpoint_config(EndpointConfigName="ep")["ProductionVariants"][0]
    assert config["InstancePools"][1] == {"InstanceType": G4, "Priority": 2, "ModelNameOverride": "m-4x"}
    assert config["VariantInstanceProvisionTimeoutInSeconds"] == 600 and "InstanceType" not in config


def test_priority_decides_not_the_order_of_the_list(emu, sm):
    config = pooled("ep", [(G4, None), (G2, None)])
    config["ProductionVariants"][0]["InstancePools"][0]["Priority"] = 2
    config["ProductionVariants"][0]["InstancePools"][1]["Priority"] = 1
    deploy(sm, "ep", config)
    assert emu.serving("ep") == {"AllTraffic": {G2: {"instances": 1, "model": "m"}}}


def test_instances_spread_over_pools_when_the_first_has_too_few(emu, sm):
    emu.set_capacity(G2, 1)
    deploy(sm, "ep", pooled("ep", [(G2, None), (G4, None)], count=3))
    pools = described(sm, "ep")["ProductionVariants"][0]["InstancePools"]
    assert pools == [{"InstanceType": G2, "CurrentInstanceCount": 1}, {"InstanceType": G4, "CurrentInstanceCount": 2}]


def test_no_pool_with_capacity_fails_after_the_timeout_in_emulated_time(emu, sm):
    emu.set_capacity(G2, 0)
    emu.set_capacity(G4, 0)
    deploy(sm, "ep", pooled("ep", [(G2, None), (G4, None)], timeout=300))  # 300 s: five describes of 60
    statuses = [described(sm, "ep")["EndpointStatus"] for _ in range(5)]
    assert statuses == ["Creating"] * 4 + ["Failed"]
    answer = described(sm, "ep")
    assert answer["FailureReason"] == POOLS_CAPACITY_REASON
    assert [p["CurrentInstanceCount"] for p in answer["ProductionVariants"][0]["InstancePools"]] == [0, 0]


def test_capacity_freed_within_the_timeout_is_taken_and_the_clock_is_injectable(emu, sm):
    now = [1000.0]
    emu.provision_clock = lambda: now[0]
    emu.set_capacity(G2, 0)
    emu.set_capacity(G4, 0)
    deploy(sm, "ep", pooled("ep", [(G2, None), (G4, None)], timeout=900))
    now[0] += 899
    assert described(sm, "ep")["EndpointStatus"] == "Creating"  # 899 s: not yet
    emu.set_capacity(G4, 1)  # an instance comes free before the timeout
    assert described(sm, "ep")["EndpointStatus"] == "InService"
    assert emu.serving("ep") == {"AllTraffic": {G4: {"instances": 1, "model": "m"}}}


def test_pool_checks_refuse_what_sagemaker_refuses(emu, sm):
    both = pooled("both", [(G2, None)])
    both["ProductionVariants"][0]["InstanceType"] = G4
    assert "InstancePools together with InstanceType" in refused(lambda: sm.create_endpoint_config(**both),
                                                                 "ValidationException")
    missing = pooled("missing", [(G2, None), (G4, "no-such-model")])
    assert "Could not find model" in refused(lambda: sm.create_endpoint_config(**missing), "ValidationException")
    twice = pooled("twice", [(G2, None), (G2, None)])
    assert "more than one instance pool" in refused(lambda: sm.create_endpoint_config(**twice), "ValidationException")
    assert emu.resource_names()["configs"] == []


def test_the_strict_shape_check_knows_the_new_members():
    """botocore 1.44's limits: 1-5 pools, Priority 1-5, a timeout of 300-3600 s, the reservation preference enum."""
    good = pooled("ep", [(G2, "m-2x"), (G4, None)], timeout=3600,
                  CapacityReservationConfig={"CapacityReservationPreference": "capacity-reservations-only",
                                             "MlReservationArn": "arn:aws:sagemaker:us-east-1:123456789012:"
                                                                 "ml-reservation/r1"})
    assert_valid_request("sagemaker", "CreateEndpointConfig", good)
    import boto3

    client = boto3.client("sagemaker", region_name="us-east-1", endpoint_url="http://127.0.0.1:9",  # never sent
                          aws_access_key_id="testing", aws_secret_access_key="testing")
    for bad, why in ((pooled("ep", [(G2, None)], timeout=299), "299"),
                     (pooled("ep", [(G2, None)] * 6), "more than the maximum 5"),
                     (pooled("ep", [(G2, None)], CapacityReservationConfig={
                         "CapacityReservationPreference": "reservations-first"}), "reservations-first")):
        with pytest.raises((StrictShapeError, botocore.exceptions.ParamValidationError), match=why):
            client.create_endpoint_config(**bad)


# quotas ------------------------------------------------------------------------------------------------
def test_quota_refusal_names_the_type_in_sagemakers_words(emu, sm):
    emu.set_quota(G2, 1)
    deploy(sm, "a", plain("a"))
    message = refused(lambda: sm.create_endpoint(EndpointName="b", EndpointConfigName="a"), "ResourceLimitExceeded")
    assert message == ("The account-level service limit 'ml.g7e.2xlarge for endpoint usage' is 1 Instances, with "
                       "current utilization of 1 Instances and a request delta of 1 Instances. Please use AWS Service "
                       "Quotas to request an increase for this quota.")
    assert emu.resource_names()["endpoints"] == ["a"]
    quotas = emu.client("service-quotas").list_service_quotas(ServiceCode="sagemaker")["Quotas"]
    assert [(q["QuotaName"], q["Value"]) for q in quotas] == [("ml.g7e.2xlarge for endpoint usage", 1)]
    sm.create_endpoint_config(**plain("big", count=2))
    assert "is 1 Instances, with current utilization of 1 Instances and a request delta of 2 Instances" in refused(
        lambda: sm.update_endpoint(EndpointName="a", EndpointConfigName="big"), "ResourceLimitExceeded")


def test_a_pool_list_is_held_to_every_pools_quota_at_create_endpoint(emu, sm):
    """Quota does not fall back, capacity does (Deepgram's SageMaker deployment documentation, measured on real
    accounts): one pool short of quota refuses the whole CreateEndpoint, naming the first short pool by priority,
    where capacity alone would have fallen through to the next pool."""
    emu.set_quota(G4, 0)
    sm.create_endpoint_config(**pooled("ep", [(G2, None), (G4, None)]))
    assert "'ml.g7e.4xlarge for endpoint usage' is 0 Instances" in refused(
        lambda: sm.create_endpoint(EndpointName="ep", EndpointConfigName="ep"), "ResourceLimitExceeded")
    emu.set_quota(G2, 0)
    assert "'ml.g7e.2xlarge for endpoint usage' is 0 Instances" in refused(
        lambda: sm.create_endpoint(EndpointName="ep", EndpointConfigName="ep"), "ResourceLimitExceeded")
    assert emu.resource_names()["endpoints"] == []
    emu.set_quota(G2, 1)
    emu.set_quota(G4, 1)
    emu.set_capacity(G2, 0)  # capacity does fall back
    deploy(sm, "ep2", pooled("ep2", [(G2, None), (G4, None)]))
    assert emu.serving("ep2") == {"AllTraffic": {G4: {"instances": 1, "model": "m"}}}


# updates -----------------------------------------------------------------------------------------------
def test_an_update_without_capacity_rolls_back_and_with_it_moves_the_instances(emu, sm):
    deploy(sm, "ep", plain("ep"))
    emu.set_capacity(G4, 0)
    sm.create_endpoint_config(**pooled("pools", [(G4, None), (G8, None)], timeout=300))
    emu.set_capacity(G8, 0)
    sm.update_endpoint(EndpointName="ep", EndpointConfigName="pools")
    statuses = [described(sm, "ep")["EndpointStatus"] for _ in range(5)]
    assert statuses == ["Updating"] * 4 + ["InService"]
    answer = described(sm, "ep")
    assert answer["EndpointConfigName"] == "ep" and answer["FailureReason"] == POOLS_CAPACITY_REASON
    assert emu.instances_in_use(G2) == 1 and emu.instances_in_use(G4) == 0
    emu.set_capacity(G8, 1)
    sm.update_endpoint(EndpointName="ep", EndpointConfigName="pools")
    assert emu.instances_in_use(G2) == 1 and emu.instances_in_use(G8) == 1  # blue/green: both fleets meanwhile
    statuses = [described(sm, "ep")["EndpointStatus"] for _ in range(3)]
    assert statuses == ["Updating", "InService", "InService"]  # the emulator's one Updating describe
    answer = described(sm, "ep")
    assert answer["EndpointConfigName"] == "pools" and "FailureReason" not in answer
    assert answer["ProductionVariants"][0]["InstancePools"] == [{"InstanceType": G4, "CurrentInstanceCount": 0},
                                                               {"InstanceType": G8, "CurrentInstanceCount": 1}]
    assert emu.instances_in_use(G2) == 0


# capacity reservations ---------------------------------------------------------------------------------
def test_a_registered_reservation_supplies_its_instances(emu, sm):
    emu.set_capacity(G2, 0)
    arn = emu.add_capacity_reservation(G2, 1, name="team-a")
    only = {"CapacityReservationPreference": "capacity-reservations-only", "MlReservationArn": arn}
    deploy(sm, "ep", plain("ep", CapacityReservationConfig=only))
    answer = described(sm, "ep")
    assert answer["EndpointStatus"] == "InService"
    assert answer["ProductionVariants"][0]["CapacityReservationConfig"] == {
        "MlReservationArn": arn, "CapacityReservationPreference": "capacity-reservations-only",
        "TotalInstanceCount": 1, "AvailableInstanceCount": 0, "UsedByCurrentEndpoint": 1}
    deploy(sm, "second", plain("second", CapacityReservationConfig=only))
    assert described(sm, "second")["FailureReason"] == CAPACITY_REASON  # the reservation is used up
    emu.set_capacity(G2, 1)
    deploy(sm, "third", plain("third", CapacityReservationConfig={"MlReservationArn": arn}))
    assert described(sm, "third")["EndpointStatus"] == "InService"  # on-demand after the reservation
    unknown = plain("unknown", CapacityReservationConfig={
        "MlReservationArn": "arn:aws:sagemaker:us-east-1:123456789012:ml-reservation/nobody"})
    assert "Could not find ML capacity reservation" in refused(lambda: sm.create_endpoint_config(**unknown),
                                                               "ValidationException")


# regions -----------------------------------------------------------------------------------------------
def test_two_regions_have_independent_resources_capacity_quotas_and_prices(emu, sm):
    emu.seed_region(WEST)
    west = emu.client("sagemaker", WEST)
    model(west, "m")
    emu.set_capacity(G2, 0)  # us-east-1 only
    emu.set_quota(G2, 0, region=WEST)
    emu.set_price(G2, 7.5, region=WEST)
    deploy(sm, "ep", plain("ep"))
    assert described(sm, "ep")["EndpointStatus"] == "Failed"
    west.create_endpoint_config(**plain("ep"))
    assert "is 0 Instances" in refused(lambda: west.create_endpoint(EndpointName="ep", EndpointConfigName="ep"),
                                       "ResourceLimitExceeded")
    emu.set_quota(G2, 4, region=WEST)
    west.create_endpoint(EndpointName="ep", EndpointConfigName="ep")
    assert described(west, "ep")["EndpointStatus"] == "InService"
    assert emu.endpoint_status("ep", WEST) == "InService" and emu.endpoint_status("ep") == "Failed"
    assert emu.resource_names(WEST) == {"endpoints": ["ep"], "configs": ["ep"], "models": ["m"]}
    east_quotas = emu.client("service-quotas").list_service_quotas(ServiceCode="sagemaker")["Quotas"]
    west_quotas = emu.client("service-quotas", WEST).list_service_quotas(ServiceCode="sagemaker")["Quotas"]
    assert east_quotas == [] and [q["Value"] for q in west_quotas] == [4]
    s3 = emu.client("s3", WEST)
    assert s3.get_object(Bucket=f"jumpstart-cache-prod-{WEST}", Key="models_manifest.json")["Body"].read()
    pricing = emu.client("pricing")

    def hosting(region):
        filters = [{"Type": "TERM_MATCH", "Field": f, "Value": v} for f, v in (
            ("regionCode", region), ("instanceName", G2), ("platoinstancetype", "Hosting"))]
        products = pricing.get_products(ServiceCode="AmazonSageMaker", Filters=filters)["PriceList"]
        terms = json.loads(products[0])["terms"]["OnDemand"]
        return float(next(iter(next(iter(terms.values()))["priceDimensions"].values()))["pricePerUnit"]["USD"])

    assert hosting(WEST) == 7.5 and hosting("us-east-1") == emu.hosting_prices[G2]
    runtime = emu.client("sagemaker-runtime", WEST)  # the runtime answers in the endpoint's own region
    assert json.loads(runtime.invoke_endpoint(EndpointName="ep", Body=b"{}",
                                              ContentType="application/json")["Body"].read())["choices"]


def test_regions_in_process_and_the_override_model_reaches_the_backend():
    class RecordingBackend:
        """Stands in for ContainerBackend: which model each endpoint would run."""

        def __init__(self):
            self.models, self.emulator = {}, None

        def on_create(self, sagemaker, endpoint, model_name=None):
            self.models[endpoint.endpoint_name] = model_name
            endpoint.endpoint_status = "InService"

        def stop(self, name):
            return False

        def stop_all(self):
            pass

    backend = RecordingBackend()
    with SageMakerEmulator.in_process(regions=(WEST,), backend=backend) as emu:
        assert emu.regions == ("us-east-1", WEST)
        west = emu.client("sagemaker", WEST)
        for name in ("m", "m-4x"):
            model(west, name)
        emu.set_capacity(G2, 0, region=WEST)
        deploy(west, "ep", pooled("ep", [(G2, None), (G4, "m-4x")], timeout=300))
        assert backend.models == {"ep": "m-4x"}
        assert emu.endpoint_status("ep", WEST) == "InService" and emu.resource_names()["endpoints"] == []
        s3 = emu.client("s3", WEST)
        assert s3.head_bucket(Bucket=f"jumpstart-cache-prod-{WEST}")


# inference routers -------------------------------------------------------------------------------------
def target(*arns, name="qwen"):
    return {"Name": name, "Destinations": [{"ResourceArn": arn} for arn in arns]}


def test_the_router_sends_requests_to_the_healthy_endpoint_in_the_other_region(emu, sm):
    emu.seed_region(WEST)
    west = emu.client("sagemaker", WEST)
    model(west, "m")
    emu.set_capacity(G2, 0)
    deploy(sm, "ep", plain("ep"))  # fails in us-east-1: no capacity
    deploy(west, "ep", plain("ep"))
    east_arn = described(sm, "ep")["EndpointArn"]
    west_arn = described(west, "ep")["EndpointArn"]
    router_arn = sm.create_inference_router(InferenceRouterName="qwen-router", RoutingTargets=[target(east_arn, west_arn)],
                                            Tags=[{"Key": "peagle:managed", "Value": "true"}])["InferenceRouterArn"]
    assert router_arn == "arn:aws:sagemaker:us-east-1:123456789012:inference-router/qwen-router"
    router = sm.describe_inference_router(InferenceRouterName="qwen-router")
    assert router["Status"] == "InService"
    assert [(d["ResourceArn"], d["RoutingStatus"]) for d in router["RoutingTargets"][0]["Destinations"]] == [
        (east_arn, "Unroutable"), (west_arn, "Routable")]
    assert router["RoutingTargets"][0]["RoutingPreference"] == "LocalRegionFirst"
    assert sm.list_tags(ResourceArn=router_arn)["Tags"] == [{"Key": "peagle:managed", "Value": "true"}]
    runtime = emu.client("sagemaker-inference-router-runtime")
    recorded = len(emu.recorder.calls)
    answer = runtime.invoke_inference_router(InferenceRouterName="qwen-router", RoutingTargetName="qwen",
                                             Body=json.dumps({"messages": [{"role": "user", "content": "hi"}]}),
                                             ContentType="application/json")
    assert answer["InvokedRoutedResourceArn"] == west_arn and answer["RoutingReason"] == "only-healthy"
    assert answer["InvokedProductionVariant"] == "AllTraffic"
    assert json.loads(answer["Body"].read())["choices"][0]["message"]["content"] == "".join(emu.runtime.tokens)
    assert emu.runtime.requests[-1] == {"messages": [{"role": "user", "content": "hi"}]}
    assert [call for _, call in emu.recorder.calls[recorded:]] == ["sagemaker:InvokeInferenceRouter"]  # for IAM
    emu.set_capacity(G2, None)
    deploy(sm, "local", plain("local"))
    local_arn = described(sm, "local")["EndpointArn"]
    sm.update_inference_router(InferenceRouterName="qwen-router", RoutingTargets=[target(west_arn, local_arn)])
    answer = runtime.invoke_inference_router(InferenceRouterName="qwen-router", RoutingTargetName="qwen", Body=b"{}")
    assert answer["InvokedRoutedResourceArn"] == local_arn and answer["RoutingReason"] == "local-preferred"
    assert [r["InferenceRouterName"] for r in sm.list_inference_routers()["InferenceRouters"]] == ["qwen-router"]
    assert emu.client("sagemaker", WEST).list_inference_routers()["InferenceRouters"] == []  # a regional resource
    sm.delete_inference_router(InferenceRouterName="qwen-router")
    refused(lambda: sm.describe_inference_router(InferenceRouterName="qwen-router"), "ResourceNotFound")
    assert emu.endpoint_status("ep", WEST) == "InService"  # deleting a router leaves its destinations


def test_the_router_in_process_and_its_refusals():
    with SageMakerEmulator.in_process(regions=(WEST,)) as emu:
        sm, west = emu.client("sagemaker"), emu.client("sagemaker", WEST)
        model(west, "m")
        deploy(west, "ep", plain("ep"))
        arn = described(west, "ep")["EndpointArn"]
        sm.create_inference_router(InferenceRouterName="r", RoutingTargets=[target(arn)])
        runtime = emu.client("sagemaker-inference-router-runtime")
        answer = runtime.invoke_inference_router(InferenceRouterName="r", RoutingTargetName="qwen", Body=b"{}")
        assert answer["InvokedRoutedResourceArn"] == arn and answer["RoutingReason"] == "only-healthy"
        refused(lambda: runtime.invoke_inference_router(InferenceRouterName="r", RoutingTargetName="other",
                                                        Body=b"{}"), "ValidationException")
        refused(lambda: sm.create_inference_router(InferenceRouterName="r", RoutingTargets=[target(arn)]),
                "ResourceAlreadyExists")
        assert "more than once" in refused(lambda: sm.create_inference_router(
            InferenceRouterName="twice", RoutingTargets=[target(arn, arn)]), "ValidationException")
        pool_order = {**target(arn), "RoutingPreference": "InstancePoolOrder"}
        assert "only for asynchronous" in refused(lambda: sm.create_inference_router(
            InferenceRouterName="order", RoutingTargets=[pool_order]), "ValidationException")
        west.delete_endpoint(EndpointName="ep")  # none routable: tried anyway, the endpoint's own answer
        assert refused(lambda: runtime.invoke_inference_router(InferenceRouterName="r", RoutingTargetName="qwen",
                                                               Body=b"{}"),
                       "ValidationError") == "Endpoint ep of account 123456789012 not found."


def test_faults_and_gates_work_on_the_new_actions(emu, sm):
    import threading

    deploy(sm, "ep", plain("ep"))
    arn = described(sm, "ep")["EndpointArn"]
    emu.fail("CreateInferenceRouter", code="ResourceLimitExceeded", message="too many routers")
    refused(lambda: sm.create_inference_router(InferenceRouterName="r", RoutingTargets=[target(arn)]),
            "ResourceLimitExceeded")
    sm.create_inference_router(InferenceRouterName="r", RoutingTargets=[target(arn)])  # the fault was used up
    runtime = emu.client("sagemaker-inference-router-runtime")
    emu.fail("InvokeInferenceRouter", code="ModelError", status=424, message="the model failed")
    assert refused(lambda: runtime.invoke_inference_router(InferenceRouterName="r", RoutingTargetName="qwen",
                                                           Body=b"{}"), "ModelError") == "the model failed"
    gate = emu.gate("InvokeInferenceRouter")
    answers = []
    worker = threading.Thread(target=lambda: answers.append(runtime.invoke_inference_router(
        InferenceRouterName="r", RoutingTargetName="qwen", Body=b"{}")["RoutingReason"]))
    worker.start()
    gate.wait_entered()
    assert answers == []  # held
    gate.release()
    worker.join(30)
    assert answers == ["local-preferred"]
    assert emu.calls.count("InvokeInferenceRouter") == 2 and emu.calls.count("CreateInferenceRouter") == 2


def test_router_request_bodies_are_valid_against_botocores_shapes():
    arn = "arn:aws:sagemaker:us-west-2:123456789012:endpoint/ep"
    assert_valid_request("sagemaker", "CreateInferenceRouter", {
        "InferenceRouterName": "qwen-router", "RoutingTargets": [{**target(arn), "RoutingPreference": "LocalRegionFirst"}],
        "Tags": [{"Key": "peagle:managed", "Value": "true"}]})
    assert_valid_request("sagemaker-inference-router-runtime", "InvokeInferenceRouter", {
        "InferenceRouterName": "qwen-router", "RoutingTargetName": "qwen", "Body": b"{}",
        "ContentType": "application/json"})
    import botocore.session

    runtime = botocore.session.get_session().get_service_model("sagemaker-inference-router-runtime")
    assert not any(runtime.operation_model(op).has_event_stream_output for op in runtime.operation_names), (
        "botocore now has a streaming router call: model it (docs/ci.md says there is none)")
