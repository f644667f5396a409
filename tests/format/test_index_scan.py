"""The vectorised index reading (format/index_scan, index_fast) against the checked json path:
for every document, the scan either declines or yields exactly what the json path yields, and
the errors users see are the json path's."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from streaming.errors import IndexFileError
from streaming.format.index import parse_index
from streaming.format.index_columns import Names
from streaming.format.index_fast import fast_index, plain_names
from streaming.format.index_scan import scan_index

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "mds-reference"


def _entry(i: int, *, zipped: bool = False, name: str | None = None) -> dict:
    raw = name or f"shard.{i:05d}.mds"
    return {
        "column_encodings": ["str", "int"], "column_names": ["text", "x"],
        "column_sizes": [None, 8], "compression": "zstd" if zipped else None, "format": "mds",
        "hashes": ["sha1", "xxh64"],
        "raw_data": {"basename": raw, "bytes": 1000 + 37 * i,
                     "hashes": {"sha1": f"{i:040x}", "xxh64": f"{i * 7:016x}"}},
        "samples": 3 * i, "size_limit": 1 << 26, "version": 2,
        "zip_data": {"basename": raw + ".zstd", "bytes": 500 + i, "hashes": {}}
        if zipped else None,
    }


def _doc(entries: list[dict], **kwargs) -> bytes:
    return json.dumps({"shards": entries, "version": 2, **kwargs.pop("extra", {})},
                      **kwargs).encode()


def _assert_same_index(a, b) -> None:
    assert list(a.shards) == list(b.shards)
    for field in ("samples_per_shard", "raw_bytes", "zip_bytes", "sample_offsets"):
        assert np.array_equal(getattr(a, field), getattr(b, field)), field
    for field in ("basenames", "zip_basenames", "compression"):
        assert list(getattr(a, field)) == list(getattr(b, field)), field
    assert list(a.raw_hashes) == list(b.raw_hashes)
    assert list(a.zip_hashes) == list(b.zip_hashes)
    assert (a.columns, a.extra, a.num_shards) == (b.columns, b.extra, b.num_shards)


def _assert_scan_agrees(doc: bytes, *, fast: bool) -> None:
    """The scan's answer equals the json path's (it may decline unless `fast`);
    where the json path refuses, so does parse_index, with the same message."""
    try:
        want = parse_index(json.loads(doc), source="ix")
    except IndexFileError as exc:
        try:
            assert fast_index(doc, source="ix", root=None) is None
        except IndexFileError as early:  # shard 0, checked by the json path's own function
            assert str(early) == str(exc)
        with pytest.raises(type(exc)) as got:
            parse_index(doc, source="ix")
        assert str(got.value) == str(exc)
        return
    found = fast_index(doc, source="ix", root=None)
    assert found is not None or not fast
    _assert_same_index(parse_index(doc, source="ix"), want)
    if found is not None:
        _assert_same_index(found, want)


@pytest.mark.parametrize("zipped", [False, True])
@pytest.mark.parametrize("layout", [{"sort_keys": True}, {"indent": 2}, {"separators": (",", ":")}])
def test_shared_layouts_read_vectorised(zipped, layout):
    _assert_scan_agrees(_doc([_entry(i, zipped=zipped) for i in range(40)], **layout), fast=True)


def test_one_entry_and_merged_subfolders():
    _assert_scan_agrees(_doc([_entry(0)]), fast=True)
    _assert_scan_agrees(
        _doc([_entry(i, name=f"part{i % 3}/sub/shard.{i}.mds") for i in range(9)]), fast=True)


def test_extra_keys_before_and_after_the_list():
    lengths = {"sample_lengths": {"column": "x", "files": [
        {"basename": f"shard.{i:05d}.mds.lengths"} for i in range(5)]}}
    _assert_scan_agrees(_doc([_entry(i) for i in range(5)], extra=lengths, sort_keys=True),
                        fast=True)
    _assert_scan_agrees(json.dumps({"version": 2, "shards": [_entry(i) for i in range(5)],
                                    "zz": {"shards": [1]}}).encode(), fast=True)


@pytest.mark.parametrize("change", [
    lambda e: e.update(samples=-1),
    lambda e: e.update(samples=1.5),
    lambda e: e.update(samples=10**9),
    lambda e: e.update(samples=True),
    lambda e: e["raw_data"].update(bytes=3),
    lambda e: e["raw_data"].update(bytes=2**40),
    lambda e: e["raw_data"].update(basename="../escape.mds"),
    lambda e: e["raw_data"].update(basename="/abs.mds"),
    lambda e: e["raw_data"].update(basename="index.json"),
    lambda e: e["raw_data"].update(basename="sub/.hidden"),
    lambda e: e["raw_data"].update(basename="a" * 300),
    lambda e: e["raw_data"].update(basename="shard.00001.mds"),
    lambda e: e["raw_data"].update(basename="tab\there"),
    lambda e: e["raw_data"].update(basename="back\\slash"),
    lambda e: e["raw_data"].update(basename="ünï"),
    lambda e: e["raw_data"].update(basename="sp ace.mds"),
    lambda e: e["raw_data"].update(basename="dir/"),
    lambda e: e["raw_data"].update(basename=""),
    lambda e: e["raw_data"]["hashes"].update(sha1=5),
    lambda e: e.update(compression="zstd"),
    lambda e: e.update(column_names=["text", "y"]),
    lambda e: e.update(size_limit=None),
    lambda e: e.update(version=3),
    lambda e: e.update(extra="key"),
    lambda e: e.pop("hashes"),
    lambda e: e.update(format="json"),
])
@pytest.mark.parametrize("where", [0, 7, 19])
def test_a_changed_entry_reads_as_the_json_path_reads_it(change, where):
    entries = [_entry(i) for i in range(20)]
    change(entries[where])
    _assert_scan_agrees(_doc(entries, sort_keys=True), fast=False)


def test_plain_names_name_the_safe_ones():
    names = ["a.mds", "part0/shard.1.mds", ".x", "a/../b", "index.json", "p/index.json",
             "x" * 64, "y" * 63, "a//b", "a/", "-ok_.mds", "a/.b", "aindex.json"]
    assert plain_names(Names.of(names)).tolist() == [
        True, True, False, False, False, False, False, True, False, False, True, False, True]


def test_documents_of_other_shapes_are_declined():
    entries = [_entry(i) for i in range(4)]
    for doc in (b"[]", b'{"shards": [], "version": 2}', b'{"shards": [1, 2], "version": 2}',
                _doc(entries)[:-5], _doc(entries).replace(b", {", b",, {", 1),
                json.dumps({"meta": {"shards": entries}, "shards": [], "version": 2}).encode()):
        assert scan_index(doc) is None


@pytest.mark.skipif(not FIXTURES.is_dir(), reason="reference fixtures absent")
def test_reference_indexes_read_vectorised():
    found = sorted(FIXTURES.rglob("index.json"))
    assert found
    for path in found:
        doc = path.read_bytes()
        try:
            want = parse_index(json.loads(doc), source="ix")
        except IndexFileError:
            continue
        fast = fast_index(doc, source="ix", root=None)
        if fast is not None:
            _assert_same_index(fast, want)


def test_small_index_text_is_read_by_json_and_large_by_the_scan():
    from streaming.format import index
    from streaming.format.index_columns import TemplateEntries

    small = _doc([_entry(i) for i in range(4)])
    assert len(small) < index.SCAN_FROM
    read = parse_index(small, source="ix")
    assert isinstance(read.shards, list)  # the json path: a fixed 0.7 ms scan costs more
    _assert_same_index(read, fast_index(small, source="ix", root=None))
    large = _doc([_entry(i) for i in range(400)])
    assert len(large) >= index.SCAN_FROM
    read = parse_index(large, source="ix")
    assert isinstance(read.shards, TemplateEntries)
    _assert_same_index(read, parse_index(json.loads(large), source="ix"))
