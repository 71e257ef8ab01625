"""The IAM actions each peagle command needs: the one source for docs/iam.md and `peagle iam-policy`.

tests/test_iam_policy.py runs every command against the emulator, records every AWS API call it really
makes (`testing.write_recorder`), maps each call to the IAM action that allows it (`iam_action`) and
checks the recorded set against this table in both directions: no call that is not listed here, and no
listed action that is never called unless it says why the emulator cannot see it (`unobserved`).
"""

from __future__ import annotations

import re
from typing import Any

from pydantic import BaseModel, ConfigDict

JUMPSTART_BUCKETS = ["arn:aws:s3:::jumpstart-cache-prod-*", "arn:aws:s3:::jumpstart-private-cache-prod-*"]
LOG_GROUPS = "arn:aws:logs:*:*:log-group:/aws/sagemaker/Endpoints/*"
COMPONENT_LOG_GROUPS = "arn:aws:logs:*:*:log-group:/aws/sagemaker/InferenceComponents/*"
DRAFTER_OBJECTS = "arn:aws:s3:::*/*"  # your bucket and prefix: `peagle iam-policy --bucket BUCKET/PREFIX` names it
DRAFTER_BUCKETS = "arn:aws:s3:::*"  # and that bucket itself (its unfinished multipart uploads are listed on it)

# API calls that IAM authorizes under another action's name
_CALL_TO_ACTION = {
    "sagemaker:InvokeEndpointWithResponseStream": "sagemaker:InvokeEndpoint",
    "s3:HeadObject": "s3:GetObject",
    "s3:ListObjects": "s3:ListBucket",
    "s3:ListObjectsV2": "s3:ListBucket",
    "s3:HeadBucket": "s3:ListBucket",
    # boto3's managed transfer sends a large file as a multipart upload: IAM authorizes each part as PutObject
    "s3:CreateMultipartUpload": "s3:PutObject",
    "s3:UploadPart": "s3:PutObject",
    "s3:CompleteMultipartUpload": "s3:PutObject",
    "s3:ListMultipartUploads": "s3:ListBucketMultipartUploads",
}


_SIGNING_TO_IAM = {"monitoring": "cloudwatch"}  # SigV4 signing name -> IAM service prefix


class Permission(BaseModel):
    model_config = ConfigDict(frozen=True)

    action: str
    why: str
    resources: tuple[str, ...] = ("*",)  # for an action SCOPES does not scope (else SCOPES decides)
    unobserved: str | None = None  # why the emulator test never sees this action used (else it must)
    scopes: tuple[str, ...] | None = None  # SCOPES entries for this row, when not the action's default


def _p(action: str, why: str, *, resources: tuple[str, ...] = ("*",), unobserved: str | None = None,
       scopes: tuple[str, ...] | None = None) -> Permission:
    return Permission(action=action, why=why, resources=resources, unobserved=unobserved, scopes=scopes)


# The statements of the policy: resource types and conditions ------------------------------------------------
# Reads see everything (peagle must tell its resources from others'); every SageMaker write is bound to
# peagle:managed: creates must carry the tag (aws:RequestTag), changes and deletes need it on the resource
# (aws:ResourceTag), tags are added only on peagle's creates or to what already is peagle's.
MANAGED = "peagle:managed"
_SM = "arn:aws:sagemaker:*:*:"
ENDPOINTS, CONFIGS, MODELS = _SM + "endpoint/*", _SM + "endpoint-config/*", _SM + "model/*"
COMPONENTS = _SM + "inference-component/*"
SCALABLE_TARGETS = "arn:aws:application-autoscaling:*:*:scalable-target/*"
# Application Auto Scaling names its target tracking alarms TargetTracking-<resource id>-AlarmHigh/Low-<uuid>, the
# resource id of a SageMaker variant being endpoint/NAME/variant/VARIANT (peagle's one variant: hosting.VARIANT_NAME)
ALARM_PREFIX = "TargetTracking-endpoint/"
ALARM_SUFFIX = "/variant/AllTraffic-Alarm*"
AUTOSCALING_ALARMS = f"arn:aws:cloudwatch:*:*:alarm:{ALARM_PREFIX}*{ALARM_SUFFIX}"
COMPONENT_ALARM_PREFIX = "TargetTracking-inference-component/"  # a component's resource id: inference-component/NAME
COMPONENT_AUTOSCALING_ALARMS = f"arn:aws:cloudwatch:*:*:alarm:{COMPONENT_ALARM_PREFIX}*"
PEAGLE_ALARMS = "arn:aws:cloudwatch:*:*:alarm:peagle-*"  # scale to zero: peagle-wake-up-NAME, peagle-idle-NAME
_ON_MANAGED = {"StringEquals": {f"aws:ResourceTag/{MANAGED}": "true"}}
_CREATES_MANAGED = {"StringEquals": {f"aws:RequestTag/{MANAGED}": "true"},
                    "ForAnyValue:StringEquals": {"aws:TagKeys": [MANAGED]}}
_SAGEMAKER_VARIANT = {"application-autoscaling:service-namespace": "sagemaker",
                      "application-autoscaling:scalable-dimension": "sagemaker:variant:DesiredInstanceCount"}
_SAGEMAKER_COMPONENT = {"application-autoscaling:service-namespace": "sagemaker",
                        "application-autoscaling:scalable-dimension": "sagemaker:inference-component:DesiredCopyCount"}
# What AWS's condition keys cannot narrow further, said once by `peagle iam-policy` and in docs/iam.md
UNSCOPED = ("not narrower, and why: the target tracking alarms are made untagged by Application Auto Scaling, so only "
            "their names narrow them (--name-prefix), and scale to zero's own alarms are narrowed by their names "
            "(peagle-*) too; a scalable target carries peagle:managed from its registration, "
            "but no condition tells that tag from a later TagResource on another target; iam:PassRole is on "
            "any role (only to SageMaker) unless --role names it; sagemaker:CallWithBearerToken names no resource (the "
            "token is made before any endpoint), so InvokeEndpoint's statement bounds what a token reaches")


class Scope(BaseModel):
    """One statement of the policy: the resources and the condition its actions are allowed under."""

    model_config = ConfigDict(frozen=True)

    resources: tuple[str, ...]
    condition: dict[str, Any] | None = None
    means: str  # for docs/iam.md


SCOPES: dict[str, Scope] = {
    "Anywhere": Scope(resources=("*",), means="actions without resource-level permissions (lists, identity, "
                                             "quotas, prices)"),
    "JumpStartSpecs": Scope(resources=tuple(f"{b}/*" for b in JUMPSTART_BUCKETS), means="JumpStart's buckets"),
    "DrafterPrefix": Scope(resources=(DRAFTER_OBJECTS,), means="the S3 prefix `drafter stage --to` writes (`iam-policy "
                                                              "--bucket BUCKET/PREFIX`: only there)"),
    "DrafterBucket": Scope(resources=(DRAFTER_BUCKETS,), means="the bucket `drafter stage --to` writes to, for its "
                                                              "unfinished uploads (`iam-policy --bucket`: only it)"),
    "EndpointLogs": Scope(resources=(LOG_GROUPS,), means="the endpoints' log groups"),
    "ComponentLogs": Scope(resources=(COMPONENT_LOG_GROUPS,), means="the inference components' log groups"),
    "ReadEndpoints": Scope(resources=(ENDPOINTS,), means="any endpoint (read, invoke)"),
    "ReadEndpointConfigs": Scope(resources=(CONFIGS,), means="any endpoint config (read)"),
    "ReadModels": Scope(resources=(MODELS,), means="any model (read)"),
    "ReadComponents": Scope(resources=(COMPONENTS,), means="any inference component (read, invoke)"),
    "CreateManagedModels": Scope(resources=(MODELS,), condition=_CREATES_MANAGED,
                                 means=f"only a create that tags it {MANAGED}=true"),
    "CreateManagedConfigs": Scope(resources=(CONFIGS,), condition=_CREATES_MANAGED,
                                  means=f"only a create that tags it {MANAGED}=true"),
    "CreateManagedEndpoints": Scope(resources=(ENDPOINTS,), condition=_CREATES_MANAGED,
                                    means=f"only a create that tags it {MANAGED}=true"),
    "CreateManagedComponents": Scope(resources=(COMPONENTS,), condition=_CREATES_MANAGED,
                                     means=f"only a create that tags it {MANAGED}=true"),
    "CreateComponentsOnManagedEndpoints": Scope(resources=(ENDPOINTS,), condition={
        "StringEquals": {f"aws:RequestTag/{MANAGED}": "true", f"aws:ResourceTag/{MANAGED}": "true"},
        "ForAnyValue:StringEquals": {"aws:TagKeys": [MANAGED]}},
        means=f"only on an endpoint tagged {MANAGED}=true, by a create that tags the component so"),
    "TagOnCreate": Scope(resources=(ENDPOINTS, CONFIGS, MODELS, COMPONENTS), condition={"StringEquals": {
        "sagemaker:TaggingAction": ["CreateModel", "CreateEndpointConfig", "CreateEndpoint",
                                    "CreateInferenceComponent"],
        f"aws:RequestTag/{MANAGED}": "true"}}, means=f"only the tags of peagle's own creates ({MANAGED}=true)"),
    "RetagManaged": Scope(resources=(ENDPOINTS, CONFIGS, MODELS), condition={**_ON_MANAGED, "ForAllValues:StringLike": {
        "aws:TagKeys": ["peagle:*"]}}, means=f"only peagle:* tags, only on what is tagged {MANAGED}=true"),
    # issue 44: a component deploy's lease (peagle:lease) is refreshed and released on its inference component too
    "RetagManagedComponents": Scope(resources=(COMPONENTS,), condition={**_ON_MANAGED, "ForAllValues:StringLike": {
        "aws:TagKeys": ["peagle:*"]}}, means=f"only peagle:* tags, only on an inference component tagged {MANAGED}=true "
                                            "(a deploy's or a sweep's lease)"),
    "ManageEndpoints": Scope(resources=(ENDPOINTS,), condition=_ON_MANAGED,
                             means=f"only an endpoint tagged {MANAGED}=true"),
    "ManageEndpointConfigs": Scope(resources=(CONFIGS,), condition=_ON_MANAGED,
                                   means=f"only an endpoint config tagged {MANAGED}=true"),
    "ManageModels": Scope(resources=(MODELS,), condition=_ON_MANAGED, means=f"only a model tagged {MANAGED}=true"),
    "ManageComponents": Scope(resources=(COMPONENTS,), condition=_ON_MANAGED,
                              means=f"only an inference component tagged {MANAGED}=true"),
    "RegisterManagedScalableTargets": Scope(resources=(SCALABLE_TARGETS,), condition={
        "StringEquals": {**_SAGEMAKER_VARIANT, f"aws:RequestTag/{MANAGED}": "true"},
        "ForAnyValue:StringEquals": {"aws:TagKeys": [MANAGED]}},
        means=f"registering a SageMaker variant's instance count only tagged {MANAGED}=true"),
    "RegisterManagedComponentTargets": Scope(resources=(SCALABLE_TARGETS,), condition={
        "StringEquals": {**_SAGEMAKER_COMPONENT, f"aws:RequestTag/{MANAGED}": "true"},
        "ForAnyValue:StringEquals": {"aws:TagKeys": [MANAGED]}},
        means=f"registering an inference component's copy count only tagged {MANAGED}=true"),
    "TagScalableTargetsOnRegister": Scope(resources=(SCALABLE_TARGETS,), condition={
        "StringEquals": {f"aws:RequestTag/{MANAGED}": "true"}, "ForAllValues:StringEquals": {"aws:TagKeys": [MANAGED]}},
        means=f"only the {MANAGED}=true tag a registration gives"),
    "ScaleManagedVariants": Scope(resources=(SCALABLE_TARGETS,), condition={
        "StringEquals": {**_SAGEMAKER_VARIANT, f"aws:ResourceTag/{MANAGED}": "true"}},
        means=f"only a SageMaker variant's scalable target tagged {MANAGED}=true"),
    "ScaleManagedComponents": Scope(resources=(SCALABLE_TARGETS,), condition={
        "StringEquals": {**_SAGEMAKER_COMPONENT, f"aws:ResourceTag/{MANAGED}": "true"}},
        means=f"only an inference component's scalable target tagged {MANAGED}=true"),
    "AutoscalingAlarms": Scope(resources=(AUTOSCALING_ALARMS,), means="only the target tracking alarms of an endpoint's "
                                                                      f"AllTraffic variant ({ALARM_PREFIX}*"
                                                                      f"{ALARM_SUFFIX})"),
    "ComponentAutoscalingAlarms": Scope(resources=(COMPONENT_AUTOSCALING_ALARMS,),
                                        means=f"only target tracking alarms of inference components "
                                              f"({COMPONENT_ALARM_PREFIX}*)"),
    "PeagleAlarms": Scope(resources=(PEAGLE_ALARMS,), means="only alarms named peagle-* (scale to zero's wake-up "
                                                            "alarm, and an older peagle's idle alarm)"),
    "ReadAlarms": Scope(resources=("arn:aws:cloudwatch:*:*:alarm:*",), means="any alarm (read: --rollback-alarm; "
                                                                        "scale to zero's alarms and their tags)"),
    "KmsGrantsForSageMaker": Scope(resources=("arn:aws:kms:*:*:key/*",), condition={
        "Bool": {"kms:GrantIsForAWSResource": "true"}, "StringLike": {"kms:ViaService": "sagemaker.*.amazonaws.com"}},
        means="only a grant SageMaker makes for its own resources"),
    "KmsKeysViaSageMaker": Scope(resources=("arn:aws:kms:*:*:key/*",), condition={
        "StringLike": {"kms:ViaService": "sagemaker.*.amazonaws.com"}}, means="only through SageMaker"),
    "PassExecutionRole": Scope(resources=("arn:aws:iam::*:role/*",), condition={
        "StringEquals": {"iam:PassedToService": "sagemaker.amazonaws.com"}},
        means="only to SageMaker (`iam-policy --role ARN`: only that role)"),
    "AutoscalingServiceLinkedRole": Scope(resources=(
        "arn:aws:iam::*:role/aws-service-role/sagemaker.application-autoscaling.amazonaws.com/"
        "AWSServiceRoleForApplicationAutoScaling_SageMakerEndpoint",), condition={
        "StringLike": {"iam:AWSServiceName": "sagemaker.application-autoscaling.amazonaws.com"}},
        means="only Application Auto Scaling's role for SageMaker"),
}

# the statements each action goes in, unless its row names others (`scopes=`); an action missing here goes in a
# statement of its row's `resources`, without a condition (tests/test_iam_policy_sentry.py says when it may not)
ACTION_SCOPES: dict[str, tuple[str, ...]] = {
    "sts:GetCallerIdentity": ("Anywhere",),
    "servicequotas:ListServiceQuotas": ("Anywhere",),
    "pricing:GetProducts": ("Anywhere",),
    "s3:GetObject": ("JumpStartSpecs",),
    "s3:PutObject": ("DrafterPrefix",),
    "s3:AbortMultipartUpload": ("DrafterPrefix",),
    "s3:ListBucketMultipartUploads": ("DrafterBucket",),
    "logs:FilterLogEvents": ("EndpointLogs",),
    "sagemaker:ListInferenceComponents": ("Anywhere",),
    "sagemaker:DescribeInferenceComponent": ("ReadComponents",),
    "sagemaker:CreateInferenceComponent": ("CreateManagedComponents", "CreateComponentsOnManagedEndpoints"),
    "sagemaker:DeleteInferenceComponent": ("ManageComponents",),
    "sagemaker:UpdateInferenceComponentRuntimeConfig": ("ManageComponents",),
    "sagemaker:UpdateInferenceComponent": ("ManageComponents",),
    "application-autoscaling:DescribeScalingActivities": ("Anywhere",),
    "cloudwatch:ListTagsForResource": ("ReadAlarms",),
    "cloudwatch:TagResource": ("PeagleAlarms",),
    "sagemaker:ListEndpoints": ("Anywhere",),
    "sagemaker:ListEndpointConfigs": ("Anywhere",),
    "sagemaker:ListModels": ("Anywhere",),
    "sagemaker:DescribeEndpoint": ("ReadEndpoints",),
    # an invocation that names an inference component is authorized on the component's ARN too (the Service
    # Authorization Reference lists inference-component as InvokeEndpoint's second resource type)
    "sagemaker:InvokeEndpoint": ("ReadEndpoints", "ReadComponents"),
    "sagemaker:DescribeEndpointConfig": ("ReadEndpointConfigs",),
    "sagemaker:DescribeModel": ("ReadModels",),
    "sagemaker:ListTags": ("ReadEndpoints", "ReadEndpointConfigs", "ReadModels", "ReadComponents"),
    "sagemaker:CreateModel": ("CreateManagedModels",),
    "sagemaker:CreateEndpointConfig": ("CreateManagedConfigs",),
    "sagemaker:CreateEndpoint": ("CreateManagedEndpoints", "CreateManagedConfigs"),
    "sagemaker:AddTags": ("TagOnCreate",),
    "sagemaker:DeleteTags": ("RetagManaged",),
    "sagemaker:UpdateEndpoint": ("ManageEndpoints", "ManageEndpointConfigs"),
    "sagemaker:UpdateEndpointWeightsAndCapacities": ("ManageEndpoints",),
    "sagemaker:DeleteEndpoint": ("ManageEndpoints",),
    "sagemaker:DeleteEndpointConfig": ("ManageEndpointConfigs",),
    "sagemaker:DeleteModel": ("ManageModels",),
    "application-autoscaling:DescribeScalableTargets": ("Anywhere",),
    "application-autoscaling:DescribeScalingPolicies": ("Anywhere",),
    "application-autoscaling:RegisterScalableTarget": ("RegisterManagedScalableTargets", "ScaleManagedVariants"),
    "application-autoscaling:TagResource": ("TagScalableTargetsOnRegister",),
    "application-autoscaling:PutScalingPolicy": ("ScaleManagedVariants",),
    "application-autoscaling:DeleteScalingPolicy": ("ScaleManagedVariants",),
    "application-autoscaling:DeregisterScalableTarget": ("ScaleManagedVariants",),
    "cloudwatch:PutMetricAlarm": ("AutoscalingAlarms",),
    "cloudwatch:DeleteAlarms": ("AutoscalingAlarms",),
    "cloudwatch:DescribeAlarms": ("ReadAlarms",),
    "kms:CreateGrant": ("KmsGrantsForSageMaker",),
    "kms:DescribeKey": ("KmsKeysViaSageMaker",),
    "iam:PassRole": ("PassExecutionRole",),
    "iam:CreateServiceLinkedRole": ("AutoscalingServiceLinkedRole",),
}


def scopes_of(permission: Permission) -> list[tuple[str, Scope]]:
    """The statements (Sid, Scope) a row's action is allowed in."""
    names = permission.scopes or ACTION_SCOPES.get(permission.action)
    if names:
        return [(name, SCOPES[name]) for name in names]
    return [(_sid(permission.resources), Scope(resources=permission.resources, means="as listed"))]


_IDENTITY = _p("sts:GetCallerIdentity", "say 'no AWS access' (exit 3) before anything is created; IAM always "
                                        "allows it, listed for completeness")
_SPEC = _p("s3:GetObject", "read the JumpStart spec, the model's image and artifact locations",
           resources=tuple(f"{bucket}/*" for bucket in JUMPSTART_BUCKETS))
_LOGS = _p("logs:FilterLogEvents", "read the container's log lines (/aws/sagemaker/Endpoints/NAME)",
           resources=(LOG_GROUPS,))
_TAGS = _p("sagemaker:ListTags", "tell peagle's endpoints (tag peagle:managed) from everything else")
_PRICE = _p("pricing:GetProducts", "the SageMaker hosting price of the instance type (AWS Price List; without it "
                                   "the price is shown as unknown)")
_AAS_READ = [_p("application-autoscaling:DescribeScalableTargets", "the endpoint's autoscaling range"),
             _p("application-autoscaling:DescribeScalingPolicies", "the endpoint's target tracking policy")]
_AAS_REMOVE = [
    _p("application-autoscaling:DeleteScalingPolicy", "remove the target tracking policy before the endpoint"),
    _p("application-autoscaling:DeregisterScalableTarget", "deregister the variant before the endpoint goes"),
]
_ROUTE_TOKEN = _p("sagemaker:CallWithBearerToken", "SageMaker's OpenAI route: a bearer token is a presigned "
                                                    "CallWithBearerToken request, checked on every call")
_ALARMS = "Application Auto Scaling manages the target tracking alarms with the caller's permissions; " \
          "the emulator makes no CloudWatch call"
# --hosting component / --scale-to-zero (docs/hosting.md)
_BOTH_SCALING = ("ScaleManagedVariants", "ScaleManagedComponents")
_BOTH_REGISTERS = ("RegisterManagedScalableTargets", "RegisterManagedComponentTargets", *_BOTH_SCALING)
_ALL_ALARMS = ("AutoscalingAlarms", "ComponentAutoscalingAlarms", "PeagleAlarms")
_IC_LIST = _p("sagemaker:ListInferenceComponents", "an endpoint's inference components; a model a component names "
                                                    "is in use (never removed as unused)")
_IC_READ = _p("sagemaker:DescribeInferenceComponent", "a component's status, copies and the model it names")
_IC_DELETE = _p("sagemaker:DeleteInferenceComponent", "remove peagle's inference component before its endpoint")
_SCALING_BY_AAS = _p("sagemaker:UpdateInferenceComponentRuntimeConfig",
                     "--scale-to-zero: what scaling does to the component's copies",
                     unobserved="Application Auto Scaling calls it with the caller's permissions; the emulator has "
                                "no IAM")
_ALARM_TAGS = _p("cloudwatch:TagResource", "--scale-to-zero: the tags given in PutMetricAlarm (peagle:managed)",
                 unobserved="authorized inside PutMetricAlarm's Tags, not an API call of its own")
_ALARM_READS = [_p("cloudwatch:DescribeAlarms", "scale to zero: peagle's wake-up alarm (and an older peagle's idle "
                                                "alarm): their state"),
                _p("cloudwatch:ListTagsForResource", "scale to zero: remove an alarm only if it carries "
                                                     "peagle:managed")]
_COMPONENT_LOGS = "EndpointLogs", "ComponentLogs"
# the registration's tags (the scalable target's peagle:managed): AWS requires TagResource for tags given there
_TAG_ON_REGISTER = _p("application-autoscaling:TagResource", "the registration tags the scalable target "
                                                             f"{MANAGED}=true (what the autoscaling writes require)",
                      unobserved="the tag travels inside RegisterScalableTarget; AWS requires TagResource for tags "
                                 "given there, which no separate API call shows")

COMMANDS: dict[str, list[Permission]] = {
    "deploy": [
        _IDENTITY,
        _SPEC,
        _PRICE,
        _p("servicequotas:ListServiceQuotas", "check the instance quota (each instance pool's, with --instance-type "
                                              "A,B) before creating anything"),
        _p("sagemaker:CreateModel", "create the model (container, model data, drafter channel; an instance "
                                    "pool's own model)"),
        _p("sagemaker:CreateEndpointConfig", "create the endpoint configuration"),
        _p("sagemaker:CreateEndpoint", "create the endpoint"),
        _p("sagemaker:CreateInferenceComponent", "--hosting component: the inference component, once the endpoint "
                                                 "is InService"),
        _IC_READ.model_copy(update={"why": "--hosting component: wait for InService; verify its model and sizes"}),
        _p("sagemaker:AddTags", "tag what it creates (peagle:managed, TTL, K, ..., its lease: AWS requires AddTags for "
                                "tags given on create); refresh the lease (peagle:lease) on them, an inference "
                                "component included, every 60 s while it runs",
           scopes=("TagOnCreate", "RetagManaged", "RetagManagedComponents")),  # issue 44: on its component too
        _p("sagemaker:DeleteTags", "release its lease (peagle:lease) on what it created when it ends (its inference "
                                   "component's too)", scopes=("RetagManaged", "RetagManagedComponents")),
        _p("iam:PassRole", "hand --role to SageMaker in CreateModel (condition iam:PassedToService "
                           "sagemaker.amazonaws.com)",
           resources=("arn:aws:iam::*:role/*",),
           unobserved="authorized inside CreateModel, not an API call of its own"),
        _p("sagemaker:DescribeEndpoint", "wait for InService"),
        _p("sagemaker:DescribeTrainingPlan", "--capacity-reservation of a training plan: read it before anything is "
                                             "created (one that does not exist creates nothing)",
           resources=(_SM + "training-plan/*",),
           unobserved="only with a training plan's ARN, which this test's deploys do not pass "
                      "(tests/test_input_rule.py deploys with one against the emulator)"),
        _p("sagemaker:DescribeReservedCapacity", "--capacity-reservation of a reserved capacity: read it first too",
           resources=(_SM + "reserved-capacity/*",),
           unobserved="only with a reserved capacity's ARN; the emulator models training-plan reservations only"),
        _p("sagemaker:DescribeModel", "verify the live speculative config, drafter channel and VPC config"),
        _p("sagemaker:DescribeEndpointConfig", "verify the live instance type and KMS key"),
        _LOGS.model_copy(update={"why": "read vLLM's start-up lines (version, runner, parsed config; a component's "
                                        "in /aws/sagemaker/InferenceComponents/NAME)", "scopes": _COMPONENT_LOGS}),
        _p("sagemaker:DeleteEndpoint", "roll back a failed or interrupted deploy"),
        _IC_DELETE.model_copy(update={"why": "--hosting component: roll back (the component before its endpoint)"}),
        _IC_LIST.model_copy(update={"why": "roll back: " + _IC_LIST.why}),
        _p("sagemaker:DeleteEndpointConfig", "roll back a failed or interrupted deploy"),
        _p("sagemaker:DeleteModel", "roll back a failed or interrupted deploy"),
        _TAGS.model_copy(update={"why": "roll back only what this deploy created (its peagle:created-at tag)"}),
        _p("sagemaker:ListEndpoints", "roll back: keep a config another endpoint uses"),
        _p("sagemaker:ListEndpointConfigs", "roll back: keep a model another config uses"),
        _p("application-autoscaling:RegisterScalableTarget", "--autoscale: register the variant after InService; "
                                                             "--scale-to-zero: the component's copies",
           scopes=_BOTH_REGISTERS),
        _TAG_ON_REGISTER.model_copy(update={"why": "--autoscale, --scale-to-zero: " + _TAG_ON_REGISTER.why}),
        _p("application-autoscaling:PutScalingPolicy", "--autoscale: attach the target tracking policy; "
                                                       "--scale-to-zero: target tracking with scale-in and the "
                                                       "wake-up step policy",
           scopes=_BOTH_SCALING),
        *[p.model_copy(update={"why": "--autoscale: roll back a registration (" + p.why + ")"})
          for p in [*_AAS_READ]],
        _AAS_REMOVE[1].model_copy(update={"why": "--autoscale, --scale-to-zero: roll back a registration",
                                          "scopes": _BOTH_SCALING}),
        _AAS_REMOVE[0].model_copy(update={
            "why": "--autoscale, --scale-to-zero: roll back an attached policy", "scopes": _BOTH_SCALING}),
        _SCALING_BY_AAS,
        _p("sagemaker:UpdateEndpointWeightsAndCapacities", "--autoscale: what scaling does to the variant (in "
                                                           "SageMaker's minimum autoscaling permissions)",
           unobserved="Application Auto Scaling calls it with the caller's permissions; the emulator has no IAM"),
        _p("cloudwatch:PutMetricAlarm", "--scale-to-zero: the wake-up alarm; --autoscale, --scale-to-zero: the "
                                        "target tracking policy's alarms (Application Auto Scaling, as you)",
           scopes=_ALL_ALARMS),
        _ALARM_TAGS,
        *[p.model_copy(update={"why": "--scale-to-zero, roll back: " + p.why}) for p in _ALARM_READS],
        _p("cloudwatch:DeleteAlarms", "--scale-to-zero: roll back peagle's alarms; --autoscale: the alarms of a "
                                      "policy rolled back (Application Auto Scaling, as you)", scopes=_ALL_ALARMS),
        _p("iam:CreateServiceLinkedRole", "--autoscale, first time in an account: Application Auto Scaling's "
                                          "role for SageMaker variants",
           resources=("arn:aws:iam::*:role/aws-service-role/sagemaker.application-autoscaling.amazonaws.com/"
                      "AWSServiceRoleForApplicationAutoScaling_SageMakerEndpoint",),
           unobserved="created by Application Auto Scaling on the first registration; the emulator has no IAM"),
        _p("kms:CreateGrant", "only with --kms-key: SageMaker creates a grant on the key for the volumes",
           unobserved="called by SageMaker on the caller's behalf; the emulator has no KMS"),
        _p("kms:DescribeKey", "only with --kms-key: SageMaker checks the key",
           unobserved="called by SageMaker on the caller's behalf; the emulator has no KMS"),
    ],
    "status": [
        _p("sagemaker:ListEndpoints", "find the endpoints of the region"),
        _TAGS,
        _p("sagemaker:DescribeEndpoint", "status, instance count, failure reason"),
        _p("sagemaker:DescribeEndpointConfig", "the config each endpoint serves: its instances and model"),
        _p("sagemaker:DescribeModel", "K and mode from the served model's SM_VLLM_SPECULATIVE_CONFIG"),
        _p("sagemaker:ListEndpointConfigs", "peagle-made configs no endpoint uses"),
        _p("sagemaker:ListModels", "peagle-made models no endpoint uses"),
        _LOGS.model_copy(update={"why": "NAME: what vLLM logged at start-up"}),
        _p("sagemaker:DescribeEndpointConfig", "NAME: the served config, to check vLLM's start-up lines against"),
        _p("sagemaker:DescribeModel", "NAME: the served SM_VLLM_SPECULATIVE_CONFIG"),
        _PRICE.model_copy(update={"why": "the SageMaker hosting price, for the cost so far"}),
        *_AAS_READ,
        _IC_LIST, _IC_READ,
        _p("application-autoscaling:DescribeScalingActivities", "a component's copy count over time: its cost so "
                                                                "far from instance-hours"),
        _ALARM_READS[0].model_copy(update={"why": "a component's wake-up alarm and its scale-in alarm (target "
                                                  "tracking's AlarmLow, or an older peagle's idle alarm): their "
                                                  "state, and whether the scale-in acted"}),
    ],
    "invoke": [
        _IC_LIST.model_copy(update={"why": "which inference component of the endpoint the request names (none: "
                                           "the endpoint itself)"}),
        _p("sagemaker:InvokeEndpoint", "send the request (InvokeEndpointWithResponseStream and InvokeEndpoint "
                                       "both need this action, and so does the OpenAI route; with an inference "
                                       "component, on its ARN too); at zero copies, again until a copy answers"),
        _ROUTE_TOKEN.model_copy(update={"why": "--transport openai-route or an OpenAI route URL: the bearer token "
                                               "made on the fly is a CallWithBearerToken request"}),
        _IC_READ.model_copy(update={"why": "--wait-timeout ended a wake-up: the component's copies, for the line "
                                           "that says its state"}),
        _p("sagemaker:DescribeEndpoint", "--wait-timeout ended a wake-up: the instances running, for the line that "
                                         "says what bills"),
    ],
    "openai": [
        _p("sagemaker:DescribeEndpoint", "refuse an endpoint that does not exist or is not InService"),
        _IC_LIST.model_copy(update={"why": "an endpoint that hosts an inference component: its route URL names "
                                           "the component"}),
        _ROUTE_TOKEN.model_copy(update={
            "why": "the token's own action: whoever uses the token calls the route as you",
            "unobserved": "peagle openai only makes the token (locally, no AWS call); its user's requests need it"}),
        _p("sagemaker:InvokeEndpoint", "the route's requests, made with the token as you",
           unobserved="peagle openai only makes the token (locally, no AWS call); its user's requests need it"),
    ],
    "bench": [
        _p("sagemaker:DescribeEndpoint", "the endpoint's config name and status"),
        _p("sagemaker:DescribeEndpointConfig", "instance type and count, for cost per million tokens"),
        _p("sagemaker:DescribeModel", "the served SM_VLLM_SPECULATIVE_CONFIG: the mode and K the endpoint runs"),
        _TAGS.model_copy(update={"why": "the mode and K label peagle tagged (checked against the served config)"}),
        _IC_LIST.model_copy(update={"why": "which inference component of the endpoint the run measures (none: the "
                                           "endpoint itself)"}),
        _IC_READ.model_copy(update={"why": "the model the inference component names: the mode and K it runs"}),
        _p("sagemaker:InvokeEndpoint", "the benchmark's requests (and, at zero copies, the ones that wake the "
                                       "inference component before anything is measured)"),
        _ROUTE_TOKEN.model_copy(update={"why": "--transport openai-route or both: the bearer token made on the fly"}),
        _LOGS.model_copy(update={"why": "acceptance from vLLM's SpecDecoding metrics lines (an inference "
                                        "component's in its own group)", "scopes": _COMPONENT_LOGS}),
        _PRICE.model_copy(update={"why": "the SageMaker hosting price, for $ per million tokens (without it: "
                                         "unknown)"}),
    ],
    "metrics": [
        _IC_LIST.model_copy(update={"why": "an endpoint that hosts an inference component: the component writes "
                                           "to its own log group"}),
        _LOGS.model_copy(update={"why": "vLLM's SpecDecoding metrics lines over the window (an inference "
                                        "component's in its own group)", "scopes": _COMPONENT_LOGS}),
    ],
    "logs": [
        _IC_LIST.model_copy(update={"why": "an endpoint that hosts an inference component: the component's copies "
                                           "write to its own log group"}),
        _LOGS.model_copy(update={"why": "read the container's log lines (/aws/sagemaker/Endpoints/NAME, an inference "
                                        "component's /aws/sagemaker/InferenceComponents/COMPONENT)",
                                 "scopes": _COMPONENT_LOGS}),
    ],
    "update": [
        _IDENTITY,
        _SPEC,
        _PRICE.model_copy(update={"why": "the new fleet's SageMaker hosting price (the price guard)"}),
        _TAGS.model_copy(update={"why": "update only an endpoint peagle manages; its mode and K"}),
        _p("sagemaker:DescribeEndpoint", "the live configuration; wait for Updating to end"),
        _p("sagemaker:DescribeEndpointConfig", "the live instance type, count and model"),
        _p("sagemaker:DescribeModel", "the live container, its environment and model data"),
        _p("sagemaker:CreateModel", "the new model (when the container's environment changes)"),
        _p("sagemaker:CreateEndpointConfig", "the new endpoint configuration"),
        _p("sagemaker:UpdateEndpoint", "switch the endpoint over (blue/green, baking period, rollback alarms)"),
        _p("sagemaker:UpdateInferenceComponent", "a component-based endpoint: move its component to the new model",
           unobserved="only on an endpoint that hosts an inference component, which the update scenario does not "
                      "deploy (tests/test_components_update.py does)"),
        _p("servicequotas:ListServiceQuotas", "--instance-type A,B: each instance pool's quota, as deploy reads it"),
        _p("sagemaker:AddTags", "the update's intent and lease on the endpoint before its first write (for peagle "
                                "recover; the lease refreshed every 60 s); tag the new config and model as the live "
                                "ones; retag the endpoint with its new K, mode and instances",
           scopes=("TagOnCreate", "RetagManaged")),
        _p("sagemaker:DeleteTags", "clear the update's intent and lease once it is done"),
        _p("iam:PassRole", "the live model's execution role goes to the new model (condition iam:PassedToService "
                           "sagemaker.amazonaws.com)",
           resources=("arn:aws:iam::*:role/*",), unobserved="authorized inside CreateModel, not an API call of its own"),
        _LOGS.model_copy(update={"why": "verify the new speculative config in vLLM's start-up lines (a component's "
                                        "in /aws/sagemaker/InferenceComponents/NAME)",
                                 "scopes": _COMPONENT_LOGS}),  # issue 44: a component endpoint's update reads it
        _p("sagemaker:ListEndpoints", "keep a previous config another endpoint still uses"),
        _p("sagemaker:ListEndpointConfigs", "keep a previous model another config still uses"),
        _p("sagemaker:DeleteEndpointConfig", "remove the previous config after success (or the new one after a "
                                             "rollback)"),
        _p("sagemaker:DeleteModel", "remove the previous model after success (or the new one after a rollback)"),
        _IC_LIST.model_copy(update={"why": "keep a previous model an inference component names"}),
        _IC_READ.model_copy(update={"why": "which model each inference component names",
                                    "unobserved": "only while the region holds inference components"}),
        _p("cloudwatch:DescribeAlarms", "--rollback-alarm: check the alarms exist before updating",
           unobserved="only with --rollback-alarm, which the emulator test does not pass"),
        *[p.model_copy(update={"why": "--autoscale or --instance-type on an autoscaled endpoint: " + p.why,
                               "unobserved": "a K-only update leaves autoscaling alone; tests/test_update_units.py "
                                             "covers the others"})
          for p in [_p("application-autoscaling:RegisterScalableTarget", "register the variant again"), _TAG_ON_REGISTER,
                    _p("application-autoscaling:PutScalingPolicy", "its target tracking policy"),
                    *_AAS_READ, *_AAS_REMOVE]],
    ],
    "cleanup": [
        _p("sagemaker:ListEndpoints", "--all/--expired: find peagle's endpoints"),
        _p("sagemaker:ListEndpointConfigs", "find configs no endpoint uses any more"),
        _p("sagemaker:ListModels", "find models no config uses any more (NAME's by tag)"),
        _TAGS.model_copy(update={"why": "delete only what carries peagle:managed; NAME's configs and models by their "
                                        "peagle:endpoint tag"}),
        _p("sagemaker:AddTags", "record the deletion on the endpoint first (peagle:deleting, with the cleanup's "
                                "lease, refreshed every 60 s), so peagle recover can finish an interrupted cleanup",
           scopes=("RetagManaged",)),
        _p("sagemaker:DeleteTags", "release the cleanup's lease on an endpoint whose deletion failed",
           unobserved="only when a delete fails; tests/test_leases.py covers it"),
        _p("sagemaker:DescribeEndpoint", "which config an endpoint uses; wait for the deletion"),
        _p("sagemaker:DescribeEndpointConfig", "which model a config uses"),
        _p("sagemaker:DescribeModel", "whether the model exists"),
        _p("sagemaker:DeleteEndpoint", "remove the endpoint"),
        _p("sagemaker:DeleteEndpointConfig", "remove its configuration"),
        _p("sagemaker:DeleteModel", "remove its model"),
        *_AAS_READ,
        *[p.model_copy(update={"scopes": _BOTH_SCALING}) for p in _AAS_REMOVE],
        _IC_LIST, _IC_READ, _IC_DELETE,
        *_ALARM_READS,
        _p("cloudwatch:DeleteAlarms", "peagle's wake-up alarm (and an older peagle's idle alarm); the alarms of a "
                                      "removed scaling policy (Application Auto Scaling, as you)", scopes=_ALL_ALARMS),
    ],
}

_RECOVER_ONLY_AFTER_CLEANUP = "only when it finishes an interrupted cleanup; tests/test_interrupt_recovery.py covers it"
COMMANDS["recover"] = [
    _p("sagemaker:ListEndpoints", "--all: peagle's endpoints; who uses which config"),
    _p("sagemaker:ListEndpointConfigs", "peagle-made configs no endpoint uses"),
    _p("sagemaker:ListModels", "peagle-made models no endpoint uses"),
    _TAGS.model_copy(update={"why": "peagle's own only; the intent an interrupted update or cleanup left"}),
    _p("sagemaker:DescribeEndpoint", "status, the config it serves or moves to; wait until it settles"),
    _p("sagemaker:DescribeEndpointConfig", "the served config's instances and model; which model a config uses"),
    _p("sagemaker:DescribeModel", "K and mode from the served model's SM_VLLM_SPECULATIVE_CONFIG"),
    _p("sagemaker:AddTags", "labels (peagle:k, mode, instances, autoscale) rewritten from the served config",
       scopes=("RetagManaged",)),
    _p("sagemaker:DeleteTags", "clear the finished update's intent, and the lease of abandoned work it took over"),
    _p("sagemaker:DeleteEndpointConfig", "remove peagle-made configs no endpoint uses"),
    _p("sagemaker:DeleteModel", "remove peagle-made models no endpoint uses"),
    _p("sagemaker:DeleteEndpoint", "finish an interrupted cleanup (peagle:deleting); remove what an abandoned sweep "
                                   "left", unobserved=_RECOVER_ONLY_AFTER_CLEANUP),
    _IC_LIST, _IC_READ.model_copy(update={"unobserved": "only while the region holds inference components"}),
    *[p.model_copy(update={"why": "a component whose endpoint was deleted under it: " + p.why,
                           "unobserved": "only for such a component; tests/test_components_e2e.py covers it"})
      for p in [_IC_DELETE, *_ALARM_READS, _p("cloudwatch:DeleteAlarms", "its alarms", scopes=("PeagleAlarms",))]],
    _AAS_READ[0],
    _AAS_READ[1].model_copy(update={"unobserved": "read only while a target is registered; the test's scenario "
                                                  "recovers an endpoint whose target an update removed"}),
    _p("application-autoscaling:RegisterScalableTarget", "register the intended autoscaling again"),
    _TAG_ON_REGISTER,
    _p("application-autoscaling:PutScalingPolicy", "its target tracking policy"),
    *[p.model_copy(update={"why": "finish an interrupted cleanup: " + p.why, "unobserved": _RECOVER_ONLY_AFTER_CLEANUP,
                           "scopes": _BOTH_SCALING}) for p in _AAS_REMOVE],
]

# `update --scale-to-zero` (and any update of such an endpoint) and `recover` move a component from an older peagle's
# idle rule to AWS's recipe (lifecycle/scaling_migration.py): target tracking put, the older policy and alarm deleted
_MOVE = "only on a component an older peagle scaled to zero; tests/test_components_e2e.py covers it"
for _command in ("update", "recover"):
    COMMANDS[_command] += [p.model_copy(update={"unobserved": _MOVE}) for p in [
        _p("application-autoscaling:DescribeScalableTargets", "a component's scaling, to move an older idle rule"),
        _p("application-autoscaling:DescribeScalingPolicies", "whether a component has an older peagle's idle rule"),
        _p("cloudwatch:DescribeAlarms", "an older peagle's idle alarm of a component"),
        _p("cloudwatch:ListTagsForResource", "delete that alarm only if it carries peagle:managed",
           scopes=("ReadAlarms",)),
        _p("application-autoscaling:PutScalingPolicy", "the component's target tracking with scale-in (AWS's "
                                                       "scale-to-zero recipe)", scopes=("ScaleManagedComponents",)),
        _p("application-autoscaling:DeleteScalingPolicy", "the older idle step policy",
           scopes=("ScaleManagedComponents",)),
        _p("cloudwatch:DeleteAlarms", "the older idle alarm", scopes=("PeagleAlarms",)),
        _p("cloudwatch:PutMetricAlarm", "the target tracking policy's alarms (Application Auto Scaling, as you)",
           scopes=("ComponentAutoscalingAlarms",)),
    ]]

# The acceptance alarm (acceptance_alarm.py, docs/monitoring.md): metric filters on the endpoints' and components' log
# groups (filters carry no tags: peagle's are named peagle-acceptance-*), its alarm named peagle-acceptance-NAME
ACCEPTANCE_ALARMS = "arn:aws:cloudwatch:*:*:alarm:peagle-acceptance-*"
SCOPES["AcceptanceAlarms"] = Scope(resources=(ACCEPTANCE_ALARMS,), means="only alarms named peagle-acceptance-* "
                                                                          "(the acceptance alarm of each endpoint)")
ACTION_SCOPES.update({action: _COMPONENT_LOGS for action in (
    "logs:PutMetricFilter", "logs:DeleteMetricFilter", "logs:DescribeMetricFilters", "logs:CreateLogGroup")})
ACTION_SCOPES["cloudwatch:GetMetricData"] = ("Anywhere",)
_ACCEPTANCE_READ = [_p("cloudwatch:DescribeAlarms", "the acceptance alarm peagle-acceptance-NAME (its state, K and "
                                                    "floor)"),
                    _p("cloudwatch:ListTagsForResource", "the acceptance alarm: changed or removed only if it carries "
                                                         "peagle:managed"),
                    _p("logs:DescribeMetricFilters", "peagle's metric filters (peagle-acceptance-*) in the log group")]
_ACCEPTANCE_REMOVE = [_p("logs:DeleteMetricFilter", "peagle's metric filters of the acceptance alarm"),
                      _p("cloudwatch:DeleteAlarms", "the acceptance alarm (only with peagle:managed)",
                         scopes=("AcceptanceAlarms",))]
_ACCEPTANCE_PUT = [_p("logs:PutMetricFilter", "--acceptance-alarm: vLLM's SpecDecoding lines -> the accepted and "
                                              "drafted token metrics (peagle/Speculation)"),
                   _p("logs:CreateLogGroup", "--acceptance-alarm: the log group SageMaker writes into, when the "
                                             "container has written nothing yet (a filter needs the group)"),
                   _p("cloudwatch:PutMetricAlarm", "--acceptance-alarm: the alarm on the mean acceptance length",
                      scopes=("AcceptanceAlarms",)),
                   _ALARM_TAGS.model_copy(update={"why": "--acceptance-alarm: the tags given in PutMetricAlarm "
                                                         "(peagle:managed)", "scopes": ("AcceptanceAlarms",)})]
_ACCEPTANCE_RESET = _p("cloudwatch:SetAlarmState", "an acceptance alarm in ALARM moved to another K: INSUFFICIENT_DATA, "
                                                   "so that it judges the new fleet only (else SageMaker would roll "
                                                   "back an update meant to end the fall)",
                       scopes=("AcceptanceAlarms",),
                       unobserved="only when the alarm is in ALARM as it moves; tests/test_acceptance_watch.py covers it")
_ACCEPTANCE: dict[str, list[Permission]] = {
    "deploy": [*_ACCEPTANCE_PUT,
               *[p.model_copy(update={"why": "roll back: " + p.why}) for p in _ACCEPTANCE_READ + _ACCEPTANCE_REMOVE]],
    "status": [_ACCEPTANCE_READ[0],
               _p("cloudwatch:GetMetricData", "NAME: the last hour's acceptance (peagle/Speculation)")],
    "update": [*[p.model_copy(update={"why": "move the acceptance alarm to the new K: " + p.why})
                 for p in _ACCEPTANCE_READ + _ACCEPTANCE_PUT + _ACCEPTANCE_REMOVE], _ACCEPTANCE_RESET],
    "cleanup": [*_ACCEPTANCE_READ, *_ACCEPTANCE_REMOVE],
    "recover": [*[p.model_copy(update={"why": "move the acceptance alarm to the K that serves, remove one whose "
                                              "endpoint is gone: " + p.why})
                  for p in _ACCEPTANCE_READ + _ACCEPTANCE_PUT + _ACCEPTANCE_REMOVE], _ACCEPTANCE_RESET],
}
_UNOBSERVED = {
    ("update", "logs:CreateLogGroup"): "only when the endpoint's log group does not exist (the scenario's exists)",
    ("update", "cloudwatch:DeleteAlarms"): "only when an update that put the alarm does not happen and there was "
                                           "none before (the scenario's endpoint has one)",
    ("update", "cloudwatch:TagResource"): _ALARM_TAGS.unobserved,
    ("deploy", "cloudwatch:TagResource"): _ALARM_TAGS.unobserved,
    ("deploy", "cloudwatch:ListTagsForResource"): "only when the alarm exists at the rollback; the scenario fails "
                                                  "at PutMetricAlarm",
    ("deploy", "cloudwatch:DeleteAlarms"): "only when the alarm exists at the rollback; the scenario fails at "
                                           "PutMetricAlarm",
    **{("recover", action): "only when the alarm watches another K than the one that serves, or its endpoint is "
                            "gone; tests/test_acceptance_watch.py covers it"
       for action in ("logs:PutMetricFilter", "logs:CreateLogGroup", "cloudwatch:PutMetricAlarm",
                      "cloudwatch:TagResource", "logs:DeleteMetricFilter", "cloudwatch:DeleteAlarms")},
}
for _command, _rows in _ACCEPTANCE.items():
    COMMANDS[_command] += [p.model_copy(update={"unobserved": _UNOBSERVED.get((_command, p.action), p.unobserved)})
                           for p in _rows]

# `recover` completes a component deploy that was cut short (lifecycle/component_finish.py): the component from the
# deploy's plan built again, then whatever of its scaling is not registered
_FINISH = "a component deploy cut short"
COMMANDS["recover"] += [
    _SPEC.model_copy(update={"why": f"{_FINISH}: its deploy's plan built again (the JumpStart spec: the "
                                    "component's start-up timeouts)"}),
    _p("sagemaker:CreateInferenceComponent", f"{_FINISH} before its component: the component, from its deploy's "
                                             "plan, naming the model peagle made for it"),
    _p("sagemaker:AddTags", f"{_FINISH}: the tags of the component it creates (peagle:managed, ...)",
       scopes=("TagOnCreate",)),
    _p("application-autoscaling:DescribeScalableTargets", f"{_FINISH}: its component's scaling, against what the "
                                                          "deploy asked for"),
    _p("application-autoscaling:DescribeScalingPolicies", f"{_FINISH}: its component's policies",
       unobserved="read only while its scalable target is registered; the scenario's component has none yet"),
    _p("cloudwatch:DescribeAlarms", f"{_FINISH}: its component's wake-up alarm"),
    _p("application-autoscaling:RegisterScalableTarget", f"{_FINISH}: its component's copies (min 0 with scale to "
                                                         "zero)", scopes=("RegisterManagedComponentTargets",
                                                                          "ScaleManagedComponents")),
    _TAG_ON_REGISTER.model_copy(update={"why": f"{_FINISH}: " + _TAG_ON_REGISTER.why}),
    _p("application-autoscaling:PutScalingPolicy", f"{_FINISH}: target tracking with scale-in and the wake-up step "
                                                   "policy", scopes=("ScaleManagedComponents",)),
    _p("cloudwatch:PutMetricAlarm", f"{_FINISH}: the wake-up alarm; target tracking's alarms (Application Auto "
                                    "Scaling, as you)", scopes=("PeagleAlarms", "ComponentAutoscalingAlarms")),
    _ALARM_TAGS.model_copy(update={"why": f"{_FINISH}: the tags given in PutMetricAlarm (peagle:managed)"}),
]

# `update --autoscale` registers a scaling target as deploy does: what AWS does on the caller's behalf then too
for _command in ("update", "recover"):
    COMMANDS[_command] += [p for p in COMMANDS["deploy"] if p.unobserved and p.action in {
        "sagemaker:UpdateEndpointWeightsAndCapacities", "iam:CreateServiceLinkedRole"}]
    COMMANDS[_command] += [  # a variant's target tracking alarms only (components are not updated or re-registered)
        _p("cloudwatch:PutMetricAlarm", "--autoscale: the target tracking policy's alarms", unobserved=_ALARMS,
           scopes=("AutoscalingAlarms",)),
        _p("cloudwatch:DeleteAlarms", "--autoscale: the alarms of a policy rolled back", unobserved=_ALARMS,
           scopes=("AutoscalingAlarms",))]



def _sweep() -> list[Permission]:
    """`peagle sweep` deploys (without --autoscale), benchmarks and tears down each configuration (with --hosting
    component: each as an inference component of one endpoint): the actions of those steps, taken from deploy's and
    bench's lists (so a change there changes the sweep's too)."""
    steps = {"deploy": ("sts:GetCallerIdentity", "s3:GetObject", "servicequotas:ListServiceQuotas",
                        "sagemaker:CreateModel", "sagemaker:CreateEndpointConfig", "sagemaker:CreateEndpoint",
                        "sagemaker:AddTags", "iam:PassRole", "sagemaker:DescribeEndpoint", "sagemaker:DescribeModel",
                        "sagemaker:DescribeEndpointConfig", "logs:FilterLogEvents", "sagemaker:DeleteEndpoint",
                        "sagemaker:DeleteEndpointConfig", "sagemaker:DeleteModel", "sagemaker:ListTags",
                        "sagemaker:ListEndpoints", "sagemaker:ListEndpointConfigs",
                        "application-autoscaling:DescribeScalableTargets", "sagemaker:CreateInferenceComponent",
                        "sagemaker:DeleteInferenceComponent"),
             "bench": ("sagemaker:InvokeEndpoint", "pricing:GetProducts"),
             "cleanup": ("sagemaker:ListModels", "sagemaker:ListInferenceComponents",
                         "sagemaker:DescribeInferenceComponent")}
    chosen: dict[str, Permission] = {}
    for command, wanted in steps.items():
        for permission in COMMANDS[command]:
            if permission.action in wanted and permission.action not in chosen:
                chosen[permission.action] = permission.model_copy(update={"why": f"as {command}: {permission.why}"})
    missing = {a for actions_ in steps.values() for a in actions_} - set(chosen)
    assert not missing, missing  # a deploy or bench row was renamed: keep the sweep's list in step
    # the teardown marks each endpoint peagle:deleting before deleting it (so `peagle recover` can finish it):
    # tags on an existing peagle endpoint, beside the tags given on create
    [retag] = [p for p in COMMANDS["cleanup"] if p.action == "sagemaker:AddTags"]
    tag = chosen["sagemaker:AddTags"]
    chosen[tag.action] = tag.model_copy(update={
        "why": f"{tag.why}; {retag.why}", "scopes": (*(tag.scopes or ("TagOnCreate",)), *(retag.scopes or ())),
        "unobserved": None})
    quota = chosen["servicequotas:ListServiceQuotas"]
    chosen[quota.action] = quota.model_copy(update={"why": "how many endpoints may run at once (--parallel)"})
    for action, why in (("sagemaker:CreateInferenceComponent", "--hosting component: each configuration's component "
                                                                "on the sweep's one endpoint"),
                        ("sagemaker:DeleteInferenceComponent", "--hosting component: remove each component once it "
                                                                "is measured, and before the endpoint")):
        chosen[action] = chosen[action].model_copy(update={"why": why})
    targets = chosen["application-autoscaling:DescribeScalableTargets"]
    chosen[targets.action] = targets.model_copy(update={
        "why": "the quota check: how far autoscaled endpoints may scale",
        "unobserved": "only read when the account's quota is readable; the emulator test sets no quota"})
    return list(chosen.values())


COMMANDS["sweep"] = _sweep()
COMMANDS["drafter"] = [
    _IDENTITY,
    _p("s3:PutObject", "drafter stage: upload the drafter's files and peagle-drafter.json to --to (boto3's managed "
                       "transfer: large files as multipart uploads)", resources=(DRAFTER_OBJECTS,)),
    _p("s3:ListBucketMultipartUploads", "drafter stage: the unfinished multipart uploads an interrupted stage left "
                                        "under --to (S3 bills their parts), before uploading", resources=(DRAFTER_BUCKETS,)),
    _p("s3:AbortMultipartUpload", "drafter stage: those leftovers are aborted, and so is a multipart upload that "
                                  "fails, leaving no parts", resources=(DRAFTER_OBJECTS,)),
]

# not asked of the caller but of the execution role (--role) SageMaker runs the endpoint with
EXECUTION_ROLE: list[Permission] = [
    _p("s3:GetObject", "the model data and the drafter (JumpStart's buckets)", resources=tuple(
        f"{bucket}/*" for bucket in JUMPSTART_BUCKETS)),
    _p("s3:GetObject", "--mode dflash: the staged DFlash drafter (the prefix `drafter stage --to` wrote)",
       resources=(DRAFTER_OBJECTS,)),
    _p("ecr:GetAuthorizationToken", "pull the container image"),
    _p("ecr:BatchGetImage", "pull the container image"),
    _p("ecr:GetDownloadUrlForLayer", "pull the container image"),
    _p("logs:CreateLogStream", "the container's output", resources=(LOG_GROUPS, COMPONENT_LOG_GROUPS)),
    _p("logs:PutLogEvents", "the container's output", resources=(LOG_GROUPS, COMPONENT_LOG_GROUPS)),
    _p("cloudwatch:PutMetricData", "the endpoint's metrics"),
    _p("ec2:CreateNetworkInterface", "--subnet/--security-group: attach the instances to your VPC"),
    _p("ec2:CreateNetworkInterfacePermission", "--subnet/--security-group"),
    _p("ec2:DeleteNetworkInterface", "--subnet/--security-group"),
    _p("ec2:DeleteNetworkInterfacePermission", "--subnet/--security-group"),
    _p("ec2:DescribeNetworkInterfaces", "--subnet/--security-group"),
    _p("ec2:DescribeVpcs", "--subnet/--security-group"),
    _p("ec2:DescribeDhcpOptions", "--subnet/--security-group"),
    _p("ec2:DescribeSubnets", "--subnet/--security-group"),
    _p("ec2:DescribeSecurityGroups", "--subnet/--security-group"),
]


def iam_action(call: str) -> str:
    """The IAM action that allows API call `service:Operation` (its own name, but for a few; CloudWatch signs as
    `monitoring` and authorizes as `cloudwatch`)."""
    service, _, operation = _CALL_TO_ACTION.get(call, call).partition(":")
    return f"{_SIGNING_TO_IAM.get(service, service)}:{operation}"


def actions(command: str) -> list[str]:
    return sorted({p.action for p in COMMANDS[command]})


def policy_document(commands: list[str] | None = None, *, role: str | None = None,
                    name_prefix: str | None = None, bucket: str | None = None) -> dict[str, Any]:
    """A ready-to-attach identity policy for `commands` (default: all): one statement per scope (SCOPES), each
    action only on the resource types it acts on, every SageMaker write bound to the peagle:managed tag.
    `role`: iam:PassRole on that role only. `name_prefix`: SageMaker writes (and the autoscaling alarms) only
    on names starting with it (peagle's own names start with 'peagle-'); reads still see every name. `bucket`
    (BUCKET or BUCKET/PREFIX, checked by the caller): drafter stage's uploads only under it."""
    from .errors import UsageError

    chosen = commands or list(COMMANDS)
    unknown = [c for c in chosen if c not in COMMANDS]
    if unknown:
        raise UsageError(f"no IAM list for {', '.join(unknown)}", f"choose from {', '.join(COMMANDS)}")
    if role is not None and not _ROLE_ARN.match(role):
        raise UsageError(f"--role {role!r} is not an IAM role ARN", "pass arn:aws:iam::<account>:role/<name>")
    if name_prefix is not None and not _NAME_PREFIX.match(name_prefix):
        raise UsageError(f"--name-prefix {name_prefix!r} is not the start of an endpoint name",
                         "use letters, digits and hyphens, e.g. peagle-")
    by_sid: dict[str, tuple[Scope, set[str]]] = {}
    for command in chosen:
        for permission in COMMANDS[command]:
            for sid, scope in scopes_of(permission):
                by_sid.setdefault(sid, (scope, set()))[1].add(permission.action)
    statements: list[dict[str, Any]] = []
    for sid, (scope, names) in sorted(by_sid.items(), key=lambda item: _ORDER.get(item[0], len(_ORDER))):
        resources = [_narrow(r, sid, role, name_prefix, bucket) for r in scope.resources]
        statement: dict[str, Any] = {"Sid": sid, "Effect": "Allow", "Action": sorted(names),
                                     "Resource": resources if len(resources) > 1 else resources[0]}
        if scope.condition:
            statement["Condition"] = scope.condition
        statements.append(statement)
    return {"Version": "2012-10-17", "Statement": statements}


_ROLE_ARN = re.compile(r"^arn:aws[a-z-]*:iam::\d{12}:role/[\w+=,.@/-]+\Z")
_NAME_PREFIX = re.compile(r"^[a-zA-Z0-9][a-zA-Z0-9-]{0,62}\Z")
_ORDER = {sid: index for index, sid in enumerate(SCOPES)}
_NAMED = (ENDPOINTS, CONFIGS, MODELS, COMPONENTS)
_WRITES = ("Create", "Manage", "TagOnCreate", "RetagManaged")  # reads must see every name


def _narrow(resource: str, sid: str, role: str | None, name_prefix: str | None, bucket: str | None = None) -> str:
    if sid == "PassExecutionRole" and role is not None:
        return role
    if sid == "DrafterPrefix" and bucket is not None:
        return f"arn:aws:s3:::{bucket}/*"
    if sid == "DrafterBucket" and bucket is not None:
        return f"arn:aws:s3:::{bucket.split('/', 1)[0]}"
    if name_prefix and resource in _NAMED and sid.startswith(_WRITES):
        return resource.removesuffix("*") + name_prefix + "*"
    if name_prefix and resource == AUTOSCALING_ALARMS:
        return AUTOSCALING_ALARMS.replace(f"{ALARM_PREFIX}*", f"{ALARM_PREFIX}{name_prefix}*")
    if name_prefix and resource == ACCEPTANCE_ALARMS:  # peagle-acceptance-NAME
        return ACCEPTANCE_ALARMS.removesuffix("*") + name_prefix + "*"
    if name_prefix and resource == COMPONENT_AUTOSCALING_ALARMS:  # a component is named as its endpoint
        return COMPONENT_AUTOSCALING_ALARMS.replace(f"{COMPONENT_ALARM_PREFIX}*",
                                                    f"{COMPONENT_ALARM_PREFIX}{name_prefix}*")
    return resource


def _sid(resources: tuple[str, ...]) -> str:
    first = resources[0]
    if first == "*":
        return "PeagleApi"
    if first.startswith("arn:aws:s3"):
        return "JumpStartSpecs"
    if first.startswith("arn:aws:logs"):
        return "EndpointLogs"
    if first.startswith("arn:aws:iam::*:role/aws-service-role/"):
        return "AutoscalingServiceLinkedRole"
    if first.startswith("arn:aws:iam"):
        return "PassExecutionRole"
    return "Peagle" + "".join(ch for ch in first.title() if ch.isalnum())[-40:]


def markdown_tables() -> str:
    """The per-command tables of docs/iam.md (tools/gen_iam_docs.py writes them between its markers)."""
    import json

    lines: list[str] = ["### The statements", "",
                        "`peagle iam-policy --json` groups the actions below into these statements (only those its "
                        "commands need).", "", "| statement (Sid) | resources | condition | meaning |",
                        "|---|---|---|---|"]
    for sid, scope in SCOPES.items():
        condition = f"`{json.dumps(scope.condition)}`" if scope.condition else "-"
        lines.append(f"| `{sid}` | {', '.join(f'`{r}`' for r in scope.resources)} | {condition} | {scope.means} |")
    lines.append("")
    for command, permissions in COMMANDS.items():
        lines += [f"### `peagle {command}`", "", "| action | why | statement |", "|---|---|---|"]
        for p in permissions:
            note = f" *(not seen in the emulator: {p.unobserved})*" if p.unobserved else ""
            where = ", ".join(f"`{sid}`" if sid in SCOPES else ", ".join(f"`{r}`" for r in scope.resources)
                              for sid, scope in scopes_of(p))
            lines.append(f"| `{p.action}` | {p.why}{note} | {where} |")
        lines.append("")
    lines += ["### The execution role (`--role`)", "",
              "Not the caller's permissions: what SageMaker's instances need, given to the role you pass.", "",
              "| action | why |", "|---|---|"]
    lines += [f"| `{p.action}` | {p.why} |" for p in EXECUTION_ROLE]
    return "\n".join(lines) + "\n"
