"""DeploymentPlan: the exact CreateModel, CreateEndpointConfig and CreateEndpoint request bodies.

A plan is made from what the user chose (`PlanRequest`) and the facts that choice resolves to outside peagle:
the JumpStart spec of the model for the instance type, the SageMaker hosting price, and the instance's hardware
(`instances.py`). `FactSource` asks for each spec and price once per command, so a command that plans several
targets (update: what serves now and what comes next; a sweep: every mode and K) resolves each once.

Building is pure once the facts are in: `build_plan` checks the request alone (before any AWS call), resolves
the spec, plans every resource and checks it against the spec (before the price is read), then adds the price.
Each resource has its own `_plan_<resource>` function, all made from one set of parameters (`_Params`); the
hosting shape (`Hosting`) names which resources a plan has, so a second shape is a new set of per-resource
functions, not a second builder (docs/architecture.md). `--dry-run` renders the plan, `lifecycle.deploy`
executes the same object, and an update's bodies are the new target's plan (lifecycle/update_plan.py).

The speculative config is written into the environment AFTER the spec's defaults so a spec default can never
silently override the user's mode and K (the SDK's override trap). The user may add vLLM keys to it (not mode or
K: user_speculative.py); a lossy rejection method is refused unless --allow-lossy.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_serializer

from . import __version__
from .acceptance_alarm import AcceptanceAlarm, AcceptanceRequest, plan_alarm
from .log_groups import component_log_group, endpoint_log_group
from .autoscale import AutoscalePolicy
from .catalog import ModelEntry, get_model
from .errors import PeagleError, UsageError
from .inputs import (
    PRICE_GUARD_USD_PER_HOUR,
    check_env_count,
    check_tag_count,
    parse_instance_count,
    parse_vpc_config,
    validate_image,
    validate_kms_key,
    validate_name,
    validate_role_arn,
)
from .instances import G7E_PREFIX, InstanceInfo, instance_info, instance_table
from .plan_pools import (
    NO_IMAGE,
    capacity_variant,
    check_pool_request,
    judge,
    keep,
    new_pool,
    nothing_left,
    pool_notes,
    pools_price,
)
from .pools import CapacityReservation, Pool, Quota, tag_value
from .pricing import Price
from .scale_to_zero import ComponentScaling, IdleRule, ScalingRequest
from .spec import ResolvedSpec
from .tags import INTENT_KEYS, PeagleTags
from .speculative import (
    ATTENTION_ENV,
    DFLASH_ATTENTION_BACKEND,
    ENV_VAR,
    Mode,
    SpeculativeSettings,
    drafter_channel,
    parse_k,
    settings_for,
)
from .vllm_runner import (
    DFLASH_DLC_UNVERIFIED,
    dflash_image,
    dflash_image_refusal,
    dflash_runner_note,
    p_eagle_runner_note,
)
from .per_request_acceptance import per_request_env, per_request_note
from . import user_speculative
from .container import lossless
from . import plan_component
from .hosting import TP_ENV, VARIANT_NAME, Hosting

Resolver = Callable[..., ResolvedSpec]
PriceLookup = Callable[[str, str, int], Price]
QuotaLookup = Callable[[str, str], Quota]


class PlanRequest(BaseModel):
    """Everything the user chose; validated values only (the CLI parses raw strings first)."""

    model_config = ConfigDict(frozen=True)

    model: str
    model_id: str | None = None
    model_version: str | None = None
    mode: Mode = Mode.P_EAGLE
    k: int | str | None = None
    drafter: str | None = Field(None, description="--mode dflash: the S3 prefix of the staged DFlash drafter "
                                                  "(--drafter, or the record `peagle drafter stage` wrote)")
    drafter_source: str | None = Field(None, description="where `drafter` came from, for the plan's summary")
    name: str | None = None
    instance_type: str | None = None
    instance_count: int = 1
    allow_any_instance: bool = False
    region: str = "us-east-1"
    role: str | None = None
    accept_eula: bool = False
    tags: dict[str, str] = Field(default_factory=dict)
    ttl: timedelta | None = None
    image: str | None = None
    env: dict[str, str] = Field(default_factory=dict)
    allow_lossy: bool = Field(False, description="--allow-lossy: a lossy rejection_sample_method (fly, synthetic) in "
                                                 "the user's speculative keys is deployed, not refused")
    offline: bool = False
    autoscale: AutoscalePolicy | None = None
    # private networking and encryption
    subnets: list[str] = Field(default_factory=list)
    security_groups: list[str] = Field(default_factory=list)
    kms_key: str | None = None
    hosting: Hosting = Hosting.ENDPOINT
    # instance pools and capacity (plan_pools.py): two or more types in priority order
    instance_pools: list[str] = Field(default_factory=list, description="[]: one type, a plain InstanceType")
    provision_timeout_s: int | None = None
    capacity_reservation: CapacityReservation | None = None
    max_price_per_hour_usd: float | None = Field(None, description="an explicit --max-price-per-hour: a pool "
                                                               "priced above it is left out")
    scale_to_zero: IdleRule | None = Field(None, description="--scale-to-zero --idle: only with hosting component")
    regions_tried: list[str] = Field(default_factory=list, description="--region A,B: the regions tried so far, "
                                                                       "this one last (the peagle:regions-tried tag)")
    host: str | None = Field(None, description="hosting component: the endpoint the component joins when it is not "
                                               "its own (a sweep's one endpoint for many components): the config and "
                                               "endpoint bodies are then the host's, tagged as the host (no mode or "
                                               "K: each component's model has its own)")
    acceptance: AcceptanceRequest | None = Field(None, description="deploy's --acceptance-alarm and its floor "
                                                                   "(acceptance_alarm.py); None: no alarm planned")


class DeploymentPlan(BaseModel):
    model_config = ConfigDict(frozen=True)

    endpoint_name: str = Field(description="the model, endpoint config and endpoint all carry this name (a "
                                           "component that joins a host: the host's; its model and component carry "
                                           "inference_component_name)")
    region: str
    model: str
    display_name: str
    model_id: str
    model_version: str
    mode: Mode
    k: int | None
    instance_type: str
    instance_count: int
    gpus_per_instance: int | None
    price_per_hour_usd: float | None = Field(description="all instances together (SageMaker hosting); None: unknown")
    price_source: str = Field(description="where the price came from, or why it is unknown")
    price_per_day_usd: float | None = None
    price: Price | None = Field(None, description="the price with its source, the Pricing API query and a hint")
    image_uri: str
    image_overridden: bool
    speculative_config: str | None
    model_data_uri: str = Field(description="model_uris.retrieve(model_scope='inference'): JumpStart's artifact")
    model_data_prepacked: bool = Field(description="the prepacked artifact, as JumpStart deploys it")
    drafter_channel: dict[str, Any] | None
    tags: dict[str, str]
    created_at: datetime
    expires_at: datetime | None
    startup_health_check_timeout_s: int
    model_data_download_timeout_s: int
    resolution_source: str
    resolution_detail: str
    unverified: dict[str, str] = Field(description="value -> why it could not be verified")
    missing: list[str] = Field(description="what a real deploy still needs")
    notes: list[str]
    create_model: dict[str, Any]
    create_endpoint_config: dict[str, Any]
    create_endpoint: dict[str, Any]
    autoscaling: AutoscalePolicy | None = None
    max_price_per_hour_usd: float | None = Field(default=None, description="at the autoscaling maximum")
    register_scalable_target: dict[str, Any] | None = Field(
        default=None, description="Application Auto Scaling, sent after the endpoint is InService and verified")
    put_scaling_policy: dict[str, Any] | None = None
    # private networking and encryption: also inside create_model / create_endpoint_config
    vpc_config: dict[str, list[str]] | None = Field(None, description="CreateModel's VpcConfig (--subnet, "
                                                                         "--security-group)")
    kms_key_id: str | None = Field(None, description="CreateEndpointConfig's KmsKeyId for the ML storage volume")
    hosting: Hosting = Field(Hosting.ENDPOINT, description="which resources host the model (Hosting)")
    # instance pools and capacity reservations (plan_pools.py): left out of --json when not used
    pools: list[Pool] = Field(default_factory=list, description="every listed instance type in priority order, "
                                                                 "kept or left out with the reason")
    create_pool_models: list[dict[str, Any]] = Field(default_factory=list, description="CreateModel of each pool "
                                                     "whose container differs (its ModelNameOverride)")
    provision_timeout_s: int | None = Field(None, description="VariantInstanceProvisionTimeoutInSeconds")
    capacity_reservation: CapacityReservation | None = None
    # hosting component (plan_component.py): the component, its scaling and what it costs at zero
    inference_component_name: str | None = None
    create_inference_component: dict[str, Any] | None = Field(
        None, description="CreateInferenceComponent, sent once the endpoint is InService")
    component_scaling: ComponentScaling | None = Field(
        None, description="copies: Application Auto Scaling range, target tracking, the idle rule")
    component_requests: list[ScalingRequest] = Field(
        default_factory=list, description="Application Auto Scaling and CloudWatch requests, in order, sent once the "
                                          "component is InService and verified")
    price_at_zero_usd_per_hour: float | None = Field(
        None, description="scale to zero: what an hour at zero instances costs (no instance-hours)")
    acceptance_alarm: AcceptanceAlarm | None = Field(
        None, description="the metric filters and alarm on vLLM's acceptance, sent once the endpoint is InService and "
                          "verified (acceptance_alarm.py)")

    @model_serializer(mode="wrap")
    def _without_unused_capacity_fields(self, handler: Any) -> dict[str, Any]:
        data = handler(self)
        for key in ("pools", "create_pool_models", "provision_timeout_s", "capacity_reservation"):
            if not getattr(self, key):
                data.pop(key, None)
        return data

    @property
    def pool_types(self) -> list[str]:
        """The instance types of the variant's pools, by priority ([]: a plain InstanceType)."""
        return [pool.instance_type for pool in self.pools if pool.kept]


# the facts: asked once per command ---------------------------------------------------------------
class FactSource:
    """Where a plan's facts come from, each asked once per command: the JumpStart spec by (model id, version,
    instance type, region) and the SageMaker hosting price by (instance type, region, count). `resolver` is
    `jumpstart.resolve` unless given; `price_lookup(type, region, count)` is `pricing.instance_price` (the
    Pricing API unless offline) unless given."""

    def __init__(self, *, resolver: Resolver | None = None, price_lookup: PriceLookup | None = None,
                 profile: str | None = None, quota_lookup: QuotaLookup | None = None):
        self._resolver, self._price_lookup, self._profile = resolver, price_lookup, profile
        self._quota_lookup = quota_lookup  # lifecycle.capacity.QuotaReader (Service Quotas); None: not read
        self._specs: dict[tuple[Any, ...], ResolvedSpec] = {}
        self._prices: dict[tuple[Any, ...], Price] = {}
        self._quotas: dict[tuple[str, str], Quota] = {}

    def spec(self, model_id: str, *, region: str, instance_type: str | None, version: str | None,
             offline: bool) -> ResolvedSpec:
        key = (model_id, version, instance_type, region, offline)
        if key not in self._specs:
            resolver = self._resolver
            if resolver is None:
                from .jumpstart import resolve as resolver
            self._specs[key] = resolver(model_id, region=region, instance_type=instance_type, version=version,
                                        offline=offline)
        return self._specs[key]

    def price(self, instance_type: str, region: str, count: int, *, offline: bool) -> Price:
        key = (instance_type, region, count, offline)
        if key not in self._prices:
            if self._price_lookup is not None:
                self._prices[key] = self._price_lookup(instance_type, region, count)
            else:
                from .pricing import instance_price

                self._prices[key] = instance_price(instance_type, region, count=count, profile=self._profile,
                                                   offline=offline)
        return self._prices[key]

    def without_quota(self) -> FactSource:
        """The same specs and prices, no quota: a plan of what already runs (an update's current fleet holds the
        quota it would be held to)."""
        facts = FactSource(resolver=self._resolver, price_lookup=self._price_lookup, profile=self._profile)
        facts._specs, facts._prices = self._specs, self._prices
        return facts

    def quota(self, instance_type: str, region: str) -> Quota | None:
        """The endpoint-usage quota of the type and the instances in use (None: no quota lookup, e.g. offline)."""
        if self._quota_lookup is None:
            return None
        key = (instance_type, region)
        if key not in self._quotas:
            self._quotas[key] = self._quota_lookup(instance_type, region)
        return self._quotas[key]


# the request alone: checked before any AWS call -------------------------------------------------
def default_name(alias: str, settings: SpeculativeSettings, now: datetime) -> str:
    mode = settings.mode.value + (f"-k{settings.k}" if settings.k else "")
    return f"peagle-{alias}-{mode}-{now:%y%m%d-%H%M%S}"


def check_family(instance_type: str, allow_any: bool) -> None:
    if not allow_any and not instance_type.startswith(G7E_PREFIX):
        raise UsageError(f"instance type {instance_type!r} is not an ml.g7e instance",
                         f"choose one of {', '.join(instance_table().instances)} or pass --allow-any-instance")


@dataclass(frozen=True)
class _Choice:
    """The request, checked and completed without any AWS call."""

    request: PlanRequest
    entry: ModelEntry
    settings: SpeculativeSettings
    name: str
    role: str | None
    image: str | None
    vpc_config: dict[str, list[str]] | None
    kms_key_id: str | None
    created_at: datetime
    expires_at: datetime | None
    endpoint: str  # the endpoint that serves: the plan's name, or the host its component joins
    speculative: dict[str, Any] | None = None  # peagle's speculative config with the user's keys (None: off)

    @property
    def speculative_config(self) -> str | None:
        """The SM_VLLM_SPECULATIVE_CONFIG value (None: the variable must be absent)."""
        return None if self.speculative is None else json.dumps(self.speculative)

    @property
    def model_id(self) -> str:
        return self.request.model_id or self.entry.model_id


def _choose(request: PlanRequest, now: datetime) -> _Choice:
    entry = get_model(request.model)
    if request.mode is Mode.DFLASH:
        from .catalog import require_dflash

        require_dflash(entry)
    elif request.drafter is not None:
        raise UsageError(f"--drafter is for --mode dflash, not {request.mode.value}",
                         "drop --drafter (P-EAGLE and EAGLE-3 mount JumpStart's drafter)")
    default_k, max_k = entry.k_bounds(request.mode.value)
    drafter_name = f"{entry.alias} DFlash" if request.mode is Mode.DFLASH else entry.alias
    settings = settings_for(request.mode, parse_k(request.k, max_k=max_k, model=drafter_name), default_k=default_k)
    if request.drafter is not None:
        from .inputs import parse_s3_prefix

        parse_s3_prefix(request.drafter, flag="--drafter")
    if entry.gated and not request.accept_eula:
        raise UsageError(f"{entry.display_name} weights are gated by a licence (EULA)",
                         "read the model licence, then pass --accept-eula")
    name = validate_name(request.name, flag="--name") if request.name is not None else default_name(entry.alias, settings, now)
    role = validate_role_arn(request.role, request.region) if request.role is not None else None
    image = validate_image(request.image, request.region) if request.image is not None else None
    parse_instance_count(request.instance_count)
    policy = request.autoscale
    if policy is not None and not policy.min_capacity <= request.instance_count <= policy.max_capacity:
        raise UsageError(f"--instance-count {request.instance_count} is outside --autoscale "
                         f"{policy.min_capacity}:{policy.max_capacity}",
                         f"pass --instance-count between {policy.min_capacity} and {policy.max_capacity}")
    vpc_config = parse_vpc_config(request.subnets, request.security_groups)
    kms_key_id = validate_kms_key(request.kms_key, request.region) if request.kms_key is not None else None
    if request.instance_pools or request.provision_timeout_s is not None or request.capacity_reservation is not None:
        check_pool_request(request)
    for instance_type in request.instance_pools or [t for t in [request.instance_type] if t]:
        check_family(instance_type, request.allow_any_instance)  # before any AWS call
    if request.hosting is Hosting.COMPONENT or request.scale_to_zero is not None or request.host is not None:
        from .plan_component import check_component_request

        check_component_request(request)
    speculative = user_speculative.merged(settings.config(), user_speculative.additions(request.env),
                                          allow_lossy=request.allow_lossy, mode=settings.mode.value)
    return _Choice(request=request, entry=entry, settings=settings, name=name, role=role, image=image,
                   vpc_config=vpc_config, kms_key_id=kms_key_id, created_at=now,
                   expires_at=now + request.ttl if request.ttl else None,
                   endpoint=validate_name(request.host, flag="host") if request.host is not None else name,
                   speculative=speculative)


# the request against the spec -------------------------------------------------------------------
@dataclass(frozen=True)
class _Params:
    """The one set of parameters every resource of a plan is planned from: the checked request and its facts."""

    choice: _Choice
    spec: ResolvedSpec
    instance_type: str
    instance: InstanceInfo | None
    env: dict[str, str]
    tags: dict[str, str]
    endpoint_tags: dict[str, str]  # the endpoint's and its config's: `tags`, or the host's (PlanRequest.host)
    pools: tuple[Pool, ...] = ()  # the variant's instance pools, kept ones in priority order (plan_pools.py)

    @property
    def request(self) -> PlanRequest:
        return self.choice.request

    @property
    def drafter_gated(self) -> bool:
        return self.choice.settings.mode in (Mode.P_EAGLE, Mode.EAGLE3) and self.spec.drafter_gated

    @property
    def tag_list(self) -> list[dict[str, str]]:
        return [{"Key": k, "Value": v} for k, v in self.tags.items()]

    @property
    def endpoint_tag_list(self) -> list[dict[str, str]]:
        return [{"Key": k, "Value": v} for k, v in self.endpoint_tags.items()]


def _check_spec(choice: _Choice, spec: ResolvedSpec, instance_type: str) -> None:
    request, entry = choice.request, choice.entry
    check_family(instance_type, request.allow_any_instance)
    if instance_type not in spec.supported_instance_types:
        raise UsageError(f"the {entry.alias} JumpStart spec does not support {instance_type}",
                         f"choose one of {', '.join(spec.supported_instance_types)}")
    jumpstart_drafter = choice.settings.mode in (Mode.P_EAGLE, Mode.EAGLE3)
    if jumpstart_drafter and spec.drafter is None:
        raise UsageError(f"the {entry.alias} JumpStart spec has no P-EAGLE drafter channel",
                         "deploy with --mode off, or pass a --model-id whose spec has one")
    if choice.settings.mode is Mode.DFLASH and choice.image and (why := dflash_image_refusal(choice.image)):
        raise UsageError(f"--image cannot run DFlash: {why}", "drop --image: peagle deploys DFlash with AWS's vLLM "
                         "image, or pass an image with vLLM 0.20 or newer")
    if (spec.gated or jumpstart_drafter and spec.drafter_gated) and not request.accept_eula:
        what = "weights are" if spec.gated else "P-EAGLE drafter is"
        raise UsageError(f"the {entry.alias} {what} gated by a licence (EULA) in JumpStart's gated bucket",
                         "read the model licence, then pass --accept-eula")


def _tp_degree(spec: ResolvedSpec, user_env: dict[str, str], gpus: int | None) -> str | None:
    """The tensor-parallel degree peagle sets: every GPU of the instance, unless the spec or the user set one."""
    if gpus and gpus > 1 and spec.environment.get(TP_ENV, "1") == "1" and TP_ENV not in user_env:
        return str(gpus)
    return None


def _environment(spec: ResolvedSpec, rendered: str | None, user_env: dict[str, str],
                 gpus: int | None, mode: Mode) -> dict[str, str]:
    """The spec's defaults, the TP degree, then `rendered`: peagle's speculative config (with the user's keys already
    in it; DFlash: its attention backend, as `--attention-backend`), then the user's --env."""
    env = dict(spec.environment)
    tp = _tp_degree(spec, user_env, gpus)
    if tp is not None:
        env[TP_ENV] = tp
    if rendered is None:
        env.pop(ENV_VAR, None)
    else:
        env[ENV_VAR] = rendered  # after the spec defaults: the user's mode and K always win
    if mode is Mode.DFLASH:
        env[ATTENTION_ENV] = DFLASH_ATTENTION_BACKEND  # SM_VLLM_* -> --attention-backend flash_attn
    env.update({key: value for key, value in user_env.items() if key != ENV_VAR})
    check_env_count(env)
    return env


def _params(choice: _Choice, spec: ResolvedSpec) -> _Params:
    request, settings = choice.request, choice.settings
    instance_type = request.instance_type or spec.default_instance_type or choice.entry.default_instance_type
    _check_spec(choice, spec, instance_type)
    instance = instance_info(instance_type)
    env = _environment(spec, choice.speculative_config, request.env, instance.gpus if instance else None,
                       choice.settings.mode)
    if lossless.lossy_method(choice.speculative or {}):  # --allow-lossy: the bundled container runs it too
        env[lossless.ALLOW_LOSSY_ENV] = "true"
    env.update(per_request_env(choice.image or spec.image_uri, settings.enabled, request.env))
    component = request.hosting is Hosting.COMPONENT
    labels = PeagleTags(managed=True, model=choice.entry.alias, model_id=choice.model_id, mode=settings.mode.value,
                        k=settings.k, instance_type=instance_type, instance_count=request.instance_count,
                        created_at=choice.created_at, expires_at=choice.expires_at, version=__version__,
                        autoscale=None if component else request.autoscale, endpoint=choice.endpoint,
                        hosting=request.hosting.value if component else None,
                        components=[choice.name] if component else [], scale_to_zero=request.scale_to_zero,
                        copies_autoscale=request.autoscale if component else None,
                        regions_tried=request.regions_tried)
    tags = _with_given(labels, spec, request)
    endpoint_tags = tags
    if choice.endpoint != choice.name:  # a host of many components: no one component's mode, K or name
        endpoint_tags = _with_given(labels.model_copy(update={"mode": None, "k": None, "components": []}), spec,
                                    request)
    return _Params(choice=choice, spec=spec, instance_type=instance_type, instance=instance, env=env, tags=tags,
                   endpoint_tags=endpoint_tags)


def _with_given(labels: PeagleTags, spec: ResolvedSpec, request: PlanRequest) -> dict[str, str]:
    """peagle's tags, JumpStart's attribution (as the SDK tags its deployments) and the user's --tag."""
    tags = labels.to_aws()
    tags.update(spec.attribution_tags)
    tags.update(request.tags)
    check_tag_count(tags, len(request.tags), reserve=len(INTENT_KEYS))
    return tags


# one function per resource, each from the same parameters ----------------------------------------
Part = dict[str, Any]  # DeploymentPlan fields; "notes", "missing" and "unverified" add up across parts


def _container(p: _Params) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """The container (image, environment, model data) and the drafter channel, as CreateModel takes them."""
    spec = p.spec
    model_data: dict[str, Any] = spec.model_data.model_dump(exclude_none=True)
    if spec.gated:
        model_data["ModelAccessConfig"] = {"AcceptEula": bool(p.request.accept_eula)}
    mode = p.choice.settings.mode
    image = p.choice.image or (dflash_image(spec.image_uri) if mode is Mode.DFLASH else spec.image_uri)
    container: dict[str, Any] = {"Image": image, "Environment": p.env, "ModelDataSource": {"S3DataSource": model_data}}
    drafter = None
    channel = drafter_channel(mode)
    if mode is Mode.DFLASH and p.request.drafter:  # the user's own bucket: no EULA, the execution role reads it
        uri = p.request.drafter.rstrip("/") + "/"
        drafter = {"ChannelName": channel, "S3DataSource": {"S3Uri": uri, "S3DataType": "S3Prefix",
                                                            "CompressionType": "None"}}
    elif channel is not None and mode is not Mode.DFLASH and spec.drafter is not None:
        # a gated drafter carries ModelAccessConfig {AcceptEula: true} (accepted above); CreateModel needs it
        drafter = {"ChannelName": channel, "S3DataSource": spec.drafter.model_dump(exclude_none=True)}
    if drafter is not None:
        container["AdditionalModelDataSources"] = [drafter]
    return container, drafter


def _plan_model(p: _Params) -> Part:
    choice, spec = p.choice, p.spec
    container, drafter = _container(p)
    create_model: dict[str, Any] = {"ModelName": choice.name, "PrimaryContainer": container}
    missing = []
    if choice.role:
        create_model["ExecutionRoleArn"] = choice.role
    else:
        missing.append("ExecutionRoleArn: pass --role arn:aws:iam::<account>:role/<name> to deploy")
    if choice.vpc_config is not None:
        create_model["VpcConfig"] = choice.vpc_config
    create_model["EnableNetworkIsolation"] = spec.enable_network_isolation
    create_model["Tags"] = p.tag_list
    notes = []
    tp = _tp_degree(spec, p.request.env, p.instance.gpus if p.instance else None)
    if tp is not None:
        notes.append(f"{TP_ENV} set to {tp} to use every GPU of the instance")
    if p.drafter_gated:
        notes.append("the P-EAGLE drafter is in JumpStart's gated bucket: its channel carries ModelAccessConfig "
                     "AcceptEula=true (--accept-eula)")
    if choice.image:
        kept = "model data is" if choice.settings.mode is Mode.DFLASH else "model data and drafter channel are"
        notes.append(f"container image overridden with --image; JumpStart's {kept} kept")
    if choice.settings.mode is Mode.P_EAGLE and (runner_note := p_eagle_runner_note(container["Image"])):
        notes.append(runner_note)
    if choice.settings.enabled:
        notes.append(per_request_note(container["Image"], container["Environment"]))
    notes += user_speculative.notes(choice.speculative)
    unverified: dict[str, str] = {}
    if choice.settings.mode is Mode.DFLASH:
        notes += _dflash_notes(p, container["Image"])
        if not choice.image:
            unverified["image_uri"] = DFLASH_DLC_UNVERIFIED
        if drafter is None:
            missing.append(f"the DFlash drafter in S3: stage it with peagle drafter stage {choice.entry.alias} "
                           "--method dflash --to s3://BUCKET/PREFIX, or pass --drafter s3://BUCKET/PREFIX")
    if choice.vpc_config is not None and p.request.instance_count > 1 and len(choice.vpc_config["Subnets"]) < 2:
        notes.append("one --subnet for several instances: give subnets in two Availability Zones so SageMaker "
                     "can spread them")
    return {"create_model": create_model, "image_uri": container["Image"], "image_overridden": bool(choice.image),
            "drafter_channel": drafter, "model_data_uri": spec.model_data.S3Uri,
            "model_data_prepacked": spec.model_data_prepacked, "missing": missing, "notes": notes,
            "vpc_config": choice.vpc_config, "unverified": unverified}


def _dflash_notes(p: _Params, image: str) -> list[str]:
    """The image peagle chose for DFlash and why, its runner, and where the drafter comes from."""
    notes = []
    if not p.choice.image:
        why = dflash_image_refusal(p.spec.image_uri) or "JumpStart's image is kept for P-EAGLE and EAGLE-3"
        notes.append(f"DFlash runs on AWS's vLLM image for SageMaker ({image}), not JumpStart's: {why}")
    notes.append(dflash_runner_note(image))
    notes.append(f"vLLM starts with --attention-backend {DFLASH_ATTENTION_BACKEND} ({ATTENTION_ENV}): the DFlash "
                 "drafter attends to its block non-causally")
    if p.request.drafter:
        notes.append(f"the DFlash drafter channel is {p.request.drafter}"
                     + (f" ({p.request.drafter_source})" if p.request.drafter_source else ""))
    return notes


def _plan_endpoint_config(p: _Params) -> Part:
    choice, spec = p.choice, p.spec
    variant = {
        "VariantName": VARIANT_NAME,
        "ModelName": choice.name,
        "InstanceType": p.instance_type,
        "InitialInstanceCount": p.request.instance_count,
        "ContainerStartupHealthCheckTimeoutInSeconds": spec.startup_health_check_timeout_s,
        "ModelDataDownloadTimeoutInSeconds": spec.model_data_download_timeout_s,
    }
    capacity: Part = {}
    if p.pools or p.request.capacity_reservation is not None:  # InstancePools, CapacityReservationConfig
        variant, capacity = capacity_variant(variant, p.request, p.pools)
    config: dict[str, Any] = {"EndpointConfigName": choice.name, "ProductionVariants": [variant]}
    unverified = {}
    if choice.kms_key_id is not None:
        config["KmsKeyId"] = choice.kms_key_id
        unverified["create_endpoint_config.KmsKeyId"] = (
            "SageMaker refuses KmsKeyId for instance types with local instance storage (their volumes are "
            "hardware-encrypted); peagle does not know whether this type has any: if CreateEndpointConfig "
            "refuses the key, deploy without --kms-key")
    return {"create_endpoint_config": {**config, "Tags": p.tag_list}, "unverified": unverified,
            "kms_key_id": choice.kms_key_id, "startup_health_check_timeout_s": spec.startup_health_check_timeout_s,
            "model_data_download_timeout_s": spec.model_data_download_timeout_s, **capacity}


def _plan_endpoint(p: _Params) -> Part:
    name = p.choice.endpoint
    return {"create_endpoint": {"EndpointName": name, "EndpointConfigName": name, "Tags": p.endpoint_tag_list}}


def _plan_autoscaling(p: _Params) -> Part:
    policy, name = p.request.autoscale, p.choice.name
    if policy is None:
        return {"autoscaling": None}
    return {"autoscaling": policy, "register_scalable_target": policy.register_request(name, VARIANT_NAME),
            "put_scaling_policy": policy.policy_request(name, VARIANT_NAME),
            "notes": [f"autoscaling {policy.describe()}: registered with Application Auto Scaling once the endpoint "
                      "is InService and verified; peagle cleanup deregisters it before deleting the endpoint"]}


# which resources each hosting shape has, in the order the plan lists them (their notes too)
_RESOURCES: dict[Hosting, tuple[Callable[[_Params], Part], ...]] = {
    Hosting.ENDPOINT: (_plan_model, _plan_endpoint_config, _plan_endpoint, _plan_autoscaling),
    Hosting.COMPONENT: (_plan_model, plan_component.endpoint_config, _plan_endpoint, plan_component.inference_component,
                        plan_component.scaling),
}


def _plan_price(request: PlanRequest, priced: Price, max_count: int | None = None) -> Part:
    policy = request.autoscale
    price = priced.usd_per_hour
    max_price = priced.for_count(max_count or policy.max_capacity).usd_per_hour if policy else price
    notes = []
    if max_price is not None and max_price > PRICE_GUARD_USD_PER_HOUR:
        at_max = " at the autoscaling maximum" if policy else ""
        notes.append(f"about ${max_price:,.2f}/h{at_max} (estimate) is above the ${PRICE_GUARD_USD_PER_HOUR:,.0f}/h "
                     "price guard: a real deploy asks again, or needs --max-price-per-hour in a script")
    return {"price_per_hour_usd": price, "price": priced, "price_per_day_usd": priced.usd_per_day,
            "price_source": (priced.detail or priced.source) if price is not None else f"unknown: {priced.hint}",
            "max_price_per_hour_usd": max_price, "notes": notes}


def _merge(parts: list[Part]) -> Part:
    merged: Part = {"notes": [], "missing": [], "unverified": {}}
    for part in parts:
        for key, value in part.items():
            if key in ("notes", "missing"):
                merged[key] += value
            elif key == "unverified":
                merged[key].update(value)
            else:
                merged[key] = value
    return merged


def _plan_resources(p: _Params) -> Part:
    """Every resource of the plan's hosting shape, checked (pure: no AWS call)."""
    choice, spec, entry = p.choice, p.spec, p.choice.entry
    common: Part = {
        "endpoint_name": choice.endpoint, "region": p.request.region, "model": entry.alias,
        "display_name": entry.display_name, "model_id": choice.model_id, "model_version": spec.version,
        "mode": choice.settings.mode, "k": choice.settings.k, "instance_type": p.instance_type,
        "instance_count": p.request.instance_count, "gpus_per_instance": p.instance.gpus if p.instance else None,
        "speculative_config": choice.speculative_config, "tags": p.tags, "created_at": choice.created_at,
        "expires_at": choice.expires_at, "resolution_source": spec.source, "resolution_detail": spec.source_detail,
        "hosting": p.request.hosting,
        "unverified": {**{f"catalog.{k}": v for k, v in entry.unverified.items()},
                       **{f"catalog.dflash.{k}": v for k, v in (entry.dflash.unverified.items() if entry.dflash
                                                                 and choice.settings.mode is Mode.DFLASH else ())},
                       **{f"spec.{k}": v for k, v in spec.unverified.items()}},
    }
    return _merge([common, *(plan(p) for plan in _RESOURCES[p.request.hosting]), _plan_acceptance(p)])


def _plan_acceptance(p: _Params) -> Part:
    """The acceptance alarm, on the log group the model's container writes to (acceptance_alarm.py)."""
    owner = p.choice.name
    group = (component_log_group if p.request.hosting is Hosting.COMPONENT else endpoint_log_group)(owner)
    alarm, notes = plan_alarm(p.request.acceptance, owner=owner, log_group=group, k=p.choice.settings.k,
                              mode=p.choice.settings.mode.value, tags=p.tags,
                              model=(p.choice.entry.alias, p.choice.model_id))
    return {"acceptance_alarm": alarm, "notes": notes}


def _plan_pool(choice: _Choice, facts: FactSource, instance_type: str) -> tuple[Pool, _Params | None,
                                                                                 PeagleError | None]:
    """One listed type planned as a deploy of that type alone, then judged on its fit, price and quota (params:
    None where the request cannot be planned for it; the error when the request refused it)."""
    request = choice.request.model_copy(update={"instance_type": instance_type, "instance_pools": []})
    pool = new_pool(instance_type)
    try:
        spec = facts.spec(choice.model_id, region=request.region, instance_type=instance_type,
                          version=request.model_version, offline=request.offline)
        if instance_type not in spec.supported_instance_types:
            pool.left_out = NO_IMAGE
            return pool, None, None
        params = _params(replace(choice, request=request), spec)
    except UsageError as exc:  # the spec cannot be planned for this type (or for any: said once if all refuse)
        pool.left_out = exc.one_line()
        return pool, None, exc
    price = facts.price(instance_type, request.region, request.instance_count, offline=request.offline)
    judge(pool, spec, tensor_parallel=params.env.get(TP_ENV), price=price,
          quota=facts.quota(instance_type, request.region), request=request)
    return pool, params, None


def _plan_pools(choice: _Choice, facts: FactSource) -> tuple[_Params, Part, Price]:
    """The main params (the first type that can serve, with every kept pool), the plan's pool fields and the
    price the plan is held to (plan_pools.py decides; the pools' own models are planned here)."""
    types = list(choice.request.instance_pools)
    evaluated = [_plan_pool(choice, facts, t) for t in types]
    pools = [pool for pool, _, _ in evaluated]
    kept = [(pool, params) for pool, params, _ in evaluated if pool.left_out is None and params is not None]
    if not kept:
        raise nothing_left(types, pools, [error for _, _, error in evaluated])
    main = kept[0][1]
    main_container = _container(main)[0]
    models = []
    for priority, (pool, params) in enumerate(kept, start=1):
        keep(pool, priority, choice.name, main_container, _container(params)[0])
        if pool.own_model:
            models.append({**_plan_model(params)["create_model"], "ModelName": pool.model_name})
    kept_pools = [pool for pool, _ in kept]
    tags = {**main.tags, **PeagleTags(instance_type=tag_value([p.instance_type for p in kept_pools])).to_aws()}
    endpoint_tags = tags if main.endpoint_tags == main.tags else main.endpoint_tags  # a host's stay the host's
    main = replace(main, tags=tags, endpoint_tags=endpoint_tags, pools=tuple(kept_pools))
    for model in models:
        model["Tags"] = main.tag_list
    top, price_notes = pools_price(kept_pools)
    part: Part = {"pools": pools, "create_pool_models": models,
                  "notes": pool_notes(pools, choice.request) + price_notes}
    return main, part, top


def build_plan(request: PlanRequest, *, resolver: Resolver | None = None, now: datetime | None = None,
               price_lookup: PriceLookup | None = None, profile: str | None = None,
               facts: FactSource | None = None) -> DeploymentPlan:
    """Check the request, resolve its spec, plan every resource, then read the price (`facts`: one FactSource
    for every plan of a command, else one for this plan from `resolver`, `price_lookup` and `profile`)."""
    facts = facts or FactSource(resolver=resolver, price_lookup=price_lookup, profile=profile)
    choice = _choose(request, (now or datetime.now(UTC)).replace(microsecond=0))
    if request.instance_pools:  # each pool planned from its own spec, price and quota (plan_pools.py)
        params, pooled, priced = _plan_pools(choice, facts)
        return DeploymentPlan(**_merge([_plan_resources(params), _plan_price(request, priced), pooled]))
    spec = facts.spec(choice.model_id, region=request.region, instance_type=request.instance_type,
                      version=request.model_version, offline=request.offline)
    params = _params(choice, spec)
    resources = _plan_resources(params)  # every check has run: a refused request reads no price
    priced = facts.price(params.instance_type, request.region, resources["instance_count"], offline=request.offline)
    parts = [resources, _plan_price(request, priced, resources.get("max_instance_count"))]
    if request.hosting is Hosting.COMPONENT:
        parts.append(plan_component.price(resources, priced))
    resources.pop("max_instance_count", None)
    resources.pop("update_room_instances", None)
    return DeploymentPlan(**_merge(parts))
