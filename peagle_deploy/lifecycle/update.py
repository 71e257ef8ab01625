"""`peagle update NAME`: change K, mode or instances of a live endpoint without downtime.

SM_VLLM_SPECULATIVE_CONFIG lives in the model's container environment, so a K or mode change is a new
model; every change is a new endpoint config, and UpdateEndpoint moves the endpoint to it with SageMaker's
deployment guardrails (blue/green, all at once after a baking period, auto-rollback on the user's CloudWatch
alarms). The old fleet serves until the new one is healthy; SageMaker rolls back on failure.

Order, and what each failure leaves:
1. read the live endpoint, config, model and tags (only peagle's endpoints are updated; one with an unfinished
   update is refused until `peagle recover` finishes it). K and mode are read from the served model's
   SM_VLLM_SPECULATIVE_CONFIG, not from the tags;
2. right before the first write (after the confirmation prompt): the endpoint must still serve the config read
   in 1 (else exit 2, nothing written); then the intent goes on the endpoint's tags (`lifecycle.intent`: from,
   to, the autoscaling to hold), so any peagle can finish what follows;
3. CreateModel (if the container changes) and CreateEndpointConfig under a new name, unique per update
   (`NAME-u<UTC second>-<4 hex>`); a failure or signal here removes them again (the endpoint was never touched);
4. right before UpdateEndpoint the same check as in 2 (and the intent must still be this update's): another
   update that ran meanwhile refuses this one (exit 2) instead of orphaning its config;
5. UpdateEndpoint. From the moment it may have been accepted (answered, answer lost, a 500 retried into
   "Cannot update in-progress endpoint", a signal while it is in flight) what the endpoint moves to is never
   deleted: peagle reads the endpoint (PendingDeploymentSummary) to learn whether SageMaker took it, goes on if
   it did, and otherwise says the truth and names `peagle recover NAME`;
6. wait: Updating -> InService. InService on the OLD config is SageMaker's rollback: peagle removes what it
   created, says which configuration still serves, exits 6. A signal or timeout while Updating cannot stop
   SageMaker: peagle says so and names `peagle recover NAME`, which finishes the job once SageMaker settles;
7. verify the new speculative config live (as deploy does), retag the endpoint, and only then delete the
   old endpoint config and model (only peagle's, and only if nothing else uses them), then clear the intent.
"""

from __future__ import annotations

import copy
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from ..autoscale import AutoscalePolicy, resource_id
from ..describe import describe
from ..errors import EndpointFailed, PeagleError, UsageError, WaitTimeout
from ..plan import TP_ENV, VARIANT_NAME, DeploymentPlan, PlanRequest, build_plan
from ..pricing import Price
from ..speculative import DRAFTER_CHANNEL, ENV_VAR, Mode, parse_k, settings_for
from ..tags import PeagleTags
from ..served_config import spec_of_environment
from .apply import _add_hint, _as_peagle_error
from .intent import UpdateIntent, clear_update_intent, read_update_intent, recover_command, write_update_intent
from .signals import SignalGuard
from .teardown import Outcome, teardown
from .verify import Check, require, verify
from .wait import Progress, read_retrying, wait_in_service

BAKE_DEFAULT = timedelta(minutes=5)
BAKE_MAX = timedelta(hours=1)  # TrafficRoutingConfig.WaitIntervalInSeconds: 0..3600
ALARMS_MAX = 10  # AutoRollbackConfiguration.Alarms: 1..10
ALARM_NAME_MAX = 255
_SUFFIX = "-u%y%m%d%H%M%S"  # the new model and endpoint config: NAME-u<UTC time>-<4 hex>, at most 63 characters
NAME_MAX = 63
# CreateModel's ContainerDefinition and CreateEndpointConfig's ProductionVariant keys: DescribeModel and
# DescribeEndpointConfig answer more (read-only) keys, which a create would refuse
_CONTAINER_KEYS = ("ContainerHostname", "Image", "ImageConfig", "Mode", "ModelDataUrl", "ModelDataSource",
                   "AdditionalModelDataSources", "Environment", "ModelPackageName", "InferenceSpecificationName",
                   "MultiModelConfig")
_MODEL_KEYS = ("ExecutionRoleArn", "VpcConfig", "EnableNetworkIsolation")
_VARIANT_KEYS = ("VariantName", "ModelName", "InitialInstanceCount", "InstanceType", "InitialVariantWeight",
                 "AcceleratorType", "CoreDumpConfig", "ServerlessConfig", "VolumeSizeInGB",
                 "ModelDataDownloadTimeoutInSeconds", "ContainerStartupHealthCheckTimeoutInSeconds",
                 "EnableSSMAccess", "ManagedInstanceScaling", "RoutingConfig", "InferenceAmiVersion")
_CONFIG_KEYS = ("DataCaptureConfig", "KmsKeyId", "AsyncInferenceConfig", "ExecutionRoleArn", "VpcConfig",
                "EnableNetworkIsolation")


class UpdateRequest(BaseModel):
    """What the user asked to change; None keeps the live value."""

    model_config = ConfigDict(frozen=True)

    name: str
    region: str
    mode: Mode | None = None
    k: int | str | None = None
    instance_type: str | None = None
    instance_count: int | None = None
    allow_any_instance: bool = False
    accept_eula: bool = False
    bake: timedelta = BAKE_DEFAULT
    rollback_alarms: list[str] = Field(default_factory=list)
    autoscale: AutoscalePolicy | None = Field(default=None, description="--autoscale: registered after success")


class Serving(BaseModel):
    """One configuration of the endpoint: what serves now, or what the update moves to."""

    endpoint_config: str
    model: str
    mode: str | None
    k: int | None
    instance_type: str | None
    instance_count: int | None

    def label(self, *, with_instances: bool = False) -> str:
        if self.mode == Mode.OFF.value:
            text = "mode off"
        elif self.mode == Mode.P_EAGLE.value or self.mode is None:
            text = f"K={self.k}"
        else:
            text = f"{self.mode}, K={self.k}"
        if with_instances:
            text += f", {self.instance_count} x {self.instance_type}"
        return text


class UpdatePlan(BaseModel):
    """Every AWS write of the update, in order; `--dry-run` prints it, `run_update` executes it."""

    model_config = ConfigDict(frozen=True)

    endpoint_name: str
    endpoint_arn: str
    region: str
    created_at: datetime
    current: Serving
    target: Serving
    speculative_config: str | None
    price_per_hour_usd: float | None = Field(description="the new fleet; during the update both fleets run")
    price: Price | None = Field(None, description="the new fleet's SageMaker hosting price and its source")
    bake_s: int
    rollback_alarms: list[str]
    create_model: dict[str, Any] | None = Field(description="None: the container does not change, the model is kept")
    create_endpoint_config: dict[str, Any]
    update_endpoint: dict[str, Any]
    endpoint_tags: dict[str, str] = Field(description="AddTags on the endpoint after success")
    delete_after_success: list[dict[str, str]] = Field(description="peagle's own, and only if nothing uses them")
    autoscale_before: AutoscalePolicy | None = Field(default=None, description="what peagle registered (its tag)")
    autoscale_after: AutoscalePolicy | None = Field(default=None, description="registered after success")
    deregister_first: bool = Field(default=False, description="SageMaker refuses an instance type change of a "
                                   "registered variant: deregister before UpdateEndpoint, register again after")
    notes: list[str] = Field(default_factory=list)
    verify_plan: DeploymentPlan = Field(exclude=True)

    @property
    def writes(self) -> list[str]:
        intent = ", ".join(f"{k}={v}" for k, v in UpdateIntent(
            from_config=self.current.endpoint_config, to_config=self.target.endpoint_config,
            autoscale=self.autoscale_after).to_tags().items())
        calls = [f"AddTags {self.endpoint_name} (the update's intent, for peagle recover: {intent})"]
        if self.create_model is not None:
            calls.append(f"CreateModel {self.create_model['ModelName']}")
        calls.append(f"CreateEndpointConfig {self.create_endpoint_config['EndpointConfigName']}")
        target_id = resource_id(self.endpoint_name, VARIANT_NAME)
        if self.deregister_first:
            calls.append(f"DeleteScalingPolicy + DeregisterScalableTarget {target_id} (SageMaker refuses an "
                         "instance type change of an autoscaled variant; registered again afterwards)")
        calls.append(f"UpdateEndpoint {self.endpoint_name} -> {self.target.endpoint_config}")
        if self.autoscale_after is not None and (self.deregister_first or self.autoscale_after != self.autoscale_before):
            calls.append(f"RegisterScalableTarget + PutScalingPolicy {target_id} "
                         f"({self.autoscale_after.describe()}; after success)")
        calls.append(f"AddTags {self.endpoint_name} ({', '.join(f'{k}={v}' for k, v in self.endpoint_tags.items())})")
        calls.extend(f"Delete{'EndpointConfig' if d['kind'] == 'endpoint_config' else 'Model'} {d['name']} "
                     "(after success; peagle's own, if unused)" for d in self.delete_after_success)
        calls.append(f"DeleteTags {self.endpoint_name} (the update's intent, once done)")
        return calls


class UpdateResult(BaseModel):
    endpoint_name: str
    region: str
    status: str
    elapsed_s: float
    previous: Serving
    serving: Serving
    verification: list[Check] = Field(default_factory=list)
    removed: list[Outcome] = Field(default_factory=list)
    notes: list[str] = Field(default_factory=list)


# validation (no AWS call) -----------------------------------------------------------------------
def check_request(request: UpdateRequest) -> None:
    """Everything that can be refused before AWS is asked anything."""
    from ..inputs import parse_instance_count, validate_name
    from ..plan import _check_family

    validate_name(request.name)
    if (request.mode is None and request.k is None and request.instance_type is None
            and request.instance_count is None and request.autoscale is None):
        raise UsageError("nothing to update", "pass --k, --mode, --instance-type, --instance-count or --autoscale")
    if request.k is not None:
        parse_k(request.k, max_k=10**6, model="")  # the form now; the drafter's depth once the model is known
        if request.mode is Mode.OFF:
            raise UsageError("--k has no effect with --mode off", "drop --k, or choose --mode p-eagle or eagle3")
    if request.instance_count is not None:
        parse_instance_count(request.instance_count)
    if request.instance_type is not None:
        _check_family(request.instance_type, request.allow_any_instance)
    if len(request.rollback_alarms) > ALARMS_MAX:
        raise UsageError(f"{len(request.rollback_alarms)} --rollback-alarm options; SageMaker allows {ALARMS_MAX}",
                         f"pass at most {ALARMS_MAX} alarms")
    for alarm in request.rollback_alarms:
        if not alarm.strip() or len(alarm) > ALARM_NAME_MAX:
            raise UsageError(f"--rollback-alarm {alarm!r} is not a CloudWatch alarm name",
                             f"pass the alarm's name (1 to {ALARM_NAME_MAX} characters)")
    if len(set(request.rollback_alarms)) != len(request.rollback_alarms):
        raise UsageError("a --rollback-alarm is given twice", "pass each alarm once")


# reading the live endpoint ----------------------------------------------------------------------
class Live(BaseModel):
    """The endpoint as SageMaker holds it now."""

    endpoint: dict[str, Any]
    config: dict[str, Any]
    model: dict[str, Any]
    tags: dict[str, str]
    peagle: PeagleTags


def read_live(sm: Any, request: UpdateRequest, *, read: Callable[[Callable[[], Any]], Any]) -> Live:
    from .tags import list_tags

    name = request.name
    endpoint = read(lambda: describe(sm, "endpoint", name))
    if endpoint is None:
        raise UsageError(f"no endpoint named {name!r} in {request.region}",
                         "check the name and --region (peagle status lists peagle's endpoints)")
    tags = read(lambda: list_tags(sm, endpoint["EndpointArn"]))
    peagle = PeagleTags.from_aws(tags)
    if not peagle.managed:
        raise UsageError(f"endpoint {name!r} was not created by peagle",
                         "peagle only updates endpoints it created (tag peagle:managed=true); nothing was changed")
    status = endpoint.get("EndpointStatus")
    intent = read_update_intent(tags)
    moving_to = (endpoint.get("PendingDeploymentSummary") or {}).get("EndpointConfigName")
    if status != "InService":
        doing = f" (moving to {moving_to or intent.to_config})" if moving_to or intent else ""
        raise UsageError(f"endpoint {name!r} is {status}{doing}, not InService",
                         f"wait until it is InService (peagle status {name} --region {request.region}), then "
                         f"'{recover_command(name, request.region)}' finishes what was interrupted")
    if intent is not None:
        raise UsageError(f"an update of {name!r} did not finish ({intent.from_config} -> {intent.to_config})",
                         f"if it is still running elsewhere, wait for it; else finish it first with "
                         f"'{recover_command(name, request.region)}'; nothing was changed")
    config = read(lambda: describe(sm, "endpoint_config", endpoint["EndpointConfigName"]))
    variants = (config or {}).get("ProductionVariants") or []
    if config is None or len(variants) != 1 or not variants[0].get("ModelName"):
        raise UsageError(f"endpoint {name!r} does not have the one-variant configuration peagle deploys",
                         "update it with the SageMaker console or API instead")
    model = read(lambda: describe(sm, "model", variants[0]["ModelName"]))
    if model is None:
        raise UsageError(f"the model {variants[0]['ModelName']!r} of endpoint {name!r} no longer exists",
                         "redeploy with peagle deploy")
    return Live(endpoint=endpoint, config=config, model=model, tags=tags, peagle=peagle)


def _serving(config: dict[str, Any], model: dict[str, Any], tags: PeagleTags) -> Serving:
    """What serves now: mode and K from the model's SM_VLLM_SPECULATIVE_CONFIG (the tags only where it is
    unreadable)."""
    variant = config["ProductionVariants"][0]
    spec = spec_of_environment((model.get("PrimaryContainer") or {}).get("Environment"))
    mode, k = (spec.mode, spec.k) if spec.problem is None else (tags.mode, tags.k)
    return Serving(endpoint_config=config["EndpointConfigName"], model=variant["ModelName"], mode=mode,
                   k=k, instance_type=variant.get("InstanceType"),
                   instance_count=variant.get("InitialInstanceCount"))


# the plan ---------------------------------------------------------------------------------------
def _pick(source: dict[str, Any], keys: tuple[str, ...]) -> dict[str, Any]:
    """The create-request keys of a describe answer (empty values dropped: moto answers VpcConfig {})."""
    return {key: copy.deepcopy(source[key]) for key in keys if key in source and source[key] not in (None, {}, [], "")}


def new_resource_name(endpoint: str, now: datetime, nonce: str | None = None) -> str:
    """NAME-u<UTC time to the second>-<4 random hex digits>: two updates in one second (two terminals, a CI
    retry) never collide; cut to SageMaker's 63 characters from the endpoint name's end."""
    import secrets

    suffix = now.strftime(_SUFFIX) + "-" + (nonce or secrets.token_hex(2))
    return endpoint[: NAME_MAX - len(suffix)].rstrip("-") + suffix


def _accepted_eula(container: dict[str, Any]) -> bool:
    sources = [container.get("ModelDataSource", {}).get("S3DataSource", {})]
    sources += [s.get("S3DataSource", {}) for s in container.get("AdditionalModelDataSources", [])]
    return any(s.get("ModelAccessConfig", {}).get("AcceptEula") for s in sources)


def _carry(live: dict[str, Any], planned_before: dict[str, Any], planned_after: dict[str, Any]) -> dict[str, Any]:
    """What deploy plans for the new target, plus what the live resource holds that deploy did not plan for the
    current target (the user's own --env, or a value the user changed): one rule for the container environment
    and the production variant, so an update lands where a fresh deploy of the new target would."""
    kept = {key: copy.deepcopy(value) for key, value in live.items()
            if key not in planned_before or planned_before[key] != value}
    return {**copy.deepcopy(planned_after), **kept}


def _plan_for(entry: Any, tags: PeagleTags, current: Serving, request: UpdateRequest, role: str | None,
              resolver: Any, now: datetime) -> DeploymentPlan | None:
    """Deploy's plan for what the endpoint serves now (None when that can no longer be planned: a live K the
    drafter no longer takes, an instance type the spec dropped; then only tensor parallelism is followed)."""
    try:
        mode = Mode(current.mode or Mode.P_EAGLE.value)
        return build_plan(PlanRequest(
            model=entry.alias, model_id=tags.model_id, mode=mode, k=None if mode is Mode.OFF else current.k,
            name=request.name, instance_type=current.instance_type, instance_count=current.instance_count or 1,
            allow_any_instance=True, region=request.region, role=role, accept_eula=True), resolver=resolver, now=now)
    except (PeagleError, ValueError):
        return None


def build_update(live: Live, request: UpdateRequest, *, now: datetime | None = None,
                 resolver: Any = None) -> UpdatePlan:
    """The new model (if the container changes), endpoint config and UpdateEndpoint request.

    The live container is the starting point (the user's --env and --image from deploy stay); deploy's
    plan machinery (`plan.build_plan`) validates K, mode and instance type against the JumpStart spec and
    supplies the drafter channel when speculation is turned on."""
    from ..catalog import get_model

    now = (now or datetime.now(UTC)).replace(microsecond=0)
    tags = live.peagle
    if not tags.model:
        raise UsageError(f"endpoint {request.name!r} has no peagle:model tag", "redeploy it with peagle deploy")
    entry = get_model(tags.model)
    current = _serving(live.config, live.model, tags)
    try:
        mode = request.mode or Mode(current.mode or Mode.P_EAGLE.value)
    except ValueError:
        raise UsageError(f"endpoint {request.name!r} has an unreadable peagle:mode tag {tags.mode!r}",
                         "pass --mode p-eagle, eagle3 or off") from None
    if request.k is not None and mode is Mode.OFF and request.mode is None:
        raise UsageError(f"endpoint {request.name!r} runs with speculation off",
                         "pass --mode p-eagle (or eagle3) together with --k")
    if request.k is not None:
        k = parse_k(request.k, max_k=entry.max_k, model=entry.alias)
    elif mode is Mode.OFF:
        k = None
    else:
        k = current.k  # a mode change keeps the live K (the model's default when speculation was off)
    settings = settings_for(mode, k, default_k=entry.default_k)
    instance_type = request.instance_type or current.instance_type
    instance_count = request.instance_count or current.instance_count or 1
    if request.instance_count is not None and request.autoscale is None and tags.autoscale is not None:
        from ..autoscale import check_count_within

        check_count_within(request.instance_count, tags.autoscale, where="the endpoint's autoscaling")  # as deploy
    name = new_resource_name(request.name, now)
    old_container = live.model.get("PrimaryContainer", {})
    role = live.model.get("ExecutionRoleArn")
    plan = build_plan(PlanRequest(
        model=entry.alias, model_id=tags.model_id, mode=mode, k=settings.k, name=name, instance_type=instance_type,
        instance_count=instance_count, allow_any_instance=request.allow_any_instance, region=request.region,
        role=role, accept_eula=request.accept_eula or _accepted_eula(old_container)), resolver=resolver, now=now)

    # deploy's own plan for the current target: what of the live container deploy planned (replaced by what
    # it plans for the new target) and what the user set (--env, --image at deploy: kept)
    before = _plan_for(entry, tags, current, request, role, resolver, now)
    container = _pick(old_container, _CONTAINER_KEYS)
    planned = plan.create_model["PrimaryContainer"]
    if before is not None:
        was = before.create_model["PrimaryContainer"]
        container["Environment"] = _carry(old_container.get("Environment") or {}, was.get("Environment") or {},
                                          planned.get("Environment") or {})
        if container.get("Image") == was.get("Image"):
            container["Image"] = planned.get("Image", container.get("Image"))
    env = container.setdefault("Environment", {})
    if settings.render() is None:
        env.pop(ENV_VAR, None)
    else:
        env[ENV_VAR] = settings.render()
    channels = [c for c in container.pop("AdditionalModelDataSources", []) if c.get("ChannelName") != DRAFTER_CHANNEL]
    live_drafter = next((c for c in old_container.get("AdditionalModelDataSources", [])
                         if c.get("ChannelName") == DRAFTER_CHANNEL), None)
    drafter = (live_drafter or plan.drafter_channel) if settings.enabled else None
    if drafter is not None:
        channels.insert(0, copy.deepcopy(drafter))
    if channels:
        container["AdditionalModelDataSources"] = channels
    notes: list[str] = []
    if before is None and instance_type != current.instance_type:  # no plan of the current target: at least TP
        tp = (planned.get("Environment") or {}).get(TP_ENV)
        if tp is None:
            env.pop(TP_ENV, None)
        elif env.get(TP_ENV) != tp:
            env[TP_ENV] = tp
            notes.append(f"{TP_ENV} set to {tp} for {instance_type}")
    if not env:
        container.pop("Environment")

    from ..tags import INTENT_KEYS

    resource_tags = {k: v for k, v in live.tags.items() if not k.startswith("aws:") and k not in INTENT_KEYS}
    resource_tags.update({k: v for k, v in plan.tags.items() if k != "peagle:expires-at"})
    resource_tags["peagle:endpoint"] = request.name  # cleanup NAME and recover NAME find it by this tag
    tag_list = [{"Key": k, "Value": v} for k, v in resource_tags.items()]
    new_model = container != _pick(old_container, _CONTAINER_KEYS)
    model_name = name if new_model else current.model
    create_model = None
    if new_model:
        create_model = {"ModelName": name, "PrimaryContainer": container,
                        **_pick(live.model, _MODEL_KEYS),
                        "Tags": tag_list}
    old_variant = live.config["ProductionVariants"][0]
    variant = _pick(old_variant, _VARIANT_KEYS)
    if before is not None:  # timeouts and volume deploy sizes for the instance type follow the new one
        variant = _carry(variant, _pick(before.create_endpoint_config["ProductionVariants"][0], _VARIANT_KEYS),
                         _pick(plan.create_endpoint_config["ProductionVariants"][0], _VARIANT_KEYS))
    variant.update(ModelName=model_name, InstanceType=instance_type, InitialInstanceCount=instance_count)
    config = {"EndpointConfigName": name, "ProductionVariants": [variant],
              **_pick(live.config, _CONFIG_KEYS),
              "Tags": tag_list}
    deployment: dict[str, Any] = {"BlueGreenUpdatePolicy": {"TrafficRoutingConfiguration": {
        "Type": "ALL_AT_ONCE", "WaitIntervalInSeconds": int(request.bake.total_seconds())}}}
    if request.rollback_alarms:
        deployment["AutoRollbackConfiguration"] = {"Alarms": [{"AlarmName": a} for a in request.rollback_alarms]}
    target = Serving(endpoint_config=name, model=model_name, mode=settings.mode.value, k=settings.k,
                     instance_type=instance_type, instance_count=instance_count)
    if target.model_dump(exclude={"endpoint_config", "model"}) == current.model_dump(
            exclude={"endpoint_config", "model"}) and not new_model:
        raise UsageError(f"endpoint {request.name!r} already serves {current.label(with_instances=True)}",
                         "nothing to update; pass another --k, --mode, --instance-type or --instance-count")
    autoscale_after = request.autoscale or tags.autoscale
    endpoint_tags = PeagleTags(
        mode=settings.mode.value, k=settings.k, instance_type=instance_type, instance_count=instance_count,
        version=plan.tags.get("peagle:version"), autoscale=autoscale_after).to_aws()
    deletes = [{"kind": "endpoint_config", "name": current.endpoint_config}]
    if new_model:
        deletes.append({"kind": "model", "name": current.model})
    verify_plan = plan.model_copy(update={
        "endpoint_name": request.name, "drafter_channel": drafter,
        "create_model": create_model or {"ModelName": model_name, "PrimaryContainer": container},
        "create_endpoint_config": config})
    return UpdatePlan(
        endpoint_name=request.name, endpoint_arn=live.endpoint["EndpointArn"], region=request.region,
        created_at=now, current=current, target=target, speculative_config=settings.render(),
        price_per_hour_usd=plan.price_per_hour_usd, price=plan.price, bake_s=int(request.bake.total_seconds()),
        rollback_alarms=list(request.rollback_alarms), create_model=create_model, create_endpoint_config=config,
        update_endpoint={"EndpointName": request.name, "EndpointConfigName": name, "DeploymentConfig": deployment},
        endpoint_tags=endpoint_tags, delete_after_success=deletes, autoscale_before=tags.autoscale,
        autoscale_after=autoscale_after,
        deregister_first=tags.autoscale is not None and instance_type != current.instance_type,
        notes=notes + plan.notes, verify_plan=verify_plan)


def check_alarms(session: Any, alarms: list[str], *, read: Callable[[Callable[[], Any]], Any]) -> None:
    """A rollback alarm that does not exist would guard nothing: refuse before anything is created."""
    if not alarms:
        return
    cloudwatch = session.client("cloudwatch")
    found = read(lambda: cloudwatch.describe_alarms(AlarmNames=alarms))
    known = {a["AlarmName"] for a in found.get("MetricAlarms", []) + found.get("CompositeAlarms", [])}
    missing = [a for a in alarms if a not in known]
    if missing:
        raise UsageError(f"CloudWatch alarm {missing[0]!r} does not exist in {session.region}",
                         "create it first, or check the --rollback-alarm name and --region")


def prepare(session: Any, request: UpdateRequest, *, sleep: Callable[[float], None] = time.sleep,
            now: datetime | None = None) -> UpdatePlan:
    """Reads only: the live endpoint, the spec, the alarms -> the plan."""
    check_request(request)
    read = lambda call: read_retrying(call, sleep=sleep)  # noqa: E731
    sm = session.client("sagemaker")
    live = read_live(sm, request, read=read)
    plan = build_update(live, request, now=now)
    check_alarms(session, request.rollback_alarms, read=read)
    return plan


# executing it -----------------------------------------------------------------------------------
_IN_PROGRESS = "cannot update in-progress endpoint"


class EndpointChanged(UsageError):
    """The endpoint no longer serves what the update read: another update ran meanwhile."""


def _intent(plan: UpdatePlan) -> UpdateIntent:
    return UpdateIntent(from_config=plan.current.endpoint_config, to_config=plan.target.endpoint_config,
                        autoscale=plan.autoscale_after)


def _recheck(sm: Any, plan: UpdatePlan, read: Callable[[Callable[[], Any]], Any], *, ours_written: bool) -> None:
    """Right before a write: the endpoint is InService on the config the update read, and no other update's
    intent is on it (once this update wrote its own, that one must still be there)."""
    from .tags import list_tags

    name, recover = plan.endpoint_name, recover_command(plan.endpoint_name, plan.region)
    endpoint = read(lambda: describe(sm, "endpoint", name))
    if endpoint is None:
        raise EndpointChanged(f"endpoint {name!r} no longer exists", "someone deleted it meanwhile")
    intent = read_update_intent(read(lambda: list_tags(sm, endpoint["EndpointArn"])))
    if intent is not None and intent.to_config != plan.target.endpoint_config:
        raise EndpointChanged(f"another update of {name!r} is in progress ({intent.from_config} -> "
                              f"{intent.to_config})", f"wait for it, or finish it with '{recover}', then run "
                                                      "this update again")
    if ours_written and intent is None:
        raise EndpointChanged(f"this update's record on {name!r} was cleared meanwhile (by peagle recover?)",
                              "run this update again")
    status, served = endpoint.get("EndpointStatus"), endpoint.get("EndpointConfigName")
    if status != "InService":
        raise EndpointChanged(f"endpoint {name!r} is {status} now, not InService as this update read it",
                              "another update started meanwhile: wait for it, then run this update again")
    if served != plan.current.endpoint_config:
        raise EndpointChanged(f"endpoint {name!r} now serves {served}, not {plan.current.endpoint_config} "
                              f"({plan.current.label()}) which this update read",
                              "another update ran meanwhile: run this update again to start from what serves now")


def _label(kind: str) -> str:
    return "endpoint config" if kind == "endpoint_config" else "model"


def _undo(error: PeagleError, sm: Any, session: Any, plan: UpdatePlan, attempted: list[str], deregistered: bool,
          intent_written: bool) -> None:
    """UpdateEndpoint was not accepted: remove what this update created (creates whose answer was lost too,
    by name and this update's created-at), register autoscaling again, clear the intent; say what is true."""
    recover = recover_command(plan.endpoint_name, plan.region)
    if not isinstance(error, EndpointChanged):
        _add_hint(error, f"the endpoint still serves the old configuration ({plan.current.label()})")
    left = False
    if attempted:
        try:
            outcomes = teardown(sm, configs=[plan.target.endpoint_config] if "endpoint_config" in attempted else [],
                                models=[plan.target.model] if "model" in attempted else [], wait=False,
                                created_at=plan.created_at)
        except BaseException:  # noqa: BLE001 - the removal itself failed or was interrupted: name the command
            outcomes, left = [], True
        gone = [o for o in outcomes if o.result == "deleted"]
        left = left or any(o.result in ("left", "failed") for o in outcomes)
        if gone:
            _add_hint(error, "removed the new " + " and ".join(f"{_label(o.kind)} {o.name}" for o in gone))
    elif not deregistered:
        _add_hint(error, "nothing was created")
    if deregistered:
        left = not _restore_autoscaling(error, session, plan) or left
    if intent_written and not left:
        try:
            clear_update_intent(sm, plan.endpoint_arn)
        except BaseException:  # noqa: BLE001
            left = True
    if left:
        _add_hint(error, f"finish with '{recover}'")


def _reconcile(sm: Any, plan: UpdatePlan, call_error: BaseException | None,
               read: Callable[[Callable[[], Any]], Any]) -> str:
    """Whether a failed UpdateEndpoint was taken after all: 'accepted', 'refused' or 'unknown'.

    SageMaker's own "no" (a 4xx other than "Cannot update in-progress endpoint") is a refusal. A lost answer (a 5xx
    after botocore's retries, a dropped connection, a second signal abandoning the call) or "in-progress" (a retry
    of an attempt SageMaker took, or someone else's update) is settled by reading the endpoint: serving or moving to
    this update's config is 'accepted'; moving to another config or InService on the old one after an answer
    SageMaker gave is 'refused'; anything else is 'unknown', and nothing may be deleted."""
    from ..aws import botocore_exceptions, error_code, error_message, is_lost_answer

    bx = botocore_exceptions()

    if call_error is None:
        return "unknown"
    in_progress = error_code(call_error) == "ValidationException" and _IN_PROGRESS in error_message(call_error).lower()
    if not in_progress and not is_lost_answer(call_error):
        return "refused"
    try:
        endpoint = read(lambda: describe(sm, "endpoint", plan.endpoint_name))
    except BaseException:  # noqa: BLE001 - cannot tell
        return "unknown"
    if endpoint is None:
        return "refused"
    ours = plan.target.endpoint_config
    pending = (endpoint.get("PendingDeploymentSummary") or {}).get("EndpointConfigName")
    if ours in (endpoint.get("EndpointConfigName"), pending):
        return "accepted"
    if pending:
        return "refused"
    if endpoint.get("EndpointStatus") != "InService":
        return "unknown"  # updating, and SageMaker does not say to what
    if isinstance(call_error, (KeyboardInterrupt, bx.ConnectionError, bx.HTTPClientError)):
        return "unknown"  # the request may still be on its way
    return "refused"


def _moving(plan: UpdatePlan) -> str:
    return (f"{plan.endpoint_name} moves to {plan.target.endpoint_config} ({plan.target.label()}) or rolls back to "
            f"{plan.current.endpoint_config} ({plan.current.label()}); nothing was deleted")


def run_update(plan: UpdatePlan, session: Any, *, timeout_s: float = 3600, on_progress: Progress | None = None,
               on_note: Callable[[str], None] | None = None, sleep: Callable[[float], None] = time.sleep,
               clock: Callable[[], float] = time.monotonic, handle_signals: bool = True) -> UpdateResult:
    note = on_note or (lambda _msg: None)
    read = lambda call: read_retrying(call, sleep=sleep)  # noqa: E731
    sm = session.client("sagemaker")
    recover = recover_command(plan.endpoint_name, plan.region)
    attempted: list[str] = []
    deregistered = intent_written = False
    start = clock()
    with SignalGuard("stopping the update", enabled=handle_signals) as guard:
        try:
            _recheck(sm, plan, read, ours_written=False)  # after the prompt: nothing written yet
            with guard.critical("AddTags"):
                intent_written = True
                write_update_intent(sm, plan.endpoint_arn, _intent(plan))
            steps = ([("model", "create_model", "CreateModel")] if plan.create_model is not None else []) + [
                ("endpoint_config", "create_endpoint_config", "CreateEndpointConfig")]
            for kind, method, call in steps:
                with guard.critical(call):
                    attempted.append(kind)
                    getattr(sm, method)(**getattr(plan, method))
                note(f"created {_label(kind)} {plan.target.endpoint_config}")
            if plan.deregister_first:
                from .autoscaling import remove_autoscaling

                deregistered = True
                with guard.critical("DeregisterScalableTarget"):
                    left = [o for o in remove_autoscaling(session.client("application-autoscaling"),
                                                          plan.endpoint_name, [VARIANT_NAME])
                            if o.result == "failed"]
                if left:
                    raise PeagleError(f"could not remove autoscaling before the update: {left[0].reason}",
                                      exit_code=left[0].exit_code)
                note(f"autoscaling of {plan.endpoint_name} removed for the instance type change")
            _recheck(sm, plan, read, ours_written=True)  # right before UpdateEndpoint
        except BaseException as exc:  # noqa: BLE001 - includes signals: the endpoint was not touched
            error = _as_peagle_error(exc)
            _undo(error, sm, session, plan, attempted, deregistered, intent_written)
            raise error from None
        answered = False
        call_error: BaseException | None = None
        updated_ms = int(time.time() * 1000)  # the new fleet's start-up lines come after this
        try:
            with guard.critical("UpdateEndpoint"):
                try:
                    sm.update_endpoint(**plan.update_endpoint)
                    answered = True
                except BaseException as exc:
                    call_error = exc
                    raise
        except BaseException as exc:  # noqa: BLE001 - from here on SageMaker may have taken the update
            verdict = "accepted" if answered else _reconcile(sm, plan, call_error, read)
            error = _as_peagle_error(exc)
            if verdict == "refused":
                _undo(error, sm, session, plan, attempted, deregistered, intent_written)
                raise error from None
            if verdict == "unknown":
                _add_hint(error, f"finish with '{recover}' once SageMaker settles")
                _add_hint(error, f"UpdateEndpoint's answer was lost: SageMaker may be moving {_moving(plan)}")
                raise error from None
            if isinstance(exc, KeyboardInterrupt):
                _add_hint(error, f"finish with '{recover}' once SageMaker settles")
                _add_hint(error, f"SageMaker accepted the update: {_moving(plan)}")
                raise error from None
            note(f"UpdateEndpoint's answer was lost ({error.one_line()}), but SageMaker took the update")
        note(f"UpdateEndpoint accepted: {plan.endpoint_name} moves to {plan.target.endpoint_config} "
             f"(blue/green, all at once after a {plan.bake_s}s baking period)")
        try:
            described = wait_in_service(sm, plan.endpoint_name, timeout_s=timeout_s, sleep=sleep, clock=clock,
                                        on_progress=on_progress)
        except BaseException as exc:  # noqa: BLE001 - SageMaker's update goes on without us
            error = _as_peagle_error(exc)
            if isinstance(error, WaitTimeout):
                error.hint = None  # deploy's advice (cleanup) would delete the endpoint: not for an update
            _add_hint(error, f"finish with '{recover}' once SageMaker settles")
            if isinstance(error, EndpointFailed):
                _add_hint(error, f"container logs: peagle logs {plan.endpoint_name} --region {plan.region}")
            else:
                _add_hint(error, f"SageMaker's update goes on: {_moving(plan)}")
            if deregistered:
                _add_hint(error, f"it registers the autoscaling again ({plan.autoscale_before.describe()})")
            raise error from None
        if described.get("EndpointConfigName") != plan.target.endpoint_config:
            reason = described.get("FailureReason") or "no reason given"
            error = EndpointFailed(f"the update of {plan.endpoint_name} failed and SageMaker rolled it back: "
                                   f"{reason}", None)
            _undo(error, sm, session, plan, attempted, deregistered, intent_written)
            _add_hint(error, f"container logs: peagle logs {plan.endpoint_name} --region {plan.region}")
            raise error
        try:
            checks = verify(sm, plan.verify_plan, session.client("logs"), sleep=sleep, read=read,
                            logs_since_ms=updated_ms)
            require(checks)
            sm.add_tags(ResourceArn=plan.endpoint_arn,
                        Tags=[{"Key": k, "Value": v} for k, v in plan.endpoint_tags.items()])
            after = plan.autoscale_after
            if after is not None and (plan.deregister_first or after != plan.autoscale_before):
                from .autoscaling import apply_autoscaling

                apply_autoscaling(session.client("application-autoscaling"), plan.endpoint_name, VARIANT_NAME, after)
                note(f"autoscaling of {plan.endpoint_name}: {after.describe()}")
            removed = teardown(sm, configs=[plan.current.endpoint_config],
                               models=[plan.current.model] if plan.create_model is not None else [], wait=False)
            try:
                clear_update_intent(sm, plan.endpoint_arn)
            except Exception as exc:  # noqa: BLE001 - the update is done; only its record is left
                note(f"could not clear the update's record on {plan.endpoint_name} ({_as_peagle_error(exc).one_line()})"
                     f": '{recover}' clears it")
        except BaseException as exc:  # noqa: BLE001 - includes signals: the endpoint serves the new config now
            error = _as_peagle_error(exc)
            _add_hint(error, f"the endpoint serves {plan.target.endpoint_config} ({plan.target.label()}); finish "
                             f"with '{recover}' (tags, autoscaling, the previous configuration)")
            if isinstance(error, EndpointFailed):
                _add_hint(error, f"then go back if you want with 'peagle update {plan.endpoint_name} "
                                 f"{_flags(plan.current)} --yes'")
            raise error from None
    for outcome in removed:
        if outcome.result in ("left", "failed"):
            then = "" if outcome.reason.startswith("still used") else f"; remove it with '{recover}'"
            note(f"kept {_label(outcome.kind)} {outcome.name}: {outcome.reason}{then}")
    return UpdateResult(endpoint_name=plan.endpoint_name, region=plan.region, status=described["EndpointStatus"],
                        elapsed_s=clock() - start, previous=plan.current, serving=plan.target,
                        verification=checks, removed=removed, notes=plan.notes)


def _restore_autoscaling(error: PeagleError, session: Any, plan: UpdatePlan) -> bool:
    """The update did not happen: the autoscaling removed before it goes back as it was."""
    from .autoscaling import apply_autoscaling

    before = plan.autoscale_before
    try:
        apply_autoscaling(session.client("application-autoscaling"), plan.endpoint_name, VARIANT_NAME, before)
    except BaseException:  # noqa: BLE001 - say what to do instead
        _add_hint(error, f"autoscaling ({before.describe()}) was removed for the update and could not be "
                         "registered again")
        return False
    _add_hint(error, f"autoscaling registered again ({before.describe()})")
    return True


def _flags(serving: Serving) -> str:
    flags = [f"--mode {serving.mode}"] if serving.mode else []
    if serving.k and serving.mode != Mode.OFF.value:
        flags.append(f"--k {serving.k}")
    flags += [f"--instance-type {serving.instance_type}", f"--instance-count {serving.instance_count}"]
    return " ".join(flags)
