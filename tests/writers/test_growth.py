"""MDSWriter's mode="append" and mode="overwrite", locally and straight to S3 (loopback moto):
new names never collide, the index is published last, readers of the old index keep their
snapshot, a crash leaves the old dataset whole, and a cache keeps the shards it holds."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from streaming.dataset.local_dataset import LocalDataset
from streaming.errors import ArgumentError, DatasetMismatchError
from writers.mds import MDSWriter

COLUMNS = {"id": "int", "text": "str", "tokens": "ndarray:int32"}


def rows(start: int, n: int) -> list[dict]:
    return [{"id": i, "text": f"row {i} " * (i % 7 + 1),
             "tokens": np.arange(i % 5 + 1, dtype=np.int32) + i} for i in range(start, start + n)]


def write(out, samples: list[dict], **options) -> None:
    options.setdefault("size_limit", 2048)
    options.setdefault("columns", COLUMNS)
    with MDSWriter(out=out, **options) as writer:
        for sample in samples:
            writer.write(sample)


def ids(out) -> list[int]:
    dataset = LocalDataset(out)
    return [int(dataset[i]["id"]) for i in range(len(dataset))]


def files(folder: Path) -> dict[str, bytes]:
    return {p.relative_to(folder).as_posix(): p.read_bytes()
            for p in sorted(folder.rglob("*")) if p.is_file()}


def shard_names(folder: Path) -> list[str]:
    index = json.loads((folder / "index.json").read_text())
    return [s["raw_data"]["basename"] for s in index["shards"]]


def test_append_adds_shards_under_new_names_and_keeps_old_files(tmp_path: Path):
    out = tmp_path / "ds"
    write(out, rows(0, 60))
    before = files(out)
    old_names = shard_names(out)
    snapshot = LocalDataset(out)  # opened before the append: keeps reading its own index
    write(out, rows(60, 40), mode="append")
    after = files(out)
    assert all(after[name] == data for name, data in before.items() if name != "index.json")
    names = shard_names(out)
    assert names[:len(old_names)] == old_names and len(set(names)) == len(names)
    assert ids(out) == list(range(100))
    assert [int(snapshot[i]["id"]) for i in range(len(snapshot))] == list(range(60))
    # The appended dataset equals one written in a single pass, sample for sample.
    write(tmp_path / "one", rows(0, 100))
    whole = LocalDataset(tmp_path / "one")
    grown = LocalDataset(out)
    for i in range(100):
        assert grown[i]["text"] == whole[i]["text"]
        assert np.array_equal(grown[i]["tokens"], whole[i]["tokens"])


def test_append_to_nothing_creates_and_mode_is_checked(tmp_path: Path):
    write(tmp_path / "new", rows(0, 5), mode="append")
    assert ids(tmp_path / "new") == list(range(5))
    with pytest.raises(ArgumentError, match="mode must be one of"):
        MDSWriter(out=tmp_path / "x", columns=COLUMNS, mode="grow")


def test_crash_in_the_middle_of_an_append_leaves_the_old_dataset(tmp_path: Path):
    out = tmp_path / "ds"
    write(out, rows(0, 30))
    index = (out / "index.json").read_bytes()
    with pytest.raises(RuntimeError, match="boom"), MDSWriter(
            out=out, columns=COLUMNS, size_limit=2048, mode="append") as writer:
        for sample in rows(30, 40):
            writer.write(sample)
        raise RuntimeError("boom")
    assert (out / "index.json").read_bytes() == index
    assert ids(out) == list(range(30))
    write(out, rows(30, 10), mode="append")  # the next append reuses the orphans' names
    assert ids(out) == list(range(40))


@pytest.mark.parametrize(("change", "message"), [
    ({"columns": {**COLUMNS, "text": "bytes"}}, r"column 'text' is 'str' there, 'bytes' here"),
    ({"columns": {"id": "int"}}, r"column 'text' only in the dataset"),
    ({"compression": "zstd"}, r"compression is None there, 'zstd' here"),
])
def test_append_with_another_schema_names_the_difference(tmp_path: Path, change, message):
    out = tmp_path / "ds"
    write(out, rows(0, 10))
    before = files(out)
    with pytest.raises(DatasetMismatchError, match=message):
        MDSWriter(out=out, mode="append", **{"columns": COLUMNS, **change})
    assert files(out) == before


def test_overwrite_replaces_after_publishing(tmp_path: Path):
    out = tmp_path / "ds"
    write(out, rows(0, 50), compression="zstd")
    old = shard_names(out)
    (out / "notes.txt").write_text("mine")
    write(out, rows(500, 20), columns={"id": "int"}, mode="overwrite")
    assert ids(out) == list(range(500, 520))
    assert not set(shard_names(out)) & set(old)
    assert sorted(files(out)) == sorted(["index.json", "notes.txt", *shard_names(out)])


def test_an_overwrite_that_fails_before_publishing_leaves_the_old_dataset(tmp_path: Path):
    out = tmp_path / "ds"
    write(out, rows(0, 30))
    before = files(out)
    with pytest.raises(RuntimeError, match="boom"), MDSWriter(
            out=out, columns={"id": "int"}, size_limit=256, mode="overwrite") as writer:
        for sample in rows(100, 40):
            writer.write({"id": sample["id"]})
        raise RuntimeError("boom")
    assert {name: data for name, data in files(out).items() if name in before} == before
    assert ids(out) == list(range(30))


@pytest.mark.slow
def test_append_and_overwrite_straight_to_s3_with_a_cache(s3_env, tmp_path: Path):
    from streaming import StreamingDataset

    url = f"s3://{s3_env.make_bucket()}/grow"
    write(url, rows(0, 60))
    cache = tmp_path / "cache"

    def read_all() -> list[int]:
        dataset = StreamingDataset(remote=url, local=str(cache))
        try:
            return [int(dataset[i]["id"]) for i in range(dataset.num_samples)]
        finally:
            dataset.close()

    assert read_all() == list(range(60))
    cached = {p.name: p.stat() for p in cache.glob("shard.*")}
    assert cached
    write(url, rows(60, 30), mode="append")
    assert read_all() == list(range(90))
    for name, stat in cached.items():  # the cache kept its shards and fetched only new ones
        now = (cache / name).stat()
        assert (now.st_ino, now.st_mtime_ns) == (stat.st_ino, stat.st_mtime_ns)
    with pytest.raises(DatasetMismatchError, match="compression"):
        MDSWriter(out=url, columns=COLUMNS, compression="zstd", mode="append")
    write(url, rows(900, 10), mode="overwrite")
    assert read_all() == list(range(900, 910))
    keys = {o["Key"] for o in s3_env.client().list_objects_v2(
        Bucket=url.split("/")[2])["Contents"]}
    index = json.loads(s3_env.client().get_object(
        Bucket=url.split("/")[2], Key="grow/index.json")["Body"].read())
    assert keys == {"grow/index.json"} | {f"grow/{s['raw_data']['basename']}"
                                          for s in index["shards"]}
