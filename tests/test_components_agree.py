"""`peagle bench agree` between endpoints that host inference components (issue 35): each request names the
component its endpoint hosts (an endpoint of components refuses requests without one), and the baseline's
speculation is read from the model its component names (its endpoint config's variant names none)."""

from __future__ import annotations

import json

import pytest

from .cli_runner import run_cli_completed


@pytest.fixture
def prompts(tmp_path):
    path = tmp_path / "prompts.jsonl"
    path.write_text("".join(json.dumps({"prompt": f"prompt {i}"}) + "\n" for i in range(4)))
    return str(path)


def peagle(emu, *args):
    return run_cli_completed(*args, env={**emu.env, "COLUMNS": "250"})


def deploy(emu, name, *extra):
    out = peagle(emu, "deploy", "qwen3-coder", "--name", name, "--role", emu.role_arn, "--yes", "--hosting",
                 "component", *extra)
    assert out.returncode == 0, out.stderr


def test_agree_addresses_each_endpoints_component_and_reads_its_models_speculation(emu, clocked, prompts):
    deploy(emu, "off-ic", "--mode", "off")
    deploy(emu, "spec-ic")
    emu.calls.clear()
    seen: list[str] = []
    emu.runtime.on_request = lambda name, _body: seen.append(name)
    refused = peagle(emu, "bench", "agree", "spec-ic", "off-ic", "--dataset", prompts, "-n", "2")
    assert refused.returncode == 2 and "the baseline spec-ic runs speculative decoding (p-eagle K=3" in refused.stderr
    assert not [c for c in emu.calls if c.startswith("Invoke")]
    out = peagle(emu, "bench", "agree", "off-ic", "spec-ic", "--dataset", prompts, "-n", "2", "--json")
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    assert doc["baseline_check"]["baseline"] == "off"
    assert len(seen) == 4 and set(seen) == {"off-ic", "spec-ic"}, seen  # each endpoint's component, named


def test_a_component_flag_that_names_none_of_the_endpoints_is_one_line(emu, clocked, prompts):
    deploy(emu, "off-ic", "--mode", "off")
    deploy(emu, "spec-ic")
    out = peagle(emu, "bench", "agree", "off-ic", "spec-ic", "--dataset", prompts, "-n", "2",
                 "--candidate-component", "nope")
    assert out.returncode == 2 and out.stderr.count("\n") == 1
    assert "endpoint spec-ic hosts no inference component 'nope'" in out.stderr
