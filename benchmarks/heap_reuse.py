"""Epochs read by the training process itself (no DataLoader workers) with the malloc tuning it
gets once it reads samples (`streaming.coord.worker_setup.settle_reading_process`), against the
same epochs with glibc at its defaults: a blob corpus (about 94 KB a sample) as Parquet (zstd)
and as its MDS copy, read from a local folder.

    .venv/bin/python benchmarks/heap_reuse.py              # 1,200 blobs, 113 MB
    .venv/bin/python benchmarks/heap_reuse.py --scale 4 --rounds 7

Each round runs both settings in fresh processes, taking turns; a process reads one epoch to
warm up (imports, the tuning itself) and then `--epochs` timed ones, each through a new cache
folder. glibc's defaults are had by setting MALLOC_TRIM_THRESHOLD_=131072 (its default value):
a user's malloc setting, which the dataset leaves as it is. Printed per format: the median epoch
seconds and minor page faults of each setting, and tuned / default. Nothing is asserted
(timings vary on shared machines).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _child_epoch import run
from _corpus import blob_corpus
from parquet import GROUP_MB, write_mds, write_parquet

# argv: folder, "parquet" or "mds", timed epochs. Prints the epochs' seconds and page faults.
CHILD = r"""
import json, resource, shutil, sys, tempfile, time
from streaming import StreamingDataLoader, StreamingDataset
from streaming.stream import Stream

def epoch():
    cache = tempfile.mkdtemp()
    fmt = {"format": "parquet"} if sys.argv[2] == "parquet" else {}
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    start = time.perf_counter()
    ds = StreamingDataset(streams=[Stream(remote=sys.argv[1], local=cache, **fmt)],
                          shuffle=True, batch_size=64)
    for batch in StreamingDataLoader(ds, batch_size=64, num_workers=0):
        pass
    seconds = time.perf_counter() - start
    ds.close()
    shutil.rmtree(cache)
    return seconds, resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before

epoch()
runs = [epoch() for _ in range(int(sys.argv[3]))]
print(json.dumps({"seconds": [s for s, _ in runs], "faults": [f for _, f in runs]}))
"""

SETTINGS = {"tuned": None, "glibc defaults": {"MALLOC_TRIM_THRESHOLD_": "131072"}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scale", type=float, default=2.0, help="600 blobs per unit")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--epochs", type=int, default=3, help="timed epochs per process")
    args = parser.parse_args()
    corpus = blob_corpus(int(600 * args.scale))
    root = Path(tempfile.mkdtemp(prefix="bench-heap-"))
    folders = {"parquet": write_parquet(corpus, root / "zstd", "zstd", GROUP_MB),
               "mds": write_mds(corpus, root / "mds", GROUP_MB)}
    print(f"{len(corpus)} blobs, {corpus.nbytes / (1 << 20):.0f} MB; {args.rounds} rounds of "
          f"{args.epochs} epochs per setting, each process warmed up by one more")
    for fmt, folder in folders.items():
        got: dict[str, list[dict]] = {name: [] for name in SETTINGS}
        for _ in range(args.rounds):
            for name, env in SETTINGS.items():
                got[name].append(run(CHILD, str(folder), fmt, str(args.epochs), env=env))
        med = {name: {key: statistics.median(x for r in runs for x in r[key])
                      for key in ("seconds", "faults")} for name, runs in got.items()}
        tuned, plain = med["tuned"], med["glibc defaults"]
        print(f"  {fmt:8s} tuned {tuned['seconds']:.3f} s, {tuned['faults']:,.0f} faults; "
              f"glibc defaults {plain['seconds']:.3f} s, {plain['faults']:,.0f} faults; "
              f"tuned / defaults x{tuned['seconds'] / plain['seconds']:.2f} the time")


if __name__ == "__main__":
    main()
