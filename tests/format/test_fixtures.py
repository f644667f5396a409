"""Every reference dataset decodes exactly as expected.json says, through our format layer."""

from __future__ import annotations

import json

import pytest

from streaming.errors import UnsafeTypeError
from streaming.format import ShardReader, read_index, validate_file
from tests.format.helpers import expected_datasets, matches, raw_shard_paths, read_all

DECODABLE = [
    "all_encodings", "llm_raw", "llm_zstd", "llm_zstd7", "llm_gz", "llm_bz2", "llm_br",
    "llm_snappy", "llm_hashed", "images", "oversize", "merged",
]


@pytest.mark.parametrize("name", DECODABLE)
def test_dataset_decodes_as_expected(reference_fixtures, tmp_path, name):
    want = expected_datasets(reference_fixtures)[name]
    index = read_index(reference_fixtures / name)
    assert index.columns == want["columns"]
    assert index.num_samples == want["num_samples"]
    codec_name = want["writer_args"].get("compression")
    assert set(index.compression) == {codec_name}
    samples = read_all(reference_fixtures / name, tmp_path)
    assert len(samples) == len(want["samples"])
    for i, (got, expected) in enumerate(zip(samples, want["samples"])):
        assert set(got) == set(expected), f"sample {i}"
        for column, description in expected.items():
            assert matches(description, got[column]), f"{name} sample {i} column {column}"


def test_hashes_verify_for_raw_and_compressed_files(reference_fixtures, tmp_path):
    root = reference_fixtures / "llm_hashed"
    index = read_index(root)
    algos = ["md5", "sha1", "xxh3_64", "xxh64"]
    for i, raw in enumerate(raw_shard_paths(index, tmp_path)):
        shard = index.shards[i]
        assert shard["hashes"] == algos
        zipped = shard["zip_data"]
        validate_file(index.zip_path(i), int(index.zip_bytes[i]), zipped["hashes"], algos)
        validate_file(raw, int(index.raw_bytes[i]), shard["raw_data"]["hashes"], algos)


def test_oversize_has_an_empty_first_shard(reference_fixtures):
    index = read_index(reference_fixtures / "oversize")
    assert index.samples_per_shard.tolist() == [0, 1, 4, 1, 6]
    with ShardReader(index.raw_path(0), index.codec(), expected_samples=0) as shard:
        assert len(shard) == 0
        assert list(shard) == []
        assert shard.offsets.tolist() == [shard.path.stat().st_size]


def test_merged_index_points_into_the_parts(reference_fixtures):
    index = read_index(reference_fixtures / "merged")
    assert index.num_shards == 8
    assert all(name.split("/")[0] in {"part0", "part1", "part2"} for name in index.basenames)
    assert all(index.zip_path(i).is_file() for i in range(index.num_shards))


def test_pickle_is_refused_by_default_naming_the_column(reference_fixtures, tmp_path):
    root = reference_fixtures / "pickle"
    with pytest.raises(UnsafeTypeError, match="'obj'"):
        read_all(root, tmp_path)
    index = read_index(root)
    with pytest.raises(UnsafeTypeError, match="obj"):
        ShardReader(index.raw_path(0))


def test_pickle_is_readable_when_allowed(reference_fixtures, tmp_path):
    samples = read_all(reference_fixtures / "pickle", tmp_path, allow_unsafe_types=True)
    assert len(samples) == 10
    for sample in samples:
        # expected.json's note writes [1, 2]; the pickled bytes hold a tuple (opcode TUPLE2).
        assert sample["obj"] == {"k": sample["id"], "t": (1, 2)}


def test_embedded_config_matches_index(reference_fixtures, tmp_path):
    for name in ("all_encodings", "llm_gz", "images"):
        index = read_index(reference_fixtures / name)
        for i, path in enumerate(raw_shard_paths(index, tmp_path / name)):
            with ShardReader(path, index.codec()) as shard:
                entry = {k: v for k, v in index.shards[i].items()
                         if k not in ("raw_data", "zip_data", "samples")}
                assert shard.config == entry
                assert json.dumps(shard.config, sort_keys=True) == json.dumps(entry, sort_keys=True)
