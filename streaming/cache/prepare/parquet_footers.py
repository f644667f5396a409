"""The index of a Parquet stream, built from its files' footers: which files (a folder or
prefix, a glob, or a list), each footer read with ranged GETs on threads (never a whole file),
the footers kept beside the cached row groups, and the derived index.json written once per node
through the same `sync_index` door as an MDS stream's, so a changed file's cached row groups are
dropped at the next start.
"""

from __future__ import annotations

import fnmatch
import logging
import os
import posixpath
import warnings
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from streaming.errors import ArgumentError, ParquetFileError, StorageError
from streaming.format.parquet_footer import (
    TAIL,
    check_ranges,
    column_kinds,
    footer_length,
    parse_footer,
    projected_leaves,
    row_group_spans,
)
from streaming.format.parquet_index import (
    ParquetFile,
    footer_basename,
    footer_file_bytes,
    index_document,
)
from streaming.storage.backend import Backend, ListedObject
from streaming.storage.local_folder import LocalBackend
from streaming.storage.retry import RetryPolicy
from streaming.util.atomic import atomic_output
from streaming.util.confine import confine
from streaming.util.pagewrite import write_sliced

log = logging.getLogger(__name__)

FOOTER_THREADS = 32  # files whose footers are read at once
TAIL_GUESS = 64 << 10  # bytes of a file's end read first: most footers fit
PARQUET_SUFFIXES = (".parquet", ".parq", ".pq")
# Fetched bytes of one row group from which a warning says to write smaller ones: the cache
# fetches, holds and evicts whole row groups, and a reader decodes one whole.
LARGE_GROUP = 512 << 20
_WILD = "*?["


@dataclass(frozen=True)
class ParquetSelection:
    """Which Parquet files a stream reads.

    Args:
        base: the folder (URL or path) every file lies under: the stream's remote.
        files: the files' names under `base`, when given as a list (None: list `base`).
        pattern: a glob the names under `base` must match (None: every Parquet file).
    """

    base: str
    files: tuple[str, ...] | None = None
    pattern: str | None = None

    def key(self) -> str:
        """What tells two selections over one folder apart (recorded as the remote)."""
        if self.files is not None:
            return f"{self.base}#files={len(self.files)}"
        return self.base if self.pattern is None else f"{self.base}#{self.pattern}"


def select_files(remote: str | Sequence[str]) -> ParquetSelection:
    """The selection a stream's `remote` names: a folder or prefix (every `*.parquet` below
    it), a glob (`s3://b/corpus/*/part-*.parquet`), or a list of files under one folder.

    Args:
        remote: a folder, a glob, or a list of file URLs or paths.
    """
    if isinstance(remote, str):
        parts = remote.rstrip("/").split("/")
        wild = next((k for k, part in enumerate(parts) if any(c in part for c in _WILD)), None)
        if wild is None:
            return ParquetSelection(remote.rstrip("/"))
        if wild == 0 or (wild < 3 and "://" in remote):
            raise ArgumentError(f"Parquet glob {remote!r}: put the wildcards below a folder")
        return ParquetSelection("/".join(parts[:wild]), pattern="/".join(parts[wild:]))
    files = [str(f) for f in remote]
    if not files:
        raise ArgumentError("a Parquet stream's list of files is empty")
    base = posixpath.dirname(files[0])
    while not all(f.startswith(base + "/") for f in files):
        if "/" not in base or base.endswith("://") or base.endswith(":/"):
            raise ArgumentError(f"Parquet files {files[0]!r} ... share no folder")
        base = posixpath.dirname(base)
    return ParquetSelection(base, files=tuple(f[len(base) + 1:] for f in files))


def under(root: str, name: str) -> str:
    """The backend path of `name` below folder `root` (a bucket's root is the empty path; a
    web server's is `/`, and its paths keep their leading slash).

    Args:
        root: a folder's backend path.
        name: a name below it.
    """
    folder = root.rstrip("/")
    if folder:
        return f"{folder}/{name}"
    return f"/{name}" if root.startswith("/") else name


def listed_files(selection: ParquetSelection, backend: Backend, root: str
                 ) -> dict[str, ListedObject | None]:
    """The selected files' names under `root` (the backend's path of `selection.base`), sorted,
    with their sizes (and ETags, where the store lists them) as the listing gave them (one
    LIST request per 1,000 keys on S3; None for a list of files, which is not listed).

    Args:
        selection: which files.
        backend: the store holding them.
        root: `selection.base` as the backend's path.
    """
    if selection.files is not None:
        return dict.fromkeys(selection.files)
    prefix = under(root, "")
    try:
        found = backend.list_versions(prefix)
    except StorageError as exc:
        raise StorageError(f"{backend.url(prefix)}: cannot list the Parquet files ({exc}); "
                           "give the stream a list of files instead") from exc
    named = {path[len(prefix):]: listed for path, listed in found.items()
             if path.startswith(prefix)}
    if selection.pattern is not None:
        return {n: named[n] for n in sorted(named) if fnmatch.fnmatchcase(n, selection.pattern)}
    return {n: named[n] for n in sorted(named) if n.endswith(PARQUET_SUFFIXES)
            and not any(part.startswith((".", "_")) for part in n.split("/"))}


def read_footer(backend: Backend, path: str, name: str, columns: Sequence[str] | None,
                policy: RetryPolicy, listed: ListedObject | None = None) -> ParquetFile:
    """One file's footer, read with ranged GETs (the last `TAIL_GUESS` bytes, then the rest of
    a larger footer), into its row groups and columns. With the size the listing gave, no
    request asks for it, and with its ETag (on a store whose reads can be conditional) the
    footer is read from that version only; a file that no longer has that size or ETag
    (replaced since the listing), or a file of a list (not listed), is read at the size and
    ETag the store tells for it (`Backend.version`: one HEAD).

    Args:
        backend: the store holding it.
        path: its backend path.
        name: its name in the stream (for messages and the index).
        columns: the projection (None: every column).
        policy: retries and deadlines of each request.
        listed: its size and ETag as listed (None: ask the store).
    """
    mtime_ns = modified_ns(backend, path)
    if listed is not None:
        try:
            return _read_footer_at(backend, path, name, columns, policy,
                                   _version(backend, listed, mtime_ns))
        except (ParquetFileError, StorageError):
            log.info("%s: not as listed (%d bytes); reading it again", name, listed.size)
    asked = policy.run(backend.url(path), lambda deadline: backend.version(path))
    return _read_footer_at(backend, path, name, columns, policy,
                           _version(backend, asked, mtime_ns))


def _version(backend: Backend, listed: ListedObject, mtime_ns: int) -> FileVersion:
    """The version a footer is read from: the listed size, and the ETag where reads on this
    store can be conditional on it."""
    return FileVersion(listed.size, mtime_ns, listed.etag if backend.conditional_reads else None)


@dataclass(frozen=True)
class FileVersion:
    """The version of a Parquet file a footer is read from.

    Args:
        size: its bytes.
        mtime_ns: its modification time in ns on a filesystem, else 0.
        etag: its ETag on a store whose reads can be conditional, else None.
    """

    size: int
    mtime_ns: int = 0
    etag: str | None = None


def _read_footer_at(backend: Backend, path: str, name: str, columns: Sequence[str] | None,
                    policy: RetryPolicy, version: FileVersion) -> ParquetFile:
    """`read_footer` of the file's `version`: ParquetFileError when its end is no footer,
    StorageError when fewer bytes arrive (the file is shorter) or its ETag is another."""
    size = version.size
    if size == 0:
        footer_length(b"", 0, name)  # raises: an empty file
    start = max(0, size - TAIL_GUESS)
    tail = policy.run(backend.url(path), lambda deadline: backend.get_range(
        path, start, size, deadline=deadline, if_match=version.etag))
    length = footer_length(tail, size, name)
    if length + TAIL > len(tail):
        first = size - length - TAIL
        tail = policy.run(backend.url(path), lambda deadline: backend.get_range(
            path, first, start, deadline=deadline, if_match=version.etag)) + tail
    tail = tail[len(tail) - length - TAIL:]
    meta = parse_footer(tail, name)
    schema = meta.schema.to_arrow_schema()
    kinds = column_kinds(schema, columns, name)
    groups = row_group_spans(meta, projected_leaves(schema, list(kinds)), name)
    check_ranges(groups, size - length - TAIL, name)
    return ParquetFile(name, size, tail, kinds, groups, version.mtime_ns, version.etag)


def modified_ns(backend: Backend, path: str) -> int:
    """A file's modification time in ns on a filesystem store, else 0 (an object store's
    ETag is not exposed by the storage layer: its footer stands for its version).

    Args:
        backend: the store.
        path: the file's backend path.
    """
    if not isinstance(backend, LocalBackend):
        return 0
    try:
        return os.stat(path).st_mtime_ns
    except FileNotFoundError:
        return 0  # the size request names the missing file


def build_index(selection: ParquetSelection, backend: Backend, root: str,
                columns: Sequence[str] | None, policy: RetryPolicy, folder: Path,
                threads: int = FOOTER_THREADS) -> bytes:
    """The derived index.json of the selected files; their footers written into `folder`.

    Args:
        selection: which files.
        backend: the store holding them.
        root: `selection.base` as the backend's path.
        columns: the projection (None: every column).
        policy: retries and deadlines of each request.
        folder: the stream's cache folder.
        threads: footers read at once.
    """
    import json

    listed = listed_files(selection, backend, root)
    names = list(listed)
    if not names:
        raise ParquetFileError(f"{backend.url(root)}: no Parquet files found"
                               + (f" matching {selection.pattern!r}" if selection.pattern
                                  else ""))

    def one(name: str) -> ParquetFile:
        return read_footer(backend, under(root, name), name, columns, policy, listed[name])

    files = _in_order(one, names, threads)
    for file in files:
        write_footer(folder, file)
    _warn_large_groups(files)
    in_place = os.path.abspath(root) if isinstance(backend, LocalBackend) else None
    document = index_document(files, selection.key(), in_place)
    log.info("%s: %d Parquet files, %d row groups, index from their footers",
             selection.base, len(files), len(document["shards"]))
    return json.dumps(document).encode()


def write_footer(folder: Path, file: ParquetFile) -> Path:
    """Keep `file`'s footer in the stream's cache folder `folder` (`<file>.footer`, replaced
    whole); returns its path.

    Args:
        folder: the stream's cache folder.
        file: the file, its footer read.
    """
    target = folder / footer_basename(file.name)
    confine(folder, target)
    target.parent.mkdir(parents=True, exist_ok=True)
    with atomic_output(target, durable=False) as handle:
        write_sliced(handle, footer_file_bytes(file.size, file.tail, file.mtime_ns))
    return target


def _warn_large_groups(files: Sequence[ParquetFile]) -> None:
    """One warning naming the first file whose row groups are too large to cache well."""
    large = [(file.name, g, group.nbytes) for file in files
             for g, group in enumerate(file.groups) if group.nbytes > LARGE_GROUP]
    if large:
        name, g, nbytes = large[0]
        warnings.warn(
            f"{name} row group {g} holds {nbytes >> 20} MiB of the columns read (and "
            f"{len(large) - 1} more row groups over {LARGE_GROUP >> 20} MiB): a Parquet stream "
            "fetches, caches and decodes whole row groups, so each costs that much memory and "
            "cache; write row groups of 32-128 MiB (docs/parquet.md)", stacklevel=2)


def _in_order(work: Callable[[str], ParquetFile], names: list[str], threads: int
              ) -> list[ParquetFile]:
    """`work` over `names` on up to `threads` threads, results in order; the first failure in
    order is raised (the requests still under way end within their own deadlines)."""
    if len(names) == 1 or threads <= 1:
        return [work(name) for name in names]
    with ThreadPoolExecutor(min(threads, len(names)), "parquet-footer") as pool:
        futures = [pool.submit(work, name) for name in names]
        try:
            return [future.result() for future in futures]
        except BaseException:
            for future in futures:
                future.cancel()
            raise
