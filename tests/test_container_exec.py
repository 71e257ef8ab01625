"""The entrypoint execs vLLM (same process), so SageMaker's or docker's SIGTERM reaches vLLM itself."""

import json
import os
import signal
import stat
import subprocess
import sys
import time

import pytest

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="exec and POSIX signals")

STAND_IN = """#!{python}
import json, os, signal, sys, time
record = {record!r}
def on_term(signum, frame):
    json.dump({{"pid": os.getpid(), "argv": sys.argv[1:], "signal": signum}}, open(record, "w"))
    sys.exit(0)
signal.signal(signal.SIGTERM, on_term)
open({ready!r}, "w").write(str(os.getpid()))
for _ in range(600):  # bounded: at most 60 s if the test never signals
    time.sleep(0.1)
"""


def test_vllm_replaces_the_entrypoint_process_and_gets_sigterm(tmp_path):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    record, ready = tmp_path / "record.json", tmp_path / "ready"
    fake = bin_dir / "vllm"
    fake.write_text(STAND_IN.format(python=sys.executable, record=str(record), ready=str(ready)))
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
    env = {"PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}", "HOME": str(tmp_path), "HF_MODEL_ID": "m",
           "PEAGLE_MODEL_DIR": str(tmp_path / "no-model-dir")}
    proc = subprocess.Popen([sys.executable, "-m", "peagle_deploy.container"], env=env, cwd=tmp_path,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        for _ in range(300):  # bounded wait for the stand-in to install its handler
            if ready.exists() and ready.read_text():
                break
            if proc.poll() is not None:
                break
            time.sleep(0.05)
        assert ready.exists(), f"stand-in never started: {proc.communicate(timeout=10)}"
        assert int(ready.read_text()) == proc.pid  # exec, not a child process
        proc.send_signal(signal.SIGTERM)
        _, stderr = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate(timeout=10)
    assert proc.returncode == 0, stderr
    got = json.loads(record.read_text())
    assert got == {"pid": proc.pid, "argv": ["serve", "m", "--port", "8080"], "signal": signal.SIGTERM}


def test_missing_vllm_executable_is_one_line_and_exit_127(tmp_path):
    env = {"PATH": str(tmp_path), "HOME": str(tmp_path), "HF_MODEL_ID": "m",
           "PEAGLE_MODEL_DIR": str(tmp_path / "no-model-dir")}
    out = subprocess.run([sys.executable, "-m", "peagle_deploy.container"], env=env, cwd=tmp_path,
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 127
    assert out.stderr.strip().splitlines()[-1] == "peagle-container: error: cannot start vllm: No such file or directory"
