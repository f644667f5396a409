"""One data source of a StreamingDataset: where its shards live, how it is weighted, and a registry
so users can subclass Stream and select their class by name in configs."""

from __future__ import annotations

import hashlib
import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from streaming.cache.folder.folder_checks import check_location, user_cache_root, warn_if_shared
from streaming.errors import IndexFileError, ObjectTooLargeError, PlanError

if TYPE_CHECKING:
    from streaming.cache.policy.cache_limit import CacheLimit
    from streaming.cache.prepare.parquet_footers import ParquetSelection

_UNSET_KNOBS = ("download_retry", "download_timeout", "validate_hash", "keep_zip")


def _is_url(path: str) -> bool:
    return "://" in path


class Stream:
    """A dataset directory (`local`) optionally mirrored from `remote`, with a mixing weight.

    `remote` may be a URL or a plain path; shards are then copied (and decompressed) into `local`.
    With `remote=None`, `local` is read in place and nothing in it is ever deleted. Knobs left at
    None inherit the dataset's values (see `apply_defaults`).

    Args:
        remote: Source URL (`s3://`, `gs://`, `az://`, `https://`, `file://`) or path of the
            dataset; None: `local` is the only copy.
        local: Node-local folder: the cache of `remote`, or the data itself without one. None
            with a `remote`: a per-user folder under the temp dir (docs/dataset.md).
        split: Sub-folder of `remote`/`local` (e.g. "train"); None: the folder itself.
        proportion: Relative weight of this stream in an epoch of `epoch_size` samples.
        repeat: Passes over this stream per epoch (fractions allowed).
        choose: Samples of this stream per epoch. At most one of `proportion`, `repeat` and
            `choose`; None for all three: every sample once.
        download_retry: Extra attempts per file copy (None: the dataset's).
        download_timeout: Seconds per download attempt (None: the dataset's).
        validate_hash: Hash algorithm shards are checked with (None: the dataset's).
        keep_zip: Keep downloaded compressed shards (None: the dataset's).
        name: What metrics and messages call this stream (`stream/<name>/samples`); None: its
            position among the dataset's streams. Unique within a dataset. Not in the reference.
        format: "mds" (None: the same), or "parquet": `remote` (or `local` alone) is then a
            folder or prefix of Parquet files, a glob, or a list of files, read where it lies
            one row group at a time (docs/parquet.md).
        columns: the columns a Parquet stream reads (None: all); only theirs are fetched.
    """

    def __init__(
        self,
        *,
        remote: str | os.PathLike | Sequence[str] | None = None,
        local: str | os.PathLike | None = None,
        split: str | None = None,
        proportion: float | None = None,
        repeat: float | None = None,
        choose: int | None = None,
        download_retry: int | None = None,
        download_timeout: float | None = None,
        validate_hash: str | None = None,
        keep_zip: bool | None = None,
        name: str | None = None,
        format: str | None = None,
        columns: Sequence[str] | None = None,
    ) -> None:
        self.format, self.columns = _format_of(format, columns)
        self.parquet: ParquetSelection | None = None
        if self.format == "parquet":
            remote, local = self._select_parquet(remote, local)
        if remote is None and local is None:
            raise PlanError("Stream needs `remote`, `local` or both")
        given = [n for n, v in (("proportion", proportion), ("repeat", repeat),
                                ("choose", choose)) if v is not None]
        if len(given) > 1:
            raise PlanError("At most one of `proportion`, `repeat`, and `choose` may be "
                            f"specified: a Stream takes one, got {given}")
        if download_retry is not None and download_retry < 0:
            raise PlanError(f"`download_retry` must be non-negative: got {download_retry!r}")
        if download_timeout is not None and download_timeout <= 0:
            raise PlanError(f"`download_timeout` must be positive: got {download_timeout!r}")
        if name is not None and (not isinstance(name, str) or not name.strip()):
            raise PlanError(f"`name` must be a non-empty string: got {name!r}")
        self.name = name
        self.remote = None if remote is None else os.fspath(remote)
        for what, value in (("remote", self.remote), ("local", local)):
            if isinstance(value, str):
                check_location(value, what)
        if self.parquet is not None and split:
            raise PlanError("a Parquet stream takes no `split`: put the folder in `remote`")
        if self.parquet is not None and validate_hash:
            raise PlanError("a Parquet stream takes no `validate_hash`: its files carry no "
                            "digests (a changed file is caught by its footer, see "
                            "docs/parquet.md)")
        cache_key = self.remote if self.parquet is None else \
            f"{self.parquet.key()}|{self.columns}"
        split = check_split(split)
        self.local = os.fspath(local) if local is not None else _default_local(cache_key, split)
        self.split = split
        self.proportion = proportion
        self.repeat = repeat
        self.choose = choose
        self.download_retry = download_retry
        self.download_timeout = download_timeout
        self.validate_hash = validate_hash
        self.keep_zip = keep_zip

    def _select_parquet(self, remote: str | os.PathLike | Sequence[str] | None,
                        local: str | os.PathLike | None) -> tuple[str, str | os.PathLike | None]:
        """The folder a Parquet stream's files lie in (its remote) and its cache folder: the
        files are always read through a cache of row groups, never in place."""
        from streaming.cache.prepare.parquet_footers import select_files

        if remote is None and local is None:
            raise PlanError("Stream needs `remote`, `local` or both")
        if remote is None:
            remote, local = local, None
        if isinstance(remote, os.PathLike):
            remote = os.fspath(remote)
        self.parquet = select_files(remote)
        return self.parquet.base, local

    def apply_defaults(self, **defaults: Any) -> None:
        """Fill knobs the user left unset with the dataset-level values."""
        for name in _UNSET_KNOBS:
            if getattr(self, name) is None and name in defaults:
                if self.parquet is not None and name in ("validate_hash", "keep_zip"):
                    continue  # no digests nor zips: Parquet files are checked by their footers
                setattr(self, name, defaults[name])

    @property
    def local_dir(self) -> Path:
        """Directory holding this stream's index.json and raw shards on this node."""
        return self._resolved()[1]

    @property
    def remote_dir(self) -> str | None:
        """Source URL or path of this stream's files, or None when `local` is the only copy."""
        return self._resolved()[2]

    def _resolved(self) -> tuple[tuple, Path, str | None]:
        """(remote, local, split), and the local and remote directories they resolve to:
        resolved once per value of the three (a start asks several times per stream, and each
        resolve walks the path's components with a system call apiece)."""
        key = (self.remote, self.local, self.split)
        memo = getattr(self, "_dirs", None)
        if memo is not None and memo[0] == key:
            return memo
        base = Path(self.local).expanduser().resolve()
        local = base / self.split if self.split else base
        remote = self.remote
        if remote is not None and not _is_url(remote):
            remote = os.fspath(Path(remote).expanduser().resolve())
            if remote == os.fspath(base):
                remote = None  # remote == local: read in place
        if remote is not None and self.split:
            remote = remote.rstrip("/") + "/" + self.split
        self._dirs = memo = (key, local, remote)
        return memo

    def copy_to_cache(self, limit: CacheLimit | None) -> None:
        """Read a local-only stream of compressed shards through a cache folder when its shards
        are read under a cache `limit` or its folder cannot be written: the folder
        becomes the stream's remote and the decompressed copies go to the default cache folder
        of that remote, where they count against the limit and are evicted; nothing is written
        in the user's folder. A folder whose raw shards are all present is read in place.

        Args:
            limit: the dataset's cache limit (None: none).
        """
        if self.remote_dir is not None:
            return
        from streaming.format.index import read_index
        from streaming.util.files import has_size

        folder = self.local_dir
        if limit is None and os.access(folder, os.W_OK):
            return
        try:
            index = read_index(folder / "index.json")
        except (OSError, ValueError):
            return  # the catalog names what is wrong with it
        if not index.zip_basenames.mask().any() or all(
                has_size(folder / name, int(size))
                for name, size in zip(index.basenames, index.raw_bytes)):
            return
        self.remote = os.fspath(Path(self.local).expanduser().resolve())
        self.local = _default_local(self.remote, self.split)

    def remote_url(self, basename: str) -> str:
        """URL (or path) of one file of this stream at its remote. A name is a name: joined
        onto an http(s) or `file://` URL it is percent-encoded (so `%2e%2e` stays the file or
        object of that very name, and any Unicode name can be asked for); joined onto a path
        it is used as written. Nothing ever decodes a name."""
        base = self.remote_dir
        if base is None:
            raise PlanError(f"stream at {self.local_dir} has no remote")
        if base.partition("://")[0].lower() in ("http", "https", "file"):
            basename = quote(basename, safe="/")
        return base.rstrip("/") + "/" + basename

    def _source_file(self, basename: str) -> Path | None:
        """Remote file `basename` when the remote is a filesystem path or `file://` URL, once it
        is known to resolve inside the remote's folder (UnsafePathError for a shard that is a
        symbolic link leading out of it); None for other remotes."""
        from streaming.storage.local_folder import LocalBackend
        from streaming.storage.schemes import backend_for
        from streaming.util.confine import READING, confine

        backend, path = backend_for(self.remote_url(basename))
        if not isinstance(backend, LocalBackend):
            return None
        return confine(backend_for(self.remote_dir or "")[1], path, spared=READING)

    @property
    def weights(self):
        """This stream's mixing weight as the planner takes it (what the user set, also after
        a dataset has filled in the resolved values: see `record_mix`)."""
        from streaming.plan import StreamWeights

        proportion, repeat, choose = self._given_weights()
        return StreamWeights(proportion=proportion, repeat=repeat, choose=choose)

    @property
    def weighted(self) -> bool:
        return any(v is not None for v in self._given_weights())

    def _given_weights(self) -> tuple[float | None, float | None, int | None]:
        given = self.__dict__.get("_given")
        return given if given is not None else (self.proportion, self.repeat, self.choose)

    def record_mix(self, *, proportion: float, repeat: float, choose: int) -> None:
        """Set `proportion`, `repeat` and `choose` to what a built dataset resolved for this
        stream (share of the epoch, passes over the stream, samples per epoch), as the
        reference implementation does; the weights the user gave still drive planning."""
        if "_given" not in self.__dict__:
            self._given = (self.proportion, self.repeat, self.choose)
        self.proportion, self.repeat, self.choose = proportion, repeat, choose

    def fetch(self, basename: str, dest: Path, *, expected_size: int | None = None,
              expected_hashes: dict[str, str] | None = None,
              columns: Sequence[str] | None = None) -> Path:
        """Copy one file from the remote to `dest` atomically, once per node at a time
        (concurrent callers wait for the first). Override for custom transports. `columns`:
        of a Parquet row group, fetch only these columns' chunks (None: the stream's)."""
        if self.parquet is not None:
            from streaming.cache.prepare.parquet_fetch import fetch_row_group

            return fetch_row_group(self.local_dir, self.remote_dir or "", basename, dest,
                                   columns=columns or self.columns,
                                   expected_size=None if columns else expected_size,
                                   **self._transfer_options())
        from streaming.storage import fetch_once

        self._source_file(basename)
        fetch_once(self.remote_url(basename), dest, expected_size=expected_size,
                   expected_hashes=expected_hashes, **self._transfer_options())
        return dest

    def check_in_place(self, basename: str, *, expected_size: int | None = None) -> None:
        """Make shard `basename`, read in place from the remote's own file, ready to read: a
        Parquet row group's file footer sound in the local folder and the file still the one
        indexed (ParquetFileError naming it otherwise); nothing is copied."""
        if self.parquet is not None:
            from streaming.cache.prepare.parquet_fetch import check_in_place

            check_in_place(self.local_dir, self.remote_dir or "", basename,
                           columns=self.columns, expected_size=expected_size,
                           **self._transfer_options())

    def source_path(self, basename: str) -> Path | None:
        """The remote file itself when the remote is a filesystem path or file:// URL and
        `fetch` is not overridden, so it can be read in place instead of copied first."""
        if self.remote_dir is None or type(self).fetch is not _PLAIN_FETCH:
            return None
        return self._source_file(basename)

    def streams_zip(self, basename: str) -> bool:
        """Whether compressed `basename` can be decompressed while it downloads: a remote that
        is not a filesystem, the plain `fetch`, and no `keep_zip` (which wants the file)."""
        return (self.remote_dir is not None and not self.keep_zip
                and type(self).fetch is _PLAIN_FETCH and self.source_path(basename) is None)

    def stream_remote(self, basename: str, consume: Any, *, size: int) -> None:
        """Deliver remote `basename`'s `size` bytes in order to `consume(piece)` as they arrive,
        with this stream's timeout and retries (a retry resumes where the last one stopped)."""
        from streaming.storage.streamed import stream_object

        stream_object(self.remote_url(basename), consume, size=size, **self._transfer_options())

    def side_bytes_to_come(self) -> int:
        """Bytes of the footers a Parquet stream's index names that its cache folder does not
        hold yet (each comes with its file's first row group); 0 for an MDS stream."""
        if self.parquet is None or self.remote_dir is None:
            return 0
        from streaming.cache.prepare.parquet_fetch import footer_bytes_to_come

        return footer_bytes_to_come(self.local_dir)

    def _transfer_options(self) -> dict[str, Any]:
        retry = self.download_retry if self.download_retry is not None else 2
        return {"timeout": float(self.download_timeout or 60), "retry": int(retry)}

    def index_file(self) -> Path:
        """Local path of index.json, fetched from the remote first when there is one."""
        if self.remote_dir is None:
            return self.local_dir / "index.json"
        if self.parquet is not None:
            from streaming.cache.prepare.parquet_fetch import parquet_index_file

            return parquet_index_file(self.local_dir, self.parquet, self.columns,
                                      **self._transfer_options())
        from streaming.cache.folder.origin import sync_index
        from streaming.format.index_bounds import max_index_bytes, too_big
        from streaming.storage import fetch

        def fetch_index(dest: Path) -> None:
            self._source_file("index.json")
            # One plain GET: the ranged path would first ask for the size (a HEAD request).
            try:
                fetch(self.remote_url("index.json"), dest, max_parts=1,
                      max_size=max_index_bytes(), **self._transfer_options())
            except ObjectTooLargeError as exc:
                raise IndexFileError(f"{exc}: {too_big(self.remote_url('index.json'))}") from exc

        warn_if_shared(self.local_dir, bool(self.validate_hash))
        return sync_index(self.local_dir, self.remote_dir, fetch_index)

    def __repr__(self) -> str:
        fields = ", ".join(f"{k}={v!r}" for k, v in vars(self).items()
                           if v is not None and not k.startswith("_"))
        return f"{type(self).__name__}({fields})"


def _format_of(format: str | None, columns: Sequence[str] | None
               ) -> tuple[str, list[str] | None]:
    """A stream's checked `format` and `columns`."""
    if format not in (None, "mds", "parquet"):
        raise PlanError(f"Stream format must be 'mds' or 'parquet', got {format!r}")
    if columns is not None and format != "parquet":
        raise PlanError("`columns=[...]` selects the columns of a Parquet stream "
                        "(format='parquet')")
    if columns is not None and (isinstance(columns, str) or not list(columns)):
        raise PlanError(f"`columns` must be a non-empty list of names, got {columns!r}")
    return format or "mds", None if columns is None else list(columns)


def check_split(split: str | None) -> str | None:
    """`split` once it is known to name a folder strictly inside
    `remote` and `local`: a relative path without `..`, `.` or empty parts, backslashes or
    control characters, so the cache folder it selects never lands outside `local`.

    Args:
        split: the Stream's `split`.

    Raises:
        PlanError: naming the split and what is wrong with it.
    """
    if split is None:
        return None
    if not isinstance(split, str):
        raise PlanError(f"`split` must be a string naming a sub-folder, got {split!r}")
    name = split.rstrip("/")
    parts = name.split("/")
    fault = ("is empty" if not name else
             "is an absolute path" if split.startswith("/") or split[1:2] == ":" else
             "contains a backslash or a control character" if any(
                 c == "\\" or ord(c) < 32 or ord(c) == 127 for c in name) else
             "contains '..' and would put the cache folder outside `local`" if ".." in parts
             else "has empty or '.' parts" if "" in parts or "." in parts else None)
    if fault:
        raise PlanError(f"split={split!r} {fault}: a split names a sub-folder of the dataset, "
                        "like 'train' or 'val/part0'")
    return split


def _default_local(remote: str | None, split: str | None) -> str:
    """A per-remote cache directory in this user's own folder under the temp dir when the user
    gives no `local` (docs/cache.md says why not ~/.cache)."""
    digest = hashlib.sha1(f"{remote}|{split}".encode()).hexdigest()[:16]
    return os.fspath(user_cache_root() / digest)


_PLAIN_FETCH = Stream.fetch  # a replaced or overridden fetch must see every transfer
_REGISTRY: dict[str, type[Stream]] = {"stream": Stream}


def register_stream(name: str, cls: type[Stream]) -> None:
    """Make a Stream subclass selectable as `StreamingDataset(stream_name=name)`."""
    if not (isinstance(cls, type) and issubclass(cls, Stream)):
        raise TypeError(f"register_stream({name!r}, ...) needs a Stream subclass, got {cls!r}")
    _REGISTRY[name] = cls


def registered_streams() -> dict[str, type[Stream]]:
    """Every registered Stream class by name (a copy)."""
    return dict(_REGISTRY)


def stream_class(name: str) -> type[Stream]:
    """The Stream class registered under `name` (PlanError listing the known names otherwise)."""
    try:
        return _REGISTRY[name]
    except KeyError:
        raise PlanError(
            f"unknown stream_name {name!r}; registered: {sorted(_REGISTRY)}"
        ) from None
