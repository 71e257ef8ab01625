"""The only module that imports boto3 (lazily). Everything else asks an `AwsSession` for clients.

Clients use botocore's adaptive retry mode (throttling and transient errors back off and retry)
and honour AWS_ENDPOINT_URL / AWS_ENDPOINT_URL_<SERVICE>, which is how tests and users' CI point
peagle at a local emulator.
"""

from __future__ import annotations

import os
from typing import Any

from . import __version__
from .errors import CredentialsError, PeagleError, QuotaError, UsageError

DEFAULT_REGION = "us-east-1"
USER_AGENT = f"peagle/{__version__}"


def resolve_region(region: str | None) -> str:
    """--region, else AWS_REGION / AWS_DEFAULT_REGION, else the profile's, else us-east-1."""
    if region:
        return region
    for name in ("AWS_REGION", "AWS_DEFAULT_REGION"):
        if os.environ.get(name):
            return os.environ[name]
    return DEFAULT_REGION


class AwsSession:
    """One boto3 session and its clients, built on first use."""

    def __init__(self, region: str | None = None, profile: str | None = None, *, max_attempts: int = 8,
                 connect_timeout: float = 10, read_timeout: float = 70):
        self.region = resolve_region(region)
        self.profile = profile
        self._max_attempts = max_attempts
        self._connect_timeout = connect_timeout
        self._read_timeout = read_timeout
        self._session: Any = None
        self._clients: dict[str, Any] = {}

    @property
    def boto3_session(self) -> Any:
        if self._session is None:
            import boto3
            import botocore.exceptions

            try:
                self._session = boto3.Session(region_name=self.region, profile_name=self.profile)
            except botocore.exceptions.ProfileNotFound:
                raise UsageError(f"AWS profile {self.profile!r} not found", "check --profile or ~/.aws/config") from None
        return self._session

    def config(self, **overrides: Any) -> Any:
        from botocore.config import Config

        settings: dict[str, Any] = {
            "retries": {"mode": "adaptive", "max_attempts": self._max_attempts},
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
            self._clients[key] = self.boto3_session.client(service, config=self.config(**config_overrides))
        return self._clients[key]

    def check_credentials(self) -> dict[str, str]:
        """Fail early, with exit 3, when there are no usable credentials. Returns account and ARN."""
        import botocore.exceptions

        if self.boto3_session.get_credentials() is None:
            raise CredentialsError(
                "no AWS credentials found",
                "configure them (aws configure, AWS_PROFILE, or environment variables) or use --dry-run",
            )
        try:
            ident = self.client("sts").get_caller_identity()
        except botocore.exceptions.ClientError as exc:
            code = exc.response.get("Error", {}).get("Code", "ClientError")
            raise CredentialsError(f"AWS rejected the credentials ({code})", "refresh or replace them") from None
        except botocore.exceptions.BotoCoreError as exc:
            raise CredentialsError(f"could not verify AWS credentials: {type(exc).__name__}",
                                   "check the network, region and credentials") from None
        return {"account": ident.get("Account", ""), "arn": ident.get("Arn", "")}


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


def credentials_available(profile: str | None = None, region: str | None = None) -> bool:
    """Whether botocore's credential chain finds anything (no AWS request is made for it)."""
    import botocore.exceptions

    try:
        return AwsSession(region, profile).boto3_session.get_credentials() is not None
    except (UsageError, botocore.exceptions.BotoCoreError):
        return False


_AUTH_CODES = {"AccessDenied", "AccessDeniedException", "UnrecognizedClientException", "InvalidClientTokenId",
               "ExpiredToken", "ExpiredTokenException", "SignatureDoesNotMatch", "InvalidAccessKeyId"}


def translate_error(exc: BaseException) -> PeagleError | None:
    """A botocore failure as a one-line PeagleError with the right exit code; None if not botocore's."""
    import botocore.exceptions

    if isinstance(exc, (botocore.exceptions.NoCredentialsError, botocore.exceptions.PartialCredentialsError)):
        return CredentialsError("no usable AWS credentials", "configure them (aws configure, AWS_PROFILE, env vars)")
    if isinstance(exc, botocore.exceptions.ClientError):
        code, message = error_code(exc), error_message(exc)
        if code in _AUTH_CODES:
            return CredentialsError(f"AWS refused ({code}): {message}", "check the credentials and their permissions")
        if code in ("ResourceLimitExceeded", "ServiceQuotaExceededException"):
            return QuotaError(f"AWS refused ({code}): {message}", "request a quota increase or use another instance type")
        return PeagleError(f"AWS error ({code}): {message}")
    if isinstance(exc, botocore.exceptions.EndpointConnectionError):
        return PeagleError(f"could not reach AWS at {getattr(exc, 'kwargs', {}).get('endpoint_url', '?')}",
                           "check the network, --region and AWS_ENDPOINT_URL")
    if isinstance(exc, botocore.exceptions.BotoCoreError):
        return PeagleError(f"AWS client error: {exc}")
    return None
