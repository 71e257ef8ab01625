"""The container environment `peagle local` runs: the one `peagle deploy` would send.

With --model ALIAS it is the DeploymentPlan's own Environment (built from peagle's shipped spec for
that alias, the speculative config and the user's --env applied last, exactly as deploy does); without
it, only what the mode needs: HF_MODEL_ID=/opt/ml/model, the speculative config (DFlash: and its attention
backend) and the user's --env. The drafter directory is mounted as the mode's channel (eagle, or dflash).
"""

from __future__ import annotations

import json
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from ..errors import UsageError
from ..speculative import (
    ATTENTION_ENV,
    DFLASH_ATTENTION_BACKEND,
    ENV_VAR,
    Mode,
    drafter_channel,
    parse_k,
    settings_for,
)
from .mounts import Mounts

GENERIC_MAX_K = 16


class ContainerEnvironment(BaseModel):
    model_config = ConfigDict(frozen=True)

    environment: dict[str, str]
    mounts: Mounts
    mode: Mode
    k: int | None
    speculative_config: str | None
    source: str  # where the environment came from, for the user
    image: str | None = None  # the plan's image (for --docker)


def _directory(path: Path, option: str, what: str) -> Path:
    resolved = path.expanduser().resolve()
    if not resolved.is_dir():
        raise UsageError(f"{option} {path} is not a directory", f"pass the local directory holding the {what}")
    if not any(resolved.iterdir()):
        raise UsageError(f"{option} {path} is empty", f"download the {what} into it first")
    return resolved


def build_environment(model_dir: Path, drafter_dir: Path | None, *, alias: str | None, mode: Mode,
                      k: int | str | None, env: dict[str, str], allow_lossy: bool = False) -> ContainerEnvironment:
    model = _directory(model_dir, "MODEL_DIR", "model")
    if mode is Mode.OFF and drafter_dir is not None:
        raise UsageError("--drafter has no effect with --mode off",
                         "drop --drafter, or pick --mode p-eagle, eagle3 or dflash")
    if mode is not Mode.OFF and drafter_dir is None:
        raise UsageError(f"--mode {mode.value} needs the drafter", "pass --drafter DRAFTER_DIR, or --mode off")
    channel = drafter_channel(mode)
    mounts = Mounts(model=model, channels={channel: _directory(drafter_dir, "--drafter", "drafter")}
                    if drafter_dir and channel else {})
    if alias:
        from ..plan import PlanRequest, build_plan

        plan = build_plan(PlanRequest(model=alias, mode=mode, k=k, env=env, allow_lossy=allow_lossy, offline=True,
                                      accept_eula=True))
        return ContainerEnvironment(environment=dict(plan.create_model["PrimaryContainer"]["Environment"]),
                                    mounts=mounts, mode=plan.mode, k=plan.k,
                                    speculative_config=plan.speculative_config,
                                    source=f"the {plan.model} deployment plan (JumpStart spec {plan.model_id} {plan.model_version}, {plan.resolution_source})",
                                    image=plan.image_uri)
    # no --model: peagle's generic limit, not a named drafter's depth
    settings = settings_for(mode, parse_k(k, max_k=GENERIC_MAX_K, model=""), default_k=3)
    from .. import user_speculative
    from ..container.lossless import ALLOW_LOSSY_ENV, lossy_method

    speculative = user_speculative.merged(settings.config(), user_speculative.additions(env), allow_lossy=allow_lossy,
                                          mode=settings.mode.value)
    rendered = json.dumps(speculative) if speculative is not None else None
    environment = {"HF_MODEL_ID": "/opt/ml/model"}
    if rendered is not None:
        environment[ENV_VAR] = rendered
    if lossy_method(speculative or {}):
        environment[ALLOW_LOSSY_ENV] = "true"
    if mode is Mode.DFLASH:
        environment[ATTENTION_ENV] = DFLASH_ATTENTION_BACKEND  # SM_VLLM_* -> --attention-backend flash_attn
    environment.update({key: value for key, value in env.items() if key != ENV_VAR})
    return ContainerEnvironment(environment=environment, mounts=mounts, mode=settings.mode, k=settings.k,
                                speculative_config=rendered,
                                source="no --model: HF_MODEL_ID, the speculative config and --env only")
