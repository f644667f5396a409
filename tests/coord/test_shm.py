"""SharedArray: zero-copy sharing, owner-bound lifetime, reclamation of dead owners' segments."""

from __future__ import annotations

import multiprocessing as mp
import os
import signal
import uuid

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from streaming.coord import (
    SegmentMissingError,
    SharedArray,
    clean_stale_shared_memory,
    wait_for,
)
from streaming.coord.shm_files import shm_dir
from streaming.errors import CoordinationError
from tests.coord import workers
from tests.coord.helpers import CTX, kill, start


def unique() -> str:
    return f"sds_t{uuid.uuid4().hex[:12]}"


def test_attach_sees_owner_writes_without_copy():
    with SharedArray.create(unique(), (3, 4), np.float32) as owner:
        reader = SharedArray.attach(owner.name)
        assert reader.array.shape == (3, 4) and reader.array.dtype == np.float32
        assert not reader.array.flags.writeable
        owner.array[1, 2] = 5.5
        assert reader.array[1, 2] == 5.5
        writer = SharedArray.attach(owner.name, writable=True)
        writer.array[0, 0] = -1
        assert owner.array[0, 0] == -1
        assert reader.owner.pid == owner.owner.pid and reader.owner_alive()
        for handle in (reader, writer):
            handle.close()


def test_two_arrays_in_one_process():
    with SharedArray.create(unique(), 8, np.int64, fill=1) as a, \
            SharedArray.create(unique(), 8, np.int64, fill=2) as b:
        assert a.name != b.name
        assert (SharedArray.attach(a.name).array == 1).all()
        assert (SharedArray.attach(b.name).array == 2).all()


@given(
    shape=st.lists(st.integers(0, 5), min_size=0, max_size=4),
    dtype=st.sampled_from(["u1", "<i4", ">i8", "<f8", "<c16", "?", "S3", "<U2"]),
)
def test_roundtrip_any_shape_and_dtype(shape, dtype):
    data = np.zeros(shape, dtype)
    data.reshape(-1).view(np.uint8)[:] = np.arange(data.nbytes) % 251
    with SharedArray.create(unique(), shape, dtype) as owner:
        owner.array[...] = data
        got = SharedArray.attach(owner.name, shape, dtype)
        assert got.array.dtype == np.dtype(dtype) and got.array.shape == tuple(shape)
        assert got.array.tobytes() == data.tobytes()
        got.close()


def test_close_removes_the_name_but_not_existing_mappings():
    owner = SharedArray.create(unique(), 4, np.int64, fill=7)
    reader = SharedArray.attach(owner.name)
    view = reader.array
    owner.close()
    with pytest.raises(SegmentMissingError, match=owner.name):
        SharedArray.attach(owner.name)
    assert (view == 7).all()


def test_a_mapping_knows_when_its_name_is_gone_or_names_another_segment():
    owner = SharedArray.create(unique(), 4, np.int64)
    reader = SharedArray.attach(owner.name)
    assert owner.linked() and reader.linked()
    owner.close()
    assert not reader.linked()
    with SharedArray.create(owner.name, 4, np.int64) as again:  # the same name, a new file
        assert again.linked() and not reader.linked()
        assert SharedArray.attach(again.name).linked()
    reader.close()


def test_garbage_collected_owner_removes_its_segment():
    name = unique()
    SharedArray.create(name, 4, np.int64)  # dropped at once
    assert not (shm_dir() / name).exists()


def test_bad_arguments_are_named():
    with pytest.raises(CoordinationError, match="name"):
        SharedArray.create("x" * 40, 4, np.int64)
    with pytest.raises(CoordinationError, match="name"):
        SharedArray.create("a/b", 4, np.int64)
    with pytest.raises(CoordinationError, match="shape"):
        SharedArray.create(unique(), (-1,), np.int64)
    with pytest.raises(CoordinationError, match="object"):
        SharedArray.create(unique(), 2, object)
    with SharedArray.create(unique(), (2, 3), np.int64) as owner, \
            pytest.raises(CoordinationError, match=r"expected int32\[2, 3\]"):
        SharedArray.attach(owner.name, (2, 3), np.int32)


def test_not_a_segment_is_refused(tmp_path):
    (tmp_path / "sds_junk").write_bytes(b"hello")
    with pytest.raises(CoordinationError, match="sds_junk"):
        SharedArray.attach("sds_junk", directory=tmp_path)


@pytest.mark.slow
def test_live_owner_in_another_process_is_named(tmp_path):
    name = unique()
    proc = start(workers.hold_segment, name, str(tmp_path))
    try:
        with pytest.raises(CoordinationError, match=f"pid {proc.pid}"):
            SharedArray.create(name, 4, np.int64, directory=tmp_path)
        assert (SharedArray.attach(name, directory=tmp_path).array == 42).all()
    finally:
        kill(proc)


@pytest.mark.slow
def test_sigkilled_owners_segment_is_reclaimed_by_next_create(tmp_path):
    name = unique()
    kill(start(workers.hold_segment, name, str(tmp_path)))
    assert (tmp_path / name).exists()  # left behind by the dead owner
    with SharedArray.create(name, 4, np.int64, directory=tmp_path) as fresh:
        assert (fresh.array == 0).all()
        assert fresh.owner_alive()


@pytest.mark.slow
def test_clean_stale_removes_only_dead_owners_segments(tmp_path):
    dead = [unique(), unique()]
    for name in dead:
        kill(start(workers.hold_segment, name, str(tmp_path)))
    live_elsewhere = unique()
    proc = start(workers.hold_segment, live_elsewhere, str(tmp_path))
    try:
        with SharedArray.create(unique(), 4, np.int64, directory=tmp_path) as mine:
            (tmp_path / "not_ours").write_bytes(b"x")
            assert clean_stale_shared_memory(tmp_path) == 2
            remaining = sorted(p.name for p in tmp_path.iterdir())
            assert remaining == sorted([live_elsewhere, mine.name, "not_ours"])
            assert clean_stale_shared_memory(tmp_path) == 0
    finally:
        kill(proc)
    assert clean_stale_shared_memory(tmp_path) == 1


@pytest.mark.slow
def test_segment_still_held_by_a_dead_owners_fork_is_not_reclaimed(tmp_path):
    name, pids = unique(), CTX.Queue()
    owner = start(workers.hold_segment_and_fork, name, str(tmp_path), pids)
    grandchild = pids.get(timeout=10)
    kill(owner)
    try:
        with pytest.raises(CoordinationError, match=f"forked from pid {owner.pid}, which exited"):
            SharedArray.create(name, 4, np.int64, directory=tmp_path)
        assert clean_stale_shared_memory(tmp_path) == 0
    finally:
        os.kill(grandchild, signal.SIGKILL)
    wait_for(lambda: clean_stale_shared_memory(tmp_path) or None, what="release", timeout=10)
    assert not (tmp_path / name).exists()


def _close_inherited(seg: SharedArray) -> None:
    seg.close()


@pytest.mark.slow
def test_forked_child_closing_an_inherited_handle_keeps_the_segment():
    with SharedArray.create(unique(), 4, np.int64, fill=3) as owner:
        child = mp.get_context("fork").Process(target=_close_inherited, args=(owner,))
        child.start()
        child.join(timeout=10)
        assert child.exitcode == 0
        assert (SharedArray.attach(owner.name).array == 3).all()


def test_a_held_segment_outlives_its_creator_and_goes_with_its_last_holder(tmp_path):
    name, leave = unique(), CTX.Event()
    creator = start(workers.hold_shared_segment, name, str(tmp_path), True, leave)
    other = SharedArray.attach(name, directory=tmp_path, writable=True, held=True)
    assert "held" in repr(other) and not other.owned
    leave.set()
    creator.join(timeout=10)
    assert creator.exitcode == 0
    assert other.linked() and (other.array == 7).all()  # the creator left it to its holder
    assert clean_stale_shared_memory(tmp_path) == 0  # held, so not a leftover
    late = SharedArray.attach(name, directory=tmp_path, held=True)  # joins the same segment
    other.close()
    assert late.linked()  # another mapping (an open file of its own) still holds it
    late.close()
    assert not (tmp_path / name).exists()  # the last holder removed it


@pytest.mark.slow
def test_a_held_segment_nobody_holds_any_more_is_a_leftover(tmp_path):
    name = unique()
    kill(start(workers.hold_shared_segment, name, str(tmp_path), True, CTX.Event()))
    assert (tmp_path / name).exists()  # left behind by its only holder, killed
    with pytest.raises(SegmentMissingError, match="left by processes that died"):
        SharedArray.attach(name, directory=tmp_path, held=True)
    assert not (tmp_path / name).exists()
    with SharedArray.create(name, 4, np.int64, directory=tmp_path, held=True) as fresh:
        assert (fresh.array == 0).all()


def test_a_held_segment_locked_exclusively_too_long_is_named(tmp_path, monkeypatch):
    """An exclusive flock is only ever taken on a held segment for a moment (its last holder
    removing it); one kept longer than `HOLD_TIMEOUT` (here: a segment created without `held`,
    whose creator keeps it exclusively) is a CoordinationError, not a hang."""
    from streaming.coord import shm

    monkeypatch.setattr(shm, "HOLD_TIMEOUT", 0.2)
    with SharedArray.create(unique(), 4, np.int64, directory=tmp_path) as owned:
        with pytest.raises(CoordinationError, match=r"stayed locked for 0\.2 s"):
            SharedArray.attach(owned.name, directory=tmp_path, held=True)
        assert owned.linked()
