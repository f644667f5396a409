"""Writers of the text shard formats: `JSONWriter`, `XSVWriter`, `CSVWriter`, `TSVWriter`.

Each shard is a data file of rows (`shard.00000.json`) plus a meta file indexing it
(`shard.00000.json.meta`), byte-identical to what the MDS ecosystem's writers produce for the
same samples, so either side reads the other's datasets. Rows are encoded by the row codecs of
`streaming.format.rows`; files are compressed, hashed and written like MDS shards, and index.json
is written last and atomically.
"""

from __future__ import annotations

import inspect
import logging
import re
from collections.abc import Mapping
from types import TracebackType
from typing import Any

from streaming.errors import StreamingError
from streaming.format.index import write_index
from streaming.format.rows import JSONRows, RowCodec, XSVRows
from streaming.format.text_shard import META_SUFFIX, meta_bytes
from streaming.storage.retry import RETRY
from writers.limits import DEFAULT_SIZE_LIMIT, check_compression, check_hashes, check_size_limit
from writers.output_dir import prepare_directory
from writers.shard_publish import write_shard
from writers.upload import make_uploader, resolve_output, shard_files

log = logging.getLogger(__name__)

_DATASET_FILE = re.compile(
    r"^(index\.json|shard\.\d{5}\.(json|csv|tsv|xsv)(\.meta)?(\.[a-z0-9]+)?)$")


class TextWriter:
    """Shared machinery: buffer encoded rows, cut a shard when the next row would pass
    `size_limit` (row bytes only, as the reference counts them), write data + meta files."""

    format = ""

    def __init__(self, codec: RowCodec, *, out: Any, compression: str | None,
                 hashes: list[str] | None, size_limit: int | str | None,
                 keep_local: bool | None, exist_ok: bool, retry: int = RETRY,
                 progress_bar: bool = False, max_workers: int | None = None) -> None:
        del progress_bar, max_workers  # accepted for MDSWriter parity; writing is synchronous
        self.codec = codec
        self.compression = check_compression(compression)
        self.hashes = check_hashes(hashes, f"{type(self).__name__}(hashes=")
        self.size_limit = check_size_limit(size_limit)
        self.output = resolve_output(out)
        self.directory = self.output.local
        prepare_directory(self.directory, exist_ok, _DATASET_FILE, type(self).__name__)
        self._uploader = make_uploader(self.output, exist_ok=exist_ok, keep_local=keep_local,
                                       retry=retry)
        self._rows: list[bytes] = []
        self._size = 0
        self._shards: list[dict[str, Any]] = []
        self._closed = False

    def get_config(self) -> dict[str, Any]:
        """The config every meta file embeds and every index entry repeats."""
        return {"version": 2, "format": self.format, "compression": self.compression,
                "hashes": self.hashes, "size_limit": self.size_limit}

    def _header(self) -> bytes:
        """Bytes the data file starts with (the column line of xsv formats)."""
        return b""

    def write(self, sample: Mapping[str, Any]) -> None:
        """Encode one sample into the current shard, cutting a shard first if it would
        overflow (a first row larger than the limit leaves an empty shard, as the reference)."""
        if self._closed:
            raise StreamingError(f"{type(self).__name__} for {self.directory} is finished")
        row = self.codec.encode(sample)
        if self.size_limit is not None and self.size_limit < self._size + len(row):
            self._flush()
        self._rows.append(row)
        self._size += len(row)

    def _flush(self) -> None:
        name = f"shard.{len(self._shards):05d}.{self.format}"
        header = self._header()
        data = b"".join([header, *self._rows])
        config = self.get_config()
        meta = meta_bytes([len(r) for r in self._rows], len(header), config)
        data_entry = write_shard(self.directory, name, memoryview(data), len(self._rows), config)
        meta_entry = write_shard(self.directory, name + META_SUFFIX, memoryview(meta), 0, config)
        entry = {**data_entry, "raw_meta": meta_entry["raw_data"],
                 "zip_meta": meta_entry["zip_data"]}
        self._shards.append(entry)
        if self._uploader is not None:
            self._uploader.submit(name, shard_files(self.directory, entry))
        self._rows, self._size = [], 0

    def finish(self) -> None:
        """Write the last shard, then index.json (and publish it when writing to a remote)."""
        if self._closed:
            return
        self._closed = True
        try:
            if self._rows:
                self._flush()
            write_index(self.directory, self._shards)
            if self._uploader is not None:
                self._uploader.publish()
        finally:
            if self._uploader is not None:
                self._uploader.close()

    def __enter__(self) -> TextWriter:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        if exc_type is None:
            self.finish()
        else:
            self._closed = True
            log.warning("%s for %s aborted, no index written: %s", type(self).__name__,
                        self.directory, exc)
            if self._uploader is not None:
                self._uploader.close()


class JSONWriter(TextWriter):
    """Write samples as `json` shards: one `json.dumps(sample, sort_keys=True)` per line.
    Column types: `str`, `int`, `float`.

    Args:
        columns: Column name -> type ("str", "int" or "float").
        out: A local folder or `file://` URL, a remote URL (`s3://`, `gs://`, `az://`, ...),
            or a (local folder, remote URL) pair.
        newline: The line separator (default "\\n").
        compression: Whole-shard codec ("zstd", "gz", "bz2", "br", "snappy"); None:
            uncompressed.
        hashes: Digest algorithms recorded per shard file ("sha1", "xxh64", ...); None: none.
        size_limit: Row bytes per shard (int or "64mb"; default 64 MiB); None: no limit.
        keep_local: Keep the local files uploaded to a remote `out`. None keeps the local
            folder of a pair and empties a temporary staging folder.
        exist_ok: Write into a folder that already holds a dataset (its files are replaced);
            False raises OutputExistsError.
        retry: Extra attempts per file upload after a transient failure.
        progress_bar: Accepted as MDSWriter takes it; ignored (writing is synchronous).
        max_workers: Accepted as MDSWriter takes it; ignored (writing is synchronous).
    """

    format = "json"

    def __init__(self, *, columns: Mapping[str, str], out: Any, newline: str = "\n",
                 compression: str | None = None, hashes: list[str] | None = None,
                 size_limit: int | str | None = DEFAULT_SIZE_LIMIT,
                 keep_local: bool | None = None, exist_ok: bool = False, retry: int = RETRY,
                 progress_bar: bool = False, max_workers: int | None = None) -> None:
        self.columns = dict(columns)
        self.newline = newline
        super().__init__(JSONRows(columns, newline), out=out, compression=compression,
                         hashes=hashes, size_limit=size_limit, keep_local=keep_local,
                         exist_ok=exist_ok, retry=retry, progress_bar=progress_bar,
                         max_workers=max_workers)

    def get_config(self) -> dict[str, Any]:
        return {**super().get_config(), "columns": self.columns, "newline": self.newline}


class XSVWriter(TextWriter):
    """Write samples as separated-value shards (`separator` of any length; values may contain
    neither it nor the newline). Columns are stored sorted by name, after a header line.

    Args:
        columns: Column name -> type ("str", "int" or "float").
        out: A local folder or `file://` URL, a remote URL (`s3://`, `gs://`, `az://`, ...),
            or a (local folder, remote URL) pair.
        separator: The value separator (any length).
        newline: The line separator (default "\\n").
        compression: Whole-shard codec ("zstd", "gz", "bz2", "br", "snappy"); None:
            uncompressed.
        hashes: Digest algorithms recorded per shard file ("sha1", "xxh64", ...); None: none.
        size_limit: Row bytes per shard (int or "64mb"; default 64 MiB); None: no limit.
        keep_local: Keep the local files uploaded to a remote `out`. None keeps the local
            folder of a pair and empties a temporary staging folder.
        exist_ok: Write into a folder that already holds a dataset (its files are replaced);
            False raises OutputExistsError.
        retry: Extra attempts per file upload after a transient failure.
        progress_bar: Accepted as MDSWriter takes it; ignored (writing is synchronous).
        max_workers: Accepted as MDSWriter takes it; ignored (writing is synchronous).
    """

    format = "xsv"

    def __init__(self, *, columns: Mapping[str, str], out: Any, separator: str,
                 newline: str = "\n", compression: str | None = None,
                 hashes: list[str] | None = None,
                 size_limit: int | str | None = DEFAULT_SIZE_LIMIT,
                 keep_local: bool | None = None, exist_ok: bool = False, retry: int = RETRY,
                 progress_bar: bool = False, max_workers: int | None = None) -> None:
        self.columns = dict(columns)
        self.separator = separator
        self.newline = newline
        self.rows = XSVRows.sorted(columns, separator, newline, self.format)
        super().__init__(self.rows, out=out, compression=compression, hashes=hashes,
                         size_limit=size_limit, keep_local=keep_local, exist_ok=exist_ok,
                         retry=retry, progress_bar=progress_bar, max_workers=max_workers)

    def _header(self) -> bytes:
        return self.rows.header()

    def get_config(self) -> dict[str, Any]:
        config = {**super().get_config(), "column_names": self.rows.column_names,
                  "column_encodings": self.rows.column_encodings, "newline": self.newline}
        if self.format == "xsv":
            config["separator"] = self.separator
        return config


def _fixed_separator() -> inspect.Signature:
    """XSVWriter's keywords without `separator` (what CSVWriter and TSVWriter pass on)."""
    sig = inspect.signature(XSVWriter.__init__)
    return sig.replace(parameters=[p for n, p in sig.parameters.items() if n != "separator"])


class CSVWriter(XSVWriter):
    """`XSVWriter` with the `,` separator and format `csv`.

    Args:
        columns: Column name -> type ("str", "int" or "float").
        out: A local folder or `file://` URL, a remote URL (`s3://`, `gs://`, `az://`, ...),
            or a (local folder, remote URL) pair.
        newline: The line separator (default "\\n").
        compression: Whole-shard codec ("zstd", "gz", "bz2", "br", "snappy"); None:
            uncompressed.
        hashes: Digest algorithms recorded per shard file ("sha1", "xxh64", ...); None: none.
        size_limit: Row bytes per shard (int or "64mb"; default 64 MiB); None: no limit.
        keep_local: Keep the local files uploaded to a remote `out`. None keeps the local
            folder of a pair and empties a temporary staging folder.
        exist_ok: Write into a folder that already holds a dataset (its files are replaced);
            False raises OutputExistsError.
        retry: Extra attempts per file upload after a transient failure.
        progress_bar: Accepted as MDSWriter takes it; ignored (writing is synchronous).
        max_workers: Accepted as MDSWriter takes it; ignored (writing is synchronous).
    """

    format = "csv"

    def __init__(self, *, columns: Mapping[str, str], out: Any, **options: Any) -> None:
        super().__init__(columns=columns, out=out, separator=",", **options)

    __init__.__signature__ = _fixed_separator()  # type: ignore[attr-defined]


class TSVWriter(XSVWriter):
    """`XSVWriter` with the tab separator and format `tsv`.

    Args:
        columns: Column name -> type ("str", "int" or "float").
        out: A local folder or `file://` URL, a remote URL (`s3://`, `gs://`, `az://`, ...),
            or a (local folder, remote URL) pair.
        newline: The line separator (default "\\n").
        compression: Whole-shard codec ("zstd", "gz", "bz2", "br", "snappy"); None:
            uncompressed.
        hashes: Digest algorithms recorded per shard file ("sha1", "xxh64", ...); None: none.
        size_limit: Row bytes per shard (int or "64mb"; default 64 MiB); None: no limit.
        keep_local: Keep the local files uploaded to a remote `out`. None keeps the local
            folder of a pair and empties a temporary staging folder.
        exist_ok: Write into a folder that already holds a dataset (its files are replaced);
            False raises OutputExistsError.
        retry: Extra attempts per file upload after a transient failure.
        progress_bar: Accepted as MDSWriter takes it; ignored (writing is synchronous).
        max_workers: Accepted as MDSWriter takes it; ignored (writing is synchronous).
    """

    format = "tsv"

    def __init__(self, *, columns: Mapping[str, str], out: Any, **options: Any) -> None:
        super().__init__(columns=columns, out=out, separator="\t", **options)

    __init__.__signature__ = _fixed_separator()  # type: ignore[attr-defined]
