"""Benchmark JSONL -> MDS conversion: 1 vs 2 worker processes, beside the reference writer and
the distributed engines (Ray Data, Dask, Spark) at 1 and 2 workers.

    .venv/bin/python benchmarks/convert.py            # ~1 GB JSONL (cached in bench-data/)
    .venv/bin/python benchmarks/convert.py --quick    # ~100 MB
    .venv/bin/python benchmarks/convert.py --engines ray,dask   # which engines (default all)
    .venv/bin/python benchmarks/convert.py --quick --many-only   # just the many-file case

The corpus is the shared token corpus written as JSON lines (token arrays as JSON lists plus
text and id). Prints input MB/s per run and the 2-worker scaling factor (target >= 1.8x on two
cores). When `.bench-venvs/reference` exists, the reference implementation converts the same
file in the same run (parse each line, then its MDSWriter), in a subprocess with that python.
Each installed engine converts the same corpus (split into files) in the same run; its rows
are throughput ratios against the process pool at the same worker count. The many-file case
converts the same samples as 64 Parquet and 256 JSONL files (a folder in) against LitData's
`optimize` over the same files in the same run (.bench-venvs/litdata), with the one-file run at
2 workers as the baseline (benchmarks/_many_files.py).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from _corpus import BENCH_DATA, token_corpus  # noqa: E402
from _engine_runs import ENGINES, split_corpus  # noqa: E402
from _many_files import cpu_seconds, many_files  # noqa: E402

from writers.convert import convert  # noqa: E402

MB = 1 << 20
COLUMNS = {"id": "int", "text": "str", "tokens": "ndarray:int32"}
REFERENCE_PY = ROOT / ".bench-venvs" / "reference" / "bin" / "python"

# Runs inside the reference venv: the same work a user of that library writes by hand.
REFERENCE_SCRIPT = """
import json, sys, time
import numpy as np
from streaming import MDSWriter
src, out = sys.argv[1], sys.argv[2]
start, cpu = time.perf_counter(), time.process_time()
with MDSWriter(columns={"id": "int", "text": "str", "tokens": "ndarray:int32"}, out=out,
               compression="zstd") as writer:
    with open(src, "rb") as handle:
        for line in handle:
            row = json.loads(line)
            row["tokens"] = np.asarray(row["tokens"], dtype=np.int32)
            writer.write(row)
print(time.perf_counter() - start, time.process_time() - cpu)
"""


def make_jsonl(samples: int) -> Path:
    """The token corpus as JSON lines, generated once and cached."""
    path = BENCH_DATA / f"convert-tokens-{samples}.jsonl"
    if path.is_file():
        return path
    corpus = token_corpus(samples=samples)
    tmp = path.with_suffix(".tmp")
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(tmp, "w") as handle:
        for i in range(len(corpus)):
            sample = corpus.sample(i)
            handle.write(json.dumps({"id": i, "text": sample["text"],
                                     "tokens": sample["tokens"].tolist()}) + "\n")
    os.replace(tmp, path)
    return path


def ours(src: Path, out: Path, workers: int) -> tuple[float, float]:
    """(wall seconds, CPU seconds) of one conversion."""
    shutil.rmtree(out, ignore_errors=True)
    cpu, start = cpu_seconds(), time.perf_counter()
    result = convert(src, out, columns=COLUMNS, workers=workers, progress=False)
    seconds = time.perf_counter() - start
    assert result.samples > 0
    return seconds, cpu_seconds() - cpu


def reference(src: Path, out: Path) -> tuple[float, float] | None:
    if not REFERENCE_PY.exists():
        return None
    shutil.rmtree(out, ignore_errors=True)
    # Run outside the checkout so its `streaming` package is the reference's, not ours.
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    done = subprocess.run([str(REFERENCE_PY), "-c", REFERENCE_SCRIPT, str(src), str(out)],
                          capture_output=True, text=True, timeout=3600, cwd=BENCH_DATA, env=env)
    if done.returncode != 0:
        print(f"reference run failed: {done.stderr.strip()[-500:]}")
        return None
    wall, cpu = done.stdout.strip().splitlines()[-1].split()
    return float(wall), float(cpu)


def engines(src: Path, work: Path, names: list[str], pool: dict[int, float]) -> None:
    """Rows for the distributed engines: MB/s and the ratio to the process pool."""
    size = src.stat().st_size
    folder = split_corpus(src) if names else None
    for name in names:
        for workers in (1, 2):
            try:
                seconds = ENGINES[name](folder, work / f"{name}{workers}", workers)
            except ImportError as exc:
                print(f"{name:<7} skipped ({exc.name} is not installed)")
                break
            print(f"{name}, {workers} worker{'s' if workers > 1 else ' '}"
                  f"{' ' * (10 - len(name))}{size / MB / seconds:8.1f} MB/s  ({seconds:.1f} s, "
                  f"{pool[workers] / seconds:.2f}x the process pool)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="~100 MB instead of ~1 GB")
    parser.add_argument("--samples", type=int, help="corpus samples (overrides --quick)")
    parser.add_argument("--engines", default=",".join(ENGINES),
                        help="distributed engines to compare (comma-separated; '' for none)")
    parser.add_argument("--many-only", action="store_true",
                        help="only the many-file case (and its one-file baseline)")
    args = parser.parse_args()
    samples = args.samples or (16_000 if args.quick else 160_000)
    src = make_jsonl(samples)
    size = src.stat().st_size
    print(f"input {src.name}: {size / MB:.0f} MB, {samples} samples, {os.cpu_count()} cpus")
    work = BENCH_DATA / "convert-out"
    print(f"load average before: {os.getloadavg()[0]:.1f} (other work on the machine skews MB/s;"
          " CPU-s per GB does not depend on it)")
    if args.many_only:
        many_files(src, work, ours(src, work / "w2", 2))
        print(f"load average after: {os.getloadavg()[0]:.1f}")
        shutil.rmtree(work, ignore_errors=True)
        return
    one, one_cpu = ours(src, work / "w1", 1)
    two, two_cpu = ours(src, work / "w2", 2)
    gb = size / (1 << 30)
    print(f"ours, 1 worker     {size / MB / one:8.1f} MB/s  ({one:.1f} s, "
          f"{one_cpu / gb:.0f} CPU-s/GB)")
    print(f"ours, 2 workers    {size / MB / two:8.1f} MB/s  ({two:.1f} s, "
          f"{two_cpu / gb:.0f} CPU-s/GB)")
    print(f"scaling 2 vs 1     {one / two:8.2f}x  (target >= 1.8x; work overhead of the split "
          f"{two_cpu / one_cpu:.2f}x)")
    engines(src, work, [e for e in args.engines.split(",") if e], {1: one, 2: two})
    many_files(src, work, (two, two_cpu))
    print(f"load average after: {os.getloadavg()[0]:.1f}")
    ref = reference(src, work / "ref")
    if ref is None:
        print("reference          skipped (no .bench-venvs/reference; see benchmarks/peers)")
    else:
        ref_wall, ref_cpu = ref
        print(f"reference, 1 proc  {size / MB / ref_wall:8.1f} MB/s  ({ref_wall:.1f} s, "
              f"{ref_cpu / gb:.0f} CPU-s/GB)")
        print(f"speed vs reference: 1 worker {ref_wall / one:.2f}x, 2 workers "
              f"{ref_wall / two:.2f}x; CPU per GB vs reference {one_cpu / ref_cpu:.2f}x")
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
