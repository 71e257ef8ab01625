"""The only module that touches the SageMaker Python SDK (sagemaker-core's JumpStart machinery).

`resolve()` reads a model's JumpStart spec through the SDK's spec accessor and cache, selects the
`lmi-optimized` inference config (the one with the P-EAGLE drafter) and turns it into a ResolvedSpec.
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
from typing import Any

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


def supported_regions() -> list[str]:
    _, constants, _ = _sdk()
    return sorted(constants.JUMPSTART_REGION_NAME_SET)


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
    accessors.JumpStartModelsAccessor.reset_cache()
    try:
        return accessors.JumpStartModelsAccessor.get_model_specs(
            region=region, model_id=model_id, version=version or "*", s3_client=s3_client)
    except KeyError as exc:
        raise UsageError(f"JumpStart has no model {model_id!r}" + (f" version {version}" if version else "")
                         + f" in {region}", "check --model-id / --model-version (see peagle models)") from None


def _is_unreachable(exc: BaseException) -> bool:
    """Errors that mean 'S3 could not be asked', as opposed to a real answer from it."""
    import botocore.exceptions

    if isinstance(exc, (botocore.exceptions.NoCredentialsError, botocore.exceptions.EndpointConnectionError,
                        botocore.exceptions.ConnectTimeoutError, botocore.exceptions.ReadTimeoutError,
                        botocore.exceptions.PartialCredentialsError, botocore.exceptions.ConnectionClosedError,
                        botocore.exceptions.SSLError)):
        return True
    if isinstance(exc, botocore.exceptions.ClientError):
        from .aws import error_code

        return error_code(exc) in {"AccessDenied", "InvalidAccessKeyId", "SignatureDoesNotMatch",
                                   "ExpiredToken", "ExpiredTokenException", "NoSuchBucket", "403"}
    return False


def resolve(model_id: str, *, region: str, instance_type: str | None = None, version: str | None = None,
            inference_config: str = P_EAGLE_CONFIG, offline: bool = False, allow_shipped: bool = True,
            profile: str | None = None) -> ResolvedSpec:
    """The model's P-EAGLE deployment facts for one region and instance type."""
    _, constants, utils = _sdk()
    if region not in constants.JUMPSTART_REGION_NAME_SET:
        common = [r for r in ("us-east-1", "us-west-2", "eu-west-1", "eu-central-1", "ap-northeast-1")
                  if r in constants.JUMPSTART_REGION_NAME_SET]
        raise UsageError(f"region {region!r} has no JumpStart bucket",
                         f"pass a --region JumpStart serves, e.g. {', '.join(common)} "
                         f"({len(constants.JUMPSTART_REGION_NAME_SET)} regions)")
    with _LOCK:
        specs, source, detail = None, "sdk", f"JumpStart bucket {utils.get_jumpstart_content_bucket(region)}"
        if not offline:
            from .aws import AwsSession

            session = AwsSession(region, profile, max_attempts=2, connect_timeout=3, read_timeout=20)
            if allow_shipped and session.boto3_session.get_credentials() is None:  # decide before any request
                detail = "no AWS credentials found: using the specs peagle ships"
            else:
                try:
                    with _local_override(False):
                        specs = _fetch_specs(model_id, version, region, session.client("s3"))
                except UsageError:
                    raise
                except Exception as exc:  # noqa: BLE001 - narrowed by _is_unreachable
                    if not (allow_shipped and _is_unreachable(exc)):
                        raise
                    detail = (f"the JumpStart bucket could not be read ({type(exc).__name__}); "
                              "using the specs peagle ships")
        else:
            detail = "offline (--offline, or no AWS credentials): using the specs peagle ships"
        if specs is None:
            source = "shipped"
            with _local_override(True):
                specs = _fetch_specs(model_id, version, region, None)
        return _to_resolved(specs, model_id, region, instance_type, inference_config, source, detail, utils)


def _to_resolved(specs: Any, model_id: str, region: str, instance_type: str | None, inference_config: str,
                 source: str, detail: str, utils: Any) -> ResolvedSpec:
    if inference_config not in (specs.inference_configs.configs if specs.inference_configs else {}):
        raise UsageError(f"the {model_id} spec has no {inference_config!r} inference config",
                         "this model version has no P-EAGLE configuration; try another --model-version")
    specs.set_config(inference_config)
    instance = instance_type or specs.default_inference_instance_type
    variants = specs.hosting_instance_type_variants
    image = variants.get_image_uri(instance, region) if variants else None
    if not image:
        raise UsageError(f"the {model_id} spec has no container image for {instance} in {region}",
                         "choose another --instance-type or --region")
    env = {e.name: str(e.default) for e in specs.inference_environment_variables if e.default is not None}
    gated = bool(specs.hosting_eula_key) or bool(getattr(specs, "gated_bucket", False))
    bucket = utils.get_jumpstart_gated_content_bucket(region) if getattr(specs, "gated_bucket", False) \
        else utils.get_jumpstart_content_bucket(region)
    model_data = S3DataSource(S3Uri=f"s3://{bucket}/{specs.hosting_artifact_key}",
                              S3DataType=_s3_type(getattr(specs, "hosting_artifact_s3_data_type", None)),
                              CompressionType=_compression(getattr(specs, "hosting_artifact_compression_type", None)))
    drafter = None
    for source_entry in specs.get_speculative_decoding_s3_data_sources() or []:
        if source_entry.channel_name != "eagle":
            continue
        provider = getattr(source_entry, "provider", None) or {}
        draft_bucket = utils.get_draft_model_content_bucket(provider, region)
        s3 = source_entry.s3_data_source  # HostingEulaKey and similar SDK-only fields are not copied
        drafter = S3DataSource(S3Uri=f"s3://{draft_bucket}/{s3.s3_uri}", S3DataType=_s3_type(s3.s3_data_type),
                               CompressionType=_compression(s3.compression_type))
    deploy_kwargs = specs.deploy_kwargs or {}
    return ResolvedSpec(
        model_id=specs.model_id,
        version=specs.version,
        region=region,
        instance_type=instance,
        inference_config=inference_config,
        image_uri=image,
        model_data=model_data,
        drafter=drafter,
        environment=env,
        supported_instance_types=list(specs.supported_inference_instance_types or []),
        default_instance_type=specs.default_inference_instance_type or instance,
        startup_health_check_timeout_s=int(deploy_kwargs.get("container_startup_health_check_timeout", 3600)),
        model_data_download_timeout_s=int(deploy_kwargs.get("model_data_download_timeout", 3600)),
        enable_network_isolation=bool(specs.inference_enable_network_isolation),
        gated=gated,
        source=source,
        source_detail=detail,
        unverified=_shipped_unverified(model_id) if source == "shipped" else {},
    )


def _s3_type(value: str | None) -> str:
    return "S3Object" if value == "S3Object" else "S3Prefix"


def _compression(value: str | None) -> str:
    return "Gzip" if value and value.lower() == "gzip" else "None"
