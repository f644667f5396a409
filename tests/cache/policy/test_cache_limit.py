"""`cache_limit` parsed once at the edge into a `CacheLimit`: what parses, what is refused with
the value named, and the one value the dataset hands down to the plan fitting, the stream and the
engine (the node's limit being the smallest a live reader asked for)."""

from __future__ import annotations

from pathlib import Path

import pytest

from streaming import StreamingDataset
from streaming.cache.policy.cache_limit import CacheLimit
from streaming.errors import PlanError
from writers.mds import MDSWriter


def test_sizes_parse_to_bytes_and_keep_what_the_user_wrote() -> None:
    limit = CacheLimit.parse("10mb")
    assert limit == CacheLimit(10 * 2**20, "10mb") and str(limit) == "10mb"
    assert CacheLimit.parse(4096) == CacheLimit(4096, 4096)
    assert CacheLimit.parse(None) is None
    assert CacheLimit.parse(limit) is limit  # a parsed limit passes through as it is


@pytest.mark.parametrize("value", [0, -5, "0b", "ten gigs", "10 parsecs"])
def test_a_value_that_is_not_a_positive_size_is_refused_by_name(value: object) -> None:
    with pytest.raises(PlanError, match="cache_limit"):
        CacheLimit.parse(value)  # type: ignore[arg-type]


def test_room_for_shards_leaves_out_the_other_files() -> None:
    assert CacheLimit(1000, 1000).room_for_shards(300) == 700
    assert CacheLimit(1000, 1000).room_for_shards(5000) == 1


def test_the_dataset_parses_once_and_the_engine_records_that_value(tmp_path: Path) -> None:
    remote = tmp_path / "remote"
    with MDSWriter(columns={"id": "int"}, out=str(remote), compression="zstd",
                   size_limit=1 << 10) as writer:
        for i in range(256):
            writer.write({"id": i})
    ds = StreamingDataset(remote=str(remote), local=str(tmp_path / "cache"), batch_size=4,
                          cache_limit="10mb")
    try:
        assert ds.cache_limit == "10mb"  # the reference's attribute: the value as given
        assert ds.cache is not None and ds.cache.asked_limit == CacheLimit(10 * 2**20, "10mb")
        assert ds.cache.node_limit() == 10 * 2**20  # the only reader on the node
    finally:
        ds.close()
