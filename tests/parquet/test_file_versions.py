"""A Parquet stream on a store whose listing gives ETags and whose reads can be conditional on them
(S3 on moto, Azurite) reads each row group from the version of its file that was indexed: the
listing's ETag goes into the index, and every ranged GET of a row group is conditional on it
(If-Match), so a file rewritten in place is refused by name even when its size and its footer
are the same bytes as before, and no GET of the file's end is needed to tell."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from streaming import StreamingDataset
from streaming.errors import ParquetFileError
from streaming.stream import Stream

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


@pytest.mark.parametrize("store", ["s3", "azure"], indirect=True)
def test_a_rewrite_with_the_same_size_and_footer_is_refused_by_name(store_env,
                                                                     tmp_path: Path) -> None:
    before, after = _file(1), _file(2)
    assert len(before) == len(after) and _tail(before) == _tail(after) and before != after
    space = store_env.space()
    for k in range(FILES):
        store_env.put(space, f"corpus/part-{k}.parquet", before)
    ds = StreamingDataset(streams=[Stream(remote=store_env.url(space, "corpus"),
                                          local=tmp_path / "c", format="parquet")],
                          batch_size=10)
    try:
        assert ds[0]["payload"] == b"\x01" * 16
        store_env.put(space, "corpus/part-1.parquet", after)
        with pytest.raises(ParquetFileError, match=r"part-1\.parquet row group 0: the file "
                                                   r"changed since it was indexed \(its ETag"):
            ds[ROWS]
    finally:
        ds.close()


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
