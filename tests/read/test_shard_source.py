"""The reader drives any `ShardSource`: a fake one, that records what the reader asks of it,
stands in for the cache engine and the local source (behind a plain `ShardRows` over the
shards of a local folder)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from streaming.format.text_shard import open_shard
from streaming.read.iterate import iter_chunks
from streaming.read.shard_rows import ReadTally
from streaming.read.shard_source import LocalSource, ShardSource
from streaming.read.sizing import ReadSize
from tests.cache.helpers import open_dataset
from tests.support.datasets import write_dataset

SAMPLES = 600


class FakeSource:
    """A ShardSource over local shards that pins `pinned_mask`'s shards and logs every call."""

    def __init__(self, prepare, pinned_mask: np.ndarray | None, fail: Exception | None = None):
        self._prepare = prepare
        self._mask = pinned_mask
        self._fail = fail
        self.followed: np.ndarray | None = None
        self.positions: list[int] = []
        self.acquired: Counter = Counter()
        self.held: Counter = Counter()
        self.stopped = False

    def follow(self, shards: np.ndarray) -> None:
        self.followed = np.array(shards)

    def advance(self, position: int) -> None:
        self.positions.append(position)

    def acquire(self, shard: int, *, wait: bool = True) -> Path | None:
        self.acquired[shard] += 1
        self.held[shard] += 1
        return self._prepare(shard)

    def release(self, shard: int) -> None:
        self.held[shard] -= 1

    def present(self, shards: np.ndarray) -> bool:
        return True

    def pinned(self) -> np.ndarray | None:
        return self._mask

    def check(self) -> None:
        if self._fail is not None and self.positions:
            raise self._fail

    def stop(self) -> None:
        self.stopped = True

    def end(self) -> None:
        self.stop()


@pytest.fixture(scope="module")
def local(tmp_path_factory):
    out = tmp_path_factory.mktemp("data")
    write_dataset(out, SAMPLES, size_limit=8_000, compression=None)
    return open_dataset(None, str(out))


class FolderRows:
    """The `ShardRows` of a local folder's shards, read through `source`."""

    def __init__(self, handle, source: ShardSource) -> None:
        self.handle, self.source, self.tally = handle, source, ReadTally()

    def locate(self, ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        return self.handle.locator.locate(ids)

    def reader(self, shard: int):
        return self.open_file(shard, self.handle.preparer.prepare(shard))

    def open_file(self, shard: int, path: Path):
        return open_shard(path, self.handle.codec)

    def codec(self, shard: int):
        return self.handle.codec


def _read(handle, source: ShardSource, ids: np.ndarray, **options) -> list[int]:
    rows = FolderRows(handle, source)
    chunks = iter_chunks(ids, rows, ReadSize(50), **options)
    samples = [sample["id"] for chunk in chunks for sample in chunk]
    assert rows.tally.rows == len(samples)
    return samples


def test_the_reader_follows_the_plan_and_pins_only_the_pinned_shards(local):
    ids = np.random.default_rng(1).permutation(SAMPLES)
    ids = np.concatenate([ids, [-1, -1]])  # padding is skipped, never handed to the source
    shards = local.locator.locate(ids[ids >= 0])[0]
    count = int(shards.max()) + 1
    assert count > 4
    mask = np.ones(count, bool)
    mask[-1] = False  # a chunk holding a pinned shard reads all of its shards under a pin
    source = FakeSource(local.preparer.prepare, mask)
    assert _read(local, source, ids) == ids[ids >= 0].tolist()
    assert np.array_equal(source.followed, shards)
    assert source.positions == sorted(source.positions) and source.positions[0] == 0
    assert set(source.acquired) >= set(np.flatnonzero(mask).tolist())
    assert not any(source.held.values())  # every pin given back
    assert source.stopped


def test_without_pinned_shards_the_reader_keeps_them_open_and_never_acquires(local):
    source = FakeSource(local.preparer.prepare, None)
    ids = np.arange(SAMPLES)
    assert _read(local, source, ids, columns=False) == ids.tolist()
    assert not source.acquired and source.stopped


def test_a_source_failure_reaches_the_reader_and_the_source_is_stopped(local):
    source = FakeSource(local.preparer.prepare, None, fail=OSError("bucket gone"))
    with pytest.raises(OSError, match="bucket gone"):
        _read(local, source, np.arange(SAMPLES))
    assert source.stopped


def test_the_local_source_reads_the_same_rows_as_the_fake_one(local):
    ids = np.random.default_rng(2).permutation(SAMPLES)
    source = LocalSource(local.preparer, ahead=64)
    assert source.pinned() is None and source.present(np.arange(3))
    assert _read(local, source, ids) == ids.tolist()


class RecordingSink:
    """A ReadSink that keeps every count it is told."""

    def __init__(self) -> None:
        self.counts: list[tuple[int, int]] = []

    def add(self, bytes_read: int, rows: int) -> None:
        self.counts.append((bytes_read, rows))


def test_the_tally_and_its_sink_count_bytes_then_rows(local):
    rows = FolderRows(local, LocalSource(local.preparer, ahead=64))
    rows.tally.sink = sink = RecordingSink()
    samples = [s for chunk in iter_chunks(np.arange(SAMPLES), rows, ReadSize(50)) for s in chunk]
    assert rows.tally.rows == len(samples) == SAMPLES
    assert rows.tally.bytes_read > rows.tally.rows  # every MDS row holds more than one byte
    assert [sum(c) for c in zip(*sink.counts)] == [rows.tally.bytes_read, rows.tally.rows]
    direct = ReadTally(sink=sink)
    direct.add(bytes_read=7, rows=2)
    assert (direct.bytes_read, direct.rows, sink.counts[-1]) == (7, 2, (7, 2))
