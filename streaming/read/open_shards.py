"""The shard readers a process keeps open, bounded so a dataset of many thousand shards stays
within the open-file limit (`ulimit -n`): beyond `capacity`, the least recently used reader is
closed (it re-opens, and re-validates, if it is needed again)."""

from __future__ import annotations

import errno
import resource
from collections import OrderedDict
from collections.abc import Iterator
from typing import Protocol

from streaming.errors import TooManyOpenFilesError
from streaming.format.shard import ShardReader
from streaming.util.fork_safe_lock import ForkSafeLock

FDS_PER_READER = 2  # the mapping's descriptor and the one positional reads use
RESERVED_FDS = 128  # left for everything else the process opens (sockets, pipes, libraries)
MIN_CAPACITY = 32  # readers one chunk read may use at once (see PassReaders.group_shards)


def open_file_limit() -> int:
    """This process's soft limit on open files (RLIMIT_NOFILE)."""
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    return soft if soft != resource.RLIM_INFINITY else 1 << 20


def default_capacity() -> int:
    """Readers to keep open: what the open-file limit leaves after RESERVED_FDS, at least
    MIN_CAPACITY."""
    return max(MIN_CAPACITY, (open_file_limit() - RESERVED_FDS) // FDS_PER_READER)


def too_many_open_files(exc: OSError, what: str) -> OSError:
    """A TooManyOpenFilesError for an EMFILE/ENFILE `exc` while opening `what`, else `exc`."""
    if exc.errno not in (errno.EMFILE, errno.ENFILE):
        return exc
    return TooManyOpenFilesError(
        exc.errno, f"{what}: too many open files (this process may open {open_file_limit()}; "
                   f"{exc.strerror}); raise the limit (ulimit -n 65536) or close other datasets")


class ReaderOpener(Protocol):
    """What opens a shard's reader on a miss (the row reader: made ready, then opened)."""

    def open_prepared(self, shard: int) -> ShardReader:
        """A reader of `shard`, made ready on this node first."""


class OpenShards:
    """Readers by shard id, at most `capacity` open, least recently used closed first.

    Thread-safe. A closed reader whose samples are still referenced keeps its mapping (and
    descriptor) until those samples are dropped.

    Args:
        opener: opens a shard's reader on a miss.
        capacity: readers kept open at once; None: `default_capacity()`.
    """

    def __init__(self, opener: ReaderOpener, capacity: int | None = None) -> None:
        self._opener = opener
        self.capacity = max(int(capacity or default_capacity()), 1)
        self._readers: OrderedDict[int, ShardReader] = OrderedDict()
        self._lock = ForkSafeLock()

    def get(self, shard: int) -> ShardReader:
        """The open reader of `shard` (opened by the opener on a miss)."""
        reader = self._readers.get(shard)
        if reader is not None:  # a hit needs no lock: both calls are atomic under the GIL
            try:  # noqa: SIM105 (a hot path: contextlib.suppress costs more than the call)
                self._readers.move_to_end(shard)
            except KeyError:  # closed by another thread just now; this caller may still use it
                pass
            return reader
        try:
            reader = self._opener.open_prepared(shard)
        except OSError as exc:
            raise too_many_open_files(exc, f"shard {shard}") from exc
        with self._lock:
            raced = self._readers.get(shard)
            if raced is None:
                self._readers[shard] = reader
            closing = []
            while len(self._readers) > self.capacity:
                closing.append(self._readers.popitem(last=False)[1])
        if raced is not None:  # another thread opened it meanwhile: keep one
            closing.append(reader)
            reader = raced
        for old in closing:
            old.close()
        return reader

    def __contains__(self, shard: int) -> bool:
        return shard in self._readers

    def __len__(self) -> int:
        return len(self._readers)

    def __iter__(self) -> Iterator[ShardReader]:
        return iter(list(self._readers.values()))

    def forget(self, shard: int) -> None:
        """Close `shard`'s reader, if open (its file was evicted or replaced)."""
        with self._lock:
            reader = self._readers.pop(shard, None)
        if reader is not None:
            reader.close()

    def close(self) -> None:
        """Close every reader."""
        with self._lock:
            readers, self._readers = list(self._readers.values()), OrderedDict()
        for reader in readers:
            reader.close()

    def __getstate__(self) -> dict:
        return {"_opener": self._opener, "capacity": self.capacity}

    def __setstate__(self, state: dict) -> None:
        self._opener = state["_opener"]
        self.capacity = state["capacity"]
        self._readers = OrderedDict()
        self._lock = ForkSafeLock()
