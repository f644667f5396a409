"""`convert()`: any supported input -> an MDS dataset, in parallel parts, resumable."""

from __future__ import annotations

import logging
import math
import os
import tempfile
import time
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from streaming.errors import ArgumentError
from streaming.storage.retry import UPLOAD_TIMEOUT
from streaming.util.quantities import parse_bytes
from writers.byte_bar import ByteBar
from writers.convert.fileset import FileSetSource, check_same_columns
from writers.convert.graft import graft
from writers.convert.infer import infer_columns
from writers.convert.inputs import (
    InputFile,
    expand_inputs,
    format_of_name,
    is_hf_folder,
    is_remote,
)
from writers.convert.parallel import (
    Job,
    Result,
    describe_key,
    is_done,
    load_or_plan,
    part_samples,
    publish,
    run_parts,
    writer_args,
)
from writers.convert.parts import prepare_target
from writers.convert.progress import FileTally, Progress
from writers.convert.source import Piece, Source, Transform, first_samples
from writers.growth import check_mode
from writers.limits import DEFAULT_SIZE_LIMIT, check_compression, check_hashes
from writers.upload import Output, make_uploader, resolve_output

log = logging.getLogger(__name__)

FORMATS = ("jsonl", "csv", "tsv", "parquet", "hf", "iterable")
# A part is the unit of parallel work and of resumption: small enough to balance, big enough
# that each part's last partial shard stays a small fraction.
PART_BYTES = 256 << 20
PART_ROWS = 1 << 20
INFER_SAMPLES = 200  # transformed in the driver too, so keep it modest


def _is_file_spec(source: Any) -> bool:
    """Whether `source` names files (a path, URL, glob, or a list of them) rather than data."""
    if isinstance(source, (str, os.PathLike)):
        return True
    return isinstance(source, (list, tuple)) and bool(source) and all(
        isinstance(item, (str, os.PathLike)) for item in source)


def _is_single_file(source: Any) -> bool:
    """A path to one local file or save_to_disk folder (read as itself, not as a file set)."""
    if not isinstance(source, (str, os.PathLike)) or is_remote(os.fspath(source)):
        return False
    path = Path(os.fspath(source).removeprefix("file://"))
    return path.is_file() or (path.is_dir() and is_hf_folder(path))


def detect_format(source: Any) -> str:
    """The input format of a path (by extension or folder contents) or an in-memory object."""
    if isinstance(source, (str, os.PathLike)):
        path = Path(source)
        if path.is_dir():
            if is_hf_folder(path):
                return "hf"
            raise ArgumentError(f"cannot tell the format of folder {path}; pass format=")
        fmt = format_of_name(path.name)
        if fmt is None:
            raise ArgumentError(
                f"cannot tell the format of {path} from its extension; "
                f"pass format= (one of {', '.join(FORMATS[:-1])})"
            )
        return fmt
    if type(source).__module__.startswith("datasets."):
        return "hf"
    return "iterable"


def _check_format(fmt: str) -> str:
    fmt = fmt.lower()
    if fmt not in FORMATS:
        raise ArgumentError(f"unknown input format {fmt!r}; choose one of {', '.join(FORMATS)}")
    return fmt


def open_one(source: Any, fmt: str) -> Source:
    """A Source over one file, save_to_disk folder or in-memory object in format `fmt`."""
    if fmt == "jsonl":
        from writers.convert.jsonl import JsonlSource

        return JsonlSource(source)
    if fmt in ("csv", "tsv"):
        from writers.convert.csv import CsvSource

        return CsvSource(source, delimiter="\t" if fmt == "tsv" else ",")
    if fmt == "parquet":
        from writers.convert.parquet import ParquetSource

        return ParquetSource(source)
    if fmt == "hf":
        from writers.convert.hf_datasets import HFSource

        return HFSource(source)
    from writers.convert.iterable import IterableSource

    return IterableSource(source)


def open_source(source: Any, fmt: str | None = None, scratch: Path | None = None
                ) -> tuple[Source, str]:
    """A Source object for `source` in format `fmt` (detected when None); inputs of several
    files (a folder, glob, list or remote prefix; remote files go to `scratch`) as one."""
    if fmt is not None:
        fmt = _check_format(fmt)
    if _is_single_file(source) or not _is_file_spec(source):
        fmt = fmt or detect_format(source)
        return open_one(source, fmt), fmt
    files = expand_inputs(source, fmt, scratch)
    if fmt is None:
        first = files[0].path
        fmt = "hf" if first.is_dir() else format_of_name(first.name) or detect_format(first)
    return open_files(files, fmt), fmt


def open_files(files: list[InputFile], fmt: str) -> FileSetSource:
    """The files as one Source; empty ones (no bytes, rows or records) are left out and named."""
    members, empty, prints = [], [], []
    for item in files:
        if item.path.is_file() and item.path.stat().st_size == 0:
            empty.append(item.name)
            continue
        one = open_one(item.path, fmt)
        whole = one.pieces(1)[0]
        if one.size == 0 or whole.stop <= whole.start:
            empty.append(item.name)
            continue
        members.append((item.name, one))
        prints.append({"url": item.url, "bytes": item.size} if item.url else one.fingerprint())
    if not members:
        raise ArgumentError(f"every input file is empty ({', '.join(empty[:5])}"
                            f"{', ...' if len(empty) > 5 else ''})")
    return FileSetSource(members, empty, prints)


def resolve_columns(source: Source, transform: Transform | None,
                    columns: Mapping[str, str | None] | None) -> dict[str, str]:
    """Final column encodings: user choices, then the input's schema, then inferred values."""
    given = dict(columns or {})
    schema = getattr(source, "schema_columns", None) if transform is None else None
    samples = first_samples(source, transform, INFER_SAMPLES)
    present = {key for sample in samples for key in sample}
    base = {k: v for k, v in (schema or {}).items() if k in present}
    base.update(given)
    inferred = infer_columns(samples, base)
    return {name: enc for name, enc in inferred.items() if enc is not None}


def _units(source: Source, piece: Piece) -> int:
    """A finished piece's size in the progress bar's units."""
    if piece.unit == "row_groups":
        return sum(getattr(source, "group_rows", [])[piece.start:piece.stop])
    return max(0, piece.stop - piece.start)


def part_count(source: Source, workers: int) -> int:
    """How many parts: at least one per worker, more for big inputs, a multiple of workers."""
    if source.size_unit == "B":
        need = math.ceil(source.size / PART_BYTES)
    else:
        need = math.ceil(source.size / PART_ROWS)
    return workers * max(1, math.ceil(need / workers))


_OPTIONS = ("format", "columns", "transform", "compression", "workers", "ordered", "size_limit",
            "hashes", "progress", "resume", "timeout", "lengths")


def _options(values: dict[str, Any]) -> dict[str, Any]:
    """convert()'s options other than source, out, exist_ok and mode, from its locals()."""
    return {name: values[name] for name in _OPTIONS}


def _grow(source: Any, out: str | os.PathLike | tuple, mode: str, options: dict[str, Any],
          started: float) -> Result:
    """convert() with mode "append" or "overwrite": a staged conversion grafted onto `out`."""
    output = resolve_output(out)
    target = prepare_target(output.remote or output.local, mode, "convert")
    check_compression(options["compression"])
    done: list[Result] = []
    index = graft(target, options["compression"], lambda staging: done.append(
        convert(source, staging, exist_ok=True, **options)))
    return replace(done[0], out=str(target.location), index=str(index),
                   seconds=time.monotonic() - started)


def convert(
    source: Any,
    out: str | os.PathLike | tuple,
    *,
    format: str | None = None,
    columns: Mapping[str, str | None] | None = None,
    transform: Transform | None = None,
    compression: str | None = "zstd",
    workers: int = 1,
    ordered: bool = True,
    size_limit: int | str | None = DEFAULT_SIZE_LIMIT,
    hashes: list[str] | None = None,
    progress: bool = True,
    resume: bool = True,
    timeout: float | None = None,
    exist_ok: bool = False,
    mode: str = "create",
    lengths: str | None = None,
) -> Result:
    """Convert `source` to an MDS dataset under `out` (docs/converting.md).

    Args:
        source: A file path (JSONL, also .jsonl.gz/.zst, CSV, TSV, Parquet), a folder, a glob,
            a remote URL, prefix or glob (s3://, gs://, az://; http(s):// for single files), a
            list of any of these, a saved or in-memory Hugging Face dataset, or an iterable
            of dicts.
        out: Local folder, remote URL, or a `(local, remote)` pair.
        format: The input format; None detects it from the extension or object.
        columns: Column name -> encoding, overriding inferred ones (None drops a field).
        transform: `transform(record)` returns None, a dict, or several dicts.
        compression: Shard compression (a codec name such as `"zstd"`); None for none.
        workers: Processes converting parts in parallel.
        ordered: Merge parts in input order; False merges them as they finish.
        size_limit: Bytes (or `"64mb"`) per shard before a new one starts; None: no limit.
        hashes: Digests recorded per shard (`"sha1"`, `"xxh64"`, ...).
        progress: Show a progress bar.
        resume: Reuse parts an interrupted run with the same options finished.
        timeout: Seconds the parts may take before TimeoutError (None: no limit); for a
            remote `out` also each shard upload's deadline (600 when None).
        exist_ok: Replace an MDS dataset (or another conversion) already at `out`.
        mode: `"create"`; `"append"` adds to the dataset at `out`, `"overwrite"` replaces it,
            publishing the new index last.
        lengths: A column whose per-sample lengths are recorded while writing (side files
            that packing reads), as `streaming lengths` would record them afterwards.
    """
    started = time.monotonic()
    if workers < 1:
        raise ArgumentError(f"workers must be at least 1, got {workers}")
    if check_mode(mode) != "create":
        return _grow(source, out, mode, _options(locals()), started)
    if size_limit is not None:
        size_limit = parse_bytes(size_limit)
    # Bad writer options fail before any input is read or any folder is made.
    check_compression(compression)
    check_hashes(hashes, "convert(hashes=")
    output = resolve_output(out)
    if output.remote is not None:  # convert into the local (or a staging) folder, then upload
        return _convert_and_upload(source, output, _options(locals()), exist_ok, started)
    return _convert_here(source, output.local, exist_ok=exist_ok, started=started,
                         **_options(locals()))


def _convert_and_upload(source: Any, output: Output, options: dict[str, Any], exist_ok: bool,
                        started: float) -> Result:
    """convert() into a remote `output`: a conversion in its local folder, then the upload."""
    uploader = make_uploader(output, timeout=options["timeout"] or UPLOAD_TIMEOUT,
                             exist_ok=exist_ok, who="convert")
    try:
        result = convert(source, output.local, exist_ok=exist_ok, **options)
        bar = ByteBar(uploader.pending_bytes(), f"upload to {output.remote}", options["progress"])
        uploader.on_uploaded = bar.add
        try:
            index = uploader.publish()
        finally:
            bar.close()
    finally:
        uploader.close()
    return replace(result, out=output.remote, index=index, seconds=time.monotonic() - started)


def _convert_here(source: Any, out: Path, *, format: str | None, transform: Transform | None,
                  started: float, **options: Any) -> Result:
    """convert() into the local folder `out`, its options checked already; remote inputs are
    downloaded into a temporary folder removed afterwards."""
    remote = _is_file_spec(source) and any(
        is_remote(os.fspath(item)) for item in ([source] if isinstance(source, (str, os.PathLike))
                                                else source))
    if not remote:
        src, fmt = open_source(source, format)
        return _convert_source(src, fmt, out, transform=transform, started=started, **options)
    with tempfile.TemporaryDirectory(prefix="mds-convert-inputs-") as scratch:
        src, fmt = open_source(source, format, Path(scratch))
        return _convert_source(src, fmt, out, transform=transform, started=started, **options)


def _convert_source(
    src: Source, fmt: str, out: Path, *, columns: Mapping[str, str | None] | None,
    transform: Transform | None, compression: str | None, workers: int, ordered: bool,
    size_limit: int | None, hashes: list[str] | None, progress: bool, resume: bool,
    timeout: float | None, exist_ok: bool, started: float, lengths: str | None,
) -> Result:
    """convert() of an opened input into the local folder `out`."""
    if isinstance(src, FileSetSource) and transform is None:
        check_same_columns([(m.name, m.source) for m in src.members], columns or {})
    cols = resolve_columns(src, transform, columns)
    if lengths is not None and lengths not in cols:
        raise ArgumentError(f"lengths={lengths!r} names no column of the converted samples "
                            f"({', '.join(sorted(cols))})")
    written = {"compression": compression, "hashes": hashes, "size_limit": size_limit}
    if lengths is not None:
        written["lengths"] = lengths
    key = describe_key(src, fmt, cols, transform, written)
    if src.size_unit == "records" and getattr(src, "sequence", None) is None and workers > 1:
        log.info("%s cannot be split; converting it in one process", src.label)
        workers = 1
    pieces = load_or_plan(out, key, lambda: src.pieces(part_count(src, workers)), resume,
                          exist_ok)
    todo = [p for p in pieces if not is_done(out, p)]
    skipped = len(pieces) - len(todo)
    if skipped:
        log.info("%s: reusing %d finished parts of %d", out, skipped, len(pieces))
    _warn_if_unsplit(src, pieces, workers)
    threads = max(1, (os.cpu_count() or 1) // min(workers, max(1, len(todo))))
    job = Job(src, out, cols, transform,
              writer_args(compression, hashes, size_limit, threads, lengths))
    bar = _progress_bar(src, pieces, todo, progress)
    try:
        counts = run_parts(job, todo, workers, bar, timeout)
    finally:
        bar.close()
    order = None
    if not ordered:
        order = [p.index for p in pieces if p not in todo] + list(counts)
    index = publish(out, pieces, order)
    counts.update({p.index: part_samples(out, p) for p in pieces if p not in todo})
    return Result(str(out), str(index), len(pieces), sum(c.samples for c in counts.values()),
                  skipped, time.monotonic() - started, _file_samples(src, counts.values()),
                  list(getattr(src, "empty", [])))


def _progress_bar(src: Source, pieces: list[Piece], todo: list[Piece], enabled: bool
                  ) -> Progress:
    """The conversion's bar, already advanced past the parts an earlier run finished."""
    tally = None
    if isinstance(src, FileSetSource):
        sizes = [os.path.getsize(p) if (p := getattr(m.source, "path", None)) and
                 Path(p).is_file() else 0 for m in src.members]
        tally = FileTally(src.spans(), sizes, pieces)
        for piece in pieces:
            if piece not in todo:
                tally.finish(piece)
    reused = sum(_units(src, p) for p in pieces if p not in todo)
    return Progress(src.size or None, src.size_unit, Path(src.label).name, enabled, tally,
                    initial=reused)


def _file_samples(src: Source, counts: Any) -> dict[str, int]:
    """Input file name -> samples written from it (inputs of several files)."""
    if not isinstance(src, FileSetSource):
        return {}
    found = dict.fromkeys((m.name for m in src.members), 0)
    for count in counts:
        for number, samples in count.files.items():
            found[src.members[number].name] += samples
    return found


def _warn_if_unsplit(src: Source, pieces: list[Piece], workers: int) -> None:
    """Say why fewer parts than workers were planned (an input too small to split further)."""
    if workers > 1 and len(pieces) < workers:
        log.warning("%s splits into only %d part(s) for %d workers (%d %s in all): the extra "
                    "workers stay idle", src.label, len(pieces), workers, src.size,
                    src.size_unit)
