"""`python -m streaming.demo`: write a small token corpus as zstd MDS shards and read it back.

Shows the whole local round trip in a few seconds: MDSWriter -> shards + index.json ->
LocalDataset, with the sizes and speeds involved.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import numpy as np

from streaming.local import LocalDataset
from streaming.packing.precomputed import PackedDataset
from writers.mds import MDSWriter

COLUMNS = {"id": "int", "text": "str", "tokens": "ndarray:int32"}
_WORDS = ["the", "quick", "brown", "fox", "jumps", "over", "a", "lazy", "dog", "while", "shards"]


def synthetic_samples(count: int, seed: int = 0):
    """Token samples of lognormal length (mean ~1,000) with a short caption and an id."""
    rng = np.random.default_rng(seed)
    lengths = np.maximum(rng.lognormal(np.log(1000) - 0.18, 0.6, count).astype(int), 16)
    for i, length in enumerate(lengths):
        tokens = (rng.random(length, dtype=np.float32) ** 3 * 50_257).astype(np.int32)
        caption = " ".join(rng.choice(_WORDS, 6))
        yield {"id": i, "text": caption, "tokens": tokens}


def run(directory: Path, samples: int, size_limit: str) -> None:
    """Write, then read back, printing what happened."""
    out = directory / "tokens"
    corpus = list(synthetic_samples(samples))  # generated up front so it is not timed
    start = time.perf_counter()
    with MDSWriter(columns=COLUMNS, out=out, compression="zstd", size_limit=size_limit,
                   lengths="tokens") as writer:
        for sample in corpus:
            writer.write(sample)
    write_s = time.perf_counter() - start

    ds = LocalDataset(out)
    raw = int(ds.index.raw_bytes.sum())
    packed = int(ds.index.zip_bytes.sum())
    start = time.perf_counter()
    tokens = sum(len(ds[i]["tokens"]) for i in range(len(ds)))
    first_read_s = time.perf_counter() - start  # includes decompressing every shard once
    start = time.perf_counter()
    for i in range(len(ds)):
        ds[i]
    read_s = time.perf_counter() - start

    mb = 1 << 20
    print(f"dataset          {out}")
    print(f"shards           {ds.index.num_shards} (size_limit {size_limit})")
    print(f"samples          {len(ds):,} ({tokens:,} tokens)")
    print(f"raw bytes        {raw / mb:,.1f} MB")
    print(f"zstd bytes       {packed / mb:,.1f} MB (ratio {raw / max(packed, 1):.2f})")
    print(f"write            {raw / mb / write_s:,.0f} MB/s raw ({write_s:.2f} s)")
    print(f"first read       {len(ds) / first_read_s:,.0f} samples/s (decompresses shards once)")
    print(f"read             {len(ds) / read_s:,.0f} samples/s, {raw / mb / read_s:,.0f} MB/s")
    sample = ds[-1]
    print(f"ds[-1]           id={sample['id']} text={sample['text']!r} "
          f"tokens={sample['tokens'][:5]}... ({len(sample['tokens'])} tokens)")
    packs = PackedDataset(ds, packing_length=8192, rank=0, num_ranks=1)
    print(f"packing          {len(packs):,} packs of 8192 tokens, fill "
          f"{packs.stats().fill_rate:.2%} (best_fit, lengths from the index)")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=5000)
    parser.add_argument("--size-limit", default="4mb")
    parser.add_argument("--keep", type=Path, help="write here instead of a temporary folder")
    args = parser.parse_args(argv)
    if args.keep is not None:
        run(args.keep, args.samples, args.size_limit)
        return
    with tempfile.TemporaryDirectory(prefix="mds-demo-") as tmp:
        run(Path(tmp), args.samples, args.size_limit)


if __name__ == "__main__":
    main()
