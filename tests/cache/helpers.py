"""Helpers for the cache tests: a small dataset for an engine, an engine over it, a reader that
checks every sample, and a rank of readers (importable by spawned processes)."""

from __future__ import annotations

import os
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from streaming.cache.engine.cache_engine import CacheEngine
from streaming.cache.prepare.preparer import ShardPreparer
from streaming.cache.shard_facts import ShardFacts
from streaming.format.index import read_index
from streaming.format.shard import ShardReader
from streaming.read.sample_locator import SampleLocator
from streaming.stream import Stream
from tests.support.datasets import write_dataset


def engine_source(tmp_path_factory, samples: int = 600) -> Path:
    """A small zstd dataset of many shards (~8 kB each) for engine tests, in a fresh folder."""
    src = tmp_path_factory.mktemp("src")
    write_dataset(src, samples, size_limit=8_000)
    return src


@dataclass
class Handle:
    stream: Stream
    preparer: ShardPreparer
    locator: SampleLocator
    codec: object
    facts: ShardFacts


def open_dataset(remote: str, local: str, *, retry: int = 2, timeout: float = 10.0,
                 validate_hash: str | None = None, keep_zip: bool = False) -> Handle:
    stream = Stream(remote=remote, local=local)
    stream.apply_defaults(download_retry=retry, download_timeout=timeout,
                          validate_hash=validate_hash, keep_zip=keep_zip)
    index = read_index(stream.index_file())
    facts = ShardFacts.from_indexes([index])
    return Handle(stream, ShardPreparer([stream], facts), SampleLocator(index.samples_per_shard),
                  index.codec(), facts)


def read_in_order(handle: Handle, engine: CacheEngine, ids: np.ndarray,
                  work: float = 0.0) -> int:
    """Read `ids` in order through `engine` (pin per shard run), checking each sample's id."""
    ids = ids[ids >= 0]
    shards, rows = handle.locator.locate(ids)
    engine.follow(shards)
    current, reader = -1, None
    try:
        for k, (shard, row) in enumerate(zip(shards.tolist(), rows.tolist())):
            if shard != current:
                if reader is not None:
                    reader.close()
                    engine.release(current)
                path = engine.acquire(shard)
                current = shard
                reader = ShardReader(path, handle.codec,
                                     expected_samples=int(handle.locator.samples_per_shard[shard]),
                                     expected_bytes=int(handle.facts.raw_bytes[shard]))
            sample = reader.get(row)
            if sample["id"] != ids[k]:
                raise AssertionError(f"sample {k}: id {sample['id']} != {ids[k]}")
            engine.advance(k)
            if work and k % 16 == 0:
                time.sleep(work)
    finally:
        if reader is not None:
            reader.close()
            engine.release(current)
        engine.stop()
    return len(ids)


def run_rank(env: dict, remote: str, local: str, rows: np.ndarray, limit: int | None,
             work: float) -> tuple[int, dict]:
    """One process (a rank): one thread per row of `rows`, each its own engine and reader."""
    os.environ.update(env)
    handle = open_dataset(remote, local)
    engines = [CacheEngine(handle.preparer, cache_limit=limit, predownload=64)
               for _ in range(len(rows))]
    counts = [0] * len(rows)
    errors: list[BaseException] = []

    def work_on(i: int) -> None:
        try:
            counts[i] = read_in_order(handle, engines[i], rows[i], work)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=work_on, args=(i,)) for i in range(len(rows))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    if errors:
        raise errors[0]
    stats = engines[0].stats().as_dict()
    for engine in engines:
        engine.close()
    return sum(counts), stats


def die_while_preparing(remote: str, local: str, shard: int) -> None:
    """Child process: claim a reader slot, start 'preparing' `shard` with a half-written temp
    file, then die without any clean-up (as a SIGKILLed DataLoader worker would)."""
    from streaming.cache.table import node_table as tb

    handle = open_dataset(remote, local)
    engine = CacheEngine(handle.preparer, cache_limit="1gb")
    table = engine.table
    with table.locked():
        table.state[shard] = tb.PREPARING
        table.owner[shard] = engine.slot.index + 1
        table.reserved[shard] = engine.footprint.download_cost(shard)
    raw = handle.preparer.raw_path(shard)
    zip_name = handle.facts.zip_basenames[shard] or raw.name
    (raw.parent / f".{zip_name}.{os.getpid()}.dead.tmp").write_bytes(b"x" * 1000)
    os._exit(0)
