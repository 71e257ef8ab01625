"""The emulator's OpenAI-compatible route (server mode): `POST /endpoints/NAME/openai/v1/chat/completions`, and for an
inference component `POST /endpoints/NAME/inference-components/COMPONENT/openai/v1/chat/completions`.

As SageMaker serves it: a bearer token is required and checked before anything else, then the endpoint
must exist and be InService (the same ValidationError answers as InvokeEndpoint), then the inference component (if
the endpoint hosts components) must have a copy in service (`emulator.components.invocation`; its refusals come in
the OpenAI envelope SageMaker's front door answers with), then the request body goes to the endpoint's container
untouched and the container's answer comes back as is, status, headers and SSE stream included (no event-stream
framing). Only chat completions are routed.

The token check (`check_token`) is SigV4's: the `sagemaker-api-key-` prefix, base64 of a presigned
`Action=CallWithBearerToken` request on sagemaker.amazonaws.com with `&Version=1` appended; the signature
is recomputed with botocore's own signer (`SigV4QueryAuth`) from the emulator's credentials
(`emulator.credentials`, access key -> secret; moto's `testing` by default) at the token's own X-Amz-Date;
the credential scope must name the emulator's region and `sagemaker`; the token must not be expired
(`emulator.clock`, injectable, decides "now"). Refusals carry SageMaker's status and JSON body (`REFUSALS`);
the OpenAI SDK raises AuthenticationError for 401 and PermissionDeniedError for 403.

Behind the route: the endpoint's container (`ContainerBackend`) at its own `/v1/chat/completions`, or, without a
backend, the emulator's scripted stand-in (`emulator.runtime`), which answers like vLLM there: `model` missing,
empty or the served name (`peagle-emulated`) is accepted, any other name is vLLM's 404. Why that path and not
`/invocations`: through the real route vLLM refuses an endpoint name in `model` (Bifrost's SageMaker provider
documents it, and sends an empty `model` for that reason; Hugging Face's guide asks for a container that implements
`/v1/chat/completions`), and vLLM refuses it at `/v1/chat/completions` only: its SageMaker `/invocations` handler
serves any `model` (tests/real_vllm/test_emulator_backend.py's test_openai_sdk_through_the_route_to_real_vllm checks
both against vLLM 0.32).
"""

from __future__ import annotations

import base64
import binascii
import hmac
import http.client
import json
import re
from collections.abc import Iterable
from datetime import datetime, timezone
from typing import Any
from urllib.parse import parse_qsl, unquote

from .streaming import chat_json, chat_sse, paced

_ROUTE = re.compile(r"^/endpoints/(?P<name>[^/]+)(?:/inference-components/(?P<component>[^/]+))?/openai/v1(?P<rest>/.*)?$")
CHAT = "/chat/completions"
CONTAINER_PATH = "/v1/chat/completions"  # where the route hands the body to the container (module docstring)
PREFIX = "sagemaker-api-key-"
TOKEN_HOST = "sagemaker.amazonaws.com"
SERVED_MODEL = "peagle-emulated"
MAX_CLOCK_SKEW_S = 300  # SigV4 refuses a signature dated more than 5 minutes ahead

# (HTTP status, x-amzn-ErrorType, message). SageMaker's route and Bedrock's API keys share this token format
# and authorizer; the texts are Bedrock's observed answers, the same family SageMaker's runtime uses.
REFUSALS: dict[str, tuple[int, str, str]] = {
    "missing": (401, "MissingAuthenticationTokenException", "Missing Authentication Token"),
    "malformed": (403, "AccessDeniedException", "Invalid API Key format: Must start with pre-defined prefix"),
    "forged": (403, "AccessDeniedException", "Authentication failed: Please make sure your API Key is valid."),
    "expired": (403, "AccessDeniedException", "Authentication failed: The API Key has expired."),
    "region": (403, "AccessDeniedException", "Authentication failed: Credential should be scoped to a valid region."),
}


def check_token(header: str | None, *, region: str, credentials: dict[str, str], now: float) -> str | None:
    """None if `header` (the Authorization header) carries a valid token, else the REFUSALS key."""
    if not header:
        return "missing"
    scheme, _, token = header.partition(" ")
    if scheme.lower() != "bearer" or not token.strip().startswith(PREFIX):
        return "malformed"
    try:
        presigned = base64.b64decode(token.strip()[len(PREFIX):], validate=True).decode("utf-8")
    except (binascii.Error, UnicodeDecodeError):
        return "malformed"
    host, _, query = presigned.partition("/?")
    pairs = parse_qsl(query, keep_blank_values=True)
    params = dict(pairs)
    if host != TOKEN_HOST or params.get("Action") != "CallWithBearerToken" or params.get("Version") != "1":
        return "malformed"
    try:
        access_key, _day, scope_region, service, _ = params["X-Amz-Credential"].split("/")
        signed_at = datetime.strptime(params["X-Amz-Date"], "%Y%m%dT%H%M%SZ").replace(tzinfo=timezone.utc)
        expires = int(params["X-Amz-Expires"])
        signature = params["X-Amz-Signature"]
    except (KeyError, ValueError):
        return "malformed"
    if service != "sagemaker" or params.get("X-Amz-Algorithm") != "AWS4-HMAC-SHA256":
        return "forged"
    secret = credentials.get(access_key)
    if secret is None or not hmac.compare_digest(
            signature, _signature(query, access_key, secret, params.get("X-Amz-Security-Token"), scope_region,
                                  params["X-Amz-Date"], expires)):
        return "forged"
    if scope_region != region:
        return "region"
    if now > signed_at.timestamp() + expires:
        return "expired"
    if signed_at.timestamp() > now + MAX_CLOCK_SKEW_S:
        return "forged"
    return None


def _signature(query: str, access_key: str, secret: str, session_token: str | None, region: str, stamp: str,
               expires: int) -> str:
    """The signature botocore's SigV4QueryAuth gives this presigned request: the token's own signed query
    (everything before X-Amz-Signature) signed again at the token's own time."""
    from botocore.auth import SigV4QueryAuth
    from botocore.awsrequest import AWSRequest
    from botocore.credentials import Credentials

    signed_query = query.split("&X-Amz-Signature=", 1)[0]
    request = AWSRequest(method="POST", url=f"https://{TOKEN_HOST}/?{signed_query}", headers={"host": TOKEN_HOST})
    request.context["timestamp"] = stamp
    auth = SigV4QueryAuth(Credentials(access_key, secret, session_token), "sagemaker", region, expires=expires)
    return auth.signature(auth.string_to_sign(request, auth.canonical_request(request)), request)


def _reply(start_response: Any, status: int, body: dict[str, Any], error_type: str | None = None) -> list[bytes]:
    headers = [("Content-Type", "application/json")] + ([("x-amzn-ErrorType", error_type)] if error_type else [])
    start_response(f"{status} {http.client.responses.get(status, '')}", headers)
    return [json.dumps(body).encode()]


def openai_route_middleware(app: Any, emulator: Any) -> Any:
    """Serve the route in front of moto (see the module docstring)."""

    def middleware(environ: dict[str, Any], start_response: Any) -> Iterable[bytes]:
        match = _ROUTE.match(environ.get("PATH_INFO", ""))
        if not match:
            return app(environ, start_response)
        refusal = check_token(environ.get("HTTP_AUTHORIZATION"), region=emulator.region,
                              credentials=emulator.credentials, now=emulator.clock())
        if refusal is not None:
            status, error_type, message = REFUSALS[refusal]
            return _reply(start_response, status, {"message": message}, error_type)
        if (match["rest"] or "").rstrip("/") != CHAT or environ.get("REQUEST_METHOD") != "POST":
            return _reply(start_response, 404, {"message": "Only POST /openai/v1/chat/completions is supported "
                                                           "on the OpenAI-compatible route."}, "UnknownOperationException")
        name = match["name"]
        raw = environ["wsgi.input"].read(int(environ.get("CONTENT_LENGTH") or 0))
        status = emulator.endpoint_status(name)
        if status is None:
            return _reply(start_response, 400, {"message": f"Endpoint {name} of account 123456789012 not found."},
                          "ValidationError")
        if status != "InService":
            return _reply(start_response, 400, {"message": f"Endpoint {name} is not in service."}, "ValidationError")
        refusal = _component_refusal(emulator, name, match["component"], environ)
        if refusal is not None:
            return _reply(start_response, refusal[0], {"error": {"message": refusal[2], "type": "invalid_request_error",
                                                                 "code": "validation_error"}}, refusal[1])
        port = emulator.backend.port(name) if emulator.backend is not None else None
        if port is not None:
            return _forward(start_response, port, raw, environ.get("CONTENT_TYPE") or "application/json")
        return _stand_in(start_response, emulator, name, raw)

    return middleware


def _component_refusal(emulator: Any, name: str, component: str | None,
                       environ: dict[str, Any]) -> tuple[int, str, str] | None:
    """The route names a component in its path (`/endpoints/E/inference-components/C/openai/v1/...`); the
    invocation header is refused there, whatever its value (stdapi-ai's measurements, docs/ci.md)."""
    if environ.get("HTTP_X_AMZN_SAGEMAKER_INFERENCE_COMPONENT"):
        return (400, "ValidationError", "The Inference Component Name header is not supported on this route: name the "
                f"component in the path, /endpoints/{name}/inference-components/COMPONENT/openai/v1/chat/completions.")
    return emulator.components.invocation(name, unquote(component) if component else None)


def _forward(start_response: Any, port: int, raw: bytes, content_type: str) -> Iterable[bytes]:
    """The container's answer as is: its status, its content type, its bytes as they arrive."""
    try:
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
        connection.request("POST", CONTAINER_PATH, body=raw, headers={"Content-Type": content_type})
        response = connection.getresponse()
    except OSError as exc:
        return _reply(start_response, 502, {"message": f"the container is unreachable: {exc}"}, "ServiceUnavailable")
    start_response(f"{response.status} {response.reason}",
                   [("Content-Type", response.getheader("Content-Type") or "application/json")])

    def body() -> Iterable[bytes]:
        try:
            while True:
                chunk = response.read1(65536)
                if not chunk:
                    return
                yield chunk
        finally:
            connection.close()

    return body()


def _stand_in(start_response: Any, emulator: Any, name: str, raw: bytes) -> Iterable[bytes]:
    """The scripted endpoint, answering the way vLLM does (see the module docstring)."""
    script = emulator.runtime
    try:
        request = json.loads(raw or b"{}")
    except ValueError:
        request = {}
    script.requests.append(request)
    if script.on_request is not None:
        script.on_request(name, request)
    model = request.get("model")
    if model not in (None, "", SERVED_MODEL):
        return _reply(start_response, 404, {"error": {"message": f"The model `{model}` does not exist.",
                                                      "type": "NotFoundError", "param": "model", "code": 404}})
    if script.model_error:
        code, text = script.model_error
        return _reply(start_response, code, {"error": {"message": text, "type": "InternalServerError",
                                                       "param": None, "code": code}})
    if not request.get("stream"):
        start_response("200 OK", [("Content-Type", "application/json")])
        return [chat_json(script.tokens, model=SERVED_MODEL, spec_decoding=script.spec_decoding)]
    usage = bool((request.get("stream_options") or {}).get("include_usage")) and not script.truncate
    sse = chat_sse(script.tokens, model=SERVED_MODEL, usage=usage, done=not script.truncate,
                   finish_reason=None if script.truncate else "stop", spec_decoding=script.spec_decoding)
    events = [event + b"\n\n" for event in sse.split(b"\n\n") if event]
    start_response("200 OK", [("Content-Type", "text/event-stream; charset=utf-8")])
    return (event for _, event in paced(script, events, emulator.closing))
