"""index.json: byte-exact writing and merging, arrays, and typed errors for bad documents."""

from __future__ import annotations

import copy
import json
import shutil

import numpy as np
import pytest

from streaming.errors import IndexFileError, IndexNotFoundError, UnknownEncodingError
from streaming.format import merge_index, parse_index, read_index, write_index

DATASETS = ["all_encodings", "llm_raw", "llm_zstd7", "llm_hashed", "images", "oversize", "pickle"]


@pytest.mark.parametrize("name", DATASETS)
def test_write_index_is_byte_identical(reference_fixtures, tmp_path, name):
    original = (reference_fixtures / name / "index.json").read_bytes()
    written = write_index(tmp_path, json.loads(original)["shards"])
    assert written == tmp_path / "index.json"
    assert written.read_bytes() == original
    assert [p.name for p in tmp_path.iterdir()] == ["index.json"]  # no temp file left


def test_extra_top_level_keys_roundtrip(reference_fixtures, tmp_path):
    shards = read_index(reference_fixtures / "llm_raw").shards
    write_index(tmp_path, shards, extra={"x_token_counts": "tokens.npy"})
    index = read_index(tmp_path)
    assert index.extra == {"x_token_counts": "tokens.npy"} and index.num_samples == 400
    with pytest.raises(ValueError, match="shards"):
        write_index(tmp_path, shards, extra={"shards": []})


def test_merge_index_reproduces_reference(reference_fixtures, tmp_path):
    out = tmp_path / "merged"
    shutil.copytree(reference_fixtures / "merged", out)
    (out / "index.json").unlink()
    merge_index(out)
    assert (out / "index.json").read_bytes() == (
        reference_fixtures / "merged" / "index.json"
    ).read_bytes()
    merge_index(out, [out / "part0", out / "part1" / "index.json", out / "part2"])
    assert read_index(out).num_samples == 180


def test_merge_index_sorts_parts_naturally(reference_fixtures, tmp_path):
    for name in ("part10", "part2", "part1"):
        shutil.copytree(reference_fixtures / "merged" / "part0", tmp_path / name)
    merge_index(tmp_path)
    prefixes = [b.split("/")[0] for b in read_index(tmp_path).basenames]
    assert prefixes == ["part1", "part1", "part2", "part2", "part10", "part10"]


def test_merge_index_errors(tmp_path, reference_fixtures):
    with pytest.raises(IndexNotFoundError, match=str(tmp_path)):
        merge_index(tmp_path)
    outside = tmp_path / "elsewhere"
    shutil.copytree(reference_fixtures / "merged" / "part0", outside)
    (tmp_path / "out").mkdir()
    with pytest.raises(IndexFileError, match="not inside"):
        merge_index(tmp_path / "out", [outside])


def test_arrays_and_locate(reference_fixtures):
    index = read_index(reference_fixtures / "oversize")
    assert index.num_shards == 5 and index.num_samples == 12
    assert index.samples_per_shard.dtype == np.int64
    assert index.raw_bytes.tolist() == [191, 3207, 295, 3207, 347]
    assert index.zip_bytes.tolist() == [0] * 5
    assert index.zip_basenames == [None] * 5
    shard, row = index.locate(np.array([0, 1, 4, 5, 11]))
    assert shard.tolist() == [1, 2, 2, 3, 4] and row.tolist() == [0, 0, 3, 0, 5]
    with pytest.raises(IndexError):
        index.locate(12)
    zipped = read_index(reference_fixtures / "llm_zstd7")
    assert set(zipped.compression) == {"zstd:7"}
    assert zipped.zip_basenames[0] == "shard.00000.mds.zstd"
    assert (zipped.zip_bytes > 0).all()


@pytest.fixture
def document(reference_fixtures):
    return json.loads((reference_fixtures / "llm_zstd" / "index.json").read_text())


def _parse(doc):
    return parse_index(json.dumps(doc), source="/data/x/index.json")


def _mutated(document, change):
    doc = copy.deepcopy(document)
    change(doc)
    return doc


BAD = {
    "wrong version": (lambda d: d.update(version=1), "version"),
    "no shards": (lambda d: d.pop("shards"), "shards"),
    "shard version": (lambda d: d["shards"][1].update(version=3), "shard 1"),
    "format": (lambda d: d["shards"][0].update(format="orc"), "supported: mds"),
    "missing key": (lambda d: d["shards"][0].pop("size_limit"), "size_limit"),
    "negative samples": (lambda d: d["shards"][2].update(samples=-1), "shard 2"),
    "bool samples": (lambda d: d["shards"][2].update(samples=True), "samples"),
    "negative bytes": (lambda d: d["shards"][0]["raw_data"].update(bytes=-5), "bytes"),
    "dotdot": (lambda d: d["shards"][3]["raw_data"].update(basename="../e.mds"), "'../e.mds'"),
    "inner dotdot": (lambda d: d["shards"][3]["zip_data"].update(basename="a/../../x"), "../x"),
    "absolute": (lambda d: d["shards"][0]["raw_data"].update(basename="/etc/passwd"), "absolute"),
    "drive": (lambda d: d["shards"][0]["raw_data"].update(basename="C:/x.mds"), "absolute"),
    "backslash": (lambda d: d["shards"][0]["raw_data"].update(basename="..\\x.mds"), "backslash"),
    "dot": (lambda d: d["shards"][0]["raw_data"].update(basename="."), "dataset folder"),
    "codec": (lambda d: d["shards"][0].update(compression="lz4"), "unknown compression 'lz4'"),
    "codec level": (lambda d: d["shards"][0].update(compression="zstd:99"), "zstd:99"),
    "zip missing": (lambda d: d["shards"][0].update(zip_data=None), "zip_data"),
    "sizes": (lambda d: d["shards"][0].update(column_sizes=[4, None, None]), "size"),
    "schema": (lambda d: d["shards"][1].update(column_names=["id", "text", "toks"]), "differ"),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_documents_raise_naming_file_and_shard(document, case):
    change, message = BAD[case]
    with pytest.raises(IndexFileError) as info:
        _parse(_mutated(document, change))
    assert "/data/x/index.json" in str(info.value)
    assert message in str(info.value)


def test_unknown_encoding_in_index(document):
    doc = _mutated(document, lambda d: d["shards"][0].update(column_encodings=["int", "str", "x"]))
    with pytest.raises(UnknownEncodingError, match=r"index\.json.*shard 0.*'x'"):
        _parse(doc)


def test_truncated_wrong_and_missing_files(tmp_path, reference_fixtures):
    text = (reference_fixtures / "llm_raw" / "index.json").read_bytes()
    (tmp_path / "index.json").write_bytes(text[: len(text) // 2])
    with pytest.raises(IndexFileError, match=r"index\.json.*JSON"):
        read_index(tmp_path)
    (tmp_path / "index.json").write_bytes(b"[1, 2]")
    with pytest.raises(IndexFileError, match="object"):
        read_index(tmp_path / "index.json")
    (tmp_path / "index.json").write_bytes(b'{"version": "2", "shards": []}')
    with pytest.raises(IndexFileError, match="version"):
        read_index(tmp_path)
    with pytest.raises(IndexNotFoundError, match="nowhere") as info:
        read_index(tmp_path / "nowhere")
    assert isinstance(info.value, FileNotFoundError)


def test_empty_dataset_and_merged_basenames_are_fine():
    index = parse_index({"shards": [], "version": 2}, source="mem")
    assert index.num_samples == 0 and index.num_shards == 0 and index.columns == {}
    assert index.locate(np.array([], np.int64))[0].size == 0


def test_a_checked_mds_entry_names_its_files(reference_fixtures):
    from streaming.format.index_entries import CheckedShard
    from streaming.format.index_shard import check_mds_shard

    shard = json.loads((reference_fixtures / "llm_zstd7" / "index.json").read_text())["shards"][0]
    checked = check_mds_shard(shard, 0, "index.json", set())
    assert checked == CheckedShard(
        raw_name=shard["raw_data"]["basename"], raw_size=shard["raw_data"]["bytes"],
        zip_name=shard["zip_data"]["basename"], zip_size=shard["zip_data"]["bytes"], codec=None)
