"""cache/index_diff: the files a new index changed, found column by column, are exactly those
whose entries differ as dicts (the rule `cache.origin` keeps)."""

from __future__ import annotations

import json

import pytest

from streaming.cache.folder.changed_files import file_entries, stale_files
from streaming.format import index
from streaming.format.index import parse_index
from streaming.format.index_columns import TemplateEntries


@pytest.fixture(autouse=True)
def _scan_small_indexes(monkeypatch) -> None:
    """These indexes are small; read them by the vectorised scan, whose columns are compared."""
    monkeypatch.setattr(index, "SCAN_FROM", 0)


def _entry(i: int, digest: str = "d", zipped: bool = False, samples: int = 3) -> dict:
    raw = f"p{i % 2}/shard.{i:05d}.mds"
    return {"column_encodings": ["int"], "column_names": ["x"], "column_sizes": [8],
            "compression": "zstd" if zipped else None, "format": "mds", "hashes": ["xxh64"],
            "raw_data": {"basename": raw, "bytes": 100 + i, "hashes": {"xxh64": f"{digest}{i}"}},
            "samples": samples, "size_limit": 1 << 26, "version": 2,
            "zip_data": {"basename": raw + ".zstd", "bytes": 50, "hashes": {}} if zipped else None}


def _text(entries: list[dict], lengths: bool = False, **dump) -> bytes:
    doc: dict = {"shards": entries, "version": 2}
    if lengths:
        doc["sample_lengths"] = {"dtype": "<u4", "files": [
            {"basename": e["raw_data"]["basename"] + ".lengths", "bytes": 4 * e["samples"]}
            for e in entries]}
    return json.dumps(doc, **dump).encode()


def _stale(old: bytes, new: bytes, *, columnar: bool = True) -> list[str]:
    a, b = parse_index(old, source="old"), parse_index(new, source="new")
    assert isinstance(b.shards, TemplateEntries) == columnar
    before, after = file_entries(a), file_entries(b)
    want = sorted(n for n in before.keys() | after.keys() if before.get(n) != after.get(n))
    got = sorted(stale_files(a, b))
    assert got == want
    return got


def test_changed_digests_sizes_and_names_are_stale():
    old = [_entry(i) for i in range(12)]
    new = [_entry(i) for i in range(12)]
    new[3] = _entry(3, digest="e")
    new[5]["raw_data"]["bytes"] += 1
    new[7] = dict(_entry(20))
    del new[9]
    assert len(_stale(_text(old), _text(new))) == 5


def test_side_files_and_compressed_copies():
    old = [_entry(i, zipped=True) for i in range(6)]
    new = [_entry(i, zipped=True) for i in range(6)]
    new[2]["samples"] = 4
    got = _stale(_text(old, lengths=True), _text(new, lengths=True))
    assert "p0/shard.00002.mds.zstd" in got and "p0/shard.00002.mds.lengths" in got


def test_a_layout_change_only_in_formatting_keeps_every_file():
    entries = [_entry(i) for i in range(8)]
    assert _stale(_text(entries, sort_keys=True), _text(entries, indent=1)) == []


@pytest.mark.parametrize("field", ["column_names", "format_of_x"])
def test_a_changed_constant_field_changes_every_entry(field):
    new = [_entry(i) for i in range(5)]
    for e in new:
        e["column_names"] = ["y"] if field == "column_names" else e["column_names"]
        e["hashes"] = ["xxh64", "sha1"] if field != "column_names" else e["hashes"]
    assert len(_stale(_text([_entry(i) for i in range(5)]), _text(new))) == 5


def test_no_previous_index_makes_every_file_stale():
    new = parse_index(_text([_entry(i, zipped=True) for i in range(3)]), source="new")
    assert len(stale_files(None, new)) == 6


def test_indexes_read_entry_by_entry_compare_as_dicts():
    old = [_entry(i) for i in range(4)]
    new = [_entry(i) for i in range(4)]
    new[1]["raw_data"]["basename"] = "spaced name.mds"
    new[2]["compression"], new[2]["zip_data"] = "zstd", {"basename": "z.zstd", "bytes": 9,
                                                         "hashes": {}}
    _stale(_text(old), _text(new), columnar=False)
