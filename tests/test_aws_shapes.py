"""The strict request-shape check (tests/aws_shapes.py) and the tables peagle ships against botocore's models:
the instance table against SageMaker's `ProductionVariantInstanceType`, every IAM action against the services'
operations (or a known permission-only action)."""

from __future__ import annotations

import copy
import re

import botocore.session
import pytest

from peagle_deploy import iam_policy
from peagle_deploy.autoscale import AutoscalePolicy
from peagle_deploy.instances import instance_table
from peagle_deploy.plan import PlanRequest, build_plan

from .aws_shapes import StrictShapeError, assert_valid_request, botocore_validate, compile_pattern, request_errors
from .plan_inputs import resolver_for

POLICY = AutoscalePolicy(min_capacity=1, max_capacity=4, metric="concurrency", target=8)


def _plan():
    return build_plan(PlanRequest(model="qwen3-coder", role="arn:aws:iam::123456789012:role/r"),
                      resolver=resolver_for())


def _botocore_accepts(service: str, operation: str, body: dict) -> bool:
    from botocore.validate import ParamValidator

    shape = botocore.session.get_session().get_service_model(service).operation_model(operation).input_shape
    return not botocore_validate(ParamValidator(), body, shape).has_errors()


def _variant_changed(**changes) -> dict:
    body = copy.deepcopy(_plan().create_endpoint_config)
    body["ProductionVariants"][0].update(changes)
    return body


# the three bodies botocore's own validator accepts and AWS refuses (issue 25)
BAD_BODIES = [
    ("unknown-instance-type", "sagemaker", "CreateEndpointConfig", lambda: _variant_changed(InstanceType="ml.g7e.xlarge"),
     "'ml.g7e.xlarge' is not one of the"),
    ("startup-timeout-99999", "sagemaker", "CreateEndpointConfig",
     lambda: _variant_changed(ContainerStartupHealthCheckTimeoutInSeconds=99999), "99999 is above the maximum 3600"),
    ("misspelled-metric", "application-autoscaling", "PutScalingPolicy",
     lambda: {**POLICY.policy_request("ep", "AllTraffic"), "TargetTrackingScalingPolicyConfiguration": {
         "TargetValue": 8.0, "PredefinedMetricSpecification": {
             "PredefinedMetricType": "SageMakerVariantConcurentRequestsPerModelHighResolution"}}},
     "'SageMakerVariantConcurentRequestsPerModelHighResolution' is not one of the"),
]


@pytest.mark.parametrize("case,service,operation,body,message", BAD_BODIES, ids=[c[0] for c in BAD_BODIES])
def test_the_strict_check_refuses_what_botocores_validator_accepts(case, service, operation, body, message):
    body = body()
    assert _botocore_accepts(service, operation, body)  # the weak oracle these tests used to rely on
    errors = request_errors(service, operation, body)
    assert len(errors) == 1 and message in errors[0], errors
    with pytest.raises(AssertionError, match=message.replace("(", r"\(")):
        assert_valid_request(service, operation, body)


def test_lengths_patterns_and_list_sizes_are_checked_too():
    plan = _plan()
    model = {**plan.create_model, "ModelName": "my_model"}  # SageMaker: ^[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}
    assert any("'my_model' does not match ModelName's pattern" in e for e in request_errors("sagemaker", "CreateModel",
                                                                                             model))
    long_name = {**plan.create_endpoint, "EndpointName": "e" * 64}
    assert any("64 characters, more than the maximum 63" in e
               for e in request_errors("sagemaker", "CreateEndpoint", long_name))
    variants = [{**plan.create_endpoint_config["ProductionVariants"][0], "VariantName": f"v{i}"} for i in range(11)]
    many = {**plan.create_endpoint_config, "ProductionVariants": variants}
    assert any("11 items, more than the maximum 10" in e
               for e in request_errors("sagemaker", "CreateEndpointConfig", many))
    tags = {**plan.create_endpoint, "Tags": [{"Key": "team", "Value": "ml\u0000"}]}  # a control character
    assert any("does not match TagValue's pattern" in e for e in request_errors("sagemaker", "CreateEndpoint", tags))
    assert any("InitialInstanceCount" in e and "valid min value: 1" in e for e in request_errors(
        "sagemaker", "CreateEndpointConfig", _variant_changed(InitialInstanceCount=0)))  # botocore's own report
    assert request_errors("sagemaker", "CreateEndpoint", {**plan.create_endpoint, "Bogus": 1})  # unknown member


def test_the_peagle_bodies_pass():
    plan = _plan()
    assert_valid_request("sagemaker", "CreateModel", plan.create_model)
    assert_valid_request("sagemaker", "CreateEndpointConfig", plan.create_endpoint_config)
    assert_valid_request("sagemaker", "CreateEndpoint", plan.create_endpoint)
    assert_valid_request("application-autoscaling", "PutScalingPolicy", POLICY.policy_request("ep", "AllTraffic"))


@pytest.mark.parametrize("service", ["sagemaker", "application-autoscaling"])
def test_every_pattern_of_the_operations_peagle_calls_translates(service):
    """Each Java pattern reachable from the input of an operation peagle's IAM table names compiles in Python."""
    model = botocore.session.get_session().get_service_model(service)
    prefix = {"sagemaker": "sagemaker", "application-autoscaling": "application-autoscaling"}[service]
    operations = {a.split(":", 1)[1] for a in _actions() if a.startswith(prefix + ":")} & set(model.operation_names)
    assert operations
    seen, stack, patterns = set(), [model.operation_model(op).input_shape for op in operations], set()
    while stack:
        shape = stack.pop()
        if shape is None or shape.name in seen:
            continue
        seen.add(shape.name)
        if shape.metadata.get("pattern"):
            patterns.add(shape.metadata["pattern"])
        stack.extend(getattr(shape, "members", {}).values())
        stack.extend(s for s in (getattr(shape, "member", None), getattr(shape, "key", None),
                                 getattr(shape, "value", None)) if s is not None)
    assert patterns
    for pattern in patterns:
        compile_pattern(pattern)


def test_every_pattern_of_every_service_the_suite_checks_compiles():
    """The fork server compiles them all before forking (`precompile`): none may fail, and Java's `\\z` (end of
    input, in sagemaker-runtime's header patterns) means the end, not a letter z."""
    from .aws_shapes import pattern_shapes
    from .botocore_data import PEAGLE_SERVICES

    failed = []
    for service, name, pattern in pattern_shapes(PEAGLE_SERVICES):
        try:
            compile_pattern(pattern)
        except re.error as exc:
            failed.append(f"{service} {name} {pattern!r}: {exc}")
    assert not failed, failed
    inference_id = botocore.session.get_session().get_service_model("sagemaker-runtime").shape_for("InferenceId")
    ends = compile_pattern(inference_id.metadata["pattern"])
    assert ends.fullmatch("run-42") and not ends.fullmatch("run-42\n") and not ends.fullmatch(" run-42")


def test_the_instance_table_names_only_real_sagemaker_instance_types():
    enum = botocore.session.get_session().get_service_model("sagemaker").shape_for(
        "ProductionVariantInstanceType").enum
    shipped = set(instance_table().instances)
    assert shipped and all(name.startswith("ml.g7e.") for name in shipped)
    assert shipped - set(enum) == set(), "not SageMaker instance types in templates/instances.toml"
    assert {name for name in enum if name.startswith("ml.g7e.")} - shipped == set(), (
        "botocore knows ml.g7e types the shipped table lacks")


# IAM service prefix -> the botocore services whose operations it authorizes
IAM_SERVICES = {"sagemaker": ("sagemaker", "sagemaker-runtime"), "application-autoscaling": ("application-autoscaling",),
                "cloudwatch": ("cloudwatch",), "iam": ("iam",), "kms": ("kms",), "logs": ("logs",),
                "pricing": ("pricing",), "s3": ("s3",), "servicequotas": ("service-quotas",), "sts": ("sts",)}
# actions IAM checks that are no API operation of their own (AWS's Service Authorization Reference)
PERMISSION_ONLY = {
    "iam:PassRole": "handing the execution role to SageMaker (CreateModel)",
    "s3:ListBucket": "authorizes ListObjects, ListObjectsV2 and HeadBucket",
    "s3:ListBucketMultipartUploads": "authorizes ListMultipartUploads",
    "sagemaker:CallWithBearerToken": "calling SageMaker's OpenAI-compatible route with a bearer token",
}


def _actions() -> set[str]:
    return {p.action for permissions in iam_policy.COMMANDS.values() for p in permissions}


@pytest.mark.parametrize("action", sorted(_actions() | set(iam_policy._CALL_TO_ACTION.values())))
def test_every_iam_action_names_a_real_operation_or_a_known_permission(action):
    prefix, name = action.split(":", 1)
    assert prefix in IAM_SERVICES, f"{action}: add the botocore services of IAM prefix {prefix!r} to IAM_SERVICES"
    if action in PERMISSION_ONLY:
        return
    session = botocore.session.get_session()
    operations = {op for service in IAM_SERVICES[prefix] for op in session.get_service_model(service).operation_names}
    assert name in operations, f"{action} is no {prefix} operation (misspelled?) and no known permission-only action"


def test_every_recorded_call_maps_to_a_real_operation():
    """`iam_action`'s table of calls IAM authorizes under another name: both sides are real."""
    session = botocore.session.get_session()
    for call in iam_policy._CALL_TO_ACTION:
        prefix, name = call.split(":", 1)
        operations = {op for s in IAM_SERVICES[prefix] for op in session.get_service_model(s).operation_names}
        assert name in operations, call


def test_every_client_in_the_suite_checks_its_request_bodies_strictly():
    """conftest installs the strict walk into botocore's validator: a body AWS would refuse never leaves any
    client of the pytest process (in-process commands, the emulator's seeding); the fork server installs it too."""
    import boto3

    client = boto3.client("sagemaker", region_name="us-east-1", endpoint_url="http://127.0.0.1:9",
                          aws_access_key_id="testing", aws_secret_access_key="testing")
    with pytest.raises(StrictShapeError, match="ml.g7e.xlarge"):
        client.create_endpoint_config(**_variant_changed(InstanceType="ml.g7e.xlarge"))
