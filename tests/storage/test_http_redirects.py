"""The http(s):// backend follows redirects, as a hub's file URL answers with its CDN's: to
another server (without the first one's credentials), a relative Location, a chain of a few hops;
a loop, a non-http target and a fall from https to plain http are typed errors naming the URL
asked. A dataset, MDS or Parquet, streams from behind a redirect, each Parquet row group's GET
still conditional on the ETag the CDN sends."""

from __future__ import annotations

import base64
import io
import json
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from streaming import StreamingDataset
from streaming.errors import StorageError
from streaming.storage.http import MAX_REDIRECTS, redirect_target
from streaming.storage.schemes import backend_for
from streaming.stream import Stream
from tests.support.datasets import write_ids
from tests.support.httpserver import HTTPFileServer

pytestmark = pytest.mark.timeout(60)


@pytest.fixture
def cdn(tmp_path: Path) -> Iterator[HTTPFileServer]:
    """The server that holds the files."""
    (tmp_path / "cdn").mkdir()
    server = HTTPFileServer(tmp_path / "cdn")
    yield server
    server.close()


@pytest.fixture
def hub(tmp_path: Path, cdn: HTTPFileServer) -> Iterator[HTTPFileServer]:
    """A server that sends every request on to the CDN with a 302."""
    (tmp_path / "hub").mkdir()
    server = HTTPFileServer(tmp_path / "hub", redirect_to=cdn.endpoint)
    yield server
    server.close()


def test_a_file_behind_a_redirect_is_read_whole_in_ranges_and_sized(hub, cdn) -> None:
    data = bytes(range(256)) * 40
    (cdn.root / "f.bin").write_bytes(data)
    backend, path = backend_for(f"{hub.endpoint}/f.bin")
    assert backend.get(path) == data
    assert backend.get_range(path, 100, 300) == data[100:300]
    assert backend.size(path) == len(data)
    assert backend.version(path).etag is not None  # the CDN's


def test_credentials_stay_with_the_server_they_were_given_for(hub, cdn) -> None:
    (cdn.root / "f.bin").write_bytes(b"payload")
    host = hub.endpoint.removeprefix("http://")
    backend, path = backend_for(f"http://user:secret@{host}/f.bin")
    assert backend.get(path) == b"payload"
    sent = "Basic " + base64.b64encode(b"user:secret").decode()
    assert hub.authorizations == [sent]
    assert cdn.authorizations == [None]


def test_a_redirect_loop_is_a_typed_error_naming_the_url(tmp_path: Path) -> None:
    (tmp_path / "loop").mkdir()
    server = HTTPFileServer(tmp_path / "loop")
    server.redirect_to = server.endpoint  # every request to itself
    try:
        backend, path = backend_for(f"{server.endpoint}/f.bin")
        with pytest.raises(StorageError, match=rf"{server.endpoint}/f\.bin: more than "
                                               rf"{MAX_REDIRECTS} redirects"):
            backend.get(path)
        assert len(server.authorizations) == MAX_REDIRECTS + 1
    finally:
        server.close()


def test_redirect_targets() -> None:
    asked = "https://hub.example/d/f.parquet"
    assert redirect_target(asked, "https://cdn.example:8443/x/f?sig=1", asked) == (
        "https", "cdn.example:8443", "/x/f?sig=1")
    assert redirect_target("http://a.example/d/f", "../e/g", asked) == (
        "http", "a.example", "/e/g")
    assert redirect_target("http://a.example/f", "https://u:p@b.example/f", asked) == (
        "https", "b.example", "/f")
    with pytest.raises(StorageError, match=r"hub\.example/d/f\.parquet: redirected from https "
                                           r"to plain http"):
        redirect_target(asked, "http://cdn.example/f", asked)
    with pytest.raises(StorageError, match=r"not an http\(s\) URL"):
        redirect_target(asked, "ftp://cdn.example/f", asked)


def test_an_mds_dataset_streams_from_behind_a_redirect(hub, cdn, tmp_path: Path) -> None:
    write_ids(cdn.root / "ds", 50)
    ds = StreamingDataset(remote=f"{hub.endpoint}/ds", local=str(tmp_path / "c"), batch_size=5)
    try:
        assert sorted(int(s["id"]) for s in ds) == list(range(50))
    finally:
        ds.close()


def _parquet(rows: int) -> bytes:
    out = io.BytesIO()
    pq.write_table(pa.table({"id": pa.array(range(rows), pa.int64())}), out,
                   row_group_size=rows // 2)
    return out.getvalue()


def test_a_parquet_list_streams_from_behind_a_redirect_on_the_cdns_etags(hub, cdn,
                                                                          tmp_path: Path) -> None:
    for k in range(2):
        (cdn.root / f"part-{k}.parquet").write_bytes(_parquet(40))
    ds = StreamingDataset(streams=[Stream(
        remote=[f"{hub.endpoint}/part-{k}.parquet" for k in range(2)], local=tmp_path / "c",
        format="parquet")], batch_size=5)
    try:
        assert sorted(int(s["id"]) for s in ds) == sorted(list(range(40)) * 2)
    finally:
        ds.close()
    shards = json.loads((tmp_path / "c" / "index.json").read_bytes())["shards"]
    assert len(shards) == 4 and all(s["footer"]["etag"].startswith('"') for s in shards)
