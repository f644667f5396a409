"""Lock files in a cache folder a team shares: created like every other file (0666 minus the
umask), so a colleague's job in a group-writable folder waits for a held lock instead of dying
with PermissionError. The second user is a real process of another uid (root only)."""

from __future__ import annotations

import contextlib
import grp
import os
import pwd
import shutil
import stat
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from streaming.cache.folder.file_names import ORIGIN_LOCK
from streaming.cache.folder.shared_locks import folder_lock
from streaming.coord.lock import FileLock


@contextlib.contextmanager
def _umask(mask: int) -> Iterator[None]:
    old = os.umask(mask)
    try:
        yield
    finally:
        os.umask(old)


@pytest.mark.parametrize("mask,mode", [(0o002, 0o664), (0o022, 0o644), (0o077, 0o600)])
def test_lock_files_follow_the_umask(tmp_path: Path, mask: int, mode: int):
    path = tmp_path / ORIGIN_LOCK
    with _umask(mask), folder_lock(path, timeout=5.0):
        assert stat.S_IMODE(path.stat().st_mode) == mode


_PROBE = """
import errno, fcntl, os, sys
try:
    fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT, 0o666)
except PermissionError:
    print("permission"); raise SystemExit
try:
    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    print("taken")
except BlockingIOError:
    print("busy")
"""


def _other_user() -> tuple[int, int]:
    if os.geteuid() != 0 or shutil.which("setpriv") is None:
        pytest.skip("a second unix user needs root and setpriv")
    try:
        return pwd.getpwnam("nobody").pw_uid, grp.getgrnam("nogroup").gr_gid
    except KeyError:
        pytest.skip("no 'nobody'/'nogroup' account to run the second user as")


def _probe_as(uid: int, gid: int, path: Path) -> str:
    python = shutil.which("python3", path="/usr/bin:/bin") or sys.executable
    done = subprocess.run(
        ["setpriv", f"--reuid={uid}", f"--regid={gid}", "--clear-groups", python, "-c", _PROBE,
         str(path)], capture_output=True, text=True, timeout=30, check=True)
    return done.stdout.strip()


@pytest.fixture
def team_folder() -> Iterator[tuple[Path, int, int]]:
    """A group-writable folder every user can reach (pytest's own temp folders are 0700)."""
    uid, gid = _other_user()
    shared = Path(tempfile.mkdtemp(prefix="mds-team-"))
    try:
        os.chown(shared, 0, gid)
        shared.chmod(0o2775)  # group-writable, new files inherit the group
        yield shared, uid, gid
    finally:
        shutil.rmtree(shared, ignore_errors=True)


@pytest.mark.parametrize("name", [ORIGIN_LOCK, ".shard.00000.mds.prep.lock"])
def test_a_colleague_in_the_group_waits_for_our_lock(team_folder, name: str):
    shared, uid, gid = team_folder
    path = shared / name
    with _umask(0o002), folder_lock(path, timeout=5.0):
        assert _probe_as(uid, gid, path) == "busy"


def test_locks_in_the_shared_memory_folder_stay_private(tmp_path: Path):
    path = tmp_path / "sds_lead"
    with _umask(0o002), FileLock(path, timeout=5.0):
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
