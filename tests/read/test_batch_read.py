"""The batch read path (ShardReader.get_many / get_columns) decodes exactly what `get` does."""

from __future__ import annotations

import struct
import threading
import time
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streaming.errors import CoordinationError, ShardCorruptError
from streaming.format import ShardReader, read_index
from streaming.read.shard_source import LocalSource, first_uses
from streaming.read.sizing import rows_per_read
from writers.mds import MDSWriter

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "mds-reference"


def assert_same(one: dict, many: dict) -> None:
    assert one.keys() == many.keys()
    for key, a in one.items():
        b = many[key]
        assert type(a) is type(b), (key, type(a), type(b))
        if isinstance(a, np.ndarray):
            assert a.dtype == b.dtype and a.shape == b.shape and np.array_equal(a, b), key
        elif isinstance(a, float) and a != a:
            assert b != b
        else:
            assert a == b, key


def raw_shards() -> list[Path]:
    return sorted(p for p in FIXTURES.glob("*/shard.*.mds") if p.is_file())


@pytest.mark.parametrize("path", raw_shards(), ids=lambda p: f"{p.parent.name}/{p.name}")
def test_reference_shards_batch_equals_single(path: Path) -> None:
    reader = ShardReader(path, allow_unsafe_types=True)
    rows = np.random.default_rng(1).integers(0, len(reader), 3 * len(reader))  # repeats too
    for copy in (False, True):
        for row, sample in zip(rows.tolist(), reader.get_many(rows, copy=copy)):
            assert_same(reader.get(row), sample)
    columns = reader.get_columns(rows[:5])
    assert len(columns) == len(reader.codec.column_names)
    assert all(len(values) == len(rows[:5]) for values in columns)


_scalar = st.sampled_from(["int", "uint8", "int16", "float32", "float64", "str", "bytes"])
_array = st.sampled_from(["ndarray", "ndarray:int32", "ndarray:uint8", "ndarray:float64",
                          "ndarray:int16:2,3"])


def _value(encoding: str, rng: np.random.Generator):
    if encoding == "int":
        return int(rng.integers(-(1 << 62), 1 << 62))
    if encoding == "str":
        return "é" * int(rng.integers(0, 5)) + "x" * int(rng.integers(0, 300))
    if encoding == "bytes":
        return rng.bytes(int(rng.integers(0, 300)))
    if encoding.startswith("ndarray"):
        parts = encoding.split(":")
        dtype = parts[1] if len(parts) > 1 else str(rng.choice(["int8", "float32", "uint64"]))
        if len(parts) == 3:
            shape = tuple(int(d) for d in parts[2].split(","))
        elif rng.random() < 0.3:
            shape = (int(rng.integers(1, 4)), int(rng.integers(1, 300)))
        else:
            shape = (int(rng.integers(1, 70_000 if rng.random() < 0.1 else 300)),)
        return (rng.random(shape) * 100).astype(dtype)
    return np.dtype(encoding).type(rng.integers(0, 100))


@settings(max_examples=15, deadline=None)
@given(encodings=st.lists(st.one_of(_scalar, _array), min_size=1, max_size=4),
       seed=st.integers(0, 1000))
def test_random_schemas_batch_equals_single(fresh_dir, encodings, seed) -> None:
    out = fresh_dir()
    columns = {f"c{i}": enc for i, enc in enumerate(encodings)}
    rng = np.random.default_rng(seed)
    with MDSWriter(columns=columns, out=out, size_limit=1 << 16) as writer:
        for _ in range(40):
            writer.write({name: _value(enc, rng) for name, enc in columns.items()})
    index = read_index(out)
    for shard in range(index.num_shards):
        reader = ShardReader(index.raw_path(shard), index.codec())
        rows = rng.permutation(len(reader))
        for copy in (False, True):
            for row, sample in zip(rows.tolist(), reader.get_many(rows, copy=copy)):
                assert_same(reader.get(row), sample)


def test_corrupt_sample_raises_what_get_raises(tmp_path: Path) -> None:
    with MDSWriter(columns={"id": "int", "tokens": "ndarray:int32"}, out=tmp_path) as writer:
        for i in range(10):
            writer.write({"id": i, "tokens": np.arange(i + 1, dtype=np.int32)})
    path = read_index(tmp_path).raw_path(0)
    data = bytearray(path.read_bytes())
    (start,) = struct.unpack_from("<I", data, 4 + 4 * 6)
    struct.pack_into("<I", data, start, 10_000)  # sample 6's length header lies
    path.write_bytes(bytes(data))
    reader = ShardReader(path)
    with pytest.raises(ShardCorruptError, match="sample 6"):
        reader.get_many(np.arange(10))
    with pytest.raises(ShardCorruptError, match="sample 6"):
        reader.get_many(np.arange(10), copy=True)
    with pytest.raises(IndexError, match="out of range"):
        reader.get_many([0, -1])
    assert [s["id"] for s in reader.get_many([0, 9])] == [0, 9]


def test_copied_rows_are_writable_and_detached(tmp_path: Path) -> None:
    with MDSWriter(columns={"tokens": "ndarray:int64", "raw": "bytes"}, out=tmp_path) as writer:
        for i in range(50):
            writer.write({"tokens": np.full(1000, i, dtype=np.int64), "raw": bytes([i]) * i})
    reader = ShardReader(read_index(tmp_path).raw_path(0))
    rows = np.r_[np.arange(10, 30), [3, 3, 49, 0]]  # a file-contiguous run, then jumps
    copied = reader.get_many(rows, copy=True)
    for row, sample in zip(rows.tolist(), copied):
        assert_same(reader.get(row), sample)
    assert copied[0]["tokens"].flags.writeable and not reader.get(10)["tokens"].flags.writeable
    copied[0]["tokens"][:] = -1
    assert int(reader.get(10)["tokens"][0]) == 10
    reader.close()
    assert [int(s["tokens"][1]) for s in copied[1:4]] == [11, 12, 13]


@pytest.mark.parametrize(("mean", "multiple", "rows"), [
    (4_000, 1, 1024), (4_000, 64, 1024), (100_000, 1, 167), (100_000, 64, 128),
    (10_000_000, 64, 64), (10_000_000, 1, 1)])
def test_rows_per_read(mean: float, multiple: int, rows: int) -> None:
    assert rows_per_read(mean, multiple) == rows


def test_first_uses_and_local_source_order_and_errors() -> None:
    shards = np.array([3, 1, 3, 0, 1, 5, 0])
    assert first_uses(shards) == ([3, 1, 0, 5], [0, 1, 3, 5])
    assert first_uses(np.zeros(0, np.int64)) == ([], [])
    done: list[int] = []
    lock = threading.Lock()

    class Logged:
        def prepare(self, shard: int) -> None:
            with lock:
                done.append(shard)

    prefetch = LocalSource(Logged(), ahead=15, threads=3)
    prefetch.follow(np.repeat(np.arange(8), 10))

    def wait_for(count: int) -> None:
        deadline = time.monotonic() + 10
        while len(done) < count and time.monotonic() < deadline:
            time.sleep(0.01)

    wait_for(2)
    time.sleep(0.1)
    assert sorted(done) == [0, 1]  # only shards first used within 15 samples of position 0
    prefetch.advance(75)
    wait_for(8)
    prefetch.stop()
    assert sorted(done) == list(range(8))

    class Broken:
        def prepare(self, shard: int) -> None:
            raise OSError(f"no shard {shard}")

    failing = LocalSource(Broken(), ahead=8)
    failing.follow(np.array([4, 4]))
    deadline = time.monotonic() + 10
    with pytest.raises(OSError, match="no shard 4") as caught:  # the root cause, as it is
        while time.monotonic() < deadline:
            failing.check()
            time.sleep(0.01)
    assert not isinstance(caught.value, CoordinationError)


N_PAGED = 12_000


def test_chunks_in_the_page_cache_are_read_without_the_reader_thread(tmp_path, monkeypatch):
    """Once a chunk's shards are open and its bytes cached, its read runs in the iterating
    thread (RWF_NOWAIT); the reader thread is only for reads that may wait."""
    import streaming.read.iterate as iterate_module
    from streaming import StreamingDataset
    from streaming.format.shard import NOWAIT_READS

    with MDSWriter(columns={"id": "int", "tokens": "ndarray:int32"}, out=tmp_path / "ds",
                   size_limit=20_000) as writer:
        for i in range(N_PAGED):
            writer.write({"id": i, "tokens": np.full(i % 17 + 1, i, np.int32)})
    submitted = []
    real_submit = iterate_module.ThreadPoolExecutor.submit

    def counting_submit(self, fn, *args, **kwargs):
        submitted.append(args)
        return real_submit(self, fn, *args, **kwargs)

    monkeypatch.setattr(iterate_module.ThreadPoolExecutor, "submit", counting_submit)
    ds = StreamingDataset(local=str(tmp_path / "ds"), shuffle=True, batch_size=10)
    try:
        ids = [int(i) for batch in ds.iter_batches(10) for i in batch["id"]]
        rows = ds._read_size(10).rows
    finally:
        ds.close()
    assert sorted(ids) == list(range(N_PAGED))
    chunks = 1 + -(-(N_PAGED - 10) // rows)  # a quick first chunk of one batch, then `rows`
    if NOWAIT_READS:
        assert len(submitted) <= 3 and chunks >= 10  # only until every shard was open
    else:
        assert len(submitted) == chunks - 1  # the first chunk is read in the iterating thread


def test_the_first_batch_waits_for_no_read_but_its_own(tmp_path, monkeypatch):
    """A pass's first chunk is one batch, read in the iterating thread; the next, larger read
    starts only when the loop asks for more, so the first batch never waits for it."""
    import streaming.read.iterate as iterate_module
    from streaming import StreamingDataset

    with MDSWriter(columns={"id": "int"}, out=tmp_path / "ds", size_limit=2_000) as writer:
        for i in range(5000):
            writer.write({"id": i})
    reads: list[int] = []  # rows of each read started
    real_fetch = iterate_module.fetch_chunk

    def counting_fetch(shards, places, *args, **kwargs):
        reads.append(len(places))
        return real_fetch(shards, places, *args, **kwargs)

    monkeypatch.setattr(iterate_module, "fetch_chunk", counting_fetch)
    ds = StreamingDataset(local=str(tmp_path / "ds"), shuffle=True, batch_size=10)
    try:
        batches = ds.iter_batches(10)
        first = next(batches)
        after_first = list(reads)
        second = next(batches)
        batches.close()
    finally:
        ds.close()
    assert len(first["id"]) == len(second["id"]) == 10
    assert after_first == [10]
    assert len(reads) >= 2 and reads[1] > 10  # the second read is a large one


def _refused_nowait_reads(tmp_path, monkeypatch, samples: int, error: OSError) -> list[int]:
    """A `samples`-row dataset at tmp_path/ds, with no-wait reads on and every one of them
    failing with `error`; returns the list that gets an item per no-wait read asked for."""
    import streaming.read.chunk_copy as chunk_copy
    import streaming.read.iterate as iterate_module

    monkeypatch.setattr(iterate_module, "NOWAIT_READS", True)
    with MDSWriter(columns={"id": "int"}, out=tmp_path / "ds", size_limit=2_000) as writer:
        for i in range(samples):
            writer.write({"id": i})
    asked: list[int] = []

    def refusing(real):
        def read(*args, nowait=False, **kwargs):
            if nowait:
                asked.append(1)
                raise error
            return real(*args, **kwargs)
        return read

    # A chunk over few shards reads with read_spans, over many (grouped) with read_spans_into.
    for name in ("read_spans", "read_spans_into"):
        monkeypatch.setattr(chunk_copy, name, refusing(getattr(chunk_copy, name)))
    return asked


def test_a_filesystem_without_nowait_reads_falls_back_to_the_reader_thread(tmp_path,
                                                                            monkeypatch):
    import errno

    from streaming import StreamingDataset

    refused = _refused_nowait_reads(tmp_path, monkeypatch, 5000,
                                    OSError(errno.EOPNOTSUPP, "RWF_NOWAIT not supported"))
    ds = StreamingDataset(local=str(tmp_path / "ds"), shuffle=True, batch_size=10)
    try:
        ids = sorted(int(i) for batch in ds.iter_batches(10) for i in batch["id"])
    finally:
        ds.close()
    assert ids == list(range(5000))
    assert len(refused) == 1  # asked once, then never again in this pass


def test_frequent_refusals_stop_the_in_thread_attempts(tmp_path, monkeypatch):
    """Readers sharing shards get cached pages refused (EAGAIN); past a quarter refused, a pass
    stops trying and reads in the thread, instead of starting each read twice."""
    import streaming.read.iterate as iterate_module
    from streaming import StreamingDataset

    asked = _refused_nowait_reads(tmp_path, monkeypatch, 40_000, BlockingIOError("refused"))
    ds = StreamingDataset(local=str(tmp_path / "ds"), shuffle=True, batch_size=10)
    try:
        ids = sorted(int(i) for batch in ds.iter_batches(10) for i in batch["id"])
        chunks = 1 + -(-(40_000 - 10) // ds._read_size(10).rows)
    finally:
        ds.close()
    assert ids == list(range(40_000))
    assert len(asked) == iterate_module._Reads.REFUSALS_SEEN < chunks - 2
