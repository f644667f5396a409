"""Writing straight to S3 against writing locally and uploading the files afterwards, on a
real S3-compatible server on loopback (moto), in the same run.

    .venv/bin/python benchmarks/remote_write.py              # 24,000 samples x 2,048 int32
    .venv/bin/python benchmarks/remote_write.py --samples 6000

"direct" is `MDSWriter(out="s3://...")` (uploads overlap encoding the next shards); "then
upload" writes to a local folder and uploads every file with boto3, one by one. Wall time, best
of --repeat, both ways alternated; uncompressed and zstd. Prints only; nothing is asserted.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "benchmarks"), str(ROOT)]

from _targets import S3Target  # noqa: E402

from writers.mds import MDSWriter  # noqa: E402

COLUMNS = {"tokens": "ndarray:int32", "id": "int"}


def write(out: str | Path, samples: list[np.ndarray], compression: str | None) -> None:
    with MDSWriter(columns=COLUMNS, out=out, compression=compression,
                   size_limit="8mb") as writer:
        for i, tokens in enumerate(samples):
            writer.write({"tokens": tokens, "id": i})


def direct(target: S3Target, samples: list[np.ndarray], compression: str | None,
           run: str) -> float:
    start = time.perf_counter()
    write(target.url(f"direct-{run}"), samples, compression)
    return time.perf_counter() - start


def then_upload(target: S3Target, samples: list[np.ndarray], compression: str | None,
                run: str) -> tuple[float, float]:
    with tempfile.TemporaryDirectory(prefix="bench-write-") as folder:
        start = time.perf_counter()
        write(folder, samples, compression)
        written = time.perf_counter()
        for path in sorted(Path(folder).iterdir()):
            target.put(path, f"local-{run}/{path.name}")
        return written - start, time.perf_counter() - written


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--samples", type=int, default=24_000)
    parser.add_argument("--tokens", type=int, default=2048, help="int32 tokens per sample")
    parser.add_argument("--repeat", type=int, default=2)
    args = parser.parse_args()

    rng = np.random.default_rng(0)
    samples = [rng.integers(0, 50_000, args.tokens, dtype=np.int32)
               for _ in range(args.samples)]
    raw_mb = args.samples * args.tokens * 4 / 1e6
    target = S3Target()
    os.environ.update(target.env)
    try:
        print(f"{args.samples:,} samples x {args.tokens} int32 tokens = {raw_mb:.0f} MB raw, "
              f"8 MB shards, moto on loopback, best of {args.repeat}")
        for compression in (None, "zstd"):
            best_direct, best_local = float("inf"), (float("inf"), float("inf"))
            for k in range(args.repeat):
                run = f"{compression}-{k}"
                best_direct = min(best_direct, direct(target, samples, compression, run))
                local = then_upload(target, samples, compression, run)
                best_local = min(best_local, local, key=sum)
            print(f"  {compression or 'none':5}: direct {best_direct:6.2f} s   then upload "
                  f"{best_local[0]:5.2f} + {best_local[1]:5.2f} = {sum(best_local):6.2f} s   "
                  f"direct / then upload {best_direct / sum(best_local):5.2f}")
    finally:
        target.stop()


if __name__ == "__main__":
    main()
