"""Publish a dataset already written to a local folder under a remote URL: every file of the
folder first (on a thread pool), `index.json` last, so readers never see a partial dataset."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from streaming.errors import ArgumentError, IndexNotFoundError
from streaming.format.index import read_index
from streaming.storage.retry import UPLOAD_TIMEOUT
from writers.byte_bar import ByteBar
from writers.upload import INDEX, Output, Uploader


@dataclass(frozen=True)
class Uploaded:
    """What `upload_dataset` published.

    Args:
        index: the URL of the published index.json.
        files: files uploaded (the index included).
        bytes: their size in all.
    """

    index: str
    files: int
    bytes: int


def _check_complete(local: Path) -> None:
    """IndexNotFoundError without an index; FileNotFoundError naming a file it lacks."""
    if not (local / INDEX).is_file():
        raise IndexNotFoundError(f"{local} holds no {INDEX}: not an MDS dataset folder (convert "
                                 "or write one first)")
    index = read_index(local / INDEX)
    stored = [z or raw for raw, z in zip(index.basenames, index.zip_basenames)]
    missing = [name for name in stored if not (local / name).is_file()]
    if missing:
        raise FileNotFoundError(f"{local}: {len(missing)} file(s) the index names are missing "
                                f"(first: {missing[0]}); nothing was uploaded")


def upload_dataset(local: str | os.PathLike, remote: str, *, exist_ok: bool = False,
                   progress: bool = True, timeout: float = UPLOAD_TIMEOUT,
                   workers: int = 8) -> Uploaded:
    """Upload the MDS dataset in the folder `local` to the URL `remote` (docs/writing.md).

    Args:
        local: a folder holding index.json and the files it names.
        remote: the dataset URL (s3://, gs://, az://, file://...).
        exist_ok: replace a dataset already published at `remote`.
        progress: show a bar of the bytes actually uploaded.
        timeout: seconds every upload may take in all before DeadlineExceeded.
        workers: files uploaded at once.
    """
    folder = Path(local)
    if not folder.is_dir():
        raise ArgumentError(f"{folder} is not a folder")
    _check_complete(folder)
    uploader = Uploader(Output(folder, remote.rstrip("/")), exist_ok=exist_ok, keep_local=True,
                        timeout=timeout, max_workers=workers, who="upload")
    try:
        total = uploader.pending_bytes()
        bar = ByteBar(total, f"upload to {remote}", progress)
        files = [0]

        def count(size: int) -> None:
            files[0] += 1
            bar.add(size)

        uploader.on_uploaded = count
        try:
            url = uploader.publish()
        finally:
            bar.close()
    finally:
        uploader.close()
    return Uploaded(url, files[0], bar.done)
