"""What the cache needs of a stream: where its files lie on this node and at its remote, how one
is copied here, and the knobs of its downloads. `streaming.stream.Stream` is one; the cache
never imports it (a stream uses the cache's folder checks and index sync, not the other way)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Protocol


class StreamFiles(Protocol):
    """One stream's files, as the cache prepares them.

    Args:
        keep_zip: keep downloaded compressed files beside their decompressed copies.
        validate_hash: the digest files are checked with (None: the index's fast one, if any).
        download_retry: extra attempts per file copy (None: the default).
        download_timeout: seconds per download attempt (None: the default).
    """

    keep_zip: bool | None
    validate_hash: str | None
    download_retry: int | None
    download_timeout: float | None

    @property
    def local_dir(self) -> Path:
        """The folder this node keeps the stream's index and raw shards in."""

    @property
    def remote_dir(self) -> str | None:
        """Where the files come from; None when the local folder is the only copy."""

    def remote_url(self, basename: str) -> str:
        """The URL (or path) of file `basename` at the remote."""

    def fetch(self, basename: str, dest: Path, *, expected_size: int | None = None,
              expected_hashes: dict[str, str] | None = None) -> Path:
        """Copy remote file `basename` to `dest` atomically; `dest`."""

    def check_in_place(self, basename: str, *, expected_size: int | None = None) -> None:
        """Make shard `basename`, read in place from the remote's own file, ready to read;
        nothing is copied."""

    def source_path(self, basename: str) -> Path | None:
        """The remote file itself when it can be read in place; else None."""

    def streams_zip(self, basename: str) -> bool:
        """Whether compressed `basename` may be decompressed while it downloads."""

    def stream_remote(self, basename: str, consume: Callable[[bytes], object], *,
                      size: int) -> None:
        """Hand remote `basename`'s `size` bytes, in order, to `consume` as they arrive."""

    def side_bytes_to_come(self) -> int:
        """Bytes of files other than shards the stream will still write into its cache folder
        (a Parquet stream's footers not fetched yet); 0 for an MDS stream."""
