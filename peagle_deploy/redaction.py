"""The one redaction of credential-bearing values, for every output and every file peagle writes.

What is masked (as `***`), wherever it appears in a text:
- AWS credentials: access key ids by shape, secret keys and session tokens by name, and every value the
  credential chain really handed out (`register_secret`, from `aws.py`);
- URL user information (`http://user:password@host` -> `http://***@host`), and the password itself wherever
  it appears again (`register_url` registers it when a target is parsed);
- token-like query parameters (`X-Amz-Signature`, `X-Amz-Credential`, `X-Amz-Security-Token`, `token`, `key`,
  `sig`, any parameter whose name looks secret);
- `Authorization` / `Proxy-Authorization` header values and `Bearer` tokens;
- SageMaker's OpenAI-route bearer tokens (`sagemaker-api-key-...`);
- values of secret-looking names (`HF_TOKEN=...`, `"API_KEY": "..."`): `--env` values that look secret, and
  every value registered this session;
- values that are credentials by their shape, whatever they are called (`GH=ghp_...`): the token prefixes of
  the major providers and JWTs (`TOKEN_SHAPES`), and, as the whole value of a variable, a 40-character AWS
  secret access key. `is_secret(name, value)` is the one test of an environment entry (name or shape).

`output.py` applies `redact` to everything printed; `safe_write.py` to everything written to a file, its
name included. A value shown on purpose (`peagle openai` printing the token the user asked for) is
exempted for that one write with `revealing(...)`.
"""

from __future__ import annotations

import base64
import re
import threading
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import Any
from urllib.parse import unquote, urlsplit

MASK = "***"

_SECRET_NAME_PARTS = {"TOKEN", "SECRET", "SECRETS", "PASSWORD", "PASSWD", "PWD", "PASS", "PASSPHRASE", "KEY",
                      "APIKEY", "CREDENTIAL", "CREDENTIALS", "AUTH", "AUTHORIZATION", "PRIVATE", "SIGNATURE",
                      "COOKIE", "SESSION", "DSN", "SIG"}
_MIN_VALUE = 4  # shorter values are masked by name only: replacing 'abc' everywhere would garble output

_SECRET_VALUES: set[str] = set()  # values of this session: credentials in use, secret-looking --env values
_SECRET_KEYS: set[str] = set()  # names whose value is masked wherever `NAME=value` / "NAME": "value" appears
_LOCK = threading.Lock()
_REVEALED = threading.local()  # values one write shows on purpose

_VALUE_END = r"[^\s\"',}&\x00]+"  # \x00 delimits a value shown on purpose

# Values that are credentials by their shape alone, whatever the variable holding them is called. The documented
# token prefixes of the major providers, after the rules gitleaks keeps for them (config/gitleaks.toml), a little
# wider where a provider's length varies; a small table rather than a scanner library (docs/dependencies.md).
TOKEN_SHAPES: dict[str, str] = {
    "GitHub token (ghp_, gho_, ghu_, ghs_, ghr_)": r"gh[pousr]_[A-Za-z0-9]{30,}",
    "GitHub fine-grained token (github_pat_)": r"github_pat_[A-Za-z0-9_]{30,}",
    "GitLab token (glpat-, gldt-, ...)": r"gl(?:pat|dt|ft|rt|ptt|soat|cbt)-[A-Za-z0-9_\-]{20,}",
    "Hugging Face token (hf_)": r"hf_[A-Za-z0-9]{30,}",
    "OpenAI and Anthropic keys (sk-, sk-proj-, sk-ant-)": r"sk-[A-Za-z0-9_\-]{20,}",
    "Slack token (xoxb-, xoxp-, ...)": r"xox[abeoprs]-[A-Za-z0-9\-]{10,}",
    "Stripe key (sk_live_, rk_live_, ...)": r"[rs]k_(?:live|test|prod)_[A-Za-z0-9]{10,}",
    "Google API key (AIza)": r"AIza[A-Za-z0-9_\-]{35}",
    "npm token (npm_)": r"npm_[A-Za-z0-9]{36}",
    "PyPI token (pypi-AgE)": r"pypi-AgE[A-Za-z0-9_\-]{50,}",
    "JWT (eyJ...)": r"eyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]*",
}
_TOKEN = re.compile(r"(?<![A-Za-z0-9_\-])(?:" + "|".join(TOKEN_SHAPES.values()) + ")")
# access key ids: long-term AKIA, temporary ASIA, and the other documented prefixes
_AWS_KEY_ID = re.compile(r"\b(?:AKIA|ASIA|AROA|AIDA|ANPA|ANVA|AIPA|AGPA|ABIA)[A-Z0-9]{12,}\b")
# a secret access key: 40 characters of base64, upper and lower case and a digit. Ambiguous inside a text, so
# only the whole value of a variable counts (KEY=value, "KEY": "value"), never a 40-character run in a sentence
_AWS_SECRET = re.compile(r"(?=[^a-z]*[a-z])(?=[^A-Z]*[A-Z])(?=[^0-9]*[0-9])[A-Za-z0-9/+]{40}")
# a URL whose user information has a password: scheme://user:password@host
_URL_PASSWORD = re.compile(r"(?i)\b[a-z][a-z0-9+.\-]*://[^/\s\"'<>?#:@]*:[^/\s\"'<>?#]*@")
_PATTERNS: list[tuple[re.Pattern[str], str]] = [
    # SageMaker's OpenAI-route bearer token: the prefix, then a base64 presigned URL
    (re.compile(r"\bsagemaker-api-key-[A-Za-z0-9+/=_\-]{8,}"), "sagemaker-api-key-" + MASK),
    # header values: Authorization: Bearer x / "Authorization": "AWS4-HMAC-SHA256 Credential=..." (to the quote or
    # the end of the line: a SigV4 value has spaces and commas)
    (re.compile(r"(?i)(\b(?:proxy-)?authorization[\"']?\s*[:=]\s*[\"']?)(?:(bearer|basic|digest|token|negotiate|"
                r"aws4-hmac-sha256)\s+)?[^\"'\r\n\x00]+"),
     "AUTH"),
    (re.compile(r"(?i)\b(bearer\s+)[A-Za-z0-9\-._~+/]{12,}=*"), r"\1" + MASK),
    # user information of any URL: scheme://user:password@host (up to the last @ before the path)
    (re.compile(r"(?i)\b([a-z][a-z0-9+.\-]*://)[^/\s\"'<>?#]*@"), r"\1" + MASK + "@"),
    (_AWS_KEY_ID, MASK),
    (_TOKEN, MASK),  # the providers' tokens and JWTs, by shape
    # secret keys and session tokens named as such, in env, ini, JSON or header form
    (re.compile(r"(?i)((?:aws_)?(?:secret_access_key|secret_key|session_token|security_token|"
                r"secretaccesskey|sessiontoken)[\"']?\s*[:=]\s*[\"']?)" + _VALUE_END), r"\1" + MASK),
    (re.compile(r"(?i)(x-amz-security-token[\"']?\s*[:=]\s*[\"']?)" + _VALUE_END), r"\1" + MASK),
    (re.compile(r"(Signature=)[0-9a-f]{16,}"), r"\1" + MASK),
    (re.compile(r"(Credential=)[A-Z0-9]{16,}[^\s,&\"']*"), r"\1" + MASK),
]
# query parameters: ?name=value / &name=value, masked when the name looks secret
_QUERY = re.compile(r"([?&;])([A-Za-z0-9_.\-]+)=([^&\s\"'#<>\x00]*)")
# what help and error text write in place of a value: KEY=VALUE, HF_TOKEN=<token>, API_KEY=$API_KEY, ***
_PLACEHOLDER = re.compile(r"^(?:[A-Z][A-Z_]*|<[^>]*>|\$\{?\w+\}?|\*+|\.\.\.)[:.,;)]*$")
# environment-style assignments of secret-looking UPPER_CASE names: HF_TOKEN=x, "API_KEY": "x", 'DB_PASSWORD': 'x'
_ENV_ASSIGN = re.compile(r"(\b([A-Z][A-Z0-9_]*)[\"']?\s*(?:=|:\s)\s*[\"']?)([^\s\"',}\x00]+)")


def looks_secret(name: str) -> bool:
    """HF_TOKEN, *_KEY, *_SECRET, *_PASSWORD, API_KEY, X-Amz-Signature, ...: any `_`/`-`/`.` separated word that
    names a secret. (MAX_TOKENS is not: the word is TOKENS, a count.)"""
    words = {w for w in re.split(r"[_\-.]+", name.upper()) if w}
    return bool(words & _SECRET_NAME_PARTS) or name.upper().endswith(("TOKEN", "APIKEY", "PASSWORD", "SECRET"))


def looks_like_token(value: str) -> bool:
    """A value that is a credential by its shape, whatever it is called: a provider's token or a JWT anywhere in
    it, an AWS access key id, a whole value shaped like an AWS secret access key, or a URL with a password."""
    return bool(_TOKEN.search(value) or _AWS_KEY_ID.search(value) or _AWS_SECRET.fullmatch(value)
                or _URL_PASSWORD.search(value))


def is_secret(name: str, value: str) -> bool:
    """An environment entry to mask: its name looks secret (HF_TOKEN) or its value does (GH=ghp_...)."""
    return looks_secret(name) or looks_like_token(value)


def register_secret(value: str | None, name: str | None = None) -> None:
    """From now on no output or file of this process shows `value` (nor the value of `name=...`)."""
    with _LOCK:
        if name:
            _SECRET_KEYS.add(name)
        if value and len(value) >= _MIN_VALUE:
            _SECRET_VALUES.add(value)


def register_secret_env(env: dict[str, str]) -> list[str]:
    """Register the secret entries of a container environment (by name or by shape); returns their names."""
    names = [key for key, value in env.items() if is_secret(key, value)]
    for key in names:
        register_secret(env[key], key)
    return names


def mask_env(env: dict[str, str]) -> dict[str, str]:
    """A copy of `env` with its secret values (by name or by shape) as ***."""
    return {key: (MASK if is_secret(key, value) else value) for key, value in env.items()}


def mask_argv(argv: list[str]) -> list[str]:
    """A copy of a command line with secret values as ***: `--api-key VALUE`, `--api-key=VALUE`, `KEY=VALUE`
    (docker's `--env HF_TOKEN=...`) wherever the flag or name looks secret, or the value does."""
    masked: list[str] = []
    hide_next = False
    for arg in argv:
        name, eq, value = arg.partition("=")
        if hide_next and not arg.startswith("-"):
            masked.append(MASK)
        elif eq and is_secret(name.lstrip("-"), value):
            masked.append(f"{name}={MASK}")
        else:
            masked.append(arg)
        hide_next = arg.startswith("--") and not eq and looks_secret(arg.lstrip("-"))
    return masked


def mask_plan_env(plan: Any) -> Any:
    """A copy of a DeploymentPlan for output, its secret container environment values as ***."""
    container = dict(plan.create_model.get("PrimaryContainer", {}))
    env = container.get("Environment") or {}
    if not any(is_secret(key, value) for key, value in env.items()):
        return plan
    container["Environment"] = mask_env(env)
    return plan.model_copy(update={"create_model": {**plan.create_model, "PrimaryContainer": container}})


def register_url(url: str) -> str | None:
    """Register the credentials in a URL's user information (raw, decoded and as a Basic header); returns the
    `Authorization` header value they make, or None when the URL has none."""
    try:
        parts = urlsplit(url)
        user, password = parts.username, parts.password
    except ValueError:
        return None
    if user is None and password is None:
        return None
    userinfo = parts.netloc.rpartition("@")[0]
    plain = f"{unquote(user or '')}:{unquote(password or '')}"
    basic = base64.b64encode(plain.encode("utf-8")).decode("ascii")
    for value in (userinfo, password, unquote(password or "") or None, plain, basic):
        register_secret(value)
    return f"Basic {basic}"


def redact_url(url: str) -> str:
    """`url` without its user information or secret query values (for names, labels and file names)."""
    return redact(url)


def _known_secret_values() -> list[str]:
    import os

    with _LOCK:
        values = set(_SECRET_VALUES)
    for name in ("AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_SECURITY_TOKEN", "AWS_ACCESS_KEY_ID"):
        value = os.environ.get(name, "")
        if len(value) >= 8:
            values.add(value)
    return sorted(values, key=len, reverse=True)  # longest first: a value containing another is masked whole


def _mask_query(match: re.Match[str]) -> str:
    name = match.group(2)
    return f"{match.group(1)}{name}={MASK}" if looks_secret(name) and match.group(3) else match.group(0)


def _mask_assignment(match: re.Match[str]) -> str:
    value = match.group(3)
    if _PLACEHOLDER.match(value) or not (looks_secret(match.group(2)) or match.group(2) in _SECRET_KEYS
                                         or _AWS_SECRET.fullmatch(value)):
        return match.group(0)
    return match.group(1) + MASK


def _mask_authorization(match: re.Match[str]) -> str:
    scheme = match.group(2)
    return match.group(1) + (f"{scheme} " if scheme else "") + MASK


@contextmanager
def revealing(values: Iterable[str]) -> Iterator[None]:
    """Within this block `redact` leaves `values` alone: one output that shows a secret because the user asked
    for exactly that (the token `peagle openai` prints). Everything else stays redacted."""
    previous = getattr(_REVEALED, "values", ())
    _REVEALED.values = (*previous, *(v for v in values if v))
    try:
        yield
    finally:
        _REVEALED.values = previous


def redact(text: str) -> str:
    """`text` with every credential and secret this module knows of replaced by ***."""
    if not text:
        return text
    kept = sorted(getattr(_REVEALED, "values", ()), key=len, reverse=True)
    for index, value in enumerate(kept):
        text = text.replace(value, f"\x00{index}\x00")
    for value in _known_secret_values():
        text = text.replace(value, MASK)
    for name in sorted(_SECRET_KEYS):  # registered names: any spelling of the assignment, any case
        text = re.sub(r"(\b" + re.escape(name) + r"[\"']?\s*[:=]\s*[\"']?)" + _VALUE_END,
                      lambda m: m.group(1) + MASK, text)
    for pattern, replacement in _PATTERNS:
        if replacement == "AUTH":
            text = pattern.sub(_mask_authorization, text)
        else:
            text = pattern.sub(replacement, text)
    text = _QUERY.sub(_mask_query, text)
    text = _ENV_ASSIGN.sub(_mask_assignment, text)
    for index, value in enumerate(kept):
        text = text.replace(f"\x00{index}\x00", value)
    return text


def safe_name(text: str, *, limit: int = 60) -> str:
    """A file-name part from `text` (a label, a target): redacted first, then only letters, digits, '-', '_', '.'."""
    cleaned = redact(text).replace(MASK, "").replace(" ", "-").replace("=", "")
    slug = "".join(c if c.isalnum() or c in "-_." else "-" for c in cleaned)
    slug = re.sub(r"-{2,}", "-", slug).strip("-.")
    return slug[:limit] or "target"
