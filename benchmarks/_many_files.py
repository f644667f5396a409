"""The many-file case of benchmarks/convert.py: the corpus as 64 Parquet files and as 256 JSON
Lines files, converted by `convert()` (a folder in, 2 workers) and, in the same run, by
LitData's `optimize` (one input per file, 2 workers) in its own venv; the one-file conversion
of the same samples is the baseline both are compared with."""

from __future__ import annotations

import json
import os
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


def folder_bytes(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.iterdir())


def ours(folder: Path, out: Path, workers: int) -> float:
    from writers.convert import convert

    shutil.rmtree(out, ignore_errors=True)
    start = time.perf_counter()
    result = convert(folder, out, columns=COLUMNS, workers=workers, progress=False)
    seconds = time.perf_counter() - start
    files = len(result.file_samples) + len(result.empty_files)
    assert result.samples > 0 and files == len(list(folder.iterdir()))
    return seconds


def litdata(folder: Path, fmt: str, out: Path, workers: int) -> float | None:
    """Seconds of LitData's optimize over the same files, or None without its venv."""
    if not LITDATA_PY.exists():
        return None
    listing = out.with_suffix(".files.json")
    listing.parent.mkdir(parents=True, exist_ok=True)
    listing.write_text(json.dumps(sorted(str(p) for p in folder.iterdir())))
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    done = subprocess.run([str(LITDATA_PY), str(ROOT / "benchmarks/peers/litdata_files.py"),
                           fmt, str(listing), str(out), str(workers)],
                          capture_output=True, text=True, timeout=3600, env=env, cwd=out.parent)
    if done.returncode != 0:
        print(f"litdata run failed: {done.stderr.strip()[-800:]}")
        return None
    return float(done.stdout.strip().splitlines()[-1])


def many_files(src: Path, work: Path, one_file_two_workers: float) -> None:
    """Print the many-file rows: MB/s of the input, ours against LitData and the one-file run."""
    size = src.stat().st_size
    print(f"one JSONL file, ours, 2 workers         {size / MB / one_file_two_workers:8.1f} "
          f"MB/s of JSON  ({one_file_two_workers:.1f} s)  <- baseline")
    for fmt, files in CASES.items():
        folder = split_files(src, fmt, files)
        mine = ours(folder, work / f"many-{fmt}", 2)
        theirs = litdata(folder, fmt, work / f"litdata-{fmt}", 2)
        label = f"{files} {fmt} files"
        print(f"{label:<17} ours, 2 workers     {size / MB / mine:8.1f} MB/s of JSON  "
              f"({mine:.1f} s, {one_file_two_workers / mine:.2f}x the one-file run; "
              f"{folder_bytes(folder) / MB:.0f} MB on disk)")
        if theirs is None:
            print(f"{label:<17} LitData optimize    skipped (no .bench-venvs/litdata; see "
                  "benchmarks/peers/setup.sh)")
        else:
            print(f"{label:<17} LitData, 2 workers  {size / MB / theirs:8.1f} MB/s of JSON  "
                  f"({theirs:.1f} s); ours is {theirs / mine:.2f}x as fast")
