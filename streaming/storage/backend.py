"""The one storage interface every backend implements (local files, S3, ...).

Paths are backend-native strings (a filesystem path, a bucket key); `url(path)` turns one back
into the user-facing URL for messages. Deadlines are absolute `time.monotonic()` values.
"""

from __future__ import annotations

import abc
import contextlib
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

from streaming.errors import (
    ArgumentError,
    DownloadTimeoutError,
    HashMismatchError,
    MissingExtraError,
    ObjectNotFoundError,
    ObjectTooLargeError,
    StorageError,
)
from streaming.format.hashing import new_hasher
from streaming.util.atomic import staged_file
from streaming.util.pagewrite import write_sliced

CHUNK = 1 << 20  # bytes per read; also how often a download checks its deadline

Verifier = Callable[[Path], None]


def check_deadline(deadline: float | None, url: str) -> None:
    """Raise DownloadTimeoutError naming `url` if the wall-clock deadline has passed."""
    if deadline is not None and time.monotonic() > deadline:
        raise DownloadTimeoutError(f"{url}: transfer exceeded its deadline")


def too_large(url: str, got: int, most: int, what: str) -> ObjectTooLargeError:
    """The error for an object that sent more than `most` bytes (`what`: whose bound), raised
    as soon as the excess arrives."""
    return ObjectTooLargeError(f"{url}: sent more than {most:,} bytes ({what}); stopped after "
                               f"{got:,} bytes, nothing kept")


def check_size(url: str, got: int, expected: int | None) -> None:
    """Raise StorageError if a transfer delivered a different byte count than expected."""
    if expected is not None and got > expected:
        raise too_large(url, got, expected, "the object is larger than expected")
    if expected is not None and got != expected:
        raise StorageError(f"{url}: received {got} bytes, expected {expected} "
                           "(truncated transfer)")


@dataclass(frozen=True)
class ListedObject:
    """One object as a listing gives it.

    Args:
        size: its bytes.
        etag: its ETag as the store spells it (quotes included), None when not listed.
    """

    size: int
    etag: str | None = None


class Backend(abc.ABC):
    """get / ranged get / size / exists / download / put / upload / list / delete for one store."""

    #: Whether big objects download faster as parallel byte ranges (remote stores: yes).
    parallel_ranges: bool = False
    #: Whether a ranged GET can be made conditional on the object's ETag (`get_range`'s
    #: `if_match`), the ETag coming from a listing (`list_versions`) or from `version`.
    conditional_reads: bool = False

    @abc.abstractmethod
    def url(self, path: str) -> str:
        """The user-facing URL of `path`, used in every error message."""

    @contextlib.contextmanager
    def _translated(self, path: str) -> Iterator[None]:
        """Turn an SDK or transport failure inside the block into this store's typed error for
        `path` (`_error`); the library's own errors pass through unchanged."""
        try:
            yield
        except (StorageError, MissingExtraError):
            raise
        except Exception as exc:
            raise self._error(exc, path) from exc

    def _error(self, exc: Exception, path: str) -> StorageError:
        """The typed error for a failure `exc` about `path` (stores refine it by cause)."""
        return StorageError(f"{self.url(path)}: {type(exc).__name__}: {exc}")

    @abc.abstractmethod
    def iter_chunks(
        self, path: str, start: int | None = None, end: int | None = None, *,
        deadline: float | None = None,
    ) -> Iterator[bytes]:
        """Yield the object's bytes [start, end) in chunks; typed errors on failure."""

    @abc.abstractmethod
    def size(self, path: str) -> int:
        """Byte size of the object; ObjectNotFoundError if absent."""

    def exists(self, path: str) -> bool:
        """Whether the object exists (by default: whether `size` finds it)."""
        try:
            self.size(path)
        except ObjectNotFoundError:
            return False
        return True

    @abc.abstractmethod
    def put(self, path: str, data: bytes) -> None:
        """Store `data` at `path` (readers never see a partial object)."""

    @abc.abstractmethod
    def upload(self, local: Path, path: str) -> None:
        """Copy the local file `local` to `path`."""

    @abc.abstractmethod
    def list(self, prefix: str) -> list[str]:
        """Sorted paths of every object whose path starts with `prefix`."""

    def list_sizes(self, prefix: str) -> dict[str, int]:
        """The byte size of every object whose path starts with `prefix`, by path, in path
        order. Stores whose listing carries sizes answer from it; this default asks each
        object's size after listing."""
        return {path: self.size(path) for path in self.list(prefix)}

    def list_versions(self, prefix: str) -> dict[str, ListedObject]:
        """The size and, where the store's listing gives it, the ETag of every object whose
        path starts with `prefix`, by path, in path order (this default: no ETags)."""
        return {path: ListedObject(size) for path, size in self.list_sizes(prefix).items()}

    def version(self, path: str) -> ListedObject:
        """The object's size and, where the store tells it, its ETag, in one request (this
        default: its size, no ETag)."""
        return ListedObject(self.size(path))

    @abc.abstractmethod
    def delete(self, path: str) -> None:
        """Remove the object; a missing object is not an error (like S3)."""

    def chunks(
        self, path: str, start: int | None = None, end: int | None = None, *,
        deadline: float | None = None,
    ) -> Iterator[bytes]:
        """Bytes [start, end) of the object in pieces as they arrive, giving up with
        DownloadTimeoutError once `deadline` (a time.monotonic() value) has passed."""
        return self._bounded(path, start, end, deadline)

    def _bounded(
        self, path: str, start: int | None, end: int | None, deadline: float | None,
        if_match: str | None = None,
    ) -> Iterator[bytes]:
        url = self.url(path)
        chunks = (self.iter_chunks(path, start, end, deadline=deadline) if if_match is None
                  else self.iter_chunks_if(path, start, end, if_match, deadline=deadline))
        for chunk in chunks:
            check_deadline(deadline, url)
            yield chunk

    def iter_chunks_if(self, path: str, start: int | None, end: int | None, if_match: str, *,
                       deadline: float | None = None) -> Iterator[bytes]:
        """`iter_chunks` of the object while its ETag is `if_match` (ObjectChangedError
        otherwise); stores with `conditional_reads` implement it."""
        raise ArgumentError(f"{self.url(path)}: this store's reads cannot be conditional")

    def get(self, path: str, *, deadline: float | None = None,
            max_size: int | None = None) -> bytes:
        """The whole object as bytes; ObjectTooLargeError as soon as more than `max_size`
        bytes arrived, when given."""
        pieces, got = [], 0
        for piece in self._bounded(path, None, None, deadline):
            got += len(piece)
            if max_size is not None and got > max_size:
                raise too_large(self.url(path), got, max_size, "the most accepted")
            pieces.append(piece)
        return b"".join(pieces)

    def get_range(
        self, path: str, start: int, end: int | None, *, deadline: float | None = None,
        if_match: str | None = None,
    ) -> bytes:
        """Bytes [start, end) of the object (end=None: to its end); StorageError if fewer
        arrive. With `if_match` (stores with `conditional_reads` only), ObjectChangedError
        unless the object's ETag is still that one."""
        if start < 0 or (end is not None and end < start):
            raise ArgumentError(f"{self.url(path)}: bad byte range [{start}, {end})")
        if start == end:
            return b""
        data = b"".join(self._bounded(path, start, end, deadline, if_match))
        check_size(self.url(path), len(data), None if end is None else end - start)
        return data

    def download(
        self, path: str, dest: Path, *, expected_size: int | None = None,
        deadline: float | None = None, verify: Verifier | None = None,
        hashes: Mapping[str, str] | None = None, max_size: int | None = None,
    ) -> Path:
        """Stream the object to a temp file beside `dest`, check it (size, `hashes` computed as
        the bytes pass, then `verify`), then rename it into place. A body longer than
        `expected_size` (or, without one, `max_size`) is refused as soon as the excess
        arrives, so at most that many bytes (plus one read) are ever written."""
        dest = Path(dest)
        hashers = {algo: new_hasher(algo) for algo in hashes or {}}
        most = expected_size if expected_size is not None else max_size
        what = ("the size the index declares" if expected_size is not None
                else "the most accepted")
        with staged_file(dest) as tmp:
            got = 0
            with open(tmp, "wb") as out:
                for chunk in self._bounded(path, None, None, deadline):
                    got += len(chunk)
                    if most is not None and got > most:
                        raise too_large(self.url(path), got, most, what)
                    write_sliced(out, chunk)
                    for hasher in hashers.values():
                        hasher.update(chunk)
            check_size(self.url(path), got, expected_size)
            for algo, hasher in hashers.items():
                if hasher.hexdigest() != hashes[algo]:
                    raise HashMismatchError(
                        f"{dest.name} (from {self.url(path)}): {algo} digest is "
                        f"{hasher.hexdigest()}, the index says {hashes[algo]}")
            if verify is not None:
                verify(tmp)
        return dest
