"""Worker -> main batch transport through a persistent shared-memory ring per worker.

A DataLoader worker copies the large buffers of a collated numpy batch (numpy arrays, `Ragged`
values, lists of bytes) into a free slot of its ring and sends only a small `Packed` descriptor
through the worker queue; the main process copies them out into fresh arrays / bytes (the user
may keep a batch) and marks the slot free. Pipe transport pickles, writes, reads and unpickles
every byte; the ring's pages are reused, so after the first lap neither side faults on them.
Arrays from `streaming.loader.default_collate.SHARED_MIN_BYTES` up are already torch tensors in
shared memory (passed by file descriptor, no copy in the main process) and keep travelling that way.

Ring segment (a `SharedArray` of uint8): `HEAD` bytes of per-slot flags (1 = filled, 0 = free),
then `slots` slots of `slot_bytes`. The worker owns the file; the main process unlinks the name
as soon as it has mapped it, so nothing is left in /dev/shm once both sides let go. A loader's
receiver also keeps a one-byte `open` segment of its token while it lives: a worker that waits
for the main process (a free slot, or its last batches mapped before it removes its ring) stops
waiting once the receiver has closed, even if it made its ring after the receiver had removed
the rings it knew of (workers that start after the loop already left the iteration).
"""

from __future__ import annotations

import contextlib
import multiprocessing.util
import os
import secrets
import time
import weakref
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from streaming.coord.names import Namespace
from streaming.coord.proc import ProcessId
from streaming.coord.shm import SegmentMissingError, SharedArray
from streaming.coord.shm_files import shm_dir
from streaming.coord.wait import wait_for
from streaming.errors import CoordinationError
from streaming.loader.default_collate import Ragged

__all__ = ["MIN_BYTES_LIST", "MIN_LEAF_BYTES", "Packed", "Receiver", "RingAddress", "Sender",
           "new_token", "sender_for"]

MIN_LEAF_BYTES = 64 << 10  # smaller arrays are cheaper to pickle than to place
MIN_BYTES_LIST = 256 << 10  # so are smaller lists of bytes (per-item slicing costs more)
HEAD = 4096  # flags page; slots start page-aligned after it
ALIGN = 64
SLOT_WAIT = 600.0  # seconds a worker waits for the main process to free a slot
OPEN = "open"  # suffix of a receiver's segment: 1 while it lives


def new_token() -> str:
    """A fresh namespace token for one loader's rings."""
    return secrets.token_hex(6)


@dataclass(frozen=True)
class RingAddress:
    """Where a loader's workers send their batches.

    Args:
        token: the namespace of the loader's rings (`new_token`).
        slots: batches each worker's ring holds.
        reader: the training process whose `Receiver` reads them.
    """

    token: str
    slots: int
    reader: ProcessId


@dataclass(frozen=True)
class _Array:
    offset: int
    dtype: str
    shape: tuple[int, ...]


@dataclass(frozen=True)
class _Bytes:
    offset: int
    ends: np.ndarray  # int64 end offset of every item, relative to `offset`


@dataclass(frozen=True)
class Packed:
    """A batch whose large buffers wait in slot `slot` of ring `ring` (generation `gen` of
    worker `worker`); `tree` is the batch with those buffers replaced by slot references."""

    ring: str
    worker: int
    gen: int
    slot: int
    tree: Any


def _round(n: int, to: int) -> int:
    return -(-n // to) * to


def _is_bytes_list(value: Any) -> bool:
    """A list of bytes, or of memoryviews of bytes (`StreamingDataset.iter_batches(views=True)`),
    which arrive as bytes."""
    return (isinstance(value, list) and bool(value)
            and set(map(type, value)) <= {bytes, memoryview})


def _owned(value: Any) -> Any:
    """`value` with memoryviews made bytes, for the pipe (they cannot be pickled and would
    keep their read buffer alive)."""
    if isinstance(value, Mapping):
        return {key: _owned(item) for key, item in value.items()}
    if isinstance(value, list) and any(type(item) is memoryview for item in value):
        return [bytes(item) if type(item) is memoryview else item for item in value]
    return value


def _leaf_bytes(value: Any) -> int:
    """Ring bytes `value` would take (0: it stays in the descriptor)."""
    if isinstance(value, np.ndarray):
        big = value.dtype.kind in "biuf" and value.nbytes >= MIN_LEAF_BYTES
        return _round(value.nbytes, ALIGN) if big else 0
    if _is_bytes_list(value):
        total = sum(map(len, value))
        return _round(total, ALIGN) if total >= MIN_BYTES_LIST else 0
    return 0


def _need(batch: Any) -> int:
    if isinstance(batch, Mapping):
        return sum(map(_need, batch.values()))
    if isinstance(batch, Ragged):
        return _leaf_bytes(batch.values)
    return _leaf_bytes(batch)


def _drain_then_close(name: str, flags: np.ndarray, shm: SharedArray, timeout: float,
                      gone: Callable[[], str | None]) -> None:
    """Remove a ring, but not before the main process has mapped it while it still holds
    batches: a worker that finishes its share exits while its last batches may wait in the
    result queue. The main process unlinks the name as soon as it maps a ring (and on close
    removes every ring of its token), so "name gone or nothing filled" ends the wait; it is
    bounded by `timeout` and ends at once if the main process is gone."""
    if flags.any() and shm.path.exists():
        with contextlib.suppress(CoordinationError):  # DeadlineExceeded included
            wait_for(lambda: not (flags.any() and shm.path.exists()),
                     what=f"the main process to map {name}", timeout=timeout, alive=gone)
    shm.close()


class _Ring:
    """One worker's segment: flags + slots, created and owned by this process."""

    def __init__(self, name: str, slots: int, slot_bytes: int, timeout: float,
                 gone: Callable[[], str | None]) -> None:
        self.name = name
        self.slots = slots
        self.slot_bytes = slot_bytes
        self.shm = SharedArray.create(name, HEAD + slots * slot_bytes, np.uint8)
        self.flags = self.shm.array[:slots]
        self.view = memoryview(self.shm.array)  # type: ignore[arg-type]
        # DataLoader workers leave through os._exit: atexit (weakref.finalize) never runs there.
        self._final = multiprocessing.util.Finalize(
            self, _drain_then_close, args=(name, self.flags, self.shm, timeout, gone),
            exitpriority=10)

    def idle(self) -> bool:
        return not self.flags.any()

    def close(self) -> None:
        self._final()


class Sender:
    """Worker side: `pack(batch)` places a batch's large buffers in a free slot and returns
    its `Packed` descriptor, or the batch itself when nothing in it is worth placing."""

    def __init__(self, token: str, worker: int, slots: int, parent: ProcessId, *,
                 timeout: float = SLOT_WAIT, watch_receiver: bool = False) -> None:
        if slots < 1:
            raise ValueError(f"a transport ring needs at least 1 slot, got {slots}")
        self.namespace = Namespace(token)
        # The receiver's `open` byte (None: gone already); unwatched without `watch_receiver`.
        self.receiver_open: SharedArray | None = None
        self.watch_receiver = watch_receiver
        if watch_receiver:
            with contextlib.suppress(SegmentMissingError):
                self.receiver_open = SharedArray.attach(self.namespace.name(OPEN))
        self.worker = worker
        self.slots = slots
        self.timeout = timeout
        self.parent = parent
        self.gen = -1
        self.ring: _Ring | None = None
        self.retired: list[_Ring] = []
        self.next = 0

    def pack(self, batch: Any) -> Any:
        """The descriptor to send instead of `batch` (or `batch` when it is small)."""
        need = _need(batch)
        if not need:
            return _owned(batch)
        ring = self._ring_for(need)
        slot = self.next
        self.next = (slot + 1) % ring.slots
        if ring.flags[slot]:
            self._wait(ring, slot)
        base = HEAD + slot * ring.slot_bytes
        cursor = [base]
        tree = _place(batch, ring.view, cursor)
        ring.flags[slot] = 1
        return Packed(ring.name, self.worker, self.gen, slot, tree)

    def _ring_for(self, need: int) -> _Ring:
        for ring in [r for r in self.retired if r.idle()]:
            ring.close()
            self.retired.remove(ring)
        if self.ring is not None and need <= self.ring.slot_bytes:
            return self.ring
        if self.ring is not None:
            self.retired.append(self.ring)  # the main process may still read its slots
        self.gen += 1
        slot_bytes = _round(need + need // 8, 1 << 18)
        name = self.namespace.name(f"t{self.worker}.{self.gen}")
        self.ring = _Ring(name, self.slots, slot_bytes, self.timeout, self._parent_gone)
        self.next = 0
        return self.ring

    def _wait(self, ring: _Ring, slot: int) -> None:
        for _ in range(50):  # a consumer that is keeping up frees it within microseconds
            time.sleep(20e-6)
            if not ring.flags[slot]:
                return
        wait_for(lambda: not ring.flags[slot], what=f"transport slot {slot} of {ring.name} "
                 "to be released by the main process", timeout=self.timeout,
                 alive=self._parent_gone)

    def _parent_gone(self) -> str | None:
        if not self.parent.alive():
            return f"the main process ({self.parent}) exited"
        flag = self.receiver_open
        if self.watch_receiver and (flag is None or not flag.array[0]):
            return "the main process closed its end of the transport"
        return None

    def close(self) -> None:
        """Remove this worker's rings (names only; mappings elsewhere stay valid)."""
        for ring in [*self.retired, *([self.ring] if self.ring else [])]:
            ring.close()
        self.ring, self.retired = None, []


def _place(value: Any, view: memoryview, cursor: list[int]) -> Any:
    """`value` with its large buffers copied to `view` at `cursor[0]` (advanced past them)."""
    if isinstance(value, Mapping):
        return {key: _place(item, view, cursor) for key, item in value.items()}
    if isinstance(value, Ragged):
        return Ragged(_place(value.values, view, cursor), value.offsets)
    size = _leaf_bytes(value)
    if not size:
        return _owned(value)
    at = cursor[0]
    cursor[0] += size
    if isinstance(value, np.ndarray):
        out = np.frombuffer(view, value.dtype, value.size, at).reshape(value.shape)
        np.copyto(out, value, casting="no")
        return _Array(at, value.dtype.str, value.shape)
    ends = np.cumsum(np.fromiter(map(len, value), np.int64, len(value)))
    pos = at
    for item in value:
        view[pos:pos + len(item)] = item
        pos += len(item)
    return _Bytes(at, ends)


_senders: dict[tuple[int, str, int], Sender] = {}


def sender_for(token: str, worker: int, slots: int, parent: ProcessId) -> Sender:
    """This process's Sender for (token, worker) whose batches go to `parent` (a Receiver of
    `token`, whose `open` byte it watches): persistent workers keep their ring across epochs; a
    forked copy of a process gets its own."""
    key = (os.getpid(), token, worker)
    sender = _senders.get(key)
    if sender is None:
        for old in [k for k in _senders if k[0] != os.getpid()]:
            del _senders[old]  # inherited through fork: not ours to use or remove
        sender = _senders[key] = Sender(token, worker, slots, parent, watch_receiver=True)
    return sender


class Receiver:
    """Main side: `unpack(item)` turns a `Packed` descriptor back into the batch (copies out of
    the slot, then frees it); anything else passes through unchanged."""

    def __init__(self, token: str | None = None) -> None:
        self.rings: dict[str, tuple[int, int, SharedArray]] = {}  # name -> (worker, gen, map)
        self.token = token  # the workers' ring namespace: close() removes rings never mapped
        self.open: SharedArray | None = None  # 1 until close(): workers stop waiting at 0
        if token is not None:
            self.open = SharedArray.create(Namespace(token).name(OPEN), (1,), np.uint8, fill=1)
        self._release = weakref.finalize(self, _release_rings, self.rings, token, self.open)

    def unpack(self, item: Any) -> Any:
        """The batch `item` stands for, owning its memory."""
        if not isinstance(item, Packed):
            return item
        shm = self._attach(item)
        try:
            return _take(item.tree, memoryview(shm.array))  # type: ignore[arg-type]
        finally:
            shm.array[item.slot] = 0

    def _attach(self, item: Packed) -> SharedArray:
        entry = self.rings.get(item.ring)
        if entry is not None:
            return entry[2]
        try:
            shm = SharedArray.attach(item.ring, writable=True)
        except SegmentMissingError:
            raise CoordinationError(
                f"DataLoader worker {item.worker} sent a batch in transport ring {item.ring}, "
                "which no longer exists (the worker exited?)") from None
        with contextlib.suppress(FileNotFoundError):
            os.unlink(shm.path)  # both sides have it mapped: the name is no longer needed
        # Batches of one worker arrive in order: its older rings are done with.
        for name, (worker, gen, old) in list(self.rings.items()):
            if worker == item.worker and gen < item.gen:
                old.close()
                del self.rings[name]
        self.rings[item.ring] = (item.worker, item.gen, shm)
        if not self._release.alive:  # used again after close()
            self._release = weakref.finalize(self, _release_rings, self.rings, self.token, None)
        return shm

    def close(self) -> None:
        """Free every slot (a worker still waiting for one goes on; its batch is dropped) and
        unmap every ring. Also done at interpreter exit for a receiver never closed (a script
        that ends mid-epoch), before the modules it needs are torn down."""
        self._release()


def _release_rings(rings: dict[str, tuple[int, int, SharedArray]], token: str | None,
                   open_flag: SharedArray | None) -> None:
    if open_flag is not None and len(open_flag.array):
        open_flag.array[0] = 0
        open_flag.close()
    for _, _, shm in rings.values():
        shm.array[:HEAD] = 0
        shm.close()
    rings.clear()
    if token is not None:  # batches never reached: drop them, release their workers
        prefix = Namespace(token).name("t")
        for path in shm_dir().glob(f"{prefix}*"):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(path)


def _take(value: Any, view: memoryview) -> Any:
    if isinstance(value, dict):
        return {key: _take(item, view) for key, item in value.items()}
    if isinstance(value, Ragged):
        return Ragged(_take(value.values, view), value.offsets)
    if isinstance(value, _Array):
        count = int(np.prod(value.shape, dtype=np.int64))
        return np.frombuffer(view, value.dtype, count, value.offset).reshape(value.shape).copy()
    if isinstance(value, _Bytes):
        starts = [value.offset, *(value.ends[:-1] + value.offset).tolist()]
        stops = (value.ends + value.offset).tolist()
        return [bytes(view[a:b]) for a, b in zip(starts, stops)]
    return value
