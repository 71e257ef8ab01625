"""What a target is, decided once for invoke, bench and metrics.

A target is a SageMaker endpoint name, a container URL (the SageMaker container contract: `/ping`,
`/invocations`) or an OpenAI-compatible URL (`.../v1`). Every spelling of a URL a user may paste maps to
one server root, and from it to one request URL, one metrics URL and one ping URL:

    http://h:8080                          container  POST http://h:8080/invocations
    http://h:8080/invocations              container  POST http://h:8080/invocations
    http://h:8000/v1                       openai     POST http://h:8000/v1/chat/completions
    http://h:8000/v1/chat/completions      openai     POST http://h:8000/v1/chat/completions
    http://h:8000/metrics (or /ping, /health)  container (the server root)

vLLM serves `/metrics`, `/ping` and `/health` at the server root, whatever the API path.

A SageMaker endpoint is reached by one of two transports: `invoke-endpoint` (InvokeEndpoint and
InvokeEndpointWithResponseStream, SigV4; the default) or `openai-route` (SageMaker's OpenAI-compatible
route, plain SSE, a bearer token made on the fly; `runtime.openai_route`). The route is chosen by the
route's own URL, as `peagle openai NAME` prints it, or by `--transport openai-route` with the name:

    https://runtime.sagemaker.us-east-1.amazonaws.com/endpoints/NAME/openai/v1   sagemaker NAME, openai-route
    (any host)/endpoints/NAME/openai/v1[/chat/completions]                          (the emulator, a VPC endpoint)
    .../endpoints/NAME/inference-components/COMPONENT/openai/v1                     sagemaker NAME, its COMPONENT
    NAME --transport openai-route                                                   the URL botocore resolves

Either way the target stays the endpoint NAME (its tags, its CloudWatch logs, its metrics); only the
transport of the requests differs. `--target-kind openai` still treats such a URL as a plain OpenAI server.

An endpoint that hosts inference components is addressed through one of them (`inference_component`: the
`InferenceComponentName` of InvokeEndpoint, the component's segment of the route's path, its own log group);
which one is a fact read from the endpoint once per command (`lifecycle.component_target`), not parsed here,
except from a route URL that names it.
"""

from __future__ import annotations

import re
from typing import Literal
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field

from ..errors import UsageError
from ..log_groups import component_log_group, endpoint_log_group
from ..redaction import redact_url, register_url

Kind = Literal["sagemaker", "container", "openai"]
KINDS = ("sagemaker", "container", "openai")
Transport = Literal["invoke-endpoint", "openai-route"]
TRANSPORTS = ("invoke-endpoint", "openai-route")
# the route's path, after any prefix of the host's (a proxy, the emulator); and the region in an AWS host name
_ROUTE_PATH = re.compile(r"^(?P<prefix>.*)/endpoints/(?P<name>[^/]+)(?:/inference-components/(?P<component>[^/]+))?"
                         r"/openai/v1(?:/chat/completions)?\Z")
_RUNTIME_HOST = re.compile(r"^runtime(?:-fips)?\.sagemaker\.(?P<region>[a-z0-9-]+)\.amazonaws\.com(?:\.cn)?$")
_ENDPOINT_NAME = re.compile(r"^[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}\Z")  # SageMaker's EndpointName pattern
_SERVER_PATHS = ("/metrics", "/ping", "/health")


class TargetRef(BaseModel):
    """A parsed target. `root` is the server root for URL targets (scheme, host, port, any path prefix)."""

    model_config = ConfigDict(frozen=True)

    kind: Kind
    name: str  # what the user typed (trailing slash removed), any user information as *** (redaction.py)
    root: str | None = None  # never with user information: that travels only in `authorization`
    api_base: str | None = None  # openai: the .../v1 base; sagemaker over the route: the route's URL, if given
    transport: Transport | None = None  # sagemaker only
    region: str | None = None  # sagemaker: the region an AWS route URL names
    inference_component: str | None = None  # sagemaker: the component of the endpoint the requests address
    # `Authorization` header from the URL's user:password (HTTP Basic, as curl sends it); never dumped or shown
    authorization: str | None = Field(None, exclude=True, repr=False)

    @property
    def headers(self) -> dict[str, str]:
        """What every request to this target carries besides its body (its credentials, if any)."""
        return {"Authorization": self.authorization} if self.authorization else {}

    @property
    def is_url(self) -> bool:
        return self.kind != "sagemaker"

    @property
    def is_route(self) -> bool:
        return self.transport == "openai-route"

    @property
    def request_url(self) -> str | None:
        if self.kind == "container":
            return self.root + "/invocations"
        if self.kind == "openai" or (self.is_route and self.api_base):
            return self.api_base + "/chat/completions"
        return None

    @property
    def models_url(self) -> str | None:
        return self.api_base + "/models" if self.kind == "openai" else None

    @property
    def metrics_url(self) -> str | None:
        return self.root + "/metrics" if self.root is not None else None

    @property
    def ping_url(self) -> str | None:
        if self.kind == "container":
            return self.root + "/ping"
        if self.kind == "openai":
            return self.root + "/health"
        return None

    @property
    def log_group(self) -> str | None:
        """Where the container writes: the endpoint's group, or its inference component's own."""
        if self.kind != "sagemaker":
            return None
        if self.inference_component:
            return component_log_group(self.inference_component)
        return endpoint_log_group(self.name)

    @property
    def log_hint(self) -> str:
        if self.kind == "sagemaker" and self.inference_component:
            return f"container logs: aws logs tail {self.log_group} --since 1h"
        if self.kind == "sagemaker":
            return f"container logs: peagle logs {self.name} (CloudWatch log group {self.log_group})"
        return "check the server's own log"

    @property
    def described(self) -> str:
        """'endpoint E' or 'inference component C of endpoint E' (an URL: itself), for messages."""
        if self.kind == "sagemaker" and self.inference_component:
            return f"inference component {self.inference_component} of endpoint {self.name}"
        return f"endpoint {self.name}" if self.kind == "sagemaker" else self.name

    def session_region(self, region: str | None) -> str | None:
        """--region, else the region the route URL names; both given must agree."""
        if region and self.region and region != self.region:
            raise UsageError(f"--region {region} differs from the region in {self.api_base} ({self.region})",
                             "drop --region, or pass the URL of that region")
        return region or self.region


def parse_target(text: str, kind: str | None = None, transport: str | None = None) -> TargetRef:
    """The one rule. `kind` forces the kind of a URL (`--target-kind`); `transport` picks how a SageMaker
    endpoint is reached (`--transport`, default invoke-endpoint, or openai-route for a route URL)."""
    if kind is not None and kind not in KINDS:
        raise UsageError(f"unknown target kind {kind!r}", "use sagemaker, container or openai")
    if transport is not None and transport not in TRANSPORTS:
        raise UsageError(f"unknown transport {transport!r}", "use invoke-endpoint or openai-route")
    text = (text or "").strip()
    if not text.startswith(("http://", "https://")):
        if "://" in text:
            raise UsageError(f"unsupported target URL {text!r}", "use http(s)://host:port or an endpoint name")
        if kind not in (None, "sagemaker"):
            raise UsageError(f"--target-kind {kind} needs a URL, got {text!r}", "pass http(s)://host:port")
        if not _ENDPOINT_NAME.match(text):
            raise UsageError(f"{text!r} is neither a URL nor a SageMaker endpoint name",
                             "pass http(s)://host:port[/v1] or an endpoint name (letters, digits, hyphens, <= 63)")
        return TargetRef(kind="sagemaker", name=text, transport=transport or "invoke-endpoint")
    authorization = register_url(text)  # before any message can quote it
    route = _route(text) if kind in (None, "sagemaker") else None
    if route is not None:
        return route.model_copy(update={"transport": transport or "openai-route"})
    if kind == "sagemaker":
        raise UsageError(f"--target-kind sagemaker needs an endpoint name, got the URL {text!r}",
                         "pass the endpoint name (or its OpenAI route URL, .../endpoints/NAME/openai/v1)")
    if transport is not None:
        raise UsageError(f"--transport picks how a SageMaker endpoint is reached; {text!r} is a server URL",
                         "pass the endpoint name, or drop --transport")
    try:
        parts = urlsplit(text)
    except ValueError as exc:  # 'Invalid IPv6 URL': an unclosed [ is the user's typo, not a bug
        raise UsageError(f"target URL {text!r} is not a valid URL ({exc})",
                         "use http://host:port, with an IPv6 address in brackets: http://[::1]:8080") from None
    try:
        port = parts.port
    except ValueError:
        raise UsageError(f"the port in {text!r} is not a number from 1 to 65535", "use e.g. http://127.0.0.1:8080") \
            from None
    if not parts.hostname:
        raise UsageError(f"target URL {text!r} has no host", "use http://host:port")
    if port == 0:
        raise UsageError(f"the port in {text!r} is not a number from 1 to 65535", "use e.g. http://127.0.0.1:8080")
    if parts.query or parts.fragment:
        raise UsageError(f"target URL {text!r} has a query or fragment", "pass the server URL only")
    origin = f"{parts.scheme}://{parts.netloc.rpartition('@')[2]}"
    path = parts.path.rstrip("/")
    for suffix in _SERVER_PATHS:
        if path.endswith(suffix):
            path = path.removesuffix(suffix)
            break
    if path.endswith("/chat/completions"):
        base = path.removesuffix("/chat/completions")
        guessed: Kind = "openai"
    elif path.endswith("/v1"):
        base, guessed = path, "openai"
    elif path.endswith("/invocations"):
        base, guessed = path.removesuffix("/invocations"), "container"
    else:
        base, guessed = path, "container"
    resolved: Kind = kind or guessed  # type: ignore[assignment]
    root = origin + (base.removesuffix("/v1") if guessed == "openai" else base)
    api_base = None
    if resolved == "openai":
        api_base = origin + (base if guessed == "openai" else base + "/v1")
    return TargetRef(kind=resolved, name=redact_url(text.rstrip("/")), root=root, api_base=api_base,
                     authorization=authorization)


def _route(text: str) -> TargetRef | None:
    """A URL of SageMaker's OpenAI route (`.../endpoints/NAME/openai/v1[/chat/completions]`), else None."""
    try:
        parts = urlsplit(text)
    except ValueError:  # not a URL at all: the caller says so
        return None
    match = _ROUTE_PATH.match(parts.path.rstrip("/"))
    if match is None or not parts.hostname or parts.query or parts.fragment:
        return None
    name, component = match["name"], match["component"]
    for what, value in (("endpoint", name), ("inference component", component)):
        if value is not None and not _ENDPOINT_NAME.match(value):
            raise UsageError(f"{value!r} in {text!r} is not a SageMaker {what} name",
                             "letters, digits and hyphens, at most 63")
    from .openai_route import route_path

    host = _RUNTIME_HOST.match(parts.hostname)
    host_port = parts.hostname + (f":{parts.port}" if parts.port else "")  # no user information: a bearer token
    base = f"{parts.scheme}://{host_port}{match['prefix']}{route_path(name, component)}"
    return TargetRef(kind="sagemaker", name=name, api_base=base, region=host["region"] if host else None,
                     inference_component=component)

