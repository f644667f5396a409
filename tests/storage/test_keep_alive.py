"""Boto3-free S3 GETs (and the `https://` backend) keep their connection alive between
requests to one server, over HTTP and HTTPS (a loopback server with a certificate made for the
test): one connection and one TLS context for many GETs, a connection the server dropped while
idle replaced without an error, a response not read to its end never reused, and a forked
process never uses its parent's connections nor waits for a lock held at the fork."""

from __future__ import annotations

import multiprocessing
import ssl
import threading
import time
from collections.abc import Iterator
from http.client import HTTPConnection
from pathlib import Path

import pytest

from streaming.storage import http, keep_alive, s3_quick
from streaming.storage.schemes import backend_for
from tests.support.httpserver import HTTPFileServer

OBJECTS = {f"k{i}": bytes([i]) * (1000 + i) for i in range(4)}


@pytest.fixture
def bucket_root(tmp_path) -> Path:
    root = tmp_path / "root"
    (root / "bkt").mkdir(parents=True)
    for name, data in OBJECTS.items():
        (root / "bkt" / name).write_bytes(data)
    return root


@pytest.fixture(autouse=True)
def fresh_pool(monkeypatch) -> Iterator[None]:
    monkeypatch.setattr(keep_alive, "pool", keep_alive.ConnectionPool())
    monkeypatch.setattr(s3_quick, "pool", keep_alive.pool)
    monkeypatch.setattr(http, "pool", keep_alive.pool)
    keep_alive.tls_context.cache_clear()
    yield
    keep_alive.tls_context.cache_clear()


def _serve(monkeypatch, root: Path, **options) -> HTTPFileServer:
    server = HTTPFileServer(root, **options)
    monkeypatch.setenv("S3_ENDPOINT_URL", server.endpoint)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_REGION", "us-east-1")
    for name in ("AWS_PROFILE", "AWS_SESSION_TOKEN", "HTTP_PROXY", "HTTPS_PROXY", "http_proxy",
                 "https_proxy"):
        monkeypatch.delenv(name, raising=False)
    return server


def _get(name: str) -> bytes:
    backend, path = backend_for(f"s3://bkt/{name}")
    return backend.get(path)


def test_many_gets_share_one_connection(monkeypatch, bucket_root, no_boto3):
    server = _serve(monkeypatch, bucket_root)
    try:
        for _ in range(3):
            assert {name: _get(name) for name in OBJECTS} == OBJECTS
        assert server.connections == 1
    finally:
        server.close()


@pytest.mark.parametrize("scheme", ["s3", "http"])
def test_a_server_with_nagles_algorithm_on_answers_kept_alive_gets_at_once(
        monkeypatch, bucket_root, scheme):
    """Python's http.server writes headers and body apart with Nagle's algorithm on: on a
    kept-alive connection each GET waited 40 ms for the client's delayed ACK."""
    server = _serve(monkeypatch, bucket_root, nagle=True)
    try:
        backend, path = backend_for(f"{server.endpoint}/bkt/k0" if scheme == "http"
                                    else "s3://bkt/k0")
        assert backend.get(path) == OBJECTS["k0"]
        started = time.perf_counter()
        for _ in range(10):
            assert backend.get(path) == OBJECTS["k0"]
        per_get = (time.perf_counter() - started) / 10
        assert server.connections == 1
        assert per_get < 0.03, f"{per_get * 1e3:.1f} ms a GET: delayed ACKs waited for (40 ms)"
    finally:
        server.close()


def test_a_connection_dropped_while_idle_is_replaced(monkeypatch, bucket_root, no_boto3):
    server = _serve(monkeypatch, bucket_root, drop_idle=True)
    try:
        assert {name: _get(name) for name in OBJECTS} == OBJECTS
        assert server.connections == len(OBJECTS)  # each kept one was found dropped
    finally:
        server.close()


def test_a_response_not_read_to_its_end_is_not_reused(monkeypatch, bucket_root):
    server = _serve(monkeypatch, bucket_root)
    try:
        stream = s3_quick.quick_stream("bkt", "k1", server.endpoint, None, connect_timeout=5,
                                       read_timeout=5, chunk=100)
        assert stream is not None
        assert next(stream) == OBJECTS["k1"][:100]
        stream.close()
        assert _get("k2") == OBJECTS["k2"]
        assert server.connections == 2
    finally:
        server.close()


def _take_in_child(key: tuple, out: multiprocessing.Queue) -> None:
    out.put(keep_alive.pool.take(key) is None)


def test_a_forked_process_never_takes_its_parents_connection(monkeypatch, bucket_root):
    server = _serve(monkeypatch, bucket_root)
    try:
        assert _get("k0") == OBJECTS["k0"]
        key = next(iter(keep_alive.pool.idle))
        context = multiprocessing.get_context("fork")
        out = context.Queue()
        child = context.Process(target=_take_in_child, args=(key, out))
        child.start()
        assert out.get(timeout=30) is True
        child.join(timeout=30)
        assert keep_alive.pool.take(key) is not None  # still the parent's
    finally:
        server.close()


def test_a_process_forked_while_another_thread_holds_the_pool_uses_it_at_once():
    """A DataLoader worker forked while a prefetch thread of the training process held the
    pool's lock must not wait for a lock nobody in the child will ever release."""
    pool = keep_alive.pool
    pool.give(("http", "127.0.0.1", 1, None), HTTPConnection("127.0.0.1", 1))
    held, release = threading.Event(), threading.Event()

    def hold() -> None:
        with pool.lock:
            held.set()
            release.wait(30)

    holder = threading.Thread(target=hold, daemon=True)
    holder.start()
    assert held.wait(10)
    try:
        context = multiprocessing.get_context("fork")
        out = context.Queue()
        child = context.Process(target=_take_in_child, args=(("http", "127.0.0.1", 1, None), out))
        child.start()
        assert out.get(timeout=30) is True
        child.join(timeout=30)
        assert child.exitcode == 0
    finally:
        release.set()
        holder.join(10)


@pytest.fixture
def no_boto3(monkeypatch) -> None:
    """Every GET must take the boto3-free path: asking for a boto3 client fails the test."""
    from streaming.storage.s3 import S3Backend

    def refuse(self):
        raise AssertionError("the GET fell back to boto3")

    monkeypatch.setattr(S3Backend, "client", property(refuse))


@pytest.mark.parametrize("drop_idle", [False, True])
def test_https_gets_share_one_connection_and_one_tls_context(monkeypatch, bucket_root,
                                                             certificate, no_boto3, drop_idle):
    server = _serve(monkeypatch, bucket_root, tls=certificate, drop_idle=drop_idle)
    monkeypatch.setenv("AWS_CA_BUNDLE", str(certificate[0]))
    made = []
    real = ssl.create_default_context
    monkeypatch.setattr(ssl, "create_default_context",
                        lambda *a, **k: made.append(k.get("cafile")) or real(*a, **k))
    try:
        assert server.endpoint.startswith("https://")
        for _ in range(3):
            assert {name: _get(name) for name in OBJECTS} == OBJECTS
        assert server.connections == (3 * len(OBJECTS) if drop_idle else 1)
        assert made == [str(certificate[0])]
    finally:
        server.close()


def test_the_https_backend_shares_one_connection_too(monkeypatch, bucket_root, certificate):
    server = HTTPFileServer(bucket_root, tls=certificate)
    monkeypatch.setenv("SSL_CERT_FILE", str(certificate[0]))  # the system's trust, for this test
    try:
        backend, _ = backend_for(f"{server.endpoint}/bkt/k0")
        for _ in range(3):
            assert {name: backend.get(f"/bkt/{name}") for name in OBJECTS} == OBJECTS
            assert b"".join(backend.iter_chunks("/bkt/k3", 10, 20)) == OBJECTS["k3"][10:20]
        assert server.connections == 1
    finally:
        server.close()
