"""Typed errors shared by every layer: users catch one family, and messages name the culprit."""

from __future__ import annotations

import json


class StreamingError(Exception):
    """Base class of every error this library raises on purpose."""


class FormatError(StreamingError, ValueError):
    """An MDS file (index or shard) is malformed; the message names the file."""


class IndexFileError(FormatError):
    """`index.json` is missing, unreadable, of the wrong version, or inconsistent."""


class ShardCorruptError(FormatError):
    """A shard's bytes disagree with its header or with the index (truncated, bad offsets...)."""


class ParquetFileError(ShardCorruptError):
    """A Parquet file of a stream is empty, corrupt, truncated or changed since its footer was
    read; the message names the file (and the row group)."""


class ParquetSchemaError(FormatError, TypeError):
    """A Parquet stream's columns cannot be served: a column missing, of a type we cannot
    represent, or differing between two files; the message names the files and the column."""


class HashMismatchError(ShardCorruptError):
    """A file's digest differs from the one recorded in the index."""


class DecompressionError(ShardCorruptError):
    """A compressed shard could not be decompressed."""


class UnknownEncodingError(FormatError, TypeError):
    """A column encoding that this library does not know."""


class EncodeError(StreamingError, ValueError, TypeError, AttributeError, KeyError):
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


class EmptyEpochError(PlanError, RuntimeError):
    """The streams hold no samples (an index without shards) or every weight is zero."""


class StorageError(StreamingError, OSError):
    """A storage backend failed; the message names the URL."""


class ObjectNotFoundError(StorageError, FileNotFoundError, RuntimeError):
    """The object, file or bucket does not exist."""


class AccessDeniedError(StorageError, PermissionError):
    """Credentials are missing or not allowed to read/write the object."""


class DownloadTimeoutError(StorageError, TimeoutError):
    """A transfer did not complete before its deadline (after every retry)."""


class ObjectChangedError(StorageError):
    """A read conditioned on an object's version (its ETag) found another version there: the
    object was replaced since that version was recorded. Retrying cannot help."""

    retryable = False


class ObjectTooLargeError(StorageError):
    """A store sent more bytes than the index declares for the file (or than the cap for an
    index.json); each attempt stopped as the excess arrived (an object being replaced may
    be asked for again, within `download_retry`)."""


class UntrustedCertificateError(StorageError):
    """The store's TLS certificate is not signed by an authority this process trusts; the
    message names the server and the setting that adds one. Retrying cannot help."""

    retryable = False


class CacheLimitError(StreamingError, ValueError):
    """`cache_limit` is too small for the plan; the message states the minimum that works."""


class CoordinationError(StreamingError, RuntimeError):
    """Node-local coordination failed: a peer died, a deadline passed, or shared state is bad."""


class DeadlineExceeded(CoordinationError, TimeoutError):
    """A wait on a peer or on shared state passed its deadline."""


class StateMismatchError(StreamingError, ValueError):
    """A resumption state does not belong to this dataset configuration."""


class DiskFullError(StreamingError, OSError):
    """No space left (or quota exceeded) while writing; the message names the folder and the
    bytes the write needed. `errno` is the underlying ENOSPC or EDQUOT."""


class TooManyOpenFilesError(StreamingError, OSError):
    """The process hit its open-file limit; the message names the limit and the fix."""


def require(module: str, *, feature: str, extra: str, package: str | None = None):
    """Import an optional module or raise MissingExtraError naming the extra to install."""
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise MissingExtraError(feature, extra, package or module) from exc


class OutputExistsError(StreamingError, FileExistsError):
    """A writer's output already holds data and `exist_ok` was not set; the message names it."""


class DatasetMismatchError(StreamingError, ValueError):
    """Shards appended to a dataset differ from its own in columns or compression."""


class UnsupportedFeatureError(StreamingError, NotImplementedError):
    """A valid request that this version cannot serve yet (e.g. a remote writer output)."""


class IndexNotFoundError(IndexFileError, FileNotFoundError, RuntimeError):
    """`index.json` does not exist where a dataset was expected."""


class TrainerSetupError(StreamingError, ValueError):
    """A training framework is set up in a way that would train on the wrong data."""


class IndexJSONError(IndexFileError, json.JSONDecodeError):
    """`index.json` is not valid JSON (empty, truncated); also a `json.JSONDecodeError`."""

    def __init__(self, msg: str, doc: str = "", pos: int = 0) -> None:
        json.JSONDecodeError.__init__(self, msg, doc, pos)
        self.args = (msg,)

    def __str__(self) -> str:
        return str(self.args[0])

    def __reduce__(self) -> tuple:
        return (type(self), (self.args[0], self.doc, self.pos))


class SizeLimitError(StreamingError, ValueError):
    """A writer's `size_limit` is not a positive byte count below 4 GiB (u32 offsets)."""


class ArgumentError(StreamingError, ValueError):
    """Arguments that are missing or do not fit together; the message names them."""


class UnknownArgumentError(ArgumentError, TypeError):
    """A keyword argument the callee does not take: a TypeError, as Python raises for one, and
    a ValueError, as the reference's MDSWriter raises for one; the message names it."""


class WorldDetectionError(PlanError):
    """This process's place in the training job (rank, node, world size) cannot be told
    consistently from the process group and the launchers' variables; the message names them."""


class LocationError(StreamingError, ValueError):
    """A `remote` or `local` that is neither a valid URL nor a usable path (e.g. `s3:/bucket`)."""


class CacheFolderError(StreamingError, OSError):
    """A stream's `local` folder cannot serve as its cache (a file, unwritable, untrusted...);
    the message names the folder."""


class CacheOriginError(CacheFolderError, ValueError):
    """A `local` folder already caches another remote's shards; the message names both."""


class CacheSpaceError(StreamingError, OSError):
    """The disk under a cache folder has too little free space; names the folder and bytes."""


class UnknownHashError(StreamingError, ValueError):
    """`validate_hash` names an algorithm this library cannot compute."""


class UnsafePathError(StreamingError, PermissionError):
    """A file this library would create, rename or remove under a cache or dataset folder
    resolves outside that folder (through `..`, an absolute name or a symbolic link); the
    message names the path, where it leads and the folder."""


class ColumnMismatchError(DatasetMismatchError):
    """Two input files of one conversion have different columns; names both and the column.

    Args:
        first: the file the others are compared with.
        other: the file that differs.
        column: the column that differs.
        first_has / other_has: what each file has for it ("missing", or its encoding).
    """

    def __init__(self, first: str, other: str, column: str, first_has: str,
                 other_has: str) -> None:
        super().__init__(
            f"input files differ in column {column!r}: {first} has {first_has}, {other} has "
            f"{other_has}; pass columns= to choose the columns (a column set to None is dropped)")
        self.first, self.other, self.column = first, other, column
        self.has = (first_has, other_has)

    def __reduce__(self) -> tuple:
        return (type(self), (self.first, self.other, self.column, *self.has))
