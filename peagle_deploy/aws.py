"""The only module that imports boto3 (the emulator in testing/ aside) and botocore's exceptions (lazily).

Everything else asks an `AwsSession` for clients, catches botocore's exceptions through `botocore_exceptions()`
(imported on first use: `peagle --help` imports no botocore), and turns any AWS failure into a PeagleError with
`translate_error` (one mapping, the README's exit codes, for every command). Clients use botocore's
adaptive retry mode (throttling and transient errors back off and retry; AWS_MAX_ATTEMPTS overrides
the attempt count) and honour AWS_ENDPOINT_URL / AWS_ENDPOINT_URL_<SERVICE>, which is how tests and
users' CI point peagle at a local emulator. Every credential the session resolves is registered with
`redaction.register_secret`, so no output can print it, whatever its source (env, profile, SSO, ...).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from functools import partial
from types import ModuleType
from typing import Any

from . import __version__
from .errors import CredentialsError, PeagleError, QuotaError, UsageError, WaitTimeout

DEFAULT_REGION = "us-east-1"
USER_AGENT = f"peagle/{__version__}"
NO_CREDENTIALS_FIX = "configure them (aws configure, AWS_PROFILE, or environment variables)"


EMULATOR_HINT = ("peagle's emulator implements it: run peagle against peagle_deploy.testing.SageMakerEmulator "
                 "(docs/ci.md) rather than a plain moto server")


class MockLacksOperation(CredentialsError):
    """A mock of AWS at AWS_ENDPOINT_URL (a plain moto server) that does not implement an operation peagle calls:
    moto answers one it lacks with HTTP 500 and its web server's error page ("Internal Server Error"; its log says
    "The ... action has not been implemented"). Real AWS never answers a web page, so this is never AWS's failure."""

    def __init__(self, operation: str, endpoint_url: str, status: int | str | None):
        from urllib.parse import urlsplit

        parts = urlsplit(endpoint_url)  # scheme, host and port only: never a user or password the URL may hold
        where = f"{parts.scheme}://{parts.hostname}{f':{parts.port}' if parts.port else ''}" if parts.hostname \
            else "AWS_ENDPOINT_URL"
        super().__init__(f"the mock AWS at {where} does not implement {operation} (it answered HTTP "
                         f"{status or 500} with an error page, as moto does for an operation it lacks)", EMULATOR_HINT)
        self.operation = operation


class MissingCredentials(CredentialsError):
    """No AWS credentials at all. Its hint says how to configure them; the CLI adds the running command's own
    way to work without an AWS account, where it has one (cli/common.WITHOUT_AWS), never another command's."""

    def __init__(self, message: str, hint: str = NO_CREDENTIALS_FIX):
        super().__init__(message, hint)


def botocore_exceptions() -> ModuleType:
    """botocore's exceptions module (`bx = botocore_exceptions(); except bx.ClientError`), imported on first use."""
    import botocore.exceptions

    return botocore.exceptions


def resolve_region(region: str | None) -> str:
    """--region, else AWS_REGION / AWS_DEFAULT_REGION, else us-east-1 (a profile's region is not read here:
    the plan needs a region before any session exists)."""
    if region:
        return region
    for name in ("AWS_REGION", "AWS_DEFAULT_REGION"):
        if os.environ.get(name):
            return os.environ[name]
    return DEFAULT_REGION


# botocore data path (AWS_DATA_PATH or the profile's data_path) -> the loader (botocore's parsed data files: service
# models, endpoints, partitions) that every session of this process shares. Each botocore session otherwise parses
# them again: `status`'s Pricing client, in a session of its own, re-read what the SageMaker client had just read.
_loaders: dict[str, Any] = {}


def _botocore_session(profile: str | None) -> Any:
    """A new botocore session (its own profile, credentials and settings) whose data loader is this process's."""
    import botocore.session

    core = botocore.session.Session(profile=profile)
    key = repr(core.get_config_variable("data_path"))
    loader = _loaders.get(key)
    if loader is None:
        _loaders[key] = core.get_component("data_loader")
    else:
        core.register_component("data_loader", loader)
    return core


def _dedupe_search_paths(core: Any) -> None:
    """boto3 adds its own data folder to the loader of each session it wraps: once is enough for a shared one."""
    paths = core.get_component("data_loader").search_paths
    paths[:] = list(dict.fromkeys(paths))


class AwsSession:
    """One boto3 session and its clients, built on first use."""

    def __init__(self, region: str | None = None, profile: str | None = None, *, max_attempts: int | None = None,
                 connect_timeout: float = 10, read_timeout: float = 70):
        self.region = resolve_region(region)
        self.profile = profile
        self._max_attempts = max_attempts or _env_attempts() or 8
        self._connect_timeout = connect_timeout
        self._read_timeout = read_timeout
        self._session: Any = None
        self._clients: dict[str, Any] = {}
        self._identity: dict[str, str] | None = None

    @property
    def boto3_session(self) -> Any:
        if self._session is None:
            import boto3

            try:
                core = _botocore_session(self.profile)
                session = boto3.Session(botocore_session=core, region_name=self.region)
                _dedupe_search_paths(core)
                credentials = session.get_credentials()
            except Exception as exc:  # noqa: BLE001 - profile missing, config unreadable, SSO expired...
                raise (translate_error(exc) or exc) from None
            _register_credentials(credentials)
            self._session = session
        return self._session

    def config(self, **overrides: Any) -> Any:
        from botocore.config import Config

        settings: dict[str, Any] = {
            "retries": {"mode": "adaptive", "total_max_attempts": self._max_attempts},
            "user_agent_extra": USER_AGENT,
            "connect_timeout": self._connect_timeout,
            "read_timeout": self._read_timeout,
        }
        settings.update(overrides)
        return Config(**settings)

    def client(self, service: str, **config_overrides: Any) -> Any:
        """A cached client for `service` (sagemaker, sagemaker-runtime, s3, logs, ...)."""
        key = service if not config_overrides else f"{service}:{sorted(config_overrides.items())}"
        if key not in self._clients:
            try:
                client = self.boto3_session.client(service, config=self.config(**config_overrides))
            except ValueError as exc:  # botocore: 'Invalid endpoint: ...' for a malformed AWS_ENDPOINT_URL
                raise (translate_error(exc) or exc) from None
            client.meta.events.register("before-parse", partial(_refuse_web_pages,
                                                                endpoint_url=client.meta.endpoint_url))
            self._clients[key] = client
        return self._clients[key]

    def has_credentials(self) -> bool:
        """Whether botocore's credential chain finds anything (no AWS request is made for it). A missing profile
        or an unreadable config file counts as 'no credentials' (a dry run then works offline)."""
        try:
            return self.boto3_session.get_credentials() is not None
        except Exception:  # noqa: BLE001 - any failure to find credentials means: none usable
            return False

    def check_credentials(self) -> dict[str, str]:
        """Fail early, with exit 3, when there are no usable credentials. Returns account and ARN (asked once)."""
        if self._identity is not None:
            return self._identity
        if self.boto3_session.get_credentials() is None:
            raise MissingCredentials("no AWS credentials found")
        bx = botocore_exceptions()
        try:
            ident = self.client("sts").get_caller_identity()
        except (bx.ClientError, bx.BotoCoreError) as exc:
            raise (translate_error(exc) or exc) from None
        self._identity = {"account": ident.get("Account", ""), "arn": ident.get("Arn", "")}
        return self._identity


@contextmanager
def hide_broken_profile() -> Iterator[None]:
    """For work that needs no AWS account (a dry run from the shipped specs): the SageMaker SDK builds
    default boto3 sessions and clients even then, so a missing AWS_PROFILE or an unreadable config file
    would fail it. Such settings are hidden inside this block only; real sessions still see them and
    report them with exit 3."""
    import botocore.session

    hidden: dict[str, str] | None = None
    try:
        botocore.session.Session().get_scoped_config()
    except Exception:  # noqa: BLE001 - ProfileNotFound, ConfigParseError, ...
        names = ("AWS_PROFILE", "AWS_DEFAULT_PROFILE", "AWS_CONFIG_FILE")
        hidden = {name: os.environ.pop(name) for name in names if name in os.environ}
        os.environ["AWS_CONFIG_FILE"] = os.devnull
    try:
        yield
    finally:
        if hidden is not None:
            os.environ.pop("AWS_CONFIG_FILE", None)
            os.environ.update(hidden)


def _refuse_web_pages(response_dict: dict[str, Any], operation_model: Any = None, endpoint_url: str | None = None,
                      **_: Any) -> None:
    """An HTML page is never an AWS answer (a wrong region or AWS_ENDPOINT_URL hitting a web server): botocore's
    JSON parser would read a 200 page as an empty result, and `status` would say 'no endpoints'. A server error page
    from a mock (not AWS's host) is the mock lacking the operation (`MockLacksOperation`)."""
    headers = {k.lower(): v for k, v in (response_dict.get("headers") or {}).items()}
    body = response_dict.get("body")
    head = body[:512].decode("utf-8", "replace") if isinstance(body, (bytes, bytearray)) else ""
    if "text/html" in str(headers.get("content-type", "")).lower() and _looks_like_html(head):
        name = getattr(operation_model, "name", "the request")
        status = response_dict.get("status_code")
        if isinstance(status, int) and status >= 500 and endpoint_url and not is_aws_host(endpoint_url):
            raise MockLacksOperation(name, endpoint_url, status)
        raise CredentialsError(f"the AWS endpoint answered {name} with a web page (HTTP "
                               f"{response_dict.get('status_code', '?')}), not an AWS API response",
                               "check --region (is it a real region?) and AWS_ENDPOINT_URL")


def is_aws_host(url: str) -> bool:
    """Whether `url` is one of AWS's own service endpoints (not a mock or proxy at AWS_ENDPOINT_URL)."""
    from urllib.parse import urlsplit

    host = (urlsplit(url).hostname or "").lower()
    return host.endswith((".amazonaws.com", ".amazonaws.com.cn", ".api.aws"))


def _env_attempts() -> int | None:
    value = os.environ.get("AWS_MAX_ATTEMPTS", "").strip()
    return int(value) if value.isdigit() and int(value) > 0 else None


def _register_credentials(credentials: Any) -> None:
    """Whatever the chain found (env, profile file, SSO, role) is a secret for every output."""
    if credentials is None:
        return
    from .redaction import register_secret

    try:
        frozen = credentials.get_frozen_credentials()
    except Exception:  # noqa: BLE001 - a refresh failure surfaces at the first call instead
        return
    for value in (frozen.access_key, frozen.secret_key, frozen.token):
        if value and len(value) >= 8:  # real ones are 16+; emulators' 'testing' must not mask the word everywhere
            register_secret(value)


def error_code(exc: BaseException) -> str:
    """The AWS error code of a botocore ClientError ('' for anything else)."""
    response = getattr(exc, "response", None)
    if isinstance(response, dict):
        return str(response.get("Error", {}).get("Code", ""))
    return ""


def error_message(exc: BaseException) -> str:
    response = getattr(exc, "response", None)
    if isinstance(response, dict):
        return str(response.get("Error", {}).get("Message", "")) or str(exc)
    return str(exc)


def http_status(exc: BaseException) -> int | None:
    response = getattr(exc, "response", None)
    if isinstance(response, dict):
        status = response.get("ResponseMetadata", {}).get("HTTPStatusCode")
        return int(status) if status else None
    return None


def credentials_available(profile: str | None = None, region: str | None = None) -> bool:
    """AwsSession.has_credentials for a session made only to ask."""
    return AwsSession(region, profile).has_credentials()


_AUTH_CODES = {"AccessDenied", "AccessDeniedException", "UnrecognizedClientException", "InvalidClientTokenId",
               "ExpiredToken", "ExpiredTokenException", "SignatureDoesNotMatch", "InvalidAccessKeyId",
               "InvalidSignatureException", "MissingAuthenticationToken", "MissingAuthenticationTokenException",
               "AuthFailure", "UnauthorizedOperation", "NotAuthorized", "RequestExpired", "IncompleteSignature"}
_QUOTA_CODES = {"ResourceLimitExceeded", "ServiceQuotaExceededException", "LimitExceededException",
                "InsufficientInstanceCapacity", "InsufficientCapacity", "CapacityError"}
_THROTTLE_CODES = {"Throttling", "ThrottlingException", "ThrottledException", "RequestThrottledException",
                   "TooManyRequestsException", "RequestLimitExceeded", "SlowDown", "RequestThrottled"}
_NOT_FOUND_CODES = {"ResourceNotFound", "ResourceNotFoundException", "NotFound", "NoSuchEntity",
                    "ObjectNotFoundException"}  # the last: Application Auto Scaling
_TRANSIENT_CODES = {"InternalFailure", "InternalError", "InternalServerError", "InternalServerException",
                    "ServiceUnavailable", "ServiceUnavailableException", "RequestTimeout", "RequestTimeoutException",
                    "PriorRequestNotComplete", *_THROTTLE_CODES}
_WHERE = "check the network, --region and AWS_ENDPOINT_URL"


def is_not_found(exc: BaseException) -> bool:
    """SageMaker answers a describe/delete of a missing resource with ValidationException 'Could not find'."""
    code = error_code(exc)
    if code in _NOT_FOUND_CODES:
        return True
    return code == "ValidationException" and "could not find" in error_message(exc).lower()


def is_already_exists(exc: BaseException) -> bool:
    """SageMaker's answer to a Create* whose name is taken: ValidationException 'Cannot create already existing'."""
    return error_code(exc) == "ValidationException" and "already existing" in error_message(exc).lower()


def is_transient(exc: BaseException) -> bool:
    """A failure worth asking again about (throttling, 5xx, a dropped connection): never proof of anything."""
    bx = botocore_exceptions()
    if isinstance(exc, (bx.ConnectionError, bx.HTTPClientError)):
        return True
    if isinstance(exc, bx.ClientError):
        status = http_status(exc)
        return error_code(exc) in _TRANSIENT_CODES or (status is not None and status >= 500)
    return False


def is_lost_answer(exc: BaseException) -> bool:
    """The request may have reached AWS but its answer did not reach us: the outcome is unknown."""
    bx = botocore_exceptions()
    if isinstance(exc, KeyboardInterrupt):
        return True
    if isinstance(exc, bx.ClientError):
        return (http_status(exc) or 0) >= 500
    if isinstance(exc, (bx.EndpointConnectionError, bx.ConnectTimeoutError, bx.ProxyConnectionError)):
        return False  # no connection, so nothing was sent
    return isinstance(exc, (bx.ConnectionError, bx.HTTPClientError))


def error_line(exc: BaseException) -> str:
    """Any failure as the one line a warning quotes: `translate_error`'s for AWS's (and peagle's own), else its type
    and text."""
    error = translate_error(exc)
    return error.one_line() if error is not None else f"{type(exc).__name__}: {exc}"


def translate_error(exc: BaseException) -> PeagleError | None:
    """Any AWS failure as a one-line PeagleError with the README's exit code; None if `exc` is not AWS's.

    The one mapping for every command (deploy, status, cleanup, invoke, bench, metrics):
    2 bad input (AWS rejected the request as invalid, a name that does not exist or is taken, a profile that
    does not exist, a malformed AWS_ENDPOINT_URL or region), 3 credentials, permission or AWS
    unreachable/misconfigured (unreadable config file, endpoint URL, network), 4 quota, capacity or throttling that outlasted the retries,
    5 AWS did not answer in time, 1 an AWS internal error that outlasted the retries.
    """
    from botocore.parsers import ResponseParserError

    bx = botocore_exceptions()

    if isinstance(exc, PeagleError):
        return exc
    if isinstance(exc, bx.ProfileNotFound):
        profile = getattr(exc, "kwargs", {}).get("profile") or os.environ.get("AWS_PROFILE", "?")
        source = " (from AWS_PROFILE)" if os.environ.get("AWS_PROFILE") == profile else ""
        return UsageError(f"AWS profile {profile!r}{source} not found",
                          "check --profile or AWS_PROFILE against ~/.aws/config and ~/.aws/credentials "
                          "(aws configure list-profiles)")
    if isinstance(exc, (bx.ConfigParseError, bx.ConfigNotFound)):
        path = getattr(exc, "kwargs", {}).get("path", "the AWS config file")
        return CredentialsError(f"cannot read {path}", "fix or move that file (aws configure can rewrite it)")
    if isinstance(exc, (bx.NoCredentialsError, bx.PartialCredentialsError, bx.NoAuthTokenError,
                        bx.TokenRetrievalError, bx.CredentialRetrievalError, bx.UnknownCredentialError)):
        return MissingCredentials(f"no usable AWS credentials ({type(exc).__name__})")
    if isinstance(exc, (bx.NoRegionError, bx.InvalidRegionError, bx.UnknownRegionError)):
        return UsageError(f"no usable AWS region ({_short(exc)})", "pass --region, e.g. --region us-east-1")
    if isinstance(exc, ValueError) and str(exc).startswith("Invalid endpoint"):  # botocore's words for a bad URL
        return UsageError(f"AWS endpoint URL is not usable: {_short(exc)}",
                          "AWS_ENDPOINT_URL must be a URL such as http://127.0.0.1:5000")
    if isinstance(exc, bx.ReadTimeoutError):
        return WaitTimeout(f"AWS did not answer in time ({_endpoint(exc)})", _WHERE)
    if isinstance(exc, (bx.ConnectionError, bx.HTTPClientError)):
        return CredentialsError(f"could not reach AWS at {_endpoint(exc)} ({type(exc).__name__})", _WHERE)
    if isinstance(exc, ResponseParserError):
        return CredentialsError("the AWS endpoint answered something that is not an AWS API response",
                                "check --region (is it a real region?) and AWS_ENDPOINT_URL")
    if isinstance(exc, bx.ParamValidationError):
        return UsageError(f"AWS request refused before sending: {_short(exc)}")
    if isinstance(exc, bx.WaiterError):
        last = getattr(exc, "last_response", None) or {}
        inner = last.get("Error") if isinstance(last, dict) else None
        if inner:
            fake = bx.ClientError({"Error": inner, "ResponseMetadata": last.get("ResponseMetadata", {})}, "Wait")
            return translate_error(fake)
        return WaitTimeout(f"AWS waiter gave up: {_short(exc)}")
    if isinstance(exc, bx.ClientError):
        return _client_error(exc)
    if isinstance(exc, bx.BotoCoreError):
        return PeagleError(f"AWS client error: {_short(exc)}")
    return None


def _client_error(exc: BaseException) -> PeagleError:
    code, message, status = error_code(exc), _short_text(error_message(exc)), http_status(exc)
    operation = getattr(exc, "operation_name", "") or "the request"
    if code in _AUTH_CODES or status in (401, 403) and not code.isdigit():
        return CredentialsError(f"AWS refused {operation} ({code}): {message}",
                                "check the credentials and their permissions")
    if code.isdigit() or _looks_like_html(message):
        endpoint_url = os.environ.get("AWS_ENDPOINT_URL", "")
        if (status or 0) >= 500 and _looks_like_html(message) and endpoint_url and not is_aws_host(endpoint_url):
            return MockLacksOperation(operation, endpoint_url, status)
        return CredentialsError(f"the AWS endpoint answered HTTP {status or code} to {operation}, not an AWS API "
                                "response", "check --region (is it a real region?) and AWS_ENDPOINT_URL")
    if code in _QUOTA_CODES:
        return QuotaError(f"AWS refused {operation} ({code}): {message}",
                          "request a quota increase or use another instance type")
    if code in _THROTTLE_CODES:
        return QuotaError(f"AWS kept throttling {operation} ({code}) after retries",
                          "retry later, or request a higher API rate quota")
    if is_not_found(exc):
        return UsageError(f"{operation}: {message}", "check the name and --region")
    if is_already_exists(exc):
        return UsageError(f"{operation}: {message}", "the name is taken: pass another --name to deploy, or run "
                          "update again (it names what it creates by the time)")
    if status is not None and status >= 500 or code in _TRANSIENT_CODES:
        return PeagleError(f"AWS failed {operation} ({code or status}) after retries: {message}",
                           "retry later; AWS Health Dashboard shows service events")
    return UsageError(f"AWS rejected {operation} ({code or status}): {message}")


def _endpoint(exc: BaseException) -> str:
    kwargs = getattr(exc, "kwargs", {}) or {}
    return str(kwargs.get("endpoint_url") or os.environ.get("AWS_ENDPOINT_URL") or "the AWS endpoint")


def _looks_like_html(text: str) -> bool:
    head = text.lstrip()[:200].lower()
    return head.startswith(("<!doctype html", "<html")) or "<body" in head


def _short_text(text: str) -> str:
    return " ".join(str(text).split())[:500]


def _short(exc: BaseException) -> str:
    return _short_text(str(exc))
