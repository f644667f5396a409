"""What a convert input names: one file, a folder, a glob, a list, or a remote prefix or glob,
expanded into the input files in a fixed order (remote files are downloaded first).

Folders and globs are expanded recursively and sorted by path, so the dataset's sample order
is the same on every machine and every run; a list keeps the order it was given in. Names that
start with `.` or `_` (`_SUCCESS`, `.part-0.crc`, `_delta_log/`) are bookkeeping of the tools
that wrote the folder and are never inputs.
"""

from __future__ import annotations

import fnmatch
import glob
import os
import tempfile
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from streaming.errors import ArgumentError, UnsupportedFeatureError
from streaming.storage import backend_for, fetch
from streaming.storage.schemes import split_scheme

# Extension -> format; a compression suffix after it is allowed where the reader supports it.
EXTENSIONS = {
    ".jsonl": "jsonl", ".ndjson": "jsonl", ".json": "jsonl",
    ".csv": "csv", ".tsv": "tsv", ".parquet": "parquet", ".pq": "parquet",
}
COMPRESSION_SUFFIXES = (".gz", ".zst", ".zstd")
COMPRESSIBLE = ("jsonl",)
_WILDCARDS = "*?["
DOWNLOAD_THREADS = 8


@dataclass(frozen=True)
class InputFile:
    """One input file: its local path, and the URL it was downloaded from (None if local)."""

    path: Path
    url: str | None = None
    size: int = 0

    @property
    def name(self) -> str:
        """How messages and the summary name it: the URL for a remote file, else the path."""
        return self.url or str(self.path)


def is_remote(text: str) -> bool:
    """Whether `text` is a URL of a remote store rather than a path or file:// URL."""
    return split_scheme(text)[0] not in ("", "file")


def format_of_name(name: str) -> str | None:
    """The input format a file name's extension implies (None when it implies none)."""
    lower = name.lower()
    for suffix in COMPRESSION_SUFFIXES:
        if lower.endswith(suffix):
            fmt = EXTENSIONS.get(os.path.splitext(lower[: -len(suffix)])[1])
            return fmt if fmt in COMPRESSIBLE else None
    return EXTENSIONS.get(os.path.splitext(lower)[1])


def is_hf_folder(path: Path) -> bool:
    """Whether `path` is a folder written by `datasets.Dataset.save_to_disk`."""
    return (path / "dataset_info.json").is_file() or (path / "state.json").is_file()


def _visible(relative: str) -> bool:
    return not any(part.startswith((".", "_")) for part in Path(relative).parts)


def _pick(names: Sequence[str], fmt: str | None, where: str) -> list[str]:
    """The names that are inputs: those of format `fmt` (or of the one format found), else all
    visible ones when `fmt` is given and none has a known extension."""
    visible = [n for n in names if _visible(n)]
    formats = {format_of_name(n) for n in visible} - {None}
    if fmt is None:
        if len(formats) > 1:
            raise ArgumentError(f"{where} holds files of several formats "
                                f"({', '.join(sorted(formats))}); pass format= to choose one")
        if not formats:
            raise ArgumentError(f"cannot tell the format of the files in {where} from their "
                                "extensions; pass format=")
        fmt = formats.pop()
    chosen = [n for n in visible if _matches(n, fmt)]
    return chosen or ([] if formats else visible)


def _matches(name: str, fmt: str) -> bool:
    found = format_of_name(name)
    return found == fmt or (fmt == "tsv" and found == "csv") or (fmt == "csv" and found == "tsv")


def _local_folder(folder: Path, fmt: str | None) -> list[Path]:
    if fmt in (None, "hf") and is_hf_folder(folder):
        return [folder]
    children = sorted(p for p in folder.rglob("*") if p.is_dir() and is_hf_folder(p))
    if fmt in (None, "hf") and children:
        return [p for p in children if _visible(str(p.relative_to(folder)))]
    names = sorted(str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file())
    return [folder / n for n in _pick(names, fmt, str(folder))]


def _local_glob(pattern: str, fmt: str | None) -> list[Path]:
    paths = sorted(Path(p) for p in glob.glob(pattern, recursive=True))
    folders = [p for p in paths if p.is_dir() and is_hf_folder(p)]
    if folders and fmt in (None, "hf"):
        return folders
    names = [str(p) for p in paths if p.is_file()]
    return [Path(n) for n in _pick(names, fmt, pattern)] if names else []


def _remote(url: str, fmt: str | None) -> list[tuple[str, str]]:
    """(relative name, URL) of the objects under a remote prefix or matching a remote glob."""
    cut = min((url.find(c) for c in _WILDCARDS if c in url), default=-1)
    if cut < 0 and format_of_name(url) is not None:
        return [(url.rsplit("/", 1)[-1], url)]
    prefix_url = url[:cut] if cut >= 0 else url.rstrip("/") + "/"
    base_url = prefix_url[: prefix_url.rfind("/") + 1]
    backend, prefix = backend_for(prefix_url)
    base = prefix[: len(prefix) - (len(prefix_url) - len(base_url))]
    try:
        keys = backend.list(prefix)
    except UnsupportedFeatureError as exc:
        raise UnsupportedFeatureError(f"{url} cannot be listed ({exc}); give the file URLs "
                                      "one by one instead") from exc
    names = [key[len(base):] for key in keys if key.startswith(base)]
    if cut >= 0:
        names = [n for n in names if fnmatch.fnmatchcase(base_url + n, url)]
    return [(n, base_url + n) for n in sorted(_pick(names, fmt, url))]


def _download(pairs: list[tuple[str, str]], folder: Path) -> list[InputFile]:
    """Download each (name, URL) to `folder`/name, on a few threads, keeping the order."""

    def one(pair: tuple[str, str]) -> InputFile:
        name, url = pair
        dest = folder / name
        dest.parent.mkdir(parents=True, exist_ok=True)
        fetch(url, dest)
        return InputFile(dest, url, dest.stat().st_size)

    with ThreadPoolExecutor(DOWNLOAD_THREADS, thread_name_prefix="mds-convert-fetch") as pool:
        return list(pool.map(one, pairs))


def expand_inputs(spec: str | os.PathLike | Sequence[str | os.PathLike], fmt: str | None,
                  scratch: Path | None = None) -> list[InputFile]:
    """The input files `spec` names, in conversion order; remote ones are downloaded into
    `scratch` (required when any is remote). FileNotFoundError when it names none.

    Args:
        spec: a path, folder, glob or URL (prefix or glob), or a list of any of these.
        fmt: the input format when known (selects files in folders; None: by extension).
        scratch: an empty folder for downloads.
    """
    items = [spec] if isinstance(spec, (str, os.PathLike)) else list(spec)
    found: list[InputFile] = []
    for item in items:
        text = os.fspath(item)
        if is_remote(text):
            if scratch is None:
                raise ArgumentError("remote inputs need a folder to download into")
            pairs = _remote(text, fmt)
            where = Path(tempfile.mkdtemp(prefix="input-", dir=scratch))
            found.extend(_download(pairs, where))
            continue
        path = Path(text.removeprefix("file://"))
        if path.is_dir():
            paths = _local_folder(path, fmt)
        elif any(c in text for c in _WILDCARDS) and not path.exists():
            paths = _local_glob(text, fmt)
        elif path.is_file():
            paths = [path]
        else:
            raise FileNotFoundError(f"convert input {text} does not exist")
        found.extend(InputFile(p) for p in paths)
    if not found:
        raise FileNotFoundError(f"convert input {spec} names no input files"
                                + (f" of format {fmt}" if fmt else ""))
    return found
