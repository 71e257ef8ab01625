"""DeploymentPlan: the exact CreateModel, CreateEndpointConfig and CreateEndpoint request bodies.

Building a plan is pure (no AWS writes): `--dry-run` renders it, `lifecycle.deploy` executes the same
object. The speculative config is written into the environment AFTER the spec's defaults so a spec
default can never silently override the user's mode and K (the SDK's override trap).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from . import __version__
from .autoscale import AutoscalePolicy
from .catalog import ModelEntry, get_model
from .errors import UsageError
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
from .instances import G7E_PREFIX, instance_info, instance_table
from .pricing import Price
from .spec import ResolvedSpec
from .tags import MANAGED as MANAGED_TAG  # noqa: F401 - re-exported for older imports
from .tags import PREFIX as TAG_PREFIX  # noqa: F401
from .tags import INTENT_KEYS, PeagleTags
from .speculative import DRAFTER_CHANNEL, ENV_VAR, Mode, SpeculativeSettings, parse_k, settings_for
from .vllm_runner import p_eagle_runner_note

VARIANT_NAME = "AllTraffic"
TP_ENV = "SM_VLLM_TENSOR_PARALLEL_SIZE"

Resolver = Callable[..., ResolvedSpec]


class PlanRequest(BaseModel):
    """Everything the user chose; validated values only (the CLI parses raw strings first)."""

    model_config = ConfigDict(frozen=True)

    model: str
    model_id: str | None = None
    model_version: str | None = None
    mode: Mode = Mode.P_EAGLE
    k: int | str | None = None
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
    offline: bool = False
    autoscale: AutoscalePolicy | None = None
    # private networking and encryption (issue 15 item 4)
    subnets: list[str] = Field(default_factory=list)
    security_groups: list[str] = Field(default_factory=list)
    kms_key: str | None = None


class DeploymentPlan(BaseModel):
    model_config = ConfigDict(frozen=True)

    endpoint_name: str = Field(description="the model, endpoint config and endpoint all carry this name")
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
    # private networking and encryption (issue 15 item 4): also inside create_model / create_endpoint_config
    vpc_config: dict[str, list[str]] | None = Field(None, description="CreateModel's VpcConfig (--subnet, "
                                                                         "--security-group)")
    kms_key_id: str | None = Field(None, description="CreateEndpointConfig's KmsKeyId for the ML storage volume")


def default_name(alias: str, settings: SpeculativeSettings, now: datetime) -> str:
    mode = settings.mode.value + (f"-k{settings.k}" if settings.k else "")
    return f"peagle-{alias}-{mode}-{now:%y%m%d-%H%M%S}"


def _tag_list(tags: dict[str, str]) -> list[dict[str, str]]:
    return [{"Key": k, "Value": v} for k, v in tags.items()]


def _check_family(instance_type: str, allow_any: bool) -> None:
    if not allow_any and not instance_type.startswith(G7E_PREFIX):
        raise UsageError(f"instance type {instance_type!r} is not an ml.g7e instance",
                         f"choose one of {', '.join(instance_table().instances)} or pass --allow-any-instance")


def _check_supported(entry: ModelEntry, spec: ResolvedSpec, instance_type: str) -> None:
    if instance_type not in spec.supported_instance_types:
        supported = ", ".join(spec.supported_instance_types)
        raise UsageError(f"the {entry.alias} JumpStart spec does not support {instance_type}",
                         f"choose one of {supported}")


def _environment(spec: ResolvedSpec, settings: SpeculativeSettings, user_env: dict[str, str],
                 gpus: int | None, notes: list[str]) -> dict[str, str]:
    if ENV_VAR in user_env:
        raise UsageError(f"--env {ENV_VAR} would bypass peagle's speculative settings", "use --mode and --k instead")
    env = dict(spec.environment)
    if gpus and gpus > 1 and env.get(TP_ENV, "1") == "1" and TP_ENV not in user_env:
        env[TP_ENV] = str(gpus)
        notes.append(f"{TP_ENV} set to {gpus} to use every GPU of the instance")
    rendered = settings.render()
    if rendered is None:
        env.pop(ENV_VAR, None)
    else:
        env[ENV_VAR] = rendered  # after the spec defaults: the user's mode and K always win
    env.update(user_env)
    check_env_count(env)
    return env


PriceLookup = Callable[[str, str, int], Price]


def build_plan(request: PlanRequest, *, resolver: Resolver | None = None, now: datetime | None = None,
               price_lookup: PriceLookup | None = None, profile: str | None = None) -> DeploymentPlan:
    """Validate the request, resolve the spec and assemble the three request bodies. The price is
    `pricing.instance_price` (the Pricing API unless offline) unless `price_lookup(type, region, count)`."""
    now = (now or datetime.now(UTC)).replace(microsecond=0)
    entry = get_model(request.model)
    settings = settings_for(request.mode, parse_k(request.k, max_k=entry.max_k, model=entry.alias),
                            default_k=entry.default_k)
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
    if request.instance_type:
        _check_family(request.instance_type, request.allow_any_instance)  # before any AWS call

    if resolver is None:
        from .jumpstart import resolve as resolver
    model_id = request.model_id or entry.model_id
    spec = resolver(model_id, region=request.region, instance_type=request.instance_type,
                    version=request.model_version, offline=request.offline)
    instance_type = request.instance_type or spec.default_instance_type or entry.default_instance_type
    _check_family(instance_type, request.allow_any_instance)
    _check_supported(entry, spec, instance_type)
    if settings.enabled and spec.drafter is None:
        raise UsageError(f"the {entry.alias} JumpStart spec has no P-EAGLE drafter channel",
                         "deploy with --mode off, or pass a --model-id whose spec has one")
    drafter_gated = settings.enabled and spec.drafter_gated
    if (spec.gated or drafter_gated) and not request.accept_eula:
        what = "weights are" if spec.gated else "P-EAGLE drafter is"
        raise UsageError(f"the {entry.alias} {what} gated by a licence (EULA) in JumpStart's gated bucket",
                         "read the model licence, then pass --accept-eula")

    notes: list[str] = []
    info = instance_info(instance_type)
    gpus = info.gpus if info else None
    env = _environment(spec, settings, request.env, gpus, notes)

    expires_at = now + request.ttl if request.ttl else None
    tags = PeagleTags(managed=True, model=entry.alias, model_id=model_id, mode=settings.mode.value, k=settings.k,
                      instance_type=instance_type, instance_count=request.instance_count, created_at=now,
                      expires_at=expires_at, version=__version__, autoscale=policy, endpoint=name).to_aws()
    tags.update(spec.attribution_tags)  # JumpStart's own attribution, as the SDK tags its deployments
    tags.update(request.tags)
    check_tag_count(tags, len(request.tags), reserve=len(INTENT_KEYS))
    tag_list = _tag_list(tags)

    model_data: dict[str, Any] = spec.model_data.model_dump(exclude_none=True)
    if spec.gated:
        model_data["ModelAccessConfig"] = {"AcceptEula": bool(request.accept_eula)}
    container: dict[str, Any] = {
        "Image": image or spec.image_uri,
        "Environment": env,
        "ModelDataSource": {"S3DataSource": model_data},
    }
    drafter = None
    if settings.enabled and spec.drafter is not None:
        # a gated drafter carries ModelAccessConfig {AcceptEula: true} (accepted above); CreateModel needs it
        drafter = {"ChannelName": DRAFTER_CHANNEL, "S3DataSource": spec.drafter.model_dump(exclude_none=True)}
        container["AdditionalModelDataSources"] = [drafter]
    create_model: dict[str, Any] = {"ModelName": name, "PrimaryContainer": container}
    missing = []
    if role:
        create_model["ExecutionRoleArn"] = role
    else:
        missing.append("ExecutionRoleArn: pass --role arn:aws:iam::<account>:role/<name> to deploy")
    if vpc_config is not None:
        create_model["VpcConfig"] = vpc_config
    create_model["EnableNetworkIsolation"] = spec.enable_network_isolation
    create_model["Tags"] = tag_list

    variant = {
        "VariantName": VARIANT_NAME,
        "ModelName": name,
        "InstanceType": instance_type,
        "InitialInstanceCount": request.instance_count,
        "ContainerStartupHealthCheckTimeoutInSeconds": spec.startup_health_check_timeout_s,
        "ModelDataDownloadTimeoutInSeconds": spec.model_data_download_timeout_s,
    }
    unverified = {f"catalog.{k}": v for k, v in entry.unverified.items()}
    unverified.update({f"spec.{k}": v for k, v in spec.unverified.items()})
    if drafter_gated:
        notes.append("the P-EAGLE drafter is in JumpStart's gated bucket: its channel carries ModelAccessConfig "
                     "AcceptEula=true (--accept-eula)")
    if image:
        notes.append("container image overridden with --image; JumpStart's model data and drafter channel are kept")
    if settings.mode is Mode.P_EAGLE and (runner_note := p_eagle_runner_note(container["Image"])):
        notes.append(runner_note)
    create_endpoint_config: dict[str, Any] = {"EndpointConfigName": name, "ProductionVariants": [variant]}
    if kms_key_id is not None:
        create_endpoint_config["KmsKeyId"] = kms_key_id
        unverified["create_endpoint_config.KmsKeyId"] = (
            "SageMaker refuses KmsKeyId for instance types with local instance storage (their volumes are "
            "hardware-encrypted); peagle does not know whether this type has any: if CreateEndpointConfig "
            "refuses the key, deploy without --kms-key")
    if vpc_config is not None and request.instance_count > 1 and len(vpc_config["Subnets"]) < 2:
        notes.append("one --subnet for several instances: give subnets in two Availability Zones so SageMaker "
                     "can spread them")
    if price_lookup is None:
        from .pricing import instance_price

        def price_lookup(kind: str, region: str, count: int) -> Price:
            return instance_price(kind, region, count=count, profile=profile, offline=request.offline)

    priced = price_lookup(instance_type, request.region, request.instance_count)
    price = priced.usd_per_hour
    max_price = priced.for_count(policy.max_capacity).usd_per_hour if policy else price
    if policy is not None:
        notes.append(f"autoscaling {policy.describe()}: registered with Application Auto Scaling once the endpoint "
                     "is InService and verified; peagle cleanup deregisters it before deleting the endpoint")
    if max_price is not None and max_price > PRICE_GUARD_USD_PER_HOUR:
        at_max = " at the autoscaling maximum" if policy else ""
        notes.append(f"about ${max_price:,.2f}/h{at_max} (estimate) is above the ${PRICE_GUARD_USD_PER_HOUR:,.0f}/h price guard: "
                     "a real deploy asks again, or needs --max-price-per-hour in a script")
    return DeploymentPlan(
        endpoint_name=name,
        region=request.region,
        model=entry.alias,
        display_name=entry.display_name,
        model_id=model_id,
        model_version=spec.version,
        mode=settings.mode,
        k=settings.k,
        instance_type=instance_type,
        instance_count=request.instance_count,
        gpus_per_instance=gpus,
        price_per_hour_usd=price,
        price_source=(priced.detail or priced.source) if price is not None else f"unknown: {priced.hint}",
        price_per_day_usd=priced.usd_per_day,
        price=priced,
        image_uri=container["Image"],
        image_overridden=bool(image),
        speculative_config=settings.render(),
        model_data_uri=spec.model_data.S3Uri,
        model_data_prepacked=spec.model_data_prepacked,
        drafter_channel=drafter,
        tags=tags,
        created_at=now,
        expires_at=expires_at,
        startup_health_check_timeout_s=spec.startup_health_check_timeout_s,
        model_data_download_timeout_s=spec.model_data_download_timeout_s,
        resolution_source=spec.source,
        resolution_detail=spec.source_detail,
        unverified=unverified,
        missing=missing,
        notes=notes,
        create_model=create_model,
        create_endpoint_config={**create_endpoint_config, "Tags": tag_list},
        create_endpoint={"EndpointName": name, "EndpointConfigName": name, "Tags": tag_list},
        autoscaling=policy,
        max_price_per_hour_usd=max_price,
        register_scalable_target=policy.register_request(name, VARIANT_NAME) if policy else None,
        put_scaling_policy=policy.policy_request(name, VARIANT_NAME) if policy else None,
        vpc_config=vpc_config,
        kms_key_id=kms_key_id,
    )
