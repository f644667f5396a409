"""One shuffled epoch over the same Parquet files streamed where they lie, against our own MDS copy
of the same samples: a token corpus and a blob corpus, Parquet written with zstd and snappy,
read from a local folder and from loopback S3 (moto), with 0 and 2 DataLoader workers.

    .venv/bin/python benchmarks/parquet.py             # ~40 MB tokens, ~60 MB blobs
    .venv/bin/python benchmarks/parquet.py --scale 3   # three times as much
    .venv/bin/python benchmarks/parquet.py --corpus tokens --where local --rounds 3
    .venv/bin/python benchmarks/parquet.py --peers --rounds 3 --scale 2   # LitData, HF too
    .venv/bin/python benchmarks/parquet.py --corpus blobs --where local --scale 16 \
        --block 9600   # one shuffle block over a corpus larger than the decoded room

Every run reads through a fresh cache folder (a Parquet stream always caches the row groups it
reads; the MDS copy is fetched and decompressed into its cache the same way), StreamingDataLoader
with batch 64 and shuffle on, one full epoch. Printed per row: samples/s, time to the first
batch, and the ratio of the Parquet epoch's time to the MDS epoch's time measured in the same
run (the issue's goal: at most 1.3). With --rounds > 1 the configurations take turns and each
one's median is used. With --peers, LitData's ParquetLoader (shuffle on, its index built from
the footers first, untimed) and Hugging Face `datasets` streaming (shuffled with a buffer of
10,000 samples, through torch's DataLoader) read the same zstd Parquet files from the same place
(the local folder, or the same objects on the loopback S3 server, its endpoint given to each as
`storage_options`), each in its own venv (`.bench-venvs/litdata`, `.bench-venvs/hf`, or under
$PEERS_DIR: see benchmarks/peers/setup.sh); their lines give their samples/s, first batch, and
how many times faster ours (Parquet zstd) was. A peer that fails prints why in place of its line.

The line "zstd, file span" reads the zstd files again with the shuffle LitData applies: its
`shuffle=True` visits the files in a random order and mixes the rows within each file (in
windows of 256), so a batch comes from one file; ours then uses `shuffle_algo="py1br"` with a
block of one file's rows (a batch draws from one or two files). Our default (`py1e` over blocks
far larger than this corpus) mixes every batch over the whole corpus, so its first batch decodes
nearly every row group. The peer lines give ours against each peer with both.

Each corpus also gets a ceiling measured in the same run: "decode only" reads every row group
of the zstd files with pyarrow, in file order (no shuffle, no cache, no loader), and turns each
column into the Python values a sample holds (bytes and str objects, numpy arrays for the token
lists), then drops them. A reader returning those values through pyarrow does at least that
work, so it bounds the samples/s any of them (ours, LitData's) can reach on this machine.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _corpus import Corpus, blob_corpus, token_corpus

from streaming import StreamingDataLoader, StreamingDataset
from streaming.stream import Stream
from writers.mds import MDSWriter

MB = 1 << 20
ROOT = Path(__file__).resolve().parent.parent
VENVS = Path(os.environ.get("PEERS_DIR", ROOT / ".bench-venvs"))
PEERS = {"litdata": ("litdata", "litdata_parquet_epoch.py"),
         "hf datasets": ("hf", "hf_parquet_epoch.py")}  # name -> (venv, script)
BATCH = 64
SPAN = "zstd, file span"  # the zstd files shuffled as LitData shuffles them (see the docstring)
GROUP_MB = 4  # payload per Parquet row group and per MDS shard (--group-mb)
FILE_GROUPS = 4  # row groups per Parquet file


def arrow_table(corpus: Corpus, lo: int, hi: int) -> pa.Table:
    """Samples [lo, hi) of `corpus` as an Arrow table (no Python object per element)."""
    offsets = corpus.offsets[lo:hi + 1]
    values = np.asarray(corpus.values[offsets[0]:offsets[-1]])
    local = (offsets - offsets[0]).astype(np.int32)
    ids = pa.array(np.arange(lo, hi, dtype=np.int64))
    if corpus.texts is None:
        blobs = pa.Array.from_buffers(pa.binary(), hi - lo,
                                      [None, pa.py_buffer(local), pa.py_buffer(values)])
        return pa.table({"id": ids, "blob": blobs})
    tokens = pa.ListArray.from_arrays(pa.array(local), pa.array(values))
    return pa.table({"id": ids, "text": pa.array(corpus.texts[lo:hi]), "tokens": tokens})


def write_parquet(corpus: Corpus, out: Path, compression: str, group_mb: float) -> Path:
    """`corpus` as Parquet files of FILE_GROUPS row groups of about `group_mb` MB each."""
    out.mkdir(parents=True, exist_ok=True)
    per_sample = corpus.nbytes / len(corpus)
    rows = max(1, int(group_mb * MB / per_sample))
    per_file = rows * FILE_GROUPS
    for k, lo in enumerate(range(0, len(corpus), per_file)):
        hi = min(lo + per_file, len(corpus))
        pq.write_table(arrow_table(corpus, lo, hi), out / f"part-{k:05d}.parquet",
                       row_group_size=rows, compression=compression)
    return out


def write_mds(corpus: Corpus, out: Path, group_mb: float) -> Path:
    """`corpus` as an MDS dataset (zstd shards of `group_mb` MB)."""
    with MDSWriter(columns=corpus.columns, out=str(out), size_limit=int(group_mb * MB),
                   compression="zstd") as writer:
        for sample in corpus:
            writer.write(sample)
    return out


def epoch(stream: Stream, workers: int, shuffle: dict | None = None) -> dict:
    """One shuffled epoch through StreamingDataLoader: samples, seconds, first batch
    (`shuffle`: StreamingDataset's shuffle arguments, its defaults when None)."""
    start = time.perf_counter()
    ds = StreamingDataset(streams=[stream], shuffle=True, batch_size=BATCH, **(shuffle or {}))
    loader = StreamingDataLoader(ds, batch_size=BATCH, num_workers=workers)
    samples, first = 0, None
    for batch in loader:
        if first is None:
            first = time.perf_counter() - start
        samples += len(batch["id"])
    seconds = time.perf_counter() - start
    ds.close()
    return {"samples": samples, "seconds": seconds, "first": first or seconds}


def decode_only(folder: Path) -> float:
    """Seconds to read every row group of the Parquet files in `folder` (pyarrow, file order)
    and turn each column into Python values as a sample holds them."""
    start = time.perf_counter()
    for path in sorted(folder.glob("*.parquet")):
        parquet = pq.ParquetFile(path)
        for group in range(parquet.num_row_groups):
            _python_values(parquet.read_row_group(group, use_threads=False))
    return time.perf_counter() - start


def _python_values(table: pa.Table) -> None:
    """Each column of `table` as the Python values a sample holds (then dropped)."""
    for column in table.columns:
        array = column.combine_chunks()
        if pa.types.is_list(array.type):
            values = array.values.to_numpy()
            offsets = array.offsets.to_numpy()
            [values[a:b] for a, b in zip(offsets[:-1].tolist(), offsets[1:].tolist())]
        else:
            array.to_pylist()


def run(kind: str, remote: str | list[str], workers: int, scratch: Path,
        shuffle: dict | None = None) -> dict:
    cache = Path(tempfile.mkdtemp(dir=scratch))
    try:
        fmt = {"format": "parquet"} if kind != "mds" else {}
        return epoch(Stream(remote=remote, local=cache, **fmt), workers, shuffle)
    finally:
        shutil.rmtree(cache, ignore_errors=True)


def peer_run(peer: str, location: str, workers: int, scratch: Path) -> dict | None:
    """One epoch of `peer` (a key of PEERS) over the Parquet files at `location` (a folder or
    an s3:// URL; the endpoint and credentials go in the environment), in its venv (None when
    the venv is missing or the run fails: reported, not fatal)."""
    venv, script = PEERS[peer]
    python = VENVS / venv / "bin" / "python"
    if not python.exists():
        print(f"  {peer}: no venv at {python.parent.parent} (benchmarks/peers/setup.sh)")
        return None
    cache = Path(tempfile.mkdtemp(dir=scratch))
    try:
        ran = subprocess.run([str(python), str(ROOT / "benchmarks" / "peers" / script),
                              location, "--workers", str(workers), "--batch", str(BATCH),
                              *(["--cache", str(cache)] if venv == "litdata" else [])],
                             capture_output=True, text=True, timeout=1800, check=False)
    except subprocess.TimeoutExpired:
        print(f"  {peer} failed: no epoch within 1,800 s")
        return None
    finally:
        shutil.rmtree(cache, ignore_errors=True)
    if ran.returncode:
        print(f"  {peer} failed: {ran.stderr.strip().splitlines()[-1:]}")
        return None
    return json.loads(ran.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", choices=("tokens", "blobs", "both"), default="both")
    parser.add_argument("--where", choices=("local", "s3", "both"), default="both")
    parser.add_argument("--workers", type=int, nargs="+", default=[0, 2])
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--scale", type=float, default=1.0)
    parser.add_argument("--peers", action="store_true",
                        help="also LitData and Hugging Face datasets (each in its own venv)")
    parser.add_argument("--block", type=int, default=None,
                        help="shuffle_block_size of the MDS and Parquet epochs (default: "
                             "the dataset's, fitted to the decoded row groups' room)")
    parser.add_argument("--group-mb", type=float, default=GROUP_MB,
                        help="payload MB per row group and per MDS shard")
    args = parser.parse_args()
    corpora = {"tokens": lambda: token_corpus(int(20_000 * args.scale), mean_tokens=500),
               "blobs": lambda: blob_corpus(int(600 * args.scale))}
    names = list(corpora) if args.corpus == "both" else [args.corpus]
    block = None if args.block is None else {"shuffle_block_size": args.block}
    wheres = ["local", "s3"] if args.where == "both" else [args.where]
    target = None
    if "s3" in wheres:
        from _targets import S3Target

        target = S3Target()
        os.environ.update(target.env)
    root = Path(tempfile.mkdtemp(prefix="bench-parquet-"))
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs; scale "
          f"{args.scale}, rounds {args.rounds}")
    try:
        for name in names:
            corpus = corpora[name]()
            mb = args.group_mb
            folders = {"mds": write_mds(corpus, root / name / "mds", mb),
                       "parquet zstd": write_parquet(corpus, root / name / "zstd", "zstd", mb),
                       "parquet snappy": write_parquet(corpus, root / name / "snappy", "snappy",
                                                       mb)}
            sizes = {k: sum(p.stat().st_size for p in f.rglob("*") if p.is_file()) / MB
                     for k, f in folders.items()}
            print(f"\n{name}: {len(corpus)} samples, {corpus.nbytes / MB:.0f} MB payload; "
                  + ", ".join(f"{k} {v:.0f} MB" for k, v in sizes.items()))
            floor = statistics.median(decode_only(folders["parquet zstd"])
                                      for _ in range(max(args.rounds, 3)))
            print(f"  decode only (pyarrow, zstd files in order, Python values) "
                  f"{len(corpus) / floor:9.0f} samples/s")
            for where in wheres:
                remotes = {k: str(f) for k, f in folders.items()}
                if where == "s3":
                    assert target is not None
                    for k, f in folders.items():
                        prefix = f"{name}/{k.replace(' ', '-')}"
                        for path in sorted(f.rglob("*")):
                            # not the index.json LitData left in the local folder: each peer
                            # indexes the objects itself
                            if path.is_file() and (k == "mds" or path.suffix == ".parquet"):
                                target.put(path, f"{prefix}/{path.relative_to(f).as_posix()}")
                        remotes[k] = target.url(prefix)
                span = {"shuffle_algo": "py1br", "shuffle_block_size": pq.ParquetFile(
                    next(folders["parquet zstd"].glob("*.parquet"))).metadata.num_rows}
                for workers in args.workers:
                    results: dict[str, list[dict]] = {k: [] for k in [*folders, SPAN]}
                    peers: dict[str, list[dict]] = {peer: [] for peer in PEERS}
                    for _ in range(args.rounds):
                        for k in folders:
                            results[k].append(run(k.split()[0], remotes[k], workers, root,
                                                  block))
                        results[SPAN].append(run("parquet", remotes["parquet zstd"], workers,
                                                 root, span))
                        for peer in PEERS if args.peers else ():
                            found = peer_run(peer, remotes["parquet zstd"], workers, root)
                            peers[peer] += [found] if found else []
                    report(name, where, workers, results, len(corpus))
                    for peer, runs in peers.items():
                        if runs:
                            report_peer(peer, runs, results, len(corpus))
                    print(f"  {'':5s} load average {os.getloadavg()[0]:.1f}")
    finally:
        shutil.rmtree(root, ignore_errors=True)
        if target is not None:
            target.stop()


def report(name: str, where: str, workers: int, results: dict[str, list[dict]],
           samples: int) -> None:
    """One line per format: samples/s, first batch, time against the MDS copy's."""
    med = {k: {key: statistics.median(r[key] for r in runs) for key in ("seconds", "first")}
           for k, runs in results.items()}
    for k, runs in results.items():
        assert all(r["samples"] == samples for r in runs), (k, runs)
        ratio = med[k]["seconds"] / med["mds"]["seconds"]
        versus = f"time vs MDS x{ratio:.2f}" if k != SPAN else "(shuffled as LitData does)"
        label = f"{where:5s} workers={workers}" if k != SPAN else ""
        print(f"  {label:17s}  {k:15s} {samples / med[k]['seconds']:9.0f} "
              f"samples/s  first batch {med[k]['first']:6.2f} s  {versus}")


def report_peer(peer: str, runs: list[dict], results: dict[str, list[dict]],
                samples: int) -> None:
    """A peer's median epoch over the same zstd files, and ours against it: with our default
    shuffle, and shuffled within a file's rows (LitData's span)."""
    theirs = statistics.median(r["seconds"] for r in runs)
    mine = statistics.median(r["seconds"] for r in results["parquet zstd"])
    spanned = statistics.median(r["seconds"] for r in results[SPAN])
    first = statistics.median(r["first"] for r in runs)
    if any(r["samples"] != samples for r in runs):
        print(f"  {peer} served {[r['samples'] for r in runs]} samples, not {samples}")
    print(f"  {'':17s}  {peer:15s} {samples / theirs:9.0f} samples/s  "
          f"first batch {first:6.2f} s  ours (Parquet zstd) x{theirs / mine:.2f} its speed, "
          f"x{theirs / spanned:.2f} within a file")


if __name__ == "__main__":
    main()
