"""Where a cache folder's files came from: `.streaming-origin.json` records the remote a `local`
folder caches and a digest of each shard's index entry, so that

- a stream with another remote refuses the folder (CacheOriginError naming both remotes)
  instead of reading the other dataset's shards, which may have the same names and sizes;
- when the remote's `index.json` changed, the cached files whose entries changed (or went) are
  deleted before the new index is used, so old and new shards never mix;
- when the remote cannot be reached, a complete local copy of the same remote is used, with a
  warning.

The entries of the cached files are those of the folder's own `index.json` (the one last
fetched), so a folder without the record (filled by an older version or another tool) is taken
to cache the current remote as far as its `index.json` agrees with the remote's, entry by entry;
cached files that no local index describes are fetched again.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import unquote, urlsplit

from streaming.cache.folder.changed_files import file_entries as file_entries
from streaming.cache.folder.changed_files import stale_files
from streaming.cache.folder.disk_files import listing
from streaming.cache.folder.file_names import ORIGIN_FILE, ORIGIN_LOCK
from streaming.cache.folder.folder_checks import make_folder, remove_created
from streaming.cache.folder.index_fetch_turn import FetchTurn
from streaming.cache.folder.parsed_index import save_form
from streaming.errors import CacheOriginError, StreamingError
from streaming.format.index import DatasetIndex, parse_index, read_index
from streaming.util.atomic import staged_file, temp_path_for
from streaming.util.confine import read_regular, remove
from streaming.util.files import has_size

log = logging.getLogger(__name__)

LOCK_TIMEOUT = 600.0  # seconds another process may spend fetching the same index


@dataclass(frozen=True)
class Origin:
    """The remote a cache folder mirrors and a digest of the `index.json` it last fetched (the
    entries of the cached files are read from that index.json itself)."""

    remote: str
    index: str

    @classmethod
    def of(cls, remote: str, index_text: bytes) -> Origin:
        return cls(remote, _digest(index_text))

    @classmethod
    def read(cls, folder: Path) -> Origin | None:
        """The folder's record, or None when it has none (or an unreadable one)."""
        try:
            data = json.loads(read_regular(folder / ORIGIN_FILE))
            return cls(str(data["remote"]), str(data["index"]))
        except (OSError, ValueError, KeyError, TypeError):
            return None

    def write(self, folder: Path) -> None:
        with staged_file(folder / ORIGIN_FILE) as tmp:
            tmp.write_text(json.dumps({"remote": self.remote, "index": self.index}))


def same_remote(remote: str) -> str:
    """The form of `remote` its record compares: a filesystem path and its `file://` URL
    (`/p`, `file:///p`, `file://localhost/p`, `/q/../p`) are one remote, as are a URL with and
    without a trailing slash.

    Args:
        remote: a stream's remote, a path or a URL.
    """
    parts = urlsplit(remote)
    if parts.scheme == "file" and parts.netloc in ("", "localhost"):
        return os.path.normpath(os.path.abspath(unquote(parts.path)))
    if not parts.scheme or len(parts.scheme) == 1:  # a path (or a drive letter)
        return os.path.normpath(os.path.abspath(remote))
    return remote.rstrip("/")


def _digest(data: bytes) -> str:
    return hashlib.blake2b(data, digest_size=16).hexdigest()


def _index_of(text: bytes, source: str) -> DatasetIndex | None:
    """Index `text`, or None when it is not a valid index (a folder's own index.json may be
    from an older tool, damaged or planted: its names are not trusted, and every file the new
    index names then counts as changed)."""
    try:
        return parse_index(text, source=source)
    except (StreamingError, ValueError, TypeError, KeyError, AttributeError):
        return None


def changed_files(old: dict[str, dict], new: dict[str, dict]) -> list[str]:
    """Names whose entry differs between two `file_entries` maps (or that only one has)."""
    return [name for name in old.keys() | new.keys() if old.get(name) != new.get(name)]


def sync_index(folder: Path, remote: str, fetch: Callable[[Path], None]) -> Path:
    """Fetch the remote's index.json (`fetch(dest)`) into cache `folder`, check and update the
    folder's origin record, drop files the new index changed; returns the local index path.

    Folders this call created are removed again when it fails."""
    remote = same_remote(remote)
    created = make_folder(folder)
    index = folder / "index.json"
    turn = FetchTurn.take(folder)
    try:
        from streaming.cache.folder.node_claim import claim_folder
        from streaming.cache.folder.shared_locks import folder_lock

        with folder_lock(folder / ORIGIN_LOCK, timeout=LOCK_TIMEOUT):
            claim_folder(folder)
            _sweep(folder)
            origin = Origin.read(folder)
            if turn is not None and origin is not None and same_remote(origin.remote) == remote \
                    and turn.fetched(folder, origin.index):
                return index  # another rank of this job fetched it for this open
            tmp = temp_path_for(index)
            try:
                try:
                    fetch(tmp)
                except (StreamingError, OSError) as exc:
                    if _usable_offline(folder, remote, exc):
                        return index
                    raise
                text = tmp.read_bytes()
                fetched = _adopt(folder, remote, text)
                os.replace(tmp, index)
                digest = Origin.of(remote, text).index
                with contextlib.suppress(OSError):
                    save_form(folder, digest, fetched)
                if turn is not None:
                    turn.record(folder, digest)
            finally:
                with contextlib.suppress(FileNotFoundError):
                    tmp.unlink()
    except BaseException:
        remove_created(created)
        raise
    return index


def _sweep(folder: Path) -> None:
    """Remove temp files an index fetch or origin write left when its process died (the
    caller holds the origin lock, so no live process is writing them)."""
    from streaming.cache.folder.disk_files import leftover_of
    from streaming.cache.folder.index_fetch_turn import FETCH_FILE

    for name in listing(folder):
        if name.endswith(".tmp") and (name.startswith(("..index.json.", ".index.json."))
                                      or leftover_of(name, (ORIGIN_FILE, FETCH_FILE))):
            remove(folder, folder / name)


def _adopt(folder: Path, remote: str, text: bytes) -> DatasetIndex:
    """Check that `folder` caches `remote` and bring its files in line with index `text`.

    The new index is validated whole before anything is removed (IndexFileError names the
    bad entry), and every removal passes the folder's guard (UnsafePathError for a path that
    a symbolic link leads out of the folder)."""
    new = Origin.of(remote, text)
    old = Origin.read(folder)
    if old is not None and same_remote(old.remote) != remote:
        raise CacheOriginError(
            f"local folder {folder} already caches remote {old.remote}, not {remote}: a "
            "folder holds the shards of one remote only (shards of two datasets may have the "
            "same names and sizes). Give each remote its own `local`, or empty this one with "
            f"`streaming cache clear {folder}` to let it cache {remote}")
    fetched = parse_index(text, source=f"{remote}/index.json")
    previous = b""
    with contextlib.suppress(OSError):
        previous = (folder / "index.json").read_bytes()
    if old is not None and old.index == new.index and previous == text:
        return fetched
    stale = stale_files(_index_of(previous, str(folder / "index.json")), fetched)
    dropped = 0
    by_folder: dict[str, list[str]] = {}
    for name in stale:  # basenames use "/" (part folders), whatever the OS
        sub, _, leaf = name.rpartition("/")
        by_folder.setdefault(sub, []).append(leaf)
    for sub, names in by_folder.items():  # one listing per folder, not a syscall per name
        where = folder / sub if sub else folder
        present = listing(where)
        for name in names:
            if name in present:
                remove(folder, where / name)
                dropped += 1
    if dropped:
        log.warning("%s: the index of %s changed since these shards were cached; removed %d "
                    "cached file(s) whose entries changed (they are fetched again)",
                    folder, remote, dropped)
    new.write(folder)
    return fetched


def _usable_offline(folder: Path, remote: str, error: BaseException) -> bool:
    """Whether `folder` holds a complete copy of `remote` to serve while the remote cannot be
    reached (`error`); says so in a warning."""
    index = folder / "index.json"
    if not index.is_file():
        return False
    origin = Origin.read(folder)
    if origin is not None and same_remote(origin.remote) != remote:
        return False
    try:
        ix = read_index(index)
    except (StreamingError, OSError):
        return False
    missing = [name for k, name in enumerate(ix.basenames)
               if not has_size(folder / name, int(ix.raw_bytes[k]))
               and not (ix.zip_basenames[k]  # a kept zip decompresses without the remote
                        and has_size(folder / ix.zip_basenames[k], int(ix.zip_bytes[k])))]
    if missing:
        log.warning("cannot reach %s (%s), and the local copy in %s lacks %d of %d shards "
                    "(%s...)", remote, error, folder, len(missing), ix.num_shards, missing[0])
        return False
    log.warning("cannot reach %s (%s): using the complete local copy in %s (its index.json "
                "as last fetched)", remote, error, folder)
    return True
