"""One shuffled epoch through a DataLoader (batch 64, 0 and 2 workers) for us and every peer
on the same samples: samples/s, MB/s, time to first batch and peak RSS of the process tree,
against the page-cache read ceiling.

    .venv/bin/python benchmarks/iterate.py [--quick] [--corpus tokens|blobs|both] [--json F]

Last, ours and the reference stream the token corpus from zstd shards into a fresh cache, for
the time to first batch (LitData is left out there: it would need its own compressed copy).

Peers run from their own venvs (bash benchmarks/peers/setup.sh): mosaicml-streaming reads our
MDS files directly; LitData reads the same samples converted once with `litdata.optimize`
(benchmarks/peers/litdata_convert.py, cached under bench-data/peers/). Each library uses its
natural collate: ours the StreamingDataLoader default (streaming.loader.default_collate: stacked /
ragged tensors in shared memory), the peers a list of sample dicts (torch's default collate cannot
batch ragged arrays). Prints only; nothing is asserted (timings vary on shared machines).
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
VENVS = REPO / ".bench-venvs"
COLLATE = {"ours": "streaming.loader.default_collate (tensors + Ragged)",
           "reference": "list of samples", "litdata": "list of samples (memoryview -> bytes)"}
RUN_TIMEOUT = 900  # seconds per run; a peer that hangs is reported as failed

# Runs inside a child interpreter (ours or a peer's); prints one JSON line.
CHILD = r"""
import json, os, resource, sys, threading, time
import torch
def cpu():
    return sum(r.ru_utime + r.ru_stime for r in
               (resource.getrusage(resource.RUSAGE_SELF),
                resource.getrusage(resource.RUSAGE_CHILDREN)))
def tree_rss():
    me, total = os.getpid(), 0
    pids = [me]
    try:
        pids += [int(k) for k in open(f"/proc/{me}/task/{me}/children").read().split()]
    except OSError:
        pass
    for pid in pids:
        try:
            total += int(open(f"/proc/{pid}/statm").read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
        except OSError:
            pass
    return total
peak = [0]
def poll():
    while True:
        peak[0] = max(peak[0], tree_rss()); time.sleep(0.02)
threading.Thread(target=poll, daemon=True).start()
lib, data, workers, column = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
# "remote=<dir>": stream compressed shards from <dir> into a fresh cache (time to first batch
# then includes fetching and decompressing what the first batch needs).
remote = None
if data.startswith("remote="):
    import tempfile
    remote, data = data[len("remote="):], tempfile.mkdtemp(prefix="bench-cache-")
def where():
    if remote is None:
        return {"local": data}
    return {"remote": ("file://" if lib == "ours" else "") + remote, "local": data}
def nbytes(x):
    return x.nbytes if hasattr(x, "nbytes") else len(x)
if lib == "ours":
    from streaming import StreamingDataLoader, StreamingDataset
    t0 = time.perf_counter()
    ds = StreamingDataset(**where(), batch_size=64, shuffle=True)
    loader = StreamingDataLoader(ds, batch_size=64, num_workers=workers)
    def count(batch):
        col = batch[column]
        size = nbytes(col.values) if hasattr(col, "values") else (
            nbytes(col) if hasattr(col, "nbytes") else sum(map(nbytes, col)))
        return len(batch["id"]), size
else:
    if lib == "reference":
        from streaming import StreamingDataset
        t0 = time.perf_counter()
        ds = StreamingDataset(**where(), batch_size=64, shuffle=True)
        Loader = torch.utils.data.DataLoader
    else:
        import litdata
        t0 = time.perf_counter()
        ds = litdata.StreamingDataset(data, shuffle=True)
        Loader = litdata.StreamingDataLoader
    def as_list(batch):
        # LitData hands bytes columns out as memoryviews, which cannot leave a worker process.
        return [{k: bytes(v) if isinstance(v, memoryview) else v for k, v in s.items()}
                for s in batch]
    loader = Loader(ds, batch_size=64, num_workers=workers, collate_fn=as_list)
    def count(batch):
        return len(batch), sum(nbytes(s[column]) for s in batch)
c0 = cpu()
n = size = 0
first = None
for batch in loader:
    if first is None:
        first = time.perf_counter() - t0
    k, b = count(batch)
    n += k; size += b
total = time.perf_counter() - t0
del loader, batch  # joins the workers, so their CPU time is counted
if remote is not None:
    import shutil
    shutil.rmtree(data, ignore_errors=True)
print(json.dumps({"samples": n, "bytes": size, "seconds": total, "first": first,
                  "rss": peak[0], "cpu": cpu() - c0}))
"""


def run(lib: str, python: Path, data: Path, workers: int, column: str) -> dict:
    env = dict(os.environ, OMP_NUM_THREADS="1")
    env.pop("PYTHONPATH", None)
    if lib == "ours":
        env["PYTHONPATH"] = str(REPO)
    out = subprocess.run([str(python), "-c", CHILD, lib, str(data), str(workers), column],
                         capture_output=True, text=True, env=env, cwd="/tmp", timeout=RUN_TIMEOUT)
    if out.returncode:
        raise RuntimeError(out.stderr[-2000:])
    return json.loads(out.stdout.strip().splitlines()[-1])


def page_cache_ceiling(local: Path) -> float:
    """MB/s of reading every shard file once (after a first read puts them in the page cache)."""
    files = sorted(local.glob("shard.*.mds"))
    buf = bytearray(1 << 24)
    best = 0.0
    for _ in range(2):
        start, total = time.perf_counter(), 0
        for path in files:
            with open(path, "rb", buffering=0) as f:
                while n := f.readinto(buf):
                    total += n
        best = max(best, total / MB / (time.perf_counter() - start))
    return best


def prepare(kind: str, quick: bool) -> tuple[object, Path, str, Path | None]:
    """The corpus, its MDS copy, the payload column and its LitData copy (None if no venv)."""
    from _corpus import BENCH_DATA, blob_corpus, token_corpus

    from writers.mds import MDSWriter

    if kind == "tokens":
        corpus, column = token_corpus(samples=20_000 if quick else 250_000), "tokens"
        name = f"tokens-{len(corpus)}-1000-50257-0"
    else:
        corpus, column = blob_corpus(samples=800 if quick else 10_000), "blob"
        name = f"blobs-{len(corpus)}-100000-0"
    local = BENCH_DATA / "iterate" / f"{kind}-{len(corpus)}"
    if not (local / "index.json").exists():
        with MDSWriter(columns=corpus.columns, out=local, exist_ok=True) as writer:
            for sample in corpus:
                writer.write(sample)
    lit = None
    if (VENVS / "litdata" / "bin" / "python").exists():
        lit = BENCH_DATA / "peers" / "litdata" / f"{kind}-{len(corpus)}"
        subprocess.run([str(VENVS / "litdata" / "bin" / "python"),
                        str(REPO / "benchmarks" / "peers" / "litdata_convert.py"),
                        str(BENCH_DATA / "corpus" / name), str(lit)], check=True, cwd="/tmp")
    return corpus, local, column, lit


def bench(kind: str, quick: bool) -> dict:
    corpus, local, column, lit = prepare(kind, quick)
    ceiling = page_cache_ceiling(local)
    print(f"{kind}: {len(corpus):,} samples, {corpus.nbytes / MB:,.0f} MB payload; "
          f"page-cache read ceiling {ceiling:,.0f} MB/s")
    contenders = {"ours": (Path(sys.executable), local)}
    if (VENVS / "reference" / "bin" / "python").exists():
        contenders["reference"] = (VENVS / "reference" / "bin" / "python", local)
    if lit is not None:
        contenders["litdata"] = (VENVS / "litdata" / "bin" / "python", lit)
    report: dict = {"samples": len(corpus), "ceiling_mb_s": ceiling, "runs": {}}
    for workers in (0, 2):
        results = {}
        for lib, (python, data) in contenders.items():
            try:
                results[lib] = r = run(lib, python, data, workers, column)
            except (RuntimeError, subprocess.TimeoutExpired) as exc:
                print(f"  {lib:10s} workers={workers}: failed: {str(exc)[-300:]}")
                continue
            r["samples_s"], r["mb_s"] = r["samples"] / r["seconds"], r["bytes"] / MB / r["seconds"]
            print(f"  {lib:10s} workers={workers}: {r['samples_s']:>9,.0f} samples/s "
                  f"{r['mb_s']:>7,.0f} MB/s  first batch {r['first']:5.2f} s  peak RSS "
                  f"{r['rss'] / MB:>6,.0f} MB  CPU {r['cpu'] / r['samples'] * 1e6:5.1f} us/sample  "
                  f"collate: {COLLATE[lib]}")
        report["runs"][workers] = results
        ours = results.get("ours")
        if ours is None:
            continue
        for lib, r in results.items():
            if lib != "ours":
                print(f"    ours / {lib}: speed x{ours['samples_s'] / r['samples_s']:.2f}, "
                      f"first batch {ours['first'] / r['first']:.2f} of theirs, "
                      f"RSS {ours['rss'] / max(r['rss'], 1):.2f} of theirs")
        print(f"    ours / page-cache ceiling: {ours['mb_s'] / ceiling:.2f}")
    return report


def bench_zstd(quick: bool) -> dict:
    """Ours and the reference streaming zstd shards into a fresh cache (0 workers)."""
    from _corpus import BENCH_DATA, token_corpus

    from writers.mds import MDSWriter

    corpus = token_corpus(samples=20_000 if quick else 250_000)
    remote = BENCH_DATA / "iterate" / f"tokens-{len(corpus)}-zstd"
    if not (remote / "index.json").exists():
        with MDSWriter(columns=corpus.columns, out=remote, compression="zstd",
                       exist_ok=True) as writer:
            for sample in corpus:
                writer.write(sample)
    print(f"tokens from zstd shards into a fresh cache ({len(corpus):,} samples, 0 workers):")
    results = {}
    for lib in ("ours", "reference"):
        python = Path(sys.executable) if lib == "ours" else VENVS / lib / "bin" / "python"
        if not python.exists():
            continue
        try:
            results[lib] = r = run(lib, python, Path(f"remote={remote}"), 0, "tokens")
        except (RuntimeError, subprocess.TimeoutExpired) as exc:
            print(f"  {lib:10s}: failed: {str(exc)[-300:]}")
            continue
        print(f"  {lib:10s}: first batch {r['first']:5.2f} s  epoch {r['seconds']:6.2f} s  "
              f"peak RSS {r['rss'] / MB:>6,.0f} MB")
    if len(results) == 2:
        print(f"    ours / reference first batch: "
              f"{results['ours']['first'] / results['reference']['first']:.2f}")
    return results


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true", help="small corpora (~80 MB each)")
    parser.add_argument("--corpus", choices=["tokens", "blobs", "both"], default="both")
    parser.add_argument("--json", type=Path, help="also write the numbers here")
    args = parser.parse_args()
    kinds = ["tokens", "blobs"] if args.corpus == "both" else [args.corpus]
    report = {kind: bench(kind, args.quick) for kind in kinds}
    report["zstd"] = bench_zstd(args.quick)
    if args.json:
        args.json.write_text(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
