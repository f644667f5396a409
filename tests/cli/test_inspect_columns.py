"""`streaming inspect` summarises from the index's columns: the same summary whichever way the
index was read (vectorised scan or entry by entry)."""

from __future__ import annotations

import json

import pytest

from streaming.cli.inspect import summarize
from streaming.format import index
from streaming.format.index import parse_index
from streaming.format.index_columns import TemplateEntries


@pytest.fixture(autouse=True)
def _scan_small_indexes(monkeypatch) -> None:
    """These indexes are small; read them by the vectorised scan too."""
    monkeypatch.setattr(index, "SCAN_FROM", 0)


def _entry(i: int, part: str, zipped: bool) -> dict:
    raw = f"{part}shard.{i:05d}.mds"
    return {"column_encodings": ["int"], "column_names": ["x"], "column_sizes": [8],
            "compression": "zstd:7" if zipped else None, "format": "mds", "hashes": ["sha1"],
            "raw_data": {"basename": raw, "bytes": 100 + i, "hashes": {"sha1": "ab"}},
            "samples": i, "size_limit": 1000 + i % 2, "version": 2,
            "zip_data": {"basename": raw + ".zstd", "bytes": 40, "hashes": {}} if zipped
            else None}


def test_summaries_of_both_readings_agree():
    for zipped in (False, True):
        for parts in (["p2/", "p10/", "p2/"], [""]):
            doc = json.dumps({"shards": [_entry(i, parts[i % len(parts)], zipped)
                                         for i in range(30)], "version": 2}).encode()
            fast = parse_index(doc, source="ix")
            assert isinstance(fast.shards, TemplateEntries)
            want = summarize(parse_index(json.loads(doc), source="ix"), "ix")
            assert summarize(fast, "ix") == want
            assert list(summarize(fast, "ix")["parts"]) == list(want["parts"])


def test_mixed_codecs_are_counted():
    entries = [_entry(i, "", i % 3 == 0) for i in range(9)]
    info = summarize(parse_index(json.dumps({"shards": entries, "version": 2}), source="ix"),
                     "ix")
    assert info["compression"] == {"none": 6, "zstd:7": 3}
    assert info["size_limits"] == [1000, 1001]
