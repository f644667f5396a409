"""URL forms of the gs://, Azure and http(s):// backends, lazy SDK imports with an error naming
the extra, and the credential errors that need no emulator feature."""

from __future__ import annotations

import pickle
import subprocess
import sys

import pytest

from streaming.errors import (
    AccessDeniedError,
    MissingExtraError,
    StorageError,
)
from streaming.storage import azure as azure_module
from streaming.storage import backend_for, fetch
from streaming.storage import gcs as gcs_module
from streaming.storage.azure import AzureBackend
from streaming.storage.gcs import GCSBackend
from streaming.storage.http import HTTPBackend
from streaming.storage.per_process import PerProcess
from tests.support.httpserver import http_server  # noqa: F401


@pytest.mark.parametrize(("url", "backend", "path"), [
    ("gs://bucket/a/b.mds", GCSBackend("bucket"), "a/b.mds"),
    ("az://cont/a/b.mds", AzureBackend("cont"), "a/b.mds"),
    ("azure://cont/a/b.mds", AzureBackend("cont"), "a/b.mds"),
    ("az://cont@acct.blob.core.windows.net/a", AzureBackend("cont", "acct"), "a"),
    ("abfs://cont@acct.dfs.core.windows.net/a/b", AzureBackend("cont", "acct"), "a/b"),
    ("abfss://cont@acct.dfs.core.windows.net/a", AzureBackend("cont", "acct"), "a"),
    ("https://acct.blob.core.windows.net/cont/a/b", AzureBackend("cont", "acct"), "a/b"),
    ("https://cdn.example.com/data/a", HTTPBackend("https", "cdn.example.com"), "/data/a"),
    ("http://127.0.0.1:8000/d/a", HTTPBackend("http", "127.0.0.1:8000"), "/d/a"),
])
def test_url_forms(url, backend, path):
    got, key = backend_for(url)
    assert (got, key) == (backend, path)
    assert pickle.loads(pickle.dumps(got)) == got


@pytest.mark.parametrize("url", ["gs:///key", "az:///key", "https://acct.blob.core.windows.net/"])
def test_urls_without_a_bucket_are_refused(url):
    with pytest.raises(StorageError, match="needs a"):
        backend_for(url)


def test_basic_auth_in_an_http_url_is_kept_but_never_printed():
    backend, _ = backend_for("https://reader:s3cret@example.com/data/index.json")
    assert backend.userinfo == "reader:s3cret"
    assert "s3cret" not in repr(backend) and "s3cret" not in backend.url("/data/index.json")


def test_importing_and_resolving_urls_loads_no_cloud_sdk():
    code = ("import sys, streaming; from streaming.storage import backend_for; "
            "[backend_for(u) for u in ('gs://b/k', 'az://c/k', 'https://h/k')]; "
            "print(sorted(m for m in sys.modules if m.startswith(('google.cloud', 'azure'))))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, timeout=120).stdout
    assert out.strip() == "[]"


@pytest.mark.parametrize(("url", "module", "sdk", "extra"), [
    ("gs://b/k", gcs_module, "google.cloud.storage", "gcs"),
    ("az://cont/k", azure_module, "azure.storage.blob", "azure"),
])
def test_a_missing_sdk_names_the_extra(monkeypatch, url, module, sdk, extra):
    monkeypatch.setitem(sys.modules, sdk, None)  # makes `import sdk` fail
    monkeypatch.setattr(module, "_clients", PerProcess())
    monkeypatch.setenv("AZURE_STORAGE_CONNECTION_STRING", "BlobEndpoint=http://127.0.0.1:9/a;")
    backend, key = backend_for(url)
    with pytest.raises(MissingExtraError, match=rf"mds-streaming\[{extra}\]"):
        backend.size(key)


def test_gcs_without_credentials_says_how_to_provide_them(http_server, monkeypatch,  # noqa: F811
                                                          tmp_path):
    """No emulator: anonymous requests to an endpoint that refuses them (the HTTP test server
    answers 403 to any path naming `forbidden`)."""
    monkeypatch.delenv("STORAGE_EMULATOR_HOST", raising=False)
    monkeypatch.setenv("API_ENDPOINT_OVERRIDE", http_server.endpoint)
    monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", str(tmp_path / "missing.json"))
    monkeypatch.setenv("NO_GCE_CHECK", "True")
    with pytest.raises(AccessDeniedError, match=r"gs://forbidden-b/k: no Google Cloud credent"):
        fetch("gs://forbidden-b/k", tmp_path / "k", retry=3, backoff=5.0)
