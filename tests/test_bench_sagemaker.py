"""`peagle bench ENDPOINT` as a `peagle` process (forked, tests/forked_peagle.py) against the emulator: tags give mode/K, the
config gives the instance and its price, responses stream as real AWS event-stream frames, and
acceptance comes from CloudWatch Logs. vLLM's stats lines are written as the emulated endpoint serves
requests, so they fall inside the measured windows whatever the machine's speed, and `--logs-wait 0` reads
them once instead of polling for a line written after the run (that poll, with its injected clock, is
tested in test_metrics_acceptance.py)."""

from __future__ import annotations

import json
import subprocess
import time

import pytest

from tests.forked_peagle import forked_peagle
from peagle_deploy.testing.streaming import spec_decoding_metrics
from tests.test_metrics_acceptance import vllm_line

TAGS = [{"Key": "peagle:managed", "Value": "true"}, {"Key": "peagle:mode", "Value": "p-eagle"},
        {"Key": "peagle:k", "Value": "7"}, {"Key": "peagle:model", "Value": "gpt-oss-20b"}]
GROUP, STREAM = "/aws/sagemaker/Endpoints/pe-ep", "AllTraffic/i-1"
PER_POSITION = [90, 80, 70, 60, 50, 40, 30]  # accepted per position out of 100 drafts


def peagle(emu, *args):
    env = {**emu.env, "COLUMNS": "200"}
    return subprocess.run([forked_peagle(), *args], env=env, capture_output=True, text=True, timeout=300)


def served(k: int, parallel: bool = True) -> dict[str, str]:
    """The container environment a P-EAGLE (or EAGLE-3) endpoint is served with."""
    return {"SM_VLLM_SPECULATIVE_CONFIG": json.dumps({"model": "/opt/ml/additional-model-data-sources/eagle",
                                                      "method": "eagle3", "num_speculative_tokens": k,
                                                      "parallel_drafting": parallel})}


@pytest.fixture
def endpoint(emu_server):
    emu_server.create_endpoint_stack("pe-ep", tags=TAGS, environment=served(7))
    emu_server.runtime.tokens = [f"t{i}" for i in range(12)]
    logs = emu_server.client("logs")
    logs.create_log_group(logGroupName=GROUP)
    logs.create_log_stream(logGroupName=GROUP, logStreamName=STREAM)

    def log_stats(name, _body):  # vLLM's stats line, stamped when the request is served
        logs.put_log_events(logGroupName=GROUP, logStreamName=STREAM, logEvents=[
            {"timestamp": int(time.time() * 1000), "message": vllm_line(100, PER_POSITION)}])

    emu_server.runtime.on_request = log_stats
    return emu_server


def test_bench_endpoint_uses_served_config_api_price_event_stream_and_cloudwatch(endpoint, tmp_path):
    # each answer as vLLM 0.29+ sends it: the same 100 drafts its log line reports, per request (issue 46)
    bounds = [100, *PER_POSITION, 0]
    endpoint.runtime.spec_decoding = spec_decoding_metrics([bounds[j] - bounds[j + 1] for j in range(8)])
    res = peagle(endpoint, "bench", "pe-ep", "--concurrency", "1,4", "--num-prompts", "8", "--warmup", "1",
                 "--logs-wait", "0", "--out", str(tmp_path), "--no-chart", "--json")
    assert res.returncode == 0, res.stderr
    doc = json.loads(res.stdout)
    result = doc["result"]
    assert result["target"]["mode"] == "p-eagle" and result["target"]["k"] == 7
    assert result["target"]["mode_source"] == "server" and result["target"]["instance_type"] == "ml.g7e.2xlarge"
    assert result["target"]["label_mode"] == "p-eagle" and result["target"]["label_source"] == "tags"
    assert "SM_VLLM_SPECULATIVE_CONFIG" in result["target"]["server"]["sources"][0]
    # the emulator answers the Pricing API (its own figure): that answer is the price, with its query
    assert result["price"]["usd_per_hour"] == pytest.approx(endpoint.hosting_prices["ml.g7e.2xlarge"])
    assert result["price"]["source"] == "aws-pricing-api" and result["price"]["query"]["ServiceCode"] == "AmazonSageMaker"
    assert "labels it" not in res.stderr  # the served config agrees with the tags: nothing to say
    for level in result["levels"]:
        assert level["completed"] == 8 and level["errors"] == 0
        assert level["ttft_ms"]["count"] == 8 and level["tpot_ms"]["count"] == 8
        assert level["tokens_per_chunk"] == pytest.approx(1.0)
        assert level["usd_per_million_output_tokens"] > 0
    acc = result["acceptance"]
    assert acc["source"] == f"cloudwatch:{GROUP}" and acc["k"] == 7 and acc["intervals"] >= 1
    assert acc["per_position"] == pytest.approx([a / 100 for a in PER_POSITION])
    assert acc["mean_acceptance_length"] == pytest.approx(1 + sum(PER_POSITION) / 100)
    per_request = result["request_acceptance"]  # from the usage chunk of each InvokeEndpointWithResponseStream answer
    assert per_request["requests"] == 16 and per_request["steps"] == 1600 and per_request["k"] == 7
    assert per_request["mean_acceptance_length"] == pytest.approx(acc["mean_acceptance_length"])
    assert per_request["aggregate_source"] == f"cloudwatch:{GROUP}" and per_request["difference"] == pytest.approx(0)
    assert per_request["histogram"] == [16 * n for n in (10, 10, 10, 10, 10, 10, 10, 30)]
    names = sorted(p.rsplit("/", 1)[-1] for p in doc["files"])
    assert names[0].startswith("bench-p-eagle-K7-") and names[0].endswith(".json") and names[1].endswith(".md")


def test_bench_endpoint_whose_container_fails_exits_6_with_its_text(endpoint, tmp_path):
    endpoint.runtime.model_error = (500, "CUDA error: out of memory")
    res = peagle(endpoint, "bench", "pe-ep", "--concurrency", "2", "--num-prompts", "4", "--warmup", "0",
                 "--logs-wait", "0", "--out", str(tmp_path), "--no-chart")
    assert res.returncode == 6, res.stderr
    assert "CUDA error: out of memory" in res.stderr and "Traceback" not in res.stderr
    saved = json.loads(next(tmp_path.glob("*.json")).read_text())
    assert saved["complete"] is False and "CUDA error: out of memory" in saved["stopped"]
    assert saved["levels"][0]["completed"] == 0 and saved["levels"][0]["error_kinds"] == {"http_500": 4}


def test_bench_unknown_endpoint_exits_2(emu_server, tmp_path):
    res = peagle(emu_server, "bench", "no-such-ep", "--num-prompts", "1", "--out", str(tmp_path))
    assert res.returncode == 2 and "endpoint 'no-such-ep' not found" in res.stderr


def test_bench_endpoint_whose_tags_contradict_its_served_config_records_the_served_k(emu_server, tmp_path):
    """Tags say K=7; the endpoint's model is served with K=3: one warning naming both, the results hold K=3."""
    emu_server.create_endpoint_stack("pe-k3", tags=TAGS, environment=served(3))
    res = peagle(emu_server, "bench", "pe-k3", "--concurrency", "1", "--num-prompts", "2", "--warmup", "0",
                 "--logs-wait", "0", "--out", str(tmp_path), "--no-chart", "--json")
    assert res.returncode == 0, res.stderr
    target = json.loads(res.stdout)["result"]["target"]
    assert (target["mode"], target["k"], target["k_source"]) == ("p-eagle", 3, "server")
    assert (target["label_mode"], target["label_k"]) == ("p-eagle", 7)
    # one warning about the label (a loaded machine may add one about the load generator's CPU)
    [warning] = [line for line in res.stderr.splitlines() if line.startswith("warning:") and "label" in line]
    assert "p-eagle K=7" in warning and "p-eagle K=3" in warning and "peagle tags" in warning
    assert [p.name.startswith("bench-p-eagle-K3-") for p in tmp_path.glob("*.json")] == [True]
