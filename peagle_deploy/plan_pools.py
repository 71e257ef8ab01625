"""Instance pools through the one plan builder: what is decided about each listed instance type, from its facts.

`plan.build_plan` plans a request with two or more instance types type by type (`plan._plan_pools`), each as a
deploy of that type alone would be (`plan._params`: the JumpStart spec for that type, its per-instance environment,
the tensor-parallel degree for its GPUs, the checks against the spec), priced (`FactSource.price`) and held
against its Service Quotas value (`FactSource.quota`). This module makes the decisions on those facts and imports
nothing of the builder: a type that cannot serve is kept in the plan, marked and left out of the variant with the
reason (`judge`: the spec has no image for it, its quota has no room, its price is over an explicit
--max-price-per-hour). The first type left is the main model's; a later pool whose container differs (another TP
degree, another image) gets a model of its own through `ModelNameOverride`, the others share the main model
(`keep`). The variant lists the kept types as `InstancePools`, Priority 1 first (`capacity_variant`), with
`RoutingConfig` `LEAST_OUTSTANDING_REQUESTS` (`POOL_ROUTING`): one public sample of instance pools says SageMaker
requires it with pools; botocore's `ProductionVariant` allows it beside `InstancePools`, and it is the strategy
peagle uses for components too (LLM requests differ in length by orders of magnitude), so it is harmless either way.

Fit: peagle knows no reliable size of a model's weights (the catalog's summaries are estimates), so a type
"fits" only where it has at least the GPU memory of the instance type JumpStart's spec deploys the model on by
default; anything else is "not checked", never guessed (docs/capacity.md).
"""

from __future__ import annotations

from typing import Any

from .errors import PeagleError, QuotaError, UsageError
from .hosting import Hosting
from .instances import instance_info
from .pools import MAX_POOLS, Pool, Quota, check_provision_timeout
from .pricing import Price
from .spec import ResolvedSpec

NAME_MAX = 63  # SageMaker's model names
POOL_ROUTING = {"RoutingStrategy": "LEAST_OUTSTANDING_REQUESTS"}  # on a variant with pools (module docstring)
NO_IMAGE = "the JumpStart spec has no image for it (not among its supported instance types)"


def check_pool_request(request: Any) -> None:
    """The pool list, its timeout and the reservation, before any AWS call (each type's family: `plan._choose`)."""
    types = request.instance_pools
    if types and request.instance_type:
        raise UsageError("a request names both instance_type and instance_pools",
                         "give one type as instance_type, or two or more as instance_pools")
    if request.hosting is not Hosting.ENDPOINT:  # the component shape plans its config on one type, no reservation
        other = "deploy without --hosting component and --scale-to-zero"
        if types:
            raise UsageError("instance pools (--instance-type A,B) are for --hosting endpoint; an inference "
                             "component's endpoint runs on one instance type", f"pass --instance-type {types[0]}, "
                             f"or {other}")
        flag = "--provision-timeout" if request.provision_timeout_s is not None else "--capacity-reservation"
        raise UsageError(f"{flag} is for --hosting endpoint; peagle plans an inference component's endpoint without "
                         "instance pools or a reservation", f"drop {flag}, or {other}")
    if len(types) > MAX_POOLS or len(set(types)) != len(types):
        raise UsageError(f"instance pools {', '.join(types)}: SageMaker takes at most {MAX_POOLS} types, each once",
                         "list each instance type once, at most 5")
    if request.provision_timeout_s is not None:
        if not types:
            raise UsageError("--provision-timeout applies to instance pools",
                             "drop --provision-timeout, or give --instance-type two or more types in priority order "
                             "(ml.g7e.2xlarge,ml.g7e.4xlarge)")
        check_provision_timeout(request.provision_timeout_s)


def pool_model_name(name: str, priority: int) -> str:
    """The model of a pool whose container differs: NAME-p<priority>, within SageMaker's 63 characters."""
    suffix = f"-p{priority}"
    return name[: NAME_MAX - len(suffix)].rstrip("-") + suffix


def fit(instance_type: str, spec: ResolvedSpec) -> tuple[str, str]:
    """('fits' | 'not checked', why): the type's GPU memory against that of the spec's default instance type."""
    info, reference = instance_info(instance_type), spec.default_instance_type
    known = instance_info(reference)
    if info is None or known is None:
        missing = instance_type if info is None else f"the spec's default {reference}"
        return "not checked", f"peagle has no GPU facts for {missing}"
    have, need = info.gpu_memory_gb, known.gpu_memory_gb  # the instance's GPUs together
    if have >= need:
        return "fits", f"{have} GB of GPU memory; JumpStart deploys the model on {reference} ({need} GB)"
    return "not checked", (f"{have} GB of GPU memory, less than the {need} GB of {reference} (JumpStart's default); "
                           "peagle knows no reliable size of the weights")


def quota_reason(limit: float, used: int, count: int, region: str) -> str:
    """'quota 0 in us-east-1' (with what is in use and needed when that is why)."""
    text = f"quota {limit:g} in {region}"
    if used and limit:  # a quota of 0 says it all
        text += f", {used} in use"
    if count > 1:
        text += f", {count} needed"
    return text


def new_pool(instance_type: str) -> Pool:
    """A listed type before its facts: not kept until it is judged and given a priority."""
    info = instance_info(instance_type)
    return Pool(instance_type=instance_type, priority=None, kept=False, gpus=info.gpus if info else None,
                gpu_memory_gb=info.gpu_memory_gb if info else None)


def judge(pool: Pool, spec: ResolvedSpec, *, tensor_parallel: str | None, price: Price, quota: Quota | None,
          request: Any) -> None:
    """A type the request can be planned for, given its facts: its fit, price and quota, and why it is left out
    (its quota has no room, its price is over an explicit --max-price-per-hour)."""
    pool.tensor_parallel = tensor_parallel
    pool.fit, pool.fit_detail = fit(pool.instance_type, spec)
    pool.price, pool.quota = price, quota
    limit = request.max_price_per_hour_usd
    if quota is not None and quota.limit is not None and (quota.used or 0) + request.instance_count > quota.limit:
        pool.left_out = quota_reason(quota.limit, quota.used or 0, request.instance_count, request.region)
    elif limit is not None:
        policy = request.autoscale
        guarded = price.for_count(policy.max_capacity) if policy is not None else price
        at = " at the autoscaling maximum" if policy is not None else ""
        if guarded.usd_per_hour is None:
            pool.left_out = f"its price is unknown, so --max-price-per-hour {limit:g} cannot be checked"
        elif guarded.usd_per_hour > limit:
            pool.left_out = f"${guarded.usd_per_hour:,.2f}/h{at} is over --max-price-per-hour {limit:g}"


def nothing_left(types: list[str], pools: list[Pool], errors: list[PeagleError | None]) -> PeagleError:
    """The refusal when no listed type can serve: the request's own where every type refused it alike."""
    refusals = {e.one_line() for e in errors if e is not None}
    if len(refusals) == 1 and all(e is not None for e in errors):
        return errors[0]  # the request itself cannot be planned (a licence, a drafter): said as deploy says it
    reasons = "; ".join(f"{p.instance_type}: {p.left_out}" for p in pools)
    what = f"no instance type of {', '.join(types)} can serve this deploy ({reasons})"
    if all(p.left_out and p.left_out.startswith("quota ") for p in pools):
        return QuotaError(what, "request an increase in the Service Quotas console (SageMaker) or list other "
                                "--instance-type values")
    return UsageError(what, "list other --instance-type values (peagle deploy --dry-run shows why each is left out)")


def _difference(main: dict[str, Any], other: dict[str, Any]) -> str:
    """What a pool's container sets otherwise than the main model's (environment names and values, the image)."""
    said = []
    if main.get("Image") != other.get("Image"):
        said.append(f"image {other.get('Image')}")
    env, theirs = main.get("Environment") or {}, other.get("Environment") or {}
    said += [f"{key}={theirs.get(key, '(unset)')}" for key in sorted(set(env) | set(theirs))
             if env.get(key) != theirs.get(key)]
    said += [key for key in sorted(set(main) | set(other)) if key not in ("Image", "Environment")
             and main.get(key) != other.get(key)]
    return ", ".join(said)


def keep(pool: Pool, priority: int, name: str, main_container: dict[str, Any], container: dict[str, Any]) -> None:
    """The pool at `priority` in the variant: on the main model `name` where its container is the main model's,
    else on a model of its own (ModelNameOverride)."""
    pool.kept, pool.priority = True, priority
    if priority == 1 or container == main_container:
        pool.model_name = name
    else:
        pool.own_model, pool.model_name = True, pool_model_name(name, priority)
        pool.differs = _difference(main_container, container)


def pool_notes(pools: list[Pool], request: Any) -> list[str]:
    """What the plan says of its pools: each type left out and why, which pools share the main model, the timeout."""
    kept = [pool for pool in pools if pool.kept]
    names = [pool.instance_type for pool in kept]
    sharing = [pool.instance_type for pool in kept if not pool.own_model]
    notes = [f"{pool.instance_type}: {pool.left_out}; deploying with {', '.join(names)}"
             for pool in pools if not pool.kept]
    notes.append(f"instance pools in priority order: {', '.join(names)}; "
                 + (f"{', '.join(sharing)} share the main model" if len(sharing) > 1 else
                    f"{sharing[0]} runs the main model")
                 + "".join(f"; {pool.instance_type} runs its own model {pool.model_name} ({pool.differs})"
                           for pool in kept if pool.own_model))
    if request.provision_timeout_s is None:
        notes.append("no --provision-timeout: SageMaker's own limit decides how long it tries the pools")
    return notes


def pools_price(kept: list[Pool]) -> tuple[Price, list[str]]:
    """The price the plan is held to: the most expensive pool's (which one serves is SageMaker's choice), or an
    unknown one; and the note when the pools' prices differ."""
    priced = [pool.price for pool in kept if pool.price is not None]
    unknown = next((p for p in priced if p.usd_per_hour is None), None)
    top = unknown or max(priced, key=lambda p: p.usd_per_hour or 0.0)
    known = sorted({p.usd_per_hour for p in priced if p.usd_per_hour is not None})
    notes = []
    if len(known) > 1 or unknown is not None and known:
        notes.append(f"the price depends on the pool that serves ({', '.join(f'${v:,.2f}/h' for v in known)}"
                     f"{', one unknown' if unknown else ''}): the plan is priced at the most expensive")
    return top, notes


def capacity_variant(variant: dict[str, Any], request: Any, pools: tuple[Pool, ...]) -> tuple[dict[str, Any],
                                                                                             dict[str, Any]]:
    """The production variant with its InstancePools in place of InstanceType (Priority 1 first, a
    ModelNameOverride where the pool's model differs), the provision timeout and CapacityReservationConfig; and
    the plan's fields for them."""
    part: dict[str, Any] = {}
    shaped: dict[str, Any] = {}
    for key, value in variant.items():
        if key == "InstanceType" and pools:
            shaped["InstancePools"] = [{"InstanceType": pool.instance_type, "Priority": pool.priority,
                                        **({"ModelNameOverride": pool.model_name} if pool.own_model else {})}
                                       for pool in pools]
        else:
            shaped[key] = value
    if pools:
        shaped["RoutingConfig"] = dict(POOL_ROUTING)
    if pools and request.provision_timeout_s is not None:
        shaped["VariantInstanceProvisionTimeoutInSeconds"] = request.provision_timeout_s
        part["provision_timeout_s"] = request.provision_timeout_s
    reservation = request.capacity_reservation
    if reservation is not None:
        shaped["CapacityReservationConfig"] = reservation.config()
        part["capacity_reservation"] = reservation
        part["notes"] = [f"capacity reservation {reservation.describe()}: SageMaker refuses the config if it "
                         "holds none of the variant's instance types"]
    return shaped, part
