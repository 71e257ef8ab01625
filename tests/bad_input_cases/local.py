"""Bad input for `peagle local` (h6's table-driven harness): one line, exit 2, nothing started."""

CASES = [
    dict(id="local-model-dir-missing", argv=["local", "start", "/nonexistent-peagle-model", "--drafter", "/"],
         exit=2, stderr=r"^error: MODEL_DIR /nonexistent-peagle-model is not a directory"),
    dict(id="local-no-drafter", argv=["local", "start", "/"], exit=2,
         stderr=r"^error: --mode p-eagle needs the drafter: pass --drafter DRAFTER_DIR, or --mode off$"),
    dict(id="local-drafter-with-off", argv=["local", "start", "/", "--drafter", "/", "--mode", "off"], exit=2,
         stderr=r"^error: --drafter has no effect with --mode off"),
    dict(id="local-bad-mode", argv=["local", "start", "/", "--drafter", "/", "--mode", "fast"], exit=2,
         stderr=r"^error: unknown mode 'fast'"),
    dict(id="local-bad-name", argv=["local", "stop", "--name", "a b"], exit=2,
         stderr=r"^error: --name 'a b' is not a valid server name"),
    dict(id="local-logs-unknown", argv=["local", "logs", "--name", "peagle-no-such-server"], exit=2,
         stderr=r"^error: no local server named 'peagle-no-such-server'"),
]
