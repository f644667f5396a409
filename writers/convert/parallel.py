"""Run a conversion as contiguous parts (one MDS sub-dataset each), in a process pool, resumably.

Layout under `out`: `part-00000/`, `part-00001/`, ... (the name Spark, Ray and Dask parts use;
conversions made before used `part00000/`, which readers, merges and appends still take), each
a complete MDS dataset whose `.convert-done.json` marker is written after its index;
`.convert-plan.json` records the input and options the parts belong to; the root `index.json`
is merged from the parts last.
"""

from __future__ import annotations

import json
import logging
import multiprocessing as mp
import os
import shutil
import time
from collections.abc import Callable, Mapping
from concurrent.futures import FIRST_EXCEPTION, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from ctypes import Array, c_longlong
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from streaming.errors import CoordinationError, EncodeError, OutputExistsError
from streaming.format.index import merge_index
from streaming.util.confine import confine, remove
from writers.convert.infer import apply_coercers, coercers
from writers.convert.position import record_position
from writers.convert.progress import Progress
from writers.convert.source import Cursor, Piece, Source, Transform, samples_from
from writers.mds import MDSWriter, clear_dataset_files, is_dataset_file

log = logging.getLogger(__name__)

PLAN_FILE = ".convert-plan.json"
DONE_FILE = ".convert-done.json"
REPORT_EVERY = 2048


def part_name(index: int) -> str:
    """The folder of part number `index`."""
    return f"part-{index:05d}"


@dataclass(frozen=True)
class PartCount:
    """Samples one part wrote, in all and per input file number (inputs of several files)."""

    samples: int
    files: dict[int, int]


@dataclass
class Job:
    """Everything a worker needs to turn one piece into one sub-dataset."""

    source: Source
    out: Path
    columns: dict[str, str]
    transform: Transform | None
    writer_args: dict[str, Any]
    progress: Array[c_longlong] | None = None  # pool mode: (units, samples) per piece
    coerce: dict[str, Callable] = field(init=False)

    def __post_init__(self) -> None:
        self.coerce = coercers(self.columns, from_text=self.source.text_values)


@dataclass
class Result:
    """What a conversion produced: where it went, its root index, parts and sample count.
    `out` and `index` are strings, a folder path or a URL alike (`s3://bucket/corpus`)."""

    out: str
    index: str
    parts: int
    samples: int
    skipped_parts: int
    seconds: float
    file_samples: dict[str, int] = field(default_factory=dict)  # input file -> samples
    empty_files: list[str] = field(default_factory=list)  # input files skipped as empty


def convert_piece(job: Job, piece: Piece, report: Callable[[int, int], None]) -> PartCount:
    """Write one piece as out/part-NNNNN (clearing a half-written one first); samples written."""
    folder = job.out / part_name(piece.index)
    if folder.exists():
        shutil.rmtree(confine(job.out, folder))
    cursor, where = Cursor(), f"{job.source.label} ({part_name(piece.index)})"
    samples = reported_units = reported_samples = 0
    per_file: dict[int, int] = {}
    coerce, transform = job.coerce, job.transform
    with MDSWriter(columns=job.columns, out=folder, **job.writer_args) as writer:
        for index, record in enumerate(job.source.records(piece, cursor)):
            before = samples
            try:
                for sample in samples_from(record, transform, where):
                    if coerce:
                        apply_coercers(sample, coerce, "")
                    writer.write(sample)
                    samples += 1
            except EncodeError as exc:
                position = record_position(job.source, piece, cursor, index)
                raise EncodeError(f"{position}: {exc}") from exc
            if cursor.file >= 0:
                per_file[cursor.file] = per_file.get(cursor.file, 0) + samples - before
            if samples - reported_samples >= REPORT_EVERY:
                report(cursor.done - reported_units, samples - reported_samples)
                reported_units, reported_samples = cursor.done, samples
    marker = {"piece": piece.to_json(), "samples": samples, "files": per_file}
    _write_json(folder / DONE_FILE, marker)
    report(cursor.done - reported_units, samples - reported_samples)
    return PartCount(samples, per_file)


def _write_json(path: Path, data: Any) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(json.dumps(data, sort_keys=True))
    os.replace(tmp, path)


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def is_done(out: Path, piece: Piece) -> bool:
    """A part counts as finished when its marker names this piece and its index exists."""
    folder = out / part_name(piece.index)
    marker = _read_json(folder / DONE_FILE)
    return (
        isinstance(marker, dict)
        and marker.get("piece") == piece.to_json()
        and (folder / "index.json").is_file()
    )


def load_or_plan(out: Path, key: dict, make_pieces: Callable[[], list[Piece]],
                 resume: bool, exist_ok: bool = False) -> list[Piece]:
    """The pieces of this conversion: reused from a matching earlier run, else planned anew.
    `exist_ok` replaces an earlier dataset or conversion in `out` (never other files)."""
    plan_path = out / PLAN_FILE
    previous = _read_json(plan_path)
    if out.exists() and not out.is_dir():
        raise OutputExistsError(f"conversion output {out} exists and is not a directory")
    if previous is None and out.is_dir() and any(out.iterdir()):
        if not exist_ok:
            raise OutputExistsError(
                f"conversion output {out} is not empty and holds no earlier conversion; choose "
                "an empty or new directory, pass mode='append' to add to the MDS dataset in it, "
                "or exist_ok=True to replace it"
            )
        _clear_conversion(out)
    if previous is not None:
        if resume and previous.get("key") == key:
            return [Piece.from_json(p) for p in previous["pieces"]]
        if resume and not exist_ok:
            raise OutputExistsError(
                f"{out} holds a conversion of a different input or with different options; "
                "pass mode='append' to add this input to it, or exist_ok=True or resume=False "
                "to replace it"
            )
        _clear_conversion(out)
    pieces = make_pieces()
    out.mkdir(parents=True, exist_ok=True)
    _write_json(plan_path, {"key": key, "pieces": [p.to_json() for p in pieces]})
    return pieces


def _clear_conversion(out: Path) -> None:
    """Remove what an earlier conversion or MDSWriter left (root index, plan, part folders,
    shard files); OutputExistsError naming anything else, and UnsafePathError naming a symbolic
    link that leads out of `out`, both raised before anything is removed."""
    for child in out.iterdir():
        confine(out, child)
    foreign = sorted(child.name for child in out.iterdir() if not _is_conversion_file(child))
    if foreign:
        raise OutputExistsError(
            f"conversion output {out} holds files that are not part of an MDS dataset "
            f"({', '.join(foreign[:5])}{', ...' if len(foreign) > 5 else ''}); move them or "
            "choose another directory")
    remove(out, out / "index.json")  # first: it must never name a removed shard
    for child in out.iterdir():
        if child.is_dir():
            shutil.rmtree(child)
    remove(out, out / PLAN_FILE)
    clear_dataset_files(out)


def _is_conversion_file(child: Path) -> bool:
    """Whether `child` of a conversion output is a part folder, the plan or a dataset file."""
    if child.is_dir():
        return child.name.startswith("part") and child.name[4:].lstrip("-").isdigit()
    return child.name == PLAN_FILE or is_dataset_file(child.name)


_JOB: Job | None = None


def _install(job: Job) -> None:
    global _JOB
    _JOB = job


def report_progress(progress: Array[c_longlong], slot: int, units: int, samples: int) -> None:
    """Add to the units and samples of piece `slot` in a pool's shared `progress` array.

    Only the worker converting that piece writes its two words, so no lock is taken: a worker
    that dies while reporting (its own failure, or the pool ending it after another's) leaves
    nothing behind that the parent or another worker could wait on.

    Args:
        progress: the pool's shared int64 array, two words per piece.
        slot: the piece's row.
        units / samples: what the worker converted since its last report.
    """
    progress[2 * slot] += units
    progress[2 * slot + 1] += samples


def _pool_task(piece: Piece, slot: int) -> tuple[int, PartCount]:
    assert _JOB is not None and _JOB.progress is not None
    progress = _JOB.progress

    def report(units: int, samples: int) -> None:
        report_progress(progress, slot, units, samples)

    return piece.index, convert_piece(_JOB, piece, report)


def _context() -> mp.context.BaseContext:
    # fork lets transforms be lambdas or closures (nothing is pickled); spawn elsewhere.
    methods = mp.get_all_start_methods()
    return mp.get_context("fork" if "fork" in methods else "spawn")


def _stop(pool: ProcessPoolExecutor, graceful: bool) -> None:
    """Shut the pool down; after a failure, end its workers now (their parts are redone)."""
    if graceful:
        pool.shutdown(wait=True)
        return
    # No public API ends running workers before Python 3.14; _processes is the pool's own map.
    processes = list((getattr(pool, "_processes", None) or {}).values())
    pool.shutdown(wait=False, cancel_futures=True)
    for process in processes:
        process.terminate()
    for process in processes:
        process.join(10)


def _in_process(job: Job, pieces: list[Piece], bar: Progress) -> dict[int, PartCount]:
    """Convert the pieces one after another in this process."""
    done: dict[int, PartCount] = {}
    for piece in pieces:
        def report(units: int, samples: int, index: int = piece.index) -> None:
            bar.update(units, samples, index)

        done[piece.index] = convert_piece(job, piece, report)
    return done


def run_parts(job: Job, pieces: list[Piece], workers: int, bar: Progress,
              timeout: float | None = None) -> dict[int, PartCount]:
    """Convert every piece (in-process for one worker, else a pool); piece index -> samples."""
    if workers <= 1 or len(pieces) <= 1:
        return _in_process(job, pieces, bar)
    ctx = _context()
    job.progress = progress = ctx.RawArray("q", 2 * len(pieces))
    deadline = None if timeout is None else time.monotonic() + timeout
    done: dict[int, PartCount] = {}
    pool = ProcessPoolExecutor(min(workers, len(pieces)), mp_context=ctx,
                               initializer=_install, initargs=(job,))
    pending = {pool.submit(_pool_task, p, slot) for slot, p in enumerate(pieces)}
    seen = [0] * (2 * len(pieces))
    try:
        while pending:
            if deadline is not None and time.monotonic() > deadline:
                raise TimeoutError(f"conversion to {job.out} passed its {timeout}s deadline")
            finished, pending = wait(pending, timeout=0.2, return_when=FIRST_EXCEPTION)
            now = progress[:]
            for slot, piece in enumerate(pieces):
                units = now[2 * slot] - seen[2 * slot]
                samples = now[2 * slot + 1] - seen[2 * slot + 1]
                if units or samples:
                    bar.update(units, samples, piece.index)
            seen = now
            for future in finished:
                index, samples = future.result()
                done[index] = samples
    except BrokenProcessPool as exc:
        raise CoordinationError(
            f"a conversion worker died while writing {job.out}; finished parts are kept, "
            "run the same conversion again to resume"
        ) from exc
    finally:
        _stop(pool, graceful=not pending)
    return done


def publish(out: Path, pieces: list[Piece], order: list[int] | None = None) -> Path:
    """Merge the parts' indexes into out/index.json (atomically, last)."""
    indices = order if order is not None else [p.index for p in pieces]
    return merge_index(out, [out / part_name(i) for i in indices])


def part_samples(out: Path, piece: Piece) -> PartCount:
    """What a finished part of an earlier run wrote, from its marker."""
    marker = _read_json(out / part_name(piece.index) / DONE_FILE) or {}
    files = {int(k): int(v) for k, v in (marker.get("files") or {}).items()}
    return PartCount(int(marker.get("samples", 0)), files)


def writer_args(compression: str | None, hashes: list[str] | None, size_limit: Any,
                threads: int, lengths: str | None = None) -> dict[str, Any]:
    """The MDSWriter options of every part."""
    return {"compression": compression, "hashes": hashes, "size_limit": size_limit,
            "max_workers": threads, "lengths": lengths}


def describe_key(source: Source, fmt: str, columns: Mapping[str, str], transform: Any,
                 options: Mapping[str, Any]) -> dict:
    """What must match for an earlier run's parts to be reused."""
    name = None if transform is None else getattr(transform, "__qualname__", repr(transform))
    return {"source": source.fingerprint(), "format": fmt, "columns": dict(columns),
            "transform": name, **options}
