"""What a JumpStart spec resolves to, for one model, region and instance type.

`jumpstart.resolve()` produces it (through the SageMaker SDK, or the specs peagle ships when the
SDK cannot reach S3); `plan.build_plan()` consumes it. Field values follow the CreateModel API
shapes so the plan can copy them without translation.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field


class S3DataSource(BaseModel):
    """The `S3DataSource` of a ModelDataSource or an AdditionalModelDataSource (API field names)."""

    model_config = ConfigDict(frozen=True, populate_by_name=True)

    S3Uri: str
    S3DataType: Literal["S3Prefix", "S3Object"] = "S3Prefix"
    CompressionType: Literal["None", "Gzip"] = "None"
    ModelAccessConfig: dict[str, bool] | None = None


class ResolvedSpec(BaseModel):
    model_config = ConfigDict(frozen=True)

    model_id: str
    version: str
    region: str
    instance_type: str
    inference_config: str = Field(description="the JumpStart inference config used (lmi-optimized for P-EAGLE)")
    image_uri: str
    model_data: S3DataSource = Field(description="sagemaker.core.model_uris.retrieve(model_scope='inference')")
    model_data_prepacked: bool = Field(False, description="the prepacked artifact (hosting_prepacked_artifact_key)")
    drafter: S3DataSource | None = Field(description="the `eagle` channel's data source; None if the spec has none")
    drafter_gated: bool = Field(False, description="the drafter needs EULA acceptance (gated bucket or EULA key)")
    drafter_channel: str = "eagle"
    environment: dict[str, str] = Field(description="environment_variables.retrieve_default(include_aws_sdk_env_vars"
                                              "=True, instance_type=...): spec defaults + instance variant")
    supported_instance_types: list[str]
    default_instance_type: str
    startup_health_check_timeout_s: int = 3600
    model_data_download_timeout_s: int = 3600
    enable_network_isolation: bool = True
    gated: bool = False
    attribution_tags: dict[str, str] = Field(default_factory=dict,
                                             description="the SDK's JumpStart tags (model id, version, config)")
    source: Literal["sdk", "shipped"] = Field(description="sdk: resolved live; shipped: the specs bundled with peagle")
    source_detail: str = ""
    unverified: dict[str, str] = Field(default_factory=dict,
                                       description="spec field -> why the shipped value could not be verified")
