"""Issue 48 item 1: a symbolic link planted in `local` under the name of a lock file this
library makes (the origin lock, the node lock, a shard's preparation lock, a download lock)
is never followed: the file it points at is not truncated or written, a dangling link's
target is not created. The run refuses the link with UnsafePathError (or reads correctly)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from streaming.coord.lock import FileLock
from streaming.errors import StreamingError, UnsafePathError
from streaming.storage.singleflight import single_flight
from tests.security.conftest import SAMPLES, Tree, clean_dataset, read_epoch

LOCKS = [".streaming-origin.lock", ".streaming-node.lock", ".shard.00000.mds.prep.lock",
         ".shard.00000.mds.lock"]


@pytest.mark.parametrize("dangling", [False, True], ids=["to-a-file", "dangling"])
@pytest.mark.parametrize("name", LOCKS)
def test_a_lock_name_linked_outside_is_never_followed(tree: Tree, publish, name, dangling):
    remote = publish(clean_dataset(tree.root / "source", compression=None))
    tree.local.mkdir()
    target = tree.canary / ("new.txt" if dangling else "victim.txt")
    (tree.local / name).symlink_to(target)
    before = tree.before()
    try:
        assert read_epoch(remote, tree.local) == list(range(SAMPLES))
    except StreamingError as exc:
        assert isinstance(exc, UnsafePathError), repr(exc)
        assert name in str(exc)
    tree.assert_untouched(before)


def test_file_lock_refuses_a_link_and_a_fifo(tmp_path: Path):
    victim = tmp_path / "victim"
    victim.write_bytes(b"keep")
    (tmp_path / "link.lock").symlink_to(victim)
    with pytest.raises(UnsafePathError, match="symbolic link"):
        FileLock(tmp_path / "link.lock").try_acquire()
    os.mkfifo(tmp_path / "fifo.lock")
    with pytest.raises(UnsafePathError, match="not a regular file"):
        FileLock(tmp_path / "fifo.lock").try_acquire()
    assert victim.read_bytes() == b"keep"
    assert FileLock(tmp_path / "link.lock").holder() is None  # never read through the link


def test_single_flight_refuses_a_linked_lock(tmp_path: Path):
    victim = tmp_path / "victim"
    (tmp_path / ".shard.mds.lock").symlink_to(victim)
    with pytest.raises(UnsafePathError), single_flight(tmp_path / "shard.mds", deadline=1e18):
        pass
    assert not victim.exists()
