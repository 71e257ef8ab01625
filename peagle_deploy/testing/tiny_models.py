"""Tiny Llama target + EAGLE-3 drafter (and a DFlash drafter) with known acceptance, built locally (no download).

    python -m peagle_deploy.testing.tiny_models OUT_DIR [--no-mask-token] [--no-mask-hidden] [--dflash]

The target (2 layers, hidden 256, its own byte-level BPE tokenizer and a chat template) always predicts one
token, OUTPUT_TEXT, whatever the context; the drafter (vLLM's `LlamaForCausalLMEagle3`, HF EAGLE-3 weight
names) always drafts that same token. Under greedy decoding every draft token is accepted, at every position,
for EAGLE-3 and P-EAGLE (parallel drafting) alike: acceptance rate 1.0 per position and mean acceptance
length K+1. How: one hidden dimension (`SIGNAL_DIM`) carries a constant 1.0 through every residual stream
(the embeddings set it, no layer writes to it, `fc` copies it, `mask_hidden` carries it for the parallel
slots); the final norms keep only that dimension and each lm_head gives it to one token only.
`write_mode_sensitive_drafter` / `build_mode_sensitive_drafter` write a drafter whose acceptance tells the
modes apart instead (P-EAGLE accepts position 1 only, EAGLE-3 every position; `mode_sensitive_acceptance`).

Needs numpy, safetensors and tokenizers (all three come with vLLM; elsewhere
`pip install 'peagle-deploy[tiny-models]'`); they are imported only when a model is built.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

HIDDEN = 256
INTERMEDIATE = 512
LAYERS = 2
HEADS = 4
KV_HEADS = 2
HEAD_DIM = HIDDEN // HEADS
VOCAB = 512
MAX_LEN = 2048
SIGNAL_DIM = 7
WRONG_DIM = 11  # mode-sensitive drafter only: set by mask_hidden, i.e. in P-EAGLE's parallel slots
WRONG_TEXT = "?"  # what that drafter drafts from a parallel slot
LOGIT_SCALE = 30.0
SEED = 20261122
OUTPUT_TEXT = "!"
MASK_TOKEN = "<mask>"
SPECIAL_TOKENS = ["<s>", "</s>", "<pad>", "<unk>", MASK_TOKEN, "<|system|>", "<|user|>", "<|assistant|>"]
# vLLM's aux hidden states are captured at 0 (embeddings) .. LAYERS (after the last layer); its default
# (2, LAYERS // 2, LAYERS - 3) assumes a deep target.
AUX_LAYER_IDS = [0, 1, 2]
CHAT_TEMPLATE = (
    "{{ bos_token }}{% for message in messages %}<|{{ message['role'] }}|>"
    "{% if message['content'] is string %}{{ message['content'] }}"
    "{% else %}{% for part in message['content'] %}{{ part['text'] }}{% endfor %}{% endif %}"
    "</s>{% endfor %}{% if add_generation_prompt %}<|assistant|>{% endif %}"
)
MASK_TOKEN_KEYS = ("mask_token_id", "pard_token", "ptd_token_id")


@dataclass(frozen=True)
class TinyModels:
    target: Path
    drafter: Path
    output_token_id: int
    mask_token_id: int
    output_text: str = OUTPUT_TEXT


def _modules() -> tuple[Any, Any, Any]:
    try:
        import numpy
        import safetensors.numpy
        import tokenizers
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise RuntimeError(f"tiny models need numpy, safetensors and tokenizers ({exc.name} is missing); "
                           "pip install 'peagle-deploy[tiny-models]'") from None
    return numpy, safetensors.numpy, tokenizers


def _corpus() -> list[str]:
    words = ("speculative decoding drafts tokens that the target model verifies in parallel; "
             "P-EAGLE drafts all of them in one forward pass. SageMaker endpoints serve vLLM on port 8080, "
             "answer ping and invocations, and log acceptance. Hello! How are you? 0123456789 +-*/=()[]{}")
    return [words] * 50 + [f"line {i}: the quick brown fox jumps over the lazy dog {i * 7}" for i in range(200)]


def _write_tokenizer(out: Path, tokenizers: Any) -> tuple[int, int, int]:
    from tokenizers import decoders, models, pre_tokenizers, trainers

    tok = tokenizers.Tokenizer(models.BPE(unk_token=None))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=VOCAB, special_tokens=SPECIAL_TOKENS, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(_corpus(), trainer=trainer)
    tok.save(str(out / "tokenizer.json"))
    (out / "tokenizer_config.json").write_text(json.dumps({
        "tokenizer_class": "PreTrainedTokenizerFast", "bos_token": "<s>", "eos_token": "</s>",
        "pad_token": "<pad>", "unk_token": "<unk>", "mask_token": MASK_TOKEN, "model_max_length": MAX_LEN,
        "add_bos_token": False, "add_eos_token": False, "clean_up_tokenization_spaces": False,
        "chat_template": CHAT_TEMPLATE,
    }, indent=2))
    (out / "special_tokens_map.json").write_text(json.dumps({
        "bos_token": "<s>", "eos_token": "</s>", "pad_token": "<pad>", "unk_token": "<unk>",
        "mask_token": MASK_TOKEN}, indent=2))
    output_id = tok.token_to_id(OUTPUT_TEXT)
    return output_id, tok.token_to_id(MASK_TOKEN), tok.token_to_id("</s>")


def _llama_config(eos_id: int, bos_id: int) -> dict[str, Any]:
    return {
        "model_type": "llama", "hidden_size": HIDDEN, "intermediate_size": INTERMEDIATE,
        "num_attention_heads": HEADS, "num_key_value_heads": KV_HEADS, "head_dim": HEAD_DIM,
        "vocab_size": VOCAB, "max_position_embeddings": MAX_LEN, "rms_norm_eps": 1e-5, "rope_theta": 10000.0,
        "hidden_act": "silu", "tie_word_embeddings": False, "torch_dtype": "float32",
        "bos_token_id": bos_id, "eos_token_id": eos_id, "attention_bias": False, "mlp_bias": False,
    }


def _random(np: Any, rng: Any, *shape: int) -> Any:
    return (rng.standard_normal(shape) * 0.02).astype(np.float32)


def _decoder_layer(np: Any, rng: Any, prefix: str, qkv_in: int) -> dict[str, Any]:
    """Random attention + MLP whose outputs never write SIGNAL_DIM (that row of o_proj/down_proj is zero)."""
    o_proj = _random(np, rng, HIDDEN, HEADS * HEAD_DIM)
    down = _random(np, rng, HIDDEN, INTERMEDIATE)
    o_proj[SIGNAL_DIM] = 0.0
    down[SIGNAL_DIM] = 0.0
    return {
        f"{prefix}.input_layernorm.weight": np.ones(HIDDEN, np.float32),
        f"{prefix}.post_attention_layernorm.weight": np.ones(HIDDEN, np.float32),
        f"{prefix}.self_attn.q_proj.weight": _random(np, rng, HEADS * HEAD_DIM, qkv_in),
        f"{prefix}.self_attn.k_proj.weight": _random(np, rng, KV_HEADS * HEAD_DIM, qkv_in),
        f"{prefix}.self_attn.v_proj.weight": _random(np, rng, KV_HEADS * HEAD_DIM, qkv_in),
        f"{prefix}.self_attn.o_proj.weight": o_proj,
        f"{prefix}.mlp.gate_proj.weight": _random(np, rng, INTERMEDIATE, HIDDEN),
        f"{prefix}.mlp.up_proj.weight": _random(np, rng, INTERMEDIATE, HIDDEN),
        f"{prefix}.mlp.down_proj.weight": down,
    }


def _signal_head(np: Any, rng: Any, token_id: int) -> tuple[Any, Any]:
    """(final norm weight, lm_head): only SIGNAL_DIM survives the norm, and only token_id reads it."""
    norm = np.zeros(HIDDEN, np.float32)
    norm[SIGNAL_DIM] = 1.0
    head = _random(np, rng, VOCAB, HIDDEN)
    head[:, SIGNAL_DIM] = 0.0
    head[token_id, SIGNAL_DIM] = LOGIT_SCALE
    return norm, head


def _write_target(out: Path, np: Any, st: Any, output_id: int, bos_id: int, eos_id: int) -> None:
    rng = np.random.default_rng(SEED)
    embed = _random(np, rng, VOCAB, HIDDEN)
    embed[:, SIGNAL_DIM] = 1.0
    tensors = {"model.embed_tokens.weight": embed}
    for layer in range(LAYERS):
        tensors.update(_decoder_layer(np, rng, f"model.layers.{layer}", HIDDEN))
    tensors["model.norm.weight"], tensors["lm_head.weight"] = _signal_head(np, rng, output_id)
    st.save_file(tensors, str(out / "model.safetensors"), metadata={"format": "pt"})
    config = {"architectures": ["LlamaForCausalLM"], "num_hidden_layers": LAYERS, **_llama_config(eos_id, bos_id)}
    (out / "config.json").write_text(json.dumps(config, indent=2))
    (out / "generation_config.json").write_text(json.dumps({"bos_token_id": bos_id, "eos_token_id": eos_id}))


def write_drafter(out: Path, *, output_token_id: int, mask_token_id: int, bos_id: int = 0, eos_id: int = 1,
                  mask_token_key: str | None = "mask_token_id", mask_hidden: bool = True) -> Path:
    """An EAGLE-3 drafter that always drafts output_token_id. mask_token_key=None or mask_hidden=False
    write the broken drafters parallel drafting refuses (negative tests)."""
    return _write_drafter(out, output_token_id=output_token_id, mask_token_id=mask_token_id, bos_id=bos_id,
                          eos_id=eos_id, mask_token_key=mask_token_key, mask_hidden=mask_hidden)


def write_mode_sensitive_drafter(out: Path, *, output_token_id: int, wrong_token_id: int, mask_token_id: int,
                                 bos_id: int = 0, eos_id: int = 1, mask_token_key: str | None = "mask_token_id",
                                 mask_hidden: bool = True) -> Path:
    """An EAGLE-3 drafter whose acceptance tells P-EAGLE from EAGLE-3 (`mode_sensitive_acceptance`).

    From a real slot it drafts output_token_id, the target's answer; from a parallel-drafting slot (P-EAGLE's
    positions 2..K, fed the mask token and `mask_hidden`) it drafts wrong_token_id. EAGLE-3 drafts every
    position from the previous real draft: all accepted. P-EAGLE: position 1 accepted, 2..K rejected.
    How: a second dimension, WRONG_DIM, survives the final norm and gives its logit to wrong_token_id only;
    `fc` writes WRONG_DIM = aux0[SIGNAL_DIM] - aux1[SIGNAL_DIM], which is exactly 0 for every target state
    (SIGNAL_DIM is 1.0 in each captured layer) and 1 for mask_hidden (whose aux0 signal is 0, aux1 -1);
    no layer writes WRONG_DIM, so the drafter's own hidden states (EAGLE-3's later steps) keep it at 0."""
    return _write_drafter(out, output_token_id=output_token_id, mask_token_id=mask_token_id, bos_id=bos_id,
                          eos_id=eos_id, mask_token_key=mask_token_key, mask_hidden=mask_hidden,
                          wrong_token_id=wrong_token_id)


def mode_sensitive_acceptance(mode: str, k: int) -> list[float]:
    """Per-position acceptance (vLLM's cumulative rates) of write_mode_sensitive_drafter under greedy decoding."""
    if mode == "p-eagle":
        return [1.0] + [0.0] * (k - 1)
    if mode == "eagle3":
        return [1.0] * k
    raise ValueError(f"mode must be p-eagle or eagle3, not {mode!r}")


def token_id(target: Path, text: str) -> int:
    """The id of `text` (one token) in the tiny target's tokenizer."""
    _, _, tokenizers = _modules()
    found = tokenizers.Tokenizer.from_file(str(Path(target) / "tokenizer.json")).token_to_id(text)
    if found is None:
        raise ValueError(f"{text!r} is not one token of {target}")
    return found


def _write_drafter(out: Path, *, output_token_id: int, mask_token_id: int, bos_id: int, eos_id: int,
                   mask_token_key: str | None, mask_hidden: bool, wrong_token_id: int | None = None) -> Path:
    np, st, _ = _modules()
    out.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(SEED + 1)
    fc = _random(np, rng, HIDDEN, len(AUX_LAYER_IDS) * HIDDEN)
    fc[SIGNAL_DIM] = 0.0
    fc[SIGNAL_DIM, SIGNAL_DIM] = 1.0  # the first aux state (the embeddings) carries the signal
    tensors = {"fc.weight": fc, **_decoder_layer(np, rng, "midlayer", 2 * HIDDEN)}
    tensors["midlayer.hidden_norm.weight"] = np.ones(HIDDEN, np.float32)
    tensors["norm.weight"], tensors["lm_head.weight"] = _signal_head(np, rng, output_token_id)
    hidden = np.zeros((1, len(AUX_LAYER_IDS) * HIDDEN), np.float32)
    hidden[0, SIGNAL_DIM] = 1.0
    if wrong_token_id is not None:
        fc[WRONG_DIM] = 0.0
        fc[WRONG_DIM, SIGNAL_DIM] = 1.0
        fc[WRONG_DIM, HIDDEN + SIGNAL_DIM] = -1.0
        for name in ("midlayer.self_attn.o_proj.weight", "midlayer.mlp.down_proj.weight"):
            tensors[name][WRONG_DIM] = 0.0
        tensors["norm.weight"][WRONG_DIM] = 1.0
        tensors["lm_head.weight"][:, WRONG_DIM] = 0.0
        tensors["lm_head.weight"][wrong_token_id, WRONG_DIM] = LOGIT_SCALE
        hidden[0, SIGNAL_DIM] = 0.0
        hidden[0, HIDDEN + SIGNAL_DIM] = -1.0
    if mask_hidden:
        tensors["mask_hidden"] = hidden
    st.save_file(tensors, str(out / "model.safetensors"), metadata={"format": "pt"})
    config: dict[str, Any] = {
        "architectures": ["LlamaForCausalLMEagle3"], "num_hidden_layers": 1, **_llama_config(eos_id, bos_id),
        "draft_vocab_size": VOCAB, "target_hidden_size": HIDDEN,
        "eagle_config": {"eagle_aux_hidden_state_layer_ids": AUX_LAYER_IDS, "use_aux_hidden_state": True},
    }
    if mask_token_key is not None:
        if mask_token_key not in MASK_TOKEN_KEYS:
            raise ValueError(f"mask_token_key must be one of {', '.join(MASK_TOKEN_KEYS)} or None")
        config[mask_token_key] = mask_token_id
    (out / "config.json").write_text(json.dumps(config, indent=2))
    _world_readable(out)
    return out


# DFlash (vLLM's `DFlashDraftModel`, qwen3_dflash.py): the target layers it reads, in DFlash's own numbering (vLLM
# captures layer i + 1, vllm/v1/worker/gpu/spec_decode/eagle/eagle3_utils.py), and the block it drafts
DFLASH_TARGET_LAYER_IDS = [0, 1]
DFLASH_BLOCK_SIZE = 16


def write_dflash_drafter(out: Path, *, target: Path, output_token_id: int, mask_token_id: int,
                         block_size: int = DFLASH_BLOCK_SIZE, mask_hidden: bool = False) -> Path:
    """A DFlash drafter (a one-layer Qwen3 block-diffusion head) for the tiny target that always drafts
    output_token_id, at every position of its block: greedy acceptance 1.0 per position, mean acceptance length
    K+1, as the EAGLE-3 drafter. Its embeddings are the target's (SIGNAL_DIM is 1.0 for every token, the mask
    token too), no layer writes SIGNAL_DIM, and its final norm and lm_head are `_signal_head`'s. `mask_hidden=True`
    adds P-EAGLE's tensor, which vLLM's DFlash loader refuses (negative tests)."""
    np, st, _ = _modules()
    out.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(SEED + 2)
    embed = st.load_file(str(Path(target) / "model.safetensors"))["model.embed_tokens.weight"]
    layer = _decoder_layer(np, rng, "layers.0", HIDDEN)
    layer["layers.0.self_attn.q_norm.weight"] = np.ones(HEAD_DIM, np.float32)
    layer["layers.0.self_attn.k_norm.weight"] = np.ones(HEAD_DIM, np.float32)
    tensors = {"embed_tokens.weight": embed, "fc.weight": _random(np, rng, HIDDEN, len(DFLASH_TARGET_LAYER_IDS) * HIDDEN),
               "hidden_norm.weight": np.ones(HIDDEN, np.float32), **layer}
    tensors["norm.weight"], tensors["lm_head.weight"] = _signal_head(np, rng, output_token_id)
    if mask_hidden:
        tensors["mask_hidden"] = np.zeros((1, 2 * HIDDEN), np.float32)
    st.save_file(tensors, str(out / "model.safetensors"), metadata={"format": "pt"})
    target_config = json.loads((Path(target) / "config.json").read_text())
    config: dict[str, Any] = {
        "architectures": ["DFlashDraftModel"], "model_type": "qwen3", "num_hidden_layers": 1,
        **{k: v for k, v in _llama_config(target_config["eos_token_id"], target_config["bos_token_id"]).items()
           if k != "model_type"},
        "block_size": block_size, "target_hidden_size": HIDDEN, "num_target_layers": LAYERS,
        "dflash_config": {"mask_token_id": mask_token_id, "target_layer_ids": DFLASH_TARGET_LAYER_IDS},
    }
    (out / "config.json").write_text(json.dumps(config, indent=2))
    _world_readable(out)
    return out


def build_dflash_drafter(models: TinyModels, out: Path, **kwargs: Any) -> Path:
    """write_dflash_drafter for the target of `models` (build_tiny_models), into `out`."""
    return write_dflash_drafter(out, target=models.target, output_token_id=models.output_token_id,
                                mask_token_id=models.mask_token_id, **kwargs)


def _world_readable(directory: Path) -> None:
    """safetensors writes 0600; a container running as another user must read the files."""
    for path in directory.iterdir():
        path.chmod(0o644)


def build_mode_sensitive_drafter(models: TinyModels, out: Path, *, mask_token_key: str | None = "mask_token_id",
                                 mask_hidden: bool = True) -> Path:
    """write_mode_sensitive_drafter for the target of `models` (build_tiny_models), into `out`."""
    config = json.loads((models.target / "config.json").read_text())
    return write_mode_sensitive_drafter(out, output_token_id=models.output_token_id,
                                        wrong_token_id=token_id(models.target, WRONG_TEXT),
                                        mask_token_id=models.mask_token_id, bos_id=config["bos_token_id"],
                                        eos_id=config["eos_token_id"], mask_token_key=mask_token_key,
                                        mask_hidden=mask_hidden)


def build_tiny_models(out_dir: Path, *, mask_token_key: str | None = "mask_token_id",
                      mask_hidden: bool = True) -> TinyModels:
    """Write OUT/target and OUT/drafter; deterministic (same bytes for the same arguments)."""
    np, st, tokenizers = _modules()
    out_dir = Path(out_dir)
    target = out_dir / "target"
    target.mkdir(parents=True, exist_ok=True)
    output_id, mask_id, eos_id = _write_tokenizer(target, tokenizers)
    bos_id = SPECIAL_TOKENS.index("<s>")
    _write_target(target, np, st, output_id, bos_id, eos_id)
    _world_readable(target)
    drafter = write_drafter(out_dir / "drafter", output_token_id=output_id, mask_token_id=mask_id, bos_id=bos_id,
                            eos_id=eos_id, mask_token_key=mask_token_key, mask_hidden=mask_hidden)
    return TinyModels(target=target, drafter=drafter, output_token_id=output_id, mask_token_id=mask_id)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m peagle_deploy.testing.tiny_models", description=__doc__.split(
        "\n\n")[0])
    parser.add_argument("out_dir", type=Path)
    parser.add_argument("--mask-token-key", default="mask_token_id", choices=MASK_TOKEN_KEYS,
                        help="config.json key naming the mask token (vLLM 0.25 needs pard_token or ptd_token_id)")
    parser.add_argument("--no-mask-token", action="store_true", help="omit the mask token id (negative tests)")
    parser.add_argument("--no-mask-hidden", action="store_true", help="omit mask_hidden (negative tests)")
    parser.add_argument("--dflash", action="store_true", help="also write OUT/dflash, a DFlash drafter")
    args = parser.parse_args(argv)
    try:
        models = build_tiny_models(args.out_dir, mask_token_key=None if args.no_mask_token else args.mask_token_key,
                                   mask_hidden=not args.no_mask_hidden)
    except RuntimeError as exc:
        sys.stderr.write(f"error: {exc}\n")
        return 2
    sys.stdout.write(f"target {models.target}\ndrafter {models.drafter}\n")
    if args.dflash:
        sys.stdout.write(f"dflash {build_dflash_drafter(models, args.out_dir / 'dflash')}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
