"""Capacity, quotas, instance pools and several regions for the emulator: what moto (5.2) lacks for them.

Modelled (docs/ci.md, "Capacity, quotas and regions", says which texts are SageMaker's and what is assumed):
- capacity per instance type and region (`set_capacity`; unlimited unless a test sets it), taken by an endpoint's
  instances when SageMaker provisions them and free again once the endpoint is deleted or Failed;
- Service Quotas per region (`set_quota`): CreateEndpoint and UpdateEndpoint are refused with ResourceLimitExceeded
  and SageMaker's own text when the instances would pass the quota (with instance pools: of any pool's type, the
  list checked whole); ListServiceQuotas answers the caller's region;
- a production variant's InstancePools (1-5, Priority 1 first, optional ModelNameOverride) and
  VariantInstanceProvisionTimeoutInSeconds: instances come from the highest-priority pool with capacity, then the
  next; without all of them within the timeout the endpoint turns Failed with SageMaker's capacity FailureReason;
  DescribeEndpoint lists each pool's CurrentInstanceCount (InstancePoolSummary);
- CapacityReservationConfig: an ML capacity reservation registered here (`add_capacity_reservation`) supplies
  instances of its type before on-demand capacity (and alone, with `capacity-reservations-only`);
- one emulator for several regions: each region's JumpStart bucket (`seed_region`), quotas, capacity and prices
  (`set_price`), moto's per-region backends for the rest.

Time: an endpoint waiting for instances waits in emulated seconds, never real ones: each DescribeEndpoint of it
advances its wait by `provision_step_s` (60), or, when a test sets `provision_clock`, that clock decides.
Without VariantInstanceProvisionTimeoutInSeconds the endpoint fails at the first describe that still finds no
capacity (one try per pool). The state of each endpoint's instances lives on moto's endpoint object, so moto's
reset forgets it with the endpoint.
"""

from __future__ import annotations

import json

import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

ACCOUNT = "123456789012"
# SageMaker's FailureReason for an endpoint of one instance type without capacity, verbatim from a real failure
# (aws/deep-learning-containers, test/vllm/test_sm_endpoint_fallback.py, REAL_ICE_MESSAGE)
CAPACITY_REASON = ("Unable to provision requested ML compute capacity due to InsufficientInstanceCapacity error. "
                   "Please retry using a different ML instance type or after some time. Consider configuring "
                   "InstancePools in your EndpointConfig with multiple instance types for priority-based fallback to "
                   "improve capacity availability.")
# assumed: the same text without the advice to configure instance pools, when the variant has them
POOLS_CAPACITY_REASON = ("Unable to provision requested ML compute capacity due to InsufficientInstanceCapacity "
                         "error. Please retry using a different ML instance type or after some time.")
RESERVATIONS_ONLY = "capacity-reservations-only"


def quota_message(instance_type: str, limit: float, used: int, delta: int) -> str:
    """SageMaker's ResourceLimitExceeded text (aws-samples/aws-genai-llm-chatbot issue 244, 2023)."""
    return (f"The account-level service limit '{instance_type} for endpoint usage' is {limit:g} Instances, with "
            f"current utilization of {used} Instances and a request delta of {delta} Instances. Please use AWS "
            "Service Quotas to request an increase for this quota.")


@dataclass
class Reservation:
    """An ML capacity reservation: `count` instances of `instance_type` in `region`."""

    arn: str
    region: str
    instance_type: str
    count: int


@dataclass
class _Pool:
    instance_type: str
    model: str | None  # the pool's ModelNameOverride, else the variant's model


@dataclass
class _VariantFleet:
    """One production variant's instances: wanted, and held per instance type (some from a reservation)."""

    name: str
    wanted: int
    pools: list[_Pool]  # in priority order; the variant's InstanceType alone when it has no InstancePools
    with_pools: bool
    timeout_s: float
    reservation: str | None  # MlReservationArn as configured
    reservations_only: bool
    held: dict[str, int] = field(default_factory=dict)  # instance type -> instances, all sources
    on_demand: dict[str, int] = field(default_factory=dict)  # instance type -> instances of `held` not reserved
    reserved: dict[str, int] = field(default_factory=dict)  # reservation ARN -> instances of `held` taken from it

    @property
    def count(self) -> int:
        return sum(self.held.values())


@dataclass
class _Fleet:
    """The instances of one endpoint (or of the config an update moves it to) across its variants."""

    variants: list[_VariantFleet]
    started: float | None = None
    waited_s: float = 0.0
    state: str = "waiting"  # waiting, provisioned, failed
    reason: str | None = None


def _fleet_of(config: Any) -> _Fleet:
    variants = []
    for variant in config.production_variants or []:
        if variant.get("ServerlessConfig"):
            continue
        pools = sorted(variant.get("InstancePools") or [], key=lambda p: p.get("Priority", 5))
        model = variant.get("ModelName")
        listed = ([_Pool(p["InstanceType"], p.get("ModelNameOverride") or model) for p in pools] if pools
                  else [_Pool(variant["InstanceType"], model)] if variant.get("InstanceType") else [])
        reservation = variant.get("CapacityReservationConfig") or {}
        variants.append(_VariantFleet(  # a variant with no instance type (moto refuses it) needs no instances
            variant.get("VariantName", ""), int(variant.get("InitialInstanceCount") or 0) if listed else 0, listed,
            bool(pools),
            float(variant.get("VariantInstanceProvisionTimeoutInSeconds") or 0), reservation.get("MlReservationArn"),
            reservation.get("CapacityReservationPreference") == RESERVATIONS_ONLY))
    return _Fleet(variants)


def _validation(message: str) -> Exception:
    from moto.sagemaker.exceptions import ValidationError

    return ValidationError(message=message)


class CapacityEmulation:
    """Capacity, quotas, pools and regions: mixed into SageMakerEmulator, which calls `_capacity_init` and the
    `_capacity_*` hooks from its own patches of moto (CreateEndpoint, DescribeEndpoint, UpdateEndpoint)."""

    region: str
    endpoint_url: str | None

    def _capacity_init(self, regions: tuple[str, ...] | list[str]) -> None:
        self.regions: tuple[str, ...] = tuple(dict.fromkeys([self.region, *regions]))
        self._capacity_lock = threading.RLock()
        self.reset_capacity()

    # the API for tests and users' CI --------------------------------------------------------------
    def reset_capacity(self) -> None:
        """Back to the defaults: unlimited capacity, no quota, no reservation, no regional price, 60 emulated
        seconds per describe."""
        self.provision_step_s = 60.0  # emulated seconds one DescribeEndpoint of a waiting endpoint lets pass
        self.provision_clock: Callable[[], float] | None = None  # or this clock (seconds) decides
        self._capacity: dict[tuple[str, str], int] = {}
        self._quotas: dict[tuple[str, str], float] = {}
        self.reservations: dict[str, Reservation] = {}
        self.regional_prices: dict[tuple[str, str], float] = {}

    def set_capacity(self, instance_type: str, count: int | None, *, region: str | None = None) -> None:
        """SageMaker can run at most `count` instances of `instance_type` in `region` (default: the emulator's),
        all endpoints together (None: unlimited, the default). Instances already running keep running."""
        key = (region or self.region, instance_type)
        if count is None:
            self._capacity.pop(key, None)
        else:
            self._capacity[key] = int(count)

    def set_quota(self, instance_type: str, value: float, *, region: str | None = None) -> None:
        """The Service Quotas value '<instance_type> for endpoint usage' in `region` (default: the emulator's):
        ListServiceQuotas answers it and CreateEndpoint/UpdateEndpoint are refused past it."""
        self._quotas[(region or self.region, instance_type)] = value

    def add_capacity_reservation(self, instance_type: str, count: int, *, region: str | None = None,
                                 name: str | None = None, kind: str = "ml-reservation") -> str:
        """Register an ML capacity reservation of `count` x `instance_type` in `region`; returns its ARN (what a
        variant's CapacityReservationConfig.MlReservationArn names). `kind`: the ARN's resource type; a
        `training-plan` is also what DescribeTrainingPlan answers (by name or ARN), as SageMaker reads one."""
        region = region or self.region
        name = name or f"emulated-{len(self.reservations) + 1}"
        arn = f"arn:aws:sagemaker:{region}:{ACCOUNT}:{kind}/{name}"
        self.reservations[arn] = Reservation(arn, region, instance_type, int(count))
        return arn

    def set_price(self, instance_type: str, usd_per_hour: float, *, region: str | None = None) -> None:
        """What the Pricing API's GetProducts answers for SageMaker hosting on `instance_type`: in `region` only,
        or (region None) in every region without a regional price (`hosting_prices`)."""
        if region is None:
            self.hosting_prices[instance_type] = usd_per_hour  # type: ignore[attr-defined]
        else:
            self.regional_prices[(region, instance_type)] = usd_per_hour

    def seed_region(self, region: str) -> None:
        """Serve `region` too: its JumpStart spec bucket (`jumpstart-cache-prod-<region>`) is seeded now, and again
        whenever the emulator seeds its regions (moto's other services answer every region without this)."""
        from .jumpstart_bucket import seed_jumpstart_bucket

        if region not in self.regions:
            self.regions = (*self.regions, region)
        seed_jumpstart_bucket(self.client("s3", region=region), region)  # type: ignore[attr-defined]

    def instances_in_use(self, instance_type: str, *, region: str | None = None) -> int:
        """Instances of `instance_type` SageMaker runs in `region` now for every endpoint (and update) there."""
        with self._capacity_lock:
            return sum(v.held.get(instance_type, 0) for v in self._variant_fleets(region or self.region))

    def serving(self, endpoint_name: str, *, region: str | None = None) -> dict[str, dict[str, dict[str, Any]]]:
        """Per variant, the instances SageMaker provisioned by type and the model each type serves (its pool's
        ModelNameOverride, else the variant's ModelName): {"AllTraffic": {"ml.g7e.4xlarge": {"instances": 1,
        "model": "m-4x"}}}; {} when the endpoint does not exist or holds no instance."""
        endpoint = self._sagemaker(region or self.region).endpoints.get(endpoint_name)
        fleet = getattr(endpoint, "peagle_fleet", None)
        found: dict[str, dict[str, dict[str, Any]]] = {}
        for variant in fleet.variants if fleet is not None else []:
            models = {pool.instance_type: pool.model for pool in variant.pools}
            held = {t: {"instances": n, "model": models.get(t)} for t, n in variant.held.items() if n}
            if held:
                found[variant.name] = held
        return found

    # hooks the emulator's patches call -------------------------------------------------------------
    def _capacity_check_config(self, backend: Any, production_variants: list[dict[str, Any]] | None) -> None:
        """CreateEndpointConfig: SageMaker's checks of instance pools and capacity reservations (module docstring)."""
        for variant in production_variants or []:
            name = variant.get("VariantName")
            pools = variant.get("InstancePools")
            types = [p.get("InstanceType") for p in pools or []] or [variant.get("InstanceType")]
            if pools is not None:
                if variant.get("InstanceType") or variant.get("ServerlessConfig"):
                    raise _validation(f"Production variant {name} specifies InstancePools together with "
                                      f"{'InstanceType' if variant.get('InstanceType') else 'ServerlessConfig'}: "
                                      "use one of them (emulated).")
                priorities = [p.get("Priority") for p in pools]
                if len(set(priorities)) != len(priorities):
                    raise _validation(f"Each instance pool of production variant {name} needs its own Priority "
                                      "(emulated).")
                if len(set(types)) != len(types):
                    raise _validation(f"Production variant {name} lists an instance type in more than one instance "
                                      "pool (emulated).")
                for pool in pools:
                    override = pool.get("ModelNameOverride")
                    if override and override not in backend._models:
                        raise _validation(f"Could not find model 'arn:aws:sagemaker:{backend.region_name}:"
                                          f"{backend.account_id}:model/{override.lower()}'.")
            arn = (variant.get("CapacityReservationConfig") or {}).get("MlReservationArn")
            if arn:
                reservation = self.reservations.get(arn)
                if reservation is None or reservation.region != backend.region_name:
                    raise _validation(f"Could not find ML capacity reservation '{arn}' (emulated).")
                if reservation.instance_type not in types:
                    raise _validation(f"ML capacity reservation '{arn}' holds {reservation.instance_type} instances, "
                                      f"which production variant {name} does not use (emulated).")

    def _capacity_check_quota(self, backend: Any, config: Any) -> None:
        """CreateEndpoint and UpdateEndpoint: ResourceLimitExceeded, SageMaker's text, when a variant's instances
        would pass the quota of its type; with pools, the list is checked whole: every pool's type must have the
        quota for the variant's instances, and the first (in priority order) that has not is named ("quota does not
        fall back, capacity does": Deepgram's SageMaker deployment documentation, measured on real accounts)."""
        from moto.core.exceptions import JsonRESTError

        if config is None:
            return  # moto answers the missing config itself
        region = backend.region_name
        with self._capacity_lock:
            for variant in _fleet_of(config).variants:
                for pool in variant.pools:
                    limit = self._quotas.get((region, pool.instance_type))
                    used = self.instances_in_use(pool.instance_type, region=region)
                    if limit is not None and used + variant.wanted > limit:
                        raise JsonRESTError("ResourceLimitExceeded",
                                            quota_message(pool.instance_type, limit, used, variant.wanted))

    def _capacity_provision(self, backend: Any, endpoint: Any, config: Any) -> bool:
        """CreateEndpoint: try to provision every variant's instances now; True when they all are (the endpoint
        starts as it always did), False when it waits for capacity (Creating until DescribeEndpoint settles it)."""
        fleet = self._new_fleet(config)
        endpoint.peagle_fleet = fleet
        with self._capacity_lock:
            self._take(backend.region_name, fleet)
            done = all(v.count >= v.wanted for v in fleet.variants)
            if done:
                fleet.state = "provisioned"
            self._show(endpoint, fleet)
        if not done:
            endpoint.endpoint_status = "Creating"
        return done

    def _capacity_advance(self, backend: Any, endpoint: Any) -> bool:
        """DescribeEndpoint of an endpoint waiting for instances: emulated time passes, capacity is tried again;
        True when its instances were all provisioned just now (the emulator then starts it as on CreateEndpoint),
        and the endpoint turns Failed with SageMaker's capacity reason once a variant's timeout has passed."""
        fleet = getattr(endpoint, "peagle_fleet", None)
        if fleet is None:
            return False
        with self._capacity_lock:
            if fleet.state != "waiting" or endpoint.endpoint_status != "Creating":
                if any(v.reservation for v in fleet.variants):
                    self._show(endpoint, fleet)  # a reservation's available count moves with other endpoints
                return False
            state = self._step(backend.region_name, fleet)
            self._show(endpoint, fleet)
        if state == "failed":
            endpoint.endpoint_status = "Failed"
            endpoint.failure_reason = fleet.reason
        return state == "provisioned"

    def _capacity_start_update(self, backend: Any, endpoint: Any, config: Any) -> None:
        """UpdateEndpoint: the quota check, then the new config's instances are provisioned beside the old ones
        (blue/green: both fleets count until the update ends)."""
        self._capacity_check_quota(backend, config)
        fleet = self._new_fleet(config)
        with self._capacity_lock:
            self._take(backend.region_name, fleet)
            if all(v.count >= v.wanted for v in fleet.variants):
                fleet.state = "provisioned"
        endpoint.peagle_update_fleet = fleet

    def _capacity_advance_update(self, backend: Any, endpoint: Any) -> str | None:
        """DescribeEndpoint while Updating: None once the new config's instances are all provisioned, "" while they
        are still awaited, else the FailureReason the update is rolled back with."""
        fleet = getattr(endpoint, "peagle_update_fleet", None)
        if fleet is None or fleet.state == "provisioned":
            return None
        with self._capacity_lock:
            state = self._step(backend.region_name, fleet)
        if state == "failed":
            endpoint.peagle_update_fleet = None
            return fleet.reason
        return None if state == "provisioned" else ""

    def _capacity_finish_update(self, endpoint: Any, applied: bool) -> None:
        """The update ended: its fleet replaces the old one (applied) or is released (rolled back)."""
        fleet = endpoint.__dict__.pop("peagle_update_fleet", None)
        if applied and fleet is not None:
            endpoint.peagle_fleet = fleet
            with self._capacity_lock:
                self._show(endpoint, fleet)

    def _capacity_model(self, endpoint: Any) -> str | None:
        """The model the endpoint's (first) variant serves: the ModelNameOverride of its first pool with instances."""
        fleet = getattr(endpoint, "peagle_fleet", None)
        variant = fleet.variants[0] if fleet is not None and fleet.variants else None
        serving = next((p for p in variant.pools if variant.held.get(p.instance_type)), None) if variant else None
        return serving.model if serving is not None else None

    def _quota_list(self, region: str) -> list[dict[str, Any]]:
        """ListServiceQuotas(ServiceCode=sagemaker) in `region`: the quotas set there."""
        return [{"ServiceCode": "sagemaker", "QuotaName": f"{instance_type} for endpoint usage", "Value": value,
                 "QuotaCode": f"L-{abs(hash(instance_type)) % 10**8:08d}"}
                for (where, instance_type), value in self._quotas.items() if where == region]

    def _capacity_patches(self) -> list[Any]:
        """moto's endpoint-config validation knows no InstancePools: a variant with pools has each pool's instance
        type checked instead of the InstanceType-or-ServerlessConfig rule."""
        from moto.sagemaker import models as sm_models

        from .patching import stacked as _wrap

        def validate(original: Any) -> Any:
            def wrapped(config_self: Any, production_variants: list[dict[str, Any]]) -> None:
                for variant in production_variants:
                    for pool in variant.get("InstancePools") or []:
                        config_self.validate_instance_type(pool["InstanceType"])
                original(config_self, [v for v in production_variants if not v.get("InstancePools")])
            return wrapped

        def describe_training_plan(response_self: Any) -> Any:
            """DescribeTrainingPlan of a registered `training-plan` reservation (by name or ARN); any other is
            SageMaker's ResourceNotFound (botocore's model names that error; the wording is *assumed*)."""
            from moto.core.responses import ActionResult
            from moto.sagemaker.exceptions import ResourceNotFound

            wanted = json.loads(response_self.body or "{}").get("TrainingPlanName", "")
            region = response_self.region
            found = next((r for r in self.reservations.values() if r.region == region and "training-plan/" in r.arn
                          and wanted in (r.arn, r.arn.rsplit("/", 1)[-1])), None)
            if found is None:
                raise ResourceNotFound(message=f"Training plan {wanted} not found (emulated).")
            return ActionResult({"TrainingPlanArn": found.arn, "TrainingPlanName": found.arn.rsplit("/", 1)[-1],
                                 "Status": "Active", "TotalInstanceCount": found.count,
                                 "AvailableInstanceCount": found.count, "InUseInstanceCount": 0,
                                 "TargetResources": ["endpoint"]})

        from moto.sagemaker.responses import SageMakerResponse
        from unittest import mock

        return [_wrap(sm_models.FakeEndpointConfig, "validate_production_variants", validate),
                mock.patch.object(SageMakerResponse, "describe_training_plan", describe_training_plan, create=True)]

    # the model ---------------------------------------------------------------------------------
    def _new_fleet(self, config: Any) -> _Fleet:
        fleet = _fleet_of(config)
        if self.provision_clock is not None:
            fleet.started = self.provision_clock()
        return fleet

    @staticmethod
    def _sagemaker(region: str) -> Any:
        from moto.sagemaker.models import sagemaker_backends

        return sagemaker_backends[ACCOUNT][region]

    def _variant_fleets(self, region: str) -> Iterator[_VariantFleet]:
        """Every variant holding instances in `region`: endpoints (not Failed ones) and updates under way."""
        for endpoint in list(self._sagemaker(region).endpoints.values()):
            fleets = [getattr(endpoint, "peagle_update_fleet", None)]
            if endpoint.endpoint_status != "Failed":
                fleets.append(getattr(endpoint, "peagle_fleet", None))
            for fleet in fleets:
                if fleet is not None and fleet.state != "failed":
                    yield from fleet.variants

    def _free(self, region: str, instance_type: str) -> float:
        """On-demand instances of this type still free in the region (reserved ones are not on-demand)."""
        limit = self._capacity.get((region, instance_type))
        if limit is None:
            return float("inf")
        return max(0, limit - sum(v.on_demand.get(instance_type, 0) for v in self._variant_fleets(region)))

    def _reservation(self, region: str, variant: _VariantFleet, instance_type: str) -> tuple[Reservation, int] | None:
        """The reservation a variant draws `instance_type` instances from, and how many it has free."""
        candidates = ([self.reservations[variant.reservation]] if variant.reservation in self.reservations
                      else [r for r in self.reservations.values()] if variant.reservations_only else [])
        for reservation in candidates:
            if reservation.region == region and reservation.instance_type == instance_type:
                used = sum(v.reserved.get(reservation.arn, 0) for v in self._variant_fleets(region))
                return reservation, max(0, reservation.count - used)
        return None

    def _take(self, region: str, fleet: _Fleet) -> None:
        """Provision what each variant still lacks, pool by pool in priority order: a reservation's instances
        first, then on-demand capacity (none with capacity-reservations-only), never past the type's quota."""
        for variant in fleet.variants:
            for pool in variant.pools:
                need = variant.wanted - variant.count
                if need <= 0:
                    break
                kind = pool.instance_type
                quota = self._quotas.get((region, kind))
                if quota is not None:
                    need = min(need, max(0, int(quota) - self.instances_in_use(kind, region=region)))
                found = self._reservation(region, variant, kind)
                from_reservation = min(need, found[1]) if found else 0
                on_demand = 0 if variant.reservations_only else min(need - from_reservation, self._free(region, kind))
                if from_reservation:
                    variant.reserved[found[0].arn] = variant.reserved.get(found[0].arn, 0) + from_reservation
                if on_demand:
                    variant.on_demand[kind] = variant.on_demand.get(kind, 0) + int(on_demand)
                if from_reservation + on_demand:
                    variant.held[kind] = variant.held.get(kind, 0) + from_reservation + int(on_demand)

    def _step(self, region: str, fleet: _Fleet) -> str:
        """One describe's worth of emulated time for a waiting fleet: try again, then check the timeouts."""
        if self.provision_clock is not None:
            now = self.provision_clock()
            fleet.started = now if fleet.started is None else fleet.started
            fleet.waited_s = now - fleet.started
        else:
            fleet.waited_s += self.provision_step_s
        self._take(region, fleet)
        short = [v for v in fleet.variants if v.count < v.wanted]
        if not short:
            fleet.state = "provisioned"
        elif any(fleet.waited_s >= v.timeout_s for v in short):
            fleet.state = "failed"
            fleet.reason = POOLS_CAPACITY_REASON if any(v.with_pools for v in short) else CAPACITY_REASON
            for variant in fleet.variants:  # SageMaker gives back what it had provisioned
                variant.held.clear()
                variant.on_demand.clear()
                variant.reserved.clear()
        return fleet.state

    def _show(self, endpoint: Any, fleet: _Fleet) -> None:
        """What DescribeEndpoint answers per variant: its instance counts, each pool's (InstancePoolSummary) and
        its reservation's (ProductionVariantCapacityReservationSummary). A variant of one instance type that got
        all its instances keeps moto's own answer."""
        shown = {v.get("VariantName"): v for v in endpoint.production_variants}
        for variant in fleet.variants:
            summary = shown.get(variant.name)
            if summary is None:
                continue
            if variant.with_pools or variant.reservation or variant.count != variant.wanted:
                summary["CurrentInstanceCount"] = variant.count
                summary["DesiredInstanceCount"] = variant.wanted
            if variant.with_pools:
                summary["InstancePools"] = [{"InstanceType": p.instance_type,
                                             "CurrentInstanceCount": variant.held.get(p.instance_type, 0)}
                                            for p in variant.pools]
            reservation = self.reservations.get(variant.reservation or "")
            if reservation is not None:
                used = sum(v.reserved.get(reservation.arn, 0) for v in self._variant_fleets(reservation.region))
                summary["CapacityReservationConfig"] = {
                    "MlReservationArn": reservation.arn, "TotalInstanceCount": reservation.count,
                    "AvailableInstanceCount": max(0, reservation.count - used),
                    "UsedByCurrentEndpoint": variant.reserved.get(reservation.arn, 0),
                    **({"CapacityReservationPreference": RESERVATIONS_ONLY} if variant.reservations_only else {})}
