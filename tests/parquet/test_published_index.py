"""A Parquet stream's index published beside its files (`streaming parquet-index`): a stream then
starts without one request per file, reads the same samples as one indexing the footers itself,
fetches each file's footer once with its first row group, and refuses a file changed since the
index was published by name; another projection or other files fall back to the footers."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import warnings
from collections import Counter
from pathlib import Path

import pytest

from streaming import StreamingDataset
from streaming.cache.folder.disk_files import folder_bytes
from streaming.cache.folder.file_names import BOOKKEEPING_BYTES
from streaming.cache.prepare.published_index import PUBLISHED_NAME
from streaming.errors import ParquetFileError
from streaming.stream import Stream
from tests.cli.conftest import run_cli
from tests.parquet.helpers import assert_sample, table, write_files
from tests.support.datasets import upload_dir

pytestmark = [pytest.mark.slow, pytest.mark.timeout(180)]
FILES, ROWS, GROUP = 4, 300, 100
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("pq")
    write_files(folder, files=FILES, rows=ROWS, row_group=GROUP)
    return folder


@pytest.fixture
def bucket(s3_env, s3_server, corpus) -> tuple[str, dict[str, int]]:
    """The corpus on S3 with its index published; the files' paths and sizes."""
    name = s3_server.make_bucket()
    upload_dir(s3_server.client(), name, "corpus", corpus)
    ran = run_cli("parquet-index", f"s3://{name}/corpus/")
    assert ran.code == 0, ran.err
    assert f"s3://{name}/corpus/{PUBLISHED_NAME}" in ran.out
    assert f"{FILES} Parquet files, {FILES * ROWS // GROUP} row groups" in ran.out
    return name, {f"/{name}/corpus/{p.name}": p.stat().st_size for p in corpus.iterdir()}


def _per_file(proxy, sizes: dict[str, int]) -> Counter:
    return Counter(r.path for r in proxy.log if r.method in ("GET", "HEAD") and r.path in sizes)


def _ids(ds: StreamingDataset) -> list[int]:
    return sorted(assert_sample(ds[i]) for i in range(len(ds)))


def test_a_published_index_starts_without_a_request_per_file(bucket, fault_proxy, tmp_path,
                                                             monkeypatch) -> None:
    name, sizes = bucket
    proxy = fault_proxy()
    monkeypatch.setenv("S3_ENDPOINT_URL", proxy.endpoint)
    ds = StreamingDataset(streams=[Stream(remote=f"s3://{name}/corpus", local=tmp_path / "c",
                                          format="parquet")], batch_size=8, cache_limit="1gb")
    try:
        assert _per_file(proxy, sizes) == Counter()  # no footer, no HEAD, no listing of files
        assert not list((tmp_path / "c").glob("*.footer"))
        index = tmp_path / "c" / "index.json"
        footers = {s["footer"]["basename"]: s["footer"]["bytes"]
                   for s in json.loads(index.read_bytes())["shards"]}
        assert len(footers) == FILES
        # the footers still to come count against the limit, in the plan and in the engine
        assert ds.catalog.cache_other_bytes() == (index.stat().st_size + BOOKKEEPING_BYTES
                                                  + sum(footers.values()))
        assert ds.cache.usage() == folder_bytes([str(tmp_path / "c")]) + sum(footers.values())
        assert _ids(ds) == list(range(FILES * ROWS))
    finally:
        ds.close()
    tails = {path: proxy.header_values("GET", path).count(
        f"bytes={max(size - (64 << 10), 0)}-{size - 1}") for path, size in sizes.items()}
    assert tails == {path: 1 for path in sizes}  # each footer once, with its first row group
    assert len(list((tmp_path / "c").glob("*.footer"))) == FILES


def test_it_serves_the_same_samples_as_the_footers(bucket, corpus, tmp_path) -> None:
    name, _ = bucket
    published = Stream(remote=f"s3://{name}/corpus", local=tmp_path / "a", format="parquet")
    read = json.loads(published.index_file().read_bytes())
    own = json.loads(Stream(remote=str(corpus), local=tmp_path / "b", format="parquet")
                     .index_file().read_bytes())

    def comparable(shard: dict) -> dict:  # where a file lies and its version stamps: the store's
        footer = {k: v for k, v in shard["footer"].items() if k not in ("mtime_ns", "etag")}
        return {**{k: v for k, v in shard.items() if k != "in_place"}, "footer": footer}

    assert [comparable(s) for s in read["shards"]] == [comparable(s) for s in own["shards"]]
    assert all(s["footer"]["etag"].startswith('"') for s in read["shards"])  # S3 lists ETags
    assert read["parquet"]["published"] == PUBLISHED_NAME


def test_a_glob_and_a_list_below_the_folder_are_served_from_it(bucket, fault_proxy, tmp_path,
                                                               monkeypatch) -> None:
    name, sizes = bucket
    proxy = fault_proxy()
    monkeypatch.setenv("S3_ENDPOINT_URL", proxy.endpoint)
    glob = Stream(remote=f"s3://{name}/corpus/part-00[13].parquet", local=tmp_path / "g",
                  format="parquet")
    listed = Stream(remote=[f"s3://{name}/corpus/part-002.parquet",
                            f"s3://{name}/corpus/part-000.parquet"], local=tmp_path / "l",
                    format="parquet")
    ds = StreamingDataset(streams=[glob, listed], batch_size=8)
    try:
        assert _per_file(proxy, sizes) == Counter()
        files = [s["file"] for s in json.loads((tmp_path / "l" / "index.json").read_bytes())
                 ["shards"]]
        assert files == ["part-002.parquet"] * 3 + ["part-000.parquet"] * 3  # as listed
        assert _ids(ds) == list(range(FILES * ROWS))
    finally:
        ds.close()


def test_another_projection_reads_the_footers_and_says_why(bucket, fault_proxy, tmp_path,
                                                           monkeypatch) -> None:
    name, sizes = bucket
    proxy = fault_proxy()
    monkeypatch.setenv("S3_ENDPOINT_URL", proxy.endpoint)
    stream = Stream(remote=f"s3://{name}/corpus", local=tmp_path / "c", format="parquet",
                    columns=["id", "text"])
    with pytest.warns(UserWarning, match=r"indexes the columns all, this stream reads "
                                         r"\['id', 'text'\].*--columns"):
        stream.index_file()
    assert _per_file(proxy, sizes) == {path: 1 for path in sizes}
    ran = run_cli("parquet-index", f"s3://{name}/corpus", "--columns", "id,text")
    assert ran.code == 0 and "columns id,text" in ran.out, ran.err
    proxy.log.clear()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        Stream(remote=f"s3://{name}/corpus", local=tmp_path / "d", format="parquet",
               columns=["id", "text"]).index_file()
    assert _per_file(proxy, sizes) == Counter()


def test_a_file_replaced_after_publishing_is_refused_by_name(bucket, s3_server, tmp_path
                                                             ) -> None:
    import io

    import pyarrow.parquet as pq

    name, _ = bucket
    out = io.BytesIO()
    pq.write_table(table(10_000, ROWS), out, row_group_size=GROUP)  # same shape, other rows
    s3_server.client().put_object(Bucket=name, Key="corpus/part-001.parquet",
                                  Body=out.getvalue())
    ds = StreamingDataset(streams=[Stream(remote=f"s3://{name}/corpus", local=tmp_path / "c",
                                          format="parquet")], batch_size=8)
    try:
        assert_sample(ds[0])  # part-000 is as published
        with pytest.raises(ParquetFileError, match=r"part-001\.parquet: its footer changed"
                                                   r".*streaming parquet-index"):
            ds[ROWS]
    finally:
        ds.close()


def test_a_local_folder_reads_its_files_in_place_from_the_readers_path(corpus, tmp_path
                                                                        ) -> None:
    import shutil

    folder = tmp_path / "moved-here"
    shutil.copytree(corpus, tmp_path / "published-there")
    ran = run_cli("parquet-index", tmp_path / "published-there")
    assert ran.code == 0, ran.err
    (tmp_path / "published-there").rename(folder)  # published on one path, read on another
    ds = StreamingDataset(streams=[Stream(remote=str(folder), local=tmp_path / "c",
                                          format="parquet")], batch_size=8)
    try:
        index = json.loads((tmp_path / "c" / "index.json").read_bytes())
        assert index["parquet"]["published"] == PUBLISHED_NAME
        assert {s["in_place"] for s in index["shards"]} == {os.path.abspath(folder)}
        assert _ids(ds) == list(range(FILES * ROWS))
    finally:
        ds.close()


def test_a_damaged_published_index_is_a_typed_error_naming_it(bucket, s3_server, tmp_path
                                                              ) -> None:
    name, _ = bucket
    s3_server.client().put_object(Bucket=name, Key=f"corpus/{PUBLISHED_NAME}", Body=b"{oops")
    with pytest.raises(ParquetFileError, match=rf"{PUBLISHED_NAME}: not a published Parquet "
                                               r"index.*streaming parquet-index"):
        Stream(remote=f"s3://{name}/corpus", local=tmp_path / "c", format="parquet"
               ).index_file()


def test_packing_reads_token_lengths_before_any_footer_is_cached(bucket, tmp_path) -> None:
    from streaming.dataset.lengths import load_lengths
    from tests.parquet.helpers import tokens_of

    name, _ = bucket
    ds = StreamingDataset(streams=[Stream(remote=f"s3://{name}/corpus", local=tmp_path / "c",
                                          format="parquet")], batch_size=8)
    try:
        assert not list((tmp_path / "c").glob("*.footer"))
        lengths = load_lengths(ds, "tokens")
        assert lengths.tolist() == [len(tokens_of(i)) for i in range(FILES * ROWS)]
    finally:
        ds.close()


def test_a_published_index_over_the_index_cap_is_refused_as_it_arrives(bucket, s3_server,
                                                                       tmp_path, monkeypatch
                                                                       ) -> None:
    from streaming.errors import IndexFileError

    name, _ = bucket
    s3_server.client().put_object(Bucket=name, Key=f"corpus/{PUBLISHED_NAME}",
                                  Body=b"x" * (3 << 20))
    monkeypatch.setenv("STREAMING_MAX_INDEX_BYTES", str(1 << 20))
    with pytest.raises(IndexFileError, match=rf"{PUBLISHED_NAME}.*STREAMING_MAX_INDEX_BYTES"):
        Stream(remote=f"s3://{name}/corpus", local=tmp_path / "c", format="parquet"
               ).index_file()


FETCH_ALL = """
import json
import sys
import threading
from pathlib import Path

from streaming.stream import Stream

stream = Stream(remote=sys.argv[1], local=sys.argv[2], format="parquet")
names = [s["raw_data"]["basename"] for s in json.loads(stream.index_file().read_bytes())["shards"]]
out = Path(sys.argv[3])
out.mkdir(parents=True)
gate = threading.Barrier(len(names))


def fetch(name):
    gate.wait(timeout=60)
    stream.fetch(name, out / name)


threads = [threading.Thread(target=fetch, args=(name,)) for name in names]
for thread in threads:
    thread.start()
for thread in threads:
    thread.join(timeout=120)
"""


def test_row_groups_fetched_at_once_on_a_node_read_each_footer_once(bucket, fault_proxy,
                                                                     tmp_path) -> None:
    name, sizes = bucket
    proxy = fault_proxy(delay=0.2)  # each footer read is under way while the others start
    env = {**os.environ, "S3_ENDPOINT_URL": proxy.endpoint}
    cache = tmp_path / "c"
    Stream(remote=f"s3://{name}/corpus", local=cache, format="parquet").index_file()
    runs = [subprocess.Popen([sys.executable, "-c", FETCH_ALL, f"s3://{name}/corpus",
                              str(cache), str(tmp_path / f"out{k}")], env=env, cwd=ROOT,
                             stderr=subprocess.PIPE, text=True) for k in range(2)]
    for run in runs:
        _, err = run.communicate(timeout=120)
        assert run.returncode == 0, err
    assert len(list((tmp_path / "out0").iterdir())) == FILES * ROWS // GROUP
    tails = {path: proxy.header_values("GET", path).count(
        f"bytes={max(size - (64 << 10), 0)}-{size - 1}") for path, size in sizes.items()}
    assert tails == {path: 1 for path in sizes}  # two processes x 3 row groups a file: 1 read
