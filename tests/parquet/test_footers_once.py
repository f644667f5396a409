"""The index of a Parquet stream on S3 (moto behind a counting proxy) comes from the footers
alone: the sizes from the listing and one ranged GET of each file's end, never a HEAD or a
whole file; and two processes of one
job run on a node read the footers once between them (the second reads the first's index)."""

from __future__ import annotations

import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from streaming.stream import Stream
from tests.parquet.helpers import write_files
from tests.support.datasets import upload_dir

pytestmark = [pytest.mark.slow, pytest.mark.timeout(120)]
FILES = 3
ROOT = Path(__file__).resolve().parents[2]
OPEN_INDEX = """
import sys
from streaming.stream import Stream
Stream(remote=sys.argv[1], local=sys.argv[2], format="parquet").index_file()
"""


@pytest.fixture(scope="module")
def bucket(s3_server, tmp_path_factory) -> tuple[str, dict[str, int]]:
    folder = tmp_path_factory.mktemp("pq")
    paths = write_files(folder, files=FILES, rows=3000, row_group=500)
    name = s3_server.make_bucket()
    upload_dir(s3_server.client(), name, "corpus", folder)
    return name, {f"/{name}/corpus/{p.name}": p.stat().st_size for p in paths}


def _requests(proxy, sizes: dict[str, int]) -> Counter:
    return Counter((r.method, r.path) for r in proxy.log if r.path in sizes)


def test_footers_only_never_a_whole_file(s3_env, bucket, fault_proxy, tmp_path, monkeypatch
                                         ) -> None:
    name, sizes = bucket
    proxy = fault_proxy()
    monkeypatch.setenv("S3_ENDPOINT_URL", proxy.endpoint)
    assert min(sizes.values()) > 64 << 10  # bigger than the tail a footer read asks for
    Stream(remote=f"s3://{name}/corpus", local=tmp_path / "c", format="parquet").index_file()
    seen = _requests(proxy, sizes)
    assert seen == {("GET", p): 1 for p in sizes}
    for path, size in sizes.items():
        (asked,) = proxy.ranges[("GET", path)]
        first, last = map(int, asked.removeprefix("bytes=").split("-"))
        assert first == size - (64 << 10) and last == size - 1


def test_two_processes_of_a_job_read_the_footers_once(s3_env, bucket, fault_proxy, tmp_path
                                                       ) -> None:
    name, sizes = bucket
    proxy = fault_proxy()
    env = {**os.environ, "S3_ENDPOINT_URL": proxy.endpoint, "TORCHELASTIC_RUN_ID": "once-test",
           "PYTHONPATH": str(ROOT)}
    args = [sys.executable, "-c", OPEN_INDEX, f"s3://{name}/corpus", str(tmp_path / "c")]
    ranks = [subprocess.Popen(args, env={**env, "LOCAL_RANK": str(k), "RANK": str(k)},
                              stderr=subprocess.PIPE) for k in range(2)]
    for rank in ranks:
        _, err = rank.communicate(timeout=60)
        assert rank.returncode == 0, err.decode()
    assert _requests(proxy, sizes) == {("GET", p): 1 for p in sizes}


def _fetched_bytes(proxy, sizes: dict[str, int]) -> int:
    total = 0
    for (method, path), asked in proxy.ranges.items():
        if method != "GET" or path not in sizes:
            continue
        for header in asked:
            first, last = header.removeprefix("bytes=").split("-")
            total += (int(last) + 1 if last else sizes[path]) - int(first)
    return total


def test_packing_lengths_fetch_only_the_lengths_column(s3_env, s3_server, fault_proxy,
                                                       tmp_path, monkeypatch) -> None:
    """The lengths a packed run plans with come from the token column's chunks alone (and the
    files' ends, to check them): far fewer bytes than the row groups of every column."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from streaming import StreamingDataset
    from streaming.dataset.lengths import load_lengths

    folder = tmp_path / "pq"
    folder.mkdir()
    rows = np.arange(2000)
    for k in range(2):
        pq.write_table(pa.table({
            "id": pa.array(rows + 2000 * k),
            "tokens": pa.array([list(range(i % 7 + 1)) for i in rows], pa.list_(pa.int32())),
            "blob": pa.array([os.urandom(3000) for _ in rows], pa.binary())}),
            folder / f"part-{k}.parquet", row_group_size=500)
    name = s3_server.make_bucket()
    upload_dir(s3_server.client(), name, "corpus", folder)
    sizes = {f"/{name}/corpus/{p.name}": p.stat().st_size for p in folder.iterdir()}
    proxy = fault_proxy()
    monkeypatch.setenv("S3_ENDPOINT_URL", proxy.endpoint)
    ds = StreamingDataset(streams=[Stream(remote=f"s3://{name}/corpus", local=tmp_path / "c",
                                          format="parquet")], batch_size=4)
    proxy.ranges.clear()
    assert load_lengths(ds, "tokens").tolist() == [i % 7 + 1 for i in range(2000)] * 2
    fetched = _fetched_bytes(proxy, sizes)
    assert 0 < fetched < int(ds.catalog.facts.raw_bytes.sum()) / 20, fetched
