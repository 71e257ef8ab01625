"""What a sweep runs: the request (pydantic) and its configurations, one endpoint or URL each."""

from __future__ import annotations

import re
import secrets
from datetime import UTC, datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_serializer, field_validator

from ..errors import UsageError

MODES = ("off", "eagle3", "p-eagle", "dflash")
_URL_SPEC = re.compile(r"^(?P<mode>[^:=\s]+)(?::(?P<k>[0-9]+))?=(?P<url>https?://\S+)\Z")
# where `--resume` reads a --url's password (the state file never keeps it): one name for every URL when they share
# it, else PEAGLE_SWEEP_URL_PASSWORD_<CONFIGURATION> (PEAGLE_SWEEP_URL_PASSWORD_P_EAGLE_K3); the state names it
PASSWORD_ENV = "PEAGLE_SWEEP_URL_PASSWORD"


class Configuration(BaseModel):
    """One (mode, K): off runs once, without K."""

    model_config = ConfigDict(frozen=True)

    mode: str
    k: int | None = None
    url: str | None = None  # a server the user already runs (no AWS); written without its password (see below)
    url_user: str | None = Field(None, description="the URL's user name, kept where the URL has a password too")
    password_env: str | None = Field(None, description="the environment variable --resume reads the URL's password "
                                                       "from (its user name where that alone is the credential)")

    @field_validator("url")
    @classmethod
    def _secret_userinfo(cls, url: str | None) -> str | None:
        if url:  # given or completed by --resume: its user:password is printed and written nowhere
            from ..redaction import register_url

            register_url(url)
        return url

    @field_serializer("url")
    def _url_without_credentials(self, url: str | None) -> str | None:
        """Every document this configuration becomes (the state file above all) has the URL without its user
        information; `url_user` and `password_env` say how --resume puts it back."""
        return url and _split_credentials(url)[0]

    @property
    def label(self) -> str:
        return self.mode if self.mode == "off" else f"{self.mode} K={self.k}"

    @property
    def spec(self) -> str:
        """MODE:K as --url takes it (off alone)."""
        return self.mode if self.mode == "off" else f"{self.mode}:{self.k}"

    @property
    def slug(self) -> str:
        return self.mode if self.mode == "off" else f"{self.mode}-k{self.k}"


class SweepRequest(BaseModel):
    """Everything the user chose, validated; stored in the state file so --resume needs nothing else."""

    model: str
    configurations: list[Configuration]
    concurrency: list[int]
    dataset: str = "humaneval"
    duration_s: float = 60.0
    num_prompts: int | None = None
    warmup: int | None = None
    max_tokens: int = 256
    budget_usd: float | None = None
    parallel: int = 1
    instance_type: str | None = None
    region: str = "us-east-1"
    drafter: str | None = Field(None, description="dflash: the staged DFlash drafter's S3 prefix (--drafter, else the "
                                                  "record of `peagle drafter stage`)")
    profile: str | None = None
    role: str | None = None
    accept_eula: bool = False
    ttl_s: float | None = Field(None, description="TTL of every endpoint; default: twice its estimated time")
    provision_s: float = Field(600.0, description="estimated seconds from CreateEndpoint to InService")
    teardown_s: float = Field(120.0, description="estimated seconds to delete an endpoint")
    logs_wait_s: float = 60.0
    agreement_prompts: int = Field(16, description="prompts whose greedy outputs are compared with off's (0: none)")
    timeout_s: float = 3600.0
    sweep_id: str = ""
    trust_labels: bool = Field(False, description="measure a --url server even when it contradicts its label")
    hosting: Literal["endpoint", "component"] = Field(
        "endpoint", description="endpoint: one endpoint per configuration; component: one endpoint on a multi-GPU "
                                "ml.g7e, each configuration an inference component of it (sweep/component_layout.py)")

    @property
    def uses_urls(self) -> bool:
        return any(c.url for c in self.configurations)


def resource_name(request: SweepRequest, config: Configuration) -> str:
    """A configuration's endpoint (the classic layout), or its inference component and model (--hosting component):
    peagle-<sweep id>-<mode>[-k<K>]."""
    return f"peagle-{request.sweep_id}-{config.slug}"


def new_sweep_id(now: datetime | None = None) -> str:
    """Short, sortable and unique enough to name endpoints: 'sw261122-1804-a3f9'."""
    now = now or datetime.now(UTC)
    return f"sw{now:%y%m%d-%H%M}-{secrets.token_hex(2)}"


def parse_modes(text: str) -> list[str]:
    """--modes through the one mode parser (speculative.parse_modes), each once, as listed."""
    from ..speculative import parse_modes as modes_of

    return list(dict.fromkeys(mode.value for mode in modes_of(text)))


def parse_ks(text: str) -> list[int]:
    """--k 3,7,11: whole numbers within the one bound of --k (inputs.BOUNDS), each once, in order."""
    from ..inputs import read_numbers

    return sorted(set(read_numbers(text, "--k", "3,7,11")))


def configurations(modes: list[str], ks: list[int]) -> list[Configuration]:
    """off once, then each speculative mode at each K (EAGLE-3 before P-EAGLE, as the published table; DFlash last)."""
    out = [Configuration(mode="off")] if "off" in modes else []
    for mode in MODES[1:]:
        if mode in modes:
            out += [Configuration(mode=mode, k=k) for k in ks]
    return out


def parse_url_specs(specs: list[str]) -> list[Configuration]:
    """--url MODE:K=URL (off=URL for the baseline), one per configuration."""
    out: list[Configuration] = []
    for spec in specs:
        if spec != spec.strip() and _URL_SPEC.match(spec.strip()):
            raise UsageError(f"--url {spec!r} has spaces around it", f"pass --url {spec.strip()}")
        match = _URL_SPEC.match(spec)
        if not match:
            raise UsageError(f"--url {spec!r} is not MODE:K=URL", "pass e.g. --url p-eagle:7=http://host:8000/v1 "
                             "or --url off=http://host:8000/v1")
        from ..speculative import Mode, parse_mode

        try:
            mode, k = parse_mode(match["mode"]).value, match["k"]
        except UsageError as exc:
            meant = exc.hint.removeprefix("pass --mode ") if exc.hint else "off, eagle3 or p-eagle"
            raise UsageError(f"--url {spec!r} has unknown mode {match['mode']!r}",
                             f"pass --url {meant}{':' + match['k'] if match['k'] else ''}={match['url']}"
                             if meant in {m.value for m in Mode} else f"use {meant}") from None
        if (mode == "off") != (k is None):
            raise UsageError(f"--url {spec!r}: " + ("off takes no K" if mode == "off" else f"{mode} needs :K"),
                             "pass off=URL or p-eagle:7=URL")
        from ..runtime.target_ref import parse_target

        parse_target(match["url"])  # the rule invoke and bench apply: a bad URL is refused before anything runs
        config = Configuration(mode=mode, k=int(k) if k else None, url=match["url"])
        if any(c.label == config.label for c in out):
            raise UsageError(f"--url gives {config.label} twice", "pass one URL per configuration")
        out.append(config)
    return _name_password_envs(out)


def _split_credentials(url: str) -> tuple[str, str | None, str | None]:
    """(the URL without user information, its user name when a password follows, the secret: the password, or the
    user name where it stands alone, as a token does in https://TOKEN@host). Raw, as typed (percent-encoded)."""
    scheme, sep, rest = url.partition("://")
    authority, slash, path = rest.partition("/")
    userinfo, at, host = authority.rpartition("@")
    if not sep or not at:
        return url, None, None
    user, colon, password = userinfo.partition(":")
    bare = f"{scheme}://{host}{slash}{path}"
    return (bare, user, password) if colon else (bare, None, user)


def _name_password_envs(configs: list[Configuration]) -> list[Configuration]:
    found = {c.label: _split_credentials(c.url)[2] for c in configs if c.url}
    given = {label: secret for label, secret in found.items() if secret}
    shared = len(set(given.values())) == 1
    named = []
    for config in configs:
        if config.label in given:
            env = PASSWORD_ENV if shared else f"{PASSWORD_ENV}_{re.sub(r'[^A-Z0-9]+', '_', config.slug.upper())}"
            config = config.model_copy(update={"url_user": _split_credentials(config.url)[1], "password_env": env})
        named.append(config)
    return named


def restore_url_credentials(request: SweepRequest, measured: set[str], given: list[str] | None,
                            environ: dict[str, str], state_path: object) -> SweepRequest:
    """On --resume: the request with each --url's credentials back in it, for every configuration still to measure,
    from the same --url passed again or from the environment variable the state names; refused in one line
    (exit 2, before anything runs) where neither has it."""
    from urllib.parse import quote

    again = {c.label: c for c in parse_url_specs(given)} if given else {}
    stored = {c.label: c for c in request.configurations}
    for label, config in again.items():
        theirs = stored.get(label)
        if not theirs or not theirs.url or _split_credentials(config.url)[0] != _split_credentials(theirs.url)[0]:
            raise UsageError(f"--url {config.spec} on --resume is not the sweep's server for {label}"
                             + (f" ({_split_credentials(theirs.url)[0]})" if theirs and theirs.url else ""),
                             "pass the sweep's own URL with its credentials, or resume without --url")
    restored = []
    for config in request.configurations:
        if config.label in again:
            config = Configuration.model_validate({**config.model_dump(), "url": again[config.label].url})
        elif config.password_env and config.label not in measured:
            secret = environ.get(config.password_env)
            if not secret:
                raise UsageError(f"the sweep's --url {config.spec} needs a password, which {state_path} does not keep",
                                 f"set {config.password_env}, or pass --url {config.spec}=URL with its credentials "
                                 "again")
            scheme, _, rest = config.url.partition("://")
            userinfo = quote(secret, safe="") if config.url_user is None else f"{config.url_user}:{quote(secret, safe='')}"
            config = Configuration.model_validate({**config.model_dump(), "url": f"{scheme}://{userinfo}@{rest}"})
        restored.append(config)
    return request.model_copy(update={"configurations": restored})
