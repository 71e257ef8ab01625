"""What a bench target is: its parsed reference, and (for a SageMaker endpoint) instance and peagle tags."""

from __future__ import annotations

from typing import Any

from ..errors import UsageError
from .results import TargetInfo


def describe_endpoint(sagemaker: Any, name: str, component: str | None = None) -> TargetInfo:
    """Instance type, count and speculative config from the served config; a mode/K label and the model
    from peagle's tags, if any. `component`: the endpoint's inference component the run addresses: the served
    model is the one it names, and the instances those running now (0 at zero, until it is woken)."""
    from ..aws import error_code, translate_error

    try:
        ep = sagemaker.describe_endpoint(EndpointName=name)
    except Exception as exc:  # botocore's errors, through the one AWS classifier
        if error_code(exc) in ("ValidationException", "ValidationError"):
            raise UsageError(f"endpoint {name!r} not found", "check the name and --region") from None
        translated = translate_error(exc)
        if translated is None:
            raise
        raise translated from None
    if ep.get("EndpointStatus") not in (None, "InService"):
        raise UsageError(
            f"endpoint {name!r} is {ep.get('EndpointStatus')}, not InService",
            "wait for it ('peagle deploy' waits) or bench another endpoint",
        )
    info = TargetInfo(kind="sagemaker", name=name, inference_component=component)
    from ..served_config import read_served_config
    from .server_facts import ServerFacts, from_speculation

    try:
        model = None
        if component is not None:
            from ..lifecycle.components import describe_component

            model = ((describe_component(sagemaker, component) or {}).get("Specification") or {}).get("ModelName")
        served = read_served_config(sagemaker, name, described=ep, model=model)
        info.instance_type, info.instance_count = served.instance_type, served.instance_count
        if served.instance_pools:  # instance pools: the one that serves is what runs and what is billed
            from ..pools import serving_pools, serving_words

            serving = serving_pools((ep.get("ProductionVariants") or [{}])[0])
            info.instance_type, info.instance_count = serving[0] if serving else (None, None)
            info.instance_pool = serving_words(serving, served.instance_pools)
        if component is not None:
            info.instance_count = running_instances(ep)
        info.server = from_speculation(served.speculation, served.source)
    except Exception as exc:  # noqa: BLE001 - a read failure is not an endpoint failure; the bench still runs
        if not error_code(exc):
            raise
        info.server = ServerFacts(notes=[f"could not read the served config of {name} ({error_code(exc)})"])
    try:
        tags = {t["Key"]: t["Value"] for t in sagemaker.list_tags(ResourceArn=ep["EndpointArn"]).get("Tags", [])}
    except Exception as exc:  # noqa: BLE001
        if not error_code(exc):
            raise
        tags = {}
    from ..tags import PeagleTags  # the one reader of peagle's tags

    peagle_tags = PeagleTags.from_aws(tags)
    if peagle_tags.mode:  # a label: the runner weighs it against the served config
        info.label_mode, info.label_k, info.label_source = peagle_tags.mode, peagle_tags.k, "tags"
    info.model = peagle_tags.model
    return info


def running_instances(described: dict[str, Any]) -> int | None:
    """A component-based endpoint's instances in service now (its variant's CurrentInstanceCount)."""
    variant = next(iter(described.get("ProductionVariants") or []), {})
    return variant.get("CurrentInstanceCount")


_LOOPBACK = {"127.0.0.1", "localhost", "::1"}


def target_identity(ref: Any, region: str | None) -> tuple[str, ...]:
    """What tells two targets apart: an endpoint's region and name (its name or its OpenAI route URL alike), a
    URL's server root (scheme, host, port, path; the loopback names counted as one host)."""
    from urllib.parse import urlsplit

    from ..aws import resolve_region

    if ref.kind == "sagemaker":
        return ("sagemaker", ref.session_region(region) or resolve_region(None), ref.name)
    parts = urlsplit(ref.root)
    host = (parts.hostname or "").lower()
    port = parts.port or (443 if parts.scheme == "https" else 80)
    return ("url", parts.scheme.lower(), "loopback" if host in _LOOPBACK else host, str(port), parts.path)


def _component_model(sm: Any, ref: Any) -> str | None:
    """The model the addressed inference component names (its config's variant names none); None otherwise."""
    if not getattr(ref, "inference_component", None):
        return None
    from ..lifecycle.components import describe_component

    return ((describe_component(sm, ref.inference_component) or {}).get("Specification") or {}).get("ModelName")


def target_facts(ref: Any, *, region: str | None = None, profile: str | None = None) -> Any:
    """What a target runs, read before any request: a URL's /metrics (and a `peagle local` server's start-up log
    and state), an endpoint's served config. A read that fails is a note on the facts (unknown), not a failure;
    an endpoint that does not exist is bad input."""
    from .server_facts import ServerFacts, from_speculation

    if ref.is_url:
        import asyncio

        from .server_facts import read_url_facts

        return asyncio.run(read_url_facts(ref))
    from ..aws import AwsSession, error_code, translate_error
    from ..errors import PeagleError
    from ..served_config import read_served_config

    try:
        session = AwsSession(ref.session_region(region), profile)
        sm = session.client("sagemaker")
        served = read_served_config(sm, ref.name, model=_component_model(sm, ref))
    except UsageError:
        raise
    except PeagleError as exc:  # credentials, a profile: the requests will say more
        return ServerFacts(notes=[f"could not read the served config of {ref.name} ({exc.one_line()})"])
    except Exception as exc:  # botocore's errors, through the one AWS classifier
        translated = translate_error(exc)
        if translated is None:
            raise
        if error_code(exc) in ("ValidationException", "ValidationError"):
            raise UsageError(f"endpoint {ref.name!r} not found", "check the name and --region") from None
        return ServerFacts(notes=[f"could not read the served config of {ref.name} ({translated.one_line()})"])
    return from_speculation(served.speculation, served.source)
