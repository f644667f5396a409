"""Shared helpers for the cache integration tests: an MDS dataset in a moto bucket, an engine over
it, and a reader that checks every sample (importable by spawned processes)."""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections.abc import Iterator
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
from writers.mds import MDSWriter

COLUMNS = {"id": "int", "text": "str", "blob": "bytes"}


def write_dataset(out: Path, samples: int, *, size_limit: int = 16_000,
                  compression: str | None = "zstd") -> None:
    """Compressible samples whose `id` column equals their global sample id."""
    rng = np.random.default_rng(0)
    with MDSWriter(columns=COLUMNS, out=str(out), compression=compression,
                   size_limit=size_limit, hashes=["xxh64", "sha1"]) as writer:
        for i in range(samples):
            words = " ".join(f"w{int(x)}" for x in rng.integers(0, 50, 40))
            writer.write({"id": i, "text": words, "blob": bytes(rng.integers(0, 4, 200,
                                                                           np.uint8))})


def engine_source(tmp_path_factory, samples: int = 600) -> Path:
    """A small zstd dataset of many shards (~8 kB each) for engine tests, in a fresh folder."""
    src = tmp_path_factory.mktemp("src")
    write_dataset(src, samples, size_limit=8_000)
    return src


def upload_dir(client, bucket: str, prefix: str, folder: Path) -> None:
    for path in sorted(folder.iterdir()):
        client.upload_file(str(path), bucket, f"{prefix}/{path.name}")


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


@contextlib.contextmanager
def peak_size(folder: Path, every: float = 0.002) -> Iterator[list[int]]:
    """Watch `cache_bytes(folder)` from a thread every `every` s; yields [largest seen]."""
    peak, stop = [0], threading.Event()

    def poll() -> None:
        while not stop.is_set():
            with contextlib.suppress(FileNotFoundError):  # not made yet: nothing held
                peak[0] = max(peak[0], cache_bytes(folder))
            time.sleep(every)

    poller = threading.Thread(target=poll, daemon=True)
    poller.start()
    try:
        yield peak
    finally:
        stop.set()
        poller.join()


def cache_bytes(folder: Path) -> int:
    """What a user's `du` of the cache folder sees: the sum of the sizes of its files."""
    total = 0
    for entry in os.scandir(folder):
        try:
            if entry.is_file(follow_symlinks=False):
                total += entry.stat(follow_symlinks=False).st_size
        except FileNotFoundError:
            pass
    return total


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
