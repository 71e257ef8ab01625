"""The sweep plan needs no AWS account (issue 49 item 1): `peagle sweep qwen3-coder --budget 40 --dry-run`, as
docs/sweep.md says, prints the plan without credentials, every unknown price marked, the total unknown (never
$0.00), and says the budget could not be checked and why, exit 0. A sweep that would deploy still refuses a budget
it cannot check (exit 2, nothing written)."""

from __future__ import annotations

import json

import pytest

from .cli_runner import run_cli

ROLE = "arn:aws:iam::123456789012:role/SageMakerRole"


@pytest.mark.parametrize("hosting", [[], ["--hosting", "component", "--modes", "off,eagle3,p-eagle", "--k", "3"]],
                         ids=["endpoints", "components"])
def test_a_dry_run_with_unknown_prices_prints_the_plan_and_says_the_budget_was_not_checked(no_aws, tmp_path,
                                                                                          hosting):
    done = run_cli("sweep", "qwen3-coder", "--budget", "40", "--dry-run", *hosting, cwd=tmp_path,
                   env=None)
    assert done.code == 0, done.stderr
    text = " ".join(done.stdout.split())
    assert "total unknown" in text and "$0.00" not in text, done.stdout
    assert ("--budget $40.00 not checked: the SageMaker hosting price of ml.g7e." in text
            and "is unknown (no AWS credentials to ask the Pricing API)" in text), done.stdout
    assert "Traceback" not in done.stderr and list(tmp_path.iterdir()) == []


def test_the_json_plan_has_no_total_when_a_price_is_unknown(no_aws, tmp_path):
    done = run_cli("sweep", "qwen3-coder", "--budget", "40", "--dry-run", "--json", cwd=tmp_path)
    assert done.code == 0, done.stderr
    plan = json.loads(done.stdout)["plan"]
    assert plan["estimated_usd"] is None and plan["within_budget"] is None
    assert "no AWS credentials" in plan["price_unknown"]
    assert all(c["estimated_usd"] is None for c in plan["configurations"])


def test_without_budget_the_total_of_unknown_prices_is_unknown_not_zero(no_aws, tmp_path):
    done = run_cli("sweep", "qwen3-coder", "--dry-run", cwd=tmp_path)
    assert done.code == 0, done.stderr
    assert "total unknown" in " ".join(done.stdout.split()) and "$0.00" not in done.stdout


def test_a_sweep_that_would_deploy_still_refuses_a_budget_it_cannot_check(no_aws, tmp_path):
    done = run_cli("sweep", "qwen3-coder", "--budget", "40", "--role", ROLE, "--yes", cwd=tmp_path)
    assert done.code in (2, 3), done.stderr  # no price (2) or no credentials to deploy with (3): one line
    assert len(done.stderr.strip().splitlines()) == 1 and list(tmp_path.iterdir()) == []
