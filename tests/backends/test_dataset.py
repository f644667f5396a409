"""StreamingDataset and the writers over every object store (S3, GCS, Azure, HTTP), the same
suite for each: a mixed remote + local epoch equals the local one, a quarter-size cache_limit
holds on disk, one fault in five requests changes no sample, a missing or stalled shard fails
within the download deadline, a corrupt object is caught by its hash, and what MDSWriter,
convert and merge-index publish reads back exactly."""

from __future__ import annotations

import json
import time
from pathlib import Path

import numpy as np
import pytest

from streaming import StreamingDataLoader, StreamingDataset
from streaming.cli.main import main as cli_main
from streaming.errors import (
    DownloadTimeoutError,
    HashMismatchError,
    ObjectNotFoundError,
)
from streaming.format.index import merge_index, read_index
from streaming.stream import Stream
from tests.support.datasets import write_dataset, write_ids
from tests.support.epochs import (
    assert_epoch_fails,
    loader_epoch,
    raw_bytes,
    watched_epoch,
    whole_sample,
)
from writers.convert import convert
from writers.mds import MDSWriter

pytestmark = pytest.mark.slow

SAMPLES = 800
COLUMNS = {"id": "int", "text": "str", "tokens": "ndarray:int32"}


@pytest.fixture(scope="session")
def local_copies(tmp_path_factory) -> tuple[Path, Path]:
    """`big` (zstd, ~30 shards, ids 0..SAMPLES-1) and `ids` (zstd, sha1, ids from 10_000)."""
    root = tmp_path_factory.mktemp("backend-src")
    big, ids = root / "big", root / "ids"
    write_dataset(big, SAMPLES, size_limit=12_000)
    write_ids(ids, 200, start=10_000, compression="zstd", hashes=["sha1"])
    return big, ids


@pytest.fixture(scope="session")
def published(store, local_copies) -> str:
    """A bucket of the store holding both datasets under `big/` and `ids/`."""
    space = store.space()
    store.put_dir(space, "big", local_copies[0])
    store.put_dir(space, "ids", local_copies[1])
    return space


def test_mixed_remote_and_local_epoch_equals_the_local_one(store_env, published, local_copies,
                                                           tmp_path):
    big, ids = local_copies
    mixed = [Stream(remote=store_env.url(published, "big"), local=tmp_path / "c_big"),
             Stream(local=ids),
             Stream(remote=store_env.url(published, "ids"), local=tmp_path / "c_ids")]
    local = [Stream(local=big), Stream(local=ids), Stream(local=ids)]
    config = dict(batch_size=16, shuffle=True, shuffle_seed=5, num_canonical_nodes=1,
                  shuffle_block_size=1 << 18)
    got = loader_epoch(StreamingDataset(streams=mixed, **config), workers=2)
    want = loader_epoch(StreamingDataset(streams=local, **config), workers=2)
    assert got == want
    assert sorted(set(got)) == sorted([*range(SAMPLES), *range(10_000, 10_200)])


def test_quarter_cache_limit_is_never_exceeded(store_env, published, local_copies, tmp_path):
    big = local_copies[0]
    cache, limit = tmp_path / "cache", raw_bytes(big) // 4
    ds = StreamingDataset(remote=store_env.url(published, "big"), local=str(cache),
                          cache_limit=limit, batch_size=16, shuffle=True, predownload=64)
    seen, peak, stats = watched_epoch(ds, cache)
    assert sorted(seen) == list(range(SAMPLES))
    assert 0 < peak <= limit
    assert stats.evictions > 0, stats


def test_one_fault_in_five_requests_changes_no_sample(store_env, published, local_copies,
                                                      proxy_for, tmp_path):
    proxy = proxy_for(rate=0.2, seed=11, stall_seconds=2.0)  # 500, 503, reset, stall, truncate
    config = dict(batch_size=16, shuffle=True, shuffle_seed=3, num_canonical_nodes=1)
    remote = StreamingDataset(remote=store_env.url(published, "big", via=proxy),
                              local=str(tmp_path / "cache"), download_retry=6,
                              download_timeout=0.5, validate_hash="xxh64", **config)
    got = loader_epoch(remote, 2, whole_sample)
    want = loader_epoch(StreamingDataset(local=str(local_copies[0]), **config), 2, whole_sample)
    assert got == want and len(got) == SAMPLES
    assert sum(proxy.injected.values()) > 0, proxy.injected


@pytest.mark.parametrize("how", ["absent", "stalled"])
def test_an_unavailable_shard_fails_within_the_download_deadline(store_env, local_copies,
                                                                 proxy_for, tmp_path, how):
    big = local_copies[0]
    victim = read_index(big / "index.json").zip_basenames[3]
    space = store_env.space()
    store_env.put_dir(space, "holey", big, skip=(victim,) if how == "absent" else ())
    proxy = proxy_for(fail_keys=[victim], fail_with="stall", stall_seconds=30.0) \
        if how == "stalled" else None
    timeout, retry = 1.0, 1
    ds = StreamingDataset(remote=store_env.url(space, "holey", via=proxy),
                          local=str(tmp_path / "c"), download_timeout=timeout,
                          download_retry=retry, batch_size=16)
    wanted = ObjectNotFoundError if how == "absent" else DownloadTimeoutError
    start = time.monotonic()
    assert_epoch_fails(ds, ds, wanted, victim)
    took = time.monotonic() - start
    assert took < timeout * (retry + 1) + 5.0, took


def test_a_corrupted_object_is_caught_by_its_hash(store_env, local_copies, tmp_path):
    ids = local_copies[1]
    victim = read_index(ids / "index.json").zip_basenames[2]
    space = store_env.space()
    store_env.put_dir(space, "bad", ids, skip=(victim,))
    body = bytearray((ids / victim).read_bytes())
    body[len(body) // 2] ^= 0xFF
    store_env.put(space, f"bad/{victim}", bytes(body))
    ds = StreamingDataset(remote=store_env.url(space, "bad"), local=str(tmp_path / "c"),
                          validate_hash="sha1", batch_size=16)
    assert_epoch_fails(ds, StreamingDataLoader(ds, batch_size=16, num_workers=2),
                       HashMismatchError, victim)


def _rows(n: int, seed: int = 0) -> list[dict]:
    rng = np.random.default_rng(seed)
    return [{"id": i, "text": f"row {i} " * int(rng.integers(1, 12)),
             "tokens": rng.integers(0, 50_000, int(rng.integers(1, 40)), dtype=np.int32)}
            for i in range(n)]


def _write(out, rows: list[dict]) -> None:
    with MDSWriter(columns=COLUMNS, out=out, size_limit=4096, compression="zstd",
                   hashes=["xxh64"]) as writer:
        for row in rows:
            writer.write(row)


def _plain(row: dict) -> dict:
    return {k: v.tolist() if isinstance(v, np.ndarray) else v for k, v in row.items()}


def _read_back(url: str, local: Path) -> list[dict]:
    ds = StreamingDataset(remote=url, local=str(local))
    try:
        return [_plain(ds[i]) for i in range(ds.num_samples)]
    finally:
        ds.close()


def _files(folder: Path) -> dict[str, bytes]:
    return {p.relative_to(folder).as_posix(): p.read_bytes()
            for p in sorted(folder.rglob("*")) if p.is_file() and not p.name.startswith(".")}


def test_writer_output_reads_back_exactly(store_env, tmp_path):
    rows = _rows(300)
    _write(tmp_path / "local", rows)
    space = store_env.space()
    if store_env.writable:
        _write(store_env.url(space, "written"), rows)
    else:  # read-only: publish by writing locally and serving the folder
        store_env.put_dir(space, "written", tmp_path / "local")
    assert store_env.read_dir(space, "written") == _files(tmp_path / "local")
    got = _read_back(store_env.url(space, "written"), tmp_path / "cache")
    assert got == list(map(_plain, rows))


def test_convert_and_merge_index_output_reads_back_exactly(store_env, tmp_path):
    if not store_env.writable:
        pytest.skip("http(s) URLs are read-only (publishing is covered by the writer test)")
    rows = _rows(200, seed=1)
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text("".join(json.dumps({"id": r["id"], "text": r["text"]}) + "\n"
                              for r in rows))
    space = store_env.space()
    convert(corpus, tmp_path / "converted", size_limit=4096, progress=False)
    convert(corpus, store_env.url(space, "converted"), size_limit=4096, progress=False)
    local_index = (tmp_path / "converted" / "index.json").read_bytes()
    assert store_env.read_dir(space, "converted")["index.json"] == local_index
    got = _read_back(store_env.url(space, "converted"), tmp_path / "c1")
    assert got == [{"id": r["id"], "text": r["text"]} for r in rows]

    for part, chunk in enumerate((rows[:120], rows[120:])):
        _write(tmp_path / "parts" / f"part{part}", chunk)
        _write(store_env.url(space, f"parts/part{part}"), chunk)
    assert cli_main(["merge-index", store_env.url(space, "parts")]) == 0
    merged = merge_index(tmp_path / "parts")
    assert store_env.read_dir(space, "parts")["index.json"] == merged.read_bytes()
    assert _read_back(store_env.url(space, "parts"), tmp_path / "c2") == list(map(_plain, rows))
