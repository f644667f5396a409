"""A Parquet stream's index published beside its files, so that a node starts from one GET
instead of one ranged GET per file's footer.

`streaming parquet-index LOCATION` reads every footer once and writes
`_streaming_parquet_index.json` into the folder the files lie in: the index the stream derives
(one entry per row group, each naming its file's size and a digest of its footer) for one
projection. A stream over that folder, a glob below it or a list of files in it, with the same
projection, takes its entries from there and reads no footer at start-up; each file's footer is
then fetched with the first of its row groups the node needs, and refused by name unless its
digest is the one published. The file's name starts with `_`, so listing the folder for Parquet
files never picks it up.
"""

from __future__ import annotations

import fnmatch
import json
import logging
import os
import tempfile
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from streaming.cache.prepare.parquet_footers import ParquetSelection, build_index, under
from streaming.errors import (
    IndexFileError,
    ObjectNotFoundError,
    ObjectTooLargeError,
    ParquetFileError,
)
from streaming.format.index_bounds import max_index_bytes, too_big
from streaming.storage.backend import Backend
from streaming.storage.local_folder import LocalBackend
from streaming.storage.retry import RetryPolicy
from streaming.storage.transfer import timed_backend, transfer_policy

log = logging.getLogger(__name__)

PUBLISHED_NAME = "_streaming_parquet_index.json"
KIND = "streaming parquet index"
VERSION = 1
HEADER_BYTES = 1 << 20  # room for the first line beside an index of the largest size accepted


@dataclass(frozen=True)
class PublishedIndex:
    """What `publish_document` wrapped: the published file's bytes and what it holds.

    Args:
        data: the file's bytes.
        files: Parquet files indexed.
        row_groups: their row groups.
    """

    data: bytes
    files: int
    row_groups: int


def publish_document(document: dict[str, Any], selection: ParquetSelection,
                     columns: Sequence[str] | None) -> PublishedIndex:
    """The published form of `document`, the index derived from `selection`'s footers with
    projection `columns`: a first line saying what it indexes, then the index as a stream
    derives it (files read in place keep no folder of the publisher's in it).

    Args:
        document: the derived index.json document.
        selection: the files it indexes.
        columns: its projection (None: every column).
    """
    shards = [{k: v for k, v in shard.items() if k != "in_place"}
              for shard in document["shards"]]
    header = {"kind": KIND, "version": VERSION,
              "columns": None if columns is None else list(columns),
              "pattern": selection.pattern,
              "files": None if selection.files is None else list(selection.files)}
    index = {**document, "shards": shards,
             "parquet": {**document.get("parquet", {}), "published": PUBLISHED_NAME}}
    data = json.dumps(header).encode() + b"\n" + json.dumps(index).encode()
    files = len({shard["file"] for shard in shards})
    return PublishedIndex(data, files, len(shards))


def published_document(backend: Backend, root: str, selection: ParquetSelection,
                       columns: Sequence[str] | None, policy: RetryPolicy) -> bytes | None:
    """The index.json of `selection` taken from the folder's published index, or None when
    there is none or it cannot serve this stream (another projection, files it lacks): the
    footers are then read as usual.

    Args:
        backend: the store holding the files.
        root: `selection.base` as the backend's path.
        selection: the stream's files.
        columns: the stream's projection (None: every column).
        policy: retries and deadlines of the request.
    """
    path = under(root, PUBLISHED_NAME)
    url = backend.url(path)
    try:
        data = policy.run(url, lambda deadline: backend.get(
            path, deadline=deadline, max_size=max_index_bytes() + HEADER_BYTES))
    except ObjectNotFoundError:
        return None
    except ObjectTooLargeError as exc:
        raise IndexFileError(f"{exc}: {too_big(url)}") from exc
    head, _, body = data.partition(b"\n")
    header = _checked_header(head, url)
    wanted = None if columns is None else list(columns)
    if header.get("columns") != wanted:
        warnings.warn(f"{url} indexes the columns {header.get('columns') or 'all'}, this stream "
                      f"reads {wanted or 'all'}: its footers are read instead (publish an index "
                      "for these columns with `streaming parquet-index --columns`)",
                      stacklevel=2)
        return None
    whole = header.get("pattern") is None and header.get("files") is None
    if whole and selection.pattern is None and selection.files is None \
            and not isinstance(backend, LocalBackend):
        return body  # as published: the index of every file below the folder
    try:
        document = json.loads(body)
        shards = document["shards"]
    except (ValueError, TypeError, KeyError) as exc:
        raise ParquetFileError(f"{url}: its index is damaged ({exc!r}); publish it again with "
                               "`streaming parquet-index`") from None
    shards = _selected(shards, header, selection, url)
    if shards is None:
        return None
    if isinstance(backend, LocalBackend):  # read in place, from this node's path
        in_place = os.path.abspath(root)
        shards = [{**shard, "in_place": in_place} for shard in shards]
    document["shards"] = shards
    document["parquet"] = {**document.get("parquet", {}), "remote": selection.key(),
                           "files": len({shard["file"] for shard in shards})}
    log.info("%s: %d row groups from the published index, no footer read", selection.base,
             len(shards))
    return json.dumps(document).encode()


def _checked_header(head: bytes, url: str) -> dict[str, Any]:
    """The published file's first line, once it says this version can read what follows
    (ParquetFileError naming `url` otherwise)."""
    try:
        header = json.loads(head)
    except ValueError:
        header = None
    if not isinstance(header, dict) or header.get("kind") != KIND:
        raise ParquetFileError(f"{url}: not a published Parquet index; publish it again with "
                               "`streaming parquet-index`")
    if header.get("version") != VERSION:
        raise ParquetFileError(f"{url}: a published Parquet index of version "
                               f"{header.get('version')!r}, this library reads {VERSION}; "
                               "publish it again with `streaming parquet-index`")
    return header


def _selected(shards: list[dict[str, Any]], header: dict[str, Any],
              selection: ParquetSelection, url: str) -> list[dict[str, Any]] | None:
    """The published entries of the files `selection` names, in its order; None when the
    published index was made for other files than this selection can be served from."""
    if header.get("pattern") is None and header.get("files") is None:
        pass  # the whole folder: any selection below it is served
    elif (header.get("pattern"), header.get("files")) != (
            selection.pattern, None if selection.files is None else list(selection.files)):
        log.info("%s indexes other files than this stream's selection; reading footers", url)
        return None
    if selection.files is not None:
        by_file: dict[str, list[dict[str, Any]]] = {}
        for shard in shards:
            by_file.setdefault(shard["file"], []).append(shard)
        missing = [name for name in selection.files if name not in by_file]
        if missing:
            log.info("%s does not index %s; reading footers", url, missing[0])
            return None
        return [shard for name in selection.files for shard in by_file[name]]
    if selection.pattern is not None:
        shards = [s for s in shards if fnmatch.fnmatchcase(s["file"], selection.pattern)]
    if not shards:
        raise ParquetFileError(f"{url}: no Parquet files of this stream in the published index"
                               + (f" match {selection.pattern!r}" if selection.pattern else ""))
    return shards


def publish(selection: ParquetSelection, columns: Sequence[str] | None, *, timeout: float,
            retry: int) -> tuple[str, PublishedIndex]:
    """Read the footers of `selection`'s files and publish the index they give beside them
    (replacing a published index there); returns its URL and what it holds.

    Args:
        selection: the files to index (a folder, a glob below it, or a list of files in it).
        columns: the projection streams will read (None: every column).
        timeout: seconds per request.
        retry: extra attempts per request.
    """
    backend, root = timed_backend(selection.base, timeout)
    policy = transfer_policy(timeout, retry, 0.25, selection.base)
    with tempfile.TemporaryDirectory(prefix="streaming-parquet-index-") as scratch:
        document = json.loads(build_index(selection, backend, root, columns, policy,
                                          Path(scratch)))
    published = publish_document(document, selection, columns)
    path = under(root, PUBLISHED_NAME)
    policy.run(backend.url(path), lambda deadline: backend.put(path, published.data))
    return backend.url(path), published
