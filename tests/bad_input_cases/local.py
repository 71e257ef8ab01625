"""Bad input for `peagle local` (h6's table-driven harness): one line, exit 2, nothing started."""

CASES = [
    dict(id="local-model-dir-missing", argv=["local", "start", "/nonexistent-peagle-model", "--drafter", "/"],
         exit=2, stderr=r"^error: MODEL_DIR /nonexistent-peagle-model is not a directory"),
    dict(id="local-no-drafter", argv=["local", "start", "/"], exit=2,
         stderr=r"^error: --mode p-eagle needs the drafter: pass --drafter DRAFTER_DIR, or --mode off$"),
    dict(id="local-drafter-with-off", argv=["local", "start", "/", "--drafter", "/", "--mode", "off"], exit=2,
         stderr=r"^error: --drafter has no effect with --mode off"),
    dict(id="local-bad-mode", argv=["local", "start", "/", "--drafter", "/", "--mode", "fast"], exit=2,
         stderr=r"^error: --mode 'fast' is not a mode: pass --mode p-eagle, eagle3, dflash or off$"),
    dict(id="local-bad-name", argv=["local", "stop", "--name", "a b"], exit=2,
         stderr=r"^error: --name 'a b' is not a valid server name"),
    dict(id="local-logs-unknown", argv=["local", "logs", "--name", "peagle-no-such-server"], exit=2,
         stderr=r"^error: no local server named 'peagle-no-such-server'"),
]

# issue 23: the classes of the new-user round. MODEL_DIR and --drafter exist (a config.json each), so the
# refusals below are about the flag each names.
DIRS = {"m/config.json": "{}", "d/config.json": "{}"}
START = ["local", "start", "{tmp}/m", "--drafter", "{tmp}/d", "--dry-run"]

CASES += [
    # one rule for "nothing was done": a named server that is not there is exit 2, for stop, status and logs alike
    dict(id="local-stop-unknown", argv=["local", "stop", "--name", "nosuch"], exit=2,
         stderr=r"^error: no local server named 'nosuch': nothing was stopped; see peagle local status$"),
    dict(id="local-stop-default-nothing-running", argv=["local", "stop"], exit=2,
         stderr=r"no local server named 'default'"),
    dict(id="local-stop-unknown-json", argv=["local", "stop", "--name", "nosuch", "--json"], exit=2,
         stderr=r"no local server named 'nosuch'"),
    dict(id="local-status-unknown", argv=["local", "status", "--name", "nosuch"], exit=2,
         stderr=r"^error: no local server named 'nosuch': see peagle local status$"),
    dict(id="local-status-unknown-json", argv=["local", "status", "--name", "nosuch", "--json"], exit=2,
         stderr=r"no local server named 'nosuch'"),
    dict(id="local-logs-default-nothing-running", argv=["local", "logs"], exit=2,
         stderr=r"no local server named 'default'"),
    dict(id="local-status-bad-name", argv=["local", "status", "--name", "../etc"], exit=2,
         stderr=r"--name '\.\./etc' is not a valid server name"),
    dict(id="local-stop-empty-name", argv=["local", "stop", "--name", ""], exit=2,
         stderr=r"--name '' is not a valid server name"),
    # numbers: one bound per flag
    dict(id="local-port-zero", argv=[*START, "--port", "0"], files=DIRS, exit=2, stderr=r"--port"),
    dict(id="local-port-too-big", argv=[*START, "--port", "70000"], files=DIRS, exit=2, stderr=r"--port"),
    dict(id="local-timeout-huge", argv=[*START, "--timeout", "999999"], files=DIRS, exit=2,
         stderr=r"--timeout must be at least 1 and at most 86400 seconds, got 999999"),
    dict(id="local-logs-lines-huge", argv=["local", "logs", "--lines", "99999999"], exit=2,
         stderr=r"--lines must be at least 1 and at most 100000, got 99999999"),
    dict(id="local-k-zero", argv=[*START, "--k", "0"], files=DIRS, exit=2,
         stderr=r"--k must be at least 1, got 0: pass --k 1\.\.16"),
    dict(id="local-k-too-deep", argv=[*START, "--k", "99"], files=DIRS, exit=2,
         stderr=r"^error: --k 99 is above peagle's limit of 16: pass --k 1\.\.16$"),
    dict(id="local-k-float-text", argv=[*START, "--k", "1e3"], files=DIRS, exit=2, stderr=r"--k '1e3' is not a whole number: pass e\.g\. --k 3"),
    # paths: a file, a fifo where a folder belongs
    dict(id="local-model-dir-is-a-file", argv=["local", "start", "{tmp}/f", "--drafter", "{tmp}/d"],
         files={"f": "x", "d/config.json": "{}"}, exit=2, stderr=r"MODEL_DIR .*f is not a directory"),
    dict(id="local-model-dir-is-a-fifo", argv=["local", "start", "{tmp}/f", "--drafter", "{tmp}/d"],
         files={"f": "<fifo>", "d/config.json": "{}"}, exit=2, stderr=r"MODEL_DIR .*f is not a directory"),
    dict(id="local-drafter-is-a-file", argv=["local", "start", "{tmp}/m", "--drafter", "{tmp}/f"],
         files={"m/config.json": "{}", "f": "x"}, exit=2, stderr=r"--drafter .*f is not a directory"),
    dict(id="local-model-dir-empty", argv=["local", "start", "{tmp}/m", "--drafter", "{tmp}/d"],
         files={"m": "<dir>", "d/config.json": "{}"}, exit=2, stderr=r"MODEL_DIR .*m is empty"),
    # flags that agree: the one mode parser; env rules as deploy's
    dict(id="local-mode-typo", argv=[*START, "--mode", "p-eagel"], files=DIRS, exit=2, stderr=r"--mode 'p-eagel' is not a mode"),
    dict(id="local-env-sets-k", argv=[*START, "--env", 'SM_VLLM_SPECULATIVE_CONFIG={"num_speculative_tokens": 5}'],
         files=DIRS, exit=2, stderr=r"--env SM_VLLM_SPECULATIVE_CONFIG sets num_speculative_tokens, which peagle sets "
                                    r"from --mode and --k: use --k instead"),
    dict(id="local-env-lossy", argv=[*START, "--env", 'SM_VLLM_SPECULATIVE_CONFIG={"rejection_sample_method": "fly"}'],
         files=DIRS, exit=2, stderr=r"rejection_sample_method 'fly' is lossy .*: pass --allow-lossy"),
    dict(id="local-env-twice", argv=[*START, "--env", "A=1", "--env", "A=2"], files=DIRS, exit=2,
         stderr=r"--env A is given twice"),
    dict(id="local-unknown-model", argv=[*START, "--model", "nope"], files=DIRS, exit=2, stderr=r"unknown model 'nope'"),
    dict(id="local-docker-without-image", argv=[*START, "--docker"], files=DIRS, exit=2,
         stderr=r"--docker needs an image: pass --image"),
    # the user's environment: an ASCII-only terminal still gets its one line (exit 2, never 1)
    dict(id="local-ascii-terminal", argv=["local", "stop", "--name", "nosuch"], env={"PYTHONIOENCODING": "ascii"},
         exit=2, stderr=r"no local server named 'nosuch'"),
]
