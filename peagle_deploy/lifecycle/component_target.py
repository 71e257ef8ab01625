"""Which inference component of an endpoint a client addresses: read from the endpoint, once per command.

An endpoint that hosts inference components (`peagle deploy --hosting component`, docs/hosting.md) serves a
request only when it names one of them (InvokeEndpoint's `InferenceComponentName`, the route's
`/inference-components/NAME` path segment). `invoke`, `bench`, `openai` and `metrics` ask SageMaker which
components the endpoint hosts (ListInferenceComponents by endpoint: a fact, not peagle's tags or a name guessed
from the endpoint's) and address that one; `--component NAME` picks one where it hosts several, and must be one
it hosts. An endpoint that hosts none is addressed as itself.

A listing that fails (no sagemaker:ListInferenceComponents, AWS unreachable after the read retries) is not an
endpoint failure: one note says so and the requests go to the endpoint itself (or to `--component`, unchecked),
and SageMaker's own answer says the rest.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from ..errors import CredentialsError, EndpointFailed, UsageError
from ..runtime.target_ref import TargetRef

_NAME = re.compile(r"^[a-zA-Z0-9]([\-a-zA-Z0-9]*[a-zA-Z0-9])?\Z")  # botocore's InferenceComponentName, <= 63
FAILED = {"Failed", "Deleting"}  # a component in these states serves nothing, now or later


def address_component(ref: TargetRef, session: Any, component: str | None = None, *,
                      note: Callable[[str], None] = lambda _line: None, serving: bool = True,
                      flag: str = "--component") -> TargetRef:
    """`ref` addressed to the inference component its endpoint hosts (or `component`, checked against the
    endpoint's); unchanged for an endpoint that hosts none. One ListInferenceComponents, read-retried. `serving`:
    a Failed or Deleting component is refused (False: addressed anyway, as `logs` reads why it failed). `flag`: the
    command's option that names the component (bench agree has one per target), which the hints name."""
    if component is not None and (len(component) > 63 or not _NAME.match(component)):
        raise UsageError(f"{flag} {component!r} is not an inference component name",
                         "letters, digits and hyphens, at most 63 (peagle status NAME shows the endpoint's)")
    wanted = component or ref.inference_component
    if ref.kind != "sagemaker":
        if component:
            raise UsageError(f"{flag} names an inference component of a SageMaker endpoint; {ref.name} is a "
                             "server URL", f"drop {flag}")
        return ref
    if component and ref.inference_component and component != ref.inference_component:
        raise UsageError(f"{flag} {component} differs from the component the URL names "
                         f"({ref.inference_component})", f"drop {flag}, or pass the URL of that component")
    from .. import clock
    from ..aws import translate_error
    from .components import list_components
    from .wait import read_retrying

    try:
        hosted = read_retrying(lambda: list_components(session.client("sagemaker"), ref.name), sleep=clock.sleep)
    except Exception as exc:  # noqa: BLE001 - a read failure is not an endpoint failure
        error = translate_error(exc)
        if error is None:
            raise
        if isinstance(error, CredentialsError) and error.message.startswith("no usable AWS credentials"):
            raise error from None  # the requests would fail the same way: said once, by the command's own line
        to = f"inference component {wanted} (not checked)" if wanted else f"endpoint {ref.name} itself"
        note(f"could not list the inference components of {ref.name} ({error.one_line()}); the requests go to {to}")
        return with_component(ref, wanted) if wanted else ref
    names = [c["InferenceComponentName"] for c in hosted]
    if not names:
        if wanted:
            raise UsageError(f"endpoint {ref.name} hosts no inference component (asked for {wanted})",
                             f"drop {flag}: the requests go to the endpoint itself")
        return ref
    if wanted and wanted not in names:
        raise UsageError(f"endpoint {ref.name} hosts no inference component {wanted!r}; it hosts "
                         f"{', '.join(sorted(names))}", f"pass {flag} {sorted(names)[0]}"
                         if len(names) == 1 else f"pass {flag} with one of them")
    if not wanted and len(names) > 1:
        raise UsageError(f"endpoint {ref.name} hosts {len(names)} inference components ({', '.join(sorted(names))})",
                         f"pick one with {flag} NAME")
    chosen = wanted or names[0]
    status = next(c.get("InferenceComponentStatus") for c in hosted if c["InferenceComponentName"] == chosen)
    if serving and status in FAILED:
        raise EndpointFailed(f"inference component {chosen} of endpoint {ref.name} is {status}: it serves nothing",
                             f"see why with 'peagle status {ref.name}'")
    return with_component(ref, chosen)


def with_component(ref: TargetRef, component: str) -> TargetRef:
    """`ref` addressing `component`; a route URL's base names it in its path."""
    update: dict[str, Any] = {"inference_component": component}
    if ref.api_base:
        from ..runtime.openai_route import route_path

        old = route_path(ref.name, ref.inference_component)
        if ref.api_base.endswith(old):
            update["api_base"] = ref.api_base[:-len(old)] + route_path(ref.name, component)
    return ref.model_copy(update=update)
