"""Shard preparation: make a shard's raw file ready to mmap on this node (copy from the stream's
remote, decompress, verify). The one door every read goes through, so a remote cache with
eviction can later sit behind the same interface."""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from streaming.cache.folder.cache_marker import mark_cache
from streaming.cache.folder.disk_files import listing, sweep_orphans
from streaming.cache.folder.verified_files import is_verified, mark_verified
from streaming.cache.prepare.zstd_unpack import unpack_zstd
from streaming.cache.shard_facts import ShardFacts
from streaming.errors import (
    DecompressionError,
    HashMismatchError,
    IndexFileError,
    ShardCorruptError,
    UnknownHashError,
)
from streaming.format.compression import ZstdStream, decompress_file, extension
from streaming.format.hashing import (
    SUPPORTED_HASHES,
    download_digest,
    file_hexdigest,
    is_supported_hash,
    new_hasher,
)
from streaming.format.local_files import file_size, size_error
from streaming.util.atomic import staged_file
from streaming.util.confine import confine, remove
from streaming.util.disk_full import naming_full_disk
from streaming.util.files import has_size
from streaming.util.fork_safe_lock import ForkSafeLock
from streaming.util.pagewrite import write_sliced

if TYPE_CHECKING:
    from streaming.cache.prepare.stream_files import StreamFiles

LOCK_TIMEOUT = 600.0  # seconds another process may hold a shard's preparation lock
UNPACK_FROM = 8 << 20  # raw bytes from which a zstd shard is decoded and written on two threads
RAW_PATHS = 4096  # raw paths a preparer keeps at once (one Path each, so memory stays bounded)


class ShardPreparer:
    """Materialises raw shards in each stream's local directory, at most once per node at a time.

    `prepare(shard)` returns the raw file's path once it is complete (right size, and the right
    digest when the stream sets `validate_hash`). Safe to call from threads and processes at once:
    files only ever appear by atomic rename, and a per-shard file lock avoids duplicate work.
    """

    def __init__(self, streams: Sequence, facts: ShardFacts) -> None:
        self.streams = list(streams)
        self.facts = facts
        self._ready = np.zeros(len(facts.basenames), bool)
        self._reset_locks()
        for s, stream in enumerate(self.streams):
            _check_algo(stream, facts, s)
            if stream.remote_dir is not None:  # filled from a remote: a cache `clear` may empty
                mark_cache(stream.local_dir)
            else:
                sweep_in_place(stream.local_dir, facts, s)

    def __getstate__(self) -> dict:
        state = self.__dict__.copy()
        state.pop("_mutex")
        state.pop("_locks")
        state.pop("_locks_pid")
        state.pop("_raw_paths")  # rebuilt as asked for, by each process
        state["_ready"] = np.zeros_like(self._ready)  # each process checks the disk itself
        return state

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        self._reset_locks()

    def _reset_locks(self) -> None:
        self._mutex = ForkSafeLock()  # guards `_locks` only
        self._locks: dict[int, threading.Lock] = {}  # this process's (`_locks_pid`) per shard
        self._locks_pid = os.getpid()
        self._dirs: dict[int, Path] = {}
        self._raw_paths: dict[int, Path] = {}

    def raw_path(self, shard: int) -> Path:
        """Where the shard's raw file lives (or will live) on this node."""
        path = self._raw_paths.get(shard)
        if path is None:  # a read asks for it several times per shard; joining is not free
            if len(self._raw_paths) >= RAW_PATHS:
                self._raw_paths.clear()
            path = self._raw_paths[shard] = self._folder(shard) / self.facts.basenames[shard]
        return path

    def root(self, shard: int) -> Path:
        """The local folder of the shard's stream: index names are relative to it, and every
        file this cache creates, replaces or removes for the shard must resolve inside it.

        Args:
            shard: global shard index.
        """
        return self._folder(shard)

    def remove_files(self, shard: int) -> None:
        """Remove the shard's raw and compressed files from its folder, if present, through
        the folder's guard (UnsafePathError for a path a symbolic link leads out of it).

        Args:
            shard: global shard index.
        """
        root = self._folder(shard)
        for path in (self.raw_path(shard), self.zip_path(shard)):
            if path is not None:
                remove(root, path)

    def _folder(self, shard: int) -> Path:
        """The local folder of the shard's stream (index names are relative to it)."""
        which = int(self.facts.stream_of_shard[shard])
        folder = self._dirs.get(which)
        if folder is None:  # resolving a path costs syscalls: once per stream and process
            folder = self._dirs[which] = self.streams[which].local_dir
        return folder

    def zip_path(self, shard: int) -> Path | None:
        """Where the shard's compressed file lands on this node (None: it is stored raw)."""
        zip_name = self.facts.zip_basenames[shard]
        return self._folder(shard) / zip_name if zip_name else None

    def forget(self, shard: int) -> None:
        """Drop the memo that `shard` is ready, so the next `prepare` looks at the disk again
        (the cache may have evicted it since)."""
        self._ready[shard] = False

    def prepare(self, shard: int) -> Path:
        """Make the raw file of global shard `shard` ready; return its path. A shard read in
        place from its indexed file (`ShardFacts.in_place`) has no file here: its stream checks
        what reading it needs (`check_in_place`), no lock is taken, and the path returned is
        the name its reader goes by."""
        raw = self.raw_path(shard)
        if self._ready[shard]:
            return raw
        if self.facts.in_place[shard]:
            stream = self.streams[int(self.facts.stream_of_shard[shard])]
            stream.check_in_place(self.facts.basenames[shard],
                                  expected_size=int(self.facts.raw_bytes[shard]))
            self._ready[shard] = True
            return raw
        if not self.usable(shard):
            self._confine(shard, raw)
            with self._node_lock(shard, raw):
                if not self.usable(shard, locked=True):
                    self._discard(shard, raw)
                    self._materialise(shard, raw)
                    self._verified(shard, raw)
        self._ready[shard] = True
        return raw

    def _confine(self, shard: int, raw: Path) -> None:
        """Refuse, before its lock file, download or decompression is created, a shard whose
        files would land outside its stream's folder (a symbolic link in the way)."""
        root = self._folder(shard)
        confine(root, raw)
        zipped = self.zip_path(shard)
        if zipped is not None:
            confine(root, zipped)

    def _discard(self, shard: int, raw: Path) -> None:
        """Remove a complete raw file whose digest is wrong, so it is fetched again; where it
        is the only copy (no remote), raise HashMismatchError naming it."""
        if not self._complete(raw, shard):
            return
        stream = self.streams[int(self.facts.stream_of_shard[shard])]
        if stream.remote_dir is None:
            raise HashMismatchError(
                f"{raw}: its {self._algo(shard)} digest differs from the one in the index "
                "(the stream has no remote to fetch a good copy from)")
        remove(self._folder(shard), raw)

    def usable(self, shard: int, *, locked: bool = False) -> bool:
        """Whether the shard's raw file on disk can be read now: present at the size the index
        gives (one stat) and, with `validate_hash`, matching its digest (see `trusted`)."""
        return self._complete(self.raw_path(shard), shard) and self.trusted(shard, locked=locked)

    def trusted(self, shard: int, *, locked: bool = False) -> bool:
        """True unless the stream asks for `validate_hash` and the raw file on disk does not match
        the index's digest. Each file version is hashed once per node (remembered in
        `streaming.cache.folder.verified_files`), whichever way it arrived: downloaded,
        decompressed, adopted from an earlier run, or read in place. Readers that meet an
        unverified file at once take turns (the shard's lock, unless the caller holds it: `locked`;
        across processes only in a cache folder), so only the first one hashes it."""
        algo = self._algo(shard)
        if not algo:
            return True
        raw = self.raw_path(shard)
        try:
            info = raw.stat()
        except FileNotFoundError:
            return False
        if is_verified(raw, info, algo):
            return True
        if not locked:  # a dataset read in place may be read-only: no lock file there
            cache = self.streams[int(self.facts.stream_of_shard[shard])].remote_dir is not None
            with self._node_lock(shard, raw, node=cache):
                return self.trusted(shard, locked=True)
        want = _pick(self.facts.raw_hashes[shard], algo)
        try:
            if file_hexdigest(algo, raw) != want[algo]:
                return False
        except FileNotFoundError:  # another reader found it corrupt and removed it meanwhile
            return False
        mark_verified(raw, algo, info)
        return True

    def _algo(self, shard: int) -> str | None:
        return self.streams[int(self.facts.stream_of_shard[shard])].validate_hash

    def _verified(self, shard: int, raw: Path) -> None:
        """Record that a raw file `_materialise` just checked against its digest is sound."""
        algo = self._algo(shard)
        if algo:
            mark_verified(raw, algo)

    def _complete(self, raw: Path, shard: int) -> bool:
        try:
            return raw.stat().st_size == int(self.facts.raw_bytes[shard])
        except FileNotFoundError:
            return False

    @contextlib.contextmanager
    def _node_lock(self, shard: int, raw: Path, *, node: bool = True):
        """Serialise preparation of one shard across this node's processes and threads (with
        `node=False`, across this process's threads only: no lock file); other shards prepare
        in parallel (downloads and zstd release the GIL)."""
        from streaming.cache.folder.shared_locks import folder_lock

        with self._mutex:
            if self._locks_pid != os.getpid():  # forked: a parent's thread may hold them
                self._locks, self._locks_pid = {}, os.getpid()
            lock = self._locks.setdefault(shard, threading.Lock())
        if node and raw.parent.is_dir() and not os.access(raw.parent, os.W_OK):
            node = False  # a read-only dataset: nothing is written there, nor a lock file
        if not node:
            with lock:
                yield
            return
        raw.parent.mkdir(parents=True, exist_ok=True)
        with lock, folder_lock(raw.parent / f".{raw.name}.prep.lock", timeout=LOCK_TIMEOUT):
            yield

    def _materialise(self, shard: int, raw: Path) -> None:
        facts = self.facts
        stream = self.streams[int(facts.stream_of_shard[shard])]
        remote = stream.remote_dir is not None
        algo = stream.validate_hash
        zip_name = facts.zip_basenames[shard]
        if zip_name is None:
            if not remote:  # missing (ObjectNotFoundError) or of the wrong size (corrupt)
                raise size_error(raw, int(facts.raw_bytes[shard]), file_size(raw),
                                 "; the stream has no remote to fetch it from")
            stream.fetch(facts.basenames[shard], raw, expected_size=int(facts.raw_bytes[shard]),
                         expected_hashes=_fetched(facts.raw_hashes[shard], algo))
            return
        zipped = stream.local_dir / zip_name
        fetched = in_place = False
        if not has_size(zipped, int(facts.zip_bytes[shard])):
            if not remote:
                raise size_error(zipped, int(facts.zip_bytes[shard]), file_size(zipped),
                                 "; the stream has no remote to fetch it from")
            if decoded_in_flight(stream, zip_name, facts.compression[shard]):
                self._fetch_decompressed(shard, stream, raw, algo)
                return
            source = None if stream.keep_zip else stream.source_path(zip_name)
            if source is not None and has_size(source, int(facts.zip_bytes[shard])):
                zipped = source  # a filesystem remote: decompress it in place, no copy
                in_place = True
            else:
                stream.fetch(zip_name, zipped, expected_size=int(facts.zip_bytes[shard]),
                             expected_hashes=_fetched(facts.zip_hashes[shard], algo))
                fetched = True
        if in_place:  # checked as a download of it would be: every remote kind alike
            _verify(zipped, _fetched(facts.zip_hashes[shard], algo))
        elif algo and not fetched:
            _verify(zipped, _pick(facts.zip_hashes[shard], algo))
        size = int(facts.raw_bytes[shard])
        with _CORES, naming_full_disk(raw, size):
            if size >= UNPACK_FROM and extension(facts.compression[shard]) == "zstd":
                unpack_zstd(zipped, raw, size)
            else:
                decompress_file(zipped, raw, facts.compression[shard], expected_size=size,
                                durable=False)
        if not has_size(raw, int(facts.raw_bytes[shard])):
            raise ShardCorruptError(
                f"{zipped}: decompressed to {raw.stat().st_size} bytes, index says "
                f"{int(facts.raw_bytes[shard])}")
        if algo:
            _verify(raw, _pick(facts.raw_hashes[shard], algo))
        if fetched and not stream.keep_zip:
            remove(self._folder(shard), zipped)

    def _fetch_decompressed(self, shard: int, stream: StreamFiles, raw: Path, algo: str | None
                            ) -> None:
        """Download the zstd shard and decompress it on the way into `raw` (no compressed copy
        on disk), checking the zip's digest as its bytes pass and the raw file's afterwards."""
        facts = self.facts
        zip_name = facts.zip_basenames[shard]
        want = _fetched(facts.zip_hashes[shard], algo)
        hashers = {name: new_hasher(name) for name in want or {}}
        decoder = ZstdStream(limit=int(facts.raw_bytes[shard]))
        url = stream.remote_url(zip_name)
        broken: list[DecompressionError] = []  # with a digest to check, bad data is hashed on
        with staged_file(raw) as tmp, open(tmp, "wb") as out:

            def consume(piece: bytes) -> None:
                for hasher in hashers.values():
                    hasher.update(piece)
                if broken:
                    return
                try:
                    write_sliced(out, decoder.feed(piece))
                except DecompressionError as exc:
                    if not hashers:
                        raise
                    broken.append(exc)

            try:
                # No _CORES slot: decoding keeps pace with the network here, and holding a
                # slot for a whole transfer would cap the downloads in flight at the cores.
                stream.stream_remote(zip_name, consume, size=int(facts.zip_bytes[shard]))
                for name, hasher in hashers.items():  # a digest names the cause best
                    if hasher.hexdigest() != want[name]:
                        raise HashMismatchError(
                            f"{zip_name} (from {url}): {name} digest is {hasher.hexdigest()}, "
                            f"the index says {want[name]}")
                if broken:
                    raise broken[0]
                decoder.finish()
            except DecompressionError as exc:
                raise DecompressionError(f"{url}: {exc}") from exc
            out.flush()
            if out.tell() != int(facts.raw_bytes[shard]):
                raise ShardCorruptError(
                    f"{url}: decompressed to {out.tell()} bytes, the index says "
                    f"{int(facts.raw_bytes[shard])}")
        if algo:
            _verify(raw, _pick(facts.raw_hashes[shard], algo))


def sweep_in_place(folder: Path, facts: ShardFacts, which: int) -> None:
    """Remove the temp and lock files a dead preparation left beside the compressed shards of
    local-only stream `which` (in `folder`), as the first start of a cache folder does; only
    names this library writes, and only for shards no live process is preparing.

    Args:
        folder: the stream's folder.
        facts: every stream's shards.
        which: the stream's number.
    """
    by_folder: dict[Path, dict[str, str | None]] = {}
    for k in np.flatnonzero(np.asarray(facts.stream_of_shard) == which).tolist():
        zipped = facts.zip_basenames[k]
        if zipped:
            raw = folder / facts.basenames[k]
            by_folder.setdefault(raw.parent, {})[raw.name] = Path(zipped).name
    for where, shards in by_folder.items():
        if os.access(where, os.W_OK):
            sweep_orphans(folder, where, listing(where), shards)


def decoded_in_flight(stream: StreamFiles, zip_name: str, compression: str | None) -> bool:
    """Whether `ShardPreparer` decompresses `zip_name` while it downloads: zstd (one frame,
    decoded incrementally) from a stream that allows it (`Stream.streams_zip`). The other
    codecs, and streams that keep or custom-fetch their zips, download first."""
    return _incremental(compression) and stream.streams_zip(zip_name)


def _incremental(compression: str | None) -> bool:
    return compression is not None and extension(compression) == "zstd"


def zipless_shards(facts: ShardFacts, streams: Sequence[StreamFiles]) -> np.ndarray:
    """Per shard: whether its compressed copy never lands in the cache folder, because
    `ShardPreparer` decompresses it while it downloads or straight from a filesystem remote."""
    owner = np.asarray(facts.stream_of_shard, np.int64)
    out = np.zeros(len(owner), bool)
    for s, stream in enumerate(streams):
        mine = np.flatnonzero(owner == s)
        first = next((facts.zip_basenames[k] for k in mine.tolist() if facts.zip_basenames[k]),
                     None)
        if first is None or stream.keep_zip or stream.remote_dir is None:
            continue
        if stream.source_path(first) is not None:
            out[mine] = True
        elif stream.streams_zip(first):  # a property of the stream: asked once, not per shard
            out[mine] = [bool(facts.zip_basenames[k]) and _incremental(facts.compression[k])
                         for k in mine.tolist()]
    return out


# Decompressions at once per process: more than the cores only makes every shard finish later
# (the first shards a reader needs are asked for first, so they should also finish first).
_CORES = threading.BoundedSemaphore(max(len(os.sched_getaffinity(0)), 1))



def _check_algo(stream: StreamFiles, facts: ShardFacts, which: int) -> None:
    """Refuse, before anything is read, a `validate_hash` that names no known algorithm or
    one the stream's index does not record for every shard."""
    algo = stream.validate_hash
    if not algo:
        return
    if not is_supported_hash(algo):
        raise UnknownHashError(
            f"validate_hash={algo!r} is not a hash algorithm this library knows; use one of "
            f"{sorted(SUPPORTED_HASHES)} that the index records")
    owner = np.asarray(facts.stream_of_shard, np.int64)
    for shard in np.flatnonzero(owner == which).tolist():
        if algo not in facts.raw_hashes[shard]:
            raise IndexFileError(
                f"validate_hash={algo!r} but the index of {stream.remote_dir or stream.local_dir}"
                f" records only {sorted(facts.raw_hashes[shard]) or 'no hashes'} for "
                f"{facts.basenames[shard]}")


def _pick(hashes: dict, algo: str | None) -> dict[str, str] | None:
    """The expected digest for `algo`; an algorithm the index lacks is an error naming it."""
    if not algo:
        return None
    if algo not in hashes:
        raise ShardCorruptError(
            f"validate_hash={algo!r} but the index only records {sorted(hashes) or 'no hashes'}")
    return {algo: hashes[algo]}


def _fetched(hashes: dict, algo: str | None) -> dict[str, str] | None:
    """The digest a download is checked against: `validate_hash`'s, else a fast one the index
    records (see `download_digest`), else none."""
    return _pick(hashes, algo) if algo else download_digest(hashes, None)


def _verify(path: Path, expected: dict[str, str] | None) -> None:
    for algo, want in (expected or {}).items():
        got = file_hexdigest(algo, path)
        if got != want:
            raise HashMismatchError(f"{path}: {algo} digest {got} != {want} from the index")
