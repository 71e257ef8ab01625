"""AwsSession: each session has its own profile and credentials, but botocore's parsed data files (service
models, endpoints, partitions) are read once per process and shared (peagle_deploy/aws.py `_loaders`)."""

from __future__ import annotations

from peagle_deploy import aws
from peagle_deploy.aws import AwsSession


def _loader(session: AwsSession):
    return session.boto3_session._session.get_component("data_loader")  # noqa: SLF001 - what is shared


def test_sessions_of_one_process_share_the_parsed_data_but_not_the_credentials(monkeypatch, tmp_path):
    credentials = tmp_path / "credentials"
    credentials.write_text("[a]\naws_access_key_id = profile-a-id\naws_secret_access_key = profile-a-value\n"
                           "[b]\naws_access_key_id = profile-b-id\naws_secret_access_key = profile-b-value\n")
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(credentials))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-config"))
    monkeypatch.setattr(aws, "_loaders", {})
    first, second = AwsSession("us-east-1", "a"), AwsSession("us-west-2", "b")
    assert _loader(first) is _loader(second)
    paths = _loader(first).search_paths
    assert len(paths) == len(set(paths)), paths  # boto3's folder is added by each session: kept once
    sm_east, sm_west = first.client("sagemaker"), second.client("sagemaker")
    assert sm_east.meta.region_name == "us-east-1" and sm_west.meta.region_name == "us-west-2"
    assert sm_east.meta.service_model.operation_names == sm_west.meta.service_model.operation_names
    keys = [s.boto3_session.get_credentials().access_key for s in (first, second)]
    assert keys == ["profile-a-id", "profile-b-id"]


def test_another_data_path_gets_its_own_loader(monkeypatch, tmp_path):
    """AWS_DATA_PATH adds folders of service models: a session with another one does not share."""
    monkeypatch.setattr(aws, "_loaders", {})
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "placeholder-id")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "placeholder-value")
    monkeypatch.delenv("AWS_DATA_PATH", raising=False)
    first = _loader(AwsSession("us-east-1"))  # (a session is built on first use)
    monkeypatch.setenv("AWS_DATA_PATH", str(tmp_path))
    second = _loader(AwsSession("us-east-1"))
    assert first is not second and str(tmp_path) in second.search_paths and str(tmp_path) not in first.search_paths
    assert _loader(AwsSession("us-west-2")) is second
