"""The reference implementation's text shard formats (json, csv, tsv, xsv): read what it wrote,
write what it writes byte for byte (fixtures in tests/fixtures/reference-formats)."""

from __future__ import annotations

import gzip
import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from streaming import LocalDataset, StreamingDataset
from streaming.errors import (
    EncodeError,
    FormatError,
    IndexFileError,
    OutputExistsError,
    ShardCorruptError,
    StreamingError,
)
from streaming.format.compression import decompress
from streaming.format.index import merge_index, read_index
from streaming.format.rows import JSONRows, XSVRows
from streaming.format.text_shard import TextShardReader, meta_path
from tests.conftest import REPO
from writers.text_writers import CSVWriter, JSONWriter, TSVWriter, XSVWriter

ROOT = REPO / "tests" / "fixtures" / "reference-formats"
EXPECTED = json.loads((ROOT / "expected.json").read_text())
WRITERS = {cls.__name__: cls for cls in (JSONWriter, CSVWriter, TSVWriter, XSVWriter)}
NAMES = sorted(EXPECTED["datasets"])


def _value(tagged):
    return float(tagged["float"]) if isinstance(tagged, dict) else tagged


def _expected(name: str) -> list[dict]:
    return [{k: _value(v) for k, v in s.items()} for s in EXPECTED["datasets"][name]["samples"]]


def _assert_same(got: list[dict], want: list[dict]) -> None:
    """Equal values and types, floats compared by repr (so -0.0 and 0.0 differ)."""
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert list(g) == list(w) or set(g) == set(w)
        for key in w:
            assert type(g[key]) is type(w[key]), key
            assert repr(g[key]) == repr(w[key]), key


@pytest.mark.parametrize("name", NAMES)
def test_local_dataset_reads_reference_files(name, tmp_path):
    shutil.copytree(ROOT / name, tmp_path / "ds")
    ds = LocalDataset(tmp_path / "ds")
    _assert_same([ds[i] for i in range(len(ds))], _expected(name))


@pytest.mark.parametrize("name", ["csv_gz", "json_zstd_hashed"])
def test_local_dataset_decompresses_text_shards_into_its_cache_dir(name, tmp_path):
    before = sorted(p.name for p in (ROOT / name).rglob("*"))
    ds = LocalDataset(ROOT / name, cache_dir=tmp_path / "cache")
    _assert_same([ds[i] for i in range(len(ds))], _expected(name))
    assert sorted(p.name for p in (ROOT / name).rglob("*")) == before  # nothing written there
    assert list((tmp_path / "cache").rglob("*.meta"))


@pytest.mark.parametrize("name", NAMES)
def test_streaming_dataset_reads_reference_files(name, tmp_path):
    ds = StreamingDataset(remote=str(ROOT / name), local=str(tmp_path / "cache"))
    try:
        want = _expected(name)
        _assert_same(list(ds), want)
        _assert_same([ds[i] for i in range(ds.size)], want)
        batches = list(ds.iter_batches(7))
        assert [v for b in batches for v in b["id"]] == [s["id"] for s in want]
    finally:
        ds.close()


def test_index_names_the_format_and_columns():
    index = read_index(ROOT / "xsv_pipe")
    assert index.format == "xsv"
    assert index.columns == {"id": "int", "name": "str", "score": "float"}
    assert index.codec() == XSVRows(["id", "name", "score"], ["int", "str", "float"], "|", "\r\n")
    assert read_index(ROOT / "json_plain").format == "json"


def _write(name: str, out: Path) -> None:
    spec = EXPECTED["datasets"][name]
    args = {"hashes": [], **spec["writer_args"]}  # the reference's default: no digests
    with WRITERS[spec["writer"]](out=str(out), columns=EXPECTED["columns"], **args) as writer:
        for sample in _expected(name):
            writer.write(sample)


@pytest.mark.parametrize("name", NAMES)
def test_writers_match_the_reference_byte_for_byte(name, tmp_path):
    out = tmp_path / "out"
    _write(name, out)
    ours = sorted(p.name for p in out.iterdir())
    assert ours == sorted(p.name for p in (ROOT / name).iterdir())
    codec = EXPECTED["datasets"][name]["writer_args"].get("compression")
    for file in ours:
        mine, theirs = (out / file).read_bytes(), (ROOT / name / file).read_bytes()
        if codec == "gz" and file.endswith(".gz"):  # gzip headers carry the time of writing
            assert gzip.decompress(mine) == gzip.decompress(theirs), file
        elif codec == "zstd" and file.endswith(".zstd"):  # ours carry the content checksum
            assert decompress("zstd", mine) == decompress("zstd", theirs), file
        elif codec in ("gz", "zstd") and file == "index.json":
            strip = [{k: v for k, v in s.items() if not k.startswith("zip_")}
                     for s in json.loads(mine)["shards"]]
            assert strip == [{k: v for k, v in s.items() if not k.startswith("zip_")}
                             for s in json.loads(theirs)["shards"]]
        else:
            assert mine == theirs, file


def test_merge_index_prefixes_meta_files(tmp_path):
    for part in ("a", "b"):
        _write("csv_plain", tmp_path / part)
    merge_index(tmp_path)
    ds = LocalDataset(tmp_path)
    want = _expected("csv_plain")
    _assert_same([ds[i] for i in range(len(ds))], want + want)


def test_shard_reader_takes_offsets_from_the_meta_file():
    reader = TextShardReader(ROOT / "json_plain" / "shard.00001.json")
    assert reader.codec == JSONRows(EXPECTED["columns"])
    first = read_index(ROOT / "json_plain").samples_per_shard[0]
    assert reader[0]["id"] == _expected("json_plain")[int(first)]["id"]
    rows = reader.get_many(np.arange(len(reader)))
    assert [r["id"] for r in rows] == [s["id"] for s in
                                      _expected("json_plain")[int(first):int(first) + len(reader)]]


def test_truncated_meta_file_is_named(tmp_path):
    shutil.copytree(ROOT / "tsv_plain", tmp_path / "ds")
    meta = meta_path(tmp_path / "ds" / "shard.00000.tsv")
    meta.write_bytes(meta.read_bytes()[:20])
    with pytest.raises(ShardCorruptError, match="meta"):
        TextShardReader(tmp_path / "ds" / "shard.00000.tsv")


def test_index_entry_without_meta_is_refused(tmp_path):
    shutil.copytree(ROOT / "json_plain", tmp_path / "ds")
    index = json.loads((tmp_path / "ds" / "index.json").read_text())
    del index["shards"][1]["raw_meta"]
    (tmp_path / "ds" / "index.json").write_text(json.dumps(index))
    with pytest.raises(IndexFileError, match=r"shard 1.*raw_meta"):
        read_index(tmp_path / "ds")


def test_unknown_column_type_is_refused():
    with pytest.raises(FormatError, match="bytes"):
        JSONRows({"x": "bytes"})


def test_writer_refuses_wrong_types_and_separators(tmp_path):
    with CSVWriter(out=str(tmp_path / "a"), columns={"n": "int", "s": "str"}) as writer:
        with pytest.raises(EncodeError, match="'n'"):
            writer.write({"n": "7", "s": "x"})
        with pytest.raises(EncodeError, match="separator"):
            writer.write({"n": 7, "s": "a,b"})
        with pytest.raises(AttributeError):  # what the reference raises for a wrong type
            writer.write({"n": 1.5, "s": "x"})
        with pytest.raises(EncodeError, match="bool"):  # would not read back
            writer.write({"n": True, "s": "x"})
        writer.write({"n": 7, "s": "ok"})
    assert LocalDataset(tmp_path / "a")[0] == {"n": 7, "s": "ok"}


def test_writer_output_must_be_a_new_folder_and_the_writer_open(tmp_path):
    (tmp_path / "file").write_text("x")
    with pytest.raises(OutputExistsError, match="exists and is not a directory"):
        JSONWriter(out=str(tmp_path / "file"), columns={"s": "str"})
    with JSONWriter(out=str(tmp_path / "a"), columns={"s": "str"}) as writer:
        with pytest.raises(EncodeError, match=r"sample has no column 's'"):
            writer.write({"t": "x"})
        writer.write({"s": "x"})
    with pytest.raises(StreamingError, match=r"JSONWriter for .* is finished"):
        writer.write({"s": "y"})
    with pytest.raises(OutputExistsError, match="is not empty; pass exist_ok=True"):
        JSONWriter(out=str(tmp_path / "a"), columns={"s": "str"})
    assert LocalDataset(tmp_path / "a")[0] == {"s": "x"}


def test_first_row_over_the_limit_leaves_an_empty_shard_as_the_reference(tmp_path):
    with JSONWriter(out=str(tmp_path / "a"), columns={"s": "str"}, size_limit=10) as writer:
        writer.write({"s": "longer than ten bytes"})
        writer.write({"s": "another long row"})
    index = read_index(tmp_path / "a")
    assert index.samples_per_shard.tolist() == [0, 1, 1]
    ds = LocalDataset(tmp_path / "a")
    assert [ds[i]["s"] for i in range(len(ds))] == ["longer than ten bytes", "another long row"]


@pytest.mark.parametrize("name", ["json_zstd_hashed", "csv_gz", "xsv_pipe"])
def test_streaming_dataset_reads_text_formats_from_s3(s3_env, name, tmp_path):
    """Meta files come over the wire too; data files are cached and evicted like MDS shards."""
    client = s3_env.client()
    bucket = s3_env.make_bucket()
    for path in sorted((ROOT / name).iterdir()):
        client.upload_file(str(path), bucket, f"{name}/{path.name}")
    ds = StreamingDataset(remote=f"s3://{bucket}/{name}", local=str(tmp_path / "cache"),
                          validate_hash=EXPECTED["datasets"][name]["writer_args"].get(
                              "hashes", [None])[0], cache_limit="64kb")
    try:
        _assert_same(list(ds), _expected(name))
        assert ds.shards[0].format == name.split("_")[0]
        ds.evict_shard(0)
        assert ds[0] == _expected(name)[0]
    finally:
        ds.close()


def test_dataloader_workers_read_text_formats(tmp_path):
    from streaming import StreamingDataLoader

    ds = StreamingDataset(remote=str(ROOT / "xsv_pipe"), local=str(tmp_path / "cache"))
    try:
        batches = list(StreamingDataLoader(ds, batch_size=8, num_workers=2))
        ids = sorted(int(i) for batch in batches for i in batch["id"])
        assert ids == sorted(s["id"] for s in _expected("xsv_pipe"))
        assert batches[0]["score"].dtype.is_floating_point
    finally:
        ds.close()
