"""One price: SageMaker hosting's, from the AWS Pricing API when credentials allow (cached, the query shown),
else peagle's sourced hosting table, else unknown with a hint. Never an EC2 figure. The emulator answers the
Pricing API as AWS does (PriceList entries are JSON strings; Hosting and Training are different products)."""

from __future__ import annotations

import json
import os
import subprocess

import pytest

from peagle_deploy import pricing
from tests.cli_runner import run_cli
from tests.forked_peagle import forked_peagle


def dry_run(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([forked_peagle(), "deploy", "qwen3-coder", "--dry-run", *args], env={**env, "COLUMNS": "250"},
                          capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL)


def test_dry_run_without_credentials_says_unknown_and_how_to_get_a_price(no_aws):
    res = dry_run(dict(os.environ), "--json")
    assert res.returncode == 0, res.stderr
    plan = json.loads(res.stdout)["plan"]
    price = plan["price"]
    assert plan["price_per_hour_usd"] is None and plan["price_per_day_usd"] is None
    assert price["source"] == "unknown" and price["detail"] == "no AWS credentials to ask the Pricing API"
    assert "pricing:GetProducts" in price["hint"] and "ml.g7e.2xlarge" in price["hint"]
    assert {f["Field"]: f["Value"] for f in price["query"]["Filters"]} == {
        "productFamily": "ML Instance", "platoinstancetype": "Hosting", "regionCode": "us-east-1",
        "instanceName": "ml.g7e.2xlarge"}
    human = dry_run(dict(os.environ))
    [line] = [ln for ln in human.stdout.splitlines() if "│ price" in ln]
    assert "unknown: no AWS credentials to ask the Pricing API" in line
    assert "$" not in line and "EC2" not in human.stdout  # no figure, and never an EC2 one


def test_dry_run_uses_the_pricing_apis_answer_from_the_emulator(emu):
    res = dry_run(emu.env, "--json", "--instance-count", "2")
    assert res.returncode == 0, res.stderr
    plan = json.loads(res.stdout)["plan"]
    hourly = emu.hosting_prices["ml.g7e.2xlarge"]
    assert plan["price_per_hour_usd"] == pytest.approx(2 * hourly)
    assert plan["price_per_day_usd"] == pytest.approx(2 * hourly * 24)
    price = plan["price"]
    assert price["source"] == "aws-pricing-api" and price["estimate"] is False and price["usd_per_hour_each"] == hourly
    assert price["detail"].startswith("AWS Price List API (AmazonSageMaker, ML Instance, Hosting, us-east-1, "
                                      "on-demand), read 20")
    assert "GetProducts" in emu.calls
    human = dry_run(emu.env, "--instance-count", "2")
    assert f"${2 * hourly:,.2f}/h (${2 * hourly * 24:,.2f}/day), SageMaker hosting: AWS Price List API" in human.stdout


def test_the_emulator_answers_get_products_as_aws_does(emu):
    import boto3

    client = boto3.client("pricing", region_name="us-east-1", endpoint_url=emu.endpoint_url,
                          aws_access_key_id="testing", aws_secret_access_key="testing")
    hosting = pricing.price_query("ml.g7e.4xlarge", "eu-west-1").model_dump(exclude={"api_region"})
    page = client.get_products(**hosting)
    [entry] = page["PriceList"]
    assert isinstance(entry, str)  # AWS sends each product as a JSON string
    product = json.loads(entry)
    assert product["product"]["attributes"]["platoinstancetype"] == "Hosting"
    assert pricing.price_from_api(client, pricing.price_query("ml.g7e.4xlarge", "eu-west-1")) == \
        emu.hosting_prices["ml.g7e.4xlarge"]
    # without the Hosting filter, training comes back too, at another price: the filter is what makes it hosting
    loose = {**hosting, "Filters": [f for f in hosting["Filters"] if f["Field"] != "platoinstancetype"]}
    kinds = {json.loads(e)["product"]["attributes"]["platoinstancetype"] for e in client.get_products(**loose)["PriceList"]}
    assert kinds == {"Hosting", "Training"}
    paged = client.get_products(ServiceCode="AmazonSageMaker", MaxResults=5)
    assert len(paged["PriceList"]) == 5 and paged["NextToken"]


def test_a_refused_pricing_call_is_unknown_with_the_permission_to_add(emu, monkeypatch):
    for key, value in emu.env.items():
        monkeypatch.setenv(key, value)
    emu.fail("GetProducts", "AccessDeniedException", "not authorized to perform: pricing:GetProducts", times=10)
    res = run_cli("deploy", "qwen3-coder", "--dry-run", "--json")
    assert res.code == 0, res.stderr
    price = json.loads(res.stdout)["plan"]["price"]
    assert price["usd_per_hour"] is None
    assert price["detail"] == "the Pricing API refused this identity (AccessDeniedException)"
    assert price["fix"] == "allow pricing:GetProducts to your AWS identity (docs/iam.md)"
    # and a limit cannot be held to an unknown price: refused before any AWS write
    refused = run_cli("deploy", "qwen3-coder", "--role", emu.role_arn, "--yes", "--max-price-per-hour", "50")
    assert refused.code == 2
    assert refused.stderr.strip().splitlines() == [
        "error: --max-price-per-hour 50 cannot be checked: the SageMaker hosting price is unknown (the Pricing API "
        "refused this identity (AccessDeniedException)): allow pricing:GetProducts to your AWS identity "
        "(docs/iam.md), or drop --max-price-per-hour to accept an unknown price (docs/configuration.md#prices)"]
    assert not [c for c in emu.calls if c.startswith("Create")]


@pytest.mark.parametrize(("fault", "why", "fix"), [
    ("unreachable", "the Pricing API at http://127.0.0.1:9/ could not be reached (EndpointConnectionError)",
     "check the network (or proxy) from this machine to http://127.0.0.1:9/ (AWS_ENDPOINT_URL_PRICING or "
     "AWS_ENDPOINT_URL, when set, chooses it)"),
    ("UnrecognizedClientException", "the Pricing API refused the AWS credentials (UnrecognizedClientException)",
     "renew the AWS credentials (expired or invalid: aws sso login, or new keys)"),
    ("ThrottlingException", "the Pricing API kept throttling (ThrottlingException)", "retry in a minute"),
])
def test_an_unknown_price_says_what_is_true_network_credentials_or_throttling(emu, monkeypatch, tmp_path, fault, why,
                                                                            fix):
    """Only credentials that are missing or refused get the credentials hint; an unreachable Pricing API is the
    network's (port 9 on loopback: nothing listens)."""
    for key, value in emu.env.items():
        monkeypatch.setenv(key, value)
    if fault == "unreachable":
        monkeypatch.setenv("AWS_ENDPOINT_URL_PRICING", "http://127.0.0.1:9")
    else:
        emu.fail("GetProducts", fault, "no", times=10)
    res = run_cli("deploy", "qwen3-coder", "--dry-run", "--json")
    assert res.code == 0, res.stderr
    price = json.loads(res.stdout)["plan"]["price"]
    assert (price["usd_per_hour"], price["detail"], price["fix"]) == (None, why, fix)
    assert price["hint"].endswith(f"docs/configuration.md#prices): {fix}")
    plan = run_cli("sweep", "qwen3-coder", "--budget", "10", "--dry-run")  # the plan, the budget said unchecked
    assert plan.code == 0 and f"--budget $10.00 not checked: the SageMaker hosting price of ml.g7e.2xlarge is " \
        f"unknown ({why}): {fix}" in " ".join(plan.stdout.split()), plan.stdout
    budget = run_cli("sweep", "qwen3-coder", "--budget", "10", "--role", emu.role_arn, "--yes", cwd=tmp_path)
    assert budget.code == 2  # a sweep that would deploy: refused, nothing made
    assert budget.stderr.strip() == (f"error: the SageMaker hosting price of ml.g7e.2xlarge is unknown ({why}), so "
                                     f"--budget cannot be checked: {fix} (docs/configuration.md#prices)")
    assert list(tmp_path.iterdir()) == []


def test_status_shows_the_price_its_per_day_figure_and_source(emu, monkeypatch):
    for key, value in emu.env.items():
        monkeypatch.setenv(key, value)
    emu.hosting_prices["ml.g7e.2xlarge"] = 7.25
    assert run_cli("deploy", "qwen3-coder", "--name", "priced", "--role", emu.role_arn, "--yes").code == 0
    status = run_cli("status", "priced")
    assert "priced: price $7.25/h ($174.00/day), SageMaker hosting: AWS Price List API" in \
        " ".join(status.stdout.split())


def test_the_price_is_cached_a_day_for_real_aws_only(monkeypatch, tmp_path):
    calls = []

    class Client:  # what pricing._client returns: answers like the API, counts the calls
        def get_paginator(self, _name):
            calls.append(1)
            return self

        def paginate(self, **_kwargs):
            entry = {"terms": {"OnDemand": {"T": {"priceDimensions": {"D": {"unit": "Hrs",
                                                                             "pricePerUnit": {"USD": "6.5"}}}}}}}
            return iter([{"PriceList": [json.dumps(entry)]}])

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.delenv("AWS_ENDPOINT_URL", raising=False)
    monkeypatch.setattr(pricing, "_client", lambda profile, session=None: Client())
    monkeypatch.setattr(pricing, "_memo", {})
    first = pricing.instance_price("ml.g7e.8xlarge", "us-west-2")
    again = pricing.instance_price("ml.g7e.8xlarge", "us-west-2", count=3)
    assert (first.usd_per_hour, first.cached, again.usd_per_hour, again.cached) == (6.5, False, 19.5, True)
    assert len(calls) == 1
    cache = tmp_path / "peagle" / "prices.json"
    assert oct(cache.stat().st_mode & 0o777) == "0o600" and "aws|us-west-2|ml.g7e.8xlarge" in cache.read_text()
    monkeypatch.setattr(pricing, "_memo", {})
    later = pricing.time.time() + pricing.CACHE_TTL_S + 1
    monkeypatch.setattr(pricing.time, "time", lambda: later)
    assert pricing.instance_price("ml.g7e.8xlarge", "us-west-2").cached is False and len(calls) == 2  # a day on
    # an emulator or proxy (AWS_ENDPOINT_URL) is asked every time, never cached
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:9")
    pricing.instance_price("ml.g7e.8xlarge", "us-west-2")
    pricing.instance_price("ml.g7e.8xlarge", "us-west-2")
    assert len(calls) == 4


def test_the_shipped_hosting_table_has_a_source_and_no_unsourced_g7e_figure():
    table = pricing.hosting_table()
    assert table.source.startswith("AWS SageMaker AI pricing page") and table.as_of
    assert not [t for region in table.regions.values() for t in region if t.startswith("ml.g7e.")]
