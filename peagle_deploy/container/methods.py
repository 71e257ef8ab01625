"""Which speculative `method` values vLLM accepts: read from the installed vLLM's own source, without importing it.

vLLM types SpeculativeConfig.method as `SpeculativeMethod`, a `Literal[...]` built from other Literals in
vllm/config/speculative.py. A value outside it (`"eagle-3"`) makes vLLM die with a pydantic error seconds into
start-up; the entrypoint refuses it first. Importing vLLM would load torch (seconds); parsing that one file with
`ast` takes milliseconds. Without vLLM beside the entrypoint (e.g. `peagle container args` on a laptop) the list
recorded from vLLM 0.32.0's source is used. The same reading gives the other Literals of that file
(`RejectionSampleMethod`, `DraftSampleMethod`: container/lossless.py).
"""

from __future__ import annotations

import ast
import importlib.util
from functools import lru_cache
from pathlib import Path

RECORDED_FROM = "0.32.0"
RECORDED_METHODS = frozenset({
    "bailing_hybrid_mtp", "bailing_hybrid_v3_mtp", "custom_class", "deepseek_mtp", "dflash", "dots3_note_mtp",
    "draft_model", "dspark", "eagle", "eagle3", "ernie_mtp", "exaone4_5_mtp", "exaone_moe_mtp",
    "extract_hidden_states", "gemma4_mtp", "glm4_moe_lite_mtp", "glm4_moe_mtp", "glm5_next_mtp", "glm_ocr_mtp",
    "hy_v3_mtp", "hy_v4_mtp", "inkling_mtp", "kimi_k3_mtp", "longcat_flash_mtp", "medusa", "mimo_mtp",
    "mimo_v2_mtp", "minimax_m3_mtp", "mlp_speculator", "mtp", "nemotron_h_mtp", "ngram", "ngram_gpu",
    "pangu_ultra_moe_mtp", "qwen3_5_mtp", "qwen3_next_mtp", "qwen4_exp_mtp", "step3p5_mtp", "suffix",
})
LITERAL_NAME = "SpeculativeMethod"


def literal_values(source: str, name: str = LITERAL_NAME) -> frozenset[str] | None:
    """The strings of a module-level `NAME = Literal[...]`, following names of other such Literals;
    None when the source has no such assignment."""
    definitions: dict[str, ast.expr] = {}
    for node in ast.parse(source).body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            definitions[node.targets[0].id] = node.value
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.value is not None:
            definitions[node.target.id] = node.value

    def resolve(key: str, seen: frozenset[str]) -> set[str] | None:
        value = definitions.get(key)
        if key in seen or not (isinstance(value, ast.Subscript) and isinstance(value.value, ast.Name)
                               and value.value.id == "Literal"):
            return None
        items = value.slice.elts if isinstance(value.slice, ast.Tuple) else [value.slice]
        found: set[str] = set()
        for item in items:
            if isinstance(item, ast.Constant) and isinstance(item.value, str):
                found.add(item.value)
            elif isinstance(item, ast.Name):
                found |= resolve(item.id, seen | {key}) or set()
        return found

    values = resolve(name, frozenset())
    return frozenset(values) if values else None


@lru_cache(maxsize=1)
def installed_source() -> str | None:
    """The installed vLLM's vllm/config/speculative.py, read without importing vLLM; None without vLLM."""
    try:
        spec = importlib.util.find_spec("vllm")  # locates the package without importing it
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    for location in spec.submodule_search_locations:
        try:
            return (Path(location) / "config" / "speculative.py").read_text(encoding="utf-8")
        except OSError:
            continue
    return None


@lru_cache(maxsize=8)
def installed_literal(name: str) -> frozenset[str] | None:
    """The strings of the installed vLLM's `NAME = Literal[...]` in config/speculative.py (SpeculativeMethod,
    RejectionSampleMethod, DraftSampleMethod); None without vLLM or when its source has no such Literal."""
    source = installed_source()
    if source is None:
        return None
    try:
        return literal_values(source, name)
    except (SyntaxError, ValueError):
        return None


def installed_methods() -> frozenset[str] | None:
    """The installed vLLM's method names; None without vLLM or when its source does not say."""
    return installed_literal(LITERAL_NAME)


def known_methods(vllm_version: str | None) -> tuple[frozenset[str], str]:
    """(the accepted methods, which vLLM's they are) for the vLLM beside the entrypoint."""
    methods = installed_methods()
    if methods is not None:
        return methods, f"vLLM {vllm_version or '(installed)'}"
    return RECORDED_METHODS, f"vLLM {RECORDED_FROM} (no vLLM installed here)"
