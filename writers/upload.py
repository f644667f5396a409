"""Publish a writer's output to a remote dataset URL (s3://, file://, a path) while it writes.

Finished shard files upload on a small bounded pool, so uploading overlaps encoding the next
shards; index.json goes up last and only once every other file is confirmed, so a reader never
sees an index naming a missing shard and a failed run publishes nothing.
"""

from __future__ import annotations

import concurrent.futures as cf
import contextlib
import glob
import logging
import os
import re
import shutil
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from streaming.errors import ArgumentError, DeadlineExceeded, OutputExistsError, StorageError
from streaming.storage import backend_for, join, upload
from streaming.storage.retry import RETRY, UPLOAD_TIMEOUT, RetryPolicy
from streaming.storage.schemes import split_scheme

log = logging.getLogger(__name__)

INDEX = "index.json"
ATTEMPT_TIMEOUT = 120.0  # per upload attempt (socket reads), capped by the writer's timeout
# Objects a previous dataset may have left under the remote prefix (replaced when exist_ok=True).
_DATASET_KEY = re.compile(r"^(index\.json|shard\.\d{5}\.mds(\.[a-z0-9]+)?)$")


@dataclass(frozen=True)
class Output:
    """Where a writer puts its files: a local directory and, optionally, a remote to upload to."""

    local: Path
    remote: str | None = None
    staging: bool = False  # `local` is a temporary directory made for this writer


def resolve_output(out: str | os.PathLike | tuple | list) -> Output:
    """Interpret MDSWriter's `out`: a path, a file:// URL, a remote URL, or a (local, remote) pair.

    A remote URL alone is staged through a fresh temporary directory."""
    if isinstance(out, (tuple, list)):
        if len(out) != 2:
            raise ArgumentError(f"out must be a path, a URL or a (local, remote) pair, got {out!r}")
        local, remote = out
        if remote is None:
            return Output(_local_path(local))
        if local is None:
            return _staged(os.fspath(remote))
        local_path, remote = _local_path(local), os.fspath(remote).rstrip("/")
        _, remote_path = backend_for(remote)  # unsupported schemes fail here, before any write
        if split_scheme(remote)[0] in ("", "file") and (
            Path(remote_path).resolve() == local_path.resolve()
        ):
            return Output(local_path)  # uploading a directory onto itself is a no-op
        return Output(local_path, remote)
    text = os.fspath(out)
    scheme, _ = split_scheme(text)
    if scheme in ("", "file"):
        return Output(_local_path(text))
    return _staged(text)


def _local_path(local: str | os.PathLike) -> Path:
    scheme, _ = split_scheme(local)
    if scheme not in ("", "file"):
        raise ArgumentError(f"the local half of out=(local, remote) must be a path, got {local!r}")
    return Path(backend_for(local)[1])


def _staged(remote: str) -> Output:
    backend_for(remote)
    # Named now, created by the writer: nothing is left behind if its argument checks fail.
    local = Path(tempfile.gettempdir(), f"mds-upload-{uuid.uuid4().hex[:12]}")
    return Output(local, remote.rstrip("/"), staging=True)


class Uploader:
    """Uploads files under `local` to the same relative names under `remote`; index.json last.

    `submit` returns a future whose failure names the shard and the URL; `publish` waits for
    every upload, sends whatever else the writer left in `local`, then the index."""

    def __init__(
        self, output: Output, *, exist_ok: bool = False, keep_local: bool | None = None,
        retry: int = RETRY, timeout: float = UPLOAD_TIMEOUT, max_workers: int = 4,
        keep: frozenset[str] | None = None, who: str = "MDSWriter",
    ) -> None:
        """`keep`: the files of a dataset being appended to or replaced (mode "append" or
        "overwrite"): the remote dataset is left as it is and none of these is uploaded.
        `who`: the writer named when the remote already holds a dataset."""
        if output.remote is None:
            raise ArgumentError("Uploader needs an output with a remote URL")
        self.local, self.remote, self.staging = output.local, output.remote, output.staging
        # Default: a staging directory is emptied as uploads finish, a named local copy is kept.
        self.keep_local = (not output.staging) if keep_local is None else keep_local
        self.retry, self.timeout = retry, float(timeout)
        self._attempt_timeout = min(ATTEMPT_TIMEOUT, self.timeout)
        self._backend, root = backend_for(self.remote)
        self._prefix = root.rstrip("/") + "/" if root.rstrip("/") else ""
        self._policy = RetryPolicy(attempts=retry + 1, timeout=self._attempt_timeout)
        self._keep = keep
        self._who = who
        # Called with each file's size once it is uploaded (a progress bar's `add`).
        self.on_uploaded: Callable[[int], None] | None = None
        self._stale = self._check_remote(exist_ok) if keep is None else set()
        self._pool = ThreadPoolExecutor(max_workers, thread_name_prefix="mds-upload")
        # Bounds finished-but-not-uploaded shards, so a slow link cannot fill the local disk.
        self._pending = threading.Semaphore(2 * max_workers)
        self._futures: list[Future[list[str]]] = []
        self._uploaded: set[str] = set()
        self._lock = threading.Lock()
        self._error: BaseException | None = None

    def url(self, name: str) -> str:
        """The remote URL of the file called `name` under the local directory."""
        return join(self.remote, name)

    # -- before writing -----------------------------------------------------------------------

    def _check_remote(self, exist_ok: bool) -> set[str]:
        """Refuse (or, with exist_ok, unpublish) a dataset already at the remote; its names."""
        prefix = self._prefix
        listed = self._policy.run(f"list {self.remote}", lambda d: self._backend.list(prefix))
        names = {name for name in (key[len(prefix):] for key in listed) if _DATASET_KEY.match(name)}
        if INDEX in names:
            index_url = self.url(INDEX)
            if not exist_ok:
                raise OutputExistsError(
                    f"{self._who} output {index_url} already exists; pass mode='append' to add "
                    "to it, or exist_ok=True to replace it"
                )
            # The old index goes first: no moment exists where it names a half-replaced shard.
            self._delete(INDEX)
            names.discard(INDEX)
        return names

    # -- while writing ------------------------------------------------------------------------

    def submit(self, shard: str, files: Iterable[Path]) -> Future[list[str]]:
        """Queue the files one shard produced; waits (bounded) while too many are queued."""
        if self._error is not None:
            raise self._error
        deadline = time.monotonic() + self.timeout
        while not self._pending.acquire(timeout=0.2):
            if self._error is not None:
                raise self._error
            if time.monotonic() > deadline:
                raise DeadlineExceeded(
                    f"uploads to {self.remote} made no progress within {self.timeout:.0f} s"
                )
        try:
            future = self._pool.submit(self._upload_shard, shard, list(files))
        except BaseException:
            self._pending.release()
            raise
        with self._lock:
            self._futures.append(future)
        return future

    def _upload_shard(self, shard: str, files: list[Path]) -> list[str]:
        try:
            return [self._upload_one(path, shard) for path in files]
        except BaseException as exc:
            if self._error is None:
                self._error = exc
            raise
        finally:
            self._pending.release()

    def _upload_one(self, path: Path, shard: str) -> str:
        name = path.relative_to(self.local).as_posix()
        url = self.url(name)
        try:
            upload(path, url, retry=self.retry, timeout=self._attempt_timeout)
        except Exception as exc:
            cls = type(exc) if isinstance(exc, StorageError) else StorageError
            raise cls(f"upload of {shard} to {url} failed: {exc}") from exc
        with self._lock:
            self._uploaded.add(name)
        if self.on_uploaded is not None:
            self.on_uploaded(path.stat().st_size)
        if not self.keep_local:
            path.unlink(missing_ok=True)
        return name

    # -- ending -------------------------------------------------------------------------------

    def publish(self) -> str:
        """Wait for every upload, send leftover files, then index.json; return the index URL."""
        index = self.local / INDEX
        if not index.is_file():
            raise StorageError(f"{index}: no local index to publish to {self.remote}")
        try:
            self._wait_all()
            for path in self._leftovers(index):
                self.submit(path.relative_to(self.local).as_posix(), [path])
            self._wait_all()
            self._drop_stale()
            self._upload_one(index, INDEX)
        except BaseException:
            if not self.keep_local:  # uploaded shards are gone locally: no index may name them
                index.unlink(missing_ok=True)
            raise
        log.info("published %s", self.url(INDEX))
        return self.url(INDEX)

    def pending_bytes(self) -> int:
        """Bytes `publish` still has to send: files not uploaded yet, and the index."""
        index = self.local / INDEX
        sizes = [p.stat().st_size for p in self._leftovers(index)]
        return sum(sizes) + (index.stat().st_size if index.is_file() else 0)

    def _wait_all(self) -> None:
        deadline = time.monotonic() + self.timeout
        with self._lock:
            futures = list(self._futures)
        for future in futures:
            try:
                future.result(timeout=max(deadline - time.monotonic(), 0.0))
            except cf.TimeoutError as exc:
                if future.done():
                    raise
                raise DeadlineExceeded(
                    f"uploads to {self.remote} did not all finish within {self.timeout:.0f} s"
                ) from exc

    def _leftovers(self, index: Path) -> list[Path]:
        """Files the writer made outside any shard hand-off (e.g. side files), not yet sent."""
        found = []
        for root, dirs, files in os.walk(self.local):
            dirs[:] = sorted(d for d in dirs if not d.startswith("."))
            for name in sorted(files):
                path = Path(root, name)
                rel = path.relative_to(self.local).as_posix()
                if name.startswith(".") or path == index or rel in self._uploaded or (
                        self._keep is not None and rel in self._keep):
                    continue
                found.append(path)
        return found

    def _drop_stale(self) -> None:
        """Delete a replaced dataset's files that this run did not overwrite."""
        for name in sorted(self._stale - self._uploaded):
            self._delete(name)

    def _delete(self, name: str) -> None:
        key = self._prefix + name
        self._policy.run(f"delete {self.url(name)}", lambda d: self._backend.delete(key))

    def close(self, wait: bool = True) -> None:
        """Stop the pool (queued uploads are cancelled) and remove a staging directory."""
        self._pool.shutdown(wait=wait, cancel_futures=True)
        if self.staging and not self.keep_local:
            shutil.rmtree(self.local, ignore_errors=True)
        elif not self.keep_local:
            with contextlib.suppress(OSError):
                self.local.rmdir()  # only if every file went up and was removed


def shard_files(directory: Path, entry: dict) -> list[Path]:
    """Every finished file one shard produced: its raw or compressed file and any side files."""
    stem = entry["raw_data"]["basename"]
    return sorted(p for p in directory.glob(glob.escape(stem) + "*") if p.is_file())


def make_uploader(output: Output, **options: Any) -> Uploader | None:
    """An Uploader for `output` (None for local-only); a staging dir is removed if it fails."""
    if output.remote is None:
        return None
    try:
        return Uploader(output, **options)
    except BaseException:
        if output.staging:
            shutil.rmtree(output.local, ignore_errors=True)
        raise
