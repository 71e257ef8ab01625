"""The container entrypoint checks a DFlash config before vLLM boots, as it checks P-EAGLE's: the vLLM version has the
method, the drafter directory is a DFlash drafter's (config, mask token id for that version, no P-EAGLE
`mask_hidden`, K within its block) and the attention backend can attend non-causally. In-process: `validate` and
`main(["--print-args"])` (which never execs vLLM)."""

from __future__ import annotations

import json

import pytest

from peagle_deploy.container.__main__ import main
from peagle_deploy.container.args import ContainerConfigError
from peagle_deploy.container.validate import validate
from peagle_deploy.testing.hub_stand_in import safetensors_bytes

ENV = "SM_VLLM_SPECULATIVE_CONFIG"


def drafter(tmp_path, *, config: dict | None = None, tensors: dict | None = None, name: str = "dflash") -> str:
    path = tmp_path / name
    path.mkdir()
    base = {"architectures": ["DFlashDraftModel"], "block_size": 16,
            "dflash_config": {"mask_token_id": 151669, "target_layer_ids": [1, 2]}}
    (path / "config.json").write_text(json.dumps(base if config is None else config))
    (path / "model.safetensors").write_bytes(safetensors_bytes(tensors or {"fc.weight": ([1], b"\0\0\0\0")}))
    return str(path)


def env(model: str, k: int = 7, **extra: str) -> dict[str, str]:
    return {ENV: json.dumps({"model": model, "method": "dflash", "num_speculative_tokens": k}),
            "SM_VLLM_ATTENTION_BACKEND": "flash_attn", **extra}


def test_a_dflash_drafter_passes_and_reaches_vllms_argv(tmp_path, monkeypatch, capsys):
    path = drafter(tmp_path)
    assert validate(env(path), vllm_version="0.28.0")["method"] == "dflash"
    for key, value in {**env(path), "HF_MODEL_ID": "m"}.items():
        monkeypatch.setenv(key, value)
    assert main(["--print-args"]) == 0
    argv = capsys.readouterr().out
    assert "--attention-backend flash_attn" in argv and '"method": "dflash"' in argv


@pytest.mark.parametrize("version, config, tensors, k, extra, message", [
    ("0.18.0", None, None, 7, {}, "vLLM 0.18.0 has no DFlash (its speculative methods name \"dflash\" from 0.20)"),
    ("0.28.0", {"architectures": ["LlamaForCausalLMEagle3"], "mask_token_id": 5}, None, 7, {},
     "is not a DFlash drafter's (no dflash_config; architectures ['LlamaForCausalLMEagle3'])"),
    ("0.28.0", {"architectures": ["DFlashDraftModel"], "dflash_config": {"target_layer_ids": [1]}}, None, 7, {},
     "names no mask token id vLLM 0.28.0 reads"),
    ("0.28.0", None, {"mask_hidden": ([1], b"\0\0\0\0")}, 7, {},
     "hold a mask_hidden tensor: that is a P-EAGLE head, not a DFlash drafter"),
    ("0.28.0", None, None, 16, {}, "num_speculative_tokens 16 does not fit the DFlash drafter's block of 16"),
    ("0.28.0", None, None, 7, {"SM_VLLM_ATTENTION_BACKEND": "rocm_aiter_unified_attn"},
     "SM_VLLM_ATTENTION_BACKEND=rocm_aiter_unified_attn cannot attend non-causally"),
])
def test_what_vllm_would_fail_on_is_refused_first(tmp_path, version, config, tensors, k, extra, message):
    path = drafter(tmp_path, config=config, tensors=tensors)
    with pytest.raises(ContainerConfigError) as refused:
        validate(env(path, k, **extra), vllm_version=version)
    assert message in str(refused.value)


def test_a_missing_channel_names_the_dflash_channel(tmp_path):
    with pytest.raises(ContainerConfigError, match="is the dflash channel mounted"):
        validate(env(str(tmp_path / "absent")), vllm_version="0.28.0")


def test_a_causal_drafter_takes_any_backend_and_a_version_before_0_28_reads_its_nested_mask(tmp_path):
    causal = {"architectures": ["DFlashDraftModel"], "dflash_config": {"mask_token_id": 3, "causal": True}}
    validate(env(drafter(tmp_path, config=causal), SM_VLLM_ATTENTION_BACKEND="some_causal_backend"),
             vllm_version="0.26.0")
