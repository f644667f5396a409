"""MDSWriter: encode samples into MDS v2 shards plus one index.json, byte-compatible with MDS.

The caller's thread only encodes samples into a growing buffer; finished shards go to a small
thread pool that writes, compresses and hashes them. index.json is written last and atomically,
so a crash at any point never leaves an index naming a missing or partial shard.
"""

from __future__ import annotations

import concurrent.futures as cf
import inspect
import logging
import mmap
import os
import re
import threading
import time
from collections.abc import Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from types import TracebackType
from typing import Any

from streaming.errors import (
    ArgumentError,
    DeadlineExceeded,
    DiskFullError,
    FormatError,
    StreamingError,
    UnknownArgumentError,
)
from streaming.format.index import LENGTHS_KEY, write_index
from streaming.format.sample import SampleCodec
from streaming.storage.retry import RETRY, UPLOAD_TIMEOUT
from streaming.util.confine import remove
from writers.fast_encode import sample_encoder
from writers.growth import (
    check_mode,
    combined_document,
    existing_dataset,
    remove_files,
    stale_names,
)
from writers.length_recorder import LengthRecorder, LengthSpec
from writers.limits import DEFAULT_SIZE_LIMIT, check_compression, check_hashes, check_size_limit
from writers.output_dir import clear_files, prepare_directory
from writers.shard_builder import ShardBuilder
from writers.shard_publish import TMP_SUFFIX, config_json, shard_config, write_shard
from writers.upload import Uploader, make_uploader, resolve_output, shard_files

log = logging.getLogger(__name__)

# Files a previous dataset may have left in `out`, removed when exist_ok=True.
_DATASET_FILE = re.compile(r"^(index\.json|shard\.\d{5}\.mds(\.[a-z0-9]+)?)$")
_TEMP_FILE = re.compile(r"^\.(index\.json|shard\.\d{5}\.mds).*" + re.escape(TMP_SUFFIX) + "$")
_OWN_FILE = re.compile(f"{_DATASET_FILE.pattern}|{_TEMP_FILE.pattern}")


class MDSWriter:
    """Write dict samples as MDS shards of at most `size_limit` raw bytes under `out`.

    Use as a context manager (or call finish()): the index is only written on a clean exit.
    docs/writing.md says more about every argument.

    Args:
        columns: Column name -> encoding ("str", "int", "ndarray:int32", "jpeg", ...); stored
            sorted by name.
        out: A local folder or `file://` URL, a remote URL (`s3://`, `gs://`, `az://`, ...),
            or a (local folder, remote URL) pair.
        compression: Whole-shard codec ("zstd", "zstd:7", "gz", "bz2", "br", "snappy");
            None: uncompressed.
        hashes: Digest algorithms recorded per shard file ("sha1", "xxh64", ...); None: none.
        size_limit: Raw bytes per shard (int or "64mb"; default 64 MiB, below 4 GiB); None:
            no limit (shards still stop below 4 GiB).
        keep_local: Keep the local files uploaded to a remote `out`. None keeps the local
            folder of a pair and empties a temporary staging folder.
        progress_bar: Show a bar counting written samples.
        exist_ok: Write into a folder that already holds a dataset (its files are replaced);
            False raises OutputExistsError.
        max_workers: Threads that write, compress and hash finished shards; None:
            min(4, cpus).
        timeout: Seconds any single wait for those threads or an upload may take (600).
        retry: Extra attempts per file upload after a transient failure.
        lengths: A column name, or a function of the sample, whose per-sample length is
            recorded in a side file per shard (docs/packing.md); None: none. Not in the
            reference.
        mode: "create" (default), "append" (add shards to the dataset at `out`) or
            "overwrite" (replace it, publishing the new index last). Not in the reference.
    """

    def __init__(
        self,
        *,
        columns: Mapping[str, str],
        out: str | Path | tuple[str | Path | None, str | None],
        compression: str | None = None,
        hashes: list[str] | None = None,
        size_limit: int | str | None = DEFAULT_SIZE_LIMIT,
        keep_local: bool | None = None,
        progress_bar: bool = False,
        exist_ok: bool = False,
        max_workers: int | None = None,
        timeout: float = UPLOAD_TIMEOUT,
        retry: int = RETRY,
        lengths: LengthSpec | None = None,
        mode: str = "create",
        **unknown: Any,  # refused by name (e.g. the reference's long-gone `min_workers`)
    ) -> None:
        if unknown:
            raise UnknownArgumentError(
                f"Invalid Writer argument(s): {sorted(unknown)}: MDSWriter takes "
                f"{', '.join(_ARGUMENTS)}")
        self.retry = int(retry)
        if not columns:
            raise FormatError("MDSWriter needs at least one column in `columns`")
        self.output = resolve_output(out)
        self.directory = self.output.local
        self.columns = dict(sorted(columns.items()))
        self._lengths = LengthRecorder.create(lengths, self.columns)
        names, encodings = list(self.columns), list(self.columns.values())
        # Writing pickles is harmless; only reading them is gated by allow_unsafe_types.
        self._codec = SampleCodec(names, encodings, allow_unsafe_types=True)
        self.compression = check_compression(compression)
        self.hashes = check_hashes(hashes, "MDSWriter(hashes=")
        self.size_limit = check_size_limit(size_limit)
        self.keep_local = keep_local
        self.timeout = float(timeout)
        self.max_workers = max_workers or min(4, os.cpu_count() or 1)
        if self.max_workers < 1:
            raise ArgumentError(f"max_workers must be at least 1, got {max_workers}")

        self.mode = check_mode(mode)
        self._config = shard_config(
            names, encodings, self.compression, self.hashes, self.size_limit
        )
        self._existing = existing_dataset(self.mode, self.output.remote or self.directory,
                                          self._config)
        self._first_shard = self._existing.next_shard() if self._existing else 0
        self._uploader = self._prepare(exist_ok, keep_local)
        self._builder = ShardBuilder(config_json(self._config), self.size_limit)
        self._encode = sample_encoder(self._codec)
        self._pool = ThreadPoolExecutor(self.max_workers, thread_name_prefix="mds-writer")
        # Bounds the shards held in memory: one being filled plus this many in flight.
        self._slots = threading.Semaphore(self.max_workers + 1)
        self._futures: list[Future[dict[str, Any]]] = []
        self._error: BaseException | None = None
        self._closed = False
        self._progress = _progress_bar(self.directory) if progress_bar else None

    def _prepare(self, exist_ok: bool, keep_local: bool | None) -> Uploader | None:
        """Make (or, for mode "create", clear) the local folder; the uploader for a remote."""
        if self.mode == "create":
            prepare_directory(self.directory, exist_ok, _OWN_FILE, "MDSWriter")
        else:
            self.directory.mkdir(parents=True, exist_ok=True)
        return make_uploader(
            self.output, exist_ok=exist_ok, keep_local=keep_local, retry=self.retry,
            timeout=self.timeout, max_workers=max(4, self.max_workers),
            keep=frozenset(self._existing.basenames()) if self._existing else None,
        )

    def get_config(self) -> dict[str, Any]:
        """The shard-writing config every shard header embeds (format, version, columns,
        compression, hashes, size_limit), as the reference writer's `get_config` returns it."""
        return dict(self._config)

    # -- the hot path -------------------------------------------------------------------------

    def write(self, sample: Mapping[str, Any]) -> None:
        """Encode one sample into the current shard, flushing first if it would overflow."""
        if self._error is not None or self._closed:
            self._check_usable()
        encoded = self._encode(sample)
        builder = self._builder
        if not builder.fits(len(encoded)):
            self._flush()
        builder.add(encoded)
        if self._lengths is not None:
            self._lengths.add(sample)

    # -- shard hand-off -----------------------------------------------------------------------

    def _flush(self) -> None:
        """Hand the current shard (possibly empty, as the reference writer does) to the pool."""
        raw, buf, samples = self._builder.take()
        lengths = self._lengths.take() if self._lengths is not None else None
        basename = f"shard.{self._first_shard + len(self._futures):05d}.mds"
        self._acquire_slot()
        try:
            future = self._pool.submit(self._write_shard, basename, raw, buf, samples, lengths)
        except BaseException:
            self._slots.release()
            raise
        future.add_done_callback(self._record_error)
        self._futures.append(future)
        if self._progress is not None:
            self._progress.update(samples)

    def _write_shard(self, basename: str, raw: memoryview, buf: mmap.mmap, samples: int,
                     lengths: Any = None) -> dict:
        try:
            entry = write_shard(self.directory, basename, raw, samples, self._config)
            if self._lengths is not None:
                self._lengths.write(self.directory, basename, lengths, self.hashes)
            raw.release()
            self._builder.recycle(buf)
            self._shard_written(entry)
            return entry
        finally:
            self._slots.release()

    def _shard_written(self, entry: dict[str, Any]) -> None:
        """Called on a worker thread once a shard's files are complete: the upload hook."""
        if self._uploader is not None:
            files = shard_files(self.directory, entry)
            upload = self._uploader.submit(entry["raw_data"]["basename"], files)
            upload.add_done_callback(self._record_error)

    def _record_error(self, future: Future) -> None:
        if self._error is None and not future.cancelled() and future.exception() is not None:
            self._error = future.exception()

    def _acquire_slot(self) -> None:
        deadline = time.monotonic() + self.timeout
        while not self._slots.acquire(timeout=0.2):
            self._check_usable()
            if time.monotonic() > deadline:
                raise DeadlineExceeded(
                    f"no shard of {self.directory} finished within {self.timeout:.0f} s"
                )

    def _check_usable(self) -> None:
        if self._error is not None:
            raise self._error
        if self._closed:
            raise StreamingError(f"MDSWriter for {self.directory} is already finished")

    # -- ending -------------------------------------------------------------------------------

    def finish(self) -> None:
        """Flush the last shard, wait for every shard file, then write index.json atomically."""
        if self._closed:
            return
        hung = False
        try:
            self._check_usable()
            if self._builder.samples:
                self._flush()
            entries = self._wait_all()
            extra = self._lengths.index_extra(entries) if self._lengths is not None else None
            shards, extra = combined_document(self._existing, self.mode, entries, extra)
            write_index(self.directory, shards, extra)
            if self._uploader is not None:
                self._uploader.publish()
            if self.mode == "overwrite":
                self._remove_replaced(entries, extra)
        except DeadlineExceeded:
            hung = True
            raise
        except DiskFullError:
            self._shutdown()
            self._discard_files()
            raise
        finally:
            self._shutdown(wait=not hung)

    def _remove_replaced(self, entries: list[dict[str, Any]], extra: dict[str, Any]) -> None:
        """After the new index is published: delete the replaced dataset's files."""
        if self._existing is None:
            return
        kept = [entry[key]["basename"] for entry in entries
                for key in ("raw_data", "zip_data") if entry.get(key)]
        kept += [f["basename"] for f in extra.get(LENGTHS_KEY, {}).get("files", [])]
        remove_files(self._existing.location, stale_names(self._existing, kept))

    def _discard_files(self) -> None:
        """Remove the shard files this writer made: without an index nobody can read them,
        and after a full disk they hold the space the user needs back."""
        if self.mode == "create":
            clear_dataset_files(self.directory)
        else:  # only our own shards: the existing dataset stays whole
            for n in range(self._first_shard, self._first_shard + len(self._futures)):
                for path in self.directory.glob(f"shard.{n:05d}.mds*"):
                    remove(self.directory, path)
        for path in self.directory.glob(f"*{TMP_SUFFIX}"):
            remove(self.directory, path)

    def _wait_all(self) -> list[dict[str, Any]]:
        deadline = time.monotonic() + self.timeout
        entries = []
        for future in self._futures:
            remaining = deadline - time.monotonic()
            try:
                entries.append(future.result(timeout=max(remaining, 0.0)))
            except cf.TimeoutError as exc:
                if future.done():
                    raise
                raise DeadlineExceeded(
                    f"shards of {self.directory} were not all written within {self.timeout:.0f} s"
                ) from exc
        return entries

    def _shutdown(self, wait: bool = True) -> None:
        """Stop the shard threads; wait=False leaves a hung one behind instead of hanging too."""
        self._closed = True
        self._pool.shutdown(wait=wait, cancel_futures=True)
        if self._uploader is not None:
            self._uploader.close(wait=wait)
        if self._progress is not None:
            self._progress.close()

    def __enter__(self) -> MDSWriter:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if exc_type is None:
            self.finish()
        elif not self._closed:
            log.warning("MDSWriter for %s aborted, no index written: %s", self.directory, exc)
            self._shutdown(wait=not isinstance(exc, DeadlineExceeded))
            if isinstance(exc, DiskFullError):
                self._discard_files()


def is_dataset_file(name: str) -> bool:
    """Whether a file named `name` belongs to an MDS dataset (index, shard or writer temp)."""
    return _OWN_FILE.match(name) is not None


def clear_dataset_files(directory: Path) -> None:
    """Remove the index, shard files and writer temp files of an MDS dataset in `directory`
    (the index first, so no moment exists where it names a removed shard); nothing else."""
    clear_files(directory, _OWN_FILE)


def _progress_bar(directory: Path) -> Any:
    from tqdm import tqdm

    return tqdm(desc=f"writing {directory}", unit=" samples", leave=False)


# The signature shows the keywords MDSWriter takes (tools filter their configs by it); any other
# reaches `**unknown` only to be refused by name.
_init = inspect.signature(MDSWriter.__init__)
MDSWriter.__init__.__signature__ = _init.replace(  # type: ignore[attr-defined]
    parameters=[p for p in _init.parameters.values() if p.kind is not p.VAR_KEYWORD])
_ARGUMENTS = list(inspect.signature(MDSWriter).parameters)
