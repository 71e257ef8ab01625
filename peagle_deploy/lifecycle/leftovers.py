"""Who uses which endpoint config and model (`References`), peagle-made configs and models found by their tags,
and which of them nothing uses.

Every config and model peagle creates carries `peagle:managed=true` and `peagle:endpoint=NAME` (the endpoint it
was made for; an update's `NAME-u...` resources too). What was made before that tag existed is matched by its
name: `NAME` (deploy) or `NAME-u<time>` (update). A config is in use while an endpoint serves it or is updating
to it; a model while a config in use, or any config that is not itself a leftover, names it, or an inference
component does, or (a model peagle made for a component) while its endpoint exists and hosts no component yet: the
deploy was cut short before its component, and `peagle recover` completes it with that model
(`References.awaiting_component`). When the components cannot be listed, no model is a leftover, but for one case
where peagle's own records prove the answer: on a mock of AWS that does not implement ListInferenceComponents (plain
moto, which has no inference component at all: `aws.MockLacksOperation`), a model that a classic endpoint config
names, or that peagle tagged for a classic endpoint (no `peagle:hosting=component`), is a config's model, named by no
component (`References.free_of_components`). An inference component peagle made is a leftover once its endpoint is gone
(SageMaker leaves a component behind when its endpoint is deleted).

One that nothing uses may still be in the making: a deploy's config and model before its CreateEndpoint carry the
deploy's lease, an update's new model and config are held by the lease on their endpoint (`lifecycle.lease`).
Each leftover says the lease that holds it (`Leftover.lease`); while that is fresh, it is not unused.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel

from ..aws import MockLacksOperation, translate_error
from ..describe import describe
from ..tags import PeagleTags
from .lease import Lease, read_lease
from .tags import list_tags_if_present

_UPDATE_NAME = re.compile(r"^(?P<endpoint>.+)-u\d{12}(?:-[0-9a-f]{4})?$")


@dataclass
class References:
    """Who uses what, read from SageMaker before anything is deleted. An endpoint that is updating uses the
    config it moves to (PendingDeploymentSummary) as much as the one it serves: neither may go."""

    endpoint_config: dict[str, str] = field(default_factory=dict)  # endpoint -> its config
    config_models: dict[str, list[str]] = field(default_factory=dict)  # config -> its models
    pending: dict[str, str] = field(default_factory=dict)  # endpoint -> the config an update moves it to
    config_arns: dict[str, str] = field(default_factory=dict)
    endpoint_arns: dict[str, str] = field(default_factory=dict)
    components: dict[str, Any] = field(default_factory=dict)  # component -> components.ComponentRef
    components_unknown: str | None = None  # why the components could not be listed: then no model is unused
    components_lacking: str | None = None  # the mock of AWS does not implement this listing (plain moto)

    @classmethod
    def read(cls, sm: Any) -> References:
        refs = cls()
        for page in sm.get_paginator("list_endpoints").paginate():
            for summary in page.get("Endpoints", []):
                described = describe(sm, "endpoint", summary["EndpointName"])
                if described is not None:
                    refs.endpoint_config[summary["EndpointName"]] = described.get("EndpointConfigName", "")
                    refs.endpoint_arns[summary["EndpointName"]] = described.get("EndpointArn", "")
                    target = (described.get("PendingDeploymentSummary") or {}).get("EndpointConfigName")
                    if target:
                        refs.pending[summary["EndpointName"]] = target
        for page in sm.get_paginator("list_endpoint_configs").paginate():
            for summary in page.get("EndpointConfigs", []):
                refs.config_arns[summary["EndpointConfigName"]] = summary.get("EndpointConfigArn", "")
                refs.config_models[summary["EndpointConfigName"]] = _models_of(
                    describe(sm, "endpoint_config", summary["EndpointConfigName"]))
        from .components import models_in_use

        try:
            refs.components = models_in_use(sm)
        except Exception as exc:  # noqa: BLE001 - e.g. no sagemaker:ListInferenceComponents: keep every model
            error = translate_error(exc)
            if error is None or error.exit_code != 3:
                raise
            refs.components_unknown = error.one_line()
            if isinstance(error, MockLacksOperation):
                refs.components_lacking = error.operation
        return refs

    def model_users(self, model: str, *, besides: set[str] = frozenset(),
                    tags: PeagleTags | None = None) -> list[str]:
        """Inference components (not in `besides`) that name `model`; all of them when they could not be listed,
        unless the model's own records prove none does (`free_of_components`; `tags`: the model's)."""
        if self.components_unknown is not None:
            if self.free_of_components(model, tags):
                return []
            return [f"(unknown: {self.components_unknown})"]
        return sorted(c for c, ref in self.components.items() if ref.model == model and c not in besides)

    def free_of_components(self, model: str, tags: PeagleTags | None = None) -> bool:
        """On a mock that lacks the component listing: a model a classic endpoint config names (a component-based
        config names none), or that peagle tagged for a classic endpoint, is named by no component."""
        if self.components_lacking is None:
            return False
        if any(model in models for models in self.config_models.values()):
            return True
        return tags is not None and tags.managed and tags.hosting != "component"

    def awaiting_component(self) -> set[str]:
        """Endpoints made for inference components (their config names no model) that host none: a deploy cut short
        between CreateEndpoint and CreateInferenceComponent, which `peagle recover` completes with the model peagle
        made for them. None while the components cannot be listed (then no model is unused anyway)."""
        if self.components_unknown is not None:
            return set()
        hosting = {ref.endpoint for ref in self.components.values()}
        return {endpoint for endpoint, config in self.endpoint_config.items()
                if config in self.config_models and not self.config_models[config] and endpoint not in hosting}

    def users(self, config: str, *, besides: set[str] = frozenset()) -> list[str]:
        """Endpoints (not in `besides`) that serve `config` or are updating to it."""
        return sorted({ep for ep, c in self.endpoint_config.items() if c == config and ep not in besides}
                      | {ep for ep, c in self.pending.items() if c == config and ep not in besides})

    def configs_in_use(self) -> set[str]:
        return set(self.endpoint_config.values()) | set(self.pending.values())


def _models_of(config: dict[str, Any] | None) -> list[str]:
    if config is None:
        return []
    variants = config.get("ProductionVariants", [])
    models = [v["ModelName"] for v in variants if v.get("ModelName")]
    # an instance pool's own model (ModelNameOverride) is the config's as much as the variant's model
    return models + [p["ModelNameOverride"] for v in variants for p in v.get("InstancePools") or []
                     if p.get("ModelNameOverride") and p["ModelNameOverride"] not in models]


class Leftover(BaseModel):
    """A peagle-made endpoint config or model that no endpoint uses, or a component whose endpoint is gone."""

    kind: Literal["endpoint_config", "model", "inference_component"]
    name: str
    endpoint: str | None = None  # the endpoint it was made for
    command: str = ""  # the peagle command that removes it
    lease: Lease | None = None  # its own lease, or (fresh) its endpoint's: the work it is part of
    region: str = ""
    regions_tried: list[str] = []  # a --region A,B deploy's: the regions it tried up to this one

    @property
    def label(self) -> str:
        return self.kind.replace("_", " ")

    @property
    def in_progress(self) -> bool:
        """Part of work whose lease is fresh: being built, not unused."""
        return self.lease is not None and bool(self.lease.fresh)


def endpoint_of(name: str, tags: PeagleTags) -> str:
    """The endpoint a peagle resource was made for: its tag, else what its name says."""
    if tags.endpoint:
        return tags.endpoint
    match = _UPDATE_NAME.match(name)
    return match["endpoint"] if match else name


def _managed(sm: Any, items: list[tuple[str, str]], leases: dict[str, Lease] | None = None) -> dict[str, PeagleTags]:
    """The peagle-made ones of `items` (name, ARN), with their tags; the leases they carry go into `leases`."""
    found = {}
    for name, arn in items:
        raw = list_tags_if_present(sm, arn)
        if raw is None:  # deleted between the listing and now
            continue
        tags = PeagleTags.from_aws(raw)
        if tags.managed:
            found[name] = tags
            lease = read_lease(raw)
            if lease is not None and leases is not None:
                leases[name] = lease
    return found


def _models(sm: Any) -> list[tuple[str, str]]:
    return [(m["ModelName"], m["ModelArn"]) for page in sm.get_paginator("list_models").paginate()
            for m in page.get("Models", [])]


def owned_by(sm: Any, refs: References, endpoint: str) -> tuple[list[str], list[str]]:
    """Every peagle-made config and model of `endpoint` (used or not): (configs, models)."""
    configs = _managed(sm, list(refs.config_arns.items()))
    models = _managed(sm, _models(sm))
    return ([c for c, tags in configs.items() if endpoint_of(c, tags) == endpoint],
            [m for m, tags in models.items() if endpoint_of(m, tags) == endpoint])


def find_leftovers(sm: Any, refs: References, *, endpoint: str | None = None, region: str = "") -> list[Leftover]:
    """peagle-made configs and models that nothing uses (of `endpoint`, or all of them), configs first."""
    in_use = refs.configs_in_use()
    leases: dict[str, Lease] = {}
    configs = _managed(sm, [(c, arn) for c, arn in refs.config_arns.items() if c not in in_use], leases)
    configs = {c: tags for c, tags in configs.items() if endpoint is None or endpoint_of(c, tags) == endpoint}
    held = {m for c, ms in refs.config_models.items() if c not in configs for m in ms}
    model_leases: dict[str, Lease] = {}
    held |= {ref.model for ref in refs.components.values() if ref.model}
    models = _managed(sm, [(m, arn) for m, arn in _models(sm) if m not in held], model_leases) \
        if refs.components_unknown is None or refs.components_lacking else {}
    if refs.components_unknown is not None:  # only those whose own records prove no component names them
        models = {m: tags for m, tags in models.items() if refs.free_of_components(m, tags)}
    awaiting = refs.awaiting_component()  # their model is their deploy's unfinished part, not unused
    models = {m: tags for m, tags in models.items()
              if not (tags.hosting == "component" and endpoint_of(m, tags) in awaiting)}
    found = [Leftover(kind="endpoint_config", name=c, endpoint=endpoint_of(c, tags), lease=leases.get(c),
                      region=region, regions_tried=tags.regions_tried) for c, tags in configs.items()]
    found += [Leftover(kind="model", name=m, endpoint=endpoint_of(m, tags), lease=model_leases.get(m), region=region,
                       regions_tried=tags.regions_tried)
              for m, tags in models.items() if endpoint is None or endpoint_of(m, tags) == endpoint]
    stranded = [(c, ref.arn) for c, ref in refs.components.items() if ref.endpoint not in refs.endpoint_config
                and (endpoint is None or ref.endpoint == endpoint)]
    found += [Leftover(kind="inference_component", name=c, endpoint=refs.components[c].endpoint, region=region)
              for c in _managed(sm, stranded)]
    where = f" --region {region}" if region else ""
    endpoint_leases: dict[str, Lease | None] = {}
    for leftover in found:
        leftover.command = f"peagle recover {leftover.endpoint}{where}"
        arn = refs.endpoint_arns.get(leftover.endpoint or "")
        if not leftover.in_progress and arn:  # an update's new model or config: held by its endpoint's lease
            if leftover.endpoint not in endpoint_leases:
                endpoint_leases[leftover.endpoint] = read_lease(list_tags_if_present(sm, arn))
            lease = endpoint_leases[leftover.endpoint]
            if lease is not None and lease.fresh:
                leftover.lease = lease
    return found
