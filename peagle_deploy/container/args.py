"""SM_VLLM_* environment -> `vllm serve` argv, with the AWS vLLM DLC's rules.

Rules (docs/container.md says which were checked against the DLC's sagemaker_entrypoint.sh): strip the SM_VLLM_ prefix, lowercase, `_` -> `-`;
`true` -> a bare flag, `false` -> omitted, empty -> a bare flag; a JSON object is passed as one
argument; a JSON array expands to one argument per element, except for flags that take JSON
themselves; variables are processed in sorted order; `--port 8080` comes first; the model is
SM_VLLM_MODEL, else /opt/ml/model if it is a non-empty directory, else HF_MODEL_ID.
SM_VLLM_PORT is ignored: SageMaker requires 8080. PEAGLE_MODEL_DIR moves /opt/ml/model and PEAGLE_PORT moves
8080 (local runs: `peagle local`, the emulator's container backend, tests).

One default of peagle's own (`with_defaults`): with speculation on and a vLLM that has it (0.29+), per-request
acceptance is turned on (SM_VLLM_PER_REQUEST_SPEC_DECODE_METRICS=summary) unless the environment sets it.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping

PREFIX = "SM_VLLM_"
PORT = "8080"
JSON_FLAGS = {"--allowed-origins", "--allowed-methods", "--allowed-headers", "--middleware"}
MODEL_DIR = "/opt/ml/model"
PER_REQUEST_ENV = PREFIX + "PER_REQUEST_SPEC_DECODE_METRICS"
MODEL_DIR_ENV = "PEAGLE_MODEL_DIR"
PORT_ENV = "PEAGLE_PORT"


class ContainerConfigError(ValueError):
    """The container's environment cannot start vLLM; the message is one line for CloudWatch."""


def resolve_model(env: Mapping[str, str], model_dir: str | None = None) -> str:
    model_dir = model_dir or env.get(MODEL_DIR_ENV) or MODEL_DIR
    if env.get(PREFIX + "MODEL"):
        return env[PREFIX + "MODEL"]
    if os.path.isdir(model_dir) and os.listdir(model_dir):
        return model_dir
    if env.get("HF_MODEL_ID"):
        return env["HF_MODEL_ID"]
    raise ContainerConfigError(f"no model: set SM_VLLM_MODEL or HF_MODEL_ID, or put the model in {model_dir}")


def with_defaults(env: Mapping[str, str], vllm_version: str | None) -> dict[str, str]:
    """`env` plus peagle's defaults: per-request acceptance in each answer when speculation is on and the vLLM
    beside the entrypoint has the flag (a vLLM without it would refuse the flag; one started without speculation
    refuses it too)."""
    from .vllm_version import has_per_request_spec_metrics

    out = dict(env)
    if (env.get(PREFIX + "SPECULATIVE_CONFIG") or "").strip() and PER_REQUEST_ENV not in env \
            and has_per_request_spec_metrics(vllm_version):
        out[PER_REQUEST_ENV] = "summary"
    return out


def _values(flag: str, value: str) -> list[str]:
    stripped = value.strip()
    if stripped.lower() == "true" or stripped == "":
        return [flag]
    if stripped.lower() == "false":
        return []
    if stripped.startswith("[") and flag not in JSON_FLAGS:
        try:
            items = json.loads(stripped)
        except ValueError:
            return [flag, value]
        if isinstance(items, list):
            return [flag, *(item if isinstance(item, str) else json.dumps(item) for item in items)]
    return [flag, value]  # plain values and JSON objects: one argument


def flag_of(key: str) -> str:
    """The vLLM flag an SM_VLLM_* variable becomes: prefix stripped, lowercased, `_` -> `-`."""
    return "--" + key[len(PREFIX):].lower().replace("_", "-")


def build_argv(env: Mapping[str, str], model_dir: str | None = None) -> list[str]:
    port = env.get(PORT_ENV, PORT)
    if not port.isdigit() or not 0 < int(port) < 65536:
        raise ContainerConfigError(f"{PORT_ENV} must be a TCP port number, got {port!r}")
    argv = ["vllm", "serve", resolve_model(env, model_dir), "--port", port]
    for key in sorted(env):
        if not key.startswith(PREFIX) or key in (PREFIX + "MODEL", PREFIX + "PORT"):
            continue
        argv += _values(flag_of(key), env[key])
    return argv
