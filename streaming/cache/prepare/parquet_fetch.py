"""A Parquet stream's transfers: its index (built from footers, once per node, see
`parquet_footers`) and each row group fetched into the cache with ranged GETs of the projected
column chunks, then checked against the file's footer as it was indexed, so a file replaced
mid-run is refused by name instead of mixing old and new bytes. A file on a filesystem is not
copied: `check_in_place` only makes sure of its footer and that it is still the file indexed,
and its row groups are decoded from the file itself (`ParquetShardReader`)."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from streaming.cache.folder.parsed_index import kept_index
from streaming.cache.folder.shared_locks import folder_lock
from streaming.cache.prepare.parquet_footers import (
    ParquetSelection,
    build_index,
    modified_ns,
    read_footer,
    under,
    write_footer,
)
from streaming.cache.prepare.published_index import published_document
from streaming.errors import (
    ObjectChangedError,
    ObjectNotFoundError,
    ParquetFileError,
    StorageError,
)
from streaming.format.parquet_footer import RowGroupSpan, group_span, projected_leaves
from streaming.format.parquet_index import (
    ParquetFile,
    footer_basename,
    footer_digest,
    split_group_name,
)
from streaming.format.parquet_shard import CachedFooter, cached_footer, check_indexed_version
from streaming.storage.backend import Backend, ListedObject
from streaming.storage.retry import RetryPolicy
from streaming.storage.transfer import timed_backend, transfer_policy
from streaming.util.at_once import map_at_once
from streaming.util.atomic import staged_file
from streaming.util.confine import confine
from streaming.util.pagewrite import pwrite_sliced

TAIL_GAP = 1 << 20  # bytes between a row group's last range and the footer read in one GET
RANGES_AT_ONCE = 8  # ranges of one row group (runs of projected columns) fetched at once
FOOTER_LOCK_MARGIN = 60.0  # seconds past a footer read's own deadlines a waiter gives it


def parquet_index_file(folder: Path, selection: ParquetSelection,
                       columns: Sequence[str] | None, timeout: float, retry: int) -> Path:
    """The derived index.json of a Parquet stream in its cache folder, taken from the index
    published beside the files when there is one for this projection, else from the footers,
    read by the first process of the node to ask (per job run); the others read its result.

    Args:
        folder: the stream's cache folder.
        selection: its files.
        columns: its projection (None: every column).
        timeout: seconds per request.
        retry: extra attempts per request.
    """
    from streaming.cache.folder.origin import sync_index

    backend, root = timed_backend(selection.base, timeout)
    policy = transfer_policy(timeout, retry, 0.25, selection.base)

    def fetch_index(dest: Path) -> None:
        published = published_document(backend, root, selection, columns, policy)
        if published is not None:
            dest.write_bytes(published)
        else:
            dest.write_bytes(build_index(selection, backend, root, columns, policy, folder))

    return sync_index(folder, selection.key(), fetch_index)


def fetch_row_group(folder: Path, base: str, basename: str, dest: Path, *,
                    columns: Sequence[str] | None, expected_size: int | None,
                    timeout: float, retry: int) -> Path:
    """Fetch cached row group `basename` (`<file>.rgNNNNN`) of the file under `base` into
    `dest`: its ranges with ranged GETs (several at once for a projection's runs of
    columns), each conditional on the file's indexed ETag where the store lists ETags and
    honours them; elsewhere the file's end is then compared with the footer indexed in
    `folder` (in the same GET as a single range when the footer follows it within TAIL_GAP
    bytes, as it does for a file's last row group).

    Args:
        folder: the stream's cache folder (holding the footers).
        base: the folder (URL or path) the files lie under.
        basename: the cached row group's name.
        dest: where it goes (appears only complete and checked).
        columns: the stream's projection (None: every column).
        expected_size: the bytes the index gives it.
        timeout: seconds per request.
        retry: extra attempts per request.
    """
    group = _indexed_group(folder, base, basename, columns, expected_size, timeout, retry)
    backend, indexed, footer = group.backend, group.indexed, group.footer
    etag = indexed.etag if indexed is not None and backend.conditional_reads else None
    got = _GroupGet(backend, group.path, group.where, footer, group.policy, etag)
    ranges = group.span.ranges
    if len(ranges) == 1:  # one GET, with the file's end when the footer follows closely
        pieces = [got.range(*ranges[0], with_tail=got.tail_follows(ranges[0][1]))]
    else:  # a projection's runs of columns at once; the file's end checked after them all
        pieces = map_at_once(lambda pair: got.range(*pair, with_tail=False), ranges,
                             RANGES_AT_ONCE, name="parquet-ranges")
    with staged_file(dest) as tmp:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o666)
        try:
            at = 0
            for data in pieces:
                pwrite_sliced(fd, data, at)
                at += len(data)
        finally:
            os.close(fd)
        if not got.checked:
            got.same_file()
    return dest


def check_in_place(folder: Path, base: str, basename: str, *, columns: Sequence[str] | None,
                   expected_size: int | None, timeout: float, retry: int) -> None:
    """Make row group `basename` of a file on a filesystem ready to be decoded where it lies:
    its file's footer sound in `folder` (read again from the file where the copy is missing
    or damaged) and the file still of its indexed size and modification time (ParquetFileError
    naming the file and row group otherwise). Nothing is written for the row group itself.

    Args:
        folder: the stream's cache folder (holding the footers).
        base: the folder the files lie under.
        basename: the row group's name in the index.
        columns: the stream's projection (None: every column).
        expected_size: the bytes the index gives it.
        timeout: seconds per request.
        retry: extra attempts per request.
    """
    group = _indexed_group(folder, base, basename, columns, expected_size, timeout, retry)
    where = f"{group.where}: {group.path}"
    try:
        info = os.stat(group.path)
    except FileNotFoundError:
        raise ParquetFileError(f"{where} is gone since its footer was read") from None
    check_indexed_version(where, info, group.footer)


@dataclass(frozen=True)
class _IndexedGroup:
    """A row group named in a stream's index, with its file's checked footer.

    Args:
        backend: the store the file lies in.
        path: the file's backend path.
        where: the file and row group (for messages).
        policy: retries and deadlines of each request.
        indexed: the file's footer as the index records it (None: not listed).
        footer: the footer, parsed.
        span: the row group's byte ranges under the projection.
    """

    backend: Backend
    path: str
    where: str
    policy: RetryPolicy
    indexed: IndexedFooter | None
    footer: CachedFooter
    span: RowGroupSpan


def _indexed_group(folder: Path, base: str, basename: str, columns: Sequence[str] | None,
                   expected_size: int | None, timeout: float, retry: int) -> _IndexedGroup:
    """Row group `basename` of the file under `base`, with its file's footer as cached in
    `folder` (read again from the file where missing or damaged) and its projected byte ranges,
    whose size must be the index's `expected_size` (ParquetFileError naming it otherwise)."""
    named = split_group_name(basename)
    if named is None:
        raise ParquetFileError(f"{basename}: not a Parquet row group of this stream")
    file, group = named
    backend, root = timed_backend(base, timeout)
    policy = transfer_policy(timeout, retry, 0.25, base)
    path = under(root, file)
    indexed = indexed_footers(folder).get(file)
    footer = _footer_of(folder, file, indexed, lambda listed: read_footer(
        backend, path, file, columns, policy, listed),
                        lock_timeout=timeout * (retry + 1) + FOOTER_LOCK_MARGIN)
    schema = footer.meta.schema.to_arrow_schema()
    names = list(columns) if columns is not None else [field.name for field in schema]
    span = group_span(footer.meta, group, projected_leaves(schema, names), file)
    if expected_size is not None and span.nbytes != expected_size:
        raise ParquetFileError(f"{file} row group {group}: its footer gives {span.nbytes} bytes, "
                               f"the index {expected_size} (the footer changed)")
    return _IndexedGroup(backend, path, f"{file} row group {group}", policy, indexed, footer,
                         span)


@dataclass(frozen=True)
class IndexedFooter:
    """A file's footer as its stream's index records it.

    Args:
        digest: the digest of its footer.
        file_bytes: the file's size.
        nbytes: the size of its footer's copy in the cache.
        etag: the file's ETag when indexed, where the store lists one (else None).
    """

    digest: str
    file_bytes: int
    nbytes: int
    etag: str | None = None


def _footer_of(folder: Path, file: str, indexed: IndexedFooter | None,
               read: Callable[[ListedObject | None], ParquetFile], lock_timeout: float
               ) -> CachedFooter:
    """The footer of `file` as cached in `folder`, or, where it is not fetched yet (the index
    was published) or damaged, as `read` from the store at its indexed size and ETag: by one
    caller on the node at a time (the file's footer lock, waited for up to `lock_timeout`
    seconds), so row groups of one file fetched at once read its footer once between them."""
    path = folder / footer_basename(file)
    with contextlib.suppress(OSError, ValueError, ParquetFileError):
        return cached_footer(path)
    with folder_lock(folder / f".{path.name}.prep.lock", timeout=lock_timeout):
        with contextlib.suppress(OSError, ValueError, ParquetFileError):
            return cached_footer(path)  # read by the caller that held the lock before
        listed = None if indexed is None else ListedObject(indexed.file_bytes, indexed.etag)
        return _footer_from_store(folder, read(listed))


def _footer_from_store(folder: Path, read: ParquetFile) -> CachedFooter:
    """The footer of `read.name` as just read from the store, kept in cache `folder` (where it
    was missing, as it is until its first row group is fetched when the index was published,
    or damaged) once its digest is the one the index recorded; ParquetFileError naming the
    file otherwise (it changed since it was indexed)."""
    indexed = indexed_footers(folder).get(read.name)
    if indexed is None or indexed.digest != footer_digest(read.tail):
        raise ParquetFileError(f"{read.name}: its footer changed since it was indexed; restart "
                               "to index it again (a published index: publish it again with "
                               "`streaming parquet-index`)")
    return cached_footer(write_footer(folder, read))


_INDEXED: dict[tuple, dict[str, IndexedFooter]] = {}
_INDEXED_LOCK = threading.Lock()
_INDEXES_KEPT = 8


def indexed_footers(folder: Path) -> dict[str, IndexedFooter]:
    """{file: its footer as indexed} of the Parquet stream cached in `folder`, from its
    index.json, parsed once per version of that file in this process.

    Args:
        folder: the stream's cache folder.
    """
    index = folder / "index.json"
    info = index.stat()
    key = (str(index), info.st_ino, info.st_mtime_ns, info.st_size)
    with _INDEXED_LOCK:
        found = _INDEXED.get(key)
    if found is None:
        kept = kept_index(folder)
        shards = kept.shards if kept is not None else json.loads(index.read_bytes())["shards"]
        found = {shard["file"]: IndexedFooter(shard["footer"]["digest"],
                                              int(shard["footer"]["file_bytes"]),
                                              int(shard["footer"]["bytes"]),
                                              shard["footer"].get("etag"))
                 for shard in shards}
        with _INDEXED_LOCK:
            _INDEXED[key] = found
            while len(_INDEXED) > _INDEXES_KEPT:
                del _INDEXED[next(iter(_INDEXED))]
    return found


def footer_bytes_to_come(folder: Path) -> int:
    """Bytes of the footers the index of the Parquet stream cached in `folder` names that are
    not in the folder yet (each arrives with its file's first row group fetched, when the index
    was published): counted against the cache limit from the start.

    Args:
        folder: the stream's cache folder.
    """
    wanted: dict[str, dict[str, int]] = {}  # folder below the cache folder -> {leaf: bytes}
    for file, footer in indexed_footers(folder).items():
        sub, _, leaf = footer_basename(file).rpartition("/")
        wanted.setdefault(sub, {})[leaf] = footer.nbytes
    total = 0
    for sub, footers in wanted.items():  # one listing per folder, not a stat per footer
        present = _file_names(folder / sub if sub else folder)
        total += sum(nbytes for leaf, nbytes in footers.items() if leaf not in present)
    return total


def _file_names(folder: Path) -> set[str]:
    """The names of the files directly in `folder` (none when it is missing), from the
    directory's entries alone (no stat per file)."""
    try:
        with os.scandir(folder) as entries:
            return {entry.name for entry in entries if entry.is_file(follow_symlinks=False)}
    except FileNotFoundError:
        return set()


class _GroupGet:
    """The GETs of one row group's ranges from `path`, and the check that the file is still
    the one indexed (ParquetFileError naming `where` otherwise): each GET conditional on its
    ETag when there is one, else the file's end compared with `footer`.

    Args:
        backend: the store.
        path: the file's backend path.
        where: the file and row group (for messages).
        footer: the footer the file was indexed with.
        policy: retries and deadlines of each request.
        etag: the file's ETag when indexed, on a store whose reads can be conditional.
    """

    def __init__(self, backend: Backend, path: str, where: str, footer: CachedFooter,
                 policy: RetryPolicy, etag: str | None = None) -> None:
        self.backend, self.path, self.where = backend, path, where
        self.footer, self.policy, self.etag = footer, policy, etag
        self.checked = etag is not None  # every GET checks the version itself

    def tail_follows(self, end: int) -> bool:
        """Whether the footer starts within TAIL_GAP bytes after byte `end` (and must be
        checked: not when the GETs are conditional)."""
        return self.etag is None and 0 <= self.footer.size - len(self.footer.tail) - end \
            <= TAIL_GAP

    def range(self, start: int, end: int, with_tail: bool) -> bytes:
        """Bytes [start, end) of the file; `with_tail`: read on to the file's end in the same
        GET, and check the end against the footer (one object version, one request)."""
        url = self.backend.url(self.path)
        try:
            data = self.policy.run(f"{url} bytes {start}-{end - 1}", lambda deadline:
                                   self.backend.get_range(self.path, start,
                                                          None if with_tail else end,
                                                          deadline=deadline,
                                                          if_match=self.etag))
        except ObjectNotFoundError:
            raise ParquetFileError(f"{self.where}: the file is gone since its footer was "
                                   "read") from None
        except ObjectChangedError:
            raise ParquetFileError(f"{self.where}: the file changed since it was indexed (its "
                                   "ETag is another); restart to index it again") from None
        except StorageError as exc:
            self.same_file()
            raise ParquetFileError(f"{self.where}: bytes {start}-{end - 1} could not be read: "
                                   f"{exc}") from exc
        if with_tail:
            self._check_end(start, data)
            self._same_time()
            self.checked = True
            return data[:end - start]
        return data

    def same_file(self) -> None:
        """ParquetFileError unless the file still ends in the indexed footer at its size (and,
        on a filesystem, still has its indexed modification time)."""
        _same_file(self.backend, self.path, self.where, self.footer.size, self.footer.tail,
                   self.policy)
        self._same_time()
        self.checked = True

    def _same_time(self) -> None:
        indexed = self.footer.mtime_ns
        if indexed and modified_ns(self.backend, self.path) != indexed:
            raise ParquetFileError(f"{self.where}: the file changed since its footer was read "
                                   "(now another modification time); restart to index it "
                                   "again")

    def _check_end(self, start: int, data: bytes) -> None:
        """ParquetFileError unless `data`, read from byte `start` to the end, ends the file at
        its indexed size with its indexed footer."""
        _check_tail(self.where, start + len(data), data, self.footer.size, self.footer.tail)


def _same_file(backend: Backend, path: str, where: str, size: int, tail: bytes,
               policy: RetryPolicy) -> None:
    """ParquetFileError naming `where` unless the file still ends in the footer it was indexed
    with, at the same size (one ranged GET of its last bytes)."""
    start = max(0, size - len(tail))
    try:
        got = policy.run(backend.url(path), lambda deadline: backend.get_range(
            path, start, None, deadline=deadline))
    except ObjectNotFoundError:
        raise ParquetFileError(f"{where}: the file is gone since its footer was read") from None
    except StorageError as exc:
        raise ParquetFileError(f"{where}: the file's end cannot be read, it may have changed "
                               f"since its footer was read ({exc})") from exc
    _check_tail(where, start + len(got), got, size, tail)


def _check_tail(where: str, found_size: int, end: bytes, size: int, tail: bytes) -> None:
    """ParquetFileError naming `where` unless a file of `found_size` bytes ending in `end` is
    the one indexed (`size` bytes ending in `tail`)."""
    if found_size != size or not end.endswith(tail):
        raise ParquetFileError(
            f"{where}: the file changed since its footer was read (now "
            f"{'another size' if found_size != size else 'another footer'}); restart to "
            "index it again")


def scratch_place(basename: str, scratch: Path) -> Path:
    """Where row group `basename` of a Parquet stream can be fetched into folder `scratch` and
    read there (a lengths scan) without entering the cache; `footer_beside` then copies its
    file's footer next to it.

    Args:
        basename: the row group's cached name.
        scratch: an empty folder.
    """
    if split_group_name(basename) is None:
        raise ParquetFileError(f"{basename}: not a Parquet row group of this stream")
    place = confine(scratch, scratch / basename)
    place.parent.mkdir(parents=True, exist_ok=True)
    return place


def footer_beside(folder: Path, place: Path) -> Path:
    """Copy the footer of the row group fetched to `place` (see `scratch_place`) from the
    stream's cache `folder`, where fetching it put it, to beside it; returns `place`.

    Args:
        folder: the stream's cache folder (holding the footers).
        place: where the row group was fetched.
    """
    named = split_group_name(place.name)
    if named is None:
        raise ParquetFileError(f"{place}: not a Parquet row group of this stream")
    footer = footer_basename(Path(named[0]).name)
    shutil.copyfile(folder / footer_basename(named[0]), place.parent / footer)
    return place
