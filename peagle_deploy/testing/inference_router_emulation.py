"""Inference routers for the emulator: SageMaker's router operations and `sagemaker-inference-router-runtime`.

moto (5.2) has neither. Modelled after botocore 1.44's service models and their documentation:
- CreateInferenceRouter / DescribeInferenceRouter / ListInferenceRouters / UpdateInferenceRouter /
  DeleteInferenceRouter (every router operation of this SageMaker model), with tags (ListTags, AddTags, DeleteTags
  on the router's ARN) and the emulator's faults, gates and delays like every SageMaker action;
- a routing target's destinations are endpoints in any region of the emulator; CreateInferenceRouter accepts one
  that does not exist (as SageMaker does) but refuses a real-time endpoint in an asynchronous target and the
  reverse; DescribeInferenceRouter gives each destination's RoutingStatus now (Routable: the endpoint is
  InService or Updating; Unroutable: missing, Creating, Failed...; Unknown: another account or an inference
  component, which the emulator does not check);
- InvokeInferenceRouter (`POST /inference-routers/NAME/invocations`, the target named in the
  X-Amzn-SageMaker-Routing-Target-Name header) routes LocalRegionFirst: a routable destination in the router's own
  region (`local-preferred`), else the routable ones elsewhere in turn (`capacity-available`, or `only-healthy`
  when there is one); a destination that answers a throttle or a 5xx is retried once on the next one
  (`failover`); with none routable it tries the first anyway and answers what that endpoint answers (e.g.
  ValidationError "Endpoint NAME of account ... not found."). The answer is the endpoint's own (the emulator's InvokeEndpoint: the scripted stand-in or the
  container backend in server mode, moto's canned bodies in-process) with the routing headers;
- not modelled: InvokeInferenceRouterAsync (refused), a router's Creating/Updating/Deleting phases (it is
  InService at once, so ConflictException never happens), cross-account destinations. botocore's router runtime
  has no streaming operation: a stream goes to an endpoint itself (InvokeEndpointWithResponseStream).

Routers live on moto's SageMaker backend of their region, so moto's reset forgets them with everything else.
"""

from __future__ import annotations

import io
import json
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from .streaming import scope_region

ACCOUNT = "123456789012"
_ROUTE = re.compile(r"^/inference-routers/(?P<name>[^/]+)/(?P<op>invocations|async-invocations)$")
_DESTINATION = re.compile(r"^arn:aws[a-z-]*:sagemaker:(?P<region>[a-z0-9-]+):(?P<account>\d{12}):"
                          r"(?P<kind>endpoint|inference-component)/(?P<name>.+)$")
TARGET_HEADER = "X-Amzn-SageMaker-Routing-Target-Name"
ROUTABLE = ("InService", "Updating", "SystemUpdating")
DEFAULT_PREFERENCE = "LocalRegionFirst"
Answer = tuple[int, dict[str, str], bytes]


@dataclass
class Router:
    name: str
    arn: str
    targets: list[dict[str, Any]]
    tags: list[dict[str, str]]  # moto's tag operations read and write `tags`
    created: Any
    modified: Any
    turns: dict[str, int] = field(default_factory=dict)  # routing target -> requests routed (destinations in turn)


@dataclass
class _Destination:
    arn: str
    region: str | None
    name: str | None  # the endpoint's name (None: not an endpoint of this account)
    endpoint: Any  # moto's FakeEndpoint, None when not found or not checked
    status: str  # RoutingStatus


def routers(backend: Any) -> dict[str, Router]:
    """The routers of one region (moto's SageMaker backend of that region)."""
    return backend.__dict__.setdefault("peagle_inference_routers", {})


def _error(code: str, message: str) -> Exception:
    from moto.core.exceptions import JsonRESTError

    return JsonRESTError(code, message)


def _sagemaker(region: str) -> Any:
    from moto.sagemaker.models import sagemaker_backends

    return sagemaker_backends[ACCOUNT][region]


def destination(arn: str) -> _Destination:
    """Where a destination ARN points and whether a request can go there now."""
    match = _DESTINATION.match(arn)
    if match is None or match["account"] != ACCOUNT or match["kind"] != "endpoint":
        return _Destination(arn, match["region"] if match else None, None, None, "Unknown")
    try:
        endpoints = _sagemaker(match["region"]).endpoints
    except KeyError:  # a region moto does not know
        return _Destination(arn, match["region"], match["name"], None, "Unroutable")
    found = next((e for name, e in list(endpoints.items()) if name.lower() == match["name"].lower()), None)
    routable = found is not None and found.endpoint_status in ROUTABLE
    return _Destination(arn, match["region"], found.endpoint_name if found else match["name"], found,
                        "Routable" if routable else "Unroutable")


def _checked_targets(targets: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """RoutingTargets as SageMaker keeps them (RoutingStatus dropped, the default preference filled in), after
    its checks: unique target names, unique destinations per target, InstancePoolOrder only for asynchronous
    targets, and each existing endpoint of the kind (real-time or asynchronous) its target serves."""
    names = [t.get("Name") for t in targets]
    if len(set(names)) != len(names):
        raise _error("ValidationException", "Routing target names must be unique within an inference router "
                                            "(emulated).")
    kept = []
    for target in targets:
        arns = [d.get("ResourceArn") for d in target.get("Destinations") or []]
        if len(set(arns)) != len(arns):
            raise _error("ValidationException", f"Routing target {target['Name']} lists a destination more than "
                                                "once (emulated).")
        asynchronous = target.get("AsyncInferenceConfig") is not None
        preference = target.get("RoutingPreference") or DEFAULT_PREFERENCE
        if preference == "InstancePoolOrder" and not asynchronous:
            raise _error("ValidationException", f"Routing target {target['Name']}: RoutingPreference "
                                                "InstancePoolOrder is supported only for asynchronous routing targets "
                                                "(emulated).")
        for arn in arns:
            found = destination(arn)
            if found.endpoint is None:
                continue  # SageMaker accepts a destination it cannot check; requests to it fail
            config = _sagemaker(found.region).endpoint_configs.get(found.endpoint.endpoint_config_name)
            if bool(getattr(config, "async_inference_config", None)) != asynchronous:
                kind = "an asynchronous" if not asynchronous else "a real-time"
                raise _error("ValidationException", f"Destination {arn} is {kind} endpoint, which routing target "
                                                    f"{target['Name']} cannot use (emulated).")
        kept.append({**{k: v for k, v in target.items() if k != "Destinations"}, "RoutingPreference": preference,
                     "Destinations": [{"ResourceArn": arn} for arn in arns]})
    return kept


def _router(backend: Any, name: str) -> Router:
    router = routers(backend).get(name)
    if router is None:
        raise _error("ResourceNotFound", f"Could not find inference router "
                                         f"'arn:aws:sagemaker:{backend.region_name}:{ACCOUNT}:inference-router/{name}'.")
    return router


# SageMaker's control plane: methods of moto's SageMakerResponse (they go through the emulator's call_action) ----
def create_inference_router(response_self: Any) -> Any:
    from moto.core.responses import ActionResult
    from moto.core.utils import utcnow

    body = json.loads(response_self.body or "{}")
    backend = response_self.sagemaker_backend
    name = body["InferenceRouterName"]
    arn = f"arn:aws:sagemaker:{backend.region_name}:{ACCOUNT}:inference-router/{name}"
    if name in routers(backend):
        raise _error("ResourceAlreadyExists", f'Cannot create already existing inference router "{arn}".')
    now = utcnow()
    routers(backend)[name] = Router(name, arn, _checked_targets(body["RoutingTargets"]), list(body.get("Tags") or []),
                                    now, now)
    return ActionResult({"InferenceRouterArn": arn})


def describe_inference_router(response_self: Any) -> Any:
    from moto.core.responses import ActionResult

    body = json.loads(response_self.body or "{}")
    router = _router(response_self.sagemaker_backend, body["InferenceRouterName"])
    targets = [{**target, "Destinations": [{"ResourceArn": d["ResourceArn"],
                                            "RoutingStatus": destination(d["ResourceArn"]).status}
                                           for d in target["Destinations"]]} for target in router.targets]
    return ActionResult({"InferenceRouterName": router.name, "InferenceRouterArn": router.arn,
                         "RoutingTargets": targets, "Status": "InService", "CreationTime": router.created,
                         "LastModifiedTime": router.modified})


def list_inference_routers(response_self: Any) -> Any:
    from moto.core.responses import ActionResult

    body = json.loads(response_self.body or "{}")
    found = sorted(routers(response_self.sagemaker_backend).values(), key=lambda r: (r.created, r.name))
    start, size = int(body.get("NextToken") or 0), int(body.get("MaxResults") or 100)
    answer: dict[str, Any] = {"InferenceRouters": [
        {"InferenceRouterName": r.name, "InferenceRouterArn": r.arn, "CreationTime": r.created,
         "LastModifiedTime": r.modified} for r in found[start:start + size]]}
    if start + size < len(found):
        answer["NextToken"] = str(start + size)
    return ActionResult(answer)


def update_inference_router(response_self: Any) -> Any:
    from moto.core.responses import ActionResult
    from moto.core.utils import utcnow

    body = json.loads(response_self.body or "{}")
    router = _router(response_self.sagemaker_backend, body["InferenceRouterName"])
    router.targets = _checked_targets(body["RoutingTargets"])  # the whole list is replaced
    router.modified = utcnow()
    return ActionResult({"InferenceRouterArn": router.arn})


def delete_inference_router(response_self: Any) -> Any:
    from moto.core.responses import EmptyResult

    body = json.loads(response_self.body or "{}")
    backend = response_self.sagemaker_backend
    _router(backend, body["InferenceRouterName"])
    del routers(backend)[body["InferenceRouterName"]]
    return EmptyResult()


# the runtime -------------------------------------------------------------------------------------------
def _json_error(status: int, code: str, message: str, extra: dict[str, Any] | None = None) -> Answer:
    return status, {"Content-Type": "application/json", "x-amzn-ErrorType": code}, \
        json.dumps({"message": message, **(extra or {})}).encode()


def invoke(emulator: Any, region: str, router_name: str, target_name: str | None,
           call: Callable[[str, str], Answer], caller: str | None = None) -> Answer:
    """InvokeInferenceRouter in `region`: faults and gates first, then the route (module docstring). `call(region,
    endpoint name)` asks the destination endpoint, as InvokeEndpoint, and returns its (status, headers, body)."""
    names = frozenset({router_name})
    injected, after = emulator._before_action("InvokeInferenceRouter", caller, names)
    if injected is not None:
        status, headers, body = injected
        return status, headers, body.encode()
    gate = emulator._take_gate("InvokeInferenceRouter", caller, names)
    if gate is not None and gate.when == "before":
        gate.hold()
    try:
        answer = _route(region, router_name, target_name, call)
    finally:
        if gate is not None:
            if gate.when == "after":
                gate.hold()
            gate.done.set()
    return answer if after is None else _json_error(after.status, after.code, after.message)


def _route(region: str, router_name: str, target_name: str | None, call: Callable[[str, str], Answer]) -> Answer:
    router = routers(_sagemaker(region)).get(router_name)
    if router is None:
        return _json_error(400, "ValidationException", f"Inference router {router_name} not found (emulated).")
    target = next((t for t in router.targets if t["Name"] == target_name), None)
    if target is None:
        return _json_error(400, "ValidationException", f"Inference router {router_name} has no routing target "
                                                       f"{target_name} (emulated).")
    if target.get("AsyncInferenceConfig") is not None:
        return _json_error(400, "ValidationException", f"Routing target {target_name} is asynchronous: use "
                                                       "InvokeInferenceRouterAsync (emulated).")
    listed = [destination(x["ResourceArn"]) for x in target["Destinations"]]
    healthy = [d for d in listed if d.status == "Routable"]
    local = [d for d in healthy if d.region == region]
    group = local or healthy
    if not group:  # "no destination is healthy and the router tries one anyway": its own answer comes back
        tried = next((d for d in listed if d.name is not None), None)
        if tried is None:
            return _json_error(503, "ServiceUnavailableException", f"No destination of routing target "
                                                                   f"{target_name} can take the request (emulated).")
        return call(tried.region, tried.name)
    reason = "local-preferred" if local else "capacity-available" if len(group) > 1 else "only-healthy"
    turn = router.turns.get(target["Name"], 0)
    router.turns[target["Name"]] = turn + 1
    order = group[turn % len(group):] + group[:turn % len(group)]
    order += [d for d in healthy if d not in order]  # a retry may leave the region
    chosen = order[0]
    status, headers, body = call(chosen.region, chosen.name)
    if (status == 429 or status >= 500) and len(order) > 1:  # retried once, on another destination
        chosen, reason = order[1], "failover"
        status, headers, body = call(chosen.region, chosen.name)
    if status != 200:
        return status, headers, body
    variants = chosen.endpoint.production_variants or [{}]
    return 200, {"Content-Type": headers.get("Content-Type") or "application/json",
                 "X-Amzn-SageMaker-Invoked-Routed-Resource-Arn": chosen.arn,
                 "X-Amzn-SageMaker-Invoked-Routing-Reason": reason,
                 "X-Amzn-Invoked-Production-Variant": variants[0].get("VariantName", "AllTraffic")}, body


def _not_modelled(op: str) -> Answer | None:
    if op == "async-invocations":
        return _json_error(400, "ValidationException", "InvokeInferenceRouterAsync is not modelled by the emulator "
                                                       "(emulated).")
    return None


def router_middleware(app: Any, emulator: Any) -> Any:
    """Server mode: the router runtime's invocations; the destination is asked through the rest of the emulator
    (`app`) as an InvokeEndpoint signed for the destination's region."""

    def middleware(environ: dict[str, Any], start_response: Any) -> Iterable[bytes]:
        match = _ROUTE.match(environ.get("PATH_INFO", ""))
        if not match or environ.get("REQUEST_METHOD") != "POST":
            return app(environ, start_response)
        raw = environ["wsgi.input"].read(int(environ.get("CONTENT_LENGTH") or 0))
        authorization = environ.get("HTTP_AUTHORIZATION") or ""

        def call(region: str, endpoint_name: str) -> Answer:
            inner = {key: value for key, value in environ.items() if key != "HTTP_X_AMZN_SAGEMAKER_ROUTING_TARGET_NAME"}
            inner.update({"PATH_INFO": f"/endpoints/{endpoint_name}/invocations", "wsgi.input": io.BytesIO(raw),
                          "CONTENT_LENGTH": str(len(raw)),
                          "HTTP_AUTHORIZATION": re.sub(r"(Credential=[^/,]+/\d{8}/)[a-z0-9-]+/", rf"\g<1>{region}/",
                                                       authorization)})
            seen: dict[str, Any] = {}

            def start(status: str, headers: list[tuple[str, str]], exc_info: Any = None) -> None:
                seen.update(status=int(status.split()[0]), headers=dict(headers))

            chunks = app(inner, start)
            try:
                body = b"".join(chunks)
            finally:
                getattr(chunks, "close", lambda: None)()
            return seen["status"], seen["headers"], body

        caller = re.search(r"\bapp/(\S+)", environ.get("HTTP_USER_AGENT", ""))
        status, headers, body = _not_modelled(match["op"]) or invoke(
            emulator, scope_region(authorization, emulator.region), match["name"],
            environ.get("HTTP_X_AMZN_SAGEMAKER_ROUTING_TARGET_NAME"), call, caller[1] if caller else None)
        start_response(f"{status} {'OK' if status == 200 else 'Error'}", list(headers.items()))
        return [body]

    return middleware


def router_patches(emulator: Any) -> list[Any]:
    """The router operations on moto's SageMaker responses, router ARNs for the tag operations, and (in-process)
    the router runtime answered from moto's request stubber."""
    from unittest import mock

    from moto.core.botocore_stubber import BotocoreStubber
    from moto.sagemaker import models as sm_models
    from moto.sagemaker.responses import SageMakerResponse

    from .patching import stacked as _wrap

    def resource_from_arn(original: Any) -> Any:
        def wrapped(backend: Any, arn: str) -> Any:
            if ":inference-router/" not in arn:
                return original(backend, arn)
            router = routers(backend).get(arn.rsplit("/", 1)[-1])
            if router is None:
                from moto.sagemaker.exceptions import ValidationError

                raise ValidationError(message=f"Could not find resource {arn}")
            return router
        return wrapped

    def stubber(original: Any) -> Any:
        def process_request(stubber_self: Any, request: Any) -> Any:
            from urllib.parse import urlsplit

            url = urlsplit(request.url)
            match = _ROUTE.match(url.path)
            if not match or not (url.hostname or "").startswith("inferencerouter-runtime."):
                return original(stubber_self, request)
            headers = {k.lower(): v.decode() if isinstance(v, bytes) else v for k, v in request.headers.items()}
            raw = request.body or b""
            raw = raw.encode() if isinstance(raw, str) else raw

            def call(region: str, endpoint_name: str) -> Answer:
                """InvokeEndpoint in-process: the runtime's checks (streaming.runtime_middleware's texts), then
                moto's canned answer."""
                from moto.sagemakerruntime.models import sagemakerruntime_backends

                status = emulator.endpoint_status(endpoint_name, region)
                if status is None:
                    return _json_error(400, "ValidationError", f"Endpoint {endpoint_name} of account {ACCOUNT} "
                                                               "not found.")
                if status != "InService":
                    return _json_error(400, "ValidationError", f"Endpoint {endpoint_name} is not in service.")
                body, content_type, _variant, _attributes = sagemakerruntime_backends[ACCOUNT][region].invoke_endpoint(
                    endpoint_name, raw)
                return 200, {"Content-Type": content_type}, body.encode() if isinstance(body, str) else body

            caller = re.search(r"\bapp/(\S+)", headers.get("user-agent", ""))
            return _not_modelled(match["op"]) or invoke(
                emulator, scope_region(headers.get("authorization"), emulator.region), match["name"],
                headers.get(TARGET_HEADER.lower()), call, caller[1] if caller else None)
        return process_request

    operations = {"create_inference_router": create_inference_router,
                  "describe_inference_router": describe_inference_router,
                  "list_inference_routers": list_inference_routers,
                  "update_inference_router": update_inference_router,
                  "delete_inference_router": delete_inference_router}
    return [*(mock.patch.object(SageMakerResponse, name, method, create=True) for name, method in operations.items()),
            _wrap(sm_models.SageMakerModelBackend, "_get_resource_from_arn", resource_from_arn),
            _wrap(BotocoreStubber, "process_request", stubber)]
