"""The tiny models' files (no server): vLLM's format, deterministic bytes, and the broken variants."""

import json
import subprocess
import sys

import pytest

from peagle_deploy.container.drafter import weight_names
from peagle_deploy.testing import tiny_models

pytestmark = pytest.mark.real_vllm


def test_drafter_has_vllms_eagle3_layout(tiny):
    config = json.loads((tiny.drafter / "config.json").read_text())
    assert config["architectures"] == ["LlamaForCausalLMEagle3"]
    assert config["mask_token_id"] == tiny.mask_token_id
    assert config["eagle_config"]["eagle_aux_hidden_state_layer_ids"] == [0, 1, 2]
    names = weight_names(str(tiny.drafter))
    assert {"fc.weight", "norm.weight", "lm_head.weight", "mask_hidden", "midlayer.hidden_norm.weight"} <= names
    assert all(n.startswith(("fc.", "norm.", "lm_head.", "midlayer.", "mask_hidden")) for n in names)


def test_target_has_tokenizer_and_chat_template(tiny):
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(tiny.target)
    prompt = tok.apply_chat_template([{"role": "user", "content": "hi"}], tokenize=False, add_generation_prompt=True)
    assert prompt == "<s><|user|>hi</s><|assistant|>"
    assert tok.convert_ids_to_tokens(tiny.output_token_id) == tiny.output_text


def test_build_is_deterministic(tiny, tmp_path):
    again = tiny_models.build_tiny_models(tmp_path)
    for name in ("model.safetensors", "config.json", "tokenizer.json"):
        assert (again.target / name).read_bytes() == (tiny.target / name).read_bytes()
    assert (again.drafter / "model.safetensors").read_bytes() == (tiny.drafter / "model.safetensors").read_bytes()


def test_cli_writes_broken_drafters(tmp_path):
    out = subprocess.run([sys.executable, "-m", "peagle_deploy.testing.tiny_models", str(tmp_path),
                          "--no-mask-token", "--no-mask-hidden"], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    config = json.loads((tmp_path / "drafter" / "config.json").read_text())
    assert not {"mask_token_id", "pard_token", "ptd_token_id"} & set(config)
    assert "mask_hidden" not in weight_names(str(tmp_path / "drafter"))


@pytest.mark.parametrize("with_mask_hidden", [True, False])
def test_unsharded_bin_weights_are_checked_with_torch(tiny, tmp_path, with_mask_hidden):
    import torch
    from safetensors.torch import load_file

    from peagle_deploy.container.args import ContainerConfigError
    from peagle_deploy.container.drafter import check_mask_hidden

    state = load_file(str(tiny.drafter / "model.safetensors"))
    if not with_mask_hidden:
        state = {k: v for k, v in state.items() if "mask_hidden" not in k}
    drafter = tmp_path / "bin-drafter"
    drafter.mkdir()
    (drafter / "config.json").write_text((tiny.drafter / "config.json").read_text())
    torch.save(state, drafter / "pytorch_model.bin")
    assert weight_names(str(drafter)) == set(state)
    if with_mask_hidden:
        check_mask_hidden(str(drafter))
    else:
        with pytest.raises(ContainerConfigError, match="have no mask_hidden tensor"):
            check_mask_hidden(str(drafter))


def test_mode_sensitive_drafter_separates_real_and_parallel_slots(tiny, mode_drafters):
    """fc maps a real slot's captured states to the right token's dimension only and mask_hidden to the wrong
    token's only (the arithmetic vLLM runs; the tier's servers show the acceptance it gives)."""
    import numpy as np
    from safetensors.numpy import load_file

    state = load_file(str(mode_drafters["mask_token_id"] / "model.safetensors"))
    fc, mask = state["fc.weight"], state["mask_hidden"][0]
    real = np.random.default_rng(0).standard_normal(fc.shape[1]).astype(np.float32)
    real[[tiny_models.SIGNAL_DIM + i * tiny_models.HIDDEN for i in range(3)]] = 1.0  # the signal in each layer
    for name in ("midlayer.self_attn.o_proj.weight", "midlayer.mlp.down_proj.weight"):
        assert not state[name][[tiny_models.SIGNAL_DIM, tiny_models.WRONG_DIM]].any()  # no layer writes them
    assert (fc @ real)[tiny_models.SIGNAL_DIM] == 1.0 and (fc @ real)[tiny_models.WRONG_DIM] == 0.0
    assert (fc @ mask)[tiny_models.SIGNAL_DIM] == 0.0 and (fc @ mask)[tiny_models.WRONG_DIM] == 1.0
    head = state["lm_head.weight"]
    assert head[:, tiny_models.WRONG_DIM].argmax() == tiny_models.token_id(tiny.target, tiny_models.WRONG_TEXT)
    assert head[:, tiny_models.SIGNAL_DIM].argmax() == tiny.output_token_id
    assert tiny_models.mode_sensitive_acceptance("p-eagle", 3) == [1.0, 0.0, 0.0]
    assert tiny_models.mode_sensitive_acceptance("eagle3", 3) == [1.0, 1.0, 1.0]
    config = json.loads((mode_drafters["pard_token"] / "config.json").read_text())
    assert config["pard_token"] == tiny.mask_token_id and "mask_token_id" not in config
    assert "mask_hidden" not in weight_names(str(mode_drafters["no-mask-hidden"]))
