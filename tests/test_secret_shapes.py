"""Issue 38 item 6: a value that is a credential by its shape is masked whatever the variable holding it is called
(`--env GH=ghp_...`), in every output and file, by the one redaction (peagle_deploy/redaction.py).

No real-looking secret is committed here: every token is assembled at run time from a prefix and filler
(`token(...)`), so no scanner flags this file and no reader mistakes a fixture for a leaked key.
"""

from __future__ import annotations

import json
import random
import string

import pytest

from peagle_deploy import redaction
from peagle_deploy.redaction import MASK, mask_argv, mask_env, redact

from .cli_runner import run_cli, run_cli_completed

_RANDOM = random.Random(38)  # the same filler on every run, and still not a constant in the source


def filler(length: int, alphabet: str = string.ascii_letters + string.digits) -> str:
    return "".join(_RANDOM.choice(alphabet) for _ in range(length))


def token(prefix: str, length: int, alphabet: str = string.ascii_letters + string.digits) -> str:
    return prefix + filler(length, alphabet)


def _jwt() -> str:
    import base64

    part = lambda data: base64.urlsafe_b64encode(json.dumps(data).encode()).decode().rstrip("=")  # noqa: E731
    return ".".join([part({"alg": "HS256", "typ": "JWT"}), part({"sub": filler(12)}), filler(43)])


def _aws_secret() -> str:  # 40 characters of base64, with upper and lower case and a digit
    return filler(18) + "/" + filler(20) + "+"


# one of each documented shape: (what, value)
SHAPES = [
    ("github classic", lambda: token("ghp_", 36)),
    ("github oauth", lambda: token("gho_", 36)),
    ("github user-to-server", lambda: token("ghu_", 36)),
    ("github server-to-server", lambda: token("ghs_", 36)),
    ("github refresh", lambda: token("ghr_", 36)),
    ("github fine-grained", lambda: token("github_pat_", 82, string.ascii_letters + string.digits + "_")),
    ("aws access key id", lambda: token("AKIA", 16, string.ascii_uppercase + string.digits)),
    ("aws temporary key id", lambda: token("ASIA", 16, string.ascii_uppercase + string.digits)),
    ("hugging face", lambda: token("hf_", 34, string.ascii_letters)),
    ("openai", lambda: token("sk-", 48)),
    ("openai project", lambda: token("sk-proj-", 120, string.ascii_letters + string.digits + "_-")),
    ("anthropic", lambda: token("sk-ant-api03-", 93, string.ascii_letters + string.digits + "_-") + "AA"),
    ("slack bot", lambda: "xoxb-" + filler(11, string.digits) + "-" + filler(12, string.digits) + "-" + filler(24)),
    ("slack user", lambda: "xoxp-" + filler(11, string.digits) + "-" + filler(30)),
    ("stripe live", lambda: token("sk_" + "live_", 24)),
    ("stripe restricted", lambda: token("rk_" + "live_", 24)),
    ("google api key", lambda: token("AIza", 35, string.ascii_letters + string.digits + "_-")),
    ("gitlab", lambda: token("glpat-", 20, string.ascii_letters + string.digits + "_-")),
    ("npm", lambda: token("npm_", 36)),
    ("pypi", lambda: token("pypi-AgEIcHlwaS5vcmc", 70, string.ascii_letters + string.digits + "_-")),
    ("jwt", _jwt),
]
IDS = [what for what, _ in SHAPES]


@pytest.fixture
def fresh_registry(monkeypatch):
    """Nothing registered: what is masked here is masked by its shape, not because a command registered it."""
    monkeypatch.setattr(redaction, "_SECRET_VALUES", set())
    monkeypatch.setattr(redaction, "_SECRET_KEYS", set())


@pytest.mark.parametrize("make", [m for _, m in SHAPES], ids=IDS)
def test_each_shape_is_masked_under_a_neutral_name_in_every_form(fresh_registry, make):
    value = make()
    for text in (f"GH={value}", f'{{"GH": "{value}"}}', f"export X='{value}'", f"echoed {value} back", value):
        assert value not in redact(text), text
    assert redact(f"GH={value}") == f"GH={MASK}"
    assert redaction.is_secret("GH", value) and mask_env({"GH": value, "N": "4"}) == {"GH": MASK, "N": "4"}
    assert mask_argv(["docker", "run", "--env", f"GH={value}", "img"]) == ["docker", "run", "--env", f"GH={MASK}",
                                                                         "img"]


def test_an_aws_secret_key_is_masked_as_a_whole_value_only(fresh_registry):
    """40 characters of base64 are ambiguous inside a sentence (a checksum, a path), unambiguous as a value."""
    secret = _aws_secret()
    assert redact(f"KEYRING={secret}") == f"KEYRING={MASK}" and redact(f'"X": "{secret}"') == f'"X": "{MASK}"'
    assert redaction.is_secret("X", secret) and mask_env({"X": secret}) == {"X": MASK}


def test_a_url_password_is_masked_under_any_name(fresh_registry):
    password = filler(14)
    url = f"postgres://app:{password}@db.internal:5432/app"
    assert redact(f"DB={url}") == "DB=postgres://***@db.internal:5432/app"
    assert redaction.is_secret("DB", url) and mask_env({"DB": url}) == {"DB": MASK}
    assert not redaction.is_secret("DB", "postgres://db.internal:5432/app")  # no user information: nothing to hide


@pytest.mark.parametrize("text", [
    "SM_VLLM_MAX_NUM_BATCHED_TOKENS=4096",
    "git commit 3f786850e387550fdab836ed7e6dc881de23001b",  # 40 hex characters: a checksum, not a key
    "KEEP=3f786850e387550fdab836ed7e6dc881de23001b",
    "endpoint task-parallel-drafting-benchmark-k3 in us-east-1",
    "s3://jumpstart-cache-prod-us-east-1/huggingface-llm/qwen3-coder-30b-a3b-instruct/artifacts/v1.0.0/",
    "arn:aws:sagemaker:us-east-1:123456789012:endpoint/peagle-qwen3-coder-k3",
    "hf_transfer enabled, gh_pages built, sk-learn",
])
def test_ordinary_output_is_left_alone(fresh_registry, text):
    assert redact(text) == text


def test_deploy_dry_run_masks_a_token_under_a_neutral_name_text_and_json(no_aws, fresh_registry):
    github, jwt = token("ghp_", 36), _jwt()
    args = ["deploy", "qwen3-coder", "--dry-run", "--offline", "--env", f"GH={github}", "--env", f"SESSIONLESS={jwt}",
            "--env", "SM_VLLM_MAX_NUM_BATCHED_TOKENS=4096"]
    human = run_cli(*args)
    assert human.code == 0, human.stderr
    as_json = run_cli(*args, "--json")
    assert as_json.code == 0, as_json.stderr
    for out in (human, as_json):
        assert github not in out.stdout + out.stderr and jwt not in out.stdout + out.stderr
    env = json.loads(as_json.stdout)["plan"]["create_model"]["PrimaryContainer"]["Environment"]
    assert env["GH"] == env["SESSIONLESS"] == MASK and env["SM_VLLM_MAX_NUM_BATCHED_TOKENS"] == "4096"
    shown = run_cli(*args, "--json", "--show-secrets")  # asked for on purpose: shown
    env = json.loads(shown.stdout)["plan"]["create_model"]["PrimaryContainer"]["Environment"]
    assert (env["GH"], env["SESSIONLESS"]) == (github, jwt)


def test_update_dry_run_and_status_mask_the_live_containers_token(emu_recorded, monkeypatch):
    """The token reached SageMaker with the deploy; a later process reads it back from the live model."""
    emu = emu_recorded
    github = token("ghp_", 36)
    env = {**emu.env, "COLUMNS": "200", "NO_COLOR": "1"}
    done = run_cli_completed("deploy", "qwen3-coder", "--name", "prod", "--role", emu.role_arn, "--yes", "--json",
                             "--env", f"GH={github}", env=env)
    assert done.returncode == 0, done.stderr
    assert github not in done.stdout + done.stderr
    live = emu.client("sagemaker").describe_model(ModelName="prod")["PrimaryContainer"]["Environment"]
    assert live["GH"] == github  # masked in output only: SageMaker got the value
    for args in (["update", "prod", "--k", "7", "--dry-run"], ["update", "prod", "--k", "7", "--dry-run", "--json"],
                 ["status", "prod"], ["status", "prod", "--json"]):
        monkeypatch.setattr(redaction, "_SECRET_VALUES", set())  # a new process: nothing registered yet
        monkeypatch.setattr(redaction, "_SECRET_KEYS", set())
        out = run_cli_completed(*args, env=env)
        assert out.returncode == 0, out.stderr
        assert github not in out.stdout + out.stderr, args


def test_files_and_logs_are_masked_by_shape_too(fresh_registry, tmp_path):
    """Every file goes through safe_write, every request log line through the same redact."""
    from peagle_deploy.safe_write import write_text

    github = token("ghp_", 36)
    path = write_text(tmp_path / "out.json", json.dumps({"environment": {"GH": github}}))
    assert github not in path.read_text() and json.loads(path.read_text())["environment"]["GH"] == MASK
