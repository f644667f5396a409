"""A Parquet stream on a store whose reads can be conditional on an ETag (S3 on moto, Azurite, an
HTTP server that sends ETags) reads each row group from the version of its file that was
indexed: the ETag the listing gave (or, for a list of files, the one a HEAD gave) goes into the
index, and every ranged GET of a row group is conditional on it (If-Match, and the answer's ETag
compared for HTTP, whose servers may ignore If-Match), so a file rewritten in place is refused by
name even when its size and its footer are the same bytes as before, and no GET of the file's end
is needed to tell."""

from __future__ import annotations

import contextlib
import io
import json
import time
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from streaming import StreamingDataset
from streaming.errors import ParquetFileError
from streaming.stream import Stream
from tests.support.faultproxy import FaultProxy
from tests.support.httpserver import HTTPFileServer
from tests.support.stores import Store

pytestmark = [pytest.mark.slow, pytest.mark.timeout(120)]
ROWS, GROUP, FILES = 300, 100, 2


def _file(fill: int) -> bytes:
    """A file whose footer does not depend on `fill`: fixed-size values, no statistics, no
    compression, so two fills give files of one size and one footer, and other rows."""
    ids = list(range(ROWS))
    table = pa.table({"id": pa.array(ids, pa.int64()),
                      "payload": pa.array([bytes([fill]) * 16 for _ in ids], pa.binary())})
    out = io.BytesIO()
    pq.write_table(table, out, row_group_size=GROUP, compression="none", use_dictionary=False,
                   write_statistics=False)
    return out.getvalue()


def _tail(data: bytes) -> bytes:
    length = int.from_bytes(data[-8:-4], "little")
    return data[-length - 8:]


@pytest.fixture
def bucket(s3_env, s3_server) -> str:
    name = s3_server.make_bucket()
    for k in range(FILES):
        s3_server.client().put_object(Bucket=name, Key=f"corpus/part-{k}.parquet", Body=_file(1))
    return name


def _remote(store: Store, space: str, listed: bool) -> str | list[str]:
    """The corpus as its folder (listed by the store) or as a list of its files."""
    if listed:
        return store.url(space, "corpus")
    return [store.url(space, f"corpus/part-{k}.parquet") for k in range(FILES)]


def _refused_after_a_same_size_rewrite(store: Store, space: str, remote: str | list[str],
                                       cache: Path) -> None:
    """Index the corpus, rewrite part-1 with other rows but the same size and footer, and
    expect its first row group refused by name."""
    before, after = _file(1), _file(2)
    assert len(before) == len(after) and _tail(before) == _tail(after) and before != after
    for k in range(FILES):
        store.put(space, f"corpus/part-{k}.parquet", before)
    ds = StreamingDataset(streams=[Stream(remote=remote, local=cache, format="parquet")],
                          batch_size=10)
    try:
        assert ds[0]["payload"] == b"\x01" * 16
        store.put(space, "corpus/part-1.parquet", after)
        with pytest.raises(ParquetFileError, match=r"part-1\.parquet row group 0: the file "
                                                   r"changed since it was indexed \(its ETag"):
            ds[ROWS]
    finally:
        ds.close()


@pytest.mark.parametrize("store,listed", [("s3", True), ("azure", True), ("s3", False),
                                          ("azure", False), ("http", False)],
                         indirect=["store"])
def test_a_rewrite_with_the_same_size_and_footer_is_refused_by_name(store_env, listed: bool,
                                                                     tmp_path: Path) -> None:
    space = store_env.space()
    _refused_after_a_same_size_rewrite(store_env, space, _remote(store_env, space, listed),
                                       tmp_path / "c")


@contextlib.contextmanager
def _served(tmp_path: Path, **options: bool) -> Iterator[tuple[Path, HTTPFileServer]]:
    """The corpus (every file of fill 1) in a folder an HTTP server with `options` serves."""
    root = tmp_path / "served"
    (root / "corpus").mkdir(parents=True)
    for k in range(FILES):
        (root / "corpus" / f"part-{k}.parquet").write_bytes(_file(1))
    server = HTTPFileServer(root, **options)
    try:
        yield root, server
    finally:
        server.close()


def _listed_over(endpoint: str, cache: Path) -> StreamingDataset:
    """A dataset of the corpus's files listed by URL under `endpoint`."""
    return StreamingDataset(streams=[Stream(
        remote=[f"{endpoint}/corpus/part-{k}.parquet" for k in range(FILES)], local=cache,
        format="parquet")], batch_size=10)


def test_an_http_server_ignoring_if_match_is_caught_by_the_etag_it_answers(tmp_path: Path
                                                                           ) -> None:
    with _served(tmp_path, if_match=False) as (root, server):
        ds = _listed_over(server.endpoint, tmp_path / "c")
        try:
            assert ds[0]["payload"] == b"\x01" * 16
            time.sleep(0.01)  # another modification time, so another ETag
            (root / "corpus" / "part-1.parquet").write_bytes(_file(2))
            with pytest.raises(ParquetFileError, match=r"part-1\.parquet row group 0: the "
                                                       r"file changed since it was indexed"):
                ds[ROWS]
        finally:
            ds.close()


def test_an_http_server_without_etags_still_has_each_row_group_checked(tmp_path: Path) -> None:
    with _served(tmp_path, etags=False) as (_, server):
        proxy = FaultProxy(server.endpoint)
        try:
            ds = _listed_over(proxy.endpoint, tmp_path / "c")
            try:
                index = json.loads((tmp_path / "c" / "index.json").read_bytes())
                assert all("etag" not in s["footer"] for s in index["shards"])
                proxy.requests.clear()
                proxy.ranges.clear()
                assert int(ds[ROWS]["id"]) == 0
            finally:
                ds.close()
            size = len(_file(1))  # the footer follows the row group: one GET to the file's end
            asked = proxy.header_values("GET", "/corpus/part-1.parquet")
            assert len(asked) == 1 and asked[0] is not None, asked
            assert asked[0].endswith("-") or int(asked[0].split("-")[1]) + 1 == size, asked
        finally:
            proxy.close()


def test_each_row_group_is_one_conditional_get(bucket, fault_proxy, tmp_path: Path,
                                               monkeypatch) -> None:
    proxy = fault_proxy()
    monkeypatch.setenv("S3_ENDPOINT_URL", proxy.endpoint)
    ds = StreamingDataset(streams=[Stream(remote=f"s3://{bucket}/corpus", local=tmp_path / "c",
                                          format="parquet")], batch_size=10)
    try:
        index = json.loads((tmp_path / "c" / "index.json").read_bytes())
        etags = {s["file"]: s["footer"]["etag"] for s in index["shards"]}
        assert all(etag.startswith('"') for etag in etags.values())
        proxy.requests.clear()
        proxy.ranges.clear()
        assert sorted(int(ds[i]["id"]) for i in range(len(ds))) == sorted(
            list(range(ROWS)) * FILES)
    finally:
        ds.close()
    for k in range(FILES):  # one GET per row group, none of the file's end
        asked = proxy.header_values("GET", f"/{bucket}/corpus/part-{k}.parquet")
        assert len(asked) == ROWS // GROUP, asked
        assert all(r is not None and not r.endswith("-") for r in asked), asked
