"""Issue 38 item 6: a `--url`'s password stays out of the sweep's state file; `--resume` gets it back from the
environment variable the state names, or from the same `--url` given again, and refuses in one line without it.

The sweep runs in process (tests/cli_runner.run_cli) against one stand-in vLLM server reached as
http://USER:PASSWORD@127.0.0.1:PORT; a killed run is the state file of a finished one with its last configuration
put back to pending, as a SIGKILL before its bench leaves it (no result).
"""

from __future__ import annotations

import base64
import json
import stat

import pytest

from peagle_deploy import redaction
from peagle_deploy.sweep.config import PASSWORD_ENV, parse_url_specs
from peagle_deploy.testing.fake_vllm import FakeVllm
from tests.cli_runner import run_cli

USER = "sweepUserQ7"
PASSWORD = "sweepPa55" + "wordZ9x"  # assembled: a marker to search for, not a secret
FAST = ["-c", "1", "-n", "2", "--warmup", "0", "--agreement-prompts", "0", "--trust-labels"]
P_EAGLE = "p-eagle K=3"


@pytest.fixture
def server():
    with FakeVllm(tokens=["def", " f", "():", " pass"]) as fake:
        yield fake


@pytest.fixture
def clean_env(monkeypatch, no_aws):
    monkeypatch.delenv(PASSWORD_ENV, raising=False)
    monkeypatch.setenv("COLUMNS", "200")
    # each command as a new process would: nothing registered from an earlier one
    monkeypatch.setattr(redaction, "_SECRET_VALUES", set())
    monkeypatch.setattr(redaction, "_SECRET_KEYS", set())
    return monkeypatch


def _url(server, password=PASSWORD) -> str:
    return server.url.replace("http://", f"http://{USER}:{password}@") + "/v1"


def _sweep(server, out):
    done = run_cli("sweep", "m", "--url", f"off={_url(server)}", "--url", f"p-eagle:3={_url(server)}", *FAST,
                   "--out", str(out))
    assert done.code == 0, done.stderr
    return out / "sweep-state.json"


def _killed_before_the_last_bench(state_path):
    """The state a SIGKILL before p-eagle K=3's bench leaves: that configuration still to measure."""
    state = json.loads(state_path.read_text())
    state["status"] = "interrupted"
    state["configs"][P_EAGLE].update(status="pending", measured=False, result_file=None, spent_usd=0.0)
    state_path.write_text(json.dumps(state))


def test_the_state_file_keeps_no_password_but_names_where_resume_finds_it(server, clean_env, tmp_path):
    state_path = _sweep(server, tmp_path / "out")
    text = state_path.read_text()
    assert PASSWORD not in text and stat.S_IMODE(state_path.stat().st_mode) == 0o600
    for config in json.loads(text)["request"]["configurations"]:
        assert config["url"] == server.url + "/v1"  # no user information
        assert (config["url_user"], config["password_env"]) == (USER, PASSWORD_ENV)  # one password: one name


def test_resume_without_the_password_is_refused_in_one_line_before_anything_runs(server, clean_env, tmp_path):
    state_path = _sweep(server, tmp_path / "out")
    _killed_before_the_last_bench(state_path)
    sent = len(server.authorizations)
    refused = run_cli("sweep", "--resume", str(state_path))
    assert refused.code == 2, refused.stderr
    [line] = [x for x in refused.stderr.splitlines() if x.startswith("error:")]
    assert f"needs a password, which {state_path} does not keep" in line
    assert f"set {PASSWORD_ENV}, or pass --url p-eagle:3=URL with its credentials again" in line
    assert len(server.authorizations) == sent  # nothing was sent to the server


def _resumed_with_the_credentials(server, state_path, *extra):
    _killed_before_the_last_bench(state_path)
    sent = len(server.authorizations)
    resumed = run_cli("sweep", "--resume", str(state_path), *extra)
    assert resumed.code == 0, resumed.stderr
    assert PASSWORD not in resumed.stdout + resumed.stderr + state_path.read_text()
    basic = "Basic " + base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode()
    after = server.authorizations[sent:]
    assert after and all(auth == basic for _, auth in after), after  # the resumed bench authenticated
    assert json.loads(state_path.read_text())["configs"][P_EAGLE]["measured"] is True


def test_resume_reads_the_password_from_the_variable_the_state_names(server, clean_env, tmp_path):
    state_path = _sweep(server, tmp_path / "out")
    clean_env.setenv(PASSWORD_ENV, PASSWORD)
    _resumed_with_the_credentials(server, state_path)


def test_resume_takes_the_password_from_the_same_url_given_again(server, clean_env, tmp_path):
    state_path = _sweep(server, tmp_path / "out")
    _resumed_with_the_credentials(server, state_path, "--url", f"p-eagle:3={_url(server)}")


def test_resume_refuses_a_url_that_is_not_the_sweeps(server, clean_env, tmp_path):
    state_path = _sweep(server, tmp_path / "out")
    _killed_before_the_last_bench(state_path)
    other = f"http://{USER}:{PASSWORD}@127.0.0.1:9/v1"
    refused = run_cli("sweep", "--resume", str(state_path), "--url", f"p-eagle:3={other}")
    assert refused.code == 2 and "--url p-eagle:3 on --resume is not the sweep's server for p-eagle K=3" in \
        refused.stderr, refused.stderr
    assert PASSWORD not in refused.stdout + refused.stderr


def test_different_passwords_get_a_variable_each():
    configs = parse_url_specs([f"off=http://{USER}:first-one@a:1/v1", f"p-eagle:3=http://{USER}:second-one@b:2/v1",
                               "eagle3:3=http://c:3/v1", "p-eagle:7=https://onlyAtoken@d:4/v1"])
    assert [(c.password_env, c.url_user) for c in configs] == [
        (f"{PASSWORD_ENV}_OFF", USER), (f"{PASSWORD_ENV}_P_EAGLE_K3", USER), (None, None),
        (f"{PASSWORD_ENV}_P_EAGLE_K7", None)]  # a user name alone is the credential: asked for, never kept
    dumped = [c.model_dump() for c in configs]
    assert [c["url"] for c in dumped] == ["http://a:1/v1", "http://b:2/v1", "http://c:3/v1", "https://d:4/v1"]
