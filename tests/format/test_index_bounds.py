"""Index values are checked against sane bounds and against the shard files before anything is
allocated from them: absurd sizes and sample counts are IndexFileErrors, not OverflowError or
MemoryError, and a local dataset whose index disagrees with its shards fails at construction."""

from __future__ import annotations

import json
import resource
import shutil
import time
from pathlib import Path

import pytest

from streaming import StreamingDataset
from streaming.dataset.local_dataset import LocalDataset
from streaming.errors import IndexFileError, ShardCorruptError, StreamingError
from streaming.format import parse_index
from writers.mds import MDSWriter


def _write(out: Path, compression: str | None = None, shards: int = 3,
           hashes: list[str] | None = None) -> Path:
    with MDSWriter(columns={"id": "int", "text": "str"}, out=out, compression=compression,
                   size_limit=400, hashes=hashes) as writer:
        for i in range(shards * 12):
            writer.write({"id": i, "text": f"sample {i}"})
    return out


def _edit(src: Path, dst: Path, edit) -> Path:
    shutil.copytree(src, dst)
    document = json.loads((dst / "index.json").read_text())
    edit(document["shards"][1])
    (dst / "index.json").write_text(json.dumps(document))
    return dst


@pytest.fixture(scope="module")
def dataset(tmp_path_factory) -> Path:
    return _write(tmp_path_factory.mktemp("bounds") / "raw")


def _set(path: str, value):
    def edit(shard: dict) -> None:
        *keys, last = path.split(".")
        target = shard
        for key in keys:
            target = target[key]
        target[last] = value
    return edit


@pytest.mark.parametrize("path,value", [
    ("samples", 2**63), ("samples", 2**64 + 5), ("samples", 2**32),
    ("raw_data.bytes", 2**63), ("raw_data.bytes", 2**32), ("raw_data.bytes", 3),
    ("zip_data", {"basename": "shard.00001.mds.zstd", "bytes": 2**63, "hashes": {}}),
])
def test_out_of_range_values_are_index_errors(dataset, tmp_path, path, value):
    def edit(shard: dict) -> None:
        if path == "zip_data":
            shard["compression"] = "zstd"
        _set(path, value)(shard)
    root = _edit(dataset, tmp_path / "ds", edit)
    with pytest.raises(IndexFileError, match="shard 1"):
        parse_index((root / "index.json").read_bytes(), source="x")


@pytest.mark.parametrize("count", [2**32 - 1, 10**8])
def test_sample_count_beyond_what_the_file_can_hold_fails_without_allocating(
        dataset, tmp_path, count):
    root = _edit(dataset, tmp_path / "ds", _set("samples", count))
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    started = time.monotonic()
    with pytest.raises(IndexFileError, match="samples"):
        StreamingDataset(local=str(root), batch_size=4)
    with pytest.raises(IndexFileError, match="samples"):
        LocalDataset(root)
    assert time.monotonic() - started < 30
    grown_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before
    assert grown_kib < 200_000


def test_sample_count_disagreeing_with_the_shard_fails_at_construction(dataset, tmp_path):
    root = _edit(dataset, tmp_path / "ds", lambda shard: shard.update(samples=shard["samples"]
                                                                       - 1))
    with pytest.raises(ShardCorruptError, match=r"shard\.00001\.mds"):
        LocalDataset(root)
    with pytest.raises(ShardCorruptError, match=r"shard\.00001\.mds"):
        StreamingDataset(local=str(root), batch_size=4)


def test_missing_compressed_shard_is_a_typed_error_naming_it(tmp_path):
    root = _write(tmp_path / "zstd", compression="zstd")
    (root / "shard.00001.mds.zstd").unlink()
    with pytest.raises(StreamingError, match=r"shard\.00001\.mds") as caught:
        dataset = LocalDataset(root)
        [dataset[i] for i in range(len(dataset))]
    assert isinstance(caught.value, FileNotFoundError)  # still caught by old handlers


def test_truncated_zstd_read_in_place_names_sizes(tmp_path):
    root = _write(tmp_path / "zstd", compression="zstd")
    shard = root / "shard.00001.mds.zstd"
    full = shard.stat().st_size
    shard.write_bytes(shard.read_bytes()[: full // 2])
    with pytest.raises(ShardCorruptError, match=rf"{full // 2}.*{full}|{full}.*{full // 2}"):
        dataset = StreamingDataset(local=str(root), batch_size=4)
        list(dataset)


def test_zstd_truncated_after_construction_names_sizes(tmp_path):
    root = _write(tmp_path / "zstd", compression="zstd")
    dataset = StreamingDataset(local=str(root), batch_size=4)
    shard = root / "shard.00001.mds.zstd"
    full = shard.stat().st_size
    shard.write_bytes(shard.read_bytes()[: full // 2])
    with pytest.raises(ShardCorruptError, match=rf"{full // 2} bytes, the index says {full}"):
        list(dataset)


def test_two_shards_naming_one_file_is_an_index_error(dataset, tmp_path):
    root = _edit(dataset, tmp_path / "ds",
                 lambda shard: shard["raw_data"].update(basename="shard.00000.mds"))
    with pytest.raises(IndexFileError, match=r"also named by shard 0"):
        LocalDataset(root)


def test_a_file_replaced_under_an_open_reader_is_refused(dataset, tmp_path):
    from streaming.format import ShardReader

    shutil.copytree(dataset, tmp_path / "ds")
    path = tmp_path / "ds" / "shard.00001.mds"
    reader = ShardReader(path)
    replacement = tmp_path / "other"
    replacement.write_bytes(path.read_bytes())
    replacement.replace(path)
    with pytest.raises(ShardCorruptError, match="replaced"):
        reader.fileno()


def test_an_empty_compressed_shard_is_checked_when_hashes_are_asked(tmp_path):
    root = _write(tmp_path / "zstd", compression="zstd", hashes=["sha1"])
    document = json.loads((root / "index.json").read_text())
    document["shards"][1]["samples"] = 0
    (root / "index.json").write_text(json.dumps(document))
    assert len(LocalDataset(root)) < 36  # without hashes, the index is taken at its word
    with pytest.raises(ShardCorruptError, match=r"shard\.00001\.mds: header says \d+ samples"):
        LocalDataset(root, validate_hash="sha1")
