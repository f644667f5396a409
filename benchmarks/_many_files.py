"""The many-file case of benchmarks/convert.py: the corpus as 64 Parquet files and as 256 JSON
Lines files, converted by `convert()` (a folder in, 2 workers) and, in the same run, by
LitData's `optimize` (one input per file, 2 workers) in its own venv; the one-file conversion
of the same samples is the baseline both are compared with."""

from __future__ import annotations

import json
import os
import resource
import shutil
import subprocess
import time
from pathlib import Path

MB = 1 << 20
ROOT = Path(__file__).resolve().parent.parent
LITDATA_PY = ROOT / ".bench-venvs" / "litdata" / "bin" / "python"
CASES = {"parquet": 64, "jsonl": 256}
COLUMNS = {"id": "int", "text": "str", "tokens": "ndarray:int32"}


def split_files(src: Path, fmt: str, files: int) -> Path:
    """The JSONL corpus `src` as `files` files of `fmt` in a folder beside it (made once)."""
    folder = src.with_name(f"{src.stem}.{files}-{fmt}")
    if folder.is_dir() and len(list(folder.glob(f"*.{fmt}"))) == files:
        return folder
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir()
    lines = src.read_bytes().splitlines(keepends=True)
    for k in range(files):
        chunk = lines[len(lines) * k // files:len(lines) * (k + 1) // files]
        path = folder / f"part-{k:05d}.{fmt}"
        if fmt == "jsonl":
            path.write_bytes(b"".join(chunk))
            continue
        import pyarrow as pa
        import pyarrow.parquet as pq

        rows = [json.loads(line) for line in chunk]
        table = pa.table({"id": [r["id"] for r in rows], "text": [r["text"] for r in rows],
                          "tokens": pa.array([r["tokens"] for r in rows], pa.list_(pa.int32()))})
        pq.write_table(table, path)
    return folder


def cpu_seconds() -> float:
    """CPU time of this process and its finished children (pool workers, the LitData run)."""
    own, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(
        resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def folder_bytes(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.iterdir())


def ours(folder: Path, out: Path, workers: int) -> tuple[float, float]:
    """(wall seconds, CPU seconds) of convert() over the folder."""
    from writers.convert import convert

    shutil.rmtree(out, ignore_errors=True)
    cpu, start = cpu_seconds(), time.perf_counter()
    result = convert(folder, out, columns=COLUMNS, workers=workers, progress=False)
    seconds = time.perf_counter() - start
    files = len(result.file_samples) + len(result.empty_files)
    assert result.samples > 0 and files == len(list(folder.iterdir()))
    return seconds, cpu_seconds() - cpu


def litdata(folder: Path, fmt: str, out: Path, workers: int) -> tuple[float, float] | None:
    """(wall seconds of LitData's optimize over the same files, CPU seconds of its process and
    workers), or None without its venv."""
    if not LITDATA_PY.exists():
        return None
    listing = out.with_suffix(".files.json")
    listing.parent.mkdir(parents=True, exist_ok=True)
    listing.write_text(json.dumps(sorted(str(p) for p in folder.iterdir())))
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    cpu = cpu_seconds()
    done = subprocess.run([str(LITDATA_PY), str(ROOT / "benchmarks/peers/litdata_files.py"),
                           fmt, str(listing), str(out), str(workers)],
                          capture_output=True, text=True, timeout=3600, env=env, cwd=out.parent)
    if done.returncode != 0:
        print(f"litdata run failed: {done.stderr.strip()[-800:]}")
        return None
    return float(done.stdout.strip().splitlines()[-1]), cpu_seconds() - cpu


def many_files(src: Path, work: Path, baseline: tuple[float, float]) -> None:
    """Print the many-file rows: MB/s of the input (as JSON) and CPU seconds, ours against
    LitData and against `baseline`, the (wall, CPU) seconds of the one-file run at 2 workers."""
    size = src.stat().st_size
    one, one_cpu = baseline
    print(f"one JSONL file    ours, 2 workers     {size / MB / one:8.1f} MB/s  ({one:.1f} s, "
          f"{one_cpu:.1f} CPU-s)  <- baseline")
    for fmt, files in CASES.items():
        folder = split_files(src, fmt, files)
        mine, mine_cpu = ours(folder, work / f"many-{fmt}", 2)
        theirs = litdata(folder, fmt, work / f"litdata-{fmt}", 2)
        label = f"{files} {fmt} files"
        print(f"{label:<17} ours, 2 workers     {size / MB / mine:8.1f} MB/s  ({mine:.1f} s, "
              f"{mine_cpu:.1f} CPU-s; {one / mine:.2f}x the one-file run's speed)")
        if theirs is None:
            print(f"{label:<17} LitData optimize    skipped (no .bench-venvs/litdata; see "
                  "benchmarks/peers/setup.sh)")
            continue
        wall, cpu = theirs
        print(f"{label:<17} LitData, 2 workers  {size / MB / wall:8.1f} MB/s  ({wall:.1f} s, "
              f"{cpu:.1f} CPU-s); ours: {wall / mine:.2f}x the speed, {mine_cpu / cpu:.2f}x "
              "the CPU")
