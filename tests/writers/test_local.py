"""LocalDataset: indexing forms, shard bookkeeping, decompression cache, hashes, pickling."""

from __future__ import annotations

import pickle
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch.utils.data

from streaming.dataset.local_dataset import LocalDataset
from streaming.errors import (
    HashMismatchError,
    IndexFileError,
    ObjectNotFoundError,
    ShardCorruptError,
    UnsafeTypeError,
)
from writers.mds import MDSWriter

COLUMNS = {"id": "int", "tokens": "ndarray:int32"}


def _tokens(i: int) -> np.ndarray:
    return np.arange(i % 13 + 1, dtype=np.int32) * i


@pytest.fixture(scope="module")
def dataset_dir(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("local") / "ds"
    with MDSWriter(columns=COLUMNS, out=out, size_limit=1024, hashes=["sha1"]) as writer:
        for i in range(500):
            writer.write({"id": i, "tokens": _tokens(i)})
    return out


@pytest.fixture
def ds(dataset_dir: Path) -> LocalDataset:
    return LocalDataset(dataset_dir)


def test_shard_bookkeeping(ds: LocalDataset):
    assert len(ds) == ds.size == ds.num_samples == 500
    assert ds.samples_per_shard.dtype == np.int64 and len(ds.samples_per_shard) > 10
    assert ds.shard_offsets[0] == 0 and ds.shard_offsets[-1] == 500
    assert np.array_equal(np.diff(ds.shard_offsets), ds.samples_per_shard)
    assert ds.columns == COLUMNS


def test_integer_indexing(ds: LocalDataset):
    for i in [0, 1, 37, 250, 499]:
        sample = ds[i]
        assert sample["id"] == i and np.array_equal(sample["tokens"], _tokens(i))
    assert ds[-1]["id"] == 499 and ds[-500]["id"] == 0
    assert ds[np.int64(7)]["id"] == 7 and ds[np.uint16(8)]["id"] == 8
    for bad in [500, -501, 10**12]:
        with pytest.raises(IndexError, match=str(bad)):
            ds[bad]
    with pytest.raises(TypeError):
        ds[1.5]


def test_every_shard_boundary(ds: LocalDataset):
    for start in ds.shard_offsets[:-1]:
        for i in (start - 1, start):
            if 0 <= i < len(ds):
                assert ds[int(i)]["id"] == i


def test_iteration_in_order(ds: LocalDataset, reference_fixtures: Path, tmp_path: Path):
    assert [s["id"] for s in ds] == list(range(500))
    oversize = LocalDataset(reference_fixtures / "oversize")  # starts with an empty shard
    assert [s["id"] for s in oversize] == [s["id"] for s in oversize[:]]
    assert len(list(oversize)) == 12


def test_slices_and_arrays(ds: LocalDataset):
    assert [s["id"] for s in ds[10:20]] == list(range(10, 20))
    assert [s["id"] for s in ds[::-97]] == list(range(499, -1, -97))
    assert [s["id"] for s in ds[-3:]] == [497, 498, 499]
    assert ds[5:5] == []
    picks = np.array([499, 0, -1, 250, 3])
    assert [s["id"] for s in ds[picks]] == [499, 0, 499, 250, 3]
    assert [s["id"] for s in ds[[1, 2]]] == [1, 2]
    assert ds[np.array([], dtype=np.int64)] == []
    with pytest.raises(IndexError, match="500"):
        ds[[1, 500]]
    with pytest.raises(TypeError):
        ds[np.array([0.5])]


def test_picklable_and_works_in_dataloader_workers(ds: LocalDataset):
    ds[3]  # open a reader first: pickling must still work
    clone = pickle.loads(pickle.dumps(ds))
    assert clone[3]["id"] == 3 and len(clone) == 500


@pytest.mark.slow
def test_dataloader_with_worker_processes(ds: LocalDataset):
    loader = torch.utils.data.DataLoader(ds, batch_size=None, num_workers=2)
    assert sorted(s["id"] for s in loader) == list(range(500))
    batched = torch.utils.data.DataLoader(ds, batch_size=64, num_workers=2, collate_fn=list)
    assert sorted(s["id"] for batch in batched for s in batch) == list(range(500))


def _compressed(tmp_path: Path, hashes=("md5",)) -> Path:
    out = tmp_path / "zipped"
    with MDSWriter(columns=COLUMNS, out=out, size_limit=2048, compression="zstd",
                   hashes=list(hashes)) as writer:
        for i in range(100):
            writer.write({"id": i, "tokens": _tokens(i)})
    return out


def test_compressed_shards_decompress_once_in_place(tmp_path: Path):
    out = _compressed(tmp_path)
    ds = LocalDataset(out)
    assert [s["id"] for s in ds[:]] == list(range(100))
    raw = sorted(out.glob("shard.*.mds"))
    assert len(raw) == ds.index.num_shards
    stamps = [p.stat().st_mtime_ns for p in raw]
    again = LocalDataset(out)
    assert [s["id"] for s in again[:]] == list(range(100))
    assert [p.stat().st_mtime_ns for p in raw] == stamps  # reused, not rewritten


def test_read_only_directory_falls_back_to_a_user_cache(tmp_path: Path, monkeypatch):
    out = _compressed(tmp_path)
    monkeypatch.setattr("streaming.dataset.local_dataset.os.access", lambda path, mode: False)
    monkeypatch.setattr("streaming.dataset.local_dataset.tempfile.gettempdir",
                        lambda: str(tmp_path / "tmp"))
    ds = LocalDataset(out)
    assert [s["id"] for s in ds[:]] == list(range(100))
    assert not list(out.glob("shard.*.mds"))
    cached = list((tmp_path / "tmp").rglob("shard.*.mds"))
    assert len(cached) == ds.index.num_shards


def test_explicit_cache_dir_takes_decompressed_shards(tmp_path: Path, reference_fixtures: Path):
    cache = tmp_path / "cache"
    ds = LocalDataset(reference_fixtures / "llm_zstd", cache_dir=cache)
    assert len(ds[:]) == 400
    assert len(list(cache.glob("shard.*.mds"))) == ds.index.num_shards
    assert not list((reference_fixtures / "llm_zstd").glob("shard.*.mds"))


def test_cache_dir_is_left_alone_when_every_raw_shard_is_there(dataset_dir: Path,
                                                               tmp_path: Path):
    ds = LocalDataset(dataset_dir, cache_dir=tmp_path / "cache")
    assert [s["id"] for s in ds[[0, 499]]] == [0, 499]
    assert not (tmp_path / "cache").exists()  # read in place, nothing copied


def _flip_byte(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[-5] ^= 0xFF
    path.write_bytes(bytes(data))


def test_validate_hash_on_compressed_files(tmp_path: Path):
    out = _compressed(tmp_path, hashes=["md5", "xxh64"])
    _flip_byte(out / "shard.00001.mds.zstd")
    ds = LocalDataset(out, validate_hash="md5")
    assert ds[0]["id"] == 0
    with pytest.raises(HashMismatchError, match=r"shard\.00001\.mds\.zstd"):
        ds[int(ds.shard_offsets[1])]
    with pytest.raises(IndexFileError, match="sha256"):
        LocalDataset(out, validate_hash="sha256")[0]


def test_validate_hash_on_raw_files(tmp_path: Path, dataset_dir: Path):
    copy = tmp_path / "copy"
    shutil.copytree(dataset_dir, copy)
    assert LocalDataset(copy, validate_hash="sha1")[-1]["id"] == 499
    _flip_byte(copy / "shard.00000.mds")
    assert LocalDataset(copy)[0]["id"] == 0  # no validation asked: payload bytes not checked
    with pytest.raises(HashMismatchError, match=r"shard\.00000\.mds"):
        LocalDataset(copy, validate_hash="sha1")[0]


def test_missing_or_truncated_shard_fails_at_construction(tmp_path: Path, dataset_dir: Path):
    missing = tmp_path / "missing"
    shutil.copytree(dataset_dir, missing)
    (missing / "shard.00002.mds").unlink()
    with pytest.raises(ObjectNotFoundError, match=r"shard\.00002\.mds"):
        LocalDataset(missing)
    truncated = tmp_path / "truncated"
    shutil.copytree(dataset_dir, truncated)
    path = truncated / "shard.00003.mds"
    size = path.stat().st_size
    path.write_bytes(path.read_bytes()[:-1])
    with pytest.raises(ShardCorruptError, match=rf"shard\.00003\.mds.*{size - 1}.*{size}"):
        LocalDataset(truncated)


def test_shard_truncated_after_construction_names_it(tmp_path: Path, dataset_dir: Path):
    copy = tmp_path / "copy"
    shutil.copytree(dataset_dir, copy)
    ds = LocalDataset(copy)
    path = copy / "shard.00003.mds"
    path.write_bytes(path.read_bytes()[:-1])
    assert ds[0]["id"] == 0
    with pytest.raises(ShardCorruptError, match=r"shard\.00003\.mds"):
        ds[int(ds.shard_offsets[3])]


def test_pickle_columns_need_allow_unsafe_types(reference_fixtures: Path):
    with pytest.raises(UnsafeTypeError, match="obj"):
        LocalDataset(reference_fixtures / "pickle")
    ds = LocalDataset(reference_fixtures / "pickle", allow_unsafe_types=True)
    obj = ds[3]["obj"]
    assert obj["k"] == 3 and list(obj["t"]) == [1, 2]


def test_split_and_merged_index(tmp_path: Path, reference_fixtures: Path):
    root = tmp_path / "root"
    shutil.copytree(reference_fixtures / "merged", root / "train")
    ds = LocalDataset(root, split="train")
    assert len(ds) == 180 and [s["id"] for s in ds[:3]] == [ds[0]["id"], ds[1]["id"], ds[2]["id"]]
    assert (root / "train" / "part0" / "shard.00000.mds").exists()
