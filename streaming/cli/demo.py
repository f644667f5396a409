"""`python -m streaming.cli.demo`: write token corpora as MDS, read them back, then stream a
weighted mix of two sources with shuffling and 2 DataLoader workers, stop half-way and resume
exactly.

Shows the whole local path in well under a minute: MDSWriter -> shards + index.json ->
LocalDataset -> StreamingDataset + StreamingDataLoader (mixing, resumption), with the sizes,
speeds and shares involved.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import numpy as np

from streaming.dataset.local_dataset import LocalDataset
from streaming.dataset.streaming_dataset import StreamingDataset
from streaming.loader.dataloader import StreamingDataLoader
from streaming.packing.precomputed import PackedDataset
from streaming.stream import Stream
from writers.mds import MDSWriter

COLUMNS = {"id": "int", "text": "str", "tokens": "ndarray:int32"}
_WORDS = ["the", "quick", "brown", "fox", "jumps", "over", "a", "lazy", "dog", "while", "shards"]


def synthetic_samples(count: int, seed: int = 0, first_id: int = 0):
    """Token samples of lognormal length (mean ~1,000) with a short caption and an id."""
    rng = np.random.default_rng(seed)
    lengths = np.maximum(rng.lognormal(np.log(1000) - 0.18, 0.6, count).astype(int), 16)
    for i, length in enumerate(lengths):
        tokens = (rng.random(length, dtype=np.float32) ** 3 * 50_257).astype(np.int32)
        caption = " ".join(rng.choice(_WORDS, 6))
        yield {"id": first_id + i, "text": caption, "tokens": tokens}


def say(what: str) -> None:
    """Say what the demo does next, before it does it (each step takes a second or two)."""
    print(f"... {what}", flush=True)


def run(directory: Path, samples: int, size_limit: str) -> None:
    """Write, then read back, printing what happened."""
    out = directory / "tokens"
    say(f"[1/3] writing {samples:,} synthetic token samples as zstd MDS shards")
    corpus = list(synthetic_samples(samples))  # generated up front so it is not timed
    start = time.perf_counter()
    with MDSWriter(columns=COLUMNS, out=out, compression="zstd", size_limit=size_limit,
                   lengths="tokens") as writer:
        for sample in corpus:
            writer.write(sample)
    write_s = time.perf_counter() - start

    say("[2/3] reading them back, then packing them into 8192-token sequences")
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


SOURCES = {"web": (0.75, 0), "code": (0.25, 1_000_000)}  # name: (proportion, first id)
BATCH = 32


def _ids(batch) -> np.ndarray:
    return np.asarray(batch["id"]).reshape(-1)


def _loader(streams: list[Stream], **kwargs) -> StreamingDataLoader:
    dataset = StreamingDataset(streams=streams, shuffle=True, batch_size=BATCH, **kwargs)
    return StreamingDataLoader(dataset, batch_size=BATCH, num_workers=2)


def run_streaming(directory: Path, samples: int, size_limit: str) -> bool:
    """Mix two sources 75/25, stream one epoch, then stop half-way and resume; True if exact."""
    print()
    say("[3/3] writing two sources, streaming a 75/25 mix of them with 2 DataLoader workers, "
         "then stopping half-way and resuming")
    streams = []
    for seed, (name, (proportion, first_id)) in enumerate(SOURCES.items(), start=1):
        out = directory / name
        count = samples if name == "web" else samples // 2
        with MDSWriter(columns=COLUMNS, out=out, compression="zstd",
                       size_limit=size_limit) as writer:
            for sample in synthetic_samples(count, seed=seed, first_id=first_id):
                writer.write(sample)
        streams.append(Stream(local=str(out), proportion=proportion, name=name))

    start = time.perf_counter()
    full = [_ids(batch) for batch in _loader(streams)]
    epoch_s = time.perf_counter() - start
    order = np.concatenate(full)
    web = float(np.mean(order < SOURCES["code"][1]))

    half = len(full) // 2
    first = _loader(streams)
    seen = []
    for step, batch in enumerate(first):
        seen.append(_ids(batch))
        if step + 1 == half:
            state = first.state_dict()
            break
    del first
    second = _loader(streams)
    second.load_state_dict(state)
    rest = [_ids(batch) for batch in second]
    resumed = np.concatenate(seen + rest)
    exact = bool(len(resumed) == len(order) and np.array_equal(resumed, order))

    print("streaming        2 sources, proportions web 0.75 / code 0.25, shuffle py1e, "
          f"batch {BATCH}, 2 DataLoader workers")
    print(f"epoch            {len(order):,} samples in {len(full)} batches, "
          f"{len(order) / epoch_s:,.0f} samples/s (incl. worker start-up)")
    print(f"shares           web {web:.1%}  code {1 - web:.1%}")
    print(f"resume           stopped after {half} batches "
          f"(state: epoch {state.get('epoch')}, sample_in_epoch {state.get('sample_in_epoch')}), "
          f"resumed {len(rest)} more batches")
    verdict = "exactly: same samples, same order, no duplicate, no gap" if exact else "NOT exactly"
    print(f"continued        {verdict}")
    return exact


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=5000)
    parser.add_argument("--size-limit", default="4mb")
    parser.add_argument("--keep", type=Path, help="write here instead of a temporary folder")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="mds-demo-") as tmp:
        where = args.keep if args.keep is not None else Path(tmp)
        run(where, args.samples, args.size_limit)
        exact = run_streaming(where / "mix", args.samples, args.size_limit)
    if not exact:
        raise SystemExit("resumption did not continue exactly")


if __name__ == "__main__":
    main()
