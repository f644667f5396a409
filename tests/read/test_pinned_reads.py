"""Reads under a cache_limit: each shard is validated once per pass though it is pinned, read
and unpinned for every chunk (and may be evicted and downloaded again in between), and the
samples are exactly those of the same plan without a limit."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import numpy as np
import pytest

import streaming.read.chunk_copy as chunk_copy
from streaming import StreamingDataset
from streaming.format.index import read_index
from tests.support.datasets import MANY_SHARDS_SAMPLES as SAMPLES


def _epoch(remote: Path, local: Path, limit: int | None, opened: Counter | None = None):
    ds = StreamingDataset(remote=str(remote), local=str(local), cache_limit=limit, batch_size=32,
                          shuffle=True, shuffle_block_size=500, predownload=64)
    if opened is not None:
        real = ds.rows.open_file

        def counting(shard, path):
            opened[shard] += 1
            return real(shard, path)

        ds.rows.open_file = counting  # what the pass's pinned reads validate shards with
    try:
        batches = list(ds.iter_batches(32))
        return ([i for b in batches for i in b["id"].tolist()],
                [t for b in batches for t in b["text"]], ds.cache_stats())
    finally:
        ds.close()


@pytest.mark.parametrize("layout_bytes", [chunk_copy.LAYOUT_BYTES, 1])
def test_a_limited_pass_validates_each_shard_once_and_reads_the_same_samples(
        many_shards, tmp_path, monkeypatch, layout_bytes):
    monkeypatch.setattr(chunk_copy, "LAYOUT_BYTES", layout_bytes)
    shards = len(read_index(many_shards / "index.json").shards)
    limit = int(np.sum(read_index(many_shards / "index.json").raw_bytes)) // 4
    opened: Counter = Counter()
    ids, texts, stats = _epoch(many_shards, tmp_path / "limited", limit, opened)
    plain_ids, plain_texts, _ = _epoch(many_shards, tmp_path / "plain", None)
    assert ids == plain_ids and texts == plain_texts
    assert sorted(set(ids)) == list(range(SAMPLES))
    assert stats.evictions > 0 and stats.hits > 2 * shards, stats  # pinned many times each
    if layout_bytes > 1:
        assert max(opened.values()) == 1 and len(opened) == shards, opened.most_common(3)
    else:  # one layout remembered at a time: shards are validated again, reads stay exact
        assert sum(opened.values()) > shards
