"""A Parquet stream's transfers: its index (built from footers, once per node, see
`parquet_footers`) and each row group fetched into the cache with ranged GETs of the projected
column chunks, then checked against the file's footer as it was indexed, so a file replaced
mid-run is refused by name instead of mixing old and new bytes."""

from __future__ import annotations

import os
import shutil
from collections.abc import Sequence
from pathlib import Path

from streaming.cache.parquet_footers import ParquetSelection, build_index
from streaming.errors import ObjectNotFoundError, ParquetFileError, StorageError
from streaming.format.parquet_footer import group_span, parse_footer, projected_leaves
from streaming.format.parquet_index import footer_basename, parse_footer_file, split_group_name
from streaming.storage.backend import Backend
from streaming.storage.retry import RetryPolicy
from streaming.storage.transfer import timed_backend, transfer_policy
from streaming.util.atomic import staged_file
from streaming.util.confine import confine
from streaming.util.pagewrite import pwrite_sliced


def parquet_index_file(folder: Path, selection: ParquetSelection,
                       columns: Sequence[str] | None, timeout: float, retry: int) -> Path:
    """The derived index.json of a Parquet stream in its cache folder: the footers are read
    by the first process of the node to ask (per job run), the others read its result.

    Args:
        folder: the stream's cache folder.
        selection: its files.
        columns: its projection (None: every column).
        timeout: seconds per request.
        retry: extra attempts per request.
    """
    from streaming.cache.origin import sync_index

    backend, root = timed_backend(selection.base, timeout)
    policy = transfer_policy(timeout, retry, 0.25, selection.base)

    def fetch_index(dest: Path) -> None:
        dest.write_bytes(build_index(selection, backend, root, columns, policy, folder))

    return sync_index(folder, selection.key(), fetch_index)


def fetch_row_group(folder: Path, base: str, basename: str, dest: Path, *,
                    columns: Sequence[str] | None, expected_size: int | None,
                    timeout: float, retry: int) -> Path:
    """Fetch cached row group `basename` (`<file>.rgNNNNN`) of the file under `base` into
    `dest`: its ranges with ranged GETs, then the file's end compared with the footer
    indexed in `folder`.

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
    named = split_group_name(basename)
    if named is None:
        raise ParquetFileError(f"{basename}: not a Parquet row group of this stream")
    file, group = named
    try:
        size, tail = parse_footer_file((folder / footer_basename(file)).read_bytes())
    except (OSError, ValueError) as exc:
        raise ParquetFileError(f"{file}: its cached footer is unreadable ({exc})") from None
    meta = parse_footer(tail, file)
    schema = meta.schema.to_arrow_schema()
    names = list(columns) if columns is not None else [field.name for field in schema]
    span = group_span(meta, group, projected_leaves(schema, names), file)
    if expected_size is not None and span.nbytes != expected_size:
        raise ParquetFileError(f"{file} row group {group}: its footer gives {span.nbytes} bytes, "
                               f"the index {expected_size} (the footer changed)")
    backend, root = timed_backend(base, timeout)
    path = root.rstrip("/") + "/" + file
    policy = transfer_policy(timeout, retry, 0.25, base)
    with staged_file(dest) as tmp:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o666)
        try:
            at = 0
            for start, end in span.ranges:
                try:
                    data = policy.run(f"{backend.url(path)} bytes {start}-{end - 1}",
                                      lambda deadline, s=start, e=end: backend.get_range(
                                          path, s, e, deadline=deadline))
                except ObjectNotFoundError:
                    raise
                except StorageError as exc:
                    _same_file(backend, path, file, size, tail, policy, group)
                    raise ParquetFileError(f"{file} row group {group}: bytes {start}-{end - 1} "
                                           f"could not be read: {exc}") from exc
                pwrite_sliced(fd, data, at)
                at += len(data)
        finally:
            os.close(fd)
        _same_file(backend, path, file, size, tail, policy, group)
    return dest


def _same_file(backend: Backend, path: str, name: str, size: int, tail: bytes,
               policy: RetryPolicy, group: int | None = None) -> None:
    """ParquetFileError naming the file unless it still ends in the footer it was indexed
    with, at the same size (one ranged GET of its last bytes)."""
    where = name if group is None else f"{name} row group {group}"
    try:
        got = policy.run(backend.url(path), lambda deadline: backend.get_range(
            path, max(0, size - len(tail)), None, deadline=deadline))
    except ObjectNotFoundError:
        raise ParquetFileError(f"{where}: the file is gone since its footer was read") from None
    except StorageError as exc:
        raise ParquetFileError(f"{where}: the file's end cannot be read, it may have changed "
                               f"since its footer was read ({exc})") from exc
    if len(got) != len(tail) or got != tail:
        raise ParquetFileError(
            f"{where}: the file changed since its footer was read (now "
            f"{'another size' if len(got) != len(tail) else 'another footer'}); restart to "
            "index it again")


def scratch_place(folder: Path, basename: str, scratch: Path) -> Path:
    """Where row group `basename` of a Parquet stream can be fetched into folder `scratch` and
    read there (a lengths scan) without entering the cache: its file's footer is copied from
    the stream's cache `folder` beside it.

    Args:
        folder: the stream's cache folder (holding the footers).
        basename: the row group's cached name.
        scratch: an empty folder.
    """
    named = split_group_name(basename)
    if named is None:
        raise ParquetFileError(f"{basename}: not a Parquet row group of this stream")
    footer = footer_basename(named[0])
    confine(scratch, scratch / basename)
    (scratch / footer).parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(folder / footer, scratch / footer)
    return scratch / basename
