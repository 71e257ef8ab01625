"""One list of ml.g7e sizes: templates/instances.toml (`instances.instance_table`). The emulator's prices and the
JumpStart specs peagle ships (made by tools/make_shipped_specs.py from that table) must name the same sizes, with
the table's GPU counts: adding a size is one row in the table, then `python tools/make_shipped_specs.py` and a
price for the emulator, which these tests ask for."""

from __future__ import annotations

import json

import pytest

from peagle_deploy.instances import G7E_PREFIX, instance_table
from peagle_deploy.jumpstart import shipped_root

SIZES = [name for name in instance_table().instances if name.startswith(G7E_PREFIX)]
SPECS = sorted(shipped_root().glob("specs/*/*/specs_*.json"))


def test_the_emulator_prices_exactly_the_table_s_sizes():
    from peagle_deploy.testing.pricing_emulation import EMULATED_HOSTING_USD

    assert set(EMULATED_HOSTING_USD) == set(SIZES), (
        "give every size in templates/instances.toml an emulated price (testing/pricing_emulation.py), and no other")


@pytest.mark.parametrize("path", SPECS, ids=[p.parent.name for p in SPECS])
def test_the_shipped_specs_name_the_table_s_sizes_with_its_gpu_counts(path):
    spec = json.loads(path.read_text())
    listed = [name for name in spec["supported_inference_instance_types"] if name.startswith(G7E_PREFIX)]
    assert set(listed) <= set(SIZES), "a shipped spec names an ml.g7e size templates/instances.toml lacks"
    if "supported_inference_instance_types" not in spec.get("peagle_unverified", {}):
        return  # a real JumpStart spec, as published: it lists what it lists
    assert listed == SIZES, "regenerate the shipped specs: python tools/make_shipped_specs.py PATH/TO/gpt-oss-20b"
    for name, component in spec["inference_config_components"].items():
        assert component["supported_inference_instance_types"] == spec["supported_inference_instance_types"], name
        variants = component.get("hosting_instance_type_variants", {}).get("variants", {})
        for size in SIZES:
            gpus = instance_table().instances[size].gpus
            assert variants[size] == {"properties": {"environment_variables": {"TENSOR_PARALLEL_DEGREE": str(gpus)},
                                                     "resource_requirements": {"num_accelerators": gpus}}}, (name, size)


def test_the_spec_tool_takes_its_sizes_and_gpu_counts_from_the_table():
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parent.parent / "tools" / "make_shipped_specs.py"
    module_spec = importlib.util.spec_from_file_location("make_shipped_specs", path)
    tool = importlib.util.module_from_spec(module_spec)
    module_spec.loader.exec_module(tool)
    assert tool.G7E == SIZES and tool.INSTANCES is instance_table().instances
