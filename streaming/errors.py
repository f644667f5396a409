"""Typed errors shared by every layer: users catch one family, and messages name the culprit."""

from __future__ import annotations


class StreamingError(Exception):
    """Base class of every error this library raises on purpose."""


class FormatError(StreamingError, ValueError):
    """An MDS file (index or shard) is malformed; the message names the file."""


class IndexFileError(FormatError):
    """`index.json` is missing, unreadable, of the wrong version, or inconsistent."""


class ShardCorruptError(FormatError):
    """A shard's bytes disagree with its header or with the index (truncated, bad offsets...)."""


class HashMismatchError(ShardCorruptError):
    """A file's digest differs from the one recorded in the index."""


class DecompressionError(ShardCorruptError):
    """A compressed shard could not be decompressed."""


class UnknownEncodingError(FormatError):
    """A column encoding that this library does not know."""


class EncodeError(StreamingError, ValueError):
    """A value cannot be encoded with its column's encoding; the message names the column."""


class UnsafeTypeError(StreamingError, ValueError):
    """A column uses an unsafe encoding (pickle) and `allow_unsafe_types` was not set."""


class MissingExtraError(StreamingError, ImportError):
    """An optional dependency is needed; the message names the extra to install."""

    def __init__(self, feature: str, extra: str, package: str) -> None:
        super().__init__(
            f"{feature} needs the optional package {package!r}: "
            f"pip install 'mds-streaming[{extra}]'"
        )
        self.extra = extra
        self.package = package


class PlanError(StreamingError, ValueError):
    """Inconsistent planning arguments (mixing, topology, batching, resumption)."""


class StorageError(StreamingError, OSError):
    """A storage backend failed; the message names the URL."""


class ObjectNotFoundError(StorageError, FileNotFoundError):
    """The object, file or bucket does not exist."""


class AccessDeniedError(StorageError, PermissionError):
    """Credentials are missing or not allowed to read/write the object."""


class DownloadTimeoutError(StorageError, TimeoutError):
    """A transfer did not complete before its deadline (after every retry)."""


class CacheLimitError(StreamingError, ValueError):
    """`cache_limit` is too small for the plan; the message states the minimum that works."""


class CoordinationError(StreamingError, RuntimeError):
    """Node-local coordination failed: a peer died, a deadline passed, or shared state is bad."""


class DeadlineExceeded(CoordinationError, TimeoutError):
    """A wait on a peer or on shared state passed its deadline."""


class StateMismatchError(StreamingError, ValueError):
    """A resumption state does not belong to this dataset configuration."""


def require(module: str, *, feature: str, extra: str, package: str | None = None):
    """Import an optional module or raise MissingExtraError naming the extra to install."""
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise MissingExtraError(feature, extra, package or module) from exc


class OutputExistsError(StreamingError, FileExistsError):
    """A writer's output already holds data and `exist_ok` was not set; the message names it."""


class UnsupportedFeatureError(StreamingError, NotImplementedError):
    """A valid request that this version cannot serve yet (e.g. a remote writer output)."""


class IndexNotFoundError(IndexFileError, FileNotFoundError):
    """`index.json` does not exist where a dataset was expected."""


class LocationError(StreamingError, ValueError):
    """A `remote` or `local` that is neither a valid URL nor a usable path (e.g. `s3:/bucket`)."""


class CacheFolderError(StreamingError, OSError):
    """A stream's `local` folder cannot serve as its cache (a file, unwritable, untrusted...);
    the message names the folder."""


class CacheOriginError(CacheFolderError):
    """A `local` folder already caches another remote's shards; the message names both."""


class CacheSpaceError(StreamingError, OSError):
    """The disk under a cache folder has too little free space; names the folder and bytes."""


class UnknownHashError(StreamingError, ValueError):
    """`validate_hash` names an algorithm this library cannot compute."""
