"""The only module that touches the SageMaker Python SDK (sagemaker-core's JumpStart machinery).

`resolve()` reads a model's JumpStart spec through the SDK's spec accessor and cache, selects the
`lmi-optimized` inference config (the one with the P-EAGLE drafter) and asks sagemaker-core's own public
retrieval functions what JumpStart would deploy for that config, region and instance type:
`image_uris.retrieve` (the container), `model_uris.retrieve(model_scope="inference")` (the prepacked
artifact whenever the spec has one, as JumpStart deploys it), `environment_variables.retrieve_default(
include_aws_sdk_env_vars=True, instance_type=...)` (spec defaults plus the instance variant's variables such
as TENSOR_PARALLEL_DEGREE) and the SDK's attribution tags. The drafter channel is built the way the SDK's
model factory builds it (which needs sagemaker-serve, so it is not imported): the spec's speculative-decoding
data source, its bucket from `get_draft_model_content_bucket`, SDK-only fields (HostingEulaKey) dropped and
`ModelAccessConfig: {AcceptEula: true}` added when the drafter is gated.

Live, the SDK reads `models_manifest.json` and the spec from bucket `jumpstart-cache-prod-<region>` with
an S3 client from peagle's AWS seam (so AWS_ENDPOINT_URL and an emulator work). When it cannot
(no credentials, no network, --offline), the same SDK code reads the specs peagle ships in
templates/jumpstart/ through its local-override mode, and the result says so.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, NamedTuple

from .errors import UsageError
from .resources import templates_dir
from .spec import ResolvedSpec, S3DataSource

P_EAGLE_CONFIG = "lmi-optimized"
MANIFEST_ENV = "AWS_JUMPSTART_MANIFEST_LOCAL_ROOT_DIR_OVERRIDE"
SPECS_ENV = "AWS_JUMPSTART_SPECS_LOCAL_ROOT_DIR_OVERRIDE"
_LOCK = threading.Lock()  # the SDK's override switch is process-wide environment


def shipped_root() -> Any:
    return templates_dir() / "jumpstart"


def _sdk() -> Any:
    """Import the SDK pieces lazily (about 1.5 s) and quieten its logger."""
    os.environ.setdefault("DISABLE_JUMPSTART_TELEMETRY", "true")
    import logging

    from sagemaker.core.jumpstart import accessors, constants, utils

    logging.getLogger("sagemaker").setLevel(logging.ERROR)
    constants.JUMPSTART_LOGGER.setLevel(logging.ERROR)
    return accessors, constants, utils


@contextmanager
def _local_override(enabled: bool) -> Iterator[None]:
    """Point the SDK at the shipped specs (enabled) or make sure it reads S3 (not enabled)."""
    saved = {name: os.environ.get(name) for name in (MANIFEST_ENV, SPECS_ENV)}
    root = shipped_root()
    if enabled:
        os.environ[MANIFEST_ENV] = str(root / "manifest")
        os.environ[SPECS_ENV] = str(root / "specs")
    else:
        for name in saved:
            os.environ.pop(name, None)
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def _shipped_unverified(model_id: str) -> dict[str, str]:
    for path in (shipped_root() / "specs" / "community_models" / model_id).glob("specs_v*.json"):
        return json.loads(path.read_text(encoding="utf-8")).get("peagle_unverified", {})
    return {}


def _fetch_specs(model_id: str, version: str | None, region: str, s3_client: Any) -> Any:
    accessors, _, _ = _sdk()
    # a fresh cache (nothing remembered from the other source: shipped or S3), built with the client the fetch
    # uses: a bare reset_cache() builds one with a default S3 client of its own, which nothing then uses
    accessors.JumpStartModelsAccessor.reset_cache({"s3_client": s3_client} if s3_client is not None else {}, region)
    try:
        return accessors.JumpStartModelsAccessor.get_model_specs(
            region=region, model_id=model_id, version=version or "*", s3_client=s3_client)
    except KeyError:
        raise UsageError(f"JumpStart has no model {model_id!r}" + (f" version {version}" if version else "")
                         + f" in {region}", "check --model-id / --model-version (see peagle models)") from None


def _is_unreachable(exc: BaseException) -> bool:
    """Errors that mean 'S3 could not be asked', as opposed to a real answer from it."""
    from .aws import botocore_exceptions, error_code

    bx = botocore_exceptions()
    if isinstance(exc, (bx.NoCredentialsError, bx.EndpointConnectionError, bx.ConnectTimeoutError,
                        bx.ReadTimeoutError, bx.PartialCredentialsError, bx.ConnectionClosedError, bx.SSLError)):
        return True
    if isinstance(exc, bx.ClientError):
        return error_code(exc) in {"AccessDenied", "InvalidAccessKeyId", "SignatureDoesNotMatch",
                                   "ExpiredToken", "ExpiredTokenException", "NoSuchBucket", "403"}
    return False


def check_region(region: str) -> None:
    """A region JumpStart serves (its bucket holds the model's spec and artifacts), else bad input."""
    _, constants, _ = _sdk()
    if region not in constants.JUMPSTART_REGION_NAME_SET:
        common = [r for r in ("us-east-1", "us-west-2", "eu-west-1", "eu-central-1", "ap-northeast-1")
                  if r in constants.JUMPSTART_REGION_NAME_SET]
        raise UsageError(f"region {region!r} has no JumpStart bucket",
                         f"pass a --region JumpStart serves, e.g. {', '.join(common)} "
                         f"({len(constants.JUMPSTART_REGION_NAME_SET)} regions)")


def resolve(model_id: str, *, region: str, instance_type: str | None = None, version: str | None = None,
            inference_config: str = P_EAGLE_CONFIG, offline: bool = False, allow_shipped: bool = True,
            profile: str | None = None) -> ResolvedSpec:
    """The model's P-EAGLE deployment facts for one region and instance type."""
    _, constants, utils = _sdk()
    check_region(region)
    with _LOCK:
        detail = f"JumpStart bucket {utils.get_jumpstart_content_bucket(region)}"
        if not offline:
            from .aws import AwsSession

            session = AwsSession(region, profile, max_attempts=2, connect_timeout=3, read_timeout=20)
            if allow_shipped and session.boto3_session.get_credentials() is None:  # decide before any request
                detail = "no AWS credentials found: using the specs peagle ships"
            else:
                try:
                    with _local_override(False):
                        s3 = session.client("s3")
                        specs = _fetch_specs(model_id, version, region, s3)
                        return _to_resolved(specs, model_id, region, instance_type, inference_config,
                                            "sdk", detail, s3)
                except UsageError:
                    raise
                except Exception as exc:  # noqa: BLE001 - narrowed by _is_unreachable
                    if not (allow_shipped and _is_unreachable(exc)):
                        raise
                    detail = (f"the JumpStart bucket could not be read ({type(exc).__name__}); "
                              "using the specs peagle ships")
        else:
            detail = "offline (--offline, or no AWS credentials): using the specs peagle ships"
        with _local_override(True):
            specs = _fetch_specs(model_id, version, region, None)
            return _to_resolved(specs, model_id, region, instance_type, inference_config, "shipped", detail, None)


class _SdkSession:
    """What the SDK's retrieval functions read from their `sagemaker_session`: the S3 client for specs.

    A full `sagemaker.core.helper.session_helper.Session` would build five service clients and read the
    SageMaker config files for nothing; in local-override mode the client is None and never used.
    """

    def __init__(self, s3_client: Any, region: str):
        self.s3_client = s3_client
        self.boto_region_name = region


class _Retrieved(NamedTuple):
    image: str
    model_uri: str
    environment: dict[str, str]
    deploy_kwargs: dict[str, Any]  # container_startup_health_check_timeout, model_data_download_timeout
    init_kwargs: dict[str, Any]  # enable_network_isolation


def _retrieve(model_id: str, version: str, region: str, instance: str, inference_config: str,
              s3_client: Any) -> _Retrieved:
    """What sagemaker-core's retrieval functions say JumpStart deploys for this config and instance.

    image_uris / model_uris / environment_variables are the SDK's public functions; the deploy and init
    kwargs come from `sagemaker.core.jumpstart.artifacts`, the functions the SDK's own model factory calls.
    """
    from sagemaker.core import environment_variables, image_uris, model_uris
    from sagemaker.core.jumpstart import artifacts
    from sagemaker.core.jumpstart.exceptions import DeprecatedJumpStartModelError, VulnerableJumpStartModelError

    common = dict(region=region, model_id=model_id, model_version=version, instance_type=instance,
                  config_name=inference_config, sagemaker_session=_SdkSession(s3_client, region))
    try:
        image = image_uris.retrieve(framework=None, image_scope="inference", **common)
        model_uri = model_uris.retrieve(model_scope="inference", **common)
        env = environment_variables.retrieve_default(include_aws_sdk_env_vars=True, **common)
        deploy_kwargs = artifacts._retrieve_model_deploy_kwargs(**common)
        init_kwargs = artifacts._retrieve_model_init_kwargs(
            **{k: v for k, v in common.items() if k != "instance_type"})
    except (DeprecatedJumpStartModelError, VulnerableJumpStartModelError) as exc:
        raise UsageError(f"JumpStart refuses {model_id} v{version}: {' '.join(str(exc).split())[:200]}",
                         "pass another --model-version") from None
    except ValueError as exc:  # the SDK's "No inference ECR configuration found for ..."
        raise UsageError(f"the {model_id} spec has no container image for {instance} in {region}",
                         "choose another --instance-type or --region") from exc
    return _Retrieved(image, model_uri, env, deploy_kwargs, init_kwargs)


def _drafter(specs: Any, region: str, utils: Any) -> tuple[S3DataSource | None, bool]:
    """The `eagle` channel as the SDK's model factory builds it, and whether it is gated.

    Gated: the spec entry carries a `hosting_eula_key` (the SDK then requires accept_eula for that channel)
    or its provider classification puts it in the gated bucket; either way CreateModel needs
    ModelAccessConfig.AcceptEula on that data source. HostingEulaKey itself is SDK-only and never copied.
    """
    import copy

    for entry in specs.get_speculative_decoding_s3_data_sources() or []:
        if entry.channel_name != "eagle":
            continue
        entry = copy.deepcopy(entry)  # set_bucket mutates, and the SDK caches the spec object
        bucket = utils.get_draft_model_content_bucket(provider=entry.provider, region=region)
        entry.s3_data_source.set_bucket(bucket)
        s3 = entry.s3_data_source
        gated = bool(entry.hosting_eula_key) or bucket == utils.get_jumpstart_gated_content_bucket(region)
        return S3DataSource(S3Uri=s3.s3_uri, S3DataType=_s3_type(s3.s3_data_type),
                            CompressionType=_compression(s3.compression_type),
                            ModelAccessConfig={"AcceptEula": True} if gated else None), gated
    return None, False


def _attribution_tags(model_id: str, version: str, inference_config: str) -> dict[str, str]:
    """The tags the SDK's JumpStart deploy puts on its resources (model id, version, inference config)."""
    from sagemaker.core.jumpstart.enums import JumpStartScriptScope
    from sagemaker.core.jumpstart.utils import add_jumpstart_model_info_tags

    tags = add_jumpstart_model_info_tags(None, model_id, version, config_name=inference_config,
                                         scope=JumpStartScriptScope.INFERENCE)
    return {tag["Key"]: tag["Value"] for tag in tags or []}


def _to_resolved(specs: Any, model_id: str, region: str, instance_type: str | None, inference_config: str,
                 source: str, detail: str, s3_client: Any) -> ResolvedSpec:
    _, _, utils = _sdk()
    if inference_config not in (specs.inference_configs.configs if specs.inference_configs else {}):
        raise UsageError(f"the {model_id} spec has no {inference_config!r} inference config",
                         "this model version has no P-EAGLE configuration; try another --model-version")
    specs.set_config(inference_config)
    instance = instance_type or specs.default_inference_instance_type
    got = _retrieve(specs.model_id, specs.version, region, instance, inference_config, s3_client)
    specs.set_config(inference_config)  # the SDK calls above re-apply it on the cached object; keep it explicit
    model_data = S3DataSource(S3Uri=got.model_uri,
                              S3DataType=_s3_type(getattr(specs, "hosting_artifact_s3_data_type", None)),
                              CompressionType=_compression(getattr(specs, "hosting_artifact_compression_type", None)))
    drafter, drafter_gated = _drafter(specs, region, utils)
    return ResolvedSpec(
        model_id=specs.model_id,
        version=specs.version,
        region=region,
        instance_type=instance,
        inference_config=inference_config,
        image_uri=got.image,
        model_data=model_data,
        model_data_prepacked=not specs.use_inference_script_uri(),  # the SDK's own test in model_uris
        drafter=drafter,
        drafter_gated=drafter_gated,
        environment=got.environment,
        supported_instance_types=list(specs.supported_inference_instance_types or []),
        default_instance_type=specs.default_inference_instance_type or instance,
        startup_health_check_timeout_s=int(got.deploy_kwargs.get("container_startup_health_check_timeout", 3600)),
        model_data_download_timeout_s=int(got.deploy_kwargs.get("model_data_download_timeout", 3600)),
        enable_network_isolation=bool(got.init_kwargs.get("enable_network_isolation", False)),
        gated=bool(specs.hosting_eula_key) or bool(getattr(specs, "gated_bucket", False)),
        attribution_tags=_attribution_tags(specs.model_id, specs.version, inference_config),
        source=source,
        source_detail=detail,
        unverified=_shipped_unverified(model_id) if source == "shipped" else {},
    )


def _s3_type(value: str | None) -> str:
    return "S3Object" if value == "S3Object" else "S3Prefix"


def _compression(value: str | None) -> str:
    return "Gzip" if value and value.lower() == "gzip" else "None"
