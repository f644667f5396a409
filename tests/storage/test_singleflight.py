"""single_flight / fetch_once on local files: mutual exclusion, deadlines, reuse of results."""

from __future__ import annotations

import os
import threading
import time

import pytest

from streaming.errors import DownloadTimeoutError
from streaming.storage import fetch_once, single_flight
from streaming.storage.singleflight import lock_path_for


def test_holders_never_overlap(tmp_path):
    dest = tmp_path / "shard.mds"
    inside, peak, lock = [0], [0], threading.Lock()

    def worker() -> None:
        for _ in range(25):
            with single_flight(dest, deadline=time.monotonic() + 30):
                with lock:
                    inside[0] += 1
                    peak[0] = max(peak[0], inside[0])
                time.sleep(0.0005)
                with lock:
                    inside[0] -= 1

    threads = [threading.Thread(target=worker) for _ in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert peak[0] == 1
    assert not lock_path_for(dest).exists()  # the lock file is cleaned up by the last holder


def test_waiter_gives_up_at_its_deadline(tmp_path):
    dest = tmp_path / "shard.mds"
    with single_flight(dest, deadline=time.monotonic() + 1):
        start = time.monotonic()
        with (
            pytest.raises(DownloadTimeoutError, match=r"shard\.mds: another process"),
            single_flight(dest, deadline=time.monotonic() + 0.2),
        ):
            pass
        assert 0.2 <= time.monotonic() - start < 2.0
    with single_flight(dest, deadline=time.monotonic() + 0.2):
        pass  # free again once released


def test_fetch_once_reuses_a_complete_file_and_replaces_a_partial_one(tmp_path):
    src = tmp_path / "remote.bin"
    src.write_bytes(b"0123456789")
    dest = tmp_path / "cache" / "remote.bin"
    dest.parent.mkdir()
    dest.write_bytes(b"01234")  # a stale partial copy of the wrong size
    assert fetch_once(str(src), dest, expected_size=10).read_bytes() == b"0123456789"
    src.unlink()  # the source is gone: a complete copy must be returned without touching it
    assert fetch_once(str(src), dest, expected_size=10).read_bytes() == b"0123456789"
    assert sorted(os.listdir(dest.parent)) == ["remote.bin"]


def test_lock_file_follows_the_umask_so_a_team_can_share_the_folder(tmp_path):
    """A cache folder shared by a team (umask 002, group-writable) must leave the lock file
    writable by the group, or a teammate's process cannot open it to wait for the download."""
    dest = tmp_path / "shard.mds"
    old = os.umask(0o002)
    try:
        with single_flight(dest, deadline=time.monotonic() + 30):
            mode = os.stat(lock_path_for(dest)).st_mode & 0o777
    finally:
        os.umask(old)
    assert mode == 0o664
