"""A Parquet stream in training: mixed with an MDS stream by proportion, resumed mid-epoch
exactly through StreamingDataLoader's state with two workers, read under a cache_limit (from
S3; a local folder, read in place, takes no room under one), and packed by a token column's
lengths."""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

import pytest

from streaming import PackedStreamingDataset, StreamingDataLoader, StreamingDataset
from streaming.errors import CacheLimitError
from streaming.stream import Stream
from tests.parquet.helpers import assert_sample, tokens_of, write_files
from tests.support.datasets import write_ids
from tests.support.epochs import watched_epoch
from tests.support.loaders import take

pytestmark = pytest.mark.timeout(120)
ROWS = 4 * 250


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("pq")
    write_files(folder, files=4, rows=250, row_group=40)
    return folder


@pytest.fixture
def s3_corpus(corpus: Path, s3_env) -> str:
    """The corpus's files in a fresh bucket of the test S3 server."""
    bucket = s3_env.make_bucket()
    client = s3_env.client()
    for path in sorted(corpus.glob("*.parquet")):
        client.put_object(Bucket=bucket, Key=f"pq/{path.name}", Body=path.read_bytes())
    return f"s3://{bucket}/pq"


def ids_of(samples: list[dict]) -> list[int]:
    """A batch of samples of two schemas as their ids."""
    return [int(sample["id"]) for sample in samples]


def parquet(corpus: Path | str, cache: Path, **options) -> Stream:
    return Stream(remote=corpus, local=cache, format="parquet", **options)


def test_mixed_with_an_mds_stream_by_proportion(corpus: Path, tmp_path: Path) -> None:
    mds = write_ids(tmp_path / "mds", 500, start=10_000)
    ds = StreamingDataset(streams=[parquet(corpus, tmp_path / "c", proportion=0.75),
                                   Stream(local=mds, proportion=0.25)],
                          epoch_size=800, shuffle=True, batch_size=8)
    seen = Counter()
    for sample in ds:
        if sample["id"] >= 10_000:
            seen["mds"] += 1
        else:
            assert_sample(sample)
            seen["parquet"] += 1
    assert seen == {"parquet": 600, "mds": 200}


@pytest.mark.parametrize("method", ["random", "per_stream", "stratified", "device_per_stream"])
def test_every_batching_method_serves_rows_once(corpus: Path, tmp_path: Path,
                                                method: str) -> None:
    mds = write_ids(tmp_path / "mds", 250, start=10_000)
    ds = StreamingDataset(streams=[parquet(corpus, tmp_path / "c", columns=["id"]),
                                   Stream(local=mds)],
                          shuffle=True, batch_size=10, batching_method=method)
    ids = [int(s["id"]) for s in ds]
    assert len(ids) == len(set(ids)) == len(ds)
    assert set(ids) <= {*range(ROWS), *range(10_000, 10_250)}
    if method in ("random", "per_stream"):  # the others drop what does not fill a batch
        assert sorted(ids) == [*range(ROWS), *range(10_000, 10_250)]


def test_loader_resumes_mid_epoch_exactly_with_two_workers(corpus: Path, tmp_path: Path) -> None:
    def loader() -> StreamingDataLoader:
        ds = StreamingDataset(streams=[parquet(corpus, tmp_path / "c",
                                               columns=["id", "tokens"])],
                              shuffle=True, shuffle_seed=7, batch_size=8)
        return StreamingDataLoader(ds, batch_size=8, num_workers=2)

    whole = [i for batch in loader() for i in batch["id"].tolist()]
    assert sorted(whole) == list(range(ROWS))
    seen, state = take(loader(), 30)
    assert state["sample_in_epoch"] == 240
    fresh = loader()
    fresh.load_state_dict(state)
    rest = [i for batch in fresh for i in batch["id"].tolist()]
    assert seen + rest == whole


def test_under_a_cache_limit(s3_corpus: str, tmp_path: Path) -> None:
    corpus = s3_corpus
    cache = tmp_path / "c"
    stream = parquet(corpus, cache, columns=["id", "tokens"])
    probe = StreamingDataset(streams=[stream], batch_size=16)
    biggest = int(probe.catalog.facts.raw_bytes.max())
    total = int(probe.catalog.facts.raw_bytes.sum())
    probe.close()
    with pytest.raises(CacheLimitError) as refused:  # the limit under which it refuses to run
        StreamingDataset(streams=[parquet(corpus, cache, columns=["id", "tokens"])],
                         batch_size=16, shuffle=True, cache_limit=biggest)
    minimum = int(re.search(r"needs at least (\d+) bytes", str(refused.value)).group(1))
    limit = minimum + 2 * biggest  # room to prefetch, far less than the row groups in all
    assert 2 * biggest < total / 8
    ds = StreamingDataset(streams=[parquet(corpus, cache, columns=["id", "tokens"])],
                          batch_size=16, shuffle=True, cache_limit=limit)
    seen, peak, stats = watched_epoch(ds, cache)
    assert sorted(seen) == list(range(ROWS))
    assert peak <= limit
    assert stats.evictions > 0


def test_packed_by_a_token_columns_lengths(corpus: Path, tmp_path: Path) -> None:
    ds = PackedStreamingDataset(streams=[parquet(corpus, tmp_path / "c",
                                                         columns=["id", "tokens"])],
                                packing_length=64, packs_per_batch=2, shuffle=True, batch_size=2)
    ids: list[int] = []
    for batch in ds:
        assert (batch["pack_lengths"] <= 64).all()
        ids += batch["sample_ids"].tolist()
    assert sorted(ids) == list(range(ROWS))
    tokens = sum(len(tokens_of(i)) for i in range(ROWS))
    assert tokens > 0


@pytest.mark.parametrize("stop", [0, 6])
def test_elastic_resume_keeps_the_global_batches(corpus: Path, tmp_path: Path, stop: int
                                                 ) -> None:
    """A state saved on 2 nodes x 2 ranks (batch 4 each) resumes on 1 node x 2 ranks (batch 8)
    with the same global batches, as for an MDS stream."""
    from streaming.plan import World
    from tests.dataset.test_elastic_batches import planned_batches

    def global_batches(nodes: int, batch: int, state: dict) -> list[list[int]]:
        def make(world: World) -> StreamingDataset:
            ds = StreamingDataset(streams=[parquet(corpus, tmp_path / "c", columns=["id"])],
                                  shuffle=True, batch_size=batch, world=world)
            assert all(ds[i]["id"] == i for i in (0, 249, 250, ROWS - 1))
            return ds

        return planned_batches(make, nodes, batch, state)

    two = StreamingDataset(streams=[parquet(corpus, tmp_path / "c", columns=["id"])],
                           shuffle=True, batch_size=4, world=World(2, 2, 1, 0, 0, 0, 1))
    state = two.state_dict(stop * 16, False)
    two.close()
    same, smaller = global_batches(2, 4, state), global_batches(1, 8, state)
    assert same == smaller
    assert len(same) == ROWS // 16 - stop


def test_a_local_folder_read_in_place_takes_no_room_under_a_cache_limit(
        corpus: Path, tmp_path: Path, recwarn) -> None:
    """Files on a filesystem are read where they lie: a cache_limit far below the corpus
    neither refuses it nor narrows its shuffle, nothing is evicted, and nothing counts as
    downloaded (the column chunks decoded count as read from disk)."""
    ds = StreamingDataset(streams=[parquet(corpus, tmp_path / "c", columns=["id"])],
                          batch_size=10, shuffle=True, cache_limit=1 << 10)
    loader = StreamingDataLoader(ds, batch_size=10, num_workers=2, collate_fn=ids_of)
    assert sorted(i for batch in loader for i in batch) == list(range(ROWS))
    metrics = loader.metrics()
    assert metrics["cache/downloads"] == metrics["cache/bytes_downloaded"] == 0
    assert metrics["cache/evictions"] == 0
    assert metrics["disk/bytes_read"] > 0
    assert not [w for w in recwarn if "shuffle block" in str(w.message)]


def test_loader_metrics_count_a_parquet_stream(s3_corpus: str, tmp_path: Path) -> None:
    corpus = s3_corpus
    mds = write_ids(tmp_path / "mds", 300, start=10_000)
    ds = StreamingDataset(streams=[parquet(corpus, tmp_path / "c", columns=["id"],
                                           proportion=0.5),
                                   Stream(remote=mds, local=tmp_path / "m", proportion=0.5)],
                          epoch_size=400, batch_size=10, shuffle=True)
    loader = StreamingDataLoader(ds, batch_size=10, num_workers=2, collate_fn=ids_of)
    ids = [i for batch in loader for i in batch]
    metrics = loader.metrics()
    assert metrics["stream/0/samples"] == sum(i < 10_000 for i in ids) == 200
    assert metrics["stream/1/samples"] == 200
    groups = sorted((tmp_path / "c").glob("*.rg*"))
    assert metrics["cache/downloads"] >= len(groups) > 0
    assert metrics["cache/bytes_downloaded"] >= sum(p.stat().st_size for p in groups)


def test_disk_bytes_read_counts_the_row_groups_decoded(corpus: Path, tmp_path: Path) -> None:
    """Every row group is decoded at least once, by some worker: the bytes its column chunks
    hold are counted as read from disk."""
    ds = StreamingDataset(streams=[parquet(corpus, tmp_path / "c", columns=["id"])],
                          batch_size=10, shuffle=True)
    loader = StreamingDataLoader(ds, batch_size=10, num_workers=2, collate_fn=ids_of)
    assert sorted(i for batch in loader for i in batch) == list(range(ROWS))
    projected = int(ds.catalog.facts.raw_bytes.sum())  # the row groups' projected chunks
    assert loader.metrics()["disk/bytes_read"] >= projected > 0


def test_a_dataset_wide_validate_hash_leaves_the_parquet_stream_alone(corpus: Path,
                                                                      tmp_path: Path) -> None:
    mds = write_ids(tmp_path / "mds", 100, start=10_000, hashes=["xxh64"])
    ds = StreamingDataset(streams=[parquet(corpus, tmp_path / "c", columns=["id"]),
                                   Stream(remote=mds, local=tmp_path / "m")],
                          batch_size=10, validate_hash="xxh64")
    assert sorted(int(s["id"]) for s in ds) == [*range(ROWS), *range(10_000, 10_100)]
