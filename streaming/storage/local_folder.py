"""Plain filesystem paths and file:// URLs as a storage backend."""

from __future__ import annotations

import contextlib
import os
import shutil
from collections.abc import Iterator
from pathlib import Path

from streaming.errors import AccessDeniedError, ObjectNotFoundError, StorageError
from streaming.storage.backend import CHUNK, Backend
from streaming.util.atomic import staged_file
from streaming.util.pagewrite import write_sliced


@contextlib.contextmanager
def _translated(path: str) -> Iterator[None]:
    """Turn OS errors into the storage error family, naming the path."""
    try:
        yield
    except FileNotFoundError as exc:
        raise ObjectNotFoundError(f"{path}: No such file or directory") from exc
    except IsADirectoryError as exc:
        raise ObjectNotFoundError(f"{path}: is a directory, not a file") from exc
    except PermissionError as exc:
        raise AccessDeniedError(f"{path}: permission denied") from exc
    except StorageError:
        raise
    except OSError as exc:
        raise StorageError(f"{path}: {exc.strerror or exc}") from exc


class LocalBackend(Backend):
    """Objects are files; paths are filesystem paths. Writes are atomic (temp + rename)."""

    def url(self, path: str) -> str:
        return str(path)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, LocalBackend)

    def __hash__(self) -> int:
        return hash(LocalBackend)

    def iter_chunks(
        self, path: str, start: int | None = None, end: int | None = None, *,
        deadline: float | None = None,
    ) -> Iterator[bytes]:
        with _translated(path), open(path, "rb") as src:
            pos = start or 0
            src.seek(pos)
            while end is None or pos < end:
                want = CHUNK if end is None else min(CHUNK, end - pos)
                chunk = src.read(want)
                if not chunk:
                    return
                pos += len(chunk)
                yield chunk

    def size(self, path: str) -> int:
        with _translated(path):
            if os.path.isdir(path):
                raise IsADirectoryError(path)
            return os.stat(path).st_size

    def exists(self, path: str) -> bool:
        return os.path.isfile(path)

    def put(self, path: str, data: bytes) -> None:
        with _translated(path), staged_file(path) as tmp, open(tmp, "wb") as out:
            write_sliced(out, data)

    def upload(self, local: Path, path: str) -> None:
        with _translated(str(local)):
            if not os.path.isfile(local):
                raise FileNotFoundError(local)
        with _translated(path), staged_file(path) as tmp:
            shutil.copyfile(local, tmp)

    def list(self, prefix: str) -> list[str]:
        """Absolute paths of the files whose path starts with `prefix` (S3 prefix semantics)."""
        trailing = os.sep if str(prefix).endswith(os.sep) else ""
        prefix = os.path.abspath(prefix).rstrip(os.sep) + trailing
        top = prefix if trailing else os.path.dirname(prefix)
        found = []
        for root, dirs, files in os.walk(top):
            # Only descend into folders that can still hold matches.
            dirs[:] = [d for d in dirs if _may_match(os.path.join(root, d), prefix)]
            found.extend(p for p in (os.path.join(root, f) for f in files) if p.startswith(prefix))
        return sorted(found)

    def delete(self, path: str) -> None:
        with contextlib.suppress(FileNotFoundError), _translated(path):
            os.unlink(path)


def _may_match(folder: str, prefix: str) -> bool:
    return folder.startswith(prefix) or prefix.startswith(folder + os.sep)
