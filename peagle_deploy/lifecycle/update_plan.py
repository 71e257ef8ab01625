"""`peagle update NAME`, its plan: what serves now (read), what comes next (deploy's plan), every write in order.

K, mode and instances are read from the live endpoint (K and mode from the served model's
SM_VLLM_SPECULATIVE_CONFIG, not from the tags); only peagle's endpoints are updated, and one with an unfinished
update is refused until `peagle recover` finishes it. `update_run.run_update` executes the plan.

The new configuration is deploy's plan for the new target (`plan.build_plan`) plus the user's own settings: what
the live resources hold beyond deploy's plan of what serves now (`_carry`: an --env or --image given at deploy,
a VpcConfig, a KmsKeyId, a timeout changed by hand). K, mode, the speculative config, the drafter channel, the
TP degree, the image, the timeouts and the price all come from the new target's plan; nothing is decided here.
The speculative config and the drafter channel are peagle's own: always the plan's, with the keys a user added to
the speculative config at deploy (`user_speculative`) carried into it; a lossy one among them needs --allow-lossy
again. Where deploy cannot plan what serves now (a live K the drafter no longer takes, an instance type the spec
dropped), nothing tells what the user set: the live container and variant are kept whole, and only the change
itself follows the new plan (the speculative config, the drafter channel and, on a new instance type, the TP
degree). One `FactSource` serves both plans: each spec and price is resolved once.
"""

from __future__ import annotations

import copy
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from ..acceptance_alarm import AcceptanceAlarm, AcceptanceRequest, plan_alarm
from ..log_groups import endpoint_log_group
from ..autoscale import AutoscalePolicy, resource_id
from ..describe import describe
from ..errors import PeagleError, UsageError
from ..hosting import TP_ENV, VARIANT_NAME
from ..plan import DeploymentPlan, FactSource, PlanRequest, build_plan
from ..pools import POOL_SEPARATOR, CapacityReservation, configured_pools, tag_value
from ..pricing import Price
from ..served_config import spec_of_environment
from ..container.lossless import ALLOW_LOSSY_ENV
from ..speculative import DFLASH_CHANNEL, DRAFTER_CHANNELS, ENV_VAR, Mode
from ..tags import INTENT_KEYS, PeagleTags
from .intent import UpdateIntent, read_update_intent, recover_command
from .lease import fresh_lease
from .wait import read_retrying

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
_CAPACITY_KEYS = ("InstanceType", "InstancePools", "VariantInstanceProvisionTimeoutInSeconds",
                  "CapacityReservationConfig")
_CONFIG_KEYS = ("DataCaptureConfig", "KmsKeyId", "AsyncInferenceConfig", "ExecutionRoleArn", "VpcConfig",
                "EnableNetworkIsolation")


class UpdateRequest(BaseModel):
    """What the user asked to change; None keeps the live value."""

    model_config = ConfigDict(frozen=True)

    name: str
    region: str
    mode: Mode | None = None
    k: int | str | None = None
    drafter: str | None = Field(None, description="--mode dflash: the staged DFlash drafter's S3 prefix (--drafter, "
                                                  "else the live channel or the stage record)")
    instance_type: str | None = None
    instance_pools: list[str] = Field(default_factory=list, description="--instance-type A,B: instance pools")
    instance_count: int | None = None
    allow_any_instance: bool = False
    accept_eula: bool = False
    bake: timedelta = BAKE_DEFAULT
    bake_given: bool = Field(False, description="--bake was typed (a component's update has no baking period)")
    rollback_alarms: list[str] = Field(default_factory=list)
    autoscale: AutoscalePolicy | None = Field(default=None, description="--autoscale: registered after success")
    scale_to_zero: bool = Field(default=False, description="--scale-to-zero: a component that scales to zero by an "
                                "older peagle's idle rule moves to AWS's recipe (lifecycle/scaling_migration.py)")
    allow_lossy: bool = Field(False, description="--allow-lossy: keep a lossy rejection_sample_method the live "
                                                 "speculative config carries")
    acceptance: AcceptanceRequest | None = Field(default=None, description="--acceptance-alarm (the CLI's default: "
                                                 "on): moved to the new K and named as a rollback alarm")


class Serving(BaseModel):
    """One configuration of the endpoint: what serves now, or what the update moves to."""

    endpoint_config: str
    model: str
    mode: str | None
    k: int | None
    instance_type: str | None = Field(description="with instance pools, their types by priority joined by ','")
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
    """Every AWS write of the update, in order; `--dry-run` prints it, `update_run.run_update` executes it."""

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
    create_pool_models: list[dict[str, Any]] = Field(default_factory=list, description="instance pools' own models")
    create_endpoint_config: dict[str, Any]
    update_endpoint: dict[str, Any]
    endpoint_tags: dict[str, str] = Field(description="AddTags on the endpoint after success")
    delete_after_success: list[dict[str, str]] = Field(description="peagle's own, and only if nothing uses them")
    autoscale_before: AutoscalePolicy | None = Field(default=None, description="what peagle registered (its tag)")
    autoscale_after: AutoscalePolicy | None = Field(default=None, description="registered after success")
    deregister_first: bool = Field(default=False, description="SageMaker refuses an instance type change of a "
                                   "registered variant: deregister before UpdateEndpoint, register again after")
    notes: list[str] = Field(default_factory=list)
    acceptance_alarm: AcceptanceAlarm | None = Field(default=None, description="put at the new K before "
                                                     "UpdateEndpoint, which names it as a rollback alarm")
    acceptance_removed: bool = Field(default=False, description="speculation goes off: peagle's acceptance alarm "
                                                                "and filters are removed after success")
    verify_plan: DeploymentPlan = Field(exclude=True)

    @property
    def registers_autoscaling(self) -> bool:
        """Whether the autoscaling is registered after success (a new range, or again after deregistering)."""
        return self.autoscale_after is not None and (self.deregister_first
                                                     or self.autoscale_after != self.autoscale_before)

    @property
    def writes(self) -> list[str]:
        intent = ", ".join(f"{k}={v}" for k, v in UpdateIntent(
            from_config=self.current.endpoint_config, to_config=self.target.endpoint_config,
            autoscale=self.autoscale_after).to_tags().items())
        calls = [f"AddTags {self.endpoint_name} (the update's intent, for peagle recover: {intent})"]
        if self.create_model is not None:
            calls.append(f"CreateModel {self.create_model['ModelName']}")
        calls.extend(f"CreateModel {body['ModelName']} (an instance pool's)" for body in self.create_pool_models)
        calls.append(f"CreateEndpointConfig {self.create_endpoint_config['EndpointConfigName']}")
        target_id = resource_id(self.endpoint_name, VARIANT_NAME)
        if self.deregister_first:
            calls.append(f"DeleteScalingPolicy + DeregisterScalableTarget {target_id} (SageMaker refuses an "
                         "instance type change of an autoscaled variant; registered again afterwards)")
        if self.acceptance_alarm is not None:
            calls += [f"{write} (the acceptance alarm at K={self.target.k}, a rollback alarm of this update; put back "
                      "as it was if the update does not happen)" for write in self.acceptance_alarm.writes()]
        calls.append(f"UpdateEndpoint {self.endpoint_name} -> {self.target.endpoint_config}")
        if self.registers_autoscaling:
            calls.append(f"RegisterScalableTarget + PutScalingPolicy {target_id} "
                         f"({self.autoscale_after.describe()}; after success)")
        calls.append(f"AddTags {self.endpoint_name} ({', '.join(f'{k}={v}' for k, v in self.endpoint_tags.items())})")
        calls.extend(f"Delete{'EndpointConfig' if d['kind'] == 'endpoint_config' else 'Model'} {d['name']} "
                     "(after success; peagle's own, if unused)" for d in self.delete_after_success)
        if self.acceptance_alarm is not None:
            calls.append(f"DeleteMetricFilter of peagle's other K in {self.acceptance_alarm.log_group} (after "
                         "success)")
        if self.acceptance_removed:
            calls.append(f"DeleteMetricFilter + DeleteAlarms of peagle's acceptance alarm of {self.endpoint_name} "
                         "(after success: nothing drafts any more)")
        calls.append(f"DeleteTags {self.endpoint_name} (the update's intent, once done)")
        return calls


# validation (no AWS call) -----------------------------------------------------------------------
def check_request(request: UpdateRequest) -> None:
    """Everything that can be refused before AWS is asked anything."""
    from ..inputs import parse_instance_count, validate_name
    from ..plan import check_family

    validate_name(request.name)
    if (request.mode is None and request.k is None and request.instance_type is None and not request.instance_pools
            and request.instance_count is None and request.autoscale is None and not request.scale_to_zero):
        raise UsageError("nothing to update", "pass --k, --mode, --instance-type, --instance-count or --autoscale")
    if request.k is not None:
        _k_form(request.k)  # the form now; the bound is the drafter's, once the endpoint's model is known
        if request.mode is Mode.OFF:
            raise UsageError("--k has no effect with --mode off", "drop --k, or choose --mode p-eagle, eagle3 or dflash")
    if request.instance_count is not None:
        parse_instance_count(request.instance_count)
    for instance_type in [request.instance_type] if request.instance_type is not None else request.instance_pools:
        check_family(instance_type, request.allow_any_instance)
    if len(request.rollback_alarms) > ALARMS_MAX:
        raise UsageError(f"{len(request.rollback_alarms)} --rollback-alarm options; SageMaker allows {ALARMS_MAX}",
                         f"pass at most {ALARMS_MAX} alarms")
    for alarm in request.rollback_alarms:
        if not alarm.strip() or len(alarm) > ALARM_NAME_MAX:
            raise UsageError(f"--rollback-alarm {alarm!r} is not a CloudWatch alarm name",
                             f"pass the alarm's name (1 to {ALARM_NAME_MAX} characters)")
    if len(set(request.rollback_alarms)) != len(request.rollback_alarms):
        raise UsageError("a --rollback-alarm is given twice", "pass each alarm once")


def _k_form(value: str | int) -> None:
    """--k as a whole number of at least 1 (inputs.py's rule), before any AWS call; how deep is the drafter's to say
    (qwen3-coder's takes 18, gpt-oss-20b's 10), once the endpoint's model is read, so its hint is a K that works."""
    from ..inputs import read_number

    k = value if isinstance(value, int) else read_number(str(value), "--k", whole=True)
    if k < 1:
        raise UsageError(f"--k must be at least 1, got {k}", "pass --k 1 or more, or --mode off for no speculation")


def check_component_update(request: UpdateRequest, name: str) -> None:
    """What `update` changes on a component-based endpoint (lifecycle/component_update.py): K and mode only; the
    rest in one line."""
    given = [flag for flag, value in (("--instance-type", request.instance_type or request.instance_pools),
                                      ("--instance-count", request.instance_count),
                                      ("--autoscale", request.autoscale),
                                      ("--rollback-alarm", request.rollback_alarms)) if value]
    if request.bake_given and not given:
        raise UsageError(f"--bake is the baking period of an endpoint's blue/green update; {name} hosts its model as "
                         "an inference component, whose update has none", "drop --bake")
    if given:
        raise component_refusal(name, given)


def component_refusal(name: str, given: list[str]) -> UsageError:
    """The one line for flags `update` does not take on a component-based endpoint (`given`: those flags)."""
    return UsageError(f"endpoint {name!r} hosts its model as an inference component: peagle update changes its K "
                      f"or mode, not {', '.join(given)}",
                      "update K or mode only (peagle update NAME --k N), or deploy the new instances beside it "
                      f"(peagle deploy MODEL --hosting component --name NEW-NAME), then peagle cleanup {name}; "
                      "nothing was changed")


# reading the live endpoint ----------------------------------------------------------------------
class Live(BaseModel):
    """The endpoint as SageMaker holds it now."""

    endpoint: dict[str, Any]
    config: dict[str, Any]
    model: dict[str, Any]
    tags: dict[str, str]
    peagle: PeagleTags
    component: dict[str, Any] | None = Field(default=None, description="DescribeInferenceComponent of a "
                                             "component-based endpoint's component")


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
    lease = fresh_lease(tags)
    if intent is not None:
        if lease is not None:  # its owner says it is alive
            raise UsageError(f"an update of {name!r} did not finish ({intent.from_config} -> {intent.to_config}): "
                             f"{lease.describe()}", f"wait for it; if that process is gone, "
                             f"'{recover_command(name, request.region)}' finishes it once the lease has expired "
                             "(--force: at once); nothing was changed")
        raise UsageError(f"an update of {name!r} did not finish ({intent.from_config} -> {intent.to_config})",
                         f"if it is still running elsewhere, wait for it; else finish it first with "
                         f"'{recover_command(name, request.region)}'; nothing was changed")
    if lease is not None:
        raise UsageError(f"endpoint {name!r} is being worked on: {lease.describe()}",
                         "wait for it to finish, then run this update again; nothing was changed")
    config = read(lambda: describe(sm, "endpoint_config", endpoint["EndpointConfigName"]))
    variants = (config or {}).get("ProductionVariants") or []
    component = None
    if config is not None and len(variants) == 1 and (peagle.hosting == "component"
                                                       or variants[0].get("ManagedInstanceScaling")):
        component = _live_component(sm, request, endpoint, peagle, read=read)  # K and mode only (component_update)
        model_name = (component.get("Specification") or {}).get("ModelName")
    elif config is None or len(variants) != 1 or not variants[0].get("ModelName"):
        raise UsageError(f"endpoint {name!r} does not have the one-variant configuration peagle deploys",
                         "update it with the SageMaker console or API instead")
    elif request.scale_to_zero:
        raise UsageError(f"endpoint {name!r} hosts its model on its own instances, which cannot scale to zero: "
                         "--scale-to-zero moves an inference component's scaling to AWS's recipe",
                         f"deploy it beside as a component (peagle deploy MODEL --scale-to-zero --name NEW-NAME), "
                         f"then peagle cleanup {name}; nothing was changed")
    else:
        model_name = variants[0]["ModelName"]
    model = read(lambda: describe(sm, "model", model_name))
    if model is None:
        raise UsageError(f"the model {model_name!r} of endpoint {name!r} no longer exists",
                         "redeploy with peagle deploy")
    return Live(endpoint=endpoint, config=config, model=model, tags=tags, peagle=peagle, component=component)


def _live_component(sm: Any, request: UpdateRequest, endpoint: dict[str, Any], peagle: PeagleTags, *,
                    read: Callable[[Callable[[], Any]], Any]) -> dict[str, Any]:
    """The inference component peagle made for a component-based endpoint, InService and naming a model."""
    from .component_status import component_of
    from .components import describe_component

    name = request.name
    check_component_update(request, name)
    component = read(lambda: component_of(sm, endpoint, peagle))
    found = read(lambda: describe_component(sm, component)) if component else None
    if found is None:
        raise UsageError(f"endpoint {name!r} hosts no inference component peagle made",
                         f"redeploy with peagle deploy, or remove it with peagle cleanup {name}")
    status = found.get("InferenceComponentStatus")
    if status != "InService":
        raise UsageError(f"inference component {component!r} of {name!r} is {status}, not InService",
                         f"wait until it is InService (peagle status {name} --region {request.region}), then "
                         f"'{recover_command(name, request.region)}' finishes what was interrupted")
    if not (found.get("Specification") or {}).get("ModelName"):
        raise UsageError(f"inference component {component!r} names no model (its own container)",
                         "update it with the SageMaker console or API instead")
    return found


def serving(config: dict[str, Any], model: dict[str, Any], tags: PeagleTags) -> Serving:
    """What serves now: mode and K from the model's SM_VLLM_SPECULATIVE_CONFIG (the tags only where it is
    unreadable)."""
    variant = config["ProductionVariants"][0]
    spec = spec_of_environment((model.get("PrimaryContainer") or {}).get("Environment"))
    mode, k = (spec.mode, spec.k) if spec.problem is None else (tags.mode, tags.k)
    return Serving(endpoint_config=config["EndpointConfigName"], model=variant["ModelName"], mode=mode,
                   k=k, instance_type=variant.get("InstanceType") or POOL_SEPARATOR.join(configured_pools(variant))
                   or None, instance_count=variant.get("InitialInstanceCount"))


def _instances(value: str | None, live_variant: dict[str, Any]) -> dict[str, Any]:
    """A deploy request's instance fields for `value` (one type, or pools joined by ','): with pools, the live
    variant's provision timeout; and the live variant's capacity reservation either way (update has no flag for
    them: they are kept)."""
    pools = [t for t in (value or "").split(POOL_SEPARATOR) if t] if value and POOL_SEPARATOR in value else []
    fields: dict[str, Any] = {"instance_type": None if pools else value, "instance_pools": pools}
    timeout = live_variant.get("VariantInstanceProvisionTimeoutInSeconds")
    if pools and timeout:
        fields["provision_timeout_s"] = int(timeout)
    reservation = live_variant.get("CapacityReservationConfig") or {}
    if reservation.get("MlReservationArn"):
        fields["capacity_reservation"] = CapacityReservation(
            arn=reservation["MlReservationArn"], preference=reservation.get("CapacityReservationPreference"))
    return fields


def range_note(count: int, policy: AutoscalePolicy, *, runs: str) -> str | None:
    """What registering `policy` does to an endpoint running `count` instances: Application Auto Scaling moves the
    running count into the new range at once. `runs`: who runs them ("the endpoint runs", "the new fleet has")."""
    if count < policy.min_capacity:
        to, which, verb = policy.min_capacity, "minimum", "raises"
    elif count > policy.max_capacity:
        to, which, verb = policy.max_capacity, "maximum", "lowers"
    else:
        return None
    return (f"{runs} {count} instance{'s' if count != 1 else ''}; registering autoscaling "
            f"{policy.min_capacity}-{policy.max_capacity} {verb} it to {to} at once (the new {which})")


# the plan: deploy's plan for the new target, plus what the user set ---------------------------------
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
    current target (the user's own --env, or a value the user changed): one rule for every request body, so an
    update lands where a fresh deploy of the new target would."""
    kept = {key: copy.deepcopy(value) for key, value in live.items()
            if key not in planned_before or planned_before[key] != value}
    return {**copy.deepcopy(planned_after), **kept}


def _live_mode(live: Live, current: Serving, name: str) -> Mode:
    try:
        return Mode(current.mode or Mode.P_EAGLE.value)
    except ValueError:  # the model's environment was unreadable, and so is the tag
        raise UsageError(f"endpoint {name!r} has an unreadable peagle:mode tag {live.peagle.mode!r}",
                         "pass --mode p-eagle, eagle3, dflash or off") from None


def _target_request(live: Live, request: UpdateRequest, current: Serving, name: str) -> PlanRequest:
    """The new target, as a deploy request: what the user asked to change, the live value for the rest."""
    mode = request.mode or _live_mode(live, current, request.name)
    if request.k is not None and mode is Mode.OFF and request.mode is None:
        raise UsageError(f"endpoint {request.name!r} runs with speculation off",
                         "pass --mode p-eagle (or eagle3) together with --k")
    # a mode change keeps the live K (the model's default when speculation was off)
    k = request.k if request.k is not None else None if mode is Mode.OFF else current.k
    if request.instance_count is not None and request.autoscale is None and live.peagle.autoscale is not None:
        from ..autoscale import check_count_within

        check_count_within(request.instance_count, live.peagle.autoscale, where="the endpoint's autoscaling")
    container = live.model.get("PrimaryContainer", {})
    wanted = POOL_SEPARATOR.join(request.instance_pools) or request.instance_type or current.instance_type
    drafter, source = None, None
    if mode is Mode.DFLASH:  # --drafter, else the channel the endpoint mounts now, else the stage's record
        drafter, source = (request.drafter, "--drafter") if request.drafter else (_live_dflash(live), "the live "
                                                                                   "endpoint's channel")
        if drafter is None:
            from ..drafters import locate

            drafter, source = locate(live.peagle.model or "", None, request.region)
        if drafter is None:
            raise UsageError(f"--mode dflash needs the {live.peagle.model} DFlash drafter in S3",
                             f"stage it first: peagle drafter stage {live.peagle.model} --method dflash --to "
                             "s3://BUCKET/PREFIX (or pass --drafter s3://BUCKET/PREFIX)")
    elif request.drafter is not None:
        raise UsageError(f"--drafter is for --mode dflash, not {mode.value}", "drop --drafter")
    return PlanRequest(
        model=live.peagle.model, model_id=live.peagle.model_id, mode=mode, k=k, name=name,
        drafter=drafter, drafter_source=source,
        **_instances(wanted, live.config["ProductionVariants"][0]),
        instance_count=request.instance_count or current.instance_count or 1,
        allow_any_instance=request.allow_any_instance, region=request.region,
        role=live.model.get("ExecutionRoleArn"), accept_eula=request.accept_eula or _accepted_eula(container),
        env=_user_speculative(container, mode), allow_lossy=request.allow_lossy)


def _user_speculative(container: dict[str, Any], mode: Mode) -> dict[str, str]:
    """The live speculative config's keys beyond peagle's own (what the user added at deploy), as deploy's --env
    takes them; nothing with speculation off or an unreadable config."""
    import json

    from ..user_speculative import OWNED

    try:
        live = json.loads((container.get("Environment") or {}).get(ENV_VAR) or "null")
    except ValueError:
        return {}
    extra = {key: value for key, value in live.items() if key not in OWNED} if isinstance(live, dict) else {}
    return {ENV_VAR: json.dumps(extra)} if extra and mode is not Mode.OFF else {}


def _current_plan(live: Live, current: Serving, request: UpdateRequest, facts: FactSource,
                  now: datetime) -> DeploymentPlan | None:
    """Deploy's plan for what the endpoint serves now; None where that can no longer be planned (a live K the drafter
    no longer takes, an instance type the spec dropped): then nothing tells what of the live resources the user
    set, and they are kept whole."""
    try:
        mode = Mode(current.mode or Mode.P_EAGLE.value)
        return build_plan(PlanRequest(
            model=live.peagle.model, model_id=live.peagle.model_id, mode=mode,
            drafter=_live_dflash(live) if mode is Mode.DFLASH else None,
            k=None if mode is Mode.OFF else current.k, name=request.name,
            **_instances(current.instance_type, live.config["ProductionVariants"][0]),
            instance_count=current.instance_count or 1, allow_any_instance=True, region=request.region,
            role=live.model.get("ExecutionRoleArn"), accept_eula=True,
            env=_user_speculative(live.model.get("PrimaryContainer", {}), mode), allow_lossy=True),
            facts=facts.without_quota(), now=now)
    except (PeagleError, ValueError):
        return None


def _live_dflash(live: Live) -> str | None:
    """The S3 prefix of the DFlash drafter channel the endpoint's model mounts now, if any."""
    channels = (live.model.get("PrimaryContainer") or {}).get("AdditionalModelDataSources") or []
    return next((c.get("S3DataSource", {}).get("S3Uri") for c in channels if c.get("ChannelName") == DFLASH_CHANNEL),
                None)


def _channels(live: dict[str, Any], planned: dict[str, Any]) -> list[dict[str, Any]]:
    """The drafter channel is peagle's own: the plan's (none with speculation off); other channels stay."""
    drafter = [c for c in planned.get("AdditionalModelDataSources", []) if c.get("ChannelName") in DRAFTER_CHANNELS]
    others = [c for c in live.get("AdditionalModelDataSources", []) if c.get("ChannelName") not in DRAFTER_CHANNELS]
    return copy.deepcopy(drafter + others)


def _container(live: dict[str, Any], before: DeploymentPlan | None, after: DeploymentPlan,
               instance_type_changed: bool) -> tuple[dict[str, Any], list[str]]:
    """CreateModel's container and the notes on it: `_carry` over the container and its environment; without a
    plan of what serves now, the live container with the speculative config and the new TP degree."""
    planned = after.create_model["PrimaryContainer"]
    container = _carried(live, before.create_model["PrimaryContainer"] if before else None, planned,
                         _CONTAINER_KEYS)
    if before is not None:
        container["Environment"] = _carry(live.get("Environment") or {},
                                          before.create_model["PrimaryContainer"].get("Environment") or {},
                                          planned.get("Environment") or {})
    env = container.setdefault("Environment", {})
    planned_env = planned.get("Environment") or {}
    for key in (ENV_VAR, ALLOW_LOSSY_ENV):  # the speculative config is the plan's (the user's keys carried into it)
        if key in planned_env:
            env[key] = planned_env[key]
        else:
            env.pop(key, None)
    notes = []
    if before is None and instance_type_changed:  # no plan of what serves now: the TP degree still follows
        tp = planned_env.get(TP_ENV)
        if tp is None:
            env.pop(TP_ENV, None)
        elif env.get(TP_ENV) != tp:
            env[TP_ENV] = tp
            notes.append(f"{TP_ENV} set to {tp} for {after.instance_type}")
    if not env:
        container.pop("Environment")
    container.pop("AdditionalModelDataSources", None)
    channels = _channels(live, planned)
    if channels:
        container["AdditionalModelDataSources"] = channels
    return container, notes


def _carried(live: dict[str, Any], before: dict[str, Any] | None, after: dict[str, Any],
             keys: tuple[str, ...]) -> dict[str, Any]:
    """`keys` of a live body carried onto the plan's body, in the order of `keys` (the live body as it is without a
    plan of what serves now)."""
    if before is None:
        return _pick(live, keys)
    carried = _carry(_pick(live, keys), _pick(before, keys), _pick(after, keys))
    return {key: carried[key] for key in keys if key in carried}


def _variant(live: Live, before: DeploymentPlan | None, after: DeploymentPlan, model_name: str) -> dict[str, Any]:
    """The production variant: timeouts and the like follow the new instance type unless the user changed them."""
    variant = _pick(live.config["ProductionVariants"][0], _VARIANT_KEYS)
    if before is not None:
        variant = _carry(variant, _pick(before.create_endpoint_config["ProductionVariants"][0], _VARIANT_KEYS),
                         _pick(after.create_endpoint_config["ProductionVariants"][0], _VARIANT_KEYS))
    variant.update(ModelName=model_name, InitialInstanceCount=after.instance_count)
    planned = after.create_endpoint_config["ProductionVariants"][0]
    for key in _CAPACITY_KEYS:  # one type or instance pools, their timeout and reservation: the new plan's
        variant.pop(key, None)
        if key in planned:
            variant[key] = copy.deepcopy(planned[key])
    return variant


def _pool_container(container: dict[str, Any], after: DeploymentPlan, pool_model: dict[str, Any]) -> dict[str, Any]:
    """An instance pool's own container: the update's container (the user's settings carried) with what the new
    plan sets otherwise for that pool (its TP degree, its image)."""
    main, pool = after.create_model["PrimaryContainer"], pool_model["PrimaryContainer"]
    shaped = copy.deepcopy(container)
    for key, value in pool.items():
        if key != "Environment" and main.get(key) != value:
            shaped[key] = copy.deepcopy(value)
    env, main_env, pool_env = shaped.setdefault("Environment", {}), main.get("Environment") or {}, pool.get("Environment") or {}
    for key in set(main_env) | set(pool_env):
        if main_env.get(key) != pool_env.get(key):
            if key in pool_env:
                env[key] = pool_env[key]
            else:
                env.pop(key, None)
    return shaped


def _resource_tags(live: Live, after: DeploymentPlan, name: str) -> list[dict[str, str]]:
    """The new model's and config's tags: the live endpoint's (not AWS's, not an intent), then the plan's."""
    tags = {k: v for k, v in live.tags.items() if not k.startswith("aws:") and k not in INTENT_KEYS}
    tags.update({k: v for k, v in after.tags.items() if k != "peagle:expires-at"})
    tags["peagle:endpoint"] = name  # cleanup NAME and recover NAME find it by this tag
    return [{"Key": k, "Value": v} for k, v in tags.items()]


def _deployment(request: UpdateRequest, acceptance: AcceptanceAlarm | None = None) -> dict[str, Any]:
    deployment: dict[str, Any] = {"BlueGreenUpdatePolicy": {"TrafficRoutingConfiguration": {
        "Type": "ALL_AT_ONCE", "WaitIntervalInSeconds": int(request.bake.total_seconds())}}}
    alarms = [*request.rollback_alarms, *([acceptance.alarm_name] if acceptance is not None else [])]
    if alarms:
        deployment["AutoRollbackConfiguration"] = {"Alarms": [{"AlarmName": a} for a in alarms]}
    return deployment


def _acceptance(request: UpdateRequest, after: DeploymentPlan, tag_list: list[dict[str, str]]
                ) -> tuple[AcceptanceAlarm | None, list[str]]:
    """The acceptance alarm at the new K (acceptance_alarm.py), a rollback alarm of this update, and its notes."""
    from ..acceptance_alarm import EVALUATION_PERIODS, PERIOD_S

    alarm, notes = plan_alarm(request.acceptance, owner=request.name, log_group=endpoint_log_group(request.name),
                              k=after.k, mode=after.mode.value, tags={t["Key"]: t["Value"] for t in tag_list},
                              model=(after.model, after.model_id))
    if alarm is None:
        return None, notes
    if len(request.rollback_alarms) + 1 > ALARMS_MAX:
        raise UsageError(f"{len(request.rollback_alarms)} --rollback-alarm and peagle's acceptance alarm make "
                         f"{len(request.rollback_alarms) + 1}; SageMaker allows {ALARMS_MAX}",
                         f"pass at most {ALARMS_MAX - 1} --rollback-alarm, or --no-acceptance-alarm")
    needed = EVALUATION_PERIODS * PERIOD_S
    notes = [f"acceptance alarm {alarm.describe()}; SageMaker rolls this update back if it goes to ALARM before the "
             f"{int(request.bake.total_seconds())}s baking period ends (docs/monitoring.md)"]
    if request.bake.total_seconds() < needed + PERIOD_S:
        notes.append(f"the baking period ({int(request.bake.total_seconds())}s) is shorter than the acceptance alarm "
                     f"needs ({needed}s of the new fleet's lines, then CloudWatch's evaluation): it is unlikely to "
                     f"roll this update back; pass --bake {(needed + PERIOD_S) // 60 + 1}m or longer")
    return alarm, notes


def plan_update(live: Live, request: UpdateRequest, *, now: datetime | None = None,
                facts: FactSource | None = None) -> UpdatePlan:
    """The new model (if the container changes), endpoint config and UpdateEndpoint request, from the live
    resources and the request (no AWS call but the spec and price `facts` resolves, each once)."""
    now = (now or datetime.now(UTC)).replace(microsecond=0)
    facts = facts or FactSource()
    tags = live.peagle
    if not tags.model:
        raise UsageError(f"endpoint {request.name!r} has no peagle:model tag", "redeploy it with peagle deploy")
    current = serving(live.config, live.model, tags)
    name = new_resource_name(request.name, now)
    after = build_plan(_target_request(live, request, current, name), facts=facts, now=now)
    before = _current_plan(live, current, request, facts, now)

    old_container = live.model.get("PrimaryContainer", {})
    container, notes = _container(old_container, before, after, after.instance_type != current.instance_type)
    tag_list = _resource_tags(live, after, request.name)
    new_model = container != _pick(old_container, _CONTAINER_KEYS)
    model_name = name if new_model else current.model
    create_model = None
    if new_model:
        model_keys = _carried(live.model, before.create_model if before else None, after.create_model, _MODEL_KEYS)
        create_model = {"ModelName": name, "PrimaryContainer": container, **model_keys, "Tags": tag_list}
    config_keys = _carried(live.config, before.create_endpoint_config if before else None,
                           after.create_endpoint_config, _CONFIG_KEYS)
    config = {"EndpointConfigName": name, "ProductionVariants": [_variant(live, before, after, model_name)],
              **config_keys, "Tags": tag_list}
    target = Serving(endpoint_config=name, model=model_name, mode=after.mode.value, k=after.k,
                     instance_type=POOL_SEPARATOR.join(after.pool_types) or after.instance_type,
                     instance_count=after.instance_count)
    pool_models = [{**body, "PrimaryContainer": _pool_container(container, after, body), "Tags": tag_list}
                   for body in after.create_pool_models]
    dropped = "; ".join(f"{pool.instance_type} left out ({pool.left_out})" for pool in after.pools if not pool.kept)
    if target.model_dump(exclude={"endpoint_config", "model"}) == current.model_dump(
            exclude={"endpoint_config", "model"}) and not new_model:
        raise UsageError(f"endpoint {request.name!r} already serves {current.label(with_instances=True)}"
                         + (f" ({dropped})" if dropped else ""),
                         "nothing to update; pass another --k, --mode, --instance-type or --instance-count")
    if dropped:
        notes.append(f"{dropped}; the new fleet uses {', '.join(after.pool_types) or after.instance_type}")
    autoscale_after = request.autoscale or tags.autoscale
    deregister_first = tags.autoscale is not None and target.instance_type != current.instance_type
    if request.autoscale is not None and (deregister_first or request.autoscale != tags.autoscale):
        notes += [n for n in [range_note(after.instance_count, request.autoscale, runs="the new fleet has")] if n]
    acceptance, acceptance_notes = _acceptance(request, after, tag_list)
    notes += acceptance_notes
    deletes = [{"kind": "endpoint_config", "name": current.endpoint_config}]
    if new_model:
        deletes.append({"kind": "model", "name": current.model})
    deletes += [{"kind": "model", "name": p["ModelNameOverride"]}  # the old pools' own models go with their config
                for p in live.config["ProductionVariants"][0].get("InstancePools") or [] if p.get("ModelNameOverride")]
    verify_plan = after.model_copy(update={
        "endpoint_name": request.name,
        "create_model": create_model or {"ModelName": model_name, "PrimaryContainer": container},
        "create_endpoint_config": config})
    return UpdatePlan(
        endpoint_name=request.name, endpoint_arn=live.endpoint["EndpointArn"], region=request.region,
        created_at=now, current=current, target=target, speculative_config=after.speculative_config,
        price_per_hour_usd=after.price_per_hour_usd, price=after.price, bake_s=int(request.bake.total_seconds()),
        rollback_alarms=list(request.rollback_alarms), create_model=create_model, create_pool_models=pool_models,
        create_endpoint_config=config,
        update_endpoint={"EndpointName": request.name, "EndpointConfigName": name,
                         "DeploymentConfig": _deployment(request, acceptance)},
        endpoint_tags=PeagleTags(mode=after.mode.value, k=after.k,
                                 instance_type=tag_value(after.pool_types) if after.pools else after.instance_type,
                                 instance_count=after.instance_count, version=after.tags.get("peagle:version"),
                                 autoscale=autoscale_after).to_aws(),
        delete_after_success=deletes, autoscale_before=tags.autoscale, autoscale_after=autoscale_after,
        deregister_first=deregister_first, notes=notes + after.notes,
        acceptance_alarm=acceptance, acceptance_removed=bool(request.acceptance and request.acceptance.enabled
                                                             and after.mode.value == "off"),
        verify_plan=verify_plan)


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


def read_request(session: Any, request: UpdateRequest, *, sleep: Callable[[float], None] = time.sleep) -> Live:
    """The request checked, then the live endpoint read (reads only)."""
    check_request(request)
    return read_live(session.client("sagemaker"), request, read=lambda call: read_retrying(call, sleep=sleep))


def prepare(session: Any, request: UpdateRequest, *, sleep: Callable[[float], None] = time.sleep,
            now: datetime | None = None, facts: FactSource | None = None, live: Live | None = None) -> UpdatePlan:
    """Reads only: the live endpoint (unless given), the spec, the alarms -> the plan. A component-based endpoint's
    update is planned by `component_update.prepare_update`."""
    live = live or read_request(session, request, sleep=sleep)
    if live.component is not None:
        raise ValueError(f"{request.name} hosts an inference component: plan it with component_update.prepare_update")
    plan = plan_update(live, request, now=now, facts=facts)
    check_alarms(session, request.rollback_alarms, read=lambda call: read_retrying(call, sleep=sleep))
    return plan
