"""`peagle bench ENDPOINT` against mocked AWS: tags give mode/K, the config gives the instance and its
price, responses stream as real AWS event-stream frames, and acceptance comes from CloudWatch Logs."""

from __future__ import annotations

import json
import time

import pytest

from peagle_deploy.testing.streaming import event_frame
from tests.cli_runner import run_cli
from tests.test_metrics_acceptance import vllm_line


def sse_body(n_tokens: int) -> bytes:
    out = b""
    for i in range(n_tokens):
        out += b'data: {"choices":[{"index":0,"delta":{"content":"t%d"}}]}\n\n' % i
    out += b'data: {"choices":[],"usage":{"prompt_tokens":4,"completion_tokens":%d,"total_tokens":9}}\n\n' % n_tokens
    return out + b"data: [DONE]\n\n"


class _Raw:
    def __init__(self, frames: list[bytes]):
        self.frames = frames

    def stream(self, **_):
        yield from self.frames

    def close(self):
        pass


N_TOKENS = 12


def _streaming_hook(request, **_):
    from botocore.awsrequest import AWSResponse

    body = sse_body(N_TOKENS)
    pieces = [body[i : i + 37] for i in range(0, len(body), 37)]  # SSE split at arbitrary byte boundaries
    headers = {"Content-Type": "application/vnd.amazon.eventstream", "x-amzn-requestid": "r"}
    return AWSResponse(request.url, 200, headers, _Raw([event_frame(p) for p in pieces]))


@pytest.fixture
def mocked_endpoint(monkeypatch):
    for name, value in {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_REGION": "us-east-1",
    }.items():
        monkeypatch.setenv(name, value)
    for name in ("AWS_PROFILE", "AWS_ENDPOINT_URL"):
        monkeypatch.delenv(name, raising=False)
    import boto3
    from moto import mock_aws
    from moto.sagemaker.models import FakeEndpointConfig

    from peagle_deploy.aws import AwsSession

    monkeypatch.setattr(FakeEndpointConfig, "validate_instance_type", lambda self, t: None)  # moto predates g7e
    real_client = AwsSession.client

    def client(self, service, **overrides):
        c = real_client(self, service, **overrides)
        if service == "sagemaker-runtime":
            c.meta.events.register("before-send.sagemaker-runtime.InvokeEndpointWithResponseStream", _streaming_hook)
        if service == "pricing":  # no Pricing API here: the shipped table must be used
            c.meta.events.register("before-send.pricing.GetProducts", _no_pricing)
        return c

    monkeypatch.setattr(AwsSession, "client", client)
    with mock_aws():
        sm = boto3.client("sagemaker", region_name="us-east-1")
        sm.create_model(
            ModelName="m",
            ExecutionRoleArn="arn:aws:iam::123456789012:role/r",
            PrimaryContainer={"Image": "123456789012.dkr.ecr.us-east-1.amazonaws.com/vllm:latest"},
        )
        sm.create_endpoint_config(
            EndpointConfigName="c",
            ProductionVariants=[
                {
                    "VariantName": "AllTraffic",
                    "ModelName": "m",
                    "InstanceType": "ml.g7e.2xlarge",
                    "InitialInstanceCount": 1,
                }
            ],
        )
        sm.create_endpoint(
            EndpointName="pe-ep",
            EndpointConfigName="c",
            Tags=[
                {"Key": "peagle:managed", "Value": "true"},
                {"Key": "peagle:mode", "Value": "p-eagle"},
                {"Key": "peagle:k", "Value": "7"},
                {"Key": "peagle:model", "Value": "gpt-oss-20b"},
            ],
        )
        logs = boto3.client("logs", region_name="us-east-1")
        logs.create_log_group(logGroupName="/aws/sagemaker/Endpoints/pe-ep")
        logs.create_log_stream(logGroupName="/aws/sagemaker/Endpoints/pe-ep", logStreamName="AllTraffic/i-1")
        yield logs


def _no_pricing(request, **_):
    from botocore.awsrequest import AWSResponse

    return AWSResponse(request.url, 403, {}, _Raw([b'{"__type":"AccessDeniedException","message":"no"}']))


def test_bench_endpoint_uses_tags_table_price_event_stream_and_cloudwatch(mocked_endpoint, tmp_path):
    now_ms = int(time.time() * 1000)
    # a stats line inside the run's window and one written after it (so the poll stops at once)
    mocked_endpoint.put_log_events(
        logGroupName="/aws/sagemaker/Endpoints/pe-ep",
        logStreamName="AllTraffic/i-1",
        logEvents=[
            {"timestamp": now_ms + 1000, "message": vllm_line(100, [90, 80, 70, 60, 50, 40, 30])},
            {"timestamp": now_ms + 600_000, "message": vllm_line(10, [9, 8, 7, 6, 5, 4, 3])},
        ],
    )
    res = run_cli(
        "bench",
        "pe-ep",
        "--concurrency",
        "1,4",
        "--num-prompts",
        "8",
        "--warmup",
        "1",
        "--out",
        str(tmp_path),
        "--no-chart",
        "--json",
    )
    assert res.code == 0, res.stderr
    doc = json.loads(res.stdout)
    result = doc["result"]
    assert result["target"]["mode"] == "p-eagle" and result["target"]["k"] == 7
    assert result["target"]["mode_source"] == "tags" and result["target"]["instance_type"] == "ml.g7e.2xlarge"
    assert result["price"]["usd_per_hour"] == pytest.approx(3.36) and result["price"]["source"].startswith("table:")
    for level in result["levels"]:
        assert level["completed"] == 8 and level["errors"] == 0
        assert level["ttft_ms"]["count"] == 8 and level["tpot_ms"]["count"] == 8
        assert level["usd_per_million_output_tokens"] > 0
    acc = result["acceptance"]
    assert acc["source"] == "cloudwatch:/aws/sagemaker/Endpoints/pe-ep" and acc["k"] == 7
    assert acc["accepted_tokens"] == 420 and acc["mean_acceptance_length"] == pytest.approx(5.2)
    names = sorted(p.rsplit("/", 1)[-1] for p in doc["files"])
    assert names[0].startswith("bench-p-eagle-K7-") and names[0].endswith(".json") and names[1].endswith(".md")


def test_bench_unknown_endpoint_exits_2(mocked_endpoint, tmp_path):
    res = run_cli("bench", "no-such-ep", "--num-prompts", "1", "--out", str(tmp_path))
    assert res.code == 2 and "endpoint 'no-such-ep' not found" in res.stderr
