"""index.json entries of the text formats are refused up front, naming the shard and what is
wrong with it (streaming/format/text_shard_index.py)."""

from __future__ import annotations

import copy
import json

import pytest

from streaming.errors import IndexFileError
from streaming.format.index import parse_index
from tests.conftest import REPO

ROOT = REPO / "tests" / "fixtures" / "reference-formats"


def _zstd_index() -> dict:
    return json.loads((ROOT / "json_zstd_hashed" / "index.json").read_text())


def _set(key: str, value):
    def change(shard: dict) -> None:
        shard[key] = value
    return change


def _set_file(key: str, field: str, value):
    def change(shard: dict) -> None:
        shard[key][field] = value
    return change


@pytest.mark.parametrize(("change", "why"), [
    (_set("version", 3), r"shard version 3 \(expected 2\)"),
    (_set("newline", 1), r"newline has the wrong type"),
    (_set("samples", -1), r"samples must be >= 0"),
    (_set_file("raw_meta", "basename", "other.meta"), r"'other.meta' is not named"),
    (_set_file("raw_meta", "bytes", "many"), r"bytes must be a non-negative int"),
    (_set_file("zip_meta", "basename", "../up.zstd"), r"could escape the dataset folder"),
    (_set("compression", "zstd:99"), r"compression 'zstd:99'"),
    (_set("compression", None), r"compression None but zip_data"),
    (_set("zip_data", None), r"compression 'zstd' but zip_data None"),
    (_set("zip_meta", None), r"zip_meta"),
])
def test_a_bad_text_shard_entry_is_named(change, why):
    index = _zstd_index()
    assert parse_index(copy.deepcopy(index), source="idx").num_shards == 2
    change(index["shards"][1])
    with pytest.raises(IndexFileError, match=rf"^idx: shard 1\b.*{why}"):
        parse_index(index, source="idx")
