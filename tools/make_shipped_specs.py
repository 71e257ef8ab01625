"""Regenerate templates/jumpstart/ (the JumpStart specs peagle ships for offline resolution).

    python tools/make_shipped_specs.py PATH/TO/openai-reasoning-gpt-oss-20b/specs_v3.38.0.json

GPT-OSS-20B is the real published spec, trimmed of its training recipes. The other three are built on
its shape: every value that could not be checked against a real spec is listed, with the reason, in the
spec's top-level `peagle_unverified` object, and peagle reports those fields as unverified.
"""

from __future__ import annotations

import copy
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from peagle_deploy.instances import G7E_PREFIX, instance_table  # noqa: E402 - the checkout's own package

OUT = ROOT / "templates" / "jumpstart"
INSTANCES = instance_table().instances  # templates/instances.toml: the one list of ml.g7e sizes and their GPUs
G7E = [name for name in INSTANCES if name.startswith(G7E_PREFIX)]
NOT_SEEN = "the real JumpStart spec of this model was not available; value derived from the gpt-oss-20b spec's shape"

DERIVED = {
    "openai-reasoning-gpt-oss-120b": {
        "huggingface_id": "openai/gpt-oss-120b",
        "artifact": "openai-reasoning/openai-reasoning-gpt-oss-120b/artifacts/inference/v1.0.0/",
        "drafter": "lmi-eagle-heads/models/gpt-oss-120b-p-eagle/",
        "provider": "openai", "license": "Apache 2.0", "gated": False, "size": "70B-200B",
        "max_model_len": "8192",
    },
    "huggingface-llm-qwen3-coder-30b-a3b-instruct": {
        "huggingface_id": "Qwen/Qwen3-Coder-30B-A3B-Instruct",
        "artifact": "huggingface-llm/huggingface-llm-qwen3-coder-30b-a3b-instruct/artifacts/inference/v1.0.0/",
        "drafter": "lmi-eagle-heads/models/qwen3-coder-30b-a3b-instruct-p-eagle/",
        "provider": "huggingface", "license": "Apache 2.0", "gated": False, "size": "10B-70B",
        "max_model_len": "8192",
    },
    "huggingface-vlm-gemma-4-31b-it": {
        "huggingface_id": "google/gemma-4-31b-it",
        "artifact": "huggingface-vlm/huggingface-vlm-gemma-4-31b-it/artifacts/inference/v1.0.0/",
        "drafter": "lmi-eagle-heads/models/gemma-4-31b-it-p-eagle/",
        "provider": "google", "license": "Gemma Terms of Use", "gated": True, "size": "10B-70B",
        "max_model_len": "8192",
    },
}


def trim(spec: dict) -> dict:
    spec = copy.deepcopy(spec)
    spec.pop("recipe_collection", None)
    return spec


def set_env(env_list: list[dict], name: str, value: str) -> None:
    for entry in env_list:
        if entry["name"] == name:
            entry["default"] = value


def derive(base: dict, model_id: str, facts: dict) -> dict:
    spec = trim(base)
    spec.update({
        "model_id": model_id, "version": "1.0.0", "huggingface_id": facts["huggingface_id"],
        "url": f"https://huggingface.co/{facts['huggingface_id']}", "provider": facts["provider"],
        "license": facts["license"], "model_size": facts["size"], "resource_name_base": model_id,
        "hosting_artifact_key": facts["artifact"],
        "hosting_prepacked_artifact_key": facts["artifact"].replace("/inference/", "/inference-prepack/"),
        "supported_inference_instance_types": G7E + ["ml.p5.48xlarge"],
        "default_inference_instance_type": "ml.g7e.2xlarge",
    })
    unverified = {
        "version": NOT_SEEN,
        "hosting_artifact_key": NOT_SEEN,
        "hosting_prepacked_artifact_key": NOT_SEEN,  # the model data JumpStart (and peagle) deploys
        "supported_inference_instance_types": NOT_SEEN,
        "inference_config_components.lmi-optimized.hosting_additional_data_sources": NOT_SEEN,
        # the per-instance variables (TENSOR_PARALLEL_DEGREE) reach the plan through the SDK's
        # environment_variables.retrieve_default(instance_type=...): guessed from the GPU count
        "inference_config_components.lmi-optimized.hosting_instance_type_variants": NOT_SEEN,
    }
    if facts["gated"]:
        spec["gated_bucket"] = True
        spec["hosting_eula_key"] = f"fmhMetadata/eula/{model_id.split('-')[2]}Eula.txt"
        spec["model_access"] = "Gated"
        unverified["hosting_eula_key"] = NOT_SEEN
    for name, component in spec["inference_config_components"].items():
        component["hosting_artifact_key"] = facts["artifact"]
        component["hosting_prepacked_artifact_key"] = spec["hosting_prepacked_artifact_key"]
        component["supported_inference_instance_types"] = spec["supported_inference_instance_types"]
        for entry in component.get("hosting_additional_data_sources", {}).get("speculative_decoding", []):
            entry["s3_data_source"]["s3_uri"] = facts["drafter"]
        variants = component.get("hosting_instance_type_variants", {}).get("variants", {})
        for instance in G7E:
            gpus = INSTANCES[instance].gpus
            variants[instance] = {"properties": {"environment_variables": {"TENSOR_PARALLEL_DEGREE": str(gpus)},
                                                 "resource_requirements": {"num_accelerators": gpus}}}
        set_env(component.get("inference_environment_variables", []), "SM_VLLM_MAX_MODEL_LEN", facts["max_model_len"])
    spec["peagle_unverified"] = unverified
    return spec


def main(real_spec_path: str) -> None:
    base = json.loads(Path(real_spec_path).read_text())
    specs = {base["model_id"]: trim(base)}
    specs[base["model_id"]]["peagle_unverified"] = {}
    for model_id, facts in DERIVED.items():
        specs[model_id] = derive(base, model_id, facts)
    manifest = []
    for model_id, spec in specs.items():
        key = f"community_models/{model_id}/specs_v{spec['version']}.json"
        path = OUT / "specs" / key
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(spec, indent=1, sort_keys=True) + "\n")
        manifest.append({"model_id": model_id, "version": spec["version"], "min_version": spec["min_sdk_version"],
                         "spec_key": key, "deprecated": False, "provider": spec["provider"],
                         "search_keywords": ["Text Generation"]})
    (OUT / "manifest").mkdir(parents=True, exist_ok=True)
    (OUT / "manifest" / "models_manifest.json").write_text(json.dumps(manifest, indent=1) + "\n")


if __name__ == "__main__":
    main(sys.argv[1])
