"""The backend suite runs every test once per object store: S3 (moto), GCS (gcp-storage-emulator),
Azure Blob (Azurite) and plain HTTP (a Range-honouring file server), each a real server process
or thread on loopback started once per session."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support.azurite import azurite_server  # noqa: F401
from tests.support.faultproxy import FaultProxy
from tests.support.gcsserver import gcs_server  # noqa: F401
from tests.support.httpserver import http_server  # noqa: F401
from tests.support.stores import AzureStore, GCSStore, HTTPStore, S3Store, Store

BACKENDS = ("s3", "gcs", "azure", "http")
_SERVERS = {"s3": ("s3_server", S3Store), "gcs": ("gcs_server", GCSStore),
            "azure": ("azurite_server", AzureStore), "http": ("http_server", HTTPStore)}


@pytest.fixture(scope="session", params=BACKENDS)
def store(request: pytest.FixtureRequest) -> Store:
    fixture, cls = _SERVERS[request.param]
    return cls(request.getfixturevalue(fixture))


@pytest.fixture
def store_env(store: Store, monkeypatch: pytest.MonkeyPatch) -> Store:
    """Point this library at the store's server for one test."""
    for key, value in store.env().items():
        monkeypatch.setenv(key, value)
    return store


@pytest.fixture
def proxy_for(store: Store, monkeypatch: pytest.MonkeyPatch) -> Iterator:
    """Factory: `proxy_for(rate=0.2, ...)` -> a FaultProxy in front of the store's server, with
    the environment pointed through it."""
    proxies: list[FaultProxy] = []

    def make(**options: object) -> FaultProxy:
        proxy = FaultProxy(store.upstream, **options)
        proxies.append(proxy)
        for key, value in store.env(proxy).items():
            monkeypatch.setenv(key, value)
        return proxy

    try:
        yield make
    finally:
        for proxy in proxies:
            proxy.close()
