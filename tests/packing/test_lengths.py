"""Writer-recorded lengths, the header scan, merge_index and reference-reader compatibility."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streaming.dataset.lengths import load_lengths
from streaming.dataset.local_dataset import LocalDataset
from streaming.errors import FormatError, IndexFileError, PlanError
from streaming.format.index import LENGTHS_KEY, merge_index, read_index
from streaming.format.value_length import value_length
from tests.support.datasets import write_tokens
from writers.mds import MDSWriter


def reference_style_read(root: Path) -> list[int]:
    """What an MDS v2 reader takes from index.json: 'version' and the shard entries' keys."""
    index = json.loads((root / "index.json").read_text())
    assert index["version"] == 2
    known = {"column_encodings", "column_names", "column_sizes", "compression", "format",
             "hashes", "raw_data", "samples", "size_limit", "version", "zip_data"}
    for shard in index["shards"]:
        assert set(shard) == known  # no key inside a shard entry (reference readers break)
    return [shard["samples"] for shard in index["shards"]]


def test_writer_records_side_files_and_index_key(tmp_path: Path) -> None:
    sizes = write_tokens(tmp_path / "d", 200, hashes=["xxh64"], compression="zstd")
    index = read_index(tmp_path / "d")
    spec = index.extra[LENGTHS_KEY]
    assert spec["column"] == "tokens" and spec["dtype"] == "<u4"
    assert len(spec["files"]) == index.num_shards > 1
    for entry, count in zip(spec["files"], index.samples_per_shard.tolist()):
        path = tmp_path / "d" / entry["basename"]
        assert path.stat().st_size == entry["bytes"] == 4 * count
        assert set(entry["hashes"]) == {"xxh64"}
    assert sum(reference_style_read(tmp_path / "d")) == 200
    np.testing.assert_array_equal(load_lengths(tmp_path / "d"), sizes)
    np.testing.assert_array_equal(load_lengths(LocalDataset(tmp_path / "d"), "tokens"), sizes)


def test_fixture_readers_ignore_top_level_keys(reference_fixtures: Path, tmp_path: Path) -> None:
    src = reference_fixtures / "llm_raw"
    out = tmp_path / "copy"
    out.mkdir()
    for path in src.iterdir():
        (out / path.name).write_bytes(path.read_bytes())
    document = json.loads((src / "index.json").read_text())
    document[LENGTHS_KEY] = {"column": "tokens", "dtype": "<u4", "files": []}
    (out / "index.json").write_text(json.dumps(document, sort_keys=True))
    assert reference_style_read(out) == reference_style_read(src)
    assert read_index(out).num_samples == read_index(src).num_samples


def test_callable_lengths_and_bad_specs(tmp_path: Path) -> None:
    sizes = write_tokens(tmp_path / "f", 50, lengths=lambda s: 2 * len(s["tokens"]))
    spec = read_index(tmp_path / "f").extra[LENGTHS_KEY]
    assert spec["column"] is None and "lambda" in spec["function"]
    np.testing.assert_array_equal(load_lengths(tmp_path / "f"), 2 * sizes)
    # asking for a column the writer did not record scans the headers instead
    np.testing.assert_array_equal(load_lengths(tmp_path / "f", "tokens"), sizes)
    with pytest.raises(FormatError, match="no such column"):
        MDSWriter(columns={"a": "int"}, out=tmp_path / "g", lengths="b")
    with pytest.raises(PlanError, match="no column"):
        load_lengths(tmp_path / "f", "nope")


def test_no_recorded_lengths_needs_a_column(tmp_path: Path) -> None:
    write_tokens(tmp_path / "n", 20, lengths=None)
    with pytest.raises(PlanError, match="records no sample lengths"):
        load_lengths(tmp_path / "n")
    first = load_lengths(tmp_path / "n", "tokens")
    assert len(list((tmp_path / "n").glob(".lengths.*.u32"))) == 1  # cached once
    np.testing.assert_array_equal(load_lengths(tmp_path / "n", "tokens"), first)


def test_bad_side_file_is_a_typed_error(tmp_path: Path) -> None:
    write_tokens(tmp_path / "b", 30)
    side = sorted((tmp_path / "b").glob("*.lengths"))[0]
    side.write_bytes(side.read_bytes()[:-4])
    with pytest.raises(Exception, match="lengths file"):
        load_lengths(tmp_path / "b")
    document = json.loads((tmp_path / "b" / "index.json").read_text())
    document[LENGTHS_KEY]["files"].pop()
    (tmp_path / "b" / "index.json").write_text(json.dumps(document))
    with pytest.raises(IndexFileError, match="one file per shard"):
        load_lengths(tmp_path / "b")


def test_merge_index_carries_lengths_when_parts_agree(tmp_path: Path) -> None:
    a = write_tokens(tmp_path / "m" / "part0", 40, seed=1)
    b = write_tokens(tmp_path / "m" / "part1", 30, seed=2, start=40)
    merge_index(tmp_path / "m")
    spec = read_index(tmp_path / "m").extra[LENGTHS_KEY]
    assert spec["files"][0]["basename"].startswith("part0/")
    np.testing.assert_array_equal(load_lengths(tmp_path / "m"), np.concatenate([a, b]))
    write_tokens(tmp_path / "m" / "part2", 5, lengths=None)
    merge_index(tmp_path / "m")
    assert LENGTHS_KEY not in read_index(tmp_path / "m").extra
    assert sum(reference_style_read(tmp_path / "m")) == 75


ENCODINGS = {"a": "ndarray", "b": "ndarray:uint16", "c": "str", "d": "bytes", "e": "uint16",
             "f": "json", "g": "ndarray:int64:2,3"}


@settings(max_examples=15, deadline=None)
@given(st.lists(st.tuples(st.integers(1, 300), st.integers(1, 3), st.text(max_size=20)),
                min_size=1, max_size=40))
def test_header_scan_equals_decoded_lengths(fresh_dir, rows) -> None:
    out = fresh_dir()
    dtypes = ["uint8", "float32", "int64"]
    with MDSWriter(columns=ENCODINGS, out=out, size_limit=1 << 12, exist_ok=True) as writer:
        for n, ndim, text in rows:
            shape = (n,) if ndim == 1 else (n, ndim)
            writer.write({"a": np.zeros(shape, dtypes[ndim - 1]), "b": np.ones(n, np.uint16),
                          "c": text, "d": text.encode("utf-16"), "e": np.uint16(n),
                          "f": list(range(ndim)), "g": np.zeros((2, 3), np.int64)})
    ds = LocalDataset(out)
    for column in ENCODINGS:
        expected = [value_length(ds[i][column]) for i in range(len(ds))]
        np.testing.assert_array_equal(load_lengths(ds, column), expected, err_msg=column)


def test_streaming_dataset_fetches_side_files_from_its_remote(tmp_path: Path) -> None:
    from streaming.dataset.streaming_dataset import StreamingDataset

    sizes = write_tokens(tmp_path / "remote", 80, compression="zstd")
    ds = StreamingDataset(remote=str(tmp_path / "remote"), local=str(tmp_path / "cache"))
    np.testing.assert_array_equal(load_lengths(ds, "tokens"), sizes)
    assert len(list((tmp_path / "cache").glob("*.lengths"))) == read_index(ds.streams[0]
                                                                         .index_file()).num_shards
    assert not list((tmp_path / "cache").glob("*.mds"))  # no shard needed for the lengths
