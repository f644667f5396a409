"""The pure Parquet logic: a footer read from a file's last bytes into row groups and byte
ranges, the column kinds (and the refusal of a type we cannot represent), the derived index's
entries (checked when read back), the sources a stream accepts, and RangeFile."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from streaming.cache.prepare.parquet_footers import ParquetSelection, select_files, under
from streaming.errors import ArgumentError, IndexFileError, ParquetFileError, ParquetSchemaError
from streaming.format.index import parse_index
from streaming.format.parquet_footer import (
    column_kind,
    column_kinds,
    footer_length,
    merge_ranges,
    parse_footer,
    projected_leaves,
    row_group_spans,
)
from streaming.format.parquet_index import (
    ParquetCodec,
    ParquetFile,
    check_same_schema,
    index_document,
    split_group_name,
)
from streaming.format.parquet_shard import RangeFile
from tests.parquet.helpers import table


def _file(tmp_path: Path, rows: int = 100, group: int = 30) -> bytes:
    path = tmp_path / "a.parquet"
    pq.write_table(table(0, rows), path, row_group_size=group)
    return path.read_bytes()


def _footer(data: bytes) -> tuple[bytes, object]:
    length = footer_length(data[-8:], len(data), "a.parquet")
    tail = data[-8 - length:]
    return tail, parse_footer(tail, "a.parquet")


def test_row_groups_and_ranges_from_the_footer_alone(tmp_path: Path) -> None:
    data = _file(tmp_path)
    _, meta = _footer(data)
    schema = meta.schema.to_arrow_schema()
    spans = row_group_spans(meta, projected_leaves(schema, list(schema.names)), "a.parquet")
    assert [s.rows for s in spans] == [30, 30, 30, 10]
    assert all(len(s.ranges) == 1 for s in spans)  # all columns: one contiguous range
    # meta (a struct) is stored in two leaf columns; tokens in one
    assert projected_leaves(schema, ["meta"]) == [4, 5]
    assert projected_leaves(schema, ["tokens"]) == [2]
    some = row_group_spans(meta, projected_leaves(schema, ["id", "meta"]), "a.parquet")
    assert all(len(s.ranges) == 2 for s in some)
    assert all(s.nbytes < a.nbytes for s, a in zip(some, spans))


def test_ranges_decode_through_range_file(tmp_path: Path) -> None:
    data = _file(tmp_path)
    _, meta = _footer(data)
    schema = meta.schema.to_arrow_schema()
    span = row_group_spans(meta, projected_leaves(schema, ["id", "maybe"]), "a.parquet")[2]
    held = b"".join(data[a:b] for a, b in span.ranges)
    source = RangeFile(held, span.ranges, len(data))
    got = pq.ParquetFile(source, metadata=meta, pre_buffer=False).read_row_group(
        2, columns=["id", "maybe"])
    assert got.column("id").to_pylist() == list(range(60, 90))
    source.seek(0)
    with pytest.raises(OSError, match="not among the cached ranges"):
        source.read(4)


def test_merge_ranges() -> None:
    assert merge_ranges([(10, 20), (0, 5), (5, 8), (19, 30)]) == ((0, 8), (10, 30))


@pytest.mark.parametrize(("tail", "size", "why"), [
    (b"", 0, "empty"), (b"PAR1", 4, "too short"), (b"\0" * 8, 100, "PAR1"),
    ((90).to_bytes(4, "little") + b"PAR1", 50, "does not fit"),
])
def test_bad_tails_are_named(tail: bytes, size: int, why: str) -> None:
    with pytest.raises(ParquetFileError, match=f"x.parquet.*{why}"):
        footer_length(tail, size, "x.parquet")


def test_garbage_footer_is_named() -> None:
    with pytest.raises(ParquetFileError, match=r"x\.parquet: the footer does not parse"):
        parse_footer(b"\x01\x02garbage" + (9).to_bytes(4, "little") + b"PAR1", "x.parquet")


def test_column_kinds() -> None:
    assert column_kind(pa.int16()) == "int16"
    assert column_kind(pa.float32()) == "float"
    assert column_kind(pa.bool_()) == "bool"
    assert column_kind(pa.large_string()) == "str"
    assert column_kind(pa.binary()) == "bytes"
    assert column_kind(pa.list_(pa.float64())) == "ndarray:double"
    assert column_kind(pa.large_list(pa.uint8())) == "ndarray:uint8"
    assert column_kind(pa.struct([("a", pa.int8())])) == "struct<a: int8>"
    for bad in (pa.timestamp("ms"), pa.list_(pa.string()), pa.decimal128(5, 2),
                pa.map_(pa.string(), pa.int8()), pa.struct([("t", pa.date32())])):
        assert column_kind(bad) is None
    schema = pa.schema([("ok", pa.int64()), ("when", pa.date32())])
    with pytest.raises(ParquetSchemaError, match=r"f.parquet: column 'when' has type date32"):
        column_kinds(schema, None, "f.parquet")
    assert column_kinds(schema, ["ok"], "f.parquet") == {"ok": "int64"}


def test_schemas_of_two_files_are_compared_by_name() -> None:
    a = ParquetFile("a.parquet", 10, b"", {"x": "int64", "y": "str"}, [])
    b = ParquetFile("b.parquet", 10, b"", {"x": "int32", "y": "str"}, [])
    with pytest.raises(ParquetSchemaError, match=r"'x' is int64 in a\.parquet but int32 in b"):
        check_same_schema([a, b])


def test_the_derived_index_reads_back_and_is_checked(tmp_path: Path) -> None:
    data = _file(tmp_path)
    tail, meta = _footer(data)
    schema = meta.schema.to_arrow_schema()
    kinds = column_kinds(schema, ["id", "tokens"], "a.parquet")
    spans = row_group_spans(meta, projected_leaves(schema, list(kinds)), "a.parquet")
    doc = index_document([ParquetFile("sub/a.parquet", len(data), tail, kinds, spans)], "s3://b")
    index = parse_index(json.dumps(doc), source="derived")
    assert index.format == "parquet" and index.num_samples == 100
    assert list(index.basenames) == [f"sub/a.parquet.rg0000{g}" for g in range(4)]
    assert index.codec() == ParquetCodec(kinds)
    assert split_group_name("sub/a.parquet.rg00003") == ("sub/a.parquet", 3)
    doc["shards"][1]["ranges"][0][1] += 1
    with pytest.raises(IndexFileError, match=r"shard 1.*ranges"):
        parse_index(json.dumps(doc), source="derived")
    doc["shards"][1]["ranges"][0][1] -= 1
    doc["shards"][2]["raw_data"]["basename"] = "../escape.rg00002"
    with pytest.raises(IndexFileError, match="shard 2"):
        parse_index(json.dumps(doc), source="derived")


def test_sources_a_stream_accepts() -> None:
    assert select_files("s3://b/corpus/") == ParquetSelection("s3://b/corpus")
    assert select_files("s3://b/corpus/*/part-*.parquet") == ParquetSelection(
        "s3://b/corpus", pattern="*/part-*.parquet")
    assert select_files(["https://h/d/x/a.parquet", "https://h/d/b.parquet"]) == \
        ParquetSelection("https://h/d", files=("x/a.parquet", "b.parquet"))
    assert select_files(["/data/a.parquet"]) == ParquetSelection("/data", files=("a.parquet",))
    with pytest.raises(ArgumentError, match="below a folder"):
        select_files("s3://b*/x.parquet")
    with pytest.raises(ArgumentError, match="empty"):
        select_files([])


def test_range_file_reads_across_calls() -> None:
    source = RangeFile(b"abcdefgh", [(100, 104), (200, 204)], 300)
    source.seek(102)
    assert source.read(2) == b"cd"
    source.seek(200)
    assert source.read(10) == b"efgh"
    source.seek(300)
    assert source.read(1) == b""
    assert isinstance(source, io.RawIOBase)


def test_a_path_below_a_root_keeps_its_store_s_form() -> None:
    assert under("", "a.parquet") == "a.parquet"  # a bucket's root
    assert under("/", "a.parquet") == "/a.parquet"  # a web server's: a request target
    assert under("/d/", "a.parquet") == "/d/a.parquet"
    assert under("prefix", "a.parquet") == "prefix/a.parquet"
