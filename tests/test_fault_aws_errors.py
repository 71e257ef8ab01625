"""One AWS error mapping for every command (issue 10 item 9, issue 11 item 1's AWS parts, issue 12's one
classifier), and the README's exit-code table, through `peagle` processes (forked, tests/forked_peagle.py: the
exit status as a process returns it)."""

from __future__ import annotations

import re
import subprocess
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from peagle_deploy.errors import ExitCode
from .forked_peagle import forked_peagle

README = Path(__file__).resolve().parents[1] / "README.md"
NO_RETRY = {"AWS_MAX_ATTEMPTS": "1",  # botocore's retries would only add back-off sleeps here
            "PEAGLE_POLL_INTERVAL_S": "0"}  # and so would peagle's own read retries (status retries its reads)


def peagle(env, *args):
    return subprocess.run([forked_peagle(), *args], env={**env, "COLUMNS": "200"}, capture_output=True, text=True,
                          timeout=180, stdin=subprocess.DEVNULL)


def one_error_line(out) -> str:
    lines = [line for line in out.stderr.splitlines() if line.startswith("error:")]
    assert len(lines) == 1 and "Traceback" not in out.stderr, out.stderr
    return lines[0]


def test_readme_exit_code_table_is_the_code():
    """The README's table lists exactly the codes peagle exits with, under the names the code gives them."""
    text = README.read_text()
    rows = re.findall(r"^\|\s*`?(\d+)`?\s*\|\s*([^|]+?)\s*\|", text, flags=re.M)
    table = {int(code): meaning for code, meaning in rows if code.isdigit() and int(code) in range(0, 256)}
    assert set(table) == {int(c) for c in ExitCode}, table
    words = {ExitCode.OK: "ok", ExitCode.UNEXPECTED: "unexpected", ExitCode.USAGE: "bad input",
             ExitCode.AUTH: "credentials", ExitCode.QUOTA: "quota", ExitCode.TIMEOUT: "timed out",
             ExitCode.FAILED: "failed", ExitCode.INTERRUPTED: "interrupted"}
    for code, word in words.items():
        assert word in table[int(code)].lower(), (code, table[int(code)])


COMMANDS = {
    "deploy": lambda emu: ["deploy", "qwen3-coder", "--name", "codes", "--role", emu.role_arn, "--yes", "--offline"],
    "status": lambda emu: ["status"],
    "cleanup": lambda emu: ["cleanup", "--all", "--yes"],
}
FAILURES = [  # (AWS error code, HTTP status, exit code)
    ("AccessDeniedException", 400, 3),
    ("ValidationException", 400, 2),
    ("ResourceLimitExceeded", 400, 4),
    ("InternalFailure", 500, 1),
]


@pytest.mark.parametrize("command", sorted(COMMANDS))
@pytest.mark.parametrize("code,status,exit_code", FAILURES, ids=[f[0] for f in FAILURES])
def test_the_same_aws_failure_gives_the_same_exit_code_in_every_command(emu, command, code, status, exit_code):
    for action in ("ListEndpoints", "DescribeModel"):  # the first SageMaker call of status/cleanup and of deploy
        emu.fail(action, code=code, status=status, message="injected", times=10)  # outlasts status's read retries
    out = peagle({**emu.env, **NO_RETRY}, *COMMANDS[command](emu))
    line = one_error_line(out)
    assert out.returncode == exit_code, out.stderr
    assert code in line
    assert not any(c.startswith("Create") for c in emu.calls)


class _HtmlHandler(BaseHTTPRequestHandler):
    def do_POST(self):  # noqa: N802 - http.server's naming
        body = b"<!DOCTYPE html><html><body><h1>Welcome to nginx</h1></body></html>"
        self.send_response(404 if "404" in self.path else 200)
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_POST

    def log_message(self, *args):
        pass


@pytest.fixture(scope="module")
def html_server():
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _HtmlHandler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_port}"
    httpd.shutdown()
    thread.join(10)
    httpd.server_close()  # the listening socket, and the request threads joined


def _closed_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _environments(emu, html_url, tmp_path):
    bad_config = tmp_path / "config"
    bad_config.write_text("[default\nregion = us-east-1\n")
    return {  # name: (env changes, exit code, text in the error line)
        "dead-endpoint-url": ({"AWS_ENDPOINT_URL": f"http://127.0.0.1:{_closed_port()}"}, 3, "could not reach AWS"),
        "malformed-endpoint-url": ({"AWS_ENDPOINT_URL": "not a url"}, 2, "AWS_ENDPOINT_URL must be a URL"),
        "html-page-200": ({"AWS_ENDPOINT_URL": html_url}, 3, "not an AWS API"),
        "html-page-404": ({"AWS_ENDPOINT_URL": html_url + "/404"}, 3, "not an AWS API"),
        "missing-profile": ({"AWS_PROFILE": "nope"}, 2, "AWS profile 'nope' (from AWS_PROFILE) not found"),
        "malformed-config": ({"AWS_CONFIG_FILE": str(bad_config), "AWS_PROFILE": "default"}, 3, "cannot read"),
    }


@pytest.mark.parametrize("command", sorted(COMMANDS))
@pytest.mark.parametrize("case", ["dead-endpoint-url", "malformed-endpoint-url", "html-page-200", "html-page-404",
                                  "missing-profile", "malformed-config"])
def test_a_broken_aws_environment_is_never_exit_1(emu, html_server, tmp_path, command, case):
    changes, exit_code, text = _environments(emu, html_server, tmp_path)[case]
    env = {**emu.env, **NO_RETRY, **changes}
    if "AWS_PROFILE" in changes:  # a profile is only looked up when no key is in the environment
        for key in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"):
            env.pop(key)
    out = peagle(env, *COMMANDS[command](emu))
    line = one_error_line(out)
    assert out.returncode == exit_code, out.stderr
    assert text in line and "None" not in line


def test_a_dry_run_needs_no_aws_account_even_with_a_missing_profile(emu):
    env = {k: v for k, v in emu.env.items() if not k.startswith("AWS_ACCESS") and not k.startswith("AWS_SECRET")
           and k != "AWS_SESSION_TOKEN"}
    out = peagle({**env, "AWS_PROFILE": "nope"}, "deploy", "qwen3-coder", "--dry-run", "--json")
    assert out.returncode == 0, out.stderr
    assert '"dry_run": true' in out.stdout


def test_transient_read_errors_during_the_wait_and_verification_do_not_fail_the_deploy(emu):
    """Issue 10 item 4 through the executable: with botocore's retries off, one InternalFailure on the wait's
    DescribeEndpoint and one on the verification's DescribeModel are asked again; the deploy succeeds."""
    emu.script_endpoints(creating_polls=1)
    emu.fail("DescribeEndpoint", code="InternalFailure", status=500, times=1, skip=1)  # call 1: existence check
    emu.fail("DescribeModel", code="InternalFailure", status=500, times=1, skip=1)
    out = peagle({**emu.env, **NO_RETRY}, "deploy", "qwen3-coder", "--name", "flaky-reads", "--role", emu.role_arn,
                 "--yes", "--json", "--offline")
    assert out.returncode == 0, out.stderr
    assert emu.calls.count("DescribeModel") >= 3  # existence check, the failed read, the read asked again
    assert emu.resource_names()["endpoints"] == ["flaky-reads"]
