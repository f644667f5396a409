"""Dask DataFrames and Bags -> MDS on a real distributed.LocalCluster (one per module): one part
per partition, one index last, locally and straight to S3 (loopback moto), a worker killed
mid-write leaves nothing half-published."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from streaming.errors import DatasetMismatchError
from tests.convert.helpers import (
    COLUMNS,
    DieOnce,
    FailAt,
    named_files,
    on_disk,
    rows,
    sample_bytes,
    single_writer,
)

dask = pytest.importorskip("dask")
distributed = pytest.importorskip("distributed")

pytestmark = [pytest.mark.slow, pytest.mark.timeout(180)]


@pytest.fixture(scope="module")
def client(s3_server):
    saved = dict(os.environ)
    os.environ.update(s3_server.env())  # the worker processes inherit it
    try:
        with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                      dashboard_address=None) as cluster, \
                distributed.Client(cluster) as connected:
            yield connected
    finally:
        os.environ.clear()
        os.environ.update(saved)


def frame(start: int, n: int, partitions: int):
    import dask.dataframe as dd
    import pandas as pd

    # Dask turns object columns into strings by default, lists included (docs/converting.md).
    with dask.config.set({"dataframe.convert-string": False}):
        return dd.from_pandas(pd.DataFrame(rows(start, n)), npartitions=partitions, sort=False)


def test_dataframe_matches_a_single_writer(client, tmp_path: Path):
    from writers.convert import dask_to_mds

    result = dask_to_mds(frame(0, 300, 3), tmp_path / "out", COLUMNS, compression=None,
                         size_limit=4096)
    assert result["parts"] == 3 and result["samples"] == 300
    assert sample_bytes(tmp_path / "out") == sample_bytes(
        single_writer(tmp_path / "one", rows(0, 300), size_limit=4096))
    assert on_disk(tmp_path / "out") == named_files(tmp_path / "out")


def test_bag_with_inferred_columns_straight_to_s3(client, s3_env, tmp_path: Path):
    import dask.bag as db

    from streaming import StreamingDataset
    from writers.convert import dask_to_mds

    url = f"s3://{s3_env.make_bucket()}/dask-out"
    result = dask_to_mds(db.from_sequence(rows(0, 200), npartitions=4), url, size_limit=2048)
    assert result["columns"] == {"id": "int", "text": "str", "tokens": "ndarray:int64"}
    assert result["index"] == f"{url}/index.json"
    cache = tmp_path / "cache"

    def read_all() -> list[int]:
        ds = StreamingDataset(remote=url, local=str(cache))
        try:
            return [int(ds[i]["id"]) for i in range(ds.num_samples)]
        finally:
            ds.close()

    assert read_all() == list(range(200))
    cached = {p: p.stat().st_mtime_ns for p in cache.rglob("shard.*")}
    assert len(cached) > 4
    dask_to_mds(db.from_sequence(rows(200, 50), npartitions=2), url, size_limit=2048,
                mode="append")
    assert read_all() == list(range(250))
    assert {p: p.stat().st_mtime_ns for p in cached} == cached  # kept, not fetched again


def test_a_worker_killed_mid_write_leaves_no_duplicate(client, tmp_path: Path):
    from writers.convert import dask_to_mds

    marker, out = tmp_path / "died", tmp_path / "out"
    result = dask_to_mds(frame(0, 300, 3), out, COLUMNS, compression=None, size_limit=2048,
                         transform=DieOnce(marker, at=150))
    assert marker.exists() and result["samples"] == 300
    assert sample_bytes(out) == sample_bytes(
        single_writer(tmp_path / "one", rows(0, 300), size_limit=2048))
    assert on_disk(out) == named_files(out)


def test_append_and_a_failed_append(client, tmp_path: Path):
    from writers.convert import dask_to_mds

    out = tmp_path / "out"
    dask_to_mds(frame(0, 100, 2), out, COLUMNS, compression=None)
    dask_to_mds(frame(100, 50, 2), out, COLUMNS, compression=None, mode="append")
    assert sample_bytes(out) == sample_bytes(single_writer(tmp_path / "one", rows(0, 150)))
    index = (out / "index.json").read_bytes()
    with pytest.raises(ValueError, match="bad record 220"):
        dask_to_mds(frame(200, 40, 2), out, COLUMNS, compression=None, mode="append",
                    transform=FailAt(220))
    assert (out / "index.json").read_bytes() == index
    with pytest.raises(DatasetMismatchError, match="column 'text'"):
        dask_to_mds(frame(0, 4, 1), out, {**COLUMNS, "text": "bytes"}, compression=None,
                    mode="append")
