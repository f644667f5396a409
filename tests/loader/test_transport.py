"""streaming.loader.worker_ring: worker batches through a shared-memory ring instead of the pipe."""

from __future__ import annotations

import gc
import os
import pickle
import signal
import subprocess
import threading
import time
from itertools import pairwise
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from streaming import StreamingDataLoader, StreamingDataset
from streaming.coord.proc import ProcessId
from streaming.coord.shm_files import shm_dir
from streaming.errors import CoordinationError, DeadlineExceeded
from streaming.loader.batch_stream import BatchStream
from streaming.loader.default_collate import Ragged
from streaming.loader.worker_ring import (
    MIN_BYTES_LIST,
    MIN_LEAF_BYTES,
    Packed,
    Receiver,
    RingAddress,
    Sender,
    new_token,
)
from tests.support.loaders import drain
from writers.mds import MDSWriter

BIG = max(MIN_LEAF_BYTES, MIN_BYTES_LIST)  # goes to the ring, whatever the kind


def ring_files(token: str) -> list[str]:
    return [name for name in os.listdir(shm_dir()) if token in name]


def assert_same(a: object, b: object) -> None:
    """Equal values and equal types, leaf by leaf."""
    assert type(a) is type(b), (type(a), type(b))
    if isinstance(a, dict):
        assert a.keys() == b.keys()
        for key in a:
            assert_same(a[key], b[key])
    elif isinstance(a, Ragged):
        assert_same(a.values, b.values)
        assert_same(a.offsets, b.offsets)
    elif isinstance(a, np.ndarray):
        assert a.dtype == b.dtype and a.shape == b.shape and np.array_equal(a, b)
        assert a.flags.writeable and b.flags.writeable
    elif isinstance(a, torch.Tensor):
        assert a.dtype == b.dtype and torch.equal(a, b)
    elif isinstance(a, list):
        assert len(a) == len(b) and all(type(x) is type(y) for x, y in zip(a, b))
        assert a == b
    else:
        assert a == b


@pytest.fixture
def pair():
    """A Sender (3 slots, short deadline) and a Receiver in this process."""
    sender = Sender(new_token(), 0, 3, ProcessId.current(), timeout=2.0)
    receiver = Receiver()
    yield sender, receiver
    receiver.close()
    sender.close()
    assert not ring_files(sender.namespace.token)


sizes = st.integers(0, 3 * MIN_BYTES_LIST // 2)
columns = st.one_of(
    st.tuples(st.just("array"), sizes, st.sampled_from(["u1", "<i4", "<f8", "<i8"])),
    st.tuples(st.just("ragged"), sizes, st.sampled_from(["<i4", "<f4"])),
    st.tuples(st.just("bytes"), sizes, st.just("")),
    st.tuples(st.just("str"), sizes, st.just("")),
)


def build(kind: str, nbytes: int, dtype: str, rows: int, rng: np.random.Generator) -> object:
    if kind in ("array", "ragged"):
        dt = np.dtype(dtype)
        count = max(nbytes // dt.itemsize // rows, 1)
        if kind == "array":
            return rng.integers(0, 100, (rows, count)).astype(dt)
        lengths = rng.integers(0, 2 * count + 1, rows)
        offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
        return Ragged(rng.integers(0, 100, int(offsets[-1])).astype(dt), offsets)
    lengths = rng.integers(0, max(2 * nbytes // rows, 1) + 1, rows)
    if kind == "bytes":
        return [rng.bytes(int(n)) for n in lengths]
    return ["x" * int(n) for n in lengths]


def goes_to_ring(column: object) -> bool:
    if isinstance(column, Ragged | np.ndarray):
        return getattr(column, "values", column).nbytes >= MIN_LEAF_BYTES
    bytes_list = isinstance(column, list) and all(type(x) in (bytes, memoryview) for x in column)
    return bytes_list and sum(map(len, column)) >= MIN_BYTES_LIST


@settings(max_examples=40, deadline=None)
@given(cols=st.lists(columns, min_size=1, max_size=4), rows=st.integers(1, 9),
       seed=st.integers(0, 2**16), repeats=st.integers(1, 5))
def test_unpacked_batches_equal_the_sent_ones(cols, rows, seed, repeats) -> None:
    rng = np.random.default_rng(seed)
    sender = Sender(new_token(), 1, 2, ProcessId.current(), timeout=2.0)
    receiver = Receiver()
    try:
        for _ in range(repeats):
            batch = {"id": np.arange(rows), "none": [None] * rows}
            batch.update({f"c{i}": build(*col, rows, rng) for i, col in enumerate(cols)})
            sent = sender.pack(batch)
            got = receiver.unpack(sent)
            assert_same(got, batch)
            assert isinstance(sent, Packed) == any(map(goes_to_ring, batch.values()))
            if isinstance(sent, Packed):  # the copy owns its memory: the slot can be reused
                assert not sender.ring.flags.any()
    finally:
        receiver.close()
        sender.close()
    assert not ring_files(sender.namespace.token)


def test_slot_reuse_waits_for_the_consumer(pair) -> None:
    sender, receiver = pair
    batches = [{"b": [bytes([i]) * BIG]} for i in range(4)]
    sent = [sender.pack(b) for b in batches[:3]]
    assert [p.slot for p in sent] == [0, 1, 2]

    def consume_late() -> None:
        time.sleep(0.3)
        sent.append(receiver.unpack(sent[0]))

    thread = threading.Thread(target=consume_late)
    start = time.monotonic()
    thread.start()
    fourth = sender.pack(batches[3])  # slot 0 again: waits until the consumer released it
    thread.join()
    assert time.monotonic() - start >= 0.25 and fourth.slot == 0
    assert sent[-1] == batches[0]
    assert receiver.unpack(fourth) == batches[3]
    with pytest.raises(DeadlineExceeded, match="slot 1"):
        sender.pack(batches[0])  # slot 1 is still held


def test_a_batch_larger_than_a_slot_gets_a_new_ring(pair) -> None:
    sender, receiver = pair
    small = {"x": np.ones(BIG, np.uint8)}
    large = {"x": np.arange(2 * BIG, dtype=np.int64), "b": [b"z" * BIG] * 3}
    first = sender.pack(small)
    second = sender.pack(large)  # the first ring is still busy: it is retired, not removed
    assert (first.gen, second.gen) == (0, 1) and first.ring != second.ring
    assert len(sender.retired) == 1
    assert_same(receiver.unpack(first), small)
    assert_same(receiver.unpack(second), large)
    third = sender.pack(small)  # fits the new ring; the idle old one is removed
    assert third.gen == 1 and not sender.retired
    assert_same(receiver.unpack(third), small)
    assert list(receiver.rings) == [second.ring]


def test_a_dead_main_process_stops_the_wait() -> None:
    child = subprocess.Popen(["true"])
    child.wait()
    orphan = Sender(new_token(), 0, 1, ProcessId(child.pid, 1), timeout=30.0)
    try:
        orphan.pack({"b": [b"a" * BIG]})
        start = time.monotonic()
        with pytest.raises(CoordinationError, match="main process"):
            orphan.pack({"b": [b"b" * BIG]})
        assert time.monotonic() - start < 5
    finally:
        orphan.close()


def test_a_missing_ring_is_a_typed_error(pair) -> None:
    sender, receiver = pair
    packed = sender.pack({"b": [b"a" * BIG]})
    sender.close()
    with pytest.raises(CoordinationError, match="worker 0"):
        receiver.unpack(packed)


@pytest.mark.parametrize("total", [MIN_BYTES_LIST // 4, 3 * MIN_BYTES_LIST])
def test_views_of_a_read_buffer_arrive_as_bytes(pair, total: int) -> None:
    # iter_batches(views=True) hands the sender memoryviews of the read buffer: copied into
    # the ring when large, made bytes for the pipe when small (a memoryview cannot be pickled).
    sender, receiver = pair
    buffer = bytearray(np.random.default_rng(0).bytes(total))
    cuts = [0, 7, total // 3, total // 3, total - 1, total]
    views = [memoryview(buffer)[a:b] for a, b in pairwise(cuts)]
    want = [bytes(v) for v in views]
    sent = sender.pack({"id": np.arange(len(views)), "blob": views})
    assert isinstance(sent, Packed) == (total >= MIN_BYTES_LIST)
    if not isinstance(sent, Packed):
        assert [type(v) for v in sent["blob"]] == [bytes] * len(views)
    buffer[:] = bytes(total)  # the reader reuses nothing, but the batch must not depend on it
    got = receiver.unpack(pickle.loads(pickle.dumps(sent)))
    assert got["blob"] == want and all(type(v) is bytes for v in got["blob"])


def test_only_a_worker_with_a_ring_reads_views(tmp_path: Path, monkeypatch) -> None:
    with MDSWriter(columns={"id": "int", "blob": "bytes"}, out=tmp_path / "d") as writer:
        for i in range(4):
            writer.write({"id": i, "blob": b"x" * i})
    ds = StreamingDataset(local=tmp_path / "d", batch_size=2)
    calls = []
    monkeypatch.setattr(ds, "iter_batches", lambda *args, **kw: calls.append(kw) or iter(()))
    stream = BatchStream(ds, 2, False)
    stream.numpy = True
    iter(stream)  # the training process (no worker): copies
    stream.ring = RingAddress(new_token(), 3, ProcessId.current())
    monkeypatch.setattr("streaming.loader.batch_stream.worker_slot",
                        lambda: SimpleNamespace(id=0, num_workers=1))
    iter(stream)  # a worker whose sender copies each batch into its ring: views
    assert [kw.get("views", False) for kw in calls] == [False, True]


@pytest.fixture
def blobs_dir(tmp_path: Path) -> Path:
    rng = np.random.default_rng(1)
    with MDSWriter(columns={"id": "int", "blob": "bytes", "text": "str",
                            "tokens": "ndarray:int32", "img": "ndarray:uint8"},
                   out=tmp_path / "blobs", size_limit=1 << 20) as writer:
        for i in range(96):
            writer.write({"id": i, "blob": rng.bytes(int(rng.integers(20_000, 80_000))),
                          "text": f"t{i}", "img": np.full((128, 128), i, np.uint8),
                          "tokens": rng.integers(0, 9, int(rng.integers(1, 6_000)), np.int32)})
    return tmp_path / "blobs"


def loader(local: Path, workers: int, **kwargs) -> StreamingDataLoader:
    return StreamingDataLoader(StreamingDataset(local=local, batch_size=8), batch_size=8,
                               num_workers=workers, **kwargs)


def test_loader_batches_equal_the_in_process_ones(blobs_dir: Path, monkeypatch) -> None:
    packed = []
    unpack = Receiver.unpack
    monkeypatch.setattr(Receiver, "unpack",
                        lambda self, item: unpack(self, packed.append(item) or item))
    ring = loader(blobs_dir, 2)
    got = list(ring)
    # Every batch but the first, which this process reads (streaming/loader/first_batch.py).
    assert len(packed) == 11 and all(isinstance(p, Packed) for p in packed)
    want = list(loader(blobs_dir, 0))
    assert len(got) == len(want) == 12
    for a, b in zip(got, want):
        assert_same(a, b)
    assert ring.state_dict()["epoch"] == 1
    assert ring._receiver is not None and not ring._receiver.rings  # closed after the epoch
    assert not ring_files(ring._batch_stream.ring.token)


def test_slow_consumer_persistent_workers_and_no_leftovers(blobs_dir: Path) -> None:
    ring = loader(blobs_dir, 2, persistent_workers=True, prefetch_factor=1)
    tokens = []
    for epoch in range(2):
        ids = []
        for batch in ring:
            time.sleep(0.02)
            ids += batch["id"].tolist()
            assert all(len(b) for b in batch["blob"])
        assert sorted(ids) == list(range(96)), epoch
        tokens.append(ring._batch_stream.ring.token)
    assert tokens[0] == tokens[1]  # persistent workers keep their rings
    assert len(ring._receiver.rings) == 2
    partial = loader(blobs_dir, 2)
    next(iter(partial))
    names = [partial._batch_stream.ring.token, tokens[0]]
    del ring, partial
    gc.collect()
    deadline = time.monotonic() + 30  # worker shutdown is slow on a loaded machine
    while any(map(ring_files, names)) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not any(map(ring_files, names))


def _children() -> list[int]:
    me = os.getpid()
    with open(f"/proc/{me}/task/{me}/children") as f:
        return [int(pid) for pid in f.read().split()]


@pytest.mark.slow
def test_a_killed_worker_is_an_error_not_a_hang(blobs_dir: Path) -> None:
    before = set(_children())
    batches = iter(loader(blobs_dir, 2, prefetch_factor=1))
    next(batches)
    next(batches)  # the first was read in this process; the workers run from the second
    workers = [pid for pid in _children() if pid not in before]
    assert workers
    os.kill(workers[0], signal.SIGKILL)
    start = time.monotonic()
    with pytest.raises(RuntimeError, match="worker"):
        drain(batches)
    assert time.monotonic() - start < 30


def _send_and_exit(token: str, parent: ProcessId, out) -> None:
    sender = Sender(token, 0, 2, parent, timeout=30.0)
    out.put(sender.pack({"b": [b"z" * BIG]}))
    # returns at once: the process exits with its last batch not yet taken by the main process


def test_a_worker_that_exits_first_keeps_its_last_batch_readable() -> None:
    import multiprocessing

    ctx = multiprocessing.get_context("spawn")
    token, out = new_token(), ctx.Queue()
    worker = ctx.Process(target=_send_and_exit, args=(token, ProcessId.current(), out))
    worker.start()
    packed = out.get(timeout=60)
    time.sleep(0.5)  # the worker has finished its work and is exiting meanwhile
    receiver = Receiver()
    try:
        assert_same(receiver.unpack(packed), {"b": [b"z" * BIG]})
    finally:
        receiver.close()
    worker.join(timeout=30)
    assert worker.exitcode == 0
    assert ring_files(token) == []
