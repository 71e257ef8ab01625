"""peagle_deploy/testing/iam_enforcement.py: IAM's decision rules, a request's checks (action, resource ARNs,
dependent actions, context) and the middleware that answers AccessDenied, against the emulator's own state."""

from __future__ import annotations

import pytest

from peagle_deploy.testing.iam_enforcement import (
    Context,
    NotModelled,
    PolicyEnforcer,
    Request,
    arn_like,
    checks,
    evaluate,
)

ACCOUNT = "123456789012"
EP = f"arn:aws:sagemaker:us-east-1:{ACCOUNT}:endpoint/e1"
IC = f"arn:aws:sagemaker:us-east-1:{ACCOUNT}:inference-component/ic1"
MANAGED = {"aws:ResourceTag/peagle:managed": ["true"]}


def allow(action="sagemaker:*", resource="*", condition=None, sid="S", effect="Allow"):
    statement = {"Sid": sid, "Effect": effect, "Action": action, "Resource": resource}
    if condition:
        statement["Condition"] = condition
    return statement


def policy(*statements):
    return {"Version": "2012-10-17", "Statement": list(statements)}


def decide(doc, action="sagemaker:DeleteEndpoint", resource=EP, **values):
    return evaluate(doc, action, resource, Context({k.replace("__", "/").replace("_", ":", 1): v
                                                   for k, v in values.items()}))


# ---- Allow, implicit deny, explicit deny -----------------------------------------------------------------------
def test_an_allow_on_the_action_and_resource_allows_and_names_its_statement():
    verdict = decide(policy(allow("sagemaker:DeleteEndpoint", "arn:aws:sagemaker:*:*:endpoint/*", sid="Manage")))
    assert verdict.allowed and verdict.by == "Manage"


def test_nothing_that_allows_is_the_implicit_deny_with_the_reason_of_each_statement():
    doc = policy(allow("sagemaker:DeleteEndpoint", "arn:aws:sagemaker:*:*:model/*", sid="Models"),
                 allow("sagemaker:DescribeEndpoint", "*", sid="Reads"))
    verdict = decide(doc)
    assert not verdict.allowed and not verdict.explicit_deny
    assert verdict.reasons == ("Models: not on this resource (it names arn:aws:sagemaker:*:*:model/*)",)
    assert decide(policy()).reasons == ("no statement has the action",)


def test_an_explicit_deny_wins_over_any_allow():
    doc = policy(allow("sagemaker:*", "*", sid="All"), allow("sagemaker:Delete*", EP, sid="Never", effect="Deny"))
    verdict = decide(doc)
    assert not verdict.allowed and verdict.explicit_deny and verdict.by == "Never"
    assert decide(doc, action="sagemaker:DescribeEndpoint").allowed


def test_actions_match_case_insensitively_with_wildcards_and_not_action():
    assert decide(policy(allow("SageMaker:delete?ndpoint"))).allowed
    assert not decide(policy(allow("sagemaker:Delete"))).allowed
    assert decide(policy({"Effect": "Allow", "NotAction": "iam:*", "Resource": "*"})).allowed
    assert not decide(policy({"Effect": "Allow", "NotAction": "sagemaker:*", "Resource": "*"})).allowed


def test_resources_match_part_by_part_case_sensitively():
    assert arn_like("arn:aws:sagemaker:*:*:endpoint/*", EP)
    assert not arn_like("arn:aws:sagemaker:*:*:endpoint/*", IC)
    assert not arn_like("arn:aws:sagemaker:*:*:endpoint/E1", EP)  # case matters in ARNs
    assert not arn_like("arn:aws:sagemaker:*:endpoint/*", EP)  # a `*` never spans the parts
    assert arn_like("arn:aws:logs:*:*:log-group:/aws/sagemaker/Endpoints/*",
                    f"arn:aws:logs:us-east-1:{ACCOUNT}:log-group:/aws/sagemaker/Endpoints/x")  # colons in the last part
    assert arn_like("*", "anything") and arn_like("arn:aws:s3:::b?cket/*", "arn:aws:s3:::bucket/k")
    assert decide(policy({"Effect": "Allow", "Action": "*", "NotResource": IC})).allowed


# ---- each condition operator peagle's policy uses, and IAM's rules for absent keys --------------------------------
@pytest.mark.parametrize(("condition", "values", "allowed"), [
    ({"StringEquals": {"aws:ResourceTag/peagle:managed": "true"}}, MANAGED, True),
    ({"StringEquals": {"aws:ResourceTag/peagle:managed": "true"}}, {"aws:ResourceTag/peagle:managed": ["TRUE"]},
     False),  # StringEquals is case-sensitive in the value
    ({"StringEquals": {"aws:ResourceTag/peagle:managed": "true"}}, {}, False),  # absent: false
    ({"StringEquals": {"sagemaker:TaggingAction": ["CreateModel", "CreateEndpoint"]}},
     {"sagemaker:TaggingAction": ["CreateEndpoint"]}, True),  # a key's values: any one
    ({"StringEquals": {"aws:ResourceTag/peagle:managed": "true", "aws:RequestTag/peagle:managed": "true"}}, MANAGED,
     False),  # keys: all of them
    ({"StringLike": {"kms:ViaService": "sagemaker.*.amazonaws.com"}},
     {"kms:ViaService": ["sagemaker.us-east-1.amazonaws.com"]}, True),
    ({"StringLike": {"kms:ViaService": "sagemaker.*.amazonaws.com"}}, {"kms:ViaService": ["s3.amazonaws.com"]}, False),
    ({"StringNotEquals": {"aws:ResourceTag/team": "ml"}}, {}, True),  # a negated operator on an absent key: true
    ({"StringEqualsIfExists": {"aws:ResourceTag/team": "ml"}}, {}, True),
    ({"StringEqualsIfExists": {"aws:ResourceTag/team": "ml"}}, {"aws:ResourceTag/team": ["web"]}, False),
    ({"ForAnyValue:StringEquals": {"aws:TagKeys": ["peagle:managed"]}},
     {"aws:TagKeys": ["peagle:k", "peagle:managed"]}, True),
    ({"ForAnyValue:StringEquals": {"aws:TagKeys": ["peagle:managed"]}}, {"aws:TagKeys": ["peagle:k"]}, False),
    ({"ForAnyValue:StringEquals": {"aws:TagKeys": ["peagle:managed"]}}, {}, False),  # absent: false
    ({"ForAllValues:StringLike": {"aws:TagKeys": ["peagle:*"]}}, {"aws:TagKeys": ["peagle:lease", "peagle:k"]}, True),
    ({"ForAllValues:StringLike": {"aws:TagKeys": ["peagle:*"]}}, {"aws:TagKeys": ["peagle:lease", "owner"]}, False),
    ({"ForAllValues:StringLike": {"aws:TagKeys": ["peagle:*"]}}, {}, True),  # absent: true (IAM's documented trap)
    ({"ForAllValues:StringEquals": {"aws:TagKeys": ["peagle:managed"]}}, {"aws:TagKeys": ["peagle:managed"]}, True),
    ({"Bool": {"kms:GrantIsForAWSResource": "true"}}, {"kms:GrantIsForAWSResource": ["true"]}, True),
    ({"Bool": {"kms:GrantIsForAWSResource": True}}, {"kms:GrantIsForAWSResource": ["false"]}, False),
    ({"Null": {"aws:ResourceTag/peagle:managed": "false"}}, MANAGED, True),  # present
    ({"Null": {"aws:ResourceTag/peagle:managed": "true"}}, MANAGED, False),
    ({"ArnLike": {"iam:AssociatedResourceArn": "arn:aws:sagemaker:*:*:model/*"}},
     {"iam:AssociatedResourceArn": [f"arn:aws:sagemaker:us-east-1:{ACCOUNT}:model/m"]}, True),
])
def test_condition_operators(condition, values, allowed):
    verdict = evaluate(policy(allow(condition=condition)), "sagemaker:DeleteEndpoint", EP, Context(values))
    assert verdict.allowed is allowed, verdict.reasons


def test_a_failed_condition_is_said_with_what_the_request_has():
    doc = policy(allow(condition={"StringEquals": {"aws:ResourceTag/peagle:managed": "true"}}, sid="Manage"))
    [reason] = decide(doc).reasons
    assert reason == "Manage: needs StringEquals aws:ResourceTag/peagle:managed true, here absent"


@pytest.mark.parametrize("condition", [{"NumericLessThan": {"aws:MultiFactorAuthAge": "3600"}},
                                       {"StringEquals": {"aws:ResourceTag/owner": "${aws:username}"}}])
def test_what_is_not_modelled_is_said_never_guessed(condition):
    with pytest.raises(NotModelled):
        decide(policy(allow(condition=condition)), **{"aws_ResourceTag__owner": ["x"]})
    with pytest.raises(NotModelled):
        decide(policy({"Effect": "Allow", "Principal": "*", "Action": "*", "Resource": "*"}))


def test_a_key_the_action_does_not_support_is_absent_and_one_it_cannot_derive_is_an_error():
    context = Context({"aws:RequestTag/peagle:managed": ["true"]}, supported=lambda key: key.lower().startswith("aws:requesttag"),
                      derivable=lambda key: key != "aws:RequestTag/other")
    assert context.get("aws:ResourceTag/peagle:managed") is None
    assert context.get("AWS:requesttag/Peagle:MANAGED") == ["true"]  # key names are case-insensitive
    with pytest.raises(NotModelled):
        context.get("aws:RequestTag/other")


# ---- a request's checks, from AWS's Service Authorization Reference ----------------------------------------------
class FakeState:
    account = ACCOUNT

    def __init__(self, tags=None):
        self.held = tags or {}

    def tags(self, arn):
        return self.held.get(arn)

    def scalable_target(self, region, params):
        return f"arn:aws:application-autoscaling:{region}:{ACCOUNT}:scalable-target/abc"


def found(request, state=None):
    return [(c.action, c.resource) for c in checks(request, state or FakeState())]


def test_a_create_is_checked_on_each_resource_it_names_with_its_tags_and_passed_role():
    tags = [{"Key": "peagle:managed", "Value": "true"}]
    component = Request("sagemaker:CreateInferenceComponent", "us-east-1",
                        {"InferenceComponentName": "ic1", "EndpointName": "e1", "Tags": tags}, "json")
    assert sorted(found(component)) == sorted([
        ("sagemaker:CreateInferenceComponent", EP), ("sagemaker:CreateInferenceComponent", IC),
        ("sagemaker:AddTags", IC)])  # the tags of the create: on the component it makes, not on the endpoint
    model = Request("sagemaker:CreateModel", "eu-west-1", {"ModelName": "m", "Tags": tags,
                                                            "ExecutionRoleArn": f"arn:aws:iam::{ACCOUNT}:role/R"},
                    "json")
    state = FakeState()
    by_action = {c.action: c for c in checks(model, state)}
    assert by_action["iam:PassRole"].resource == f"arn:aws:iam::{ACCOUNT}:role/R"
    assert by_action["iam:PassRole"].context.get("iam:PassedToService") == ["sagemaker.amazonaws.com"]
    tag = by_action["sagemaker:AddTags"]
    assert tag.resource == f"arn:aws:sagemaker:eu-west-1:{ACCOUNT}:model/m"
    assert tag.context.get("sagemaker:TaggingAction") == ["CreateModel"]
    assert tag.context.get("aws:RequestTag/peagle:managed") == ["true"]
    assert tag.context.get("aws:TagKeys") == ["peagle:managed"]
    untagged = Request("sagemaker:CreateModel", "us-east-1", {"ModelName": "m"}, "json")
    assert found(untagged) == [("sagemaker:CreateModel", f"arn:aws:sagemaker:us-east-1:{ACCOUNT}:model/m")]


def test_an_arn_parameter_names_the_resource_and_its_tags_are_read_from_the_state():
    refresh = Request("sagemaker:AddTags", "us-east-1",
                      {"ResourceArn": IC, "Tags": [{"Key": "peagle:lease", "Value": "deploy host=h ..."}]}, "json")
    [check] = checks(refresh, FakeState({IC: {"peagle:managed": "true"}}))
    assert (check.action, check.resource) == ("sagemaker:AddTags", IC)
    assert check.context.get("aws:ResourceTag/peagle:managed") == ["true"]
    assert check.context.get("sagemaker:TaggingAction") is None  # a standalone AddTags: no create's name
    assert check.context.get("aws:TagKeys") == ["peagle:lease"]
    release = Request("sagemaker:DeleteTags", "us-east-1", {"ResourceArn": IC, "TagKeys": ["peagle:lease"]}, "json")
    [check] = checks(release, FakeState())
    assert check.context.get("aws:TagKeys") == ["peagle:lease"]
    assert check.context.get("aws:ResourceTag/peagle:managed") is None  # no such component (any more)


def test_a_list_names_one_resource_each_and_no_name_is_the_types_wildcard():
    alarms = f"arn:aws:cloudwatch:us-east-1:{ACCOUNT}:alarm:"
    deleted = Request("monitoring:DeleteAlarms", "us-east-1", {"AlarmNames": ["peagle-a", "peagle-b"]}, "json")
    assert found(deleted) == [("cloudwatch:DeleteAlarms", alarms + "peagle-a"),
                              ("cloudwatch:DeleteAlarms", alarms + "peagle-b")]
    listed = Request("monitoring:DescribeAlarms", "us-east-1", {"AlarmNamePrefix": "peagle-"}, "json")
    assert found(listed) == [("cloudwatch:DescribeAlarms", alarms + "*")]
    assert found(Request("sagemaker:ListEndpoints", "us-east-1", {}, "json")) == [("sagemaker:ListEndpoints", "*")]


def test_a_service_condition_key_comes_from_the_parameter_of_its_name_and_the_target_from_the_state():
    request = Request("application-autoscaling:PutScalingPolicy", "us-east-1", {
        "ServiceNamespace": "sagemaker", "ResourceId": "inference-component/ic1",
        "ScalableDimension": "sagemaker:inference-component:DesiredCopyCount"}, "json")
    target = f"arn:aws:application-autoscaling:us-east-1:{ACCOUNT}:scalable-target/abc"
    [check] = checks(request, FakeState({target: {"peagle:managed": "true"}}))
    assert check.resource == target
    assert check.context.get("application-autoscaling:scalable-dimension") == [
        "sagemaker:inference-component:DesiredCopyCount"]
    assert check.context.get("aws:ResourceTag/peagle:managed") == ["true"]


def test_an_invocation_of_a_component_is_checked_on_the_endpoint_and_the_component():
    request = Request("sagemaker:InvokeEndpointWithResponseStream", "us-east-1",
                      {"EndpointName": "e1", "InferenceComponentName": "ic1"}, "rest-json")
    assert found(request) == [("sagemaker:InvokeEndpoint", EP), ("sagemaker:InvokeEndpoint", IC)]
    plain = Request("sagemaker:InvokeEndpoint", "us-east-1", {"EndpointName": "e1"}, "rest-json")
    assert found(plain) == [("sagemaker:InvokeEndpoint", EP)]


# ---- the middleware, on the emulator ---------------------------------------------------------------------------
@pytest.fixture(scope="module")
def enforced():
    from peagle_deploy.testing import SageMakerEmulator

    policies: dict[str, dict] = {}
    enforcer = PolicyEnforcer(lambda caller: policies.get(caller))
    with SageMakerEmulator.server(middlewares=[enforcer.middleware], set_env=False) as emu:
        yield emu, enforcer, policies


def _client(emu, service, caller):
    import boto3
    from botocore.config import Config

    return boto3.client(service, region_name=emu.region, endpoint_url=emu.endpoint_url,
                        aws_access_key_id="testing", aws_secret_access_key="testing",
                        config=Config(user_agent_appid=caller, retries={"max_attempts": 1}))


def test_the_middleware_reads_the_tags_the_resource_has_when_the_call_arrives_and_answers_access_denied(enforced):
    from botocore.exceptions import ClientError

    emu, enforcer, policies = enforced
    sm = _client(emu, "sagemaker", "retagger")
    owner = emu.client("sagemaker")  # no app id: unchecked
    arn = owner.create_model(ModelName="m1", ExecutionRoleArn=emu.role_arn, PrimaryContainer={"Image": "x"})[
        "ModelArn"]
    policies["retagger"] = policy(allow("sagemaker:AddTags", "arn:aws:sagemaker:*:*:model/*", sid="RetagManaged",
                                        condition={"StringEquals": {"aws:ResourceTag/peagle:managed": "true"},
                                                   "ForAllValues:StringLike": {"aws:TagKeys": ["peagle:*"]}}))
    with pytest.raises(ClientError) as refused:
        sm.add_tags(ResourceArn=arn, Tags=[{"Key": "peagle:lease", "Value": "x"}])
    error = refused.value.response["Error"]
    assert error["Code"] == "AccessDeniedException"
    assert f"is not authorized to perform: sagemaker:AddTags on resource: {arn} because no identity-based policy " \
           "allows the sagemaker:AddTags action" in error["Message"]
    assert "peagle:lease" not in {t["Key"] for t in owner.list_tags(ResourceArn=arn)["Tags"]}  # refused: not done
    [denial] = enforcer.denials("retagger")
    assert "needs StringEquals aws:ResourceTag/peagle:managed true, here absent" in str(denial)

    owner.add_tags(ResourceArn=arn, Tags=[{"Key": "peagle:managed", "Value": "true"}])  # the state changes...
    sm.add_tags(ResourceArn=arn, Tags=[{"Key": "peagle:lease", "Value": "x"}])  # ...and so does IAM's answer
    assert enforcer.decisions[-1].allowed and enforcer.decisions[-1].why == "RetagManaged"
    with pytest.raises(ClientError):
        sm.add_tags(ResourceArn=arn, Tags=[{"Key": "owner", "Value": "me"}])  # not a peagle:* key


def test_a_caller_without_a_policy_and_each_protocols_refusal(enforced):
    from botocore.exceptions import ClientError

    emu, enforcer, policies = enforced
    policies["reader"] = policy(allow("sagemaker:List*", "*"))
    assert "Endpoints" in _client(emu, "sagemaker", "reader").list_endpoints()
    for service, call in (("sts", lambda c: c.get_caller_identity()),
                          ("s3", lambda c: c.get_object(Bucket="b", Key="k")),
                          ("logs", lambda c: c.filter_log_events(logGroupName="/aws/sagemaker/Endpoints/x"))):
        with pytest.raises(ClientError) as refused:
            call(_client(emu, service, "reader"))
        assert refused.value.response["Error"]["Code"] in ("AccessDenied", "AccessDeniedException"), service
    assert {(d.action, d.resource) for d in enforcer.denials("reader")} == {
        ("sts:GetCallerIdentity", "*"), ("s3:GetObject", "arn:aws:s3:::b/k"),  # path-style: the bucket, then the key
        ("logs:FilterLogEvents", f"arn:aws:logs:{emu.region}:{ACCOUNT}:log-group:/aws/sagemaker/Endpoints/x")}
    before = len(enforcer.decisions)
    emu.client("sagemaker").list_endpoints()  # no policy for this caller: through, unchecked
    assert len(enforcer.decisions) == before


def test_a_component_deploy_whose_policy_denies_its_lease_refresh_says_so_once(enforced):
    """Issue 44's hole, end to end: the policy as it was (no AddTags on inference components); the deploy's heartbeat
    (on the fork's fake clock, 8 Creating polls: 94 s) is refused by the emulator as AWS refuses it, and the deploy
    says it in one warning line with the missing permission, then succeeds."""
    import subprocess

    from peagle_deploy import iam_policy
    from tests.forked_peagle import LEASE_BEATS, forked_peagle

    emu, enforcer, policies = enforced
    printed = iam_policy.policy_document(["deploy"])
    policies["before-44"] = {**printed, "Statement": [s for s in printed["Statement"]
                                                      if s["Sid"] != "RetagManagedComponents"]}
    emu.script_endpoints(creating_polls=8)
    emu.components.script(creating_polls=8)
    try:
        proc = subprocess.run([forked_peagle(), "deploy", "qwen3-coder", "--name", "lease-denied", "--role",
                               emu.role_arn, "--yes", "--scale-to-zero"],
                              env={**emu.env, "AWS_SDK_UA_APP_ID": "before-44", LEASE_BEATS: "1"},
                              capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL)
    finally:
        emu.script_endpoints()
        emu.components.script()
    assert proc.returncode == 0, proc.stderr
    component = f"arn:aws:sagemaker:{emu.region}:{ACCOUNT}:inference-component/lease-denied"
    refused = {(d.action, d.resource) for d in enforcer.denials("before-44")}
    assert refused == {("sagemaker:AddTags", component), ("sagemaker:DeleteTags", component)}  # refresh, release
    [warning] = [line for line in proc.stderr.splitlines() if "lease" in line and line.startswith("warning:")]
    assert warning.startswith(f"warning: the deploy's lease could not be refreshed: AWS denied sagemaker:AddTags on "
                              f"{component} (AccessDeniedException); its peagle:lease tag goes stale at ")
    assert "Traceback" not in proc.stderr
