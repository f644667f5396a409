"""Named numpy arrays in shared memory with an owner who is known, and reclaimed once dead.

A segment is a file `<shm dir>/<name>`: a 128-byte header (owner process, creation time, dtype,
shape) followed by the array bytes. The creator holds an exclusive flock on it for as long as it
lives; when the creator dies the kernel drops the flock and the next `create` of the same name,
or any `clean_stale_shared_memory()`, removes the leftover. See `shm_files.py` for the
discipline.

A *held* segment (`held=True` on `create` and `attach`) belongs to every process that maps it
instead: each holds a shared flock while it maps it, the last to close removes the name, and
one nobody holds (all its processes died) is a leftover that `attach` removes. So it outlives
its creator while others still use it.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import mmap
import multiprocessing.util as mp_util
import os
import re
import secrets
import struct
import time
import weakref
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
from numpy.typing import DTypeLike

from streaming.coord.proc import ProcessId
from streaming.coord.shm_files import (
    PREFIX,
    file_id,
    names_file,
    names_inode,
    our_files,
    reclaim_if_free,
    shm_dir,
    try_flock,
)
from streaming.errors import CoordinationError

_MAGIC = b"SDSARR01"
_HEADER = struct.Struct("<8sQQQQI4x16s8Q")  # magic, pid, start, pidns, created_ns, ndim, dtype
HEADER_SIZE = 128
MAX_NDIM = 8
HOLD_TIMEOUT = 10.0  # an exclusive flock on a held segment is only ever taken for a moment
MAX_NAME = 31  # POSIX shm names on macOS; we keep to it although ours are plain files
_NAME = re.compile(r"^[A-Za-z0-9_.-]+$")


class SegmentMissingError(CoordinationError, FileNotFoundError):
    """No shared segment of that name exists (yet)."""


def _check_name(name: str) -> None:
    if not (isinstance(name, str) and len(name) <= MAX_NAME and _NAME.match(name)):
        raise CoordinationError(
            f"shared array name {name!r} must be 1-{MAX_NAME} characters of [A-Za-z0-9_.-]"
        )


def _pack_header(owner: ProcessId, shape: tuple[int, ...], dtype: np.dtype) -> bytes:
    dims = list(shape) + [0] * (MAX_NDIM - len(shape))
    return _HEADER.pack(
        _MAGIC, owner.pid, owner.start, owner.pidns, time.time_ns(), len(shape),
        dtype.str.encode(), *dims,
    )


def _read_header(fd: int, path: Path) -> tuple[ProcessId, int, tuple[int, ...], np.dtype]:
    raw = os.pread(fd, _HEADER.size, 0)
    if len(raw) < _HEADER.size or raw[:8] != _MAGIC:
        raise CoordinationError(f"{path} is not a streaming shared array (bad or partial header)")
    _, pid, start, pidns, created, ndim, dt, *dims = _HEADER.unpack(raw)
    if ndim > MAX_NDIM:
        raise CoordinationError(f"{path} has a corrupt header (ndim={ndim})")
    return ProcessId(pid, start, pidns), created, tuple(dims[:ndim]), np.dtype(dt.rstrip(b"\0"))


def _reserve(fd: int, size: int, path: Path) -> None:
    """Allocate all pages now, so a full /dev/shm raises here instead of SIGBUS on first write."""
    try:
        os.posix_fallocate(fd, 0, size)
    except AttributeError:
        os.ftruncate(fd, size)
    except OSError as exc:
        if exc.errno in (errno.ENOSPC, errno.ENOMEM, errno.EFBIG):
            raise CoordinationError(
                f"no room for {size} bytes of shared memory at {path} ({exc.strerror}); "
                f"enlarge /dev/shm (e.g. docker --shm-size) or set $STREAMING_SHM_DIR"
            ) from exc
        if exc.errno not in (errno.EOPNOTSUPP, errno.EINVAL):
            raise
        os.ftruncate(fd, size)


def _release_owned(fd: int, path: Path, creator: int) -> None:
    """Finalizer of an owned segment: unlink it, then drop the flock (only in the creator)."""
    if os.getpid() != creator:
        return  # a forked child inherited the fd; the segment is not its to remove
    with contextlib.suppress(OSError):
        if names_inode(path, fd):
            os.unlink(path)
    os.close(fd)


def _release_held(fd: int, path: Path, opener: int) -> None:
    """Finalizer of a held segment's mapping: drop this process's hold, and remove the name
    when no other process holds the segment (only in the process that opened `fd`)."""
    if os.getpid() != opener:
        return  # a forked child inherited the fd; its own mapping, if any, holds its own
    with contextlib.suppress(OSError):
        # Granted only when no other open file holds the segment; a refusal drops our hold.
        if try_flock(fd) and names_inode(path, fd):
            os.unlink(path)
    os.close(fd)


def _hold(fd: int, path: Path) -> None:
    """Take a shared hold of the held segment open as `fd`; SegmentMissingError when nobody
    held it (a leftover of processes that died, removed here) or its last holder removed it
    meanwhile."""
    if try_flock(fd):
        if names_inode(path, fd):
            os.unlink(path)
        raise SegmentMissingError(f"shared array {path} was left by processes that died")
    deadline = time.monotonic() + HOLD_TIMEOUT
    while not try_flock(fd, shared=True):  # its last holder is removing it, or a reclaimer
        if time.monotonic() > deadline:
            raise CoordinationError(f"shared array {path} stayed locked for {HOLD_TIMEOUT} s")
        time.sleep(0.001)
    if not names_inode(path, fd):
        raise SegmentMissingError(f"shared array {path} was removed by its last holder")


def _describe_owner(path: Path) -> tuple[bool, str]:
    """(whether the creator of `path` is alive, a sentence naming it) for collision handling."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return False, f"shared array {path} vanished"
    try:
        owner, created, _, _ = _read_header(fd, path)
    except CoordinationError as exc:
        return True, str(exc)
    finally:
        os.close(fd)
    age = (time.time_ns() - created) / 1e9
    if owner.alive():
        who = f"owned by live {owner}"
    else:
        who = f"held by a process forked from {owner}, which exited"
    return owner.alive(), (
        f"shared array {path} already exists, {who}, created {age:.1f} s ago: "
        f"another job or dataset uses the same namespace"
    )


class SharedArray:
    """A numpy array in a named shared-memory segment.

    `create` makes and owns it (removed on `close`, garbage collection, exit or the owner's
    death); `attach` maps an existing one, read-only by default, without copying. A held
    segment is removed instead when the last process that maps it closes it (see the module).
    """

    def __init__(
        self, name: str, path: Path, mm: mmap.mmap, array: np.ndarray, owner: ProcessId,
        created_ns: int, finalizer: weakref.finalize | None, file_id: tuple[int, int],
    ) -> None:
        self.name = name
        self.path = path
        self.file_id = file_id  # (st_dev, st_ino) of the mapped file
        self.owner = owner
        self.created_ns = created_ns
        self.array = array
        self._mmap = mm
        self._finalizer = finalizer
        self.held = False  # this mapping holds the segment (see the module)

    @property
    def owned(self) -> bool:
        """Whether this handle created the segment and removes it when closed (a held
        segment's creator does not: its last holder does)."""
        return self._finalizer is not None and not self.held

    @classmethod
    def create(
        cls, name: str, shape: Sequence[int] | int, dtype: DTypeLike, *, fill: int = 0,
        directory: Path | None = None, held: bool = False,
    ) -> SharedArray:
        """Create segment `name` owned by this process, replacing a dead owner's leftover.

        Raises CoordinationError naming the owner when a live process already owns the name.
        The array starts as zeros, or every element equal to `fill`. With `held`, the segment
        lives until the last process mapping it (attached with `held` too) closes it.
        """
        _check_name(name)
        dt = np.dtype(dtype)
        if isinstance(shape, (int, np.integer)):
            shape = (shape,)
        shp = tuple(int(d) for d in shape)
        if len(shp) > MAX_NDIM or any(d < 0 for d in shp):
            raise CoordinationError(f"shared array {name!r}: invalid shape {shp}")
        if dt.hasobject:
            raise CoordinationError(f"shared array {name!r}: object dtype cannot be shared")
        directory = directory or shm_dir()
        path = directory / name
        owner = ProcessId.current()
        size = HEADER_SIZE + int(np.prod(shp, dtype=np.int64)) * dt.itemsize
        release = _release_held if held else _release_owned
        fd = cls._publish_new(path, _pack_header(owner, shp, dt), size, shared=held)
        try:
            mm = mmap.mmap(fd, size, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
            created = _HEADER.unpack(os.pread(fd, _HEADER.size, 0))[4]
        except BaseException:
            release(fd, path, owner.pid)
            raise
        array = np.ndarray(shp, dt, buffer=mm, offset=HEADER_SIZE)
        if fill:
            array.fill(fill)
        self = cls(name, path, mm, array, owner, created, None, file_id(os.fstat(fd)))
        self._finalize_with(release, fd, held)
        return self

    def _finalize_with(self, release: Callable[[int, Path, int], None], fd: int,
                       held: bool) -> None:
        """Make `release(fd, path, pid)` run when this mapping is closed, collected or its
        process exits."""
        self.held = held
        self._finalizer = weakref.finalize(self, release, fd, self.path, os.getpid())
        # A multiprocessing child (a DataLoader worker) ends in os._exit, which skips the atexit
        # hook of weakref.finalize; multiprocessing's own exit finalizers do run there.
        mp_util.Finalize(self, self._finalizer, exitpriority=0)

    @staticmethod
    def _publish_new(path: Path, header: bytes, size: int, *, shared: bool = False) -> int:
        """Write header + space to a private temp file, then link it to `path` atomically.

        The link fails if `path` exists, so nobody ever sees a partial header. Returns the fd,
        which holds the flock that marks the segment alive (exclusive, or `shared` for a held
        segment).
        """
        while True:
            tmp = path.with_name(f"{path.name}.{secrets.token_hex(4)}.tmp")
            fd = os.open(tmp, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600)
            # Only a sweeper can hold it, and only briefly.
            fcntl.flock(fd, fcntl.LOCK_SH if shared else fcntl.LOCK_EX)
            if os.fstat(fd).st_nlink:
                break
            os.close(fd)  # swept before we locked it: start over
        try:
            os.pwrite(fd, header, 0)
            _reserve(fd, size, path)
            message = ""
            for _ in range(100):
                try:
                    os.link(tmp, path)
                    return fd
                except FileExistsError:
                    if reclaim_if_free(path):
                        continue
                alive, message = _describe_owner(path)
                if alive:
                    raise CoordinationError(message)
                time.sleep(0.01)  # a dead owner's file that someone else is removing right now
            raise CoordinationError(message or f"could not create shared array {path}")
        except BaseException:
            os.close(fd)
            raise
        finally:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp)

    @classmethod
    def attach(
        cls, name: str, shape: Sequence[int] | None = None, dtype: DTypeLike | None = None, *,
        writable: bool = False, directory: Path | None = None, held: bool = False,
    ) -> SharedArray:
        """Map existing segment `name` (zero copy); `shape`/`dtype`, if given, must match.

        Raises SegmentMissingError when no such segment exists. With `held` (for a segment
        created with `held`), this process holds the segment until it closes the mapping;
        a held segment nobody holds is a leftover, removed here (SegmentMissingError).
        """
        _check_name(name)
        path = (directory or shm_dir()) / name
        try:
            fd = os.open(path, os.O_RDWR if writable else os.O_RDONLY)
        except FileNotFoundError:
            raise SegmentMissingError(f"no shared array {name!r} in {path.parent}") from None
        try:
            if held:
                _hold(fd, path)
            owner, created, shp, dt = _read_header(fd, path)
            want_shape = shp if shape is None else tuple(shape)
            want_dtype = dt if dtype is None else np.dtype(dtype)
            if (want_shape, want_dtype) != (shp, dt):
                raise CoordinationError(
                    f"shared array {path} holds {dt}{list(shp)}, expected "
                    f"{want_dtype}{list(want_shape)}"
                )
            size = HEADER_SIZE + int(np.prod(shp, dtype=np.int64)) * dt.itemsize
            if os.fstat(fd).st_size < size:
                raise CoordinationError(f"shared array {path} is truncated")
            prot = mmap.PROT_READ | (mmap.PROT_WRITE if writable else 0)
            mm = mmap.mmap(fd, size, mmap.MAP_SHARED, prot)
            mapped = file_id(os.fstat(fd))
        except BaseException:
            os.close(fd)
            raise
        if not held:
            os.close(fd)  # the mapping outlives the descriptor
        array = np.ndarray(shp, dt, buffer=mm, offset=HEADER_SIZE)
        self = cls(name, path, mm, array, owner, created, None, mapped)
        if held:
            self._finalize_with(_release_held, fd, held=True)
        return self

    def linked(self) -> bool:
        """Whether the segment's name still names this mapping's file (its creator removes the
        name when it closes it; a later `create` may reuse the name for another file)."""
        return names_file(self.path, self.file_id)

    def owner_alive(self) -> bool:
        """Whether the creating process still runs."""
        return self.owner.alive()

    def close(self) -> None:
        """Unmap; if owned, also remove the name (existing mappings elsewhere stay valid); if
        held, drop the hold, and remove the name when no other process holds it."""
        if self._finalizer is not None:
            self._finalizer()
        self.array = np.empty(0)
        # While views of the array live, the mapping stays until the last of them goes.
        with contextlib.suppress(BufferError):
            self._mmap.close()

    def __enter__(self) -> SharedArray:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        role = "held" if self.held else "owned" if self.owned else "attached"
        return f"SharedArray({self.name!r}, {self.array.dtype}{list(self.array.shape)}, {role})"


def clean_stale_shared_memory(directory: Path | None = None) -> int:
    """Remove this user's segments and lock files whose owners died; return how many.

    Kept for compatibility: creation reclaims leftovers by itself, so nobody needs to call it.

    Args:
        directory: Where the segments live; None: $STREAMING_SHM_DIR, else /dev/shm, else a
            per-user temp folder. Not in the reference.
    """
    return sum(reclaim_if_free(path) for path in our_files(directory or shm_dir()))


__all__ = ["PREFIX", "SegmentMissingError", "SharedArray", "clean_stale_shared_memory"]
