"""Issue 45 item 4: peagle against a PLAIN moto server (moto's own `ThreadedMotoServer`, none of the emulator's
patches), as a user's CI runs it: a failed deploy leaves nothing, `cleanup --all` and `cleanup NAME` of what is
gone answer as on the emulator (the README's exit codes), and where moto lacks an API peagle only reads to be
careful (ListInferenceComponents: HTTP 500 and an error page), peagle goes on where its own records prove the
answer, and otherwise stops once with a line naming the missing API and the emulator (docs/ci.md).

The failure a deploy really meets on plain moto: moto's CreateEndpointConfig knows no ml.g7e type (its instance
type list predates them), so every deploy of a P-EAGLE model is refused there after its CreateModel; plain moto
has no Creating or Failed endpoint to fail a health check with (its endpoints are InService at once, BRIEF.md 8).
The server runs in a process of its own (started once for the module, emptied by moto's reset API before each
test): no emulator of this pytest process can patch it. peagle runs in-process (tests/cli_runner.py).
"""

from __future__ import annotations

import json
import subprocess
import sys
import urllib.request

import pytest

from .cli_runner import run_cli

ROLE = "arn:aws:iam::123456789012:role/peagle-ci"
THEIRS = "someone-elses-endpoint"
SERVER = """
import sys
from moto.server import ThreadedMotoServer
server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
server.start()
host, port = server.get_host_and_port()
print(f"http://{host}:{port}", flush=True)
sys.stdin.read()
server.stop()
"""


@pytest.fixture(scope="module")
def moto_url():
    proc = subprocess.Popen([sys.executable, "-c", SERVER], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, text=True)
    url = proc.stdout.readline().strip()
    assert url.startswith("http://127.0.0.1:"), url
    yield url
    proc.stdin.close()
    proc.wait(60)


@pytest.fixture
def moto(moto_url):
    """The module's plain moto server, emptied (moto's own reset API), and an environment pointing at it."""
    urllib.request.urlopen(urllib.request.Request(f"{moto_url}/moto-api/reset", method="POST"), timeout=30).close()
    env = {"AWS_ENDPOINT_URL": moto_url, "AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
           "AWS_DEFAULT_REGION": "us-east-1", "AWS_REGION": "us-east-1", "AWS_MAX_ATTEMPTS": "2",
           "AWS_CONFIG_FILE": "/dev/null", "AWS_SHARED_CREDENTIALS_FILE": "/dev/null",
           "AWS_EC2_METADATA_DISABLED": "true", "COLUMNS": "250", "PATH": "/usr/bin:/bin"}
    return env


def client(env, service="sagemaker"):
    import boto3

    return boto3.client(service, endpoint_url=env["AWS_ENDPOINT_URL"], region_name="us-east-1",
                        aws_access_key_id="testing", aws_secret_access_key="testing")


def left(env) -> dict[str, list[str]]:
    sm = client(env)
    return {"endpoints": sorted(e["EndpointName"] for e in sm.list_endpoints()["Endpoints"]),
            "configs": sorted(c["EndpointConfigName"] for c in sm.list_endpoint_configs()["EndpointConfigs"]),
            "models": sorted(m["ModelName"] for m in sm.list_models()["Models"])}


def make_stack(env, name: str, tags: list[dict[str, str]], *, endpoint: bool = True) -> None:
    """Model, config (an instance type moto knows) and endpoint, as another tool, or an earlier peagle, made them."""
    sm = client(env)
    sm.create_model(ModelName=name, ExecutionRoleArn=ROLE, PrimaryContainer={"Image": "img"}, Tags=tags)
    if endpoint:
        sm.create_endpoint_config(EndpointConfigName=name, Tags=tags, ProductionVariants=[{
            "VariantName": "AllTraffic", "ModelName": name, "InstanceType": "ml.g4dn.xlarge",
            "InitialInstanceCount": 1}])
        sm.create_endpoint(EndpointName=name, EndpointConfigName=name, Tags=tags)


def peagle_tags(endpoint: str, **extra: str) -> list[dict[str, str]]:
    values = {"peagle:managed": "true", "peagle:endpoint": endpoint, "peagle:model": "qwen3-coder", **extra}
    return [{"Key": k, "Value": v} for k, v in values.items()]


def last_line(out) -> str:
    return out.stderr.strip().splitlines()[-1]


def test_plain_moto_lacks_list_inference_components_and_peagle_names_it(moto, monkeypatch):
    """The premise, and the distinct failure kind: moto's 500 error page is the mock lacking the operation."""
    from peagle_deploy.aws import AwsSession, MockLacksOperation, translate_error

    for key, value in moto.items():
        monkeypatch.setenv(key, value)
    with pytest.raises(Exception) as raised:
        AwsSession("us-east-1").client("sagemaker").list_inference_components()
    error = translate_error(raised.value)
    assert isinstance(error, MockLacksOperation) and error.exit_code == 3
    assert error.one_line() == (f"the mock AWS at {moto['AWS_ENDPOINT_URL']} does not implement "
                                "ListInferenceComponents (it answered HTTP 500 with an error page, as moto does for an "
                                "operation it lacks): peagle's emulator implements it: run peagle against "
                                "peagle_deploy.testing.SageMakerEmulator (docs/ci.md) rather than a plain moto server")


def test_a_failed_deploy_on_plain_moto_leaves_nothing(moto):
    make_stack(moto, THEIRS, [])
    out = run_cli("deploy", "qwen3-coder", "--name", "ci1", "--role", ROLE, "--yes", env=moto)
    assert out.code == 2, out.stderr
    line = last_line(out)
    assert line.startswith("error: AWS rejected CreateEndpointConfig (ValidationException): Value 'ml.g7e.2xlarge' "
                           "at 'instanceType' failed to satisfy constraint"), line
    assert line.endswith("rolled back: model deleted"), line
    assert "left" not in line and "unknown" not in line and "Traceback" not in out.stderr
    assert left(moto) == {"endpoints": [THEIRS], "configs": [THEIRS], "models": [THEIRS]}


def test_cleanup_all_and_cleanup_name_on_plain_moto_answer_as_on_the_emulator(moto):
    make_stack(moto, THEIRS, [])
    make_stack(moto, "ci2", peagle_tags("ci2"))
    make_stack(moto, "ci3", peagle_tags("ci3"), endpoint=False)  # a killed deploy's model, nothing uses it
    make_stack(moto, "shared", peagle_tags("shared"))
    client(moto).create_endpoint_config(EndpointConfigName="theirs-on-ours", ProductionVariants=[{
        "VariantName": "AllTraffic", "ModelName": "shared", "InstanceType": "ml.g4dn.xlarge",
        "InitialInstanceCount": 1}])  # someone else's config names peagle's model: it stays
    client(moto).create_endpoint(EndpointName="theirs-on-ours", EndpointConfigName="theirs-on-ours")

    done = run_cli("cleanup", "--all", "--yes", "--json", env=moto)
    assert done.code == 0, done.stderr
    outcomes = {(o["kind"], o["name"]): o["result"] for o in json.loads(done.stdout)["outcomes"]}
    assert outcomes[("model", "ci3")] == "deleted" and outcomes[("endpoint", "ci2")] == "deleted"
    assert outcomes[("model", "shared")] == "left", outcomes
    assert left(moto) == {"endpoints": [THEIRS, "theirs-on-ours"], "configs": [THEIRS, "theirs-on-ours"],
                          "models": ["shared", THEIRS]}

    again = run_cli("cleanup", "--all", "--yes", env=moto)
    assert again.code == 0, again.stderr
    gone = run_cli("cleanup", "ci2", "--yes", env=moto)
    assert gone.code == 2 and gone.stderr == ("error: no endpoint, endpoint config or model named 'ci2' in "
                                              "us-east-1: check the name and --region (peagle status lists peagle's "
                                              "endpoints); nothing was deleted\n"), gone.stderr
    assert run_cli("cleanup", THEIRS, "--yes", env=moto).code == 2  # not peagle's, as on the emulator
    recovered = run_cli("recover", "--all", env=moto)
    assert recovered.code == 0 and "nothing left to finish" in recovered.stdout, recovered.stdout + recovered.stderr
    assert left(moto)["endpoints"] == [THEIRS, "theirs-on-ours"]


def test_where_its_records_prove_nothing_peagle_stops_once_naming_the_missing_api(moto):
    """A model peagle tagged for a component-hosted endpoint: a component may name it, and plain moto cannot say."""
    make_stack(moto, "ic1", peagle_tags("ic1", **{"peagle:hosting": "component"}), endpoint=False)
    out = run_cli("cleanup", "--all", "--yes", env=moto)
    assert out.code == 3, out.stderr
    assert out.stderr.count("error:") == 1 and "does not implement ListInferenceComponents" in last_line(out)
    assert "docs/ci.md" in last_line(out)
    assert left(moto)["models"] == ["ic1"]  # nothing deleted on a guess
