"""Loader metrics beyond the meter on known runs: the bytes read from local disk equal the raw
sizes of the samples read (in DataLoader workers too), and a packed dataset's fill rate and
sequences per pack equal those of the packs the loop took (known lengths give known values)."""

from __future__ import annotations

import pickle
from pathlib import Path

import numpy as np
import pytest

from streaming import StreamingDataLoader, StreamingDataset
from streaming.packing.streaming import PackedStreamingDataset
from writers.mds import MDSWriter

N = 300
BLOB = 40  # sample i carries i % BLOB bytes


@pytest.fixture(scope="module")
def blobs(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("blobs")
    with MDSWriter(columns={"id": "int", "blob": "bytes"}, out=out, size_limit=2000) as w:
        for i in range(N):
            w.write({"id": i, "blob": bytes(i % BLOB)})
    return out


def raw_sizes(ids: range | list[int] = range(N)) -> int:
    """Raw bytes of samples `ids`: a u32 length for the one variable column, 8 for the int."""
    return sum(4 + 8 + i % BLOB for i in ids)


def shard_sizes(folder: Path) -> int:
    """The same from the shards' offset tables (MDS_FORMAT.md)."""
    total = 0
    for shard in folder.glob("shard.*.mds"):
        head = np.fromfile(shard, np.uint32, 1)
        offsets = np.fromfile(shard, np.uint32, int(head[0]) + 2)[1:]
        total += int(offsets[-1] - offsets[0])
    return total


def test_a_known_run_reads_the_known_bytes(blobs):
    assert shard_sizes(blobs) == raw_sizes()
    ds = StreamingDataset(local=str(blobs), batch_size=10, shuffle=True)
    loader = StreamingDataLoader(ds, batch_size=10)
    for _ in range(2):
        assert sum(len(b["id"]) for b in loader) == N
    m = loader.metrics()
    assert m["disk/bytes_read"] == 2 * raw_sizes() and m["disk/rows_read"] == 2 * N


def test_a_dataset_iterated_directly_counts_its_bytes(blobs):
    ds = StreamingDataset(local=str(blobs), epoch_size=2 * N + 50, shuffle=True)
    ids = [int(s["id"]) for s in ds]  # every sample twice, 50 of them three times
    assert len(ids) == 2 * N + 50 and len(set(ids)) == N
    m = ds.metrics()
    assert m["disk/bytes_read"] == raw_sizes(ids) > 2 * raw_sizes()
    assert m["disk/rows_read"] == 2 * N + 50


def _as_lists(samples: list[dict]) -> dict[str, list]:
    return {"id": [s["id"] for s in samples]}


@pytest.mark.parametrize("how", ["fork", "persistent", "collate_fn"])
def test_the_workers_reads_reach_the_training_process(blobs, how):
    ds = StreamingDataset(local=str(blobs), batch_size=10, shuffle=True)
    options = {"persistent": {"persistent_workers": True},
               "collate_fn": {"collate_fn": _as_lists}}.get(how, {})
    loader = StreamingDataLoader(ds, batch_size=10, num_workers=2, **options)
    for _ in range(2):
        assert sum(len(b["id"]) for b in loader) == N
    m = loader.metrics()
    assert m["disk/bytes_read"] == 2 * raw_sizes() and m["disk/rows_read"] == 2 * N
    # The training process read only the first batch of each pass whose workers it started
    # (streaming/loader/first_batch.py; not through a collate_fn).
    read_here = 10 * {"fork": 2, "persistent": 1}.get(how, 0)
    assert ds.read_tally().rows == read_here
    copy = pickle.loads(pickle.dumps(ds))  # a dataset pickled outside a worker's start
    assert copy.read_tally().rows == read_here  # the workers' counts stay with the loader


LENGTH, CAP = 100, 512  # five samples of 100 tokens fill a pack to 500 of 512


def write_lengths(out: Path, lengths: list[int]) -> Path:
    with MDSWriter(columns={"tokens": "ndarray:int32", "id": "int"}, out=out,
                   size_limit=1 << 14, lengths="tokens") as w:
        for i, size in enumerate(lengths):
            w.write({"id": i, "tokens": np.full(size, i, np.int32)})
    return out


@pytest.fixture(scope="module")
def equal_lengths(tmp_path_factory) -> Path:
    return write_lengths(tmp_path_factory.mktemp("equal"), [LENGTH] * 40)


@pytest.fixture(scope="module")
def mixed_lengths(tmp_path_factory) -> Path:
    sizes = np.random.default_rng(3).integers(1, 300, 200).tolist()
    return write_lengths(tmp_path_factory.mktemp("mixed"), sizes)


@pytest.mark.parametrize("workers", [0, 2])
def test_known_lengths_give_the_known_fill(equal_lengths, workers):
    ds = PackedStreamingDataset(local=str(equal_lengths), packing_length=CAP,
                                packs_per_batch=2, packing_strategy="first_fit", shuffle=True)
    loader = StreamingDataLoader(ds, batch_size=None, num_workers=workers)
    assert sum(len(b["pack_lengths"]) for b in loader) == 8
    m = loader.metrics()
    assert m["packing/packs"] == m["samples"] == 8
    assert m["packing/tokens"] == 40 * LENGTH
    assert m["packing/fill_rate"] == 5 * LENGTH / CAP
    assert m["packing/sequences_per_pack"] == 5
    assert not any(key.startswith("stream/") for key in m)


def _taken(batches) -> tuple[int, int, int]:
    packs = tokens = sequences = 0
    for batch in batches:
        packs += len(batch["pack_lengths"])
        tokens += int(batch["pack_lengths"].sum())
        sequences += len(batch["sample_ids"])
    return packs, tokens, sequences


def _assert_packing_metrics(m: dict[str, float], packs: int, tokens: int, sequences: int) -> None:
    assert (m["packing/packs"], m["packing/tokens"]) == (packs, tokens)
    assert m["packing/fill_rate"] == pytest.approx(tokens / (packs * CAP), rel=1e-12)
    assert m["packing/sequences_per_pack"] == pytest.approx(sequences / packs, rel=1e-12)


def _take(loader, count: int) -> list:
    out = []
    for batch in loader:
        out.append(batch)
        if len(out) == count:
            break
    return out


@pytest.mark.parametrize("workers", [0, 2])
def test_the_fill_is_that_of_the_packs_taken(mixed_lengths, workers):
    def make() -> PackedStreamingDataset:
        return PackedStreamingDataset(local=str(mixed_lengths), packing_length=CAP,
                                      packs_per_batch=3, shuffle=True)

    loader = StreamingDataLoader(make(), batch_size=None, num_workers=workers)
    batches = list(loader) + _take(loader, 4)  # an epoch, then part of the next
    _assert_packing_metrics(loader.metrics(), *_taken(batches))
    resumed = StreamingDataLoader(make(), batch_size=None, num_workers=workers)
    resumed.load_state_dict(loader.state_dict())  # the rest of epoch 1
    rest = list(resumed)
    assert rest and resumed.metrics()["packing/packs"] == _taken(rest)[0]
    _assert_packing_metrics(resumed.metrics(), *_taken(rest))


def test_a_packed_dataset_iterated_directly_counts_its_packs(mixed_lengths):
    ds = PackedStreamingDataset(local=str(mixed_lengths), packing_length=CAP,
                                packs_per_batch=2)
    batches = list(ds)
    it = iter(ds)
    batches += [next(it) for _ in range(3)]
    m = ds.metrics()
    _assert_packing_metrics(m, *_taken(batches))
    assert m["batches"] == len(batches) and m["samples"] == _taken(batches)[0]
    assert m["disk/rows_read"] >= _taken(batches)[2]
    assert not any(key.startswith("stream/") for key in m)
    copy = pickle.loads(pickle.dumps(ds))  # what a DataLoader worker gets: its own count
    assert copy.metrics()["batches"] == 0
