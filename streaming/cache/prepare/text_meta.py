"""Meta files of text-format streams (`json`, `csv`, `tsv`, `xsv`), made ready at start-up.

A text shard is a data file plus a small meta file (4 bytes per row and the config). The cache
manages data files like MDS shards; the meta files are fetched (and decompressed) once when the
dataset is built, kept beside them and never evicted, so every later read is the MDS path.
"""

from __future__ import annotations

from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING

from streaming.errors import ObjectNotFoundError
from streaming.format.compression import decompress_file
from streaming.format.hashing import download_digest
from streaming.format.index import DatasetIndex
from streaming.util.confine import confine, remove
from streaming.util.files import has_size

if TYPE_CHECKING:
    from streaming.cache.prepare.stream_files import StreamFiles

META_THREADS = 8


def prepare_meta_files(streams: Sequence[StreamFiles], indexes: Sequence[DatasetIndex]) -> None:
    """Fetch every meta file of the text-format streams into their local folders."""
    jobs = [(stream, entry) for stream, index in zip(streams, indexes)
            if index.row_codec is not None and getattr(index.row_codec, "by_span", True)
            for entry in index.shards]
    if not jobs:
        return
    with ThreadPoolExecutor(min(META_THREADS, len(jobs))) as pool:
        for done in [pool.submit(_prepare_one, stream, entry) for stream, entry in jobs]:
            done.result()


def _prepare_one(stream: StreamFiles, entry: dict) -> Path:
    raw = entry["raw_meta"]
    local = stream.local_dir / raw["basename"]
    if has_size(local, int(raw["bytes"])):
        return local
    remote = stream.remote_dir is not None
    algo = stream.validate_hash
    zipped = entry.get("zip_meta")
    confine(stream.local_dir, local)
    if zipped:
        confine(stream.local_dir, stream.local_dir / zipped["basename"])
    if not zipped:
        if not remote:
            raise ObjectNotFoundError(f"meta file {local} is missing and the stream has no "
                                      "remote to fetch it from")
        local.parent.mkdir(parents=True, exist_ok=True)
        return stream.fetch(raw["basename"], local, expected_size=int(raw["bytes"]),
                            expected_hashes=_pick(raw, algo) or _fast(raw))
    packed = stream.local_dir / zipped["basename"]
    fetched = False
    if not has_size(packed, int(zipped["bytes"])):
        if not remote:
            raise ObjectNotFoundError(f"meta file {packed} is missing and the stream has no "
                                      "remote to fetch it from")
        packed.parent.mkdir(parents=True, exist_ok=True)
        stream.fetch(zipped["basename"], packed, expected_size=int(zipped["bytes"]),
                     expected_hashes=_pick(zipped, algo) or _fast(zipped))
        fetched = True
    decompress_file(packed, local, entry["compression"], expected_size=int(raw["bytes"]),
                    durable=False)
    if fetched and not stream.keep_zip:
        remove(stream.local_dir, packed)
    return local


def _fast(info: dict) -> dict[str, str] | None:
    """A fast digest the index records for a meta file, checked on download by default."""
    return download_digest(info.get("hashes") or {}, None)


def _pick(info: dict, algo: str | None) -> dict[str, str] | None:
    hashes = info.get("hashes") or {}
    return {algo: hashes[algo]} if algo and algo in hashes else None

