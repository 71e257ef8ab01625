"""Issue 28: a marked password in a target URL and marked `--env` values reach no output, no file and no file
name of invoke, bench, metrics, sweep and local: text and --json, successes and failures.

One table of cases runs in order, in process (tests/cli_runner.run_cli), against one stand-in vLLM server
(its URL given as http://USER:PASSWORD@127.0.0.1:PORT), a port that refuses connections, and the stand-in
`vllm` for `peagle local`. Before each case the redaction registry is emptied, so each case shows that its
own path registers (or never prints) the secret. After each case: stdout, stderr, every file name under the
case's folders and every file's content are searched for each marker.

The sweep's state file (mode 0600) keeps the URL's user name, never its password: `--resume` asks for that
(tests/test_sweep_url_password.py).
"""

from __future__ import annotations

import base64
import json
import os
import socket
import stat
from dataclasses import dataclass
from pathlib import Path

import pytest

from peagle_deploy import redaction
from peagle_deploy.testing.fake_vllm import FakeVllm
from tests.cli_runner import run_cli
from tests.local_helpers import free_port, model_dirs

USER = "markUserQ7"
PASSWORD = "markPassw0rdZ9x"
HF = "hf_markHfTokenValue4242"
API = "sk_markApiKeyValue4242"
MARKERS = {"password": PASSWORD, "user": USER, "hf token": HF, "api key": API,
           "basic": base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode()}
ENV = ["--env", f"HF_TOKEN={HF}", "--env", f"API_KEY={API}"]
FAST = ["-c", "1", "-n", "2", "--warmup", "0"]


def case(id, argv, exit=0, **extra):  # noqa: A002 - the table's column name
    return dict(id=id, argv=argv, exit=exit, **extra)


# {url}: the live server with credentials; {dead}: the same credentials on a port that refuses; {out}: the
# case's output folder; {model}/{drafter}: directories `peagle local` accepts; {port}: a free port
CASES = [
    case("invoke", ["invoke", "{url}/v1", "hello"]),
    case("invoke-json", ["invoke", "{url}/v1", "hello", "--json"]),
    case("invoke-container-no-stream-json", ["invoke", "{url}", "hello", "--no-stream", "--json"]),
    case("invoke-refused", ["invoke", "{dead}/v1", "hello"], exit=6),
    case("invoke-refused-json", ["invoke", "{dead}/v1", "hello", "--json"], exit=6),
    case("invoke-bad-port-json", ["invoke", f"http://{USER}:{PASSWORD}@127.0.0.1:99999/v1", "hi", "--json"], exit=2),
    case("bench", ["bench", "{url}/v1", *FAST, "--out", "{out}"]),
    case("bench-json", ["bench", "{url}", *FAST, "--mode", "p-eagle", "--k", "3", "--out", "{out}", "--json"]),
    case("bench-refused", ["bench", "{dead}/v1", *FAST, "--out", "{out}"], exit=6),
    case("bench-refused-json", ["bench", "{dead}/v1", *FAST, "--out", "{out}", "--json"], exit=6),
    case("metrics", ["metrics", "{url}/v1", "--window", "0s"]),
    case("metrics-json", ["metrics", "{url}", "--window", "0s", "--json"]),
    case("metrics-refused-json", ["metrics", "{dead}", "--window", "0s", "--json"], exit=6),
    case("sweep-dry-run", ["sweep", "m", "--url", "off={url}/v1", "--url", "p-eagle:3={url}/v1", *FAST,
                           "--dry-run"]),
    case("sweep-dry-run-json", ["sweep", "m", "--url", "off={url}/v1", *FAST, "--dry-run", "--json"]),
    # one stand-in (a K=3 server) behind both labels: --trust-labels measures "off" anyway (the subject is secrets)
    case("sweep", ["sweep", "m", "--url", "off={url}/v1", "--url", "p-eagle:3={url}/v1", *FAST, "--out", "{out}",
                   "--trust-labels"]),
    case("sweep-json", ["sweep", "m", "--url", "off={url}", *FAST, "--out", "{out}", "--json", "--trust-labels"]),
    case("sweep-refused", ["sweep", "m", "--url", "off={dead}/v1", *FAST, "--out", "{out}"], exit=6),
    case("sweep-bad-spec-json", ["sweep", "m", "--url", "p-eagle={url}/v1", "--out", "{out}", "--json"], exit=2),
    case("local-dry-run", ["local", "start", "{model}", "--drafter", "{drafter}", *ENV, "--dry-run"]),
    case("local-dry-run-json", ["local", "start", "{model}", "--drafter", "{drafter}", *ENV, "--env",
                                "SM_VLLM_API_KEY=" + API, "--dry-run", "--json"]),
    case("local-start", ["local", "start", "{model}", "--drafter", "{drafter}", *ENV, "--port", "{port}",
                         "--name", "sec", "--timeout", "60"]),
    case("local-start-taken-json", ["local", "start", "{model}", "--drafter", "{drafter}", *ENV, "--port", "{port}",
                                    "--name", "sec", "--json"], exit=2),
    case("local-status", ["local", "status"]),
    case("local-status-json", ["local", "status", "--name", "sec", "--json"]),
    case("local-logs-json", ["local", "logs", "--name", "sec", "--json"]),
    case("local-stop-json", ["local", "stop", "--name", "sec", "--json"]),
]


@dataclass
class Outcome:
    code: int
    stdout: str
    stderr: str
    files: dict[str, bytes]  # path -> content, every file under the case's output folder and the state folder
    modes: dict[str, int]


def _snapshot(*roots: Path) -> tuple[dict[str, bytes], dict[str, int]]:
    files, modes = {}, {}
    for root in roots:
        for path in sorted(root.rglob("*")) if root.exists() else []:
            if path.is_file() and not path.is_symlink():
                files[str(path)] = path.read_bytes()
                modes[str(path)] = stat.S_IMODE(path.stat().st_mode)
    return files, modes


@pytest.fixture(scope="module")
def outcomes(tmp_path_factory):
    from peagle_deploy.testing.vllm_stand_in import install

    root = tmp_path_factory.mktemp("secrets")
    model, drafter = model_dirs(root / "models")
    bin_dir = root / "bin"
    install(bin_dir)
    state = root / "state"
    with socket.socket() as closed:  # a port nobody listens on
        closed.bind(("127.0.0.1", 0))
        dead_port = closed.getsockname()[1]
    port = free_port()
    patch = pytest.MonkeyPatch()
    patch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    patch.setenv("PEAGLE_STATE_DIR", str(state))
    patch.setenv("COLUMNS", "200")
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE"):
        patch.delenv(name, raising=False)
    patch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(root / "no-credentials"))
    patch.setenv("AWS_CONFIG_FILE", str(root / "no-config"))
    patch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    patch.chdir(root)
    old_umask = os.umask(0o022)
    results: dict[str, Outcome] = {}
    try:
        with FakeVllm(tokens=["def", " f", "():", " pass"]) as server:
            values = {"{url}": server.url.replace("http://", f"http://{USER}:{PASSWORD}@"),
                      "{dead}": f"http://{USER}:{PASSWORD}@127.0.0.1:{dead_port}", "{model}": str(model),
                      "{drafter}": str(drafter), "{port}": str(port)}
            for spec in CASES:
                out = root / "out" / spec["id"]
                argv = []
                for arg in spec["argv"]:
                    for key, value in {**values, "{out}": str(out)}.items():
                        arg = arg.replace(key, value)
                    argv.append(arg)
                patch.setattr(redaction, "_SECRET_VALUES", set())  # this case registers its own secrets
                patch.setattr(redaction, "_SECRET_KEYS", set())
                result = run_cli(*argv)
                files, modes = _snapshot(out, state)
                results[spec["id"]] = Outcome(result.code, result.stdout, result.stderr, files, modes)
            results["_server"] = server.authorizations  # type: ignore[assignment]
    finally:
        os.umask(old_umask)
        run_cli("local", "stop", "--name", "sec")
        patch.undo()
    return results


def _leaks(text: str) -> list[str]:
    return [name for name, value in MARKERS.items() if value in text]


@pytest.mark.parametrize("spec", CASES, ids=[c["id"] for c in CASES])
def test_no_marked_secret_in_output_files_or_names(spec, outcomes):
    got = outcomes[spec["id"]]
    shown = f"exit {got.code}\nstdout: {got.stdout[-3000:]}\nstderr: {got.stderr[-3000:]}"
    assert got.code == spec["exit"], shown
    assert "Traceback" not in got.stdout + got.stderr, shown
    assert not _leaks(got.stdout), f"stdout shows {_leaks(got.stdout)}\n{shown}"
    assert not _leaks(got.stderr), f"stderr shows {_leaks(got.stderr)}\n{shown}"
    if "--json" in spec["argv"]:
        json.loads(got.stdout)  # still exactly one JSON document
    for path, content in got.files.items():
        assert not _leaks(path), f"file name {path} shows {_leaks(path)}"
        leaks = _leaks(content.decode("utf-8", "replace"))
        if Path(path).name == "sweep-state.json":  # the URL's user name for --resume (private), not its password
            assert got.modes[path] == 0o600, oct(got.modes[path])
            assert leaks in ([], ["user"]), leaks
            continue
        assert not leaks, f"{path} holds {leaks}"


def test_the_cases_wrote_what_they_must(outcomes):
    """The grep above looked at real files: results, reports, the state and the server log."""
    names = lambda case_id: {Path(p).name for p in outcomes[case_id].files}  # noqa: E731
    assert {n.rsplit(".", 1)[1] for n in names("bench") if n.startswith("bench-")} == {"json", "md", "png"}
    assert {"sweep.json", "sweep.md", "sweep.png", "sweep-state.json"} <= names("sweep")
    assert {"sec.json", "sec.log"} <= names("local-start")
    saved = json.loads(outcomes["local-start"].files[next(p for p in outcomes["local-start"].files
                                                          if p.endswith("sec.json"))])
    assert saved["environment"]["HF_TOKEN"] == saved["environment"]["API_KEY"] == "***"  # names kept, no values
    dry = json.loads(outcomes["local-dry-run-json"].stdout)
    assert dry["environment"]["HF_TOKEN"] == "***" and "'***'" not in " ".join(dry["command"])
    assert dry["command"][dry["command"].index("--api-key") + 1] == "***"
    shown = json.loads(outcomes["invoke-json"].stdout)
    assert shown["target"].startswith("http://***@127.0.0.1:")


def test_the_server_got_the_credentials_as_basic_auth(outcomes):
    """Masked in what peagle shows, the user information still authenticates every request it sends."""
    sent = outcomes["_server"]
    expected = "Basic " + MARKERS["basic"]
    assert {"/v1/chat/completions", "/invocations", "/metrics"} <= {path for path, _ in sent}
    assert all(auth == expected for _, auth in sent), sorted({auth for _, auth in sent}, key=str)


def test_local_state_is_private_under_umask_022(outcomes):
    got = outcomes["local-start"]
    state_files = {p: m for p, m in got.modes.items() if "/state/" in p}
    assert state_files and all(mode == 0o600 for mode in state_files.values()), {p: oct(m) for p, m in
                                                                                  state_files.items()}
    state_dir = Path(next(iter(state_files))).parent
    assert stat.S_IMODE(state_dir.stat().st_mode) == 0o700
