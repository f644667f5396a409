"""One shuffled epoch through a DataLoader (batch 64, 0 and 2 workers): samples/s, MB/s, time to
first batch and peak RSS of the process tree, against the page-cache read ceiling and, when its
venv exists (bash benchmarks/peers/setup.sh), mosaicml-streaming reading the same MDS files.

    .venv/bin/python benchmarks/iterate.py [--quick] [--corpus tokens|blobs]

Prints only; nothing is asserted (absolute timings are not stable on shared machines).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO / "benchmarks"), str(REPO)]
MB = 1e6
PEER_PYTHON = {"reference": REPO / ".bench-venvs" / "reference" / "bin" / "python"}

# Runs inside a child interpreter (ours or a peer's); prints one JSON line.
CHILD = r"""
import json, os, sys, threading, time
import torch
def tree_rss():
    total, pids = 0, [os.getpid()]
    try:
        kids = open(f"/proc/{os.getpid()}/task/{os.getpid()}/children").read().split()
        pids += [int(k) for k in kids]
    except OSError:
        pass
    for pid in pids:
        try:
            total += int(open(f"/proc/{pid}/statm").read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
        except OSError:
            pass
    return total
peak = [0]
def sample():
    while True:
        peak[0] = max(peak[0], tree_rss()); time.sleep(0.05)
threading.Thread(target=sample, daemon=True).start()
local, workers, column = sys.argv[1], int(sys.argv[2]), sys.argv[3]
from streaming import StreamingDataset
t0 = time.perf_counter()
ds = StreamingDataset(local=local, batch_size=64, shuffle=True)
def collate(batch):
    return [s[column] for s in batch]
loader = torch.utils.data.DataLoader(ds, batch_size=64, num_workers=workers, collate_fn=collate)
n = nbytes = 0
first = None
for batch in loader:
    if first is None:
        first = time.perf_counter() - t0
    n += len(batch)
    nbytes += sum(len(x) * getattr(x, "itemsize", 1) for x in batch)
total = time.perf_counter() - t0
print(json.dumps({"samples": n, "bytes": nbytes, "seconds": total, "first": first,
                  "rss": peak[0]}))
"""


def run(python: Path, local: Path, workers: int, column: str, env_path: str | None) -> dict:
    env = dict(os.environ, OMP_NUM_THREADS="1")
    if env_path:
        env["PYTHONPATH"] = env_path
    else:
        env.pop("PYTHONPATH", None)
    out = subprocess.run([str(python), "-c", CHILD, str(local), str(workers), column],
                         capture_output=True, text=True, env=env, cwd="/tmp", timeout=3600)
    if out.returncode:
        raise RuntimeError(out.stderr[-2000:])
    return json.loads(out.stdout.strip().splitlines()[-1])


def page_cache_ceiling(local: Path) -> float:
    """MB/s of reading every shard file once (already in the page cache)."""
    files = sorted(local.glob("shard.*.mds"))
    buf = bytearray(1 << 24)
    start, total = time.perf_counter(), 0
    for path in files:
        with open(path, "rb", buffering=0) as f:
            while n := f.readinto(buf):
                total += n
    return total / MB / (time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true", help="small corpus (~80 MB)")
    parser.add_argument("--corpus", choices=["tokens", "blobs"], default="tokens")
    args = parser.parse_args()
    from _corpus import BENCH_DATA, blob_corpus, token_corpus

    from writers.mds import MDSWriter

    if args.corpus == "tokens":
        corpus, column = token_corpus(samples=20_000 if args.quick else 250_000), "tokens"
    else:
        corpus, column = blob_corpus(samples=800 if args.quick else 10_000), "blob"
    local = BENCH_DATA / "iterate" / f"{args.corpus}-{len(corpus)}"
    if not (local / "index.json").exists():
        with MDSWriter(columns=corpus.columns, out=local, exist_ok=True) as writer:
            for sample in corpus:
                writer.write(sample)
    ceiling = page_cache_ceiling(local)
    print(f"corpus: {len(corpus):,} {args.corpus} samples, {corpus.nbytes / MB:,.0f} MB; "
          f"page-cache read ceiling {ceiling:,.0f} MB/s")
    contenders = {"ours": (Path(sys.executable), str(REPO))}
    contenders.update({name: (py, None) for name, py in PEER_PYTHON.items() if py.exists()})
    for workers in (0, 2):
        results = {}
        for name, (python, path) in contenders.items():
            try:
                results[name] = r = run(python, local, workers, column, path)
            except (RuntimeError, subprocess.TimeoutExpired) as exc:
                print(f"  {name:10s} workers={workers}: failed: {str(exc)[-300:]}")
                continue
            print(f"  {name:10s} workers={workers}: {r['samples'] / r['seconds']:>10,.0f} "
                  f"samples/s {r['bytes'] / MB / r['seconds']:>8,.0f} MB/s  first batch "
                  f"{r['first']:.2f} s  peak RSS {r['rss'] / MB:,.0f} MB")
        if "ours" in results:
            ours = results["ours"]
            for name, r in results.items():
                if name != "ours":
                    print(f"    ours / {name}: speed x{r['seconds'] / ours['seconds']:.2f}, "
                          f"first batch x{r['first'] / ours['first']:.2f} faster, "
                          f"RSS {ours['rss'] / max(r['rss'], 1):.2f} of theirs")
            print(f"    ours vs page-cache ceiling: "
                  f"{ours['bytes'] / MB / ours['seconds'] / ceiling:.2f}")


if __name__ == "__main__":
    main()
