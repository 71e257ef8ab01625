"""SageMaker's OpenAI-compatible route: an endpoint's base URL and the bearer token that opens it.

Every real-time endpoint also answers `POST <sagemaker-runtime>/endpoints/NAME/openai/v1/chat/completions`
(the container's answer as is, SSE streaming included; only chat completions are routed) to
`Authorization: Bearer sagemaker-api-key-...`. The token is a presigned SigV4 request of
`Action=CallWithBearerToken` made locally from the caller's credentials by sagemaker-core's generator
(`sagemaker.core.token_generator.generate_token`, imported lazily): peagle signs nothing itself. Whoever
holds the token acts as the caller until it expires, and needs `sagemaker:CallWithBearerToken` and
`sagemaker:InvokeEndpoint` (docs/openai.md).

The base URL is botocore's own sagemaker-runtime endpoint for the session, so the region,
AWS_ENDPOINT_URL / AWS_ENDPOINT_URL_SAGEMAKER_RUNTIME (the emulator) and FIPS settings apply exactly as
they do to InvokeEndpoint. A token is registered with `redaction.register_secret` the moment it exists:
only the one output that asks for it (`peagle openai`: `Output.result(..., reveal=...)`) ever shows it.
"""

from __future__ import annotations

import base64
import time
from collections.abc import Callable
from datetime import datetime, timedelta, timezone
from typing import Any
from urllib.parse import parse_qsl

from pydantic import BaseModel, SecretStr

from ..errors import CredentialsError, UsageError

TOKEN_PREFIX = "sagemaker-api-key-"
MAX_LIFETIME = timedelta(hours=12)  # sagemaker-core's TOKEN_DURATION: SageMaker's limit
ON_THE_FLY_LIFETIME = timedelta(hours=1)  # invoke and bench: renewed before it runs out
RENEW_BEFORE = timedelta(minutes=5)


def route_path(name: str, component: str | None = None) -> str:
    """The route's path of an endpoint, or of one of its inference components: the route names the component in
    its path, and refuses InvokeEndpoint's component header whatever its value (measured by stdapi-ai,
    docs/openai.md)."""
    middle = f"/inference-components/{component}" if component else ""
    return f"/endpoints/{name}{middle}/openai/v1"


class BearerToken(BaseModel):
    """A token and what it says of itself (its signing time plus lifetime, its credential scope's region)."""

    value: SecretStr  # a credential: repr and model dumps show '**********'
    expires_at: datetime
    region: str


def base_url(session: Any, name: str, component: str | None = None) -> str:
    """`<sagemaker-runtime endpoint>/endpoints/NAME[/inference-components/COMPONENT]/openai/v1` for the session's
    region and endpoint settings."""
    endpoint = session.client("sagemaker-runtime").meta.endpoint_url.rstrip("/")
    return endpoint + route_path(name, component)


def route_info(session: Any, name: str, component: str | None = None) -> dict[str, str]:
    """What deploy and status say of an InService endpoint's route (or its inference component's): its base URL
    and the command for a token."""
    return {"base_url": base_url(session, name, component),
            "command": f"peagle openai {name} --region {session.region}"}


def token_facts(token: str) -> tuple[datetime, str]:
    """(expiry, region) read from the token's own presigned query: X-Amz-Date + X-Amz-Expires, and the
    region of X-Amz-Credential. Raises ValueError for anything that is not such a token."""
    if not token.startswith(TOKEN_PREFIX):
        raise ValueError("no sagemaker-api-key- prefix")
    presigned = base64.b64decode(token[len(TOKEN_PREFIX):], validate=True).decode("utf-8")
    params = dict(parse_qsl(presigned.partition("?")[2], keep_blank_values=True))
    signed = datetime.strptime(params["X-Amz-Date"], "%Y%m%dT%H%M%SZ").replace(tzinfo=timezone.utc)
    region = params["X-Amz-Credential"].split("/")[2]
    return signed + timedelta(seconds=int(params["X-Amz-Expires"])), region


def make_token(session: Any, lifetime: timedelta = ON_THE_FLY_LIFETIME) -> BearerToken:
    """A token for the session's credentials and region, valid for `lifetime` (1 s to 12 h)."""
    if not timedelta(seconds=1) <= lifetime <= MAX_LIFETIME:
        raise UsageError(f"a bearer token lives 1 second to 12 hours, not {lifetime}", "pass e.g. --duration 1h")
    credentials = session.boto3_session.get_credentials()
    if credentials is None:
        from ..aws import MissingCredentials

        raise MissingCredentials("no AWS credentials found to make a bearer token from")
    from botocore.credentials import CredentialProvider
    from sagemaker.core.token_generator import generate_token

    from ..redaction import register_secret

    class SessionCredentials(CredentialProvider):  # the session's chain (profile, SSO, role), not the default one
        METHOD = "peagle-session"

        def load(self) -> Any:
            return credentials

    try:
        value = generate_token(region=session.region, aws_credentials_provider=SessionCredentials(),
                               expiry=lifetime)
    except Exception as exc:  # noqa: BLE001 - a refresh that failed (expired SSO, a role it cannot assume)
        from ..aws import translate_error

        translated = translate_error(exc)
        raise (translated or CredentialsError(f"could not make a bearer token: {type(exc).__name__}",
                                              "check your AWS credentials")) from None
    register_secret(value)
    expires_at, region = token_facts(value)
    return BearerToken(value=SecretStr(value), expires_at=expires_at, region=region)


def user_agent() -> str:
    """peagle's user agent, with the AWS SDKs' application id (AWS_SDK_UA_APP_ID) as botocore sends it."""
    import os

    from ..aws import USER_AGENT

    app = os.environ.get("AWS_SDK_UA_APP_ID", "").strip()
    return f"{USER_AGENT} app/{app}" if app else USER_AGENT


class TokenSource:
    """The route's request headers (a bearer token made on the fly, the user agent) for invoke and bench; the
    token is renewed when less than RENEW_BEFORE is left, so a benchmark longer than a token's life keeps
    going. `headers()` is cheap: one clock read per request."""

    def __init__(self, session: Any, lifetime: timedelta = ON_THE_FLY_LIFETIME,
                 clock: Callable[[], float] = time.time):
        self._session, self._lifetime, self._clock = session, lifetime, clock
        self._headers: dict[str, str] = {}
        self._renew_at = float("-inf")

    def headers(self) -> dict[str, str]:
        if self._clock() >= self._renew_at:
            token = make_token(self._session, self._lifetime)
            self._headers = {"Authorization": f"Bearer {token.value.get_secret_value()}", "User-Agent": user_agent()}
            self._renew_at = (token.expires_at - RENEW_BEFORE).timestamp()
        return self._headers
