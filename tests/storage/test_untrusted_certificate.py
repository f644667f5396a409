"""A store whose TLS certificate this process does not trust is an UntrustedCertificateError,
raised once (not retried) and naming the server and the setting that adds the authority: S3
without boto3 and through boto3 (`AWS_CA_BUNDLE`), the `https://` backend (`SSL_CERT_FILE`) and
Azure, against Azurite serving HTTPS (`REQUESTS_CA_BUNDLE`), which with that setting reads a
dataset end to end; the cause is found however deep a transport wrapped it (GCS's requests)."""

from __future__ import annotations

import ssl
import time
from pathlib import Path

import pytest
import requests
import urllib3

from streaming import StreamingDataset
from streaming.errors import UntrustedCertificateError
from streaming.storage import s3
from streaming.storage.retry import is_retryable
from streaming.storage.schemes import backend_for
from streaming.storage.tls_trust import untrusted
from tests.support.azurite import start_azurite
from tests.support.datasets import write_ids
from tests.support.httpserver import HTTPFileServer

TRUST_VARS = ("AWS_CA_BUNDLE", "SSL_CERT_FILE", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE")


@pytest.fixture
def clean_trust(monkeypatch) -> None:
    for name in (*TRUST_VARS, "AWS_PROFILE", "AWS_SESSION_TOKEN", "HTTP_PROXY", "HTTPS_PROXY",
                 "http_proxy", "https_proxy"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def https_bucket(tmp_path, certificate, monkeypatch, clean_trust) -> HTTPFileServer:
    (tmp_path / "root" / "bkt").mkdir(parents=True)
    (tmp_path / "root" / "bkt" / "k0").write_bytes(b"x" * 100)
    server = HTTPFileServer(tmp_path / "root", tls=certificate)
    monkeypatch.setenv("S3_ENDPOINT_URL", server.endpoint)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_REGION", "us-east-1")
    yield server
    server.close()


def _refused(url: str, setting: str, server: str) -> UntrustedCertificateError:
    backend, path = backend_for(url)
    with pytest.raises(UntrustedCertificateError) as caught:
        backend.get(path)
    message = str(caught.value)
    assert setting in message and server in message and url in message, message
    assert not is_retryable(caught.value)
    return caught.value


def test_s3_without_boto3_names_aws_ca_bundle(https_bucket, monkeypatch):
    monkeypatch.setattr(s3, "_client", lambda *a, **k: pytest.fail("boto3 client built"))
    _refused("s3://bkt/k0", "AWS_CA_BUNDLE", https_bucket.endpoint)


def test_s3_through_boto3_names_aws_ca_bundle(https_bucket, monkeypatch):
    monkeypatch.setattr(s3, "quick_stream", lambda *a, **k: None)  # the boto3 path
    _refused("s3://bkt/k0", "AWS_CA_BUNDLE", https_bucket.endpoint)


def test_the_https_backend_names_ssl_cert_file(https_bucket):
    _refused(f"{https_bucket.endpoint}/bkt/k0", "SSL_CERT_FILE", https_bucket.endpoint)


def test_a_dataset_fails_at_once_not_after_retries(https_bucket, tmp_path):
    started = time.monotonic()
    with pytest.raises(UntrustedCertificateError, match="AWS_CA_BUNDLE"):
        StreamingDataset(remote="s3://bkt/ds", local=str(tmp_path / "cache"), batch_size=4)
    assert time.monotonic() - started < 5.0  # retries would back off for longer


def test_the_cause_is_found_inside_requests_and_urllib3_wrappers():
    cause = ssl.SSLCertVerificationError(1, "[SSL: CERTIFICATE_VERIFY_FAILED] self-signed")
    wrapped = requests.exceptions.SSLError(urllib3.exceptions.MaxRetryError(
        None, "https://storage.example/o", reason=urllib3.exceptions.SSLError(cause)))
    assert untrusted(wrapped) is cause
    assert untrusted(requests.exceptions.ConnectionError("refused")) is None


def test_azure_over_https_reads_with_requests_ca_bundle_and_names_it_without(
        tmp_path, certificate, monkeypatch, clean_trust):
    from azure.storage.blob import BlobServiceClient

    server = start_azurite(tls=certificate)
    try:
        assert server.endpoint.startswith("https://")
        for name, value in server.env().items():
            monkeypatch.setenv(name, value)
        monkeypatch.setenv("REQUESTS_CA_BUNDLE", str(certificate[0]))
        local = write_ids(tmp_path / "ds", 40, size_limit=300)
        service = BlobServiceClient.from_connection_string(
            server.env()["AZURE_STORAGE_CONNECTION_STRING"])
        service.create_container("tls")
        for file in Path(local).iterdir():
            service.get_blob_client("tls", f"ds/{file.name}").upload_blob(file.read_bytes())
        ds = StreamingDataset(remote="az://tls/ds", local=str(tmp_path / "c1"), batch_size=4)
        assert sorted(int(ds[i]["id"]) for i in range(len(ds))) == list(range(40))
        monkeypatch.delenv("REQUESTS_CA_BUNDLE")
        with pytest.raises(UntrustedCertificateError, match="REQUESTS_CA_BUNDLE") as caught:
            StreamingDataset(remote="az://tls/ds", local=str(tmp_path / "c2"), batch_size=4)
        assert server.endpoint.split("//")[1] in str(caught.value)
    finally:
        server.stop()
