"""The suite's ways of running `peagle` (tests/README.md) do what they promise: a forked run is a process with
the caller's argv, environment, working directory and file descriptors, ending as the child ended; an
in-process run leaves this process as it found it; neither waits in real time between AWS polls."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

from .cli_runner import FakeClock, fake_wait_clock, run_cli
from .conftest import PEAGLE
from .forked_peagle import forked_peagle, forked_peagle_server_pid


def test_a_forked_run_answers_like_the_executable(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "PEAGLE_"))}
    env.update(AWS_CONFIG_FILE=os.devnull, AWS_SHARED_CREDENTIALS_FILE=os.devnull, COLUMNS="200")
    for args in (["models", "--json"], ["deploy", "qwen3-coder", "--k", "0"], ["--version"], []):
        runs = [subprocess.run([program, *args], env=env, cwd=tmp_path, capture_output=True, text=True, timeout=120,
                               stdin=subprocess.DEVNULL) for program in (PEAGLE, forked_peagle())]
        assert [(r.returncode, r.stdout, r.stderr) for r in runs][0] == \
            [(r.returncode, r.stdout, r.stderr) for r in runs][1], args


AUDIT_IMPORTS = r"""
import json, os, sys
sys.path.insert(0, sys.argv[1])
# imported by the fork server before peagle's modules (pydantic by the SDK's core): what they read is theirs
import boto3, botocore.session
from pydantic import BaseModel
from peagle_deploy.cli.app import main
from fork_preload import import_peagle, peagle_modules
real, read = os.environ, set()

class Spy:  # os.environ, noting every name read
    def __getattr__(self, name):
        return getattr(real, name)
    def __getitem__(self, key):
        read.add(key)
        return real[key]
    def get(self, key, default=None):
        read.add(key)
        return real.get(key, default)
    def __contains__(self, key):
        read.add(key)
        return key in real
    def __iter__(self):
        read.add("<every name>")
        return iter(real)
    def __len__(self):
        return len(real)

os.environ = Spy()
import_peagle()
os.environ = real
print(json.dumps({"read": sorted(read), "modules": len(peagle_modules()),
                  "sdk": sorted(m for m in sys.modules if m.startswith("sagemaker"))}))
"""


def test_the_fork_servers_peagle_imports_read_no_environment():
    """What a forked child inherits from the server's imports must not depend on the server's environment (it
    has none of the test's AWS_ or PEAGLE_ settings): importing every preloaded module reads no variable but
    pydantic's plugin switch and Typer's rich switch, which the suite never sets, and no SageMaker SDK module."""
    from pathlib import Path

    done = subprocess.run([sys.executable, "-c", AUDIT_IMPORTS, str(Path(__file__).parent)], capture_output=True,
                          text=True, timeout=120, env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"})
    assert done.returncode == 0, done.stderr
    audit = json.loads(done.stdout)
    assert set(audit["read"]) <= {"PYDANTIC_DISABLE_PLUGINS", "TYPER_USE_RICH"}, audit["read"]
    assert audit["modules"] > 80 and audit["sdk"] == [], audit


def test_a_forked_run_has_the_callers_cwd_environment_stdin_and_umask(tmp_path):
    (tmp_path / "request.json").write_text(json.dumps({"messages": [{"role": "user", "content": "hi"}]}))
    env = {"PATH": os.environ["PATH"], "AWS_EC2_METADATA_DISABLED": "true", "NO_COLOR": "1"}
    # a relative --payload is read from the working directory (then nothing listens on the port: exit 6)
    done = subprocess.run([forked_peagle(), "invoke", "http://127.0.0.1:9", "--payload", "request.json", "--json"],
                          env=env, cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert done.returncode == 6 and "connection refused by http://127.0.0.1:9" in done.stderr, done.stderr
    assert json.loads(done.stdout)["error"]["exit_code"] == 6
    piped = subprocess.run([forked_peagle(), "invoke", "http://127.0.0.1:9", "--payload", "-", "--json"], env=env,
                           cwd=tmp_path, input="{not json", capture_output=True, text=True, timeout=120)
    assert piped.returncode == 2 and "stdin" in piped.stderr.lower(), piped.stderr  # it read our stdin


def _signal_state(pid: int) -> dict[str, str]:
    """A process's signal lines from /proc (ignored, blocked, caught, pending) and its state."""
    lines = Path(f"/proc/{pid}/status").read_text().splitlines()
    return dict(line.split(":\t", 1) for line in lines if line.startswith(("Sig", "ShdPnd", "State")))


def _forked_children() -> list[int]:
    server = forked_peagle_server_pid()
    return [int(p) for t in Path(f"/proc/{server}/task").iterdir() for p in (t / "children").read_text().split()]


def test_a_signal_to_the_shim_reaches_the_forked_child(emu):
    proc = subprocess.Popen([forked_peagle(), "status", "--watch", "--interval", "60"], env=emu.env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True)
    try:
        first = proc.stdout.readline()  # the first refresh is printed: the child runs, its handlers are in place
        assert first, proc.stderr.read()
        proc.send_signal(signal.SIGINT)
        try:
            out, err = proc.communicate(timeout=60)
        except subprocess.TimeoutExpired:  # say where the signal stopped: the shim's and the child's signal state
            states = {pid: _signal_state(pid) for pid in (proc.pid, *_forked_children())}
            raise AssertionError(f"Ctrl-C did not end `status --watch` in 60 s: {states}") from None
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 0 and err == "", err  # `status --watch` ends quietly on Ctrl-C, as documented


EXEC_WITH_SIGNALS_SET = ("import os, signal, sys; signal.signal(signal.SIGHUP, signal.SIG_IGN); "
                         "signal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGUSR1]); os.execv(sys.argv[1], sys.argv[1:])")


def test_a_forked_child_has_the_signal_state_an_exec_would_give_it(emu):
    """A caller's ignored and blocked signals reach the command as through an exec, whatever the fork server
    inherited; the rest are as a fresh interpreter sets them (SIGINT caught, for KeyboardInterrupt)."""
    states = []
    for program in (PEAGLE, forked_peagle()):
        proc = subprocess.Popen([sys.executable, "-c", EXEC_WITH_SIGNALS_SET, program, "status", "--watch",
                                 "--interval", "60"], env=emu.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                stdin=subprocess.DEVNULL, text=True)
        try:
            assert proc.stdout.readline(), proc.stderr.read()
            (pid,) = [proc.pid] if program == PEAGLE else _forked_children()
            state = _signal_state(pid)  # the 31 standard signals: glibc keeps 32 and 33 for its threads
            states.append({k: int(state[k], 16) & 0x7FFFFFFF for k in ("SigIgn", "SigBlk", "SigCgt")})
        finally:
            proc.kill()
            proc.communicate()
    assert states[0]["SigBlk"] & (1 << (signal.SIGUSR1 - 1)) and states[0]["SigIgn"] & (1 << (signal.SIGHUP - 1))
    assert states[1] == states[0]


def test_an_in_process_run_leaves_this_process_as_it_found_it(tmp_path):
    from peagle_deploy import redaction

    before = (dict(os.environ), os.getcwd(), signal.getsignal(signal.SIGTERM), set(redaction._SECRET_VALUES))
    result = run_cli("deploy", "qwen3-coder", "--dry-run", "--offline", "--env", "HF_TOKEN=hf_harnessSecret123",
                     env={**os.environ, "ONLY_IN_THE_RUN": "1"}, cwd=tmp_path)
    assert result.code == 0, result.stderr
    assert "hf_harnessSecret123" not in result.stdout  # masked during the run
    assert (dict(os.environ), os.getcwd(), signal.getsignal(signal.SIGTERM), set(redaction._SECRET_VALUES)) == before


def test_an_in_process_run_never_empties_the_builtins_other_threads_use():
    """The run's module state is put back by emptying and refilling each saved container: the interpreter's
    builtins dict (every module's `__builtins__`) must not be one, or an emulator thread finds no `super`."""
    import builtins

    from .cli_runner import _module_state

    assert run_cli("--version").code == 0  # peagle's modules are imported
    assert not [c for c, _ in _module_state() if c is vars(builtins)]


def test_the_waits_between_polls_run_on_the_fake_clock(emu):
    emu.script_endpoints(creating_polls=3)
    with fake_wait_clock(FakeClock()) as clock:
        result = run_cli("deploy", "qwen3-coder", "--name", "clocked", "--role", emu.role_arn, "--yes",
                         env=emu.env, fake_clock=False)  # this test's own fake clock, to read what was asked
    assert result.code == 0, result.stderr
    assert clock.sleeps[:3] == [2.0, 3.0, 4.5]  # three Creating polls, lifecycle.wait's back-off
    assert "clocked: InService (9s)" in result.stderr  # elapsed time as the fake clock tells it: 2 + 3 + 4.5 s
